"""FeatureStore: gglspeedup's feature stores behind PyG's ``torch_geometric.data.FeatureStore``.

A PyG tensor attribute is ``(group_name, attr_name, index)``: ``group_name`` is ``None`` for an
untyped graph and the node type for a typed one. Each attribute here is backed by a gglspeedup
feature source (a :class:`~gglspeedup.FeatureStore` with its device cache, one type of a
:class:`~gglspeedup.HeteroFeatureStore`, a ``MultiDeviceFeature``, ``DistFeature``, ...); a
lookup is that source's ``gather(index)`` handed to torch zero-copy (a CUDA store gives CUDA
tensors). Typed attributes of one typed store are fetched with one dict-in, dict-out ``gather``
per ``multi_get_tensor`` call, which is what PyG's loaders call once per batch.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch_geometric.data import FeatureStore as PyGFeatureStore
from torch_geometric.data import TensorAttr

from ..device import to_numpy
from ..validation import uint64_beyond_int64
from .outputs import to_torch

__all__ = ["FeatureStore"]

_UNSET = TensorAttr().group_name  # PyG's marker of a field left unset (its class is private)


@dataclass
class _Entry:
    source: Any  # has gather(ids) -> rows
    squeeze: bool = False  # a 1-D attribute stored as one column
    owner: Any = None  # the typed store this type belongs to (one gather per batch for all types)
    node_type: Any = None
    tables: Any = None  # the arrays the source was built from (one, or node type -> one for a typed store)
    owned: bool = False  # ``tables`` are this store's copies (rows may be written in place)


class FeatureStore(PyGFeatureStore):
    """PyG's ``FeatureStore`` over gglspeedup feature sources.

    Parameters
    ----------
    features : dict, optional
        Attribute -> data. Keys: ``"x"`` (group ``None``: an untyped graph) or ``(node_type,
        "x")``. Values:

        - a 2-D array or tensor: held by a :class:`gglspeedup.FeatureStore` built with
          ``device``, ``cache_size``, ``policy`` and ``graph``;
        - a 1-D array (labels, masks): held as one column (no cache), returned 1-D;
        - a feature source (anything with ``gather(ids)``, e.g. a ``gglspeedup.FeatureStore``);
        - for a typed graph, under an attribute name: a dict node type -> array or source (2-D
          arrays become one :class:`gglspeedup.HeteroFeatureStore`: one cache budget over every
          type), or a typed store itself (anything with ``feature_types`` and ``source(type)``).
    device, cache_size, policy, graph
        Options of the stores built from arrays (see :class:`gglspeedup.FeatureStore`); each 2-D
        attribute gets its own ``cache_size`` budget (for a typed one, shared by its types).

    ``put_tensor(rows, group_name, attr_name, index=ids)`` writes rows into an attribute built from
    an array (e.g. embeddings written back), through a copy of the caller's array made on the
    first write; the attribute's store is rebuilt, so no device cache keeps an old row. For a new
    attribute ``index`` must list every row id ``0 .. n-1`` once (the rows' ids, in any order).
    Rows the table's dtype cannot hold (float rows into int or bool rows, ints beyond its range)
    are refused. Feature sources handed over as such (``gather`` objects) are read-only. A failed
    put leaves the store as it was.

    Examples
    --------
    >>> import numpy as np
    >>> store = FeatureStore({"x": np.arange(6, dtype=np.float32).reshape(3, 2), "y": np.array([7, 8, 9])})
    >>> store.get_tensor(group_name=None, attr_name="x", index=[2, 0]).tolist()
    [[4.0, 5.0], [0.0, 1.0]]
    >>> store.get_tensor(group_name=None, attr_name="y", index=1).item(), store.get_tensor_size(None, "y")
    (8, (3,))
    >>> sorted(attr.attr_name for attr in store.get_all_tensor_attrs())
    ['x', 'y']
    """

    def __init__(self, features=None, *, device="cpu", cache_size=0, policy=None, graph=None):
        super().__init__()
        self._entries: dict = {}
        self._options = {"device": device, "cache_size": cache_size, "policy": policy, "graph": graph}
        if features is not None and not isinstance(features, dict):
            raise TypeError(f"features must be a dict attribute -> data, got {type(features).__name__}")
        for key, value in (features or {}).items():
            group, name = (None, key) if isinstance(key, str) else _split_key(key)
            self._add(group, name, value)

    @classmethod
    def from_data(cls, data, *, device="cpu", cache_size=0, policy=None, graph=None) -> FeatureStore:
        """Every node-level tensor of a ``Data`` / ``HeteroData`` (``x``, ``y``, masks, ...)."""
        from torch_geometric.data import HeteroData

        features: dict = {}
        typed = isinstance(data, HeteroData)
        for group, store in [(t, data[t]) for t in data.node_types] if typed else [(None, data)]:
            for key in store.keys():
                value = store[key]
                if isinstance(value, torch.Tensor) and key != "num_nodes" and store.is_node_attr(key):
                    if typed:  # one dict per attribute: a HeteroFeatureStore (one budget) for 2-D ones
                        features.setdefault(key, {})[group] = value
                    else:
                        features[key] = value
        return cls(features, device=device, cache_size=cache_size, policy=policy, graph=graph)

    # ------------------------------------------------------------------ building
    def _add(self, group, name: str, value) -> None:
        if isinstance(value, dict) or _is_typed_store(value):
            if group is not None:
                raise TypeError(
                    f"a typed store or a dict node type -> data goes under an attribute name alone, not under "
                    f"({group!r}, {name!r})"
                )
            for node_type, entry in self._typed_entries(name, value).items():
                self._entries[(node_type, name)] = entry
            return
        self._entries[(group, name)] = self._entry(value, f"{name!r}" if group is None else f"({group!r}, {name!r})")

    def _entry(self, value, what: str) -> _Entry:
        if _is_source(value):
            return _Entry(value)
        array = _as_table(value, what)
        if array.ndim == 1:
            table = array.reshape(-1, 1)
            return _Entry(self._store(table, cache_size=0), squeeze=True, tables=table)
        if array.ndim != 2:
            raise ValueError(f"feature {what} must be 1-D or 2-D (rows, dim), got shape {tuple(array.shape)}")
        return _Entry(self._store(array), tables=array)

    def _store(self, table, cache_size=None):
        from ..feature import FeatureStore as Store

        options = dict(self._options)
        if cache_size is not None:
            options.update(cache_size=cache_size, policy="none", graph=None)
        return Store(table, **options)

    def _typed_entries(self, name: str, value) -> dict:
        if _is_typed_store(value):
            return {t: _Entry(value.source(t), owner=value, node_type=t) for t in value.feature_types}
        tables = {t: v for t, v in value.items() if v is not None}
        if tables and all(not _is_source(v) and np.ndim(v) == 2 for v in tables.values()):
            from ..feature import HeteroFeatureStore

            options = self._options
            tables = {t: _as_table(v, f"({t!r}, {name!r})") for t, v in value.items()}
            store = HeteroFeatureStore(
                dict(tables), options["device"], options["cache_size"], options["policy"], options["graph"]
            )
            entries = self._typed_entries(name, store)
            for entry in entries.values():
                entry.tables = tables
            return entries
        return {t: self._entry(v, f"({t!r}, {name!r})") for t, v in tables.items()}

    # ------------------------------------------------------------------ PyG's FeatureStore API
    # PyG's TensorAttr compares its fields with ``!=``, which a NumPy index (a bool mask included)
    # cannot answer: such an index is handed on as the torch tensor it stands for.
    def get_tensor(self, *args, **kwargs):
        return super().get_tensor(*_torch_index(args, kwargs), **kwargs)

    def put_tensor(self, tensor, *args, **kwargs) -> bool:
        return super().put_tensor(tensor, *_torch_index(args, kwargs), **kwargs)

    def get_tensor_size(self, *args, **kwargs):
        return super().get_tensor_size(*_torch_index(args, kwargs), **kwargs)

    def multi_get_tensor(self, attrs: list, convert_type: bool = False) -> list:
        """PyG's ``multi_get_tensor`` (what its loaders call once per batch), with the same
        ``ValueError`` for an attribute left unset. PyG tests each field with ``!=``, which on a
        tensor index is a failed elementwise comparison that Python then answers by identity
        (29 us for 53k ids, 1-3% of a loader batch); here the fields are compared by identity
        directly."""
        attrs = [self._tensor_attr_cls.cast(attr) for attr in attrs]
        bad_attrs = [attr for attr in attrs if any(getattr(attr, key) is _UNSET for key in attr.__dataclass_fields__)]
        if bad_attrs:
            raise ValueError(
                f"The input TensorAttr(s) '{bad_attrs}' are not fully specified. Please fully-specify them by "
                "specifying all 'UNSET' fields"
            )
        tensors = self._multi_get_tensor(attrs)
        if convert_type:
            tensors = [self._to_type(attr, tensor) for attr, tensor in zip(attrs, tensors)]
        return tensors

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        if attr.index is None or (isinstance(attr.index, slice) and attr.index == slice(None)):
            self._add(attr.group_name, attr.attr_name, tensor)
            return True
        key = (attr.group_name, attr.attr_name)
        what = f"({attr.group_name!r}, {attr.attr_name!r})"
        rows = _as_array(tensor, what)
        entry = self._entries.get(key)
        if entry is None:  # a new attribute: index gives each row's id, every id once
            ids = _index_ids(attr.index, len(rows) if rows.ndim else 0, what)
            if rows.ndim == 0 or len(ids) != len(rows) or np.bincount(ids, minlength=len(rows)).max(initial=1) != 1:
                raise ValueError(
                    f"put_tensor of a new attribute {what} with an index: index must list every row id 0 .. n-1 "
                    f"once for the n = {len(rows) if rows.ndim else 0} rows given"
                )
            table = np.empty_like(rows)
            table[ids] = rows
            self._add(attr.group_name, attr.attr_name, table)
            return True
        if entry.tables is None:
            raise TypeError(
                f"feature {what} is a feature source handed over as such ({type(entry.source).__name__}); its rows "
                "cannot be written: put a whole table (index=None) instead"
            )
        table = entry.tables if entry.owner is None else entry.tables[entry.node_type]
        ids = _index_ids(attr.index, table.shape[0], what)
        if entry.squeeze:
            rows = rows.reshape(-1, 1) if rows.ndim == 1 else rows
        expected = (len(ids), *table.shape[1:])
        if tuple(rows.shape) != expected:
            raise ValueError(f"put_tensor into {what}: rows must have shape {expected}, got {tuple(rows.shape)}")
        _check_cast(rows, table, what)
        if not entry.owned:  # never write into the caller's array
            table = table.copy()
        table[ids] = rows.astype(table.dtype, copy=False)
        self._rebuild(entry, table)
        return True

    def _rebuild(self, entry: _Entry, table) -> None:
        """Point ``entry`` (and its typed store's other types) at a store over the written table."""
        if entry.owner is None:
            entry.source = self._store(table, cache_size=0 if entry.squeeze else None)
            entry.tables, entry.owned = table, True
            return
        from ..feature import HeteroFeatureStore

        tables = dict(entry.tables)
        tables[entry.node_type] = table
        options = self._options
        store = HeteroFeatureStore(
            dict(tables), options["device"], options["cache_size"], options["policy"], options["graph"]
        )
        for other in self._entries.values():
            if other.owner is entry.owner:
                other.owner, other.source, other.tables = store, store.source(other.node_type), tables
                other.owned = other.owned or other.node_type == entry.node_type

    def _get_tensor(self, attr: TensorAttr):
        entry = self._lookup(attr)
        ids, scalar = _as_ids(attr.index)
        rows = entry.source.gather(ids)
        return _finish(rows, entry.squeeze, scalar)

    def _multi_get_tensor(self, attrs: list) -> list:
        out: list = [None] * len(attrs)
        typed: dict = {}  # owner -> {node_type: [(position, ids, scalar), ...]}
        for position, attr in enumerate(attrs):
            entry = self._lookup(attr)
            ids, scalar = _as_ids(attr.index)
            if entry.owner is None:
                out[position] = _finish(entry.source.gather(ids), entry.squeeze, scalar)
            else:
                typed.setdefault(id(entry.owner), (entry.owner, []))[1].append((position, entry, ids, scalar))
        for owner, asks in typed.values():
            if len({entry.node_type for _, entry, _, _ in asks}) < len(asks):  # one type asked twice
                for position, entry, ids, scalar in asks:
                    out[position] = _finish(entry.source.gather(ids), False, scalar)
                continue
            rows = owner.gather({entry.node_type: ids for _, entry, ids, _ in asks})
            for position, entry, _, scalar in asks:
                out[position] = _finish(rows[entry.node_type], False, scalar)
        return out

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        return self._entries.pop((attr.group_name, attr.attr_name), None) is not None

    def _get_tensor_size(self, attr: TensorAttr):
        entry = self._entries.get((attr.group_name, attr.attr_name))
        if entry is None:
            return None
        shape = tuple(int(n) for n in getattr(entry.source, "shape", (len(entry.source),)))
        shape = shape[:1] if entry.squeeze else shape
        if attr.index is not None and not (isinstance(attr.index, slice) and attr.index == slice(None)):
            ids, scalar = _as_ids(attr.index)  # the size get_tensor(attr) returns
            count = len(range(shape[0])[ids]) if isinstance(ids, slice) else int(np.size(to_numpy(ids)))
            shape = shape[1:] if scalar else (count, *shape[1:])
        return shape

    def get_all_tensor_attrs(self) -> list:
        return [TensorAttr(group, name) for group, name in self._entries]

    # ------------------------------------------------------------------ gglspeedup's view
    def source(self, attr_name: str = "x", group_name=None):
        """The gglspeedup feature source behind ``(group_name, attr_name)``."""
        return self._lookup(TensorAttr(group_name, attr_name)).source

    def stats(self) -> dict:
        """Lookup counters of every attribute's source: ``attr_name`` (untyped) or ``(node_type,
        attr_name)`` -> that source's ``stats()`` (rows from the device cache and from host
        memory, hit rate, ...)."""
        return {
            name if group is None else (group, name): entry.source.stats()
            for (group, name), entry in self._entries.items()
            if hasattr(entry.source, "stats")
        }

    def __repr__(self) -> str:
        names = [name if group is None else (group, name) for group, name in self._entries]
        return f"{type(self).__name__}(attrs={names})" if names else f"{type(self).__name__}()"

    def _lookup(self, attr) -> _Entry:
        entry = self._entries.get((attr.group_name, attr.attr_name))
        if entry is None:
            known = [name if group is None else (group, name) for group, name in self._entries]
            raise KeyError(
                f"no feature ({attr.group_name!r}, {attr.attr_name!r}) in this FeatureStore; it holds {known}"
            )
        return entry


def _split_key(key) -> tuple:
    if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], str)):
        raise TypeError(f"features' keys must be an attribute name or a (node_type, attribute name) pair, got {key!r}")
    return key


def _is_source(value) -> bool:
    """A gglspeedup feature source (``gather`` and ``stats``: not a tensor, whose ``gather`` differs)."""
    return hasattr(value, "gather") and hasattr(value, "stats") and not isinstance(value, torch.Tensor)


def _is_typed_store(value) -> bool:
    return _is_source(value) and hasattr(value, "feature_types") and hasattr(value, "source")


def _as_ids(index):
    """``(ids for gather, whether one row was asked as a scalar)``."""
    if index is None:
        return slice(None), False
    if isinstance(index, (int, np.integer)):
        return [int(index)], True
    if isinstance(index, torch.Tensor):
        if index.dtype == torch.bool:
            return index.nonzero().view(-1), False
        return (index.view(-1), True) if index.dim() == 0 else (index, False)
    if isinstance(index, np.ndarray) and index.dtype == np.bool_:
        return np.flatnonzero(index), False
    return index, False


def _torch_index(args: tuple, kwargs: dict) -> tuple:
    """``args`` with a NumPy ``index`` (positional, keyword or in a TensorAttr) as a torch tensor;
    ``kwargs`` is updated in place."""
    if isinstance(kwargs.get("index"), np.ndarray):
        kwargs["index"] = torch.from_numpy(np.ascontiguousarray(kwargs["index"]))
    args = list(args)
    if len(args) >= 3 and isinstance(args[2], np.ndarray):
        args[2] = torch.from_numpy(np.ascontiguousarray(args[2]))
    if args and isinstance(args[0], TensorAttr) and isinstance(args[0].index, np.ndarray):
        args[0] = copy.copy(args[0])
        args[0].index = torch.from_numpy(np.ascontiguousarray(args[0].index))
    return tuple(args)


def _as_array(value, what: str) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if "bfloat16" in str(getattr(value, "dtype", "")):  # NumPy has none: ml_dtypes' over the same bits
        from .._bfloat16 import bfloat16_table

        return bfloat16_table(value)
    try:
        return to_numpy(value)
    except (TypeError, ValueError) as error:
        raise TypeError(f"feature {what} must be an array or a tensor, got {type(value).__name__}: {error}") from None


def _as_table(value, what: str) -> np.ndarray:
    """``value`` as the array of a table: torch tensors cannot hold swapped bytes, so a big-endian
    array is refused here rather than at every lookup."""
    array = _as_array(value, what)
    if not array.dtype.isnative:
        raise TypeError(
            f"feature {what} has dtype {array.dtype}, whose bytes are swapped (big-endian), and torch holds native "
            "byte order only: convert it first, e.g. array.astype(array.dtype.newbyteorder('='))"
        )
    return array


def _check_cast(rows: np.ndarray, table: np.ndarray, what: str) -> None:
    """Rows written into ``table`` keep their values: float rows into an int or bool table (or int
    rows into a bool one) would be truncated, int rows beyond an int table's range wrapped."""
    src, dst = rows.dtype, table.dtype
    if (src.kind in "fc" and dst.kind in "iub") or (src.kind in "iu" and dst.kind == "b"):
        raise TypeError(f"put_tensor into {what}: rows of dtype {src} cannot be written into its {dst} rows")
    if src.kind in "iu" and dst.kind in "iu" and rows.size:
        info = np.iinfo(dst)
        if rows.min() < info.min or rows.max() > info.max:
            raise ValueError(
                f"put_tensor into {what}: rows must fit in its {dst} rows [{info.min}, {info.max}], got values in "
                f"[{rows.min()}, {rows.max()}]"
            )


def _index_ids(index, num_rows: int, what: str) -> np.ndarray:
    """``index`` of a put as int64 host ids in ``[0, num_rows)`` (a bool mask: its true rows)."""
    ids, _ = _as_ids(index)
    if isinstance(ids, slice):
        return np.arange(num_rows, dtype=np.int64)[ids]
    ids = np.asarray(to_numpy(ids) if not isinstance(ids, (list, np.ndarray)) else ids)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"index of {what} must hold integer row ids or be a bool mask, got dtype {ids.dtype}")
    ids = ids.reshape(-1)
    beyond = uint64_beyond_int64(ids)  # the int64 cast would wrap it negative
    if beyond is not None:
        raise IndexError(f"index of {what} must lie in [0, {num_rows}): index[{beyond[0]}] = {ids[beyond]}")
    ids = ids.astype(np.int64, copy=False)
    if ids.size and (ids.min() < 0 or ids.max() >= num_rows):
        position = int(np.argmax((ids < 0) | (ids >= num_rows)))
        raise IndexError(f"index of {what} must lie in [0, {num_rows}): index[{position}] = {ids[position]}")
    return ids


def _finish(rows, squeeze: bool, scalar: bool):
    tensor = to_torch(rows)
    if squeeze:
        tensor = tensor.view(-1)
    return tensor[0] if scalar else tensor
