"""Where a remote batch's time goes while a loader keeps batches in flight: a per-thread timeline.

    # 1. record (perf from outside the private namespace, so that every process is seen; as real
    #    root, unshare -n, when --servers-nice lowers a niceness):
    perf record -e sched:sched_switch -e sched:sched_wakeup -a -k CLOCK_MONOTONIC -o /tmp/t.data &
    unshare -n bash -c 'ip link set lo up && python tools/remote_timeline.py record /tmp/t.json
        [--workers 2] [--epochs 3] [--servers-nice 15,0] [--step-ms 0]'
    kill -INT %1
    # 2. read:
    python tools/remote_timeline.py report /tmp/t.json /tmp/t.data [--show 30]

``record`` partitions powerlaw:2000000:32 into 2 range parts (a temporary folder), serves them
from two Ray actors (a local Ray instance, as ``bench service`` starts it), warms a
``NodeLoader(remote, rows, seeds, 1024, workers=W)`` (zero-wide rows: no features, as the bench)
for one epoch, then runs ``--epochs`` more of ``--batches``, each producer thread's steps timed
on ``CLOCK_MONOTONIC`` (the clock ``perf -k CLOCK_MONOTONIC`` stamps its events with) and on its
own CPU clock: per batch, the batch (``sample``), and inside it each hop's route, exchange
(requests out to answers in), gather and relabel. Epochs cycle through ``--workers`` (e.g.
``1,2``) and ``--servers-nice`` (every server thread reniced before the epoch; e.g. ``15,0``:
Ray's default for workers, then the trainer's); ``--step-ms`` gives the loop a training step of
that much compiled work per batch. Printed per epoch: batches/s and the CPU a batch of the
trainer's lasting threads, each server and the producers. The steps, the processes' threads and
the epochs' windows go to the JSON file.

``report`` reads the scheduler's switches and wake-ups (``perf script``) over the epochs and
prints: each core's busy share and who ran on it (each producer, the trainer's other threads,
each server, anything else by name); the producers' steps (wall and CPU a batch); the idle
core-ms a batch by what the producers were doing then; how often 0, 1, 2 or 3+ of the service's
threads wanted a core (running or queued: under 2 is an idle core on an idle 2-core machine,
whatever else runs) and how long every producer waited on the servers at once, per epoch; for
under 2, who wanted one and the producers' steps; with ``--show N``,
N ms of the timeline in 0.25 ms rows (each core's thread, each producer's step).

Needs Ray and ``perf``; ``record`` runs only inside a private network namespace.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import itertools
import json
import os
import re
import subprocess
import tempfile
import threading
import time

_STEPS = ("route", "exchange", "gather", "relabel")


def _clock() -> int:
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def _queued() -> int:
    """Nanoseconds this thread has waited in a run queue (``/proc/thread-self/schedstat``)."""
    with open("/proc/thread-self/schedstat") as stat:
        return int(stat.read().split()[1])


def _waits(pid: int) -> dict:
    """``{tid: ns waited in a run queue}`` of every thread of ``pid``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as stat:
                out[tid] = int(stat.read().split()[1])
        except OSError:
            pass
    return out


def _instrument(events: list, sampler_type) -> None:
    """Wrap the trainer's steps so that each call appends ``(tid, step, start_ns, end_ns)``."""
    from gglspeedup.sampling._kernels import remote as trainer_side
    from gglspeedup.service import _merge

    def wrap(owner, name, step):
        function = getattr(owner, name)

        def timed(*a, **k):
            start, cpu, queued = _clock(), time.thread_time_ns(), _queued() if step == "batch" else 0
            try:
                return function(*a, **k)
            finally:
                end, cpu = _clock(), time.thread_time_ns() - cpu
                queued = _queued() - queued if step == "batch" else 0
                events.append((threading.get_native_id(), step, start, end, cpu, queued))

        setattr(owner, name, timed)

    wrap(trainer_side, "route", "route")
    wrap(_merge.MergedExchange, "__call__", "exchange")
    wrap(trainer_side, "gather", "gather")
    wrap(trainer_side, "relabel_shared", "relabel")
    wrap(sampler_type, "sample", "batch")


def _training_step(millis: float):
    """A stand-in for a training step: ``millis`` ms of compiled work (the GIL released, as a
    model's kernels release it) on the loop's thread per batch; nothing for 0."""
    if millis <= 0:
        return lambda: None
    import numba

    @numba.njit(nogil=True, cache=False)
    def spin(n):
        total = 0.0
        for i in range(n):
            total += (i % 7) ** 0.5
        return total

    spin(10)
    start = time.thread_time()
    spin(10_000_000)
    per_ms = int(10_000_000 / ((time.thread_time() - start) * 1e3))
    return lambda: spin(int(per_ms * millis))


def _renice(pids: list, level: int) -> None:
    """Every thread of ``pids`` at niceness ``level`` (lowering it needs real root: ``unshare -n``)."""
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                os.setpriority(os.PRIO_PROCESS, int(tid), level)
            except ProcessLookupError:
                pass


def record(args) -> None:
    import numpy as np

    from gglspeedup.bench._common import load_graph, seed_batches
    from gglspeedup.bench.service import _cpu_times, ray_here
    from gglspeedup.loader import NodeLoader
    from gglspeedup.service import RemoteSampler, partition, serve

    graph, _ = load_graph(args.graph)
    scratch = tempfile.TemporaryDirectory(prefix="remote-timeline-")
    folder = os.path.join(scratch.name, "parts")
    partition(graph, folder, 2, method="range", memory="1G")
    seeds = np.concatenate(seed_batches(graph.num_nodes, 1024, args.batches, 0))
    rows = np.zeros((graph.num_nodes, 0), np.float32)
    del graph
    events: list = []
    with ray_here(None), serve(folder, 2) as cluster:
        remote = cluster.sampler([15, 10])

        step = _training_step(args.step_ms)

        cycle = [int(w) for w in str(args.workers).split(",")]

        def epoch(workers=cycle[0]):
            for _ in NodeLoader(remote, rows, seeds, 1024, shuffle=False, backend=None, workers=workers):
                step()

        epoch()  # warm: kernels loaded, connections open, pools filled
        _instrument(events, RemoteSampler)
        pids = {"trainer": os.getpid(), **{f"server {i}": s.pid for i, s in enumerate(cluster.servers)}}
        window, walls, lines, labels = [], [], [], []
        nice = [int(n) for n in args.servers_nice.split(",")] if args.servers_nice else [None]
        for i in range(args.epochs):
            level, workers = nice[i % len(nice)], cycle[i % len(cycle)]
            labels.append(f"(workers {workers}, servers' niceness {level})")
            if level is not None:
                _renice([s.pid for s in cluster.servers], level)
            before = {label: _cpu_times([pid]) for label, pid in pids.items()}
            queued = {label: _waits(pid) for label, pid in pids.items() if label != "trainer"}
            start = _clock()
            epoch(workers)
            end = _clock()
            window.append((start, end))
            walls.append((end - start) / 1e9)
            # threads alive at both readings (a producer of this epoch has exited by now, and its
            # schedstat with it): the trainer's main thread and Ray's, each server's every thread
            used = {}
            for label, pid in pids.items():
                after = _cpu_times([pid])
                used[label] = 1e3 * sum(after[k] - before[label][k] for k in after if k in before[label]) / args.batches
            # the producers: their batches' own CPU (each thread's clock, read inside the thread)
            used["producers"] = (
                sum(e[4] for e in events if e[1] == "batch" and start <= e[2] < end) / 1e6 / args.batches
            )
            waited = {
                label: sum(v - queued[label].get(t, v) for t, v in _waits(pid).items()) / 1e6 / args.batches
                for label, pid in pids.items()
                if label != "trainer"
            }
            waited["producers"] = (
                sum(e[5] for e in events if e[1] == "batch" and start <= e[2] < end) / 1e6 / args.batches
            )
            lines.append(
                f"epoch {i} (workers {workers}, servers' niceness {level}): "
                f"{args.batches / walls[-1]:.1f} batches/s, CPU ms a batch "
                + ", ".join(f"{label} {ms:.2f}" for label, ms in used.items())
                + f", all {sum(used.values()):.2f}; run-queue wait ms a batch "
                + ", ".join(f"{label} {ms:.2f}" for label, ms in waited.items())
            )
        threads = {label: [int(t) for t in os.listdir(f"/proc/{pid}/task")] for label, pid in pids.items()}
    out = {
        "pids": pids,
        "threads": threads,
        "window": window,
        "events": events,
        "batches": args.batches,
        "workers": args.workers,
        "labels": labels,
    }
    with open(args.out, "w") as handle:
        json.dump(out, handle)
    print("\n".join(lines))
    print(f"epochs of {args.batches} batches, workers={args.workers}: " + ", ".join(f"{w:.3f} s" for w in walls))
    print("batches/s: " + ", ".join(f"{args.batches / w:.1f}" for w in walls))


_SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=(.*) next_pid=(\d+)")


_COMMS: dict = {}


_WAKEUP = re.compile(r"comm=(.*) pid=(\d+) prio=")


def _runnable(data: str, mine: set) -> list:
    """``[(ns, tid, runnable)]``: when each thread of ``mine`` became runnable (woken, or switched
    in) and when it stopped being so (switched out asleep), in time order."""
    text = subprocess.run(
        ["perf", "script", "-i", data, "-F", "time,event,trace", "--ns"], capture_output=True, text=True, check=True
    ).stdout
    out = []
    for line in text.splitlines():
        stamp, _, rest = line.strip().partition(": ")
        try:
            ns = round(float(stamp) * 1e9)
        except ValueError:
            continue
        if "sched_wakeup:" in rest:
            match = _WAKEUP.search(rest)
            if match and int(match.group(2)) in mine:
                out.append((ns, int(match.group(2)), True))
        elif "sched_switch:" in rest:
            match = _SWITCH.search(rest)
            if match:
                prev, state, nxt = int(match.group(1)), match.group(2), int(match.group(4))
                if prev in mine:
                    out.append((ns, prev, state.startswith("R")))
                if nxt in mine:
                    out.append((ns, nxt, True))
    return out


def _switches(data: str) -> dict:
    """``{cpu: [(ns, next_tid), ...]}``: every context switch ``perf`` recorded, in time order."""
    text = subprocess.run(
        ["perf", "script", "-i", data, "-F", "cpu,time,event,trace", "--ns"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    per_cpu = collections.defaultdict(list)
    for line in text.splitlines():
        if "sched_switch" not in line:
            continue
        head, _, trace = line.partition("sched:sched_switch:")
        cpu_text, stamp = head.split()[:2]
        match = _SWITCH.search(trace)
        if match:
            ns = round(float(stamp.rstrip(":")) * 1e9)
            per_cpu[int(cpu_text.strip("[]"))].append((ns, int(match.group(4))))
            _COMMS[int(match.group(4))] = match.group(3)
    return per_cpu


def _who(tid: int, tgid_of: dict, pids: dict, producers: dict) -> str:
    if tid == 0:
        return "idle"
    if tid in producers:
        return producers[tid]
    pid = tgid_of.get(tid)
    for label, owner in pids.items():
        if pid == owner or tid == owner:
            return label if label != "trainer" else "trainer other"
    return "other " + _COMMS.get(tid, "?")[:12]


def report(args) -> None:
    with open(args.json) as handle:
        run = json.load(handle)
    pids, events = run["pids"], run["events"]
    batch_tids = sorted({tid for tid, step, *_ in events if step == "batch"})
    # each epoch's producer threads are new ones: number them within their epoch, by first batch
    first = {tid: min(a for t, step, a, *_ in events if t == tid and step == "batch") for tid in batch_tids}
    producers = {}
    for start, end in run["window"]:
        mine = sorted((a, tid) for tid, a in first.items() if start <= a < end)
        producers.update((tid, f"producer {i}") for i, (_, tid) in enumerate(mine))
    tgid_of = {tid: pids[label] for label, tids in run["threads"].items() for tid in tids}
    switches = _switches(args.data)
    # each producer's step at a time: the innermost step covering it, else "glue" inside a batch,
    # else "outside" (waiting on the loader's queue, or not started)
    spans = {}
    for p in batch_tids:
        for kind in ("steps", "batches"):
            items = sorted(
                (a, b, step) for tid, step, a, b, *_ in events if tid == p and (step == "batch") == (kind == "batches")
            )
            spans.setdefault(p, {})[kind] = ([a for a, _, _ in items], items)
    total_idle = collections.Counter()
    busy = collections.defaultdict(collections.Counter)
    span_ns = 0
    for start, end in run["window"]:
        span_ns += end - start
        # walk each cpu's intervals inside the window
        for cpu, seq in switches.items():
            for (t0, tid), (t1, _) in itertools.pairwise(seq):
                a, b = max(t0, start), min(t1, end)
                if b <= a:
                    continue
                who = _who(tid, tgid_of, pids, producers)
                busy[cpu][who] += b - a
                if who == "idle":
                    # what each producer was doing meanwhile, sampled at 20 us steps
                    mine = [p for p in batch_tids if start <= first[p] < end]
                    for t in range(a, b, 20_000):
                        key = tuple(_step_at(spans[p], t) for p in mine)
                        total_idle[key] += min(20_000, b - t)
    batches = run["batches"] * len(run["window"])
    print(f"window {span_ns / 1e6:.1f} ms, {batches} batches, {span_ns / 1e6 / batches:.3f} ms a batch")
    for cpu in sorted(busy):
        share = {who: ns / span_ns for who, ns in busy[cpu].items()}
        print(
            f"cpu {cpu}: " + ", ".join(f"{who} {100 * s:.1f}%" for who, s in sorted(share.items(), key=lambda x: -x[1]))
        )
    per = collections.Counter()
    for cpu in busy:
        for who, ns in busy[cpu].items():
            per[who] += ns
    print("core-ms a batch: " + ", ".join(f"{who} {ns / 1e6 / batches:.3f}" for who, ns in per.most_common()))
    steps = collections.defaultdict(lambda: [0, 0, 0])
    for _, step, a, b, cpu, _ in events:
        steps[step][0] += 1
        steps[step][1] += b - a
        steps[step][2] += cpu
    print("trainer steps, ms a batch (wall / CPU of the producer thread), calls a batch:")
    for step, (calls, wall, cpu) in steps.items():
        print(f"  {step:9s} {wall / 1e6 / batches:7.3f} / {cpu / 1e6 / batches:7.3f}  {calls / batches:5.2f}")
    print("idle core-ms a batch by what the producers were doing:")
    for key, ns in total_idle.most_common(12):
        print(f"  {ns / 1e6 / batches:7.3f}  " + " | ".join(key))
    # Load-proof: how many of the service's threads wanted a core (running or queued) over the
    # window; on an idle 2-core machine, fewer than 2 means a core idle.
    mine = {t for tids in run["threads"].values() for t in tids} | set(batch_tids)
    changes = _runnable(args.data, mine)
    wanting = collections.Counter()
    short = collections.Counter()
    for number, (start, end) in enumerate(run["window"]):
        state, last, epoch = {}, start, collections.Counter()
        own = [p for p in batch_tids if start <= first[p] < end]
        for ns, tid, up in changes:
            if ns > end:
                break
            if ns > start and ns > last:
                count = sum(state.values())
                wanting[min(count, 3)] += ns - last
                epoch[min(count, 3)] += ns - last
                if count < 2:
                    who = ",".join(
                        sorted(producers.get(t) or _who(t, tgid_of, pids, producers) for t, u in state.items() if u)
                    )
                    key = (who or "none",) + tuple(_step_at(spans[p], last) for p in own)
                    short[key] += ns - last
                last = ns
            state[tid] = up
        label = run.get("labels", [""] * len(run["window"]))[number]
        print(
            f"epoch {number} {label}: service threads wanting a core "
            + ", ".join(f"{k}{'+' if k == 3 else ''}: {100 * v / (end - start):.1f}%" for k, v in sorted(epoch.items()))
            + f"; every producer waiting on the servers {100 * _all_waiting(spans, own) / (end - start):.0f}%"
        )
    total = sum(wanting.values())
    print(
        "service threads wanting a core: "
        + ", ".join(f"{k}{'+' if k == 3 else ''}: {100 * v / total:.1f}%" for k, v in sorted(wanting.items()))
    )
    print("under 2 wanting, ms a batch, by who wanted one | producers' steps:")
    for key, ns in short.most_common(15):
        print(f"  {ns / 1e6 / batches:7.3f}  {key[0]:28s} | " + " | ".join(key[1:]))
    if args.show:
        _show(run, switches, spans, batch_tids, tgid_of, pids, producers, args.show)


def _all_waiting(spans: dict, producers: list) -> int:
    """Nanoseconds during which every one of ``producers`` was in an exchange at once."""
    if not producers:
        return 0
    common = [(a, b) for a, b, step in spans[producers[0]]["steps"][1] if step == "exchange"]
    for p in producers[1:]:
        mine = [(a, b) for a, b, step in spans[p]["steps"][1] if step == "exchange"]
        common = [(max(a, c), min(b, d)) for a, b in common for c, d in mine if min(b, d) > max(a, c)]
    return sum(b - a for a, b in common)


def _step_at(spans: dict, t: int) -> str:
    """A producer's step at ``t``: the step covering it, else ``glue`` inside a batch, else
    ``outside`` (waiting on the loader's queue). ``spans``: ``{"steps"|"batches": (starts, spans)}``,
    each list non-overlapping and sorted."""
    for kind in ("steps", "batches"):
        starts, items = spans[kind]
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and items[i][1] > t:
            return items[i][2] if kind == "steps" else "glue"
    return "outside"


def _show(run, switches, spans, batch_tids, tgid_of, pids, producers, millis) -> None:
    start = run["window"][-1][0] + (run["window"][-1][1] - run["window"][-1][0]) // 2
    print(f"\n{millis} ms from the middle of the last epoch, 0.25 ms rows: cpu 0 | cpu 1 | producers")
    for t in range(start, start + millis * 1_000_000, 250_000):
        cols = []
        for cpu in sorted(switches):
            seq = switches[cpu]
            tid = 0
            for t0, who in seq:
                if t0 > t:
                    break
                tid = who
            cols.append(f"{_who(tid, tgid_of, pids, producers):14s}")
        steps = [f"{_step_at(spans[p], t):9s}" for p in batch_tids]
        print(f"{(t - start) / 1e6:6.2f} " + " ".join(cols) + " | " + " ".join(steps))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out")
    rec.add_argument("--graph", default="powerlaw:2000000:32")
    rec.add_argument("--batches", type=int, default=100)
    rec.add_argument("--epochs", type=int, default=3)
    rec.add_argument("--workers", default="2", help="producer threads; e.g. 1,2: epochs cycle")
    rec.add_argument("--step-ms", type=float, default=0.0, help="a training step's CPU per batch (ms)")
    rec.add_argument("--servers-nice", default="", help="e.g. 15,0: epochs cycle the servers' niceness")
    rep = sub.add_parser("report")
    rep.add_argument("json")
    rep.add_argument("data")
    rep.add_argument("--show", type=int, default=0)
    args = parser.parse_args(argv)
    record(args) if args.command == "record" else report(args)


if __name__ == "__main__":
    main()
