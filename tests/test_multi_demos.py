"""The multi-process demos run end to end on CPU ranks and learn (accuracy well above chance).

Each demo runs in its own process tree exactly as the README launches it, with two CPU ranks on
Cora; 1/7 of the test nodes would be right by chance, so a test accuracy above 0.35 shows that
gradients were averaged (DDP / DataParallel) and that the rows each rank gathered were right.
"""

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHANCE_MARGIN = 0.35


def _run(demo, arguments, tmp_path, launcher=(sys.executable,), timeout=300):
    """Run ``demos/<demo>.py`` with ``arguments`` (a string) under ``launcher``; its JSON metrics and stdout."""
    env = dict(os.environ, OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    out = tmp_path / "metrics.json"
    command = [*launcher, os.path.join(ROOT, "demos", f"{demo}.py"), *arguments.split(), "--json", str(out)]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-5000:]}"
    return json.loads(out.read_text()), done.stdout


def test_torch_spawn_demo_trains_with_ddp_on_cpu_ranks(tmp_path):
    pytest.importorskip("torch")
    metrics, stdout = _run("multigpu_torch_spawn", "--devices cpu,cpu --epochs 8", tmp_path)
    assert metrics["world_size"] == 2 and len(metrics["history"]) == 8
    assert metrics["history"][-1]["loss"] < metrics["history"][0]["loss"]
    assert metrics["test"] > CHANCE_MARGIN, stdout


def test_paddle_spawn_demo_trains_with_data_parallel_on_cpu_ranks(tmp_path):
    pytest.importorskip("paddle")
    metrics, stdout = _run("multigpu_paddle_spawn", "--devices cpu,cpu --epochs 8", tmp_path)
    assert metrics["world_size"] == 2
    assert metrics["test"] > CHANCE_MARGIN, stdout


def test_torchrun_demo_trains_on_partitioned_features_and_embeddings(tmp_path):
    pytest.importorskip("torch")
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("torchrun is not on PATH")
    launcher = (torchrun, "--standalone", "--nnodes", "1", "--nproc-per-node", "2")
    arguments = "--epochs 8 --cache-size 64K --partition hash"
    metrics, stdout = _run("distributed_torch", arguments, tmp_path, launcher=launcher)
    assert metrics["world_size"] == 2
    assert metrics["test"] > CHANCE_MARGIN, stdout


@pytest.mark.parametrize("demo", ["multigpu_torch_spawn", "multigpu_paddle_spawn", "distributed_torch"])
def test_a_json_path_that_cannot_be_written_is_a_usage_error_before_training(demo, tmp_path, capsys):
    # rank 0 opened it after the last epoch: a missing folder lost the run to a FileNotFoundError
    from conftest import load_file

    parse_args = load_file(f"demos/{demo}.py", f"demo_{demo}").parse_args
    (tmp_path / "kept.txt").write_text("kept")  # a file where the folder should be
    for path, message in [
        (tmp_path / "missing" / "m.json", "argument --json: must name a file in a folder that exists"),
        (tmp_path, "argument --json: must name a file, but"),
        (
            tmp_path / "kept.txt" / "m.json",
            "argument --json: must name a file in a folder that exists and can be written",
        ),
    ]:
        with pytest.raises(SystemExit) as done:
            parse_args(["--json", str(path)])
        assert done.value.code == 2 and message in capsys.readouterr().err
    assert parse_args(["--json", str(tmp_path / "m.json")]).json == str(tmp_path / "m.json")
