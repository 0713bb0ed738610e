"""``tests/cold_cache.py``: the cold cache the cold-path tests use, and adding a cache to another
(scripts/test.sh adds what those tests compiled to the suite's cache)."""

import os
import subprocess
import sys

import pytest
from cold_cache import COLD_CACHES, cold_cache, merge

KERNEL = """
import numba

@numba.njit(cache=True)
def twice(x):
    return 2 * x
"""


def _write(path, text: bytes = b"") -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as file:
        file.write(text)


def _run(tmp_path, cache, calls: str) -> str:
    """Call ``kernels.twice`` on ``calls`` in a fresh process caching into ``cache``; its output
    with ``NUMBA_DEBUG_CACHE`` (which overloads it saved and loaded)."""
    code = f"import numpy as np, kernels; print([kernels.twice(x) for x in ({calls},)])"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), NUMBA_DEBUG_CACHE="1", PYTHONPATH=str(tmp_path / "src"))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def test_merged_overloads_load_beside_the_targets_own(tmp_path):
    _write(tmp_path / "src" / "kernels.py", KERNEL.encode())
    cold, suite = tmp_path / "cold", tmp_path / "suite"
    assert _run(tmp_path, cold, "3, 2.5").count("data saved to") == 2  # int64 and float64
    assert _run(tmp_path, suite, "np.float32(1.5)").count("data saved to") == 1  # one of its own
    assert merge(str(cold), str(suite)) == 2
    assert merge(str(cold), str(suite)) == 0  # nothing left to add
    out = _run(tmp_path, suite, "3, 2.5, np.float32(1.5)")
    assert "[6, 5.0, 3.0]" in out and out.count("data loaded from") == 3 and "data saved to" not in out
    data = sorted(name for _, _, files in os.walk(suite) for name in files if name.endswith(".nbc"))
    assert [name.rsplit(".", 2)[1] for name in data] == ["1", "2", "3"]  # the merged ones under new names


def test_cold_cache_is_an_empty_folder_of_the_tests_or_the_named_one(tmp_path, monkeypatch):
    monkeypatch.delenv(COLD_CACHES, raising=False)
    assert cold_cache(tmp_path, "a") == str(tmp_path / "numba-cache")
    monkeypatch.setenv(COLD_CACHES, str(tmp_path / "named"))
    assert cold_cache(tmp_path, "a") == str(tmp_path / "named" / "a")
    _write(tmp_path / "named" / "a" / "left.nbi")
    with pytest.raises(AssertionError, match="not a cold cache"):
        cold_cache(tmp_path, "a")
