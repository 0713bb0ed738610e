"""Run one long call in this process, interrupt it with SIGINT, report what came back (JSON).

Used by ``tests/test_interrupts.py`` (``python tests/interrupt_child.py CASE DELAY``): the call is
made long enough that, uninterrupted, it runs for seconds; SIGINT is sent ``DELAY`` seconds after it
starts. The report: the exception type that reached this frame, the seconds from the signal to the
exception, RSS before the call and after it (both after ``gc.collect``), the threads still alive,
and case-specific facts (a gather's rows left untouched, a build's leftovers).
"""

from __future__ import annotations

import gc
import json
import os
import signal
import sys
import threading
import time

import numpy as np

import gglspeedup as gg


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    return float("nan")


def dense_graph(num_nodes=20_000, degree=400, **kwargs):
    """Every node has ``degree`` in-neighbours: uniform draws of 300 of 400 without replacement are
    the sampler's slowest unweighted rows (about 3 M edges/s on two shared cores)."""
    rng = np.random.default_rng(0)
    edge_index = np.stack([rng.integers(0, num_nodes, num_nodes * degree), np.repeat(np.arange(num_nodes), degree)])
    return gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes, keep_edge_ids=False, **kwargs)


def compiled(warm_up) -> None:
    """Run ``warm_up()`` with every hop on the interruptible path, so its kernels are compiled
    (or loaded from Numba's cache) before the call that is interrupted."""
    from gglspeedup.sampling._kernels import cpu, typed

    saved = {module: getattr(module, "LONG_WORK", None) for module in (cpu, typed)}
    for module in saved:
        module.LONG_WORK = 0
    try:
        warm_up()
    finally:
        for module, value in saved.items():
            module.LONG_WORK = value


def signal_during(module, name: str, delay: float) -> dict:
    """Send SIGINT ``delay`` seconds after the first call of ``module.name`` starts (a kernel the
    call runs for seconds), whichever thread makes it; returns the facts marking it."""
    kernel = getattr(module, name)

    def wrapper(*args):
        if not STARTED:
            STARTED.append(threading.Timer(delay, interrupt))
            STARTED[0].start()
        return kernel(*args)

    setattr(module, name, wrapper)
    return {"self_signalled": True}


STARTED = []  # the timer signal_during started


def case_sample():
    from gglspeedup.sampling._kernels import cpu

    sampler = gg.NeighborSampler(dense_graph(), [300, 300])
    compiled(lambda: sampler.sample(np.arange(8)))
    seeds = np.arange(20_000)
    return lambda: sampler.sample(seeds), signal_during(cpu, "sample_hop", 0.1)


def case_sample_links():
    from gglspeedup.sampling._kernels import cpu

    graph = dense_graph()
    sampler = gg.NeighborSampler(graph, [300, 300])
    # warm up on pairs that are edges, so the exclusion record (and the kernel specialisation it
    # selects) is the one of the interrupted call: a pair that is no edge excludes nothing
    edges = np.stack([graph.indices[graph.indptr[:8]], np.arange(8)]).astype(np.int64)
    compiled(lambda: sampler.sample_links(edges, negatives="binary", exclude="reverse"))
    pairs = np.stack([np.arange(0, 20_000, 2), np.arange(1, 20_000, 2)])
    call = lambda: sampler.sample_links(pairs, negatives="binary", exclude="reverse")  # noqa: E731
    return call, signal_during(cpu, "sample_hop", 0.1)


def case_typed():
    rng = np.random.default_rng(0)
    n, degree = 20_000, 400
    cites = np.stack([rng.integers(0, n, n * degree), np.repeat(np.arange(n), degree)])
    graph = gg.HeteroGraph({("paper", "cites", "paper"): cites}, {"paper": n})
    sampler = gg.HeteroNeighborSampler(graph, [300, 300])
    compiled(lambda: sampler.sample({"paper": np.arange(8)}))
    from gglspeedup.sampling._kernels import typed

    return lambda: sampler.sample({"paper": np.arange(n)}), signal_during(typed, "sample_typed_hop", 0.1)


def case_gather():
    """A 512 MiB gather (four chunks) that sends itself SIGINT when its first chunk is done: the
    rest must not be gathered (deterministic, whatever the machine's speed)."""
    rows, dim = 1 << 19, 64  # a 128 MiB table; 2M random rows of 256 bytes gathered
    table = np.random.default_rng(0).random((rows, dim), dtype=np.float32)
    store = gg.FeatureStore(table)
    ids = np.random.default_rng(1).integers(0, rows, 2 << 20)
    store.gather(ids[:1000])
    out = np.full((len(ids), dim), -1.0, np.float32)
    tier_gather = store._tier.gather
    facts = {"self_signalled": True}

    def first_part_then_signal(part_ids, part_out):
        tier_gather(part_ids, part_out)
        if not SENT:
            interrupt()

    store._tier.gather = first_part_then_signal

    def call():
        try:
            store.gather(ids, out=out)
        finally:
            facts["untouched_last_row"] = bool((out[-1] == -1).all())

    return call, facts


def case_from_edge_index():
    """24M edges sorted on one thread (NUMBA_NUM_THREADS=1 from the test): seconds of scatter."""
    from gglspeedup import _csr_kernels

    rng = np.random.default_rng(0)
    num_nodes, num_edges = 1 << 22, 24 << 20
    edge_index = rng.integers(0, num_nodes, (2, num_edges), dtype=np.int32)
    gg.CSRGraph.from_edge_index(edge_index[:, : 1 << 17], num_nodes=num_nodes, keep_edge_ids=True)  # compile
    call = lambda: gg.CSRGraph.from_edge_index(edge_index, num_nodes=num_nodes)  # noqa: E731
    return call, signal_during(_csr_kernels, "scatter_buckets", 0.1)


def case_build_csr():
    import tempfile

    folder = tempfile.mkdtemp()
    path = os.path.join(folder, "graph")
    num_nodes = 1 << 20

    def chunks():
        rng = np.random.default_rng(0)
        for _ in range(64):
            yield rng.integers(0, num_nodes, (2, 1 << 20))

    gg.datasets.build_csr(iter([np.array([[0], [1]])]), os.path.join(folder, "warm"), 2)  # compile
    facts = {}

    def call():
        try:
            gg.datasets.build_csr(chunks(), path, num_nodes, memory="64M")
        finally:
            facts["left_at_path"] = sorted(os.listdir(folder))

    return call, facts


def case_loader(workers=1):
    sampler = gg.NeighborSampler(dense_graph(), [300, 300])
    features = gg.FeatureStore(np.zeros((20_000, 4), np.float32))
    compiled(lambda: sampler.sample(np.arange(8)))
    options = {"workers": workers} if workers > 1 else {}  # workers=1: the option left at its default
    loader = gg.NodeLoader(sampler, features, np.arange(20_000), batch_size=10_000, prefetch=2, backend=None, **options)

    from gglspeedup.sampling._kernels import cpu

    facts = signal_during(cpu, "sample_hop", 0.1)  # in the producer thread; the main thread waits

    def call():
        try:
            for _batch in loader:
                pass
        except BaseException:
            facts["threads_at_exception"] = sorted(t.name for t in threading.enumerate() if t.name.startswith("gg"))
            raise

    return call, facts


def case_loader_workers():
    return case_loader(workers=2)  # SIGINT while one producer is in a hop, the other at the kernel lock


SENT = []  # when SIGINT was sent


def interrupt() -> None:
    SENT.append(time.perf_counter())
    os.kill(os.getpid(), signal.SIGINT)


def main() -> None:
    # A process started from a background job of a non-interactive shell (CI runners, `cmd &`)
    # inherits SIGINT ignored, and Python then installs no handler: restore a terminal's default.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    case, delay = sys.argv[1], float(sys.argv[2])
    call, facts = globals()[f"case_{case}"]()
    gc.collect()
    before = rss_mib()
    sent = SENT
    timer = threading.Timer(delay, interrupt) if not facts.get("self_signalled") else threading.Timer(3600, print)
    start = time.perf_counter()
    timer.start()
    outcome = "returned"
    try:
        call()
    except BaseException as error:  # the point: which type arrives here
        outcome = type(error).__name__
        context = type(error.__context__).__name__ if error.__context__ is not None else None
    ended = time.perf_counter()
    for started in [timer, *STARTED]:
        started.cancel()  # a call that returned before the signal: no signal after it
        started.join()
    time.sleep(0.2)  # threads that were told to stop get to exit
    gc.collect()
    report = {
        "outcome": outcome,
        "context": context if outcome != "returned" else None,
        "call_s": ended - start,
        "latency_s": ended - sent[0] if sent and ended > sent[0] else None,
        "rss_before_mib": before,
        "rss_after_mib": rss_mib(),
        "threads": sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()),
        **facts,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
