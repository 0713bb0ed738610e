"""NumPy names that numba-cuda still refers to after NumPy removed them.

numba-cuda 0.30.4 registers CUDA overloads for ``np.row_stack`` when it loads its array registry,
at the first kernel compile; NumPy 2.5 removed ``row_stack`` (deprecated since 2.0 in favour of
``vstack``, of which it was an alias). On NumPy 2.5 every kernel compile therefore raised
``AttributeError: module 'numpy' has no attribute 'row_stack'``: seen on an H200 machine whose image
holds numpy 2.5.2, numba 0.68.0 and numba-cuda 0.30.4, where 226 of the 242 GPU tests failed so.
Putting the alias back, as the function NumPy itself had made it, is the whole fix; it is done only
where NumPy lacks the name, so older NumPy (and a numba-cuda that stops asking) is untouched.
"""

from __future__ import annotations

import numpy as np

__all__ = ["restore_removed_aliases"]


def restore_removed_aliases() -> None:
    """Give NumPy back ``row_stack`` (= ``vstack``) where it lacks it, before numba-cuda compiles."""
    if "row_stack" not in vars(np):
        np.row_stack = np.vstack  # noqa: NPY201 (the alias is the point)
