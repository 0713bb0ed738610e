"""The documents stay true to the tree: DESIGN's layout names every package folder and nothing that is
gone, each ``_kernels/`` index names every module of its folder, and README names no one machine's
paths.

Read from the files only (no import of the package), so a new folder or module that nobody documented
fails here, not in a reader's head.
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gglspeedup"
DESIGN = ROOT / "docs" / "DESIGN.md"
README = ROOT / "README.md"


def _layout_lines() -> list[str]:
    """The lines of the code block under DESIGN.md's ``## Layout`` heading."""
    text = DESIGN.read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1].splitlines()


def _layout_entries() -> tuple[set[str], set[str]]:
    """``(folders, files)`` the layout lists as entries: a path at the start of a line indented 0
    (relative to the repository) or 2 (relative to ``gglspeedup/``) characters."""
    folders, files = set(), set()
    for line in _layout_lines():
        match = re.match(r"^( {0,2})(\S+)", line)
        if not match or len(match.group(1)) not in (0, 2):
            continue
        name = match.group(2) if not match.group(1) else "gglspeedup/" + match.group(2)
        (folders if name.endswith("/") else files).add(name)
    return folders, files


def _package_folders() -> list[str]:
    return sorted(
        path.parent.relative_to(ROOT).as_posix() + "/"
        for path in PACKAGE.rglob("__init__.py")
        if "__pycache__" not in path.parts
    )


def test_layout_names_every_package_folder():
    folders, _ = _layout_entries()
    missing = [folder for folder in _package_folders() if folder not in folders]
    assert not missing, f"docs/DESIGN.md's layout has no entry for {missing}: add one line on what each holds"


def test_layout_names_every_top_level_module():
    block = "\n".join(_layout_lines())
    missing = [
        path.name for path in sorted(PACKAGE.glob("*.py")) if not re.search(rf"(?<![\w/]){re.escape(path.name)}", block)
    ]
    assert not missing, f"docs/DESIGN.md's layout does not name the modules {missing} of gglspeedup/"


def test_layout_names_only_paths_that_exist():
    folders, files = _layout_entries()
    assert folders and files, "the layout block was not found under '## Layout' in docs/DESIGN.md"
    gone = sorted(name for name in folders | files if not (ROOT / name).exists())
    assert not gone, f"docs/DESIGN.md's layout names paths that do not exist: {gone}"


KERNEL_FOLDERS = sorted(path.parent for path in PACKAGE.rglob("_kernels/__init__.py"))


@pytest.mark.parametrize("folder", KERNEL_FOLDERS, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_kernels_index_names_every_module(folder):
    index = (folder / "__init__.py").read_text()
    docstring = index.split('"""')[1]
    modules = sorted(path.stem for path in folder.glob("*.py") if path.stem != "__init__")
    missing = [name for name in modules if not re.search(rf"(?<![\w.])\.?{name}\b", docstring)]
    assert not missing, f"{folder.relative_to(ROOT)}/__init__.py's index does not name {missing}"


# A path under one of these roots names one machine's files, not something a reader has.
_MACHINE_PATH = re.compile(r"(?<![\w.~$}-])/(?:work|tmp|home|root|Users|mnt|scratch)/")


def test_readme_names_no_path_of_one_machine():
    hits = [
        f"README.md:{number}: {line.strip()}"
        for number, line in enumerate(README.read_text().splitlines(), 1)
        if _MACHINE_PATH.search(line)
    ]
    assert not hits, "README.md names paths of one machine (name the script that builds them):\n" + "\n".join(hits)


def _anchors(document: pathlib.Path) -> list[str]:
    """What a ``DOC.md, "..."`` reference may name: a heading, or the first words of a bullet."""
    anchors = []
    for line in document.read_text().splitlines():
        match = re.match(r"^(?:#+|- )\s*(.+)", line)
        if match:
            anchors.append(match.group(1).strip("`*").lower())
    return anchors


@pytest.mark.parametrize("document", ["docs/DESIGN.md", "BENCHMARKS.md"])
def test_section_references_name_sections_that_exist(document):
    anchors = _anchors(ROOT / document)
    stem = re.escape(pathlib.Path(document).stem)
    sources = [
        *PACKAGE.rglob("*.py"),
        *(ROOT / "tools").glob("*.py"),
        *ROOT.glob("*.md"),
        *(ROOT / "docs").glob("*.md"),
    ]
    stale = []
    for path in sources:
        text = " ".join(path.read_text().split())  # a reference may wrap
        for name in re.findall(rf"\b{stem}(?:\.md)?,? \"([^\"]+)\"", text):
            if not any(anchor.startswith(name.lower()) for anchor in anchors):
                stale.append(f"{path.relative_to(ROOT)}: {name!r}")
    assert not stale, f"references to {document} sections that do not exist:\n" + "\n".join(sorted(set(stale)))


COMMAND_DOCUMENTS = ["README.md", "CONTRIBUTING.md", "docs/DESIGN.md"]


@pytest.mark.parametrize("document", COMMAND_DOCUMENTS)
def test_documented_commands_exist(document):
    """Every ``python -m gglspeedup...`` module, ``bench`` command and demo / script / tool path a
    document tells a reader to run is still there (each was also run with ``--help`` by hand)."""
    import importlib.util

    from gglspeedup.bench import COMMANDS

    text = (ROOT / document).read_text()
    missing = []
    for module in set(re.findall(r"python -m (gglspeedup[\w.]*)", text)):
        if importlib.util.find_spec(module) is None:
            missing.append(f"python -m {module}")
    for command in set(re.findall(r"python -m gglspeedup\.bench ([a-z][\w-]*)", text)):
        if command not in COMMANDS:
            missing.append(f"python -m gglspeedup.bench {command}")
    for path in set(re.findall(r"(?<![\w/.-])((?:demos|scripts|tools)/\w[\w.-]*\.(?:py|sh))\b", text)):
        if not (ROOT / path).is_file():
            missing.append(path)
    assert not missing, f"{document} tells readers to run what no longer exists: {sorted(missing)}"
