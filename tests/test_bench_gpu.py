"""``python -m gglspeedup.bench gpu``: the one-shot GPU check runs end to end on the simulator."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from gglspeedup.bench import gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(arguments, simulated, tmp_path):
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1" if simulated else "0")
    return subprocess.run(
        [sys.executable, "-m", "gglspeedup.bench", "gpu", "--out", str(tmp_path), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )


def _run_tool(script, *arguments):
    """``tools/<script> arguments`` on the simulator, from the repository's root."""
    return subprocess.run(
        [sys.executable, os.path.join("tools", script), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT),
    )


@pytest.mark.slow
def test_every_check_passes_on_the_simulator_and_writes_both_reports(tmp_path):
    done = _run(["--size", "tiny", "--deadline", "400"], True, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert list(report["checks"]) == list(gpu.DEFAULT) and report["failed"] == []
    assert all(result["status"] == "pass" for result in report["checks"].values())
    sampling = report["checks"]["sampling"]["figures"]
    assert {row["placement"] for row in sampling["rows"]} == {"device", "pinned"}
    assert all(row["launches"] == 9 and row["syncs"] == 3 for row in sampling["rows"])  # 3 bounded hops
    typed = report["checks"]["typed"]["figures"]
    assert typed["graph"]["relations"] == 7 and [row["batch"] for row in typed["rows"]] == [1, 6]
    assert all(row["launches"] == 8 and row["syncs"] == 2 for row in typed["rows"])  # 2 typed hops, 1 sync each
    attention = report["checks"]["attention"]["figures"]
    rows = {(row["op"], row["tokens"], row["device"]): row for row in attention["rows"]}
    ops = ("softmax", "sparsemax", "gfusedmax", "diffuser")
    expected = {(op, tokens, device) for op in ops for tokens in (8, 12) for device in ("gpu", "cpu")}
    expected |= {("sdpa", 8, "cpu"), ("sdpa", 12, "cpu")}  # torch dense on the CPU: no CUDA under the simulator
    assert set(rows) == expected and not any("skipped" in row for row in rows.values())
    assert all(row["ms_forward"] > 0 and row["ms_forward_backward"] > 0 for row in rows.values())
    # CPU == simulated GPU bit for bit at the first length of every op, and the GPU row says so
    assert {op: (c["tokens"], c["max_abs_diff"], c["within"]) for op, c in attention["check"].items()} == {
        op: (8, 0.0, True) for op in ("softmax", "sparsemax", "gfusedmax", "diffuser")
    }
    assert all(rows[(op, 8, "gpu")]["max_abs_diff_vs_cpu"] == 0.0 for op in attention["check"])
    assert attention["sdpa_on"].startswith("cpu")  # no GPU figure is faked under the simulator
    markdown = (tmp_path / "report.md").read_text()
    assert "| bitwise | pass |" in markdown and "| placement | batch |" in markdown
    assert "| op | tokens | device | ms forward |" in markdown and "| gfusedmax | 12 | gpu |" in markdown


def test_the_gather_check_times_every_check_mode_back_to_back_on_the_simulator(tmp_path):
    done = _run(["--checks", "gather", "--size", "tiny", "--deadline", "300"], True, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads((tmp_path / "report.json").read_text())["checks"]["gather"]["figures"]
    modes = ["gglspeedup cache=1", "gglspeedup cache=1, check=deferred", "gglspeedup cache=1, check=False"]
    assert list(figures["back_to_back"]) == ["device-to-device copy", *modes]  # no CuPy: no cupy.take
    assert figures["back_to_back_calls"] == 2
    assert all(row["ms_per_call_best"] > 0 and row["paired_vs_d2d"] > 0 for row in figures["back_to_back"].values())
    assert figures["back_to_back"]["device-to-device copy"]["paired_vs_d2d"] == 1.0
    assert figures["deferred_back_to_back_vs_d2d"] == figures["back_to_back"][modes[1]]["paired_vs_d2d"]
    assert {f"gglspeedup cache={r}, check=deferred" for r in (0, 1)} <= set(figures["rows"])
    assert "calls back to back, one sync after the last" in (tmp_path / "report.md").read_text()


@pytest.mark.slow
def test_the_gpu_probes_typed_step_runs_on_the_simulator_and_writes_its_figures(tmp_path):
    out = tmp_path / "probe.json"
    done = _run_tool("gpu_probe.py", "--steps", "typed", "--size", "tiny", "--json", str(out))
    assert done.returncode == 0 and "typed failed" not in done.stdout, done.stdout + done.stderr
    typed = json.loads(out.read_text())["typed"]
    assert typed["batch"] == 6 and typed["edges"] > 0 and (typed["launches"], typed["syncs"]) == (8, 2)
    names = [name for name, _ in typed["spans_ms"]]
    assert names.count("sync") == 2 and names.count("launch _typed_compact_kernel") == 2  # one call's spans
    assert len(typed["profile_top"]) == 15 and typed["profile_top"][0]["ms_per_call"] > 0
    assert "typed call, 6 papers of 150" in done.stdout


def test_the_uva_pages_tool_runs_on_the_simulator_and_gathers_the_right_rows(tmp_path):
    out = tmp_path / "uva.json"
    arguments = ["--gb", "0.0001", "--spans", "0.00001,0.0001", "--rows", "20", "--json", str(out)]
    done = _run_tool("gpu_uva_pages.py", *arguments)
    assert done.returncode == 0, done.stdout + done.stderr  # every mode's gathered rows were checked
    results = json.loads(out.read_text())
    assert list(results["modes"]) == ["copy", "register, 4 KiB", "register, huge"]
    assert all(set(row) >= {"span_1e-05_gb_per_s", "span_0.0001_gb_per_s"} for row in results["modes"].values())


def test_a_failing_check_is_reported_and_fails_the_command(tmp_path):
    from gglspeedup import _config

    if _config.HAS_CUPY_GPU:
        pytest.skip("a real GPU is usable here: the environment check would pass")
    done = _run(["--checks", "environment,staging", "--size", "tiny", "--deadline", "120"], False, tmp_path)
    assert done.returncode == 1
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["failed"] == ["environment", "staging"]
    assert "DeviceUnavailableError" in report["checks"]["environment"]["summary"]
    assert "## environment failed" in (tmp_path / "report.md").read_text()


def test_checks_and_deadline_are_checked():
    with pytest.raises(ValueError, match="--checks must name some of"):
        gpu._checks("bitwise,nope")
    with pytest.raises(ValueError, match="--checks must name some of"):
        gpu._checks(",")
    assert gpu._checks(" sampling , gather ") == ["sampling", "gather"]


def test_the_size_defaults_to_tiny_under_the_simulator_and_says_so(monkeypatch, capsys):
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert gpu.default_size(None) == "tiny"
    assert "--size tiny" in capsys.readouterr().out
    assert gpu.default_size("full") == "full"  # an explicit size wins
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "0")
    assert gpu.default_size(None) == "full"
    parser = __import__("argparse").ArgumentParser()
    gpu.add_arguments(parser)
    assert parser.parse_args([]).size is None  # decided at run time, not by argparse


def test_an_out_that_is_a_file_is_refused_before_the_checks(tmp_path):
    # it was a FileExistsError traceback after every check had run (up to --deadline seconds)
    (tmp_path / "notes").write_text("kept")
    for out in (tmp_path / "notes", tmp_path / "notes" / "gpu-report"):
        done = _run(["--checks", "environment", "--size", "tiny", "--out", str(out)], True, tmp_path)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert (
            f"--out must be a folder for report.json and report.md, but '{tmp_path / 'notes'}' is a file" in done.stderr
        )
        assert "environment" not in done.stdout  # no check ran
    assert (tmp_path / "notes").read_text() == "kept"
    gpu._check_out(str(tmp_path / "new" / "gpu-report"))  # a folder yet to be made is fine


def test_the_papers_build_on_the_device_is_synthetic_powerlaws_graph():
    """The GPU's sort and dedupe (NumPy standing in for CuPy) give the CPU generator's graph."""
    from gglspeedup.bench.gpu.papers import build_on_device
    from gglspeedup.datasets import synthetic_powerlaw

    for nodes, degree, seed, chunk, bucket in (
        (300, 6.0, 0, 1 << 25, 1 << 29),
        (1000, 14.6, 3, 7, 90),
        (1, 4.0, 0, 5, 1),
    ):
        # neither the chunks the pairs are drawn in nor the buckets the keys are sorted in change it
        indptr, indices = build_on_device(nodes, degree, seed, np, chunk=chunk, bucket=bucket)
        expected = synthetic_powerlaw(nodes, degree, seed=seed)
        assert indptr.dtype == np.int64 and indices.dtype == np.int32
        np.testing.assert_array_equal(indptr, expected.indptr)
        np.testing.assert_array_equal(indices, expected.indices)


@pytest.mark.slow
def test_the_papers_check_runs_on_the_simulator(tmp_path):
    done = _run(["--checks", "papers", "--size", "tiny", "--deadline", "300"], True, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads((tmp_path / "report.json").read_text())["checks"]["papers"]["figures"]
    assert figures["graph"]["nodes"] == 300 and figures["cpu_equal_batch"] == 300
    assert [(row["placement"], row["batch"]) for row in figures["rows"]] == [
        ("device", 16),
        ("device", 64),
        ("pinned", 16),
        ("pinned", 64),
    ]
    assert all(row["edges"] > 0 for row in figures["rows"])
    gather = figures["gather"]
    assert gather["cached_rows"] == 60 and 0 < gather["hit_rate"] < 1


def test_the_attention_check_compares_within_the_tests_tolerance():
    from gglspeedup.bench.gpu.attention import _compare

    cpu = np.array([1.0, -2.0, 0.5])
    ulp = np.finfo(np.float64).eps
    assert _compare([("out", cpu.copy(), cpu)], simulated=True) == {"max_abs_diff": 0.0, "within": True, "failed": []}
    near = cpu + np.array([0.0, 0.0, 1000 * ulp * 2.0])  # 1000 ulps of the scale (2.0): a real GPU's rounding
    assert _compare([("out", near, cpu)], simulated=False)["within"]
    assert _compare([("out", near, cpu)], simulated=True)["failed"] == ["out"]  # the simulator: bit for bit
    far = cpu + np.array([0.0, 3000 * ulp * 2.0, 0.0])
    result = _compare([("out", cpu, cpu), ("grad", far, cpu)], simulated=False)
    assert result["failed"] == ["grad"] and result["max_abs_diff"] == pytest.approx(3000 * ulp * 2.0, rel=1e-3)
    labels = np.array([0, 0, 2])
    assert _compare([("label", labels + [0, 0, 1], labels)], simulated=False)["failed"] == ["label"]  # ints exact
    assert _compare([("indices", labels[:2], labels)], simulated=True)["failed"] == ["indices (shape (2,) != (3,))"]


def test_the_attention_summary_names_every_op_at_the_largest_length_on_a_gpu():
    from gglspeedup.bench.gpu.attention import SIZES, _summary

    assert SIZES["full"]["tokens"] == (1024, 4096, 16384)
    top = 16384
    rows = [{"op": op, "tokens": top, "device": "gpu", "ms_forward_backward": 1.5} for op in ("softmax", "sparsemax")]
    rows += [{"op": "diffuser", "tokens": top, "device": "cpu", "skipped": "projected past the cap"}]
    rows += [{"op": "sdpa", "tokens": top, "device": "gpu", "ms_forward_backward": 300.0}]
    check = {"softmax": {"within": True}, "diffuser": {"within": False}}
    text = _summary(rows, check, SIZES["full"], simulated=False)
    assert text.startswith("fwd+bwd ms at 16384 tokens on the GPU: softmax 1.50 (CPU skipped), sparsemax 1.50")
    assert "diffuser skipped (CPU skipped), sdpa 300.00;" in text
    assert text.endswith("CPU != GPU past the tolerance: diffuser; 1 rows skipped")


@pytest.mark.cuda
def test_the_attention_check_keeps_to_its_budget_and_its_cap_per_call():
    from gglspeedup.bench.gpu.attention import SIZES, attention

    spent = attention({**SIZES["tiny"], "budget_s": 0.0})
    assert spent["status"] == "pass" and spent["figures"]["check"] == {}
    assert len(spent["figures"]["rows"]) == 2 * 4 * 2 + 2  # every op, length and device, nothing run
    assert all(row["skipped"] == "the check's 0 s budget was spent" for row in spent["figures"]["rows"])
    capped = attention({**SIZES["tiny"], "call_cap_s": 1e-9})  # the first length runs, the next is projected past
    rows = capped["figures"]["rows"]
    assert all("skipped" not in row for row in rows if row["tokens"] == 8)
    assert all(row["skipped"].startswith("one forward + backward projected at") for row in rows if row["tokens"] == 12)
    assert set(capped["figures"]["check"]) == {"softmax", "sparsemax", "gfusedmax", "diffuser"}
    assert capped["summary"].endswith(f"; {sum(row['tokens'] == 12 for row in rows)} rows skipped")


@pytest.mark.cuda
def test_the_attention_check_runs_every_first_length_row_and_check_before_a_longer_row(monkeypatch):
    from gglspeedup.bench.gpu import attention as module
    from gglspeedup.bench.gpu import checks

    done = []

    def measure(cases, op, n, where, *rest):
        done.append((op, n, where))
        return module._skipped(op, n, where, "not run here")

    monkeypatch.setattr(module, "_measure", measure)
    monkeypatch.setattr(module._Cases, "check", lambda self, op, n: done.append((op, n, "check")) or {"within": True})
    monkeypatch.setattr(module, "_summary", lambda *args: "")
    result = module.attention("tiny", budget_s=42)
    assert result["figures"]["budget_s"] == 42.0
    ops = ("softmax", "sparsemax", "gfusedmax", "diffuser")
    first = [(op, 8, "gpu") for op in ops] + [("sdpa", 8, "cpu")] + [(op, 8, "cpu") for op in ops]
    assert done[:13] == first + [(op, 8, "check") for op in ops]  # the Diffuser's check before any long row
    longer = [(op, 12, "gpu") for op in ops] + [("sdpa", 12, "cpu")] + [(op, 12, "cpu") for op in ops]
    assert sorted(done[13:]) == sorted(longer)
    assert [where for _, _, where in done[13:]][-4:] == ["cpu"] * 4  # the CPU's long rows last
    with pytest.raises(ValueError, match="budget_s"):
        module.attention("tiny", budget_s=-1.0)
    with pytest.raises(ValueError, match="attention check's only"):
        checks.run_check("staging", "tiny", budget_s=10.0)


def test_the_diffuser_probe_times_every_part_and_its_parts_are_the_layers_attention(tmp_path):
    out = tmp_path / "probe.json"
    done = _run_tool("gpu_diffuser_probe.py", "--size", "tiny", "--repeats", "1", "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    assert result["device"].startswith("numba's CUDA simulator") and result["size"] == "tiny"
    (length,) = result["lengths"]
    assert length["tokens"] == 8 and length["edges_per_sequence"] > 0
    # the parts, run one by one, give the fused layer's output and gradients bit for bit
    assert length["parts_equal_the_layer"] == {"output": True, "grad q": True, "grad k": True, "grad v": True}
    rows = {row["part"]: row for row in length["rows"]}
    hops = [f"hop {t} (spmm + node dropout)" for t in range(5)]
    back = [f"hop {t} transposed (spmm_t + edge grads)" for t in range(4, -1, -1)]
    assert [row["part"] for row in length["rows"] if row["stage"] == "forward"] == [
        "projections (3 Linear)", "scores + softmax + edge dropout draws", *hops, "attention into out-CSR order",
        "edge keep bits into out-CSR order",
    ]  # fmt: skip
    assert [row["part"] for row in length["rows"] if row["stage"] == "backward"] == [
        "node dropout gradient (torch)", *back, "out-CSR positions (first use)", "scores backward + grad q",
        "grad k (spmm_t of the scores' grad)",
    ]  # fmt: skip
    kernels = ["scores + softmax + edge dropout draws", *hops, *back, "scores backward + grad q"]
    assert all(rows[name]["launches"] == 1 and rows[name]["ms"] > 0 for name in kernels)  # one launch a kernel part
    assert rows["projections (3 Linear)"]["launches"] == 0
    assert (rows["csc (build)"]["launches"], rows["csc (build)"]["syncs"]) == (2, 1)  # count -> scan -> fill
    assert all(row["torch_syncs"] is None for row in length["rows"])  # torch has no CUDA under the simulator
    # the whole layer: 8 launches forward (scores, 5 hops, 2 gathers), 7 backward (5 hops, scores, keys)
    layer = length["layer"]
    assert layer["forward"] == {"launches": 8, "syncs": 0, "torch_syncs": None}
    assert layer["backward"] == {"launches": 7, "syncs": 0, "torch_syncs": None}
    assert 0 < layer["ms_forward"] < layer["ms_forward_backward"]
    assert "8 tokens" in done.stdout and "equal the layer's attention" in done.stdout
