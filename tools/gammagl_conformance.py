"""GammaGL's own loader tests and GraphSAGE example, on GammaGL's loaders and on gglspeedup.gammagl's.

Runs in the GammaGL environment (``bash scripts/peer_env_gammagl.sh`` builds it), in two modes,
each in a fresh process:

- ``control``: GammaGL 0.5.0's ``NeighborSampler``, ``NodeNeighborLoader``, ``LinkNeighborLoader``;
- ``ours``: the same names in ``gammagl.loader`` (and its submodules) replaced by
  ``gglspeedup.gammagl``'s before any test imports them;
- ``cluster`` (``--modes control,ours,cluster``; needs Ray and pymetis, ``GAMMAGL_SERVICE=1``):
  ``ours``, each loader sampling through a service cluster of 2 Ray servers over the graph it is
  given, Ray in a private network namespace (``tools/gammagl_service.py``'s ``swap_in_cluster``).

What runs, unmodified, from GammaGL's sources at the installed version's tag (v0.5.0):

1. ``tests/loader/test_neighbor_sampler.py`` and ``test_node_neighbor_loader.py``: the module (its
   own module-level calls) and every ``test_*`` function; ``test_link_neighbor_loader.py`` has no
   ``test_*`` function, so its ``homogeneous_link_neighbor_loader(directed, neg_sampling_ratio)`` is
   called for directed in (True, False) x ratio in (0.0, 1.0). The tests draw random graphs with
   NumPy's global RNG: each case runs ``--repeats`` times with ``np.random.seed(r)``, the same seeds in
   both modes, and the counts are of passed runs.
2. ``examples/graphsage/reddit_sage_trainer.py``'s ``main`` (its training loop, ``TrainOneStep``,
   and ``net.inference`` over ``sample_lists=[-1]`` loaders) on Cora instead of Reddit, for
   ``--seeds`` model seeds; final validation and test accuracy per mode.

The environment the tests get, the same in both modes: ``HOME`` is a temporary folder whose
``~/.ggl`` points GammaGL's dataset root at raw Planetoid files written from gglspeedup's bundled
Cora (no network), and TensorLayerX's torch backend accepts an int shape in ``tlx.ones``,
``tlx.zeros``, ``tlx.reshape`` and a lone ``tlx.arange(n)``, as TensorLayerX documents, and NumPy
arrays in ``tlx.transpose`` / ``tlx.all``, as its TensorFlow backend does (the link test uses both;
TensorLayerX 0.5.8 on torch rejects them, so without this both modes fail there before or after
any loader runs: see :func:`lenient_tensorlayerx`).

    /work/peers/gammagl/bin/python tools/gammagl_conformance.py [--repeats 5] [--seeds 3] [--json out.json]
    /work/peers/gammagl/bin/python tools/gammagl_conformance.py --modes ours,cluster  # GammaGL's tests on a cluster
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import io
import json
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "v0.5.0"
MODES = ("control", "ours")
TEST_FILES = ("test_neighbor_sampler.py", "test_node_neighbor_loader.py", "test_link_neighbor_loader.py")
LINK_CASES = [(directed, ratio) for directed in (True, False) for ratio in (0.0, 1.0)]


def default_source() -> str:
    return os.environ.get("GAMMAGL_SRC") or os.path.join(sys.prefix, "src", f"GammaGL-{TAG}")


# ---------------------------------------------------------------------------------- environment
def write_planetoid_cora(root: str) -> None:
    """Raw Planetoid files (``ind.cora.*``) under ``root/cora/raw`` from the bundled Cora, laid out
    so GammaGL's reader rebuilds the same graph, features, labels and public split."""
    import scipy.sparse as sp

    from gglspeedup import datasets

    graph, x, y, split = datasets.load("cora")
    train, val, test = (np.asarray(split[k]) for k in ("train", "val", "test"))
    num_nodes, num_classes = len(y), int(y.max()) + 1
    if not (np.array_equal(train, np.arange(len(train))) and np.array_equal(val, len(train) + np.arange(len(val)))):
        raise SystemExit("the bundled Cora split is not Planetoid's public layout")
    onehot = np.eye(num_classes, dtype=np.int64)[np.asarray(y, dtype=np.int64)]
    rest = np.setdiff1d(np.arange(num_nodes), test)  # allx: every node outside the test set, in order
    if not np.array_equal(rest, np.arange(len(rest))):
        raise SystemExit("the bundled Cora test nodes are not the last ids")
    features = sp.csr_matrix(np.asarray(x, dtype=np.float32))
    edge_index = np.stack(graph_edges(graph))
    adjacency = {int(v): [] for v in range(num_nodes)}
    for source, target in edge_index.T.tolist():
        adjacency[source].append(target)
    files = {
        "x": features[train],
        "tx": features[test],
        "allx": features[rest],
        "y": onehot[train],
        "ty": onehot[test],
        "ally": onehot[rest],
        "graph": adjacency,
    }
    raw = os.path.join(root, "cora", "raw")
    os.makedirs(raw, exist_ok=True)
    for name, value in files.items():
        with open(os.path.join(raw, f"ind.cora.{name}"), "wb") as handle:
            pickle.dump(value, handle)
    with open(os.path.join(raw, "ind.cora.test.index"), "w") as handle:
        handle.write("\n".join(str(int(v)) for v in test) + "\n")


def graph_edges(graph):
    """``(source, target)`` arrays of a CSRGraph built from an edge index (rows = targets)."""
    targets = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
    return np.asarray(graph.indices, dtype=np.int64), targets


def make_home(path: str) -> None:
    ggl = os.path.join(path, ".ggl")
    datasets_root = os.path.join(ggl, "datasets")
    os.makedirs(datasets_root, exist_ok=True)
    with open(os.path.join(ggl, "ggl_config.json"), "w") as handle:
        json.dump({"tlx_backend": "torch", "dataset_root": datasets_root}, handle)
    write_planetoid_cora(datasets_root)


def lenient_tensorlayerx(tlx) -> None:
    """What the link test expects of TensorLayerX and its torch backend refuses: the documented int
    shapes (``tlx.ones(5)``, ``tlx.arange(5)``, ``tlx.reshape(t, -1)``), and NumPy arrays in
    ``tlx.transpose`` / ``tlx.all`` (the TensorFlow backend takes them; the test converts its batch
    to NumPy before calling both)."""

    def as_shape(shape):
        return (int(shape),) if isinstance(shape, (int, np.integer)) else shape

    ones, zeros, reshape, arange = tlx.ones, tlx.zeros, tlx.reshape, tlx.arange
    tlx.ones = lambda shape, dtype=None, device=None: ones(as_shape(shape), dtype=dtype, device=device)
    tlx.zeros = lambda shape, dtype=None, device=None: zeros(as_shape(shape), dtype=dtype, device=device)
    tlx.reshape = lambda tensor, shape: reshape(tensor, as_shape(shape))

    def arange_(start=0, limit=None, delta=1, dtype=None):
        if limit is None:
            start, limit = 0, start
        return arange(start=start, limit=limit, delta=delta, dtype=dtype)

    tlx.arange = arange_
    transpose, all_ = tlx.transpose, tlx.all

    def tensor(value):
        return tlx.convert_to_tensor(value) if isinstance(value, np.ndarray) else value

    tlx.transpose = lambda a, perm=None, conjugate=False: transpose(tensor(a), perm=perm, conjugate=conjugate)
    tlx.all = lambda a, axis=None, keepdims=False: all_(tensor(a), axis=axis, keepdims=keepdims)


def swap_in_ours() -> None:
    """Replace GammaGL's loader classes by gglspeedup's wherever GammaGL's code or tests import them."""
    import gammagl.loader
    import gammagl.loader.link_neighbor_loader
    import gammagl.loader.neighbor_sampler
    import gammagl.loader.node_neighbor_loader

    from gglspeedup import gammagl as ours

    for module, name in (
        (gammagl.loader, "NeighborSampler"),
        (gammagl.loader, "NodeNeighborLoader"),
        (gammagl.loader, "LinkNeighborLoader"),
        (gammagl.loader.neighbor_sampler, "NeighborSampler"),
        (gammagl.loader.node_neighbor_loader, "NodeNeighborLoader"),
        (gammagl.loader.link_neighbor_loader, "LinkNeighborLoader"),
    ):
        setattr(module, name, getattr(ours, name))


# ---------------------------------------------------------------------------------- cases
def load_file(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # runs the file's own module-level calls
    return module


def list_cases(source: str) -> list:
    """``(label, filename, function, arguments)`` of every case, read from the files without
    importing them: each file's import (its own module-level calls), its ``test_*`` functions, and
    the link file's helper over :data:`LINK_CASES`."""
    cases = []
    for filename in TEST_FILES:
        with open(os.path.join(source, "tests", "loader", filename)) as handle:
            tree = ast.parse(handle.read())
        functions = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
        cases.append((f"{filename} (module, its own calls)", filename, None, ()))
        cases += [(f"{filename}::{name}", filename, name, ()) for name in sorted(functions) if name.startswith("test_")]
        if "homogeneous_link_neighbor_loader" in functions:
            for arguments in LINK_CASES:
                label = f"{filename}::homogeneous_link_neighbor_loader{arguments}"
                cases.append((label, filename, "homogeneous_link_neighbor_loader", arguments))
    return cases


def case_worker(source: str, case: tuple, first: int, repeats: int) -> None:
    """Run one case for repeats ``first .. repeats - 1``, one JSON line per run on stdout (the
    parent restarts this after a crash, from the run after the one that crashed)."""
    _, filename, function, arguments = case
    path, name = os.path.join(source, "tests", "loader", filename), f"gammagl_tests_{filename[:-3]}"
    report = os.fdopen(os.dup(1), "w")
    module = None
    for repeat in range(first, repeats):
        np.random.seed(repeat)  # noqa: NPY002 - the tests draw from NumPy's global RNG
        error_line = None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                if function is None or module is None:
                    module = load_file(path, name)
                if function is not None:
                    getattr(module, function)(*arguments)
        except Exception as error:  # a failing assertion or an error: counted, its first line kept
            error_line = traceback.format_exception_only(type(error), error)[-1].strip()[:200]
        report.write(json.dumps({"repeat": repeat, "error": error_line}) + "\n")
        report.flush()


def run_case(mode_command: list, env: dict, case: tuple, repeats: int) -> dict:
    passed, errors, repeat = 0, {}, 0
    while repeat < repeats:
        command = mode_command + ["--case", json.dumps(case), "--first", str(repeat)]
        done = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in done.stdout.splitlines():
            if not line.startswith('{"repeat"'):
                continue
            record = json.loads(line)
            repeat = record["repeat"] + 1
            if record["error"] is None:
                passed += 1
            else:
                errors[record["error"]] = errors.get(record["error"], 0) + 1
        if repeat < repeats and done.returncode != 0:  # the run after the last report crashed
            reason = f"crashed (signal {-done.returncode})" if done.returncode < 0 else f"exit {done.returncode}"
            errors[reason] = errors.get(reason, 0) + 1
            repeat += 1
    print(f"  {case[0]:70s} {passed}/{repeats}" + (f"  {next(iter(errors))}" if errors else ""), flush=True)
    return {"case": case[0], "passed": passed, "runs": repeats, "errors": errors}


def sage_example(source: str, seeds: int, epochs: int) -> list:
    """GammaGL's Reddit GraphSAGE example's main() on Cora, per model seed: final val / test accuracy."""
    import tensorlayerx as tlx
    from gammagl.datasets import Planetoid

    example = load_file(os.path.join(source, "examples", "graphsage", "reddit_sage_trainer.py"), "gammagl_sage_example")
    import gammagl.loader.neighbor_sampler

    example.NeighborSampler = gammagl.loader.neighbor_sampler.NeighborSampler  # ours after swap_in_ours()
    example.Reddit = lambda path: Planetoid(name="cora")
    runs = []
    for seed in range(seeds):
        tlx.set_seed(seed)
        np.random.seed(seed)  # noqa: NPY002 - likewise the example
        args = argparse.Namespace(
            lr=0.0005, n_epoch=epochs, hidden_dim=256, drop_rate=0.8, num_layers=2, l2_coef=0.0,
            dataset="cora", dataset_path="", gpu=-1,
        )  # fmt: skip
        output = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(io.StringIO()):
            example.main(args)
        seconds = time.perf_counter() - start
        found = re.findall(r"val acc: ([0-9.]+) \|\| test acc([0-9.]+)", output.getvalue())
        val, test = (float(v) for v in found[-1])
        runs.append({"seed": seed, "val": val, "test": test, "seconds": seconds, "epochs": len(found)})
        print(f"  GraphSAGE example, seed {seed}: val {val:.3f}  test {test:.3f}  ({seconds:.1f} s)", flush=True)
    return runs


def prepare(mode: str) -> None:
    """The same environment in both modes, then GammaGL's classes swapped for ours in ``ours``."""
    import tensorlayerx as tlx

    from gglspeedup.gammagl import tensorlayerx_problem

    problem = tensorlayerx_problem()
    if problem:
        raise SystemExit(problem)
    lenient_tensorlayerx(tlx)
    if mode == "ours":
        swap_in_ours()
    elif mode == "cluster":  # ours, sampling through Ray servers (tools/gammagl_service.py)
        from gammagl_service import swap_in_cluster

        swap_in_cluster()


# ---------------------------------------------------------------------------------- driver
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--gammagl-src", default=default_source(), help=f"GammaGL's sources at {TAG} (tests/, examples/)"
    )
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--repeats", type=int, default=5, help="runs of each test case (NumPy seeds 0..r-1)")
    parser.add_argument("--seeds", type=int, default=3, help="model seeds of the GraphSAGE example (0: skip it)")
    parser.add_argument("--epochs", type=int, default=50, help="epochs of the GraphSAGE example (its default: 50)")
    parser.add_argument("--json", default=None, help="write both modes' results here")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--case", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--first", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        prepare(args.worker)
        if args.case:
            case_worker(args.gammagl_src, tuple(json.loads(args.case)), args.first, args.repeats)
        else:
            with open(args.out, "w") as handle:
                json.dump(sage_example(args.gammagl_src, args.seeds, args.epochs), handle)
        return 0
    missing = [name for name in ("tensorlayerx", "gammagl") if importlib.util.find_spec(name) is None]
    if missing:  # found, not imported (importing GammaGL writes ~/.ggl)
        print(
            f"skipped: {' and '.join(missing)} not installed here; "
            "bash scripts/peer_env_gammagl.sh builds its environment"
        )
        return 0
    if not os.path.isdir(os.path.join(args.gammagl_src, "tests", "loader")):
        raise SystemExit(
            f"no GammaGL sources at {args.gammagl_src}; run scripts/peer_env_gammagl.sh or pass --gammagl-src"
        )
    results = {}
    cases = list_cases(args.gammagl_src)
    with tempfile.TemporaryDirectory(prefix="gammagl-conformance-") as home:
        make_home(home)
        env = dict(os.environ, HOME=home, TL_BACKEND="torch", TF_CPP_MIN_LOG_LEVEL="2")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, env.get("PYTHONPATH")]))
        for mode in args.modes.split(","):
            command = [sys.executable, os.path.abspath(__file__), "--worker", mode, "--gammagl-src", args.gammagl_src]
            command += ["--repeats", str(args.repeats), "--seeds", str(args.seeds), "--epochs", str(args.epochs)]
            print(f"[{mode}]", flush=True)
            tests = [run_case(command, env, case, args.repeats) for case in cases]
            sage = []
            if args.seeds:
                out = os.path.join(home, f"{mode}-sage.json")
                done = subprocess.run(command + ["--out", out], env=env, stdout=subprocess.PIPE, text=True)
                print("\n".join(line for line in done.stdout.splitlines() if "GraphSAGE example" in line), flush=True)
                if done.returncode != 0:
                    raise SystemExit(f"the {mode} GraphSAGE example failed (exit {done.returncode})")
                with open(out) as handle:
                    sage = json.load(handle)
            results[mode] = {"tests": tests, "sage": sage}
    summarize(results)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)
    return 0


def summarize(results: dict) -> None:
    print("\nsummary (passed runs / runs)")
    modes = list(results)
    cases = [case["case"] for case in results[modes[0]]["tests"]]
    print(f"  {'case':70s} " + "  ".join(f"{m:>8s}" for m in modes))
    for case in cases:
        row = []
        for mode in modes:
            match = [c for c in results[mode]["tests"] if c["case"] == case]
            row.append(f"{match[0]['passed']}/{match[0]['runs']}" if match else "-")
        print(f"  {case:70s} " + "  ".join(f"{r:>8s}" for r in row))
    for mode in modes:
        tests = results[mode]["tests"]
        passed, runs = sum(c["passed"] for c in tests), sum(c["runs"] for c in tests)
        sage = results[mode]["sage"]
        line = f"  {mode}: {passed}/{runs} test runs passed"
        if sage:
            val, test = np.mean([r["val"] for r in sage]), np.mean([r["test"] for r in sage])
            line += f"; GraphSAGE example on Cora over {len(sage)} seeds: val {val:.3f}, test {test:.3f}"
        print(line)


if __name__ == "__main__":
    sys.exit(main())
