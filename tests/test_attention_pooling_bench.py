"""bench attention-pooling runs end to end on tiny settings (attpool2 absent in the test process:
torch is already imported, and attpool2 must be imported before torch) and its batch generators
match their descriptions."""

import numpy as np
import pytest

from gglspeedup.bench import main
from gglspeedup.bench.attention_pooling import attpool2_batch, degree4_batch

from conftest import assert_rejects


def test_batches_match_their_descriptions():
    sizes, edges, width = degree4_batch(0)
    assert len(sizes) == 32 and min(sizes) >= 30 and max(sizes) <= 300 and width == 64
    assert sum(sizes) == 5516 and sum(e.shape[0] for e in edges) == 11032  # the batch
    sizes, edges, width = attpool2_batch(0)
    assert len(sizes) == 10 and 5 <= min(sizes) and max(sizes) <= 9 and width == 10
    for n, e in zip(sizes, edges):
        assert e.shape[1] == 2 and np.all(e[:, 0] < e[:, 1]) and np.all(e < n)  # upper triangle


def test_bad_options_are_rejected_before_any_batch_is_built():
    cases = [
        (["--iters", "0"], "--iters must be >= 1, got 0"),  # was a ZeroDivisionError after timing
        (["--repeats", "0"], "--repeats must be >= 1, got 0"),
        (["--heads", "x"], "--heads must list ints >= 1, got 'x'"),  # was int()'s own message
        (["--mappings", "softplus"], "--mappings must name some of"),
        (["--torch-threads", "-2"], "--torch-threads must be >= 1, or 0 for torch's default, got -2"),  # ran
    ]
    assert_rejects(main, ["attention-pooling", "--peers", ""], cases)


@pytest.mark.slow
def test_tiny_run_reports_every_row(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "bench.json"
    argv = ["attention-pooling", "--batches", "my-test", "--heads", "1,2", "--mappings", "gfusedmax,softmax"]
    assert main(argv + ["--iters", "1", "--repeats", "1", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "attpool2 (absent" in text and "demo training step" in text
    import json

    results = json.loads(out.read_text())
    kinds = [(r["heads"], r["mapping"], r["kind"]) for r in results["rows"]]
    assert kinds == [
        (1, "gfusedmax", "layer"),
        (1, "gfusedmax", "map"),
        (1, "gfusedmax", "fused lasso"),
        (1, "softmax", "layer"),
        (1, "softmax", "map"),
        (2, "gfusedmax", "layer"),
        (2, "gfusedmax", "map"),
        (2, "gfusedmax", "fused lasso"),
        (2, "softmax", "layer"),
        (2, "softmax", "map"),
    ]
    assert all(r["ours_ms"] > 0 for r in results["rows"]) and results["demo"]["gfusedmax_over_softmax"] > 0
