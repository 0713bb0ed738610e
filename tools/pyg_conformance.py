"""Run PyG's own remote-backend tests against gglspeedup.pyg (a local conformance check, not CI).

PyG's test files are read from a git repository of PyG at a tag (``git archive``), unmodified and
never copied into this project, and run with pytest in one of three modes:

- ``control``: as PyG ships them (PyG's ``MyFeatureStore`` / ``MyGraphStore`` test stores and
  PyG's ``NeighborSampler``, which needs pyg-lib: scripts/peer_env_pyg.sh builds it);
- ``stores``: ``torch_geometric.testing.MyFeatureStore`` / ``MyGraphStore`` replaced by
  subclasses of :class:`gglspeedup.pyg.FeatureStore` / :class:`gglspeedup.pyg.GraphStore`
  (named as PyG's, so ``repr`` checks read the same), under PyG's sampler;
- ``full``: the stores and PyG's ``NeighborSampler`` (wherever PyG's loaders and tests import it,
  PyG's ``BidirectionalNeighborSampler`` included, which composes two of them) replaced by
  :class:`gglspeedup.pyg.NeighborSampler`; PyG's ``onlyNeighborSampler`` gate then counts ours
  as an installed sampler.

The swap is a pytest plugin written next to the extracted files and loaded with ``-p``; it patches
module attributes before the test modules import them. Usage (the peer venv has pyg-lib)::

    python tools/pyg_conformance.py --pyg-git PATH/TO/pytorch_geometric.git --ref 2.8.0.post1 \\
        --python /work/peers/pyg/bin/python --mode full [-- extra pytest args]

In ``full`` mode on a venv without pyg-lib, ``--assume-pyg-lib`` also runs the tests PyG gates on
pyg-lib (``withPackage('pyg_lib')``, the weighted and edge-time flags) against our sampler. It
prints pytest's summary line and the failures and, with ``--json``, writes the per-test outcomes.
The files:
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

__all__ = ["TEST_FILES", "main"]

TEST_FILES = (
    "test/data/test_feature_store.py",
    "test/data/test_graph_store.py",
    "test/data/test_remote_backend_utils.py",
    "test/loader/test_neighbor_loader.py",
    "test/loader/test_link_neighbor_loader.py",
    "test/sampler/test_sampler_neighbor_sampler.py",
)
__doc__ += "\n".join(f"  {name}" for name in TEST_FILES) + "\n"

_PLUGIN = '''
"""Swap PyG's test stores (and sampler) for gglspeedup.pyg's: see tools/pyg_conformance.py."""
import os

MODE = os.environ["GGL_PYG_CONFORMANCE_MODE"]
if MODE in ("stores", "full"):
    import torch_geometric.testing as testing
    from gglspeedup import pyg

    class MyFeatureStore(pyg.FeatureStore):
        pass

    class MyGraphStore(pyg.GraphStore):
        pass

    testing.MyFeatureStore = MyFeatureStore
    testing.MyGraphStore = MyGraphStore
    import torch_geometric.testing.feature_store, torch_geometric.testing.graph_store
    torch_geometric.testing.feature_store.MyFeatureStore = MyFeatureStore
    torch_geometric.testing.graph_store.MyGraphStore = MyGraphStore
if MODE == "full":
    import importlib

    import torch_geometric.testing.decorators as decorators
    from gglspeedup import pyg

    sampler = getattr(pyg, "NeighborSampler", None)
    if sampler is None:  # before gglspeedup.pyg.NeighborSampler existed: PyG's arguments on pyg.Sampler
        class sampler(pyg.Sampler):
            def __init__(self, data, num_neighbors, subgraph_type="directional", replace=False,
                         disjoint=False, temporal_strategy="uniform", time_attr=None, weight_attr=None,
                         is_sorted=False, share_memory=False, directed=True, sample_direction="forward",
                         **kwargs):
                if str(getattr(subgraph_type, "value", subgraph_type)) != "directional" or not directed:
                    raise NotImplementedError(f"subgraph_type={subgraph_type!r}")
                if disjoint or time_attr is not None or weight_attr is not None:
                    raise NotImplementedError("disjoint / time_attr / weight_attr")
                if sample_direction != "forward":
                    raise NotImplementedError(f"sample_direction={sample_direction!r}")
                super().__init__(data, num_neighbors, replace=replace)
    for name in ("torch_geometric.sampler", "torch_geometric.sampler.neighbor_sampler",
                 "torch_geometric.loader.neighbor_loader", "torch_geometric.loader.link_neighbor_loader"):
        module = importlib.import_module(name)
        if hasattr(module, "NeighborSampler"):
            module.NeighborSampler = sampler
    decorators.WITH_PYG_LIB = True  # onlyNeighborSampler: a sampler is installed (ours)
    if os.environ.get("GGL_PYG_ASSUME_PYG_LIB") == "1":  # tests gated on pyg-lib run on our sampler
        import torch_geometric.typing as typing

        has_package = decorators.has_package
        decorators.has_package = lambda name: name == "pyg_lib" or has_package(name)
        typing.WITH_WEIGHTED_NEIGHBOR_SAMPLE = typing.WITH_EDGE_TIME_NEIGHBOR_SAMPLE = True
'''


def extract(pyg_git: str, ref: str, into: Path) -> None:
    """The test files (and PyG's ``test/conftest.py``) of ``ref`` under ``into``."""
    names = ["test/conftest.py", *TEST_FILES]
    archive = subprocess.run(["git", "-C", pyg_git, "archive", ref, *names], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pyg-git", required=True, help="a git repository (or clone) of PyG")
    parser.add_argument("--ref", required=True, help="the tag of the installed torch_geometric's version")
    parser.add_argument("--python", default=sys.executable, help="the interpreter (a venv with torch_geometric)")
    parser.add_argument("--mode", choices=("control", "stores", "full"), default="full")
    parser.add_argument(
        "--assume-pyg-lib",
        action="store_true",
        help="full mode without pyg-lib installed: run the tests PyG gates on pyg-lib (withPackage('pyg_lib'), "
        "weighted / edge-time flags) against our sampler",
    )
    parser.add_argument("--package-root", help="the gglspeedup source tree to import (default: this one)")
    parser.add_argument("--json", help="write {test id: outcome} here")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)

    root = Path(args.package_root or Path(__file__).resolve().parents[1]).resolve()
    with tempfile.TemporaryDirectory(prefix="pyg_conformance_") as tmp:
        tmp = Path(tmp)
        extract(args.pyg_git, args.ref, tmp)
        (tmp / "_ggl_pyg_swap.py").write_text(_PLUGIN)
        report = tmp / "report.xml"
        env = dict(os.environ, GGL_PYG_CONFORMANCE_MODE=args.mode)
        if args.assume_pyg_lib:
            if args.mode != "full":
                parser.error("--assume-pyg-lib needs --mode full (only our sampler can stand in for pyg-lib)")
            env["GGL_PYG_ASSUME_PYG_LIB"] = "1"
        env["PYTHONPATH"] = os.pathsep.join([str(tmp), str(root), env.get("PYTHONPATH", "")])
        command = [
            args.python,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "_ggl_pyg_swap",
            "--rootdir",
            str(tmp),
            f"--junitxml={report}",
            "-o",
            "junit_family=xunit1",
            *[str(tmp / name) for name in TEST_FILES],
            *args.pytest_args,
        ]
        result = subprocess.run(command, cwd=tmp, env=env, capture_output=True, text=True)
        lines = result.stdout.strip().splitlines()
        outcomes = _outcomes(report) if report.exists() else {}
        counts: dict = {}
        for outcome in outcomes.values():
            counts[outcome] = counts.get(outcome, 0) + 1
        print(f"mode={args.mode} ref={args.ref}: {lines[-1] if lines else result.stderr[-2000:]}")
        print("counts:", json.dumps(dict(sorted(counts.items()))))
        for test, outcome in sorted(outcomes.items()):
            if outcome in ("failed", "error"):
                print(f"  {outcome}: {test}")
        if args.json:
            Path(args.json).write_text(json.dumps(outcomes, indent=1, sort_keys=True))
    return 0


_TAGS = (("failure", "failed"), ("error", "error"), ("skipped", "skipped"))


def _outcomes(report: Path) -> dict:
    outcomes = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name')}"
        kinds = {child.tag for child in case}
        outcome = next((word for tag, word in _TAGS if tag in kinds), "passed")
        outcomes[name] = outcome
    return outcomes


if __name__ == "__main__":
    sys.exit(main())
