"""Feature rows by node id: a GPU cache of the hottest rows in front of pinned host memory.

:class:`FeatureStore` is the public entry point (:class:`HeteroFeatureStore` for typed graphs: one
store per node type, one cache budget shared by all); :mod:`gglspeedup.feature.policies` (and
:mod:`gglspeedup.feature.hetero_policies` across types) chooses which rows are cached;
:func:`as_table` is the conversion every store applies to its table (for layers that share one
table between stores). :func:`copy_contiguous` (the CPU gather's loop without the indirection: the
ceiling ``bench gather`` measures against), :func:`read_rows` (the same random rows read, nothing
written: its random-row ceiling) and :func:`word_dtype` (the word a row is copied in) are the
kernels' measuring tools. :class:`FileChangedError` is what a gather raises when the ``.npy``
file behind a memory-mapped table changed on disk after the store opened it. See DESIGN.md,
"Features".
"""

from .._backing import FileChangedError
from ._inputs import as_table
from ._kernels.gather import copy_contiguous, read_rows, word_dtype
from .hetero import HeteroFeatureSource, HeteroFeatureStore
from .store import FeatureStore

__all__ = [
    "FeatureStore",
    "HeteroFeatureStore",
    "HeteroFeatureSource",
    "FileChangedError",
    "as_table",
    "copy_contiguous",
    "read_rows",
    "word_dtype",
]
