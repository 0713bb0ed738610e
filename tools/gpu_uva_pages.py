"""Does a GPU's random read of page-locked host memory slow down with the span it reads, and do
huge host pages help? (issue 43: over UVA, papers-like's 1.6B-edge graph sampled at 103 M edges/s
at 65,536 seeds where the 62M-edge graph gave 754-798, and its float16 rows gathered at 17 GB/s
against a 55 GB/s pinned copy.)

    python tools/gpu_uva_pages.py [--gb 16] [--spans 0.25,1,4,16] [--rows 200000] [--json PATH]

For each way host rows become readable by the GPU (``FeatureStore(..., cache_size=0)``: every row
read over PCIe by the gather kernel), a table of ``--gb`` GB of 256-byte rows (papers-like's
float16 x 128) is made, and 200,000 random rows whose ids lie in the first ``span`` GB are
gathered (CUDA events, best of 5 after a warm-up), for each span:

- ``pin="copy"``: the rows copied into ``cudaHostAlloc`` memory (the default);
- ``pin="register"``, 4 KiB pages: a table allocated without huge-page advice, registered;
- ``pin="register"``, huge pages: the same with ``madvise(MADV_HUGEPAGE)`` (``AnonHugePages``
  in /proc/meminfo is printed before and after, to show whether the kernel gave them).

A pinned host-to-device copy of the same bytes is the ceiling. Under the simulator
(``NUMBA_ENABLE_CUDASIM=1``, ``--gb 0.001``) it runs at toy sizes to prove it works.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

ROW_WORDS = 64  # 256-byte rows of float32 words


def _meminfo(key: str) -> str:
    try:
        with open("/proc/meminfo") as handle:
            return next((line.split(":")[1].strip() for line in handle if line.startswith(key)), "?")
    except OSError:
        return "?"


def _thp() -> str:
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as handle:
            return handle.read().strip()
    except OSError:
        return "?"


def _timer(device):
    """``time(call, repeats) -> best seconds``: CUDA events on a GPU, the wall clock on the simulator."""
    if device.simulated:

        def wall(call, repeats):
            call()
            best = []
            for _ in range(repeats):
                start = time.perf_counter()
                call()
                best.append(time.perf_counter() - start)
            return min(best)

        return wall
    import cupy

    def events(call, repeats):
        call()
        best = []
        for _ in range(repeats):
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            call()
            stop.record()
            stop.synchronize()
            best.append(cupy.cuda.get_elapsed_time(start, stop) / 1e3)
        return min(best)

    return events


def run(gb: float, spans: list[float], rows: int) -> dict:
    import gglspeedup as gg
    from gglspeedup._hugepages import huge_empty

    device = gg.device.as_device("cuda:0").check_available()
    timed = _timer(device)
    xp = device.xp
    total_rows = max(1, int(gb * 1e9) // (4 * ROW_WORDS))
    rng = np.random.default_rng(0)
    span_ids = {}
    for span in spans:
        limit = max(1, min(total_rows, int(span * 1e9) // (4 * ROW_WORDS)))
        span_ids[span] = xp.asarray(rng.integers(0, limit, rows, dtype=np.int64))
    nbytes = rows * 4 * ROW_WORDS
    out = xp.empty((rows, ROW_WORDS), dtype=np.float32)
    results = {"thp": _thp(), "table_gb": total_rows * 4 * ROW_WORDS / 1e9, "rows_per_gather": rows, "modes": {}}
    print(f"THP {results['thp']}; table {results['table_gb']:.2f} GB of 256-byte rows; {rows} rows a gather")
    if not device.simulated:
        pinned = gg.device.pinned_empty((rows, ROW_WORDS), np.float32)
        pinned[...] = 1.0
        seconds = timed(lambda: out.set(pinned), 5)
        results["pinned_h2d_gb_per_s"] = nbytes / seconds / 1e9
        print(f"pinned H2D copy of the same bytes: {results['pinned_h2d_gb_per_s']:.1f} GB/s")
    for mode, pin, huge in (
        ("copy", "copy", True),
        ("register, 4 KiB", "register", False),
        ("register, huge", "register", True),
    ):
        before = _meminfo("AnonHugePages")
        start = time.perf_counter()
        table = huge_empty((total_rows, ROW_WORDS), np.float32, huge=huge)
        table[:, 0] = np.arange(total_rows, dtype=np.float32)  # touches every page (faults them in)
        store = gg.FeatureStore(table, device=device, cache_size=0, pin=pin)
        setup = time.perf_counter() - start
        row = {"setup_s": round(setup, 1), "anon_huge_before": before, "anon_huge_after": _meminfo("AnonHugePages")}
        for span, ids in span_ids.items():
            seconds = timed(lambda ids=ids, store=store: store.gather(ids, out=out, check=False), 5)
            row[f"span_{span:g}_gb_per_s"] = nbytes / seconds / 1e9
        probe = span_ids[spans[-1]][:64]
        got = store.gather(probe)
        got = got if device.simulated else got.get()
        np.testing.assert_array_equal(got[:, 0], gg.device.to_numpy(probe).astype(np.float32))
        results["modes"][mode] = row
        shown = ", ".join(f"{span:g} GB {row[f'span_{span:g}_gb_per_s']:.1f}" for span in spans)
        print(
            f"{mode:18s} setup {setup:5.1f} s; AnonHugePages {before} -> {row['anon_huge_after']}; "
            f"GB/s by span: {shown}"
        )
        del store, table
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=16.0, help="table size in GB (default 16)")
    parser.add_argument("--spans", default="0.25,1,4,16", help="comma-separated GB spans the ids lie in")
    parser.add_argument("--rows", type=int, default=200_000, help="rows a gather (default 200,000)")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    spans = [float(text) for text in args.spans.split(",") if text.strip()]
    if args.gb <= 0 or args.rows < 1 or not spans or min(spans) <= 0:
        parser.error("--gb and every span must be > 0, --rows >= 1")
    results = run(args.gb, spans, args.rows)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=2)


if __name__ == "__main__":
    main()
