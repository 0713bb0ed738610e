"""``python -m gglspeedup.service serve PATH --address auto``, ``serve(address="ray://...")`` and
serve()'s embedded default.

The command runs in a child process that joins the session's Ray (in its private network
namespace, ``service_netns``) through ``--address auto`` and ``RAY_ADDRESS``; a trainer's serve()
then uses its servers instead of starting its own, and closing the trainer's cluster leaves them
to the command, which stops them on SIGTERM. A Ray Client server on the namespace's loopback,
joined to the session's Ray, lets a driver in a fresh child process serve through
``ray://127.0.0.1:PORT``. The embedded default (no address, no Ray yet) runs in
a child process with a namespace of its own: serve() starts a local Ray there, in a temporary
folder of its own, and close() leaves none of its processes and none of its files behind.
"""

import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from service_netns import partitioned, process_alive, ray_session, wait_gone  # noqa: F401

import gglspeedup as gg
from gglspeedup.service import serve
from gglspeedup.testing import assert_same_sample


def _read_until(process, marker: str, seconds: float) -> list[str]:
    lines, limit = [], time.monotonic() + seconds
    while time.monotonic() < limit:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line.strip())
        if line.startswith(marker):
            return lines
    raise AssertionError(f"no {marker!r} line from the command: {lines}")


def test_service_ray_command_serves_until_stopped_and_trainers_use_its_servers(ray_session, tmp_path_factory):  # noqa: F811
    folder, graph, _, _ = partitioned(tmp_path_factory, "metis")
    ray_files = os.listdir(ray_session.temp_dir)  # the joined cluster's own: nobody else's to remove
    env = {**os.environ, "RAY_ADDRESS": ray_session.address}
    command = [sys.executable, "-m", "gglspeedup.service", "serve", folder, "--servers", "2", "--address", "auto"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        lines = _read_until(process, "ready", 120.0)
        servers = [line for line in lines if line.startswith("server ")]
        assert [line.split(" pids ")[0] for line in servers] == [
            "server 0 parts [0, 1] node 127.0.0.1",
            "server 1 parts [2] node 127.0.0.1",
        ]
        pids = [int(line.rsplit(" ", 1)[1]) for line in servers]
        with serve(folder) as cluster:  # finds the command's servers: starts none
            assert [server.pid for server in cluster.servers] == pids and not cluster.transport.owner
            seeds = np.arange(0, graph.num_nodes, 11)
            expected = gg.NeighborSampler(graph, [4, 3], seed=1).sample(seeds, key=3)
            assert_same_sample(cluster.sampler([4, 3], seed=1).sample(seeds, key=3), expected)
        assert all(process_alive(pid) for pid in pids)  # the trainer's close() leaves them running
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        assert process.stdout.read().strip().endswith("stopped")
        assert not wait_gone(pids, 10.0)
        assert all(os.path.exists(os.path.join(ray_session.temp_dir, name)) for name in ray_files)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


# The head of a script run in a child process: its own network namespace (or a "skip" report),
# ``folder`` and ``num_nodes`` from its arguments; the script's last line of output is its report.
IN_NAMESPACE = textwrap.dedent(
    """
    import json, sys
    from gglspeedup.service.netns import private_network

    folder, num_nodes = sys.argv[1], int(sys.argv[2])
    try:
        network = private_network()
    except PermissionError as error:
        print(json.dumps({"skip": str(error)}))
        sys.exit(0)
    """
)


def run_in_namespace(script: str, folder: str, graph, *more) -> dict:
    """The report of ``IN_NAMESPACE + script`` run in a child process (skips without a namespace)."""
    result = subprocess.run(
        [sys.executable, "-c", IN_NAMESPACE + script, folder, str(graph.num_nodes), *more],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if "skip" in report:
        pytest.skip(f"no private network namespace for Ray: {report['skip']}")
    return report


EMBEDDED = textwrap.dedent(
    """
    import os
    import numpy as np
    import psutil
    import gglspeedup as gg
    from gglspeedup.service import serve

    sys.path.insert(0, sys.argv[3])
    from service_netns import private_shared_memory
    private_shared_memory()  # this process's own /dev/shm: another test's segments are not counted
    shm_before = set(os.listdir("/dev/shm"))
    with network:
        import ray
        cluster = serve(folder, 2, deadline="10s")
        started = ray.is_initialized()
        children = [p.pid for p in psutil.Process().children(recursive=True)]
        servers = [s.pid for s in cluster.servers]
        n_id = cluster.sampler([4, 3], seed=1).sample(np.arange(0, num_nodes, 11), key=3).n_id
        node = ray._private.worker._global_node  # where this Ray instance keeps its files
        temp_dir, session_dir = node.get_temp_dir_path(), node.get_session_dir_path()
        logs = len(os.listdir(os.path.join(session_dir, "logs")))
        cluster.close()
        alive = [pid for pid in children + servers if psutil.pid_exists(pid)
                 and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    print(json.dumps({"started": started, "connected": ray.is_initialized(), "alive": alive,
                      "servers": len(servers), "children": len(children), "n_id": n_id.tolist(),
                      "new_shm": sorted(set(os.listdir("/dev/shm")) - shm_before),
                      "temp_dir": temp_dir, "session_dir": session_dir, "logs": logs,
                      "files_left": os.path.exists(temp_dir) or os.path.exists(session_dir)}))
    """
)


def test_service_ray_command_refuses_bad_arguments_as_usage_errors_without_starting_ray(tmp_path, monkeypatch, capsys):
    # a missing folder or --servers 0 ended in a Python traceback (exit status 1)
    from gglspeedup.service import __main__ as command
    from gglspeedup.service import cluster

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started for a command it refuses")

    monkeypatch.setattr(cluster, "connect", no_ray)
    folder = str(tmp_path / "p")
    gg.service.partition(
        gg.CSRGraph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), num_nodes=4), folder, 2, method="range"
    )
    (tmp_path / "empty").mkdir()
    shutil.copytree(folder, tmp_path / "edited")
    header = json.loads((tmp_path / "edited" / "header.json").read_text())
    del header["meta"]["num_parts"]  # raised KeyError('num_parts') with a traceback
    (tmp_path / "edited" / "header.json").write_text(json.dumps(header))
    cases = [
        ([str(tmp_path / "edited")], r"'.*edited': its header does not describe a partitioned folder"),
        ([str(tmp_path / "missing")], r"no partitioned folder at '.*missing'"),
        ([str(tmp_path / "empty")], r"'.*empty' is not a saved graph folder"),
        ([folder, "--servers", "0"], r"--servers must be >= 1, got 0"),
        ([folder, "--num-servers", "-1"], r"--servers must be >= 1, got -1"),
        ([folder, "--servers", "3"], r"--servers must be at most the number of partitions \(2\), got 3"),
        ([folder, "--replicas", "0"], r"--replicas must be >= 1, got 0"),
        ([folder, "--max-restarts", "-2"], r"--max-restarts must be >= -1 \(-1: always\), got -2"),
        ([folder, "--deadline", "soon"], r"argument --deadline: the deadline must be seconds or a duration .*'soon'"),
        ([folder, "--deadline", "-1"], r"argument --deadline: the deadline must be a positive, finite duration"),
        ([folder, "--address", "nohost"], r"argument --address: the address must be 'auto', 'host:port' or .*'nohost'"),
    ]
    for extra, message in cases:
        with pytest.raises(SystemExit) as exit:
            command.main(["serve", *extra])
        err = capsys.readouterr().err
        assert exit.value.code == 2 and "Traceback" not in err, err
        assert re.search(rf"python -m gglspeedup.service serve: error: {message}", err), err


def test_service_ray_command_refuses_an_address_nothing_answers_at_without_calling_ray_init(
    tmp_path, monkeypatch, capsys
):
    # --address nohost:1 sat in ray.init's connection retries for minutes
    from gglspeedup.service import __main__ as command
    from gglspeedup.service import _actors

    class NoRay:
        @staticmethod
        def is_initialized():
            return False

        @staticmethod
        def init(*args, **kwargs):
            raise AssertionError("ray.init was called for an address nothing answers at")

    monkeypatch.setattr(_actors, "import_ray", lambda: NoRay)
    folder = str(tmp_path / "p")
    gg.service.partition(
        gg.CSRGraph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), num_nodes=4), folder, 2, method="range"
    )
    cases = [
        ("127.0.0.1:1", r"address '127\.0\.0\.1:1': no Ray cluster answers at 127\.0\.0\.1:1"),
        ("ray://127.0.0.1:1", r"address 'ray://127\.0\.0\.1:1': no Ray cluster answers at 127\.0\.0\.1:1"),
        ("nohost", r"argument --address: the address must be 'auto', 'host:port' or 'ray://host:port', got 'nohost'"),
        ("127.0.0.1:port", r"argument --address: the address must be .*, got '127\.0\.0\.1:port'"),
    ]
    for address, message in cases:
        with pytest.raises(SystemExit) as exit:
            command.main(["serve", folder, "--address", address])
        err = capsys.readouterr().err
        assert exit.value.code == 2 and "Traceback" not in err, err
        assert re.search(rf"python -m gglspeedup.service serve: error: {message}", err), err


def test_service_ray_embedded_default_starts_a_local_ray_that_close_stops(tmp_path_factory):
    folder, graph, _, _ = partitioned(tmp_path_factory, "metis")
    report = run_in_namespace(EMBEDDED, folder, graph, os.path.dirname(os.path.abspath(__file__)))
    expected = gg.NeighborSampler(graph, [4, 3], seed=1).sample(np.arange(0, graph.num_nodes, 11), key=3).n_id
    assert report["started"] and not report["connected"] and report["servers"] == 2
    assert report["children"] >= 3  # Ray's own processes and the servers, all started by serve()
    assert report["alive"] == [] and report["new_shm"] == []
    assert report["n_id"] == expected.tolist()
    # Its files (sockets, spilled objects, every process's logs) were in a folder of its own, not
    # in Ray's shared default /tmp/ray (where they stayed forever), and close() removed it.
    temp_dir, session_dir = report["temp_dir"], report["session_dir"]
    assert temp_dir != "/tmp/ray" and os.path.dirname(session_dir) == temp_dir and report["logs"] > 0
    assert not report["files_left"], temp_dir


def test_service_ray_local_temp_dir_is_where_ray_puts_its_own_unless_its_sockets_would_not_fit(tmp_path, monkeypatch):
    import tempfile

    from gglspeedup.service._actors import local_temp_dir

    short = tempfile.mkdtemp(prefix="t", dir="/tmp")  # room below it for Ray's socket paths
    try:
        monkeypatch.delenv("RAY_TMPDIR", raising=False)
        monkeypatch.setenv("TMPDIR", short)
        made = [local_temp_dir()]
        assert os.path.dirname(made[0]) == short and os.path.basename(made[0]).startswith("ray")
        os.mkdir(os.path.join(short, "r"))
        monkeypatch.setenv("RAY_TMPDIR", os.path.join(short, "r"))  # Ray's own variable first, as Ray reads it
        made.append(local_temp_dir())
        assert os.path.dirname(made[1]) == os.path.join(short, "r")
        deep = tmp_path / ("d" * 40)  # Ray's socket paths below it would pass AF_UNIX's 107 bytes
        deep.mkdir()
        monkeypatch.setenv("RAY_TMPDIR", str(deep))
        made.append(local_temp_dir())
        assert os.path.dirname(made[2]) == "/tmp"
        for folder in made:
            assert os.path.isdir(folder) and not os.listdir(folder)
            plasma = os.path.join(folder, "session_2026-11-30_15-46-30_160654_4194304", "sockets", "plasma_store")
            assert len(plasma.encode()) <= 107
        os.rmdir(made[2])
    finally:
        shutil.rmtree(short)


AFTER_SHUTDOWN = textwrap.dedent(
    """
    import time
    import numpy as np
    import psutil
    from gglspeedup.service import serve

    with network:
        import ray
        first = serve(folder, 2, deadline="2s")  # starts Ray here
        second = serve(folder, 2, deadline="2s")  # on the same connection
        sampler, features = second.sampler([4, 3], seed=1), second.features()
        sampler.sample(np.arange(0, num_nodes, 11), key=0)
        children = [p.pid for p in psutil.Process().children(recursive=True)]
        first.close()  # stops the Ray instance it started, and with it the second cluster's servers
        failures = []
        for ask in (lambda: sampler.sample(np.arange(0, num_nodes, 11), key=7), lambda: features[[0, 1]]):
            began = time.monotonic()
            try:
                ask()
                failures.append(["answered", "", 0.0])
            except Exception as error:
                failures.append([type(error).__name__, str(error), time.monotonic() - began])
        alive = [server.alive for server in second.servers]
        second.close()
        left = [pid for pid in children if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
        started = [p.pid for p in psutil.Process().children(recursive=True)
                   if p.status() != psutil.STATUS_ZOMBIE]
    print(json.dumps({"failures": failures, "connected": ray.is_initialized(), "alive": alive,
                      "left": left, "started": started}))
    """
)


def test_service_ray_cluster_whose_ray_was_shut_down_names_its_servers_and_starts_no_ray(tmp_path_factory):
    # Two clusters on one connection, the first (which started Ray) closed first: the second's
    # servers are gone with Ray. Its requests went through Ray to probe them, which started a new
    # local Ray instance (seconds, outside the namespace's settings) and raised Ray's own
    # "Failed to submit task" Exception; close() started one too and left it running.
    folder, graph, _, _ = partitioned(tmp_path_factory, "metis")
    report = run_in_namespace(AFTER_SHUTDOWN, folder, graph)
    (kind, message, seconds), (features_kind, features_message, _) = report["failures"]
    assert kind == "ServerUnavailable" and "for batch key 7: died" in message and seconds < 2.0 + 1.0
    assert features_kind == "ServerUnavailable" and "died" in features_message
    assert len(report["alive"]) == 2  # what was last known: asked through Ray, they started it again
    assert not report["connected"] and report["left"] == [] and report["started"] == []


CLIENT_DRIVER = textwrap.dedent(
    """
    import json, os, pickle, sys
    import numpy as np
    import ray
    from gglspeedup.service import serve

    folder, address, out_path, num_nodes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    shm_before = set(os.listdir("/dev/shm"))
    with serve(folder, 2, address=address, deadline="30s") as cluster:
        connected = ray.is_initialized()
        servers = [(s.parts, s.node, s.pid) for s in cluster.servers]
        out = cluster.sampler([4, 3], seed=1).sample(np.arange(0, num_nodes, 11), key=3)
    with open(out_path, "wb") as file:
        pickle.dump((out.n_id, out.adjs), file)
    print(json.dumps({"connected": connected, "disconnected": not ray.is_initialized(), "servers": servers,
                      "new_shm": sorted(set(os.listdir("/dev/shm")) - shm_before)}))
    """
)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_service_ray_client_address_serves_the_local_batches_and_close_leaves_no_server(
    ray_session,  # noqa: F811
    tmp_path_factory,
    tmp_path,
):
    folder, graph, _, _ = partitioned(tmp_path_factory, "metis")
    # Ray Client's server for the session's Ray, on the namespace's loopback ("legacy": one process
    # serves every client; the default proxy mode starts one per client through the runtime-env agent)
    port = _free_port()
    command = [sys.executable, "-m", "ray.util.client.server", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--mode", "legacy", "--address", ray_session.address]
    log = tmp_path / "client_server.log"
    with open(log, "w") as output:
        server = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        limit = time.monotonic() + 60.0
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < limit, log.read_text()[-3000:]
                time.sleep(0.1)
        out_path = tmp_path / "batch.pkl"
        argv = [folder, f"ray://127.0.0.1:{port}", str(out_path), str(graph.num_nodes)]
        result = subprocess.run(
            [sys.executable, "-c", CLIENT_DRIVER, *argv], capture_output=True, text=True, timeout=240, check=False
        )
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["connected"] and report["disconnected"] and report["new_shm"] == []
    assert [[parts, node] for parts, node, _ in report["servers"]] == [[[0, 1], "127.0.0.1"], [[2], "127.0.0.1"]]
    with open(out_path, "rb") as file:
        n_id, adjs = pickle.load(file)
    expected = gg.NeighborSampler(graph, [4, 3], seed=1).sample(np.arange(0, graph.num_nodes, 11), key=3)
    assert_same_sample((n_id, adjs), (expected.n_id, expected.adjs))
    assert not wait_gone([pid for _, _, pid in report["servers"]], 10.0)  # close() stopped both servers
