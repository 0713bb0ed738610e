"""The servers run at the niceness of the process that started Ray, not Ray's worker default.

Ray starts its worker processes 15 nice levels above the raylet unless told otherwise; a server
doing most of a batch's work at niceness 15 gets a core only when no thread at the trainer's
niceness wants one (measured: 17-53 batches/s against 85-99 beside one busy process of the same
session; BENCHMARKS, svc40i). Ray runs in the session's private network namespace
(``service_netns``), started with the service's own settings as ``serve()`` starts it.
"""

import os

from service_netns import partitioned, ray_session  # noqa: F401

from gglspeedup.service import serve


def _thread_niceness(pid: int) -> set[int]:
    """The niceness of every thread of process ``pid`` (``/proc/<pid>/task/<tid>/stat``, field 19)."""
    values = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as stat:
            values.add(int(stat.read().rsplit(")", 1)[1].split()[16]))
    return values


def test_service_ray_servers_run_at_the_niceness_of_the_process_that_started_ray(ray_session, tmp_path_factory):  # noqa: F811
    folder, _, _, _ = partitioned(tmp_path_factory, "range")
    with serve(folder, 2, deadline="10s") as cluster:
        pids = [server.pid for server in cluster.servers]
        assert len(pids) == 2
        for pid in pids:
            assert _thread_niceness(pid) == {os.getpriority(os.PRIO_PROCESS, 0)}
