"""The ListOps Diffuser demo: a tiny configuration trains, reports and plots; the data are ListOps."""

import os

import numpy as np
import pytest

pytest.importorskip("torch")

from gglspeedup.examples.listops import VOCAB, make_listops

from conftest import load_file


def load_demo():
    return load_file("demos/diffuser_listops.py", "demo_diffuser_listops")


def evaluate(tokens):
    """Evaluate a ListOps token list (prefix, bracketed) independently of the generator."""
    words = [VOCAB[t] for t in tokens]
    stack = []
    for word in words:
        if word.startswith("["):
            stack.append([word[1:]])
        elif word == "]":
            op, *values = stack.pop()
            value = {
                "MAX": max,
                "MIN": min,
                "MED": lambda v: sorted(v)[(len(v) - 1) // 2],
                "SM": lambda v: sum(v) % 10,
            }[op](values)
            if not stack:
                return value
            stack[-1].append(value)
        else:
            stack[-1].append(int(word))
    raise AssertionError("unbalanced expression")


def test_generated_sequences_have_their_lengths_and_labels():
    tokens, lengths, labels = make_listops(40, 30, 80, seed=3)
    assert np.all((lengths >= 2) & (lengths <= 80))
    for row, length, label in zip(tokens, lengths, labels):
        assert np.all(row[length:] == 0) and np.all(row[:length] != 0)
        assert evaluate(row[:length].tolist()) == label


@pytest.mark.slow
def test_tiny_run_trains_reports_and_plots(capsys, tmp_path):
    result = load_demo().main(
        ["--train", "16", "--val", "8", "--min-len", "40", "--max-len", "70", "--epochs", "2", "--hidden", "8",
         "--layers", "1", "--window", "8", "--num-random", "2", "--num-global", "2", "--no-progress",
         "--out", str(tmp_path)]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "epoch 2:" in out and "test accuracy" in out
    assert [row["epoch"] for row in result["history"]] == [1, 2]
    assert all(np.isfinite(row["loss"]) for row in result["history"])
    assert result["plot"] is None or os.path.exists(result["plot"])


def test_bad_lengths_are_refused():
    with pytest.raises(SystemExit, match="--min-len"):
        load_demo().main(["--min-len", "100", "--max-len", "50"])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--batch-size", "0"], "argument --batch-size: must be >= 1, got '0'"),  # these two: ZeroDivisionError
        (["--train", "0"], "argument --train: must be >= 1, got '0'"),
        (["--epochs", "0"], "argument --epochs: must be >= 1, got '0'"),  # reported a "median step nan s"
        (["--heads", "0"], "argument --heads: must be >= 1, got '0'"),  # the model config's traceback
        (["--out", __file__], "argument --out: must be a folder (made when missing)"),  # after training
        # the model's ValueError naming attention_window / num_random / num_global, torch's, NumPy's:
        (["--window", "-1"], "argument --window: must be a positive even int, got '-1'"),
        (["--window", "63"], "argument --window: must be a positive even int, got '63'"),
        (["--num-random", "-1"], "argument --num-random: must be >= 0, got '-1'"),
        (["--num-global", "-1"], "argument --num-global: must be >= 0, got '-1'"),
        (["--lr", "-1"], "argument --lr: must be a finite number > 0.0, got '-1'"),
        (["--seed", "-1"], "argument --seed: must be >= 0, got '-1'"),
    ],
)
def test_bad_counts_and_out_are_usage_errors_before_any_work(argv, message, capsys):
    with pytest.raises(SystemExit) as done:
        load_demo().main(argv)
    assert done.value.code == 2 and message in capsys.readouterr().err
