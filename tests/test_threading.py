"""Numba's threading layer: a pip-installed TBB is found before the first parallel launch."""

import ctypes
import os
import subprocess
import sys
import textwrap

import pytest

from gglspeedup import _threading


def test_prefer_tbb_loads_the_pip_library_only_when_present(tmp_path, monkeypatch):
    loaded = []
    monkeypatch.setattr(ctypes, "CDLL", lambda path, mode=0: loaded.append((path, mode)))
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    _threading.prefer_tbb.cache_clear()
    try:
        assert _threading.prefer_tbb() is False and loaded == []  # no tbb package: nothing to load
        (tmp_path / "lib").mkdir()
        (tmp_path / "lib" / "libtbb.so.12").write_bytes(b"")
        _threading.prefer_tbb.cache_clear()
        found = _threading.prefer_tbb()
        if sys.platform.startswith("linux"):
            assert found is True
            assert loaded == [(str(tmp_path / "lib" / "libtbb.so.12"), ctypes.RTLD_GLOBAL)]
        else:
            assert found is False and loaded == []
    finally:
        _threading.prefer_tbb.cache_clear()


@pytest.mark.parametrize("first", ["gather", "synthetic", "sample"])
def test_every_parallel_module_selects_tbb_whichever_runs_first(first):
    if not os.path.exists(os.path.join(sys.prefix, "lib", "libtbb.so.12")):
        pytest.skip("the tbb package is not installed in this environment")
    script = textwrap.dedent(
        f"""
        import numba, numpy as np
        import gglspeedup as gg
        if "{first}" == "gather":
            x = np.ones((5000, 64), np.float32)
            gg.FeatureStore(x).gather(np.arange(5000))
        elif "{first}" == "synthetic":
            gg.datasets.synthetic_powerlaw(2000, 8)
        else:
            graph = gg.CSRGraph.from_edge_index(np.random.default_rng(0).integers(0, 3000, (2, 300000)))
            gg.NeighborSampler(graph, [40]).sample(np.arange(3000))
        print(numba.threading_layer())
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "tbb"
