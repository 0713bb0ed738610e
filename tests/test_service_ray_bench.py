"""``python -m gglspeedup.bench service`` on tiny settings: its self-check (batches through the
servers equal the local sampler's), the bytes it counts against the minimum, its failure timings.

Ray is the session's, in its private network namespace (``service_netns``); without one the bench
makes its own namespace (``bench.service.ray_here``).
"""

import json
import os
import signal
import threading

import pytest
from service_netns import ray_session  # noqa: F401

from gglspeedup.bench import main


def test_service_ray_bench_self_checks_counts_bytes_and_times_failures_however_late_a_stop_lands(
    ray_session,  # noqa: F811
    tmp_path,
    capsys,
    monkeypatch,
):
    # A SIGSTOP stops a process only once the thread the kernel wakes for it runs: on a loaded
    # machine milliseconds after kill() returned, while the server's channel answered the batch
    # sent meanwhile (the CI failure "a stopped or killed server was not named"). Here the stop
    # lands 0.3 s late, every time: the bench must wait for it before it sends the batch it times.
    real_kill, late = os.kill, []

    def kill_stopping_late(pid, sig):
        if sig != signal.SIGSTOP:
            return real_kill(pid, sig)
        late.append(threading.Timer(0.3, real_kill, (pid, sig)))
        late[-1].start()

    monkeypatch.setattr(os, "kill", kill_stopping_late)
    out_path = tmp_path / "service.json"
    argv = ["service", "--graph", "powerlaw:3000:8", "--servers", "2", "--fanouts", "4,3", "--batch", "64"]
    argv += ["--batches", "3", "--warmup", "1", "--repeats", "2", "--dim", "8", "--deadline", "500ms"]
    try:
        assert main([*argv, "--json", str(out_path)]) == 0
    finally:
        for timer in late:
            timer.join()
    assert len(late) == 1
    printed = capsys.readouterr().out
    assert "self-check passed" in printed and "kill named in" in printed
    results = json.loads(out_path.read_text())
    (row,) = results["rows"]
    assert row["servers"] == 2 and row["calls_per_batch"] == 3  # two hops and one gather
    assert row["service_batches_per_s"] > 0 and row["local_batches_per_s"] > 0
    assert row["loader2_service_batches_per_s"] > 0 and row["loader2_local_batches_per_s"] > 0  # workers=2
    assert 0 < row["loader_best_ratio"] < float("inf")  # each side at its best setting
    assert row["service_processes"] == 3 and row["service_cpu_ms"] >= 0 and row["local_cpu_ms"] >= 0
    assert 1.0 <= row["bytes_vs_minimum"] <= 1.5  # ids out once, edges and rows back once, plus headers
    failures = results["failures"]
    assert failures["deadline_s"] == 0.5 and failures["kill_named_s"] <= 2.0
    assert 0.5 <= failures["stop_named_s"] <= 1.5 and failures["restart_stall_s"] > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--servers", "0"], "--servers"),
        (["--servers", "a"], "--servers"),
        (["--method", "hash"], "--method"),
        # read by serve() only after the graph was built and partitioned
        (["--deadline", "soon"], "--deadline must be seconds or a duration such as '5s'"),
        (["--deadline", "0s"], "--deadline must be a positive, finite duration"),
        (["--failures", "2"], "--failures must be 0 or 1, got 2"),  # ran as 1
    ],
)
def test_service_ray_bench_refuses_bad_options_before_starting_anything(extra, message):
    with pytest.raises(ValueError, match=message):
        main(["service", "--graph", "powerlaw:300:4", *extra])
