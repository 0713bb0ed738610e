"""``python -m gglspeedup.bench soak`` (issue 19, item 15): the leak check runs its three loaders and
reports RSS at 1 minute and at the end. The 20-minute run itself is not in CI."""

import argparse

import pytest

from gglspeedup.bench import soak


def _args(**changes):
    parser = argparse.ArgumentParser()
    soak.add_arguments(parser)
    args = parser.parse_args(["--minutes", "0.002", "--nodes", "300", "--batch-size", "16", "--interval", "0.05"])
    vars(args).update(changes)
    return args


def test_a_short_soak_runs_every_loader_and_reports_rss(capsys):
    result = soak.run(_args())
    assert result["rounds"] >= 1 and all(count > 0 for count in result["batches"].values())
    assert set(result["batches"]) == {"node", "link", "typed"}
    times = [t for t, _ in result["samples"]]
    assert times == sorted(times) and len(times) >= 2
    assert result["rss_at_end_mib"] == result["samples"][-1][1]
    assert result["rss_peak_mib"] == max(mib for _, mib in result["samples"])
    assert result["drift"] == pytest.approx(result["rss_at_end_mib"] / result["rss_at_1_min_mib"] - 1, abs=1e-3)
    assert result["flat"] == (abs(result["drift"]) <= soak.FLAT)
    assert "RSS" in capsys.readouterr().out


def test_rss_at_one_minute_is_the_first_sample_from_then_on():
    assert soak._at([(0.5, 10.0), (59.0, 11.0), (60.2, 12.0), (61.0, 13.0)], 60.0) == 12.0
    assert soak._at([(0.5, 10.0), (2.0, 11.0)], 60.0) == 11.0  # a run shorter than a minute: its last


@pytest.mark.parametrize("change", [{"minutes": 0}, {"interval": -1}, {"nodes": 3}])
def test_bad_options_are_refused(change):
    with pytest.raises(ValueError, match="--"):
        soak.run(_args(**change))
