"""``python -m gglspeedup.bench gather`` runs end to end on a tiny table and reports every column."""

import argparse
import sys
import types

import numpy as np
import pytest

from gglspeedup.bench import gather, main
from gglspeedup.device import as_device

from conftest import assert_rejects


def _args(**overrides):
    parser = argparse.ArgumentParser()
    gather.add_arguments(parser)
    argv = [
        "--rows",
        "3000",
        "--dim",
        "8",
        "--ids",
        "500",
        "--repeats",
        "2",
        "--batch",
        "32",
        "--presample-batches",
        "3",
        "--fanouts",
        "4,3",
    ]
    args = parser.parse_args(argv)
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize("batch_from", ["uniform", "sampler"])
def test_gather_bench_reports_ours_peers_ceiling_and_policies(batch_from, capsys):
    results = gather.run(_args(batch_from=batch_from))
    names = [row["name"] for row in results["gather"]]
    assert {
        "gglspeedup (warm out)",
        "gglspeedup (fresh out)",
        "numpy.take clip (warm out)",
        "parallel contiguous copy",
    } <= set(names)
    rows = {row["name"]: row for row in results["gather"]}
    for row in rows.values():
        assert row["best_gbs"] > 0 and row["best_gbs"] >= row["median_gbs"]
        assert row["paired_vs_ceiling"] > 0 and row["paired_vs_take"] > 0
    # the ceiling is the faster of the two copies: it scores 1, the other at most 1
    copies = [rows["parallel contiguous copy"], rows["parallel contiguous copy (cached stores)"]]
    assert results["ceiling"] in {"parallel contiguous copy", "parallel contiguous copy (cached stores)"}
    assert rows[results["ceiling"]]["vs_ceiling"] == pytest.approx(1.0)
    assert max(row["vs_ceiling"] for row in copies) == pytest.approx(1.0)
    assert all(row["paired_vs_ceiling"] <= 1.0 + 1e-9 for row in copies)
    assert rows["numpy.take clip (warm out)"]["paired_vs_take"] == pytest.approx(1.0)
    # fresh outputs are compared with numpy.take's fresh output, warm ones with its warm output
    assert rows[gather.FRESH_TAKE]["paired_vs_take"] == pytest.approx(1.0)
    fresh_take = rows[gather.FRESH_TAKE]["best_gbs"]
    assert rows["gglspeedup (fresh out)"]["vs_take"] == pytest.approx(
        rows["gglspeedup (fresh out)"]["best_gbs"] / fresh_take
    )
    assert rows[gather.RANDOM_READ]["vs_random_read"] == pytest.approx(1.0)  # the random-row ceiling
    assert all(row["vs_random_read"] > 0 for row in rows.values())
    if batch_from == "sampler":
        rates = results["policies"]
        assert [row["cache"] for row in rates] == [0.0, 0.1, 0.2, 0.5, 1.0]
        assert rates[0]["degree"] == 0.0 and rates[-1]["presample"] == pytest.approx(1.0)
        assert all(0.0 <= row["degree"] <= 1.0 for row in rates)
    assert "numpy.take" in capsys.readouterr().out


def test_gather_bench_draws_seeds_from_a_training_fraction():
    results = gather.run(_args(batch_from="sampler", train_fraction=0.1))
    assert results["train_nodes"] == 300
    rates = results["policies"]
    assert rates[0]["presample"] == 0.0 and rates[-1]["presample"] == pytest.approx(1.0)
    assert all(0.0 <= row["degree"] <= 1.0 and 0.0 <= row["presample"] <= 1.0 for row in rates)
    train = gather._training_nodes(3000, 0.1, 0)
    assert len(train) == 300 and len(np.unique(train)) == 300
    assert gather._training_nodes(3000, 1.0, 0) is None


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"cache": "a,b"}, "--cache"),
        ({"cache": "-0.1"}, "--cache"),
        ({"cache": "0,2"}, r"--cache must list fractions of the table in \[0, 1\], got '0,2'"),
        ({"cache": "nan"}, r"--cache must list fractions of the table in \[0, 1\]"),
        ({"train_fraction": 0.0}, "--train-fraction"),
        ({"train_fraction": 1.5}, "--train-fraction"),
    ],
)
def test_gather_bench_rejects_bad_options(overrides, message):
    with pytest.raises(ValueError, match=message):
        gather.run(_args(**overrides))


@pytest.mark.parametrize("dtype", ["foo", "U3"])
def test_gather_bench_dtype_must_be_numeric(dtype, capsys):
    # 'foo' was NumPy's TypeError traceback out of the run, 'U3' the store's "x must hold numbers"
    from gglspeedup.bench import main

    with pytest.raises(SystemExit) as done:
        main(["gather", "--rows", "100", "--dtype", dtype])
    expected = f"argument --dtype: must name a numeric NumPy dtype (e.g. float32, float16, int8), got '{dtype}'"
    assert done.value.code == 2 and expected in capsys.readouterr().err
    parser = argparse.ArgumentParser()
    gather.add_arguments(parser)
    assert parser.parse_args(["--dtype", "float16"]).dtype == "float16" and parser.parse_args([]).dtype == "float32"


def test_gather_bench_cache_past_the_whole_table_is_a_usage_error_on_the_command_line():
    # --cache 2 ran, read as 1.0 by the hit-rate report and labelled "cache ratio 2"
    import os
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    argv = [sys.executable, "-m", "gglspeedup.bench", "gather", "--cache", "0.5,2", "--rows", "100"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 2, done.stderr[-2000:]
    expected = (
        "python -m gglspeedup.bench gather: error: --cache must list fractions of the table in [0, 1], got '0.5,2'"
    )
    assert done.stderr.strip() == expected


class _HostArray(np.ndarray):
    """A NumPy array with CuPy's ``set`` (host -> "device" copy), for the fake CuPy below."""

    def set(self, source):
        self[...] = source


def _fake_cupy():
    fake = types.ModuleType("cupy")
    fake.asarray = lambda a: np.array(a).view(_HostArray)
    fake.empty = lambda shape, dtype: np.empty(shape, dtype).view(_HostArray)
    fake.empty_like = np.empty_like
    fake.take = np.take
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(memGetInfo=lambda: (1 << 40, 1 << 40)))
    return fake


@pytest.mark.cuda
@pytest.mark.parametrize("device", ["cuda:0"])
def test_gpu_contenders_gather_exactly_on_the_simulator(device, monkeypatch):
    # The GPU half of the benchmark, with a NumPy-backed stand-in for CuPy and the kernels on the
    # simulator: every contender runs, and ours writes x[ids] at every cache ratio.
    if not as_device(device).simulated:
        pytest.skip("replaces CuPy with a NumPy stand-in: simulator only (a real GPU runs the command itself)")
    monkeypatch.setitem(sys.modules, "cupy", _fake_cupy())
    x = np.arange(40 * 4, dtype=np.float32).reshape(40, 4)
    ids = np.array([39, 0, 7, 7, 21, 3])
    contenders, stores = gather.gpu_contenders(x, ids, as_device(device), [0.0, 0.5, 2.0], graph=None)
    assert set(contenders) == {
        "gglspeedup cache=0",
        "gglspeedup cache=0.5",
        "gglspeedup cache=2",
        "gglspeedup cache=0, check=False",
        "gglspeedup cache=0.5, check=False",
        "gglspeedup cache=2, check=False",
        "gglspeedup cache=0, check=deferred",
        "gglspeedup cache=0.5, check=deferred",
        "gglspeedup cache=2, check=deferred",
        "device-to-device copy",
        "pinned host-to-device copy",
        "cupy.take (table on GPU)",
    }
    timings = gather.time_interleaved(contenders, repeats=1)
    assert all(len(rounds) == 1 and rounds[0] > 0 and cpu >= 0 for rounds, cpu in timings.values())
    picked = {name: contenders[name] for name in ("device-to-device copy", "gglspeedup cache=2, check=deferred")}
    back_to_back = gather.time_back_to_back(picked, calls=2, repeats=2)
    assert all(len(rounds) == 2 and min(rounds) > 0 for rounds in back_to_back.values())
    with pytest.raises(ValueError, match="calls must be >= 1"):
        gather.time_back_to_back(picked, calls=0, repeats=1)
    for ratio, store in stores.items():
        np.testing.assert_array_equal(store[ids], x[ids])
        assert store.num_cached == min(40, int(ratio * 40))


def test_loader_bench_rejects_bad_options_before_loading():
    cases = [
        (["--batches", "0"], "--batches must be >= 1, got 0"),  # ran an empty pass and reported it
        (["--repeats", "0"], "--repeats must be >= 1, got 0"),
        (["--batch", "0"], "--batch must be >= 1, got 0"),
        (["--dim", "-1"], "--dim must be >= 1, got -1"),
        (["--prefetch", "-1"], "--prefetch must be >= 0, got -1"),
        (["--backend", "mxnet"], "unknown backend 'mxnet'"),
    ]
    assert_rejects(main, ["loader", "--graph", "file:/never/read.npz"], cases)


def test_loader_bench_compares_recycled_and_fresh_buffers(tmp_path, capsys):
    import json

    from gglspeedup import bench

    out = tmp_path / "loader.json"
    bench.main(
        [
            "loader",
            "--graph",
            "powerlaw:3k:6",
            "--dim",
            "8",
            "--batch",
            "64",
            "--batches",
            "4",
            "--repeats",
            "2",
            "--fanouts",
            "4,3",
            "--json",
            str(out),
        ]
    )
    results = json.loads(out.read_text())
    names = [row["loader"] for row in results["rows"]]
    assert names == ["fresh buffers (reuse_buffers=False)", "recycled buffers (reuse_buffers=True)"]
    assert all(row["batches_per_s_best"] > 0 and row["gather_gbps_best"] > 0 for row in results["rows"])
    assert results["pool_last_round"]["buffers_reused"] > 0 and results["paired_speedup_gather"] > 0
    assert "recycled / fresh, paired" in capsys.readouterr().out


@pytest.mark.parametrize("word", [np.uint64, np.uint32, np.uint8])
def test_the_random_row_ceiling_reads_every_word_of_the_rows(word):
    from gglspeedup.feature import read_rows

    table = np.random.default_rng(6).integers(0, 2**8, (3000, 24), dtype=np.uint8).view(word)
    ids = np.random.default_rng(7).integers(0, 3000, 2500)
    expected = np.bitwise_xor.reduce(table[ids].reshape(-1))
    assert read_rows(table, ids) == expected
    assert read_rows(table, ids[:0]) == 0
