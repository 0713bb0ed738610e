"""Labels through the partition servers: :class:`RemoteLabels` (``cluster.labels``).

``labels[ids]`` asks each owning server for its distinct ids once; ``np.asarray(labels)`` (what a
loader's ``labels=`` takes) fetches every label once and keeps them.
"""

from __future__ import annotations

import numpy as np

from .._counts import COUNTS_LOCK
from ..device import aligned_empty
from ._rows import RemoteRows

__all__ = ["RemoteLabels", "remote_labels"]


class RemoteLabels:
    """Labels through the partition servers: ``labels[ids]`` (each distinct label fetched once per
    call), ``len(labels)``, ``shape``, ``dtype``, and the whole array for whatever takes one
    (``np.asarray(labels)``, a loader's ``labels=``), fetched once and kept. ``gather(ids)`` and
    ``stats()`` make it a feature source (``gglspeedup.pyg.FeatureStore({"y": labels})``)."""

    def __init__(self, transport, book, node_type=None):
        self._remote = RemoteRows(transport, book, "y", node_type)
        self.shape, self.dtype, self.node_type = self._remote.shape, self._remote.dtype, node_type
        self._all = None
        self._lookups = 0

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, ids) -> np.ndarray:
        """``y[ids]`` for 1-D ids (a list, an array, a tensor or a slice); ``IndexError`` for an id
        outside ``[0, len)``, ``TypeError`` for non-integer ids."""
        return self._lookup(self._ids(ids))

    def _ids(self, ids) -> np.ndarray:
        from ..validation import check_ids_in_range, int_array

        if isinstance(ids, slice):
            ids = np.arange(self.shape[0], dtype=np.int64)[ids]
        return check_ids_in_range("ids", int_array("ids", ids, beyond=IndexError), self.shape[0])

    def _lookup(self, ids: np.ndarray) -> np.ndarray:
        unique, inverse = np.unique(np.asarray(ids, np.int64).reshape(-1), return_inverse=True)
        values = np.empty((unique.shape[0], *self.shape[1:]), self.dtype)
        if unique.shape[0]:
            self._remote.fetch(unique, values)
        with COUNTS_LOCK:  # loaders' producer threads gather at once (workers > 1)
            self._lookups += int(ids.size)
        return values[inverse.reshape(-1)].reshape(np.shape(ids) + self.shape[1:])

    def gather(self, ids, out=None) -> np.ndarray:
        """``labels[ids]``, written into ``out`` when given (a feature source's ``gather``): a
        writeable NumPy array of shape ``(len(ids), *shape[1:])`` and the labels' dtype, checked
        (``TypeError`` / ``ValueError`` naming ``out``) before anything is asked of the servers,
        as :meth:`gglspeedup.FeatureStore.gather` checks its ``out`` (no silent cast)."""
        ids = self._ids(ids)
        if out is not None:
            self._check_out(out, np.shape(ids) + self.shape[1:])
        values = self._lookup(ids)
        if out is None:
            return values
        out[...] = values
        return out

    def _check_out(self, out, shape: tuple) -> None:
        if not isinstance(out, np.ndarray):
            raise TypeError(f"out must be a NumPy array, got {type(out).__name__}")
        if out.shape != shape:
            raise ValueError(f"out must have shape {shape} (len(ids), *labels.shape[1:]), got {out.shape}")
        if out.dtype != self.dtype:
            raise TypeError(f"out must have the labels' dtype {self.dtype}, got {out.dtype}")
        if not out.flags.writeable:
            raise ValueError("out must be writeable")

    def stats(self) -> dict:
        """``lookups`` (labels asked for), ``rows_remote`` (distinct labels fetched)."""
        return {"lookups": self._lookups, "rows_remote": self._remote.rows_fetched}

    def numpy(self) -> np.ndarray:
        """Every label, fetched once (then kept): shape :attr:`shape`."""
        if self._all is None:
            values = aligned_empty(self.shape, self.dtype)
            self._remote.fetch(np.arange(self.shape[0], dtype=np.int64), values)
            self._all = values
        return self._all

    def __array__(self, dtype=None, copy=None):
        values = self.numpy()
        return values if dtype is None else values.astype(dtype)

    @property
    def __array_interface__(self) -> dict:  # so a loader's label check takes it as an array
        return self.numpy().__array_interface__

    def __repr__(self) -> str:
        return f"RemoteLabels(shape={self.shape}, dtype={self.dtype})"


def remote_labels(cluster):
    """``cluster.labels``: :class:`RemoteLabels`, or a dict node type -> labels (typed)."""
    book = cluster.book
    if not book.typed:
        return RemoteLabels(cluster.transport, book)
    types = [t for i, t in enumerate(book.node_types) if f"y_{i}" in book.meta["tables"]]
    return {t: RemoteLabels(cluster.transport, book, t) for t in types}
