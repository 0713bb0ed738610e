"""Numba threading-layer set-up, done once at ``import gglspeedup`` (and again, harmlessly, by every
module that compiles ``parallel=True`` kernels).

Numba picks its threading layer once per process, at its first parallel launch, which
``numba.set_num_threads`` / ``get_num_threads`` also trigger. So the set-up must happen before the
user can touch Numba's threads: ``import gglspeedup`` calls :func:`prefer_tbb`, which only loads a
shared library (no Numba import, so ``import gglspeedup`` stays light).

Why TBB: its work-stealing pool degrades gracefully on a busy machine, where GNU OpenMP's
barriers cost a scheduler time slice each (measured on 2 shared cores: sampling at 2 threads ran
7.1 M edges/s with TBB vs 2.4 M with OpenMP), and it is fork-safe. ``pip install tbb`` (a core
dependency on Linux x86-64) puts ``libtbb.so.12`` in ``<prefix>/lib``, outside the loader's search
path; loading it globally lets Numba's default layer order (tbb, omp, workqueue) find it. Without
the package this does nothing and Numba falls back to OpenMP. ``NUMBA_THREADING_LAYER`` still
overrides the choice. When Numba had already launched another layer before gglspeedup was
imported, :func:`prefer_tbb` warns once, naming the cause and the fix.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import warnings

__all__ = ["prefer_tbb", "check_layer"]


@functools.cache
def prefer_tbb() -> bool:
    """Make a pip-installed TBB loadable by Numba; True when it was found and loaded."""
    path = os.path.join(sys.prefix, "lib", "libtbb.so.12")
    if not (sys.platform.startswith("linux") and os.path.exists(path)):
        return False
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return False
    check_layer()
    return True


@functools.cache
def check_layer() -> str | None:
    """Warn once when Numba's threads already run on a layer other than TBB although TBB is
    available (Numba launched before gglspeedup was imported); the layer's name, else ``None``.
    Reads Numba's state only if Numba is already imported (never imports it)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is None or not getattr(parallel, "_is_initialized", False):
        return None
    try:
        layer = sys.modules["numba"].threading_layer()
    except (KeyError, ValueError):
        return None
    if layer != "tbb" and not os.environ.get("NUMBA_THREADING_LAYER"):
        warnings.warn(
            f"Numba's threads were started with the {layer!r} threading layer before gglspeedup was imported "
            "(numba.set_num_threads / get_num_threads or a parallel kernel ran first), so gglspeedup samples "
            "without TBB's fork safety and speed on busy cores; import gglspeedup before touching Numba's threads, "
            "or set NUMBA_THREADING_LAYER=tbb",
            RuntimeWarning,
            stacklevel=3,
        )
    return layer
