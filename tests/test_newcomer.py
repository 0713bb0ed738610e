"""A fresh clone tried as a new user would (issue 39, "the newcomer's first hour"): the warm-up
compiles what the jobs take, the wrong Python says which environment to use, the demos' help,
plots, files and layers, and README / BENCHMARKS figures that agree with the code."""

import argparse
import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT

# What a process compiled or loaded: every disk-cached gglspeedup kernel's signatures.
SNAPSHOT = """
import gc
from numba.core.dispatcher import Dispatcher

def snapshot():
    kernels = {}
    for obj in gc.get_objects():
        if isinstance(obj, Dispatcher) and type(getattr(obj, "_cache", None)).__name__ not in ("NoneType", "NullCache"):
            name = f"{obj.py_func.__module__}.{obj.py_func.__qualname__}"
            if name.startswith("gglspeedup"):
                kernels.setdefault(name, set()).update(map(str, obj.signatures))
    return kernels

def new_since(before):
    after = snapshot()
    return sorted(f"{name} {sig[:160]}" for name, sigs in after.items() for sig in sigs - before.get(name, set()))
"""


def run_python(code: str, *args, env=None, timeout=1800):
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


# ------------------------------------------------------------------ row 5: warm-up coverage

MAIN_JOB = (
    SNAPSHOT
    + """
import sys
from gglspeedup.warmup import warmup
from gglspeedup.examples import sage_cora
warmup(["sample", "gather"])
before = snapshot()
result = sage_cora.run(["--epochs", "2", "--no-progress", "--threads", "1", "--out", sys.argv[1]])
print("NEW", new_since(before))
print("STEADY", result["steady_epochs"], "LEFT OUT", result["warm_up_epochs"])
"""
)


@pytest.mark.slow
def test_after_warmup_the_main_job_compiles_no_kernel(tmp_path):
    # the main job (scripts/demo.sh) in a fresh process: Cora's 1,433-wide float32 rows gather as
    # 4-byte words, serially and in parallel, which the warm-up did not compile before issue 39
    printed = run_python(MAIN_JOB, str(tmp_path))
    assert "NEW []" in printed, printed
    assert "STEADY [2] LEFT OUT [1]" in printed, printed


LOADERS = (
    SNAPSHOT
    + """
import os, sys, tempfile
import numpy as np
import gglspeedup as gg
from gglspeedup.warmup import PARTS, warmup
warmup([part for part in PARTS if part != "attention"])
graph = gg.datasets.synthetic_powerlaw(20000, 8, seed=0)  # the benchmarks' graphs: no edge ids
x = np.random.default_rng(0).random((graph.num_nodes, 100), dtype=np.float32)
before = snapshot()  # the generator's own kernels are not the loaders'
features = gg.FeatureStore(x, graph=graph)
big = gg.NeighborSampler(graph, [2048])  # 1,024 seeds x 2,048: a long, interruptible hop
for batch in gg.NodeLoader(big, features, np.arange(4096), 1024, prefetch=2, backend=None):
    pass
targets = np.repeat(np.arange(graph.num_nodes), np.diff(graph.indptr))
edges = np.stack([graph.indices[:5000].astype(np.int64), targets[:5000]])
link_sampler = gg.NeighborSampler(graph, [10, 5])
for batch in gg.LinkLoader(link_sampler, features, edges, 1024, negatives="binary", exclude="reverse", backend=None):
    pass
path = os.path.join(sys.argv[1], "x.npy")
np.save(path, np.zeros((graph.num_nodes, 128), np.float16))
disk = gg.FeatureStore.from_npy(path, cache_size="1M", graph=graph)
for batch in gg.NodeLoader(gg.NeighborSampler(graph, [15, 10]), disk, np.arange(8192), 4096, backend=None):
    pass
print("NEW", new_since(before))
"""
)


@pytest.mark.slow
def test_after_warmup_large_batches_loaders_and_tables_on_disk_compile_no_kernel(tmp_path):
    printed = run_python(LOADERS, str(tmp_path))
    assert "NEW []" in printed, printed


def test_warmup_refuses_unknown_parts_and_job_counts():
    for argv in (["--parts", "sample,everything"], ["--jobs", "0"]):
        done = subprocess.run(
            [sys.executable, "-m", "gglspeedup", "warmup", *argv], capture_output=True, text=True, cwd=ROOT, timeout=120
        )
        assert done.returncode == 2 and ("parts must be some of" in done.stderr or "--jobs must be" in done.stderr)


def test_an_epoch_that_compiled_a_kernel_is_left_out_of_the_throughput(capsys):
    from numba import njit

    from gglspeedup.examples.loop import EpochTimer, History, report

    class Loader:
        def stats(self, reset=False):
            return {"sample_s": 0.0, "gather_s": 0.0, "wait_s": 0.0, "seeds": 100, "edges": 1000}

    @njit
    def fresh_kernel(value):  # compiled on its first call, inside the second epoch
        return value + 1

    history = History()
    for epoch in (1, 2, 3, 4):
        with EpochTimer(Loader()) as timer:
            if epoch == 2:
                fresh_kernel(1)
        history.add(epoch, 1.0, 0.5, 0.5, timer)
    assert [row["kernels"] > 0 for row in history.rows] == [False, True, False, False]
    totals = history.totals()
    assert totals["steady_epochs"] == [3, 4] and totals["warm_up_epochs"] == [1, 2] and totals["seeds"] == 200
    report({"test_acc": 0.5, "best_epoch": 1, "best_val_acc": 0.5, **totals}, history, argparse.Namespace(out=None),
           name="x.png", title="")  # fmt: skip
    printed = capsys.readouterr().out
    assert "first epoch" in printed and "not counted either: epoch 2 (" in printed and "Numba kernels too" in printed
    assert not any(line.startswith("epoch") for line in printed.splitlines())  # the per-epoch lines' prefix
    assert "throughput over epochs 3-4" in printed


# ------------------------------------------------------------------ row 6: the wrong Python

WITHOUT = """
import runpy, sys
sys.modules[sys.argv[1]] = None  # as in a Python that does not have it: import raises ModuleNotFoundError
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "missing, command",
    [
        ("numba", ["gglspeedup", "warmup"]),
        ("numba", ["gglspeedup.demo", "--epochs", "1", "--no-progress"]),
        ("numba", ["gglspeedup.bench", "sample", "--graph", "powerlaw:100:4", "--peers", "numpy"]),
        ("numpy", ["gglspeedup", "warmup"]),
    ],
    ids=["warmup", "demo", "bench", "numpy"],
)
def test_a_python_without_the_core_dependencies_is_told_which_environment_to_use(missing, command):
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT, missing, *command], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode != 0
    assert f"gglspeedup needs {missing}" in done.stderr, done.stderr[-2000:]
    assert "source .venv/bin/activate" in done.stderr and "pip install -c constraints.txt -e ." in done.stderr
    if missing == "numba":  # printed as a message, not a traceback
        assert "Traceback" not in done.stderr, done.stderr[-2000:]


def test_the_main_job_without_torch_points_to_the_environment_too():
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT, "torch", "gglspeedup.demo", "--epochs", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 1 and "source .venv/bin/activate" in done.stderr, done.stderr[-2000:]


def test_the_readme_says_to_activate_the_environment_after_the_two_commands():
    readme = open(os.path.join(ROOT, "README.md")).read()
    quick_start = readme[readme.index("## Quick start") : readme.index("## What to expect")]
    assert "source .venv/bin/activate" in quick_start and "python -m gglspeedup warmup" in quick_start


# ------------------------------------------------------------------ row 8: the demos' details


def _out_action(parser):
    return next(action for action in parser._actions if action.dest == "out")


def test_the_out_option_help_states_the_default_the_demo_uses():
    from gglspeedup.examples import cli, link_cora, link_wordnet

    main_job = subprocess.run(
        [sys.executable, "-m", "gglspeedup.demo", "--help"], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert "(default: the current folder)" in " ".join(main_job.stdout.split())
    for parser in (link_cora.build_parser(), link_wordnet.build_parser()):
        action = _out_action(parser)
        assert action.default == "." and "(default: the current folder)" in action.help
    action = _out_action(cli.build_parser("x"))
    assert action.default is None and "(default: no plot)" in action.help


def test_a_one_epoch_history_plot_marks_its_point():
    pytest.importorskip("matplotlib")
    from gglspeedup.examples.loop import History, history_figure

    history = History()
    history.rows.append({"epoch": 1, "loss": 1.2, "train_acc": 0.4, "val_acc": 0.3})
    figure = history_figure(history, "one epoch", curves=(("train", "train_acc"), ("val", "val_acc")))
    lines = [line for axis in figure.axes for line in axis.get_lines()]
    assert len(lines) == 3 and all(line.get_marker() not in (None, "", "None") for line in lines)


def test_the_temporal_demo_titles_say_respected_and_ignored():
    source = open(os.path.join(ROOT, "gglspeedup", "examples", "temporal_links.py")).read()
    assert "respectd" not in source
    from gglspeedup.examples import temporal_links

    assert [f"time {temporal_links._PAST[mode]}" for mode in temporal_links.MODES] == ["time respected", "time ignored"]


def test_the_attention_pooling_demo_help_is_a_whole_sentence():
    done = subprocess.run(
        [sys.executable, os.path.join("demos", "attention_pooling_tu.py"), "--help"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    text = " ".join(done.stdout.split())
    assert done.returncode == 0
    assert "readout (softmax, sparsemax, gfusedmax), 10-fold cross-validation, in plain PyTorch." in text


ATTENTION_TIMING = (
    SNAPSHOT
    + """
import sys
from gglspeedup.examples import tu_pooling
timed = tu_pooling.run_fold
def run_fold(*args, **kwargs):
    before = snapshot()
    out = timed(*args, **kwargs)
    print("COMPILED WHILE TIMED", new_since(before))
    return out
tu_pooling.run_fold = run_fold
rows = tu_pooling.run(["--datasets", "enzymes", "--mappings", "softmax,gfusedmax", "--folds", "2", "--max-folds", "1",
                       "--epochs", "1", "--no-progress", "--out", sys.argv[1]])
print("WARMUP", [row["warmup_s"] > 0 for row in rows])
"""
)


@pytest.mark.slow
def test_the_attention_pooling_table_times_no_compilation(tmp_path):
    pytest.importorskip("torch")
    printed = run_python(ATTENTION_TIMING, str(tmp_path))
    assert printed.count("COMPILED WHILE TIMED []") == 2, printed
    assert "WARMUP [True, True]" in printed


def test_every_file_a_demo_writes_by_default_is_ignored_by_git():
    names = ["gglspeedup-demo.png", "gglspeedup-link-demo.png", "gglspeedup-link-wordnet.png"]
    names += ["gglspeedup-rgcn-typed-0.png", "gglspeedup-temporal-links-respect.png", "tu_pooling.png"]
    names += ["tu_pooling.json", "train_sage_torch.png", "train_gat_torch.png"]
    done = subprocess.run(["git", "check-ignore", *names], capture_output=True, text=True, cwd=ROOT)
    assert sorted(done.stdout.split()) == sorted(names)


def test_the_main_job_uses_its_own_layers_whether_or_not_pyg_is_installed(tmp_path, capsys):
    pytest.importorskip("torch")
    from gglspeedup.examples import sage_cora
    from gglspeedup.examples.torch_models import SAGE, SAGEConv, conv_classes

    assert conv_classes()[:2] != (None, None) and conv_classes()[0] is SAGEConv and conv_classes()[2] == "plain torch"
    assert isinstance(SAGE(4, 8, 2).convs[0], SAGEConv)
    argv = ["--epochs", "1", "--no-progress", "--threads", "1", "--out", str(tmp_path), "--fanouts", "3,3"]
    result = sage_cora.run(argv)
    assert result["layers"] == "plain torch" and "layers: plain torch" in capsys.readouterr().out
    pytest.importorskip("torch_geometric")
    assert sage_cora.run([*argv, "--pyg-layers"])["layers"] == "torch_geometric"


# ------------------------------------------------------------------ row 9: figures that hold


def test_the_temporal_split_counts_written_in_benchmarks_are_the_ones_the_split_makes():
    from gglspeedup.datasets import chronological_split

    split = chronological_split(59835, 0.15, 0.15)
    counts = " / ".join(f"{len(split[part]):,}" for part in ("train", "val", "test"))
    assert counts == "41,884 / 8,976 / 8,975"
    benchmarks = " ".join(open(os.path.join(ROOT, "BENCHMARKS.md")).read().split())
    assert f"split by time {counts}" in benchmarks


def test_the_readme_names_exactly_the_demos_that_take_the_dataset_grammar():
    readme = " ".join(open(os.path.join(ROOT, "README.md")).read().split())
    assert "Every demo takes" not in readme
    sentence = re.search(r"take `--dataset cora\|citeseer\|powerlaw:N:D\|ogb:PATH\|reddit:PATH`[^.]*\.", readme)
    start = readme.rfind(". ", 0, sentence.start()) if sentence else -1
    named = re.findall(r"`([a-z_]+)\.py`", readme[start : sentence.end()]) if sentence else []
    assert len(named) >= 5, named
    for name in named:
        parser_help = subprocess.run(
            [sys.executable, os.path.join("demos", f"{name}.py"), "--help"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        ).stdout
        assert "cora | citeseer | powerlaw:N:D | ogb:PATH | reddit:PATH" in " ".join(parser_help.split()), name


def test_the_readme_states_the_test_commands_steps_and_the_warmups_measured_time():
    readme = " ".join(open(os.path.join(ROOT, "README.md")).read().split())
    assert "about 8 s" not in readme
    tests = readme[readme.index("Tests: set up") : readme.index("bash scripts/test.sh")]  # the Quick start's
    assert "ruff check" in tests and "--doctest-modules" in tests and "NUMBA_ENABLE_CUDASIM=1" in tests
    assert re.search(r"about \d+ minutes", tests)
    first_call = readme[readme.index("**First call compiles.**") :][:1200]
    assert re.search(r"\d+ s of CPU", first_call) and "python -m gglspeedup warmup" in first_call
