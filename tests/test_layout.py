"""The package's shape: no import circles, no reaching into another package's private names.

Read from the source (``ast``), so it checks every module, imported or not, without running any.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gglspeedup"


def _modules() -> dict[str, pathlib.Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _package_of(module: str) -> str:
    return module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]


def _imports(module: str):
    """``(target, top_level)`` for every import of a ``gglspeedup`` name in ``module``; ``target``
    is ``package.module`` or ``package.module.name``."""
    tree = ast.parse(MODULES[module].read_text())
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _package_of(module).split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "gglspeedup":
                continue
            for alias in node.names:
                yield f"{source}.{alias.name}", id(node) in top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gglspeedup":
                    yield alias.name, id(node) in top


def _module_of(target: str) -> str | None:
    """The module a target names or lives in (``a.b.name`` -> ``a.b``)."""
    while target and target not in MODULES:
        target = target.rpartition(".")[0]
    return target or None


def _cycles(include_lazy: bool) -> list[list[str]]:
    edges = {
        module: sorted({_module_of(t) for t, top in _imports(module) if (top or include_lazy) and _module_of(t)})
        for module in MODULES
    }
    state, stack, found = {}, [], []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in edges[module]:
            if target == module:
                continue
            if state.get(target) == "open":
                found.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in MODULES:
        if module not in state:
            visit(module)
    return found


@pytest.mark.parametrize("include_lazy", [False, True], ids=["module-level", "with-function-level"])
def test_no_import_circle(include_lazy):
    assert _cycles(include_lazy) == []


def _is_private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _private_reach(module: str, target: str) -> bool:
    """Whether ``module`` imports a private name of a package it does not belong to.

    Inside its own package (and that package's subpackages) a module may use anything. Outside
    it, the path below the nearest common package must be public, except that a private module
    directly in a common ancestor package (``gglspeedup._config``, ``gglspeedup._splitmix``) is
    that ancestor's shared internals, open to all its subpackages.
    """
    package = _package_of(module).split(".")
    parts = target.split(".")
    if parts[: len(package)] == package:
        return False
    common = 0
    while common < min(len(package), len(parts)) and package[common] == parts[common]:
        common += 1
    rest = parts[common:]
    if not rest:  # the ancestor package itself (``import gglspeedup``)
        return False
    first = ".".join(parts[: common + 1])
    ancestor_module = first in MODULES and MODULES[first].name != "__init__.py"
    return (_is_private(rest[0]) and not ancestor_module) or any(_is_private(p) for p in rest[1:])


def test_no_module_imports_a_private_name_of_another_package():
    reaches = [
        f"{module} imports {target}"
        for module in MODULES
        for target, _ in _imports(module)
        if _private_reach(module, target)
    ]
    assert reaches == []


def test_the_checks_see_what_they_should():
    # A cross-package private import and a circle, checked on the rules themselves.
    assert _private_reach("gglspeedup.multigpu.feature", "gglspeedup.feature._inputs.as_table")
    assert _private_reach("gglspeedup.bench.gather", "gglspeedup.feature._kernels.gather.copy_contiguous")
    assert not _private_reach("gglspeedup.feature.store", "gglspeedup.feature._tiers.HostTier")
    assert not _private_reach("gglspeedup.loader", "gglspeedup._pool.BufferPool")
    assert _private_reach("gglspeedup.feature.store", "gglspeedup._pool._GROWTH")
    assert len(MODULES) > 40 and "gglspeedup.sampling._kernels.cpu" in MODULES


def test_modules_stay_small():
    # STYLE.md: keep modules under ~400 lines; split by role past that.
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > 450}
    assert long == {}


# Numba's thread count is switched in one place (gglspeedup._parallel's regions, with the threshold
# policy); the interrupt's helper thread copies its caller's count and a loader's producer thread
# takes the user's cap, neither a policy of its own; the benchmarks set it as a user does (--threads).
_THREAD_SWITCHERS = {"gglspeedup._parallel", "gglspeedup._interrupt", "gglspeedup.loader._prefetch"}
_USERS = ("gglspeedup.bench", "gglspeedup.examples")


def test_numba_threads_are_switched_only_by_the_parallel_module():
    switching = sorted(
        module
        for module, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr == "set_num_threads"
        and isinstance(node.value, ast.Name)
        and node.value.id == "numba"
        and module not in _THREAD_SWITCHERS
        and not module.startswith(_USERS)
    )
    assert switching == []


# The sampling drivers speak one written contract (gglspeedup/sampling/drivers.py): every class
# named *Driver under gglspeedup/sampling has sample(seeds, fanouts, key, options=None), the
# switches of a call (hop rule, disjoint stride, tree times) being fields of its options record,
# and no second entry point with arguments of its own (sample_all / sample_trees with plan, span,
# type_base as they once were).
_DRIVER_SAMPLE = ["self", "seeds", "fanouts", "key", "options"]


def _driver_classes():
    for module, path in MODULES.items():
        if module.startswith("gglspeedup.sampling"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ClassDef) and node.name.endswith("Driver"):
                    yield module, node


def test_every_sampling_driver_has_the_contract_signature():
    found, wrong = [], []
    for module, cls in _driver_classes():
        methods = {node.name: node for node in cls.body if isinstance(node, ast.FunctionDef)}
        found.append(cls.name)
        sample = methods.get("sample")
        arguments = None if sample is None else [a.arg for a in sample.args.args + sample.args.kwonlyargs]
        if arguments != _DRIVER_SAMPLE or {"sample_all", "sample_trees"} & set(methods):
            wrong.append(f"{module}.{cls.name}: sample{arguments}, methods {sorted(methods)}")
    assert {"CPUDriver", "CUDADriver", "TypedCPUDriver", "TypedCUDADriver"} <= set(found)
    assert wrong == []


def test_link_hooks_read_no_private_attribute_of_another_object():
    # The link steps take a sampler's public pieces (driver, fanouts, options, timeline, ...), not
    # its private methods (once _sample_trees, _tree_times, _driver, _run).
    reads = [
        f"{module}:{node.lineno} .{node.attr}"
        for module in (
            "gglspeedup.sampling.links",
            "gglspeedup.sampling.link_checks",
            "gglspeedup.sampling.hetero_links",
        )
        for node in ast.walk(ast.parse(MODULES[module].read_text()))
        if isinstance(node, ast.Attribute)
        and _is_private(node.attr)
        and node.attr not in ("_replace", "_fields", "_asdict", "_make")  # named tuples' public methods
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert reads == []


def test_each_attention_room_keeps_its_kernels():
    # attention/pooling/ and attention/sequence/ each own a _kernels/ that only their own modules import
    rooms = ("gglspeedup.attention.pooling", "gglspeedup.attention.sequence")
    reaches = [
        f"{module} imports {target}"
        for module in MODULES
        for target, _ in _imports(module)
        for room in rooms
        if target.startswith(f"{room}._kernels") and not module.startswith(f"{room}.")
    ]
    assert reaches == []
    assert not any(module.startswith("gglspeedup.attention._kernels") for module in MODULES)  # no third room
