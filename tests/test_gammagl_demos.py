"""The GammaGL demos where GammaGL is not installed: one line saying what is missing, exit 1.

In GammaGL's environment (scripts/peer_env_gammagl.sh) they train; see docs/gammagl.md."""

import importlib.util
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMOS = ["gammagl_graphsage_loop.py", "gammagl_sage.py"]


@pytest.mark.skipif(importlib.util.find_spec("gammagl") is not None, reason="GammaGL is installed: the demos train")
@pytest.mark.parametrize("demo", DEMOS)
def test_gammagl_demos_exit_with_one_line_naming_the_missing_install(demo):
    command = [sys.executable, os.path.join(ROOT, "demos", demo), "--epochs", "1"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "needs GammaGL and TensorLayerX" in lines[0] and "scripts/peer_env_gammagl.sh" in lines[0]


def test_gammagl_loop_demo_help_runs_without_gammagl():
    command = [sys.executable, os.path.join(ROOT, "demos", "gammagl_graphsage_loop.py"), "--help"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0 and "--samplers" in done.stdout
