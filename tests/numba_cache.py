"""A cold Numba cache for the tests that prove the cold path, and adding what they compiled to the
suite's cache.

``tests/test_warmup.py`` and ``tests/test_cuda_typing.py`` compile into an empty cache of their own
(:func:`cold_cache`): that is what they prove. Under ``scripts/test.sh`` the folder is one the
script names (``GGLSPEEDUP_COLD_CACHES``); the script runs those tests before the suite and then
adds what they compiled to the suite's cache (``NUMBA_CACHE_DIR``) with :func:`merge`, so its
warm-up does not compile the same kernels a second time. Elsewhere the folder is the test's
``tmp_path``::

    python tests/numba_cache.py merge SOURCE TARGET
"""

from __future__ import annotations

import os
import shutil
import sys

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
    """Add the kernels cached under ``source`` to the cache under ``target`` (the same source tree's
    caches, ``NUMBA_CACHE_DIR`` layout); returns how many indexes it added.

    Numba keeps one index per function (``<stem>.nbi``) naming its data files (``<stem>.<n>.nbc``),
    so a function is taken whole or not at all: where ``target`` has an index for it, that index
    and its data files stay; otherwise the source's data files, then its index, are copied in
    (each written beside its place and renamed, so a reader never sees half a file). Run it when
    nothing is compiling into ``target``: Numba writes a new data file before its index."""
    added = 0
    for folder, _, files in os.walk(source):
        into = os.path.join(target, os.path.relpath(folder, source))
        for index in sorted(name for name in files if name.endswith(".nbi")):
            stem = index[: -len(".nbi")]
            if os.path.exists(os.path.join(into, index)):
                continue
            os.makedirs(into, exist_ok=True)
            data = [name for name in files if name.startswith(stem + ".") and name.endswith(".nbc")]
            for name in [*sorted(data), index]:
                _copy(os.path.join(folder, name), os.path.join(into, name))
            added += 1
    return added


def _copy(source: str, target: str) -> None:
    partial = f"{target}.merging-{os.getpid()}"
    shutil.copyfile(source, partial)
    os.replace(partial, target)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "merge":
        sys.exit("usage: python tests/numba_cache.py merge SOURCE TARGET")
    print(f"{merge(sys.argv[2], sys.argv[3])} cached functions added from {sys.argv[2]}")
