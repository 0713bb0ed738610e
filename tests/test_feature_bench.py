"""``python -m gglspeedup.bench gather`` runs end to end on a tiny table and reports every column."""

import argparse

import pytest

from gglspeedup.bench import gather


def _args(**overrides):
    parser = argparse.ArgumentParser()
    gather.add_arguments(parser)
    argv = ["--rows", "3000", "--dim", "8", "--ids", "500", "--repeats", "2", "--batch", "32",
            "--presample-batches", "3", "--fanouts", "4,3"]
    args = parser.parse_args(argv)
    for key, value in overrides.items():
        setattr(args, key, value)
    return args


@pytest.mark.parametrize("batch_from", ["uniform", "sampler"])
def test_gather_bench_reports_ours_peers_ceiling_and_policies(batch_from, capsys):
    results = gather.run(_args(batch_from=batch_from))
    names = [row["name"] for row in results["gather"]]
    assert {"gglspeedup (warm out)", "gglspeedup (fresh out)", "numpy.take clip (warm out)",
            "parallel contiguous copy"} <= set(names)
    for row in results["gather"]:
        assert row["best_gbs"] > 0 and row["best_gbs"] >= row["median_gbs"]
    ceiling = next(row for row in results["gather"] if row["name"] == "parallel contiguous copy")
    assert ceiling["vs_ceiling"] == pytest.approx(1.0)
    if batch_from == "sampler":
        rates = results["policies"]
        assert [row["cache"] for row in rates] == [0.0, 0.1, 0.2, 0.5, 1.0]
        assert rates[0]["degree"] == 0.0 and rates[-1]["presample"] == pytest.approx(1.0)
        assert all(0.0 <= row["degree"] <= 1.0 for row in rates)
    assert "numpy.take" in capsys.readouterr().out


@pytest.mark.parametrize("cache, message", [("a,b", "--cache"), ("-0.1", "--cache")])
def test_gather_bench_rejects_bad_cache_lists(cache, message):
    with pytest.raises(ValueError, match=message):
        gather.run(_args(cache=cache))
