"""A cold Numba cache for the test that proves the cold path, and adding what it compiled to the
suite's cache.

``tests/test_cuda_typing.py`` compiles the attention kernels' CPU paths into an empty cache of its
own (:func:`cold_cache`) before typing every CUDA kernel: that is what it proves. Under
``scripts/test.sh`` the folder is one the script names (``GGLSPEEDUP_COLD_CACHES``); the script
runs that test beside its warm-up and, as soon as the test marks its CPU paths compiled
(``tools/compile_ptx.py --cpu-done``), adds what it compiled to the suite's cache
(``NUMBA_CACHE_DIR``) with :func:`merge`, so the warm-up's attention part does not compile the same
kernels a second time. Elsewhere the folder is the test's ``tmp_path``::

    python tests/cold_cache.py merge SOURCE TARGET
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys

from gglspeedup._numba_cache import index_lock

COLD_CACHES = "GGLSPEEDUP_COLD_CACHES"


def cold_cache(tmp_path, name: str) -> str:
    """An empty folder for a test's own Numba cache: ``$GGLSPEEDUP_COLD_CACHES/name`` when set,
    else one under ``tmp_path``. Fails if it already holds anything (it would not be cold)."""
    root = os.environ.get(COLD_CACHES)
    folder = os.path.join(root, name) if root else os.path.join(str(tmp_path), "numba-cache")
    if os.path.exists(folder) and os.listdir(folder):
        raise AssertionError(f"{folder} is not empty: not a cold cache")
    return folder


def merge(source: str, target: str) -> int:
    """Add the kernels cached under ``source`` to the cache under ``target`` (caches of the same
    source tree, ``NUMBA_CACHE_DIR`` layout); returns how many compiled overloads it added.

    Numba keeps one index per function (``<stem>.nbi``: the source file's stamp, and each
    overload's key mapped to its data file, ``<stem>.<n>.nbc``). Every overload the source's index
    holds and the target's lacks is added: its data file copied under the first name the target's
    index does not use (written beside its place and renamed, so a reader never sees half a file),
    then the target's index rewritten with it (by Numba's own ``IndexDataCacheFile``). A target
    index of another source stamp (stale) is replaced. Each function's read and write hold the lock
    Numba's saves take (``gglspeedup._numba_cache.index_lock``), so processes may go on compiling into
    ``target`` meanwhile."""
    added = 0
    for folder, _, files in os.walk(source):
        into = os.path.join(target, os.path.relpath(folder, source))
        for index in sorted(name for name in files if name.endswith(".nbi")):
            read = _read_index(os.path.join(folder, index))
            if read is None:  # another Numba's, or unreadable: nothing to take
                continue
            stamp, overloads = read
            os.makedirs(into, exist_ok=True)
            with index_lock(os.path.join(into, index)):
                added += _merge_index(folder, into, index[: -len(".nbi")], stamp, overloads)
    return added


def _read_index(path: str):
    """``(stamp, overloads)`` of a Numba index file, or ``None`` (another Numba version's)."""
    import pickle

    import numba

    with open(path, "rb") as file:
        if pickle.load(file) != numba.__version__:
            return None
        return pickle.loads(file.read())


def _merge_index(folder: str, into: str, stem: str, stamp, overloads: dict) -> int:
    from numba.core.caching import IndexDataCacheFile

    index = IndexDataCacheFile(into, stem, stamp)
    have = index._load_index()  # {} where missing or of another stamp
    new = {key: name for key, name in overloads.items() if key not in have}
    used = set(have.values())
    numbers = (index._data_name(i) for i in itertools.count(1))
    added = 0
    for key, name in new.items():
        if not os.path.exists(os.path.join(folder, name)):
            continue  # its process is writing it (Numba writes the index first): taken next time
        free = next(candidate for candidate in numbers if candidate not in used)
        _copy(os.path.join(folder, name), os.path.join(into, free))
        have[key] = free
        added += 1
    if added:
        index._save_index(have)
    return added


def _copy(source: str, target: str) -> None:
    partial = f"{target}.merging-{os.getpid()}"
    shutil.copyfile(source, partial)
    os.replace(partial, target)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "merge":
        sys.exit("usage: python tests/cold_cache.py merge SOURCE TARGET")
    print(f"{merge(sys.argv[2], sys.argv[3])} compiled overloads added from {sys.argv[2]}")
