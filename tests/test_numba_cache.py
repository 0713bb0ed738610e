"""Numba's on-disk cache under processes that compile at once (gglspeedup._numba_cache).

Two savers of different overloads of one kernel must not both name their data file ``.1.nbc``:
the index would then drop one of them or map one signature to the other's machine code.
"""

import subprocess
import sys
import threading
import time

import pytest

import gglspeedup  # noqa: F401  (installs the lock)

caching = pytest.importorskip("numba.core.caching")


def test_concurrent_saves_of_two_overloads_keep_each_its_own_data(tmp_path, monkeypatch):
    cls = caching.IndexDataCacheFile
    assert getattr(cls.save, "gglspeedup_locked", False)
    save_index = cls._save_index

    def slow_save_index(self, overloads):
        time.sleep(0.3)  # widen the window between reading the index and writing it
        save_index(self, overloads)

    monkeypatch.setattr(cls, "_save_index", slow_save_index)
    files = [cls(str(tmp_path), "kernel-1.py311", "stamp") for _ in range(2)]  # one per "process"
    savers = [
        threading.Thread(target=files[0].save, args=("float32 signature", b"float32 code")),
        threading.Thread(target=files[1].save, args=("float64 signature", b"float64 code")),
    ]
    for saver in savers:
        saver.start()
        time.sleep(0.05)
    for saver in savers:
        saver.join()
    reader = cls(str(tmp_path), "kernel-1.py311", "stamp")
    assert reader.load("float32 signature") == b"float32 code"
    assert reader.load("float64 signature") == b"float64 code"
    assert sorted(p.name for p in tmp_path.glob("*.nbc")) == ["kernel-1.py311.1.nbc", "kernel-1.py311.2.nbc"]


def _printed(code: str) -> list:
    """The words a fresh Python process running ``code`` printed."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_the_lock_holds_when_numba_was_imported_before_gglspeedup():
    code = (
        "import numba, numba.core.caching as c\n"
        "assert not getattr(c.IndexDataCacheFile.save, 'gglspeedup_locked', False)\n"
        "import gglspeedup\n"
        "print(getattr(c.IndexDataCacheFile.save, 'gglspeedup_locked', False))\n"
    )
    assert _printed(code) == ["True"]


def test_import_gglspeedup_leaves_numba_unimported_and_locks_it_when_it_loads():
    code = (
        "import sys, gglspeedup\n"
        "print('numba' in sys.modules)\n"
        "import numba.core.caching as c\n"
        "print(getattr(c.IndexDataCacheFile.save, 'gglspeedup_locked', False))\n"
    )
    assert _printed(code) == ["False", "True"]
