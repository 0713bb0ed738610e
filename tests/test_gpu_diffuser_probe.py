"""``tools/gpu_diffuser_probe.py``: the Diffuser layer's parts, timed apart, run on the simulator at ``--size tiny``."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_diffuser_probe_times_every_part_and_its_parts_are_the_layers_attention(tmp_path):
    out = tmp_path / "probe.json"
    done = subprocess.run(
        [sys.executable, "tools/gpu_diffuser_probe.py", "--size", "tiny", "--repeats", "1", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=ROOT),
    )
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
