"""bench attention (Diffuser's pattern and layer beside ours): its options are checked before anything
is measured (the runs themselves need Diffuser's peer environment: BENCHMARKS.md)."""

import pytest

from gglspeedup.bench import main

from conftest import assert_rejects


def test_bad_options_are_rejected_before_anything_is_measured():
    cases = [
        (["--rounds", "0"], "--rounds must be >= 1, got 0"),  # was min() of nothing after the timings
        (["--steps", "0"], "--steps must be >= 1, got 0"),  # was a ZeroDivisionError
        (["--heads", "0"], "--heads must be >= 1, got 0"),
        (["--seq-len", "x"], "--seq-len must be comma-separated integers, got 'x'"),  # was int()'s message
        (["--seq-len", "1024,0"], "--seq-len lengths must be >= 1"),
        (["--seq-len", ","], "--seq-len must name at least one length"),
        (["--layer-len", "16k"], "--layer-len must be comma-separated integers"),
    ]
    assert_rejects(main, ["attention", "--no-memory"], cases)


def test_threads_below_one_are_a_usage_error_on_the_flag(capsys):
    # every bench command's --threads (bench link --threads -1 started its run)
    for command in (["attention", "--no-memory"], ["link"], ["sample"], ["gather"]):
        with pytest.raises(SystemExit) as exit_:
            main([*command, "--threads", "0"])
        assert exit_.value.code == 2
        assert "argument --threads: must be >= 1, got '0'" in capsys.readouterr().err
