"""``tests/numba_cache.py``: the cold cache the cold-path tests use, and adding a cache to another
(scripts/test.sh adds what those tests compiled to the suite's cache)."""

import os
import subprocess
import sys

import pytest
from numba_cache import COLD_CACHES, cold_cache, merge

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


def _read(path) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def test_merge_takes_a_function_whole_or_not_at_all(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    files = {"x.py311.nbi": b"x index", "x.py311.1.nbc": b"x one", "x.py311.2.nbc": b"x two"}
    files.update({"y.py311.nbi": b"y index", "y.py311.1.nbc": b"y one", "z.py311.nbi.lock": b""})
    for name, text in files.items():
        _write(source / "pkg" / name, text)
    _write(target / "pkg" / "y.py311.nbi", b"target's y index")
    _write(target / "pkg" / "y.py311.1.nbc", b"target's y one")
    _write(target / "pkg" / "x.py311.1.nbc", b"a data file no index names")  # Numba writes data first
    assert merge(str(source), str(target)) == 1
    folder = target / "pkg"
    assert sorted(os.listdir(folder)) == [
        "x.py311.1.nbc",
        "x.py311.2.nbc",
        "x.py311.nbi",
        "y.py311.1.nbc",
        "y.py311.nbi",
    ]
    assert [_read(folder / n) for n in ("x.py311.nbi", "x.py311.1.nbc", "x.py311.2.nbc")] == [
        b"x index",
        b"x one",
        b"x two",
    ]
    assert _read(folder / "y.py311.nbi") == b"target's y index" and _read(folder / "y.py311.1.nbc") == b"target's y one"
    assert merge(str(source), str(target)) == 0  # nothing left to add


def test_a_merged_kernel_loads_in_a_process_that_uses_the_target(tmp_path):
    _write(tmp_path / "src" / "kernels.py", KERNEL.encode())
    code = "import kernels; assert kernels.twice(3) == 6"

    def run(cache):
        env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), NUMBA_DEBUG_CACHE="1", PYTHONPATH=str(tmp_path / "src"))
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout + done.stderr

    assert "data saved to" in run(tmp_path / "cold")
    assert merge(str(tmp_path / "cold"), str(tmp_path / "suite")) == 1
    loaded = run(tmp_path / "suite")
    assert "data loaded from" in loaded and "data saved to" not in loaded


def test_cold_cache_is_an_empty_folder_of_the_tests_or_the_named_one(tmp_path, monkeypatch):
    monkeypatch.delenv(COLD_CACHES, raising=False)
    assert cold_cache(tmp_path, "a") == str(tmp_path / "numba-cache")
    monkeypatch.setenv(COLD_CACHES, str(tmp_path / "named"))
    assert cold_cache(tmp_path, "a") == str(tmp_path / "named" / "a")
    _write(tmp_path / "named" / "a" / "left.nbi")
    with pytest.raises(AssertionError, match="not a cold cache"):
        cold_cache(tmp_path, "a")
