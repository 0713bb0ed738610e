"""The lock around the attention pooling kernels' Numba parallel regions, with the threading-layer
set-up that must come before the first one (see :mod:`gglspeedup._threading`).

Numba's parallel regions are not meant to be entered from several Python threads at once: the
pooling maps (:mod:`.pooling_cpu`) and the fused pooling layer (:mod:`gglspeedup.attention.pooling_layer`)
launch theirs under :data:`KERNEL_LOCK`; their kernels release the GIL.
"""

from __future__ import annotations

import threading

from ..._threading import prefer_tbb

__all__ = ["KERNEL_LOCK"]

prefer_tbb()  # before any parallel launch
KERNEL_LOCK = threading.Lock()
