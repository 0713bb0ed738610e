"""``python -m gglspeedup.bench gpu``: one command that proves the GPU path on a GPU machine.

Example (an H100 whose ``python3`` has torch, CuPy, numba and numba-cuda)::

    pip install --no-deps -e .
    python -m gglspeedup.bench gpu --out gpu-report

In order, each in its own process (a sticky CUDA error in one cannot poison the next), under one
hard deadline (``--deadline``, default 540 s), each with its share of what is left:

``environment``  versions, the GPU, the driver
``tests``        the GPU test suite (``pytest -m "cuda or gpu_hardware" tests``)
``bitwise``      CPU == GPU bit for bit per placement (device, pinned) and mode (replace,
                 weighted, edge ids, ``-1`` / ``0`` fanouts, duplicate seeds); the gather per cache
                 fraction and pin mode
``streams``      sampling + gathering on a non-blocking CuPy stream while the legacy stream is
                 busy, and a prefetching loader, against the CPU
``staging``      a 200 MiB device cache filled through 64 MiB staging chunks, row by row
``sampling``     sampled edges/s per placement for batches of 1 .. 65,536 (fanouts [15, 10, 5],
                 2.4M nodes / ~62M edges), launches and syncs per call, the per-call floor
``typed``        the typed sampler on an IGBH-shaped graph (2M papers): one batch checked against
                 the CPU bit for bit, then edges/s, launches and syncs per call for batches of
                 1 .. 16,384 papers, fanouts [15, 10]
``gather``       GB/s per tier and check mode beside ``cupy.take``, ``torch.index_select``, a
                 D2D copy and a pinned H2D copy of the same bytes; then 50 calls back to back
                 with one sync (host wall per call) of the cached gather per check mode, the
                 D2D copy and ``cupy.take``
``attention``    the pooling maps (softmax, sparsemax, gfusedmax) and the Diffuser layer, forward
                 and forward + backward at 1024 / 4096 / 16384 tokens on the GPU and the CPU,
                 beside torch's dense attention on the GPU; CPU == GPU within the tests'
                 tolerance at one length per op (:mod:`.attention`, its own 120 s budget)
``papers``       only when named: ogbn-papers100M's shape (111M nodes, 1.6B edges) built with the
                 GPU's sort, sampled edges/s at 1,024 and 65,536 seeds in device memory and over
                 UVA, one batch against the CPU, a float16 111M x 128 gather from a device cache of
                 the highest-degree rows + page-locked host rows (:mod:`.papers`)

``report.json`` and ``report.md`` go to ``--out``; the exit status is 1 when a check failed or
the deadline cut one off. ``--size tiny`` runs everything at toy sizes: that is how CI runs the
command on numba's simulator (``NUMBA_ENABLE_CUDASIM=1``) before it ever meets a GPU. Without
``--size`` the command picks ``full`` on a GPU and ``tiny`` under the simulator (where full sizes
would run every check out of the deadline), and says which.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

__all__ = ["add_arguments", "run", "ORDER", "DEFAULT"]

ORDER = ("environment", "tests", "bitwise", "streams", "staging", "sampling", "typed", "gather", "attention", "papers")
# Run when --checks is not given: every check but "papers" (minutes, ~50 GB of GPU and ~80 GB of
# host memory at the full size), which is asked for by name.
DEFAULT = tuple(name for name in ORDER if name != "papers")


def add_arguments(parser) -> None:
    parser.add_argument("--out", default="gpu-report", help="folder for report.json and report.md (default gpu-report)")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for everything (default 540)")
    parser.add_argument(
        "--size",
        choices=("full", "tiny"),
        default=None,
        help="problem sizes: full (a GPU) or tiny (the simulator, CI); default full, tiny under the simulator",
    )
    parser.add_argument(
        "--checks",
        default=",".join(DEFAULT),
        help=f"comma-separated subset of {','.join(ORDER)} (default all but papers)",
    )


def _checks(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ORDER]
    if unknown or not names:
        raise ValueError(f"--checks must name some of {', '.join(ORDER)}; unknown: {', '.join(unknown) or '(none)'}")
    return names


def _run_one(name: str, size: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, f"{name}.json")
        command = [sys.executable, "-m", "gglspeedup.bench.gpu.checks", name, "--size", size, "--json", path]
        start = time.perf_counter()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=max(1.0, timeout))
        except subprocess.TimeoutExpired:
            return {"status": "fail", "summary": f"cut off by the deadline after {timeout:.0f} s", "seconds": timeout}
        if os.path.exists(path):
            with open(path) as handle:
                return json.load(handle)
        tail = (done.stderr or done.stdout)[-3000:]
        return {
            "status": "fail",
            "summary": f"the check's process died (exit {done.returncode})",
            "details": tail,
            "seconds": round(time.perf_counter() - start, 2),
        }


def _timing_table(title: str, rows: list, batch: str, lead: str | None = None) -> list:
    """Markdown lines of a per-batch timing table (the rows of ``measure._batch_row``), headed
    ``title``; ``batch`` names the batch column, ``lead`` a row field shown first."""
    columns = ([lead] if lead else []) + [batch, "edges", "ms best", "ms median", "M edges/s", "launches", "syncs"]
    lines = ["", title, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [row[lead]] if lead else []
        cells += [row["batch"], row["edges"], f"{row['ms_best']:.3f}", f"{row['ms_median']:.3f}"]
        cells += [f"{row['m_edges_per_s']:.1f}", row["launches"], row["syncs"]]
        lines.append("| " + " | ".join(str(cell) for cell in cells) + " |")
    return lines


def _attention_table(figures: dict) -> list:
    """Markdown lines of the attention check's rows (:mod:`.attention`)."""
    pooling, diffuser = figures["pooling"], figures["diffuser"]
    lines = [
        "",
        f"Attention on {figures['gpu']} (sdpa on {figures['sdpa_on']}): pooling over graphs of "
        f"{pooling['graph_nodes']} nodes, {pooling['heads']} heads, {pooling['dtype']}; Diffuser layer batch "
        f"{diffuser['batch']}, hidden {diffuser['hidden']}, {diffuser['heads']} heads, {diffuser['dtype']}; "
        f"CPU == GPU: {figures['tolerance']}:",
        "",
        "| op | tokens | device | ms forward | ms forward + backward | max abs diff vs CPU | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in figures["rows"]:
        if "skipped" in row:
            lines.append(f"| {row['op']} | {row['tokens']} | {row['device']} | | | | skipped: {row['skipped']} |")
            continue
        diff = row["max_abs_diff_vs_cpu"]
        note = f"peak {row['peak_mib']} MiB" if "peak_mib" in row else ""
        lines.append(
            f"| {row['op']} | {row['tokens']} | {row['device']} | {row['ms_forward']:.3f} | "
            f"{row['ms_forward_backward']:.3f} | {'' if diff is None else f'{diff:.3g}'} | {note} |"
        )
    return lines


def _markdown(report: dict) -> str:
    environment = report["checks"].get("environment", {}).get("figures", {})
    lines = [
        "# gglspeedup GPU check",
        "",
        f"`{report['command']}` at {report['started']} UTC, {report['seconds']:.0f} s "
        f"(deadline {report['deadline']:.0f} s), size `{report['size']}`.",
        "",
        "Environment: " + ", ".join(f"{k} {v}" for k, v in environment.items()),
        "",
        "| check | status | seconds | summary |",
        "|---|---|---|---|",
    ]
    for name, result in report["checks"].items():
        lines.append(f"| {name} | {result['status']} | {result.get('seconds', '')} | {result['summary']} |")
    sampling = report["checks"].get("sampling", {}).get("figures")
    if sampling:
        title = f"Sampling, fanouts {sampling['fanouts']}, graph {sampling['graph']}:"
        lines += _timing_table(title, sampling["rows"], "batch", lead="placement")
    typed = report["checks"].get("typed", {}).get("figures")
    if typed:
        title = f"Typed sampling, fanouts {typed['fanouts']} on every relation, graph {typed['graph']}:"
        lines += _timing_table(title, typed["rows"], "batch (papers)")
    gather = report["checks"].get("gather", {}).get("figures")
    if gather:
        lines += [
            "",
            f"Gather, table {gather['table']}, {gather['ids']} ids ({gather['bytes_per_gather']} bytes):",
            "",
            "| contender | GB/s best | GB/s median | paired vs ceiling |",
            "|---|---|---|---|",
        ]
        for name, row in gather["rows"].items():
            ratio = row.get("paired_vs_d2d", row.get("paired_vs_h2d", row.get("paired_vs_ceiling")))
            lines.append(
                f"| {name} | {row['gb_per_s_best']:.2f} | {row['gb_per_s_median']:.2f} | "
                f"{'' if ratio is None else f'{ratio:.2f}'} |"
            )
        lines += [
            "",
            f"{gather['back_to_back_calls']} calls back to back, one sync after the last (host wall per call):",
            "",
            "| contender | ms/call best | ms/call median | paired vs D2D copy |",
            "|---|---|---|---|",
        ]
        for name, row in gather["back_to_back"].items():
            lines.append(
                f"| {name} | {row['ms_per_call_best']:.4f} | {row['ms_per_call_median']:.4f} | "
                f"{row['paired_vs_d2d']:.2f} |"
            )
    attention = report["checks"].get("attention", {}).get("figures")
    if attention:
        lines += _attention_table(attention)
    failed = [name for name, result in report["checks"].items() if result["status"] == "fail"]
    for name in failed:
        lines += ["", f"## {name} failed", "", "```", report["checks"][name].get("details", "").strip(), "```"]
    return "\n".join(lines) + "\n"


def default_size(size: str | None) -> str:
    """``size`` when given; else ``tiny`` under numba's CUDA simulator (said on stdout) and
    ``full`` otherwise."""
    if size is not None:
        return size
    from ..._config import cuda_sim_enabled

    if cuda_sim_enabled():
        print("numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1): --size tiny (pass --size full to override)")
        return "tiny"
    return "full"


def _check_out(out) -> None:
    """``--out``: a folder (made at the end when missing) that can hold the reports, checked before
    the checks run; a file there was a FileExistsError traceback after all of them."""
    from ..._replace import nearest_folder

    try:
        folder = nearest_folder(out)
    except NotADirectoryError as error:
        file = error.args[0]
        raise ValueError(f"--out must be a folder for report.json and report.md, but {file!r} is a file") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"--out: cannot write report.json and report.md under {out!r}: {folder!r} is not writable")


def run(args) -> dict:
    names = _checks(args.checks)
    if args.deadline <= 0:
        raise ValueError(f"--deadline must be > 0 seconds, got {args.deadline}")
    _check_out(args.out)
    args.size = default_size(args.size)
    start = time.monotonic()
    report = {
        "command": "python -m gglspeedup.bench gpu " + " ".join(sys.argv[2:]) if len(sys.argv) > 1 else "",
        "started": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        "deadline": args.deadline,
        "size": args.size,
        "checks": {},
    }
    for position, name in enumerate(names):
        left = args.deadline - (time.monotonic() - start)
        if left <= 1:
            report["checks"][name] = {"status": "fail", "summary": "not run: the deadline was reached"}
            continue
        # The measurements take the rest; a check may use what is left, shared with those after it.
        share = left if name in ("sampling", "gather", "papers") else left / max(1, len(names) - position) * 2
        report["checks"][name] = result = _run_one(name, args.size, min(left, share))
        print(f"{name:12s} {result['status']:5s} {result.get('seconds', 0):7.1f} s  {result['summary']}", flush=True)
    report["seconds"] = time.monotonic() - start
    report["failed"] = [n for n, r in report["checks"].items() if r["status"] == "fail"]
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "report.json"), "w") as handle:
        json.dump(report, handle, indent=2, default=str)
    with open(os.path.join(args.out, "report.md"), "w") as handle:
        handle.write(_markdown(report))
    print(
        f"wrote {os.path.join(args.out, 'report.md')} and report.json; "
        f"{len(report['failed'])} failed: {', '.join(report['failed']) or 'none'}"
    )
    if report["failed"]:
        raise SystemExit(1)
    return report
