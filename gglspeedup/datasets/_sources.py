"""Edge (and weight) sources for :func:`~gglspeedup.datasets.build_csr`: chunks, read piece by piece.

Every source hands out :class:`Chunk` records: a ``(2, k)`` integer array (or a 1-D weight array)
of at most :data:`SLICE` entries, with the number of the source chunk it came from, its offset in
that chunk and its first edge's position in the whole stream (for error messages and edge ids).
A source is *re-iterable* when ``chunks()`` can be called again (arrays in memory, ``.npy``
files); the others (generators, a gzipped CSV) are copied once to ``.npy`` files by
:meth:`Source.spill_to` and re-read from there.
"""

from __future__ import annotations

import gzip
import os
import warnings
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import numpy as np

from ..validation import ragged_message, uint64_beyond_int64

__all__ = ["Chunk", "Source", "as_source", "SLICE"]

SLICE = 1 << 23  # entries per chunk handed out: big source chunks are cut into slices this long
_CSV_BLOCK = 64 << 20  # bytes of decompressed CSV parsed at a time
_INT32_MAX = int(np.iinfo(np.int32).max)


class Chunk(NamedTuple):
    index: int  # which chunk of the source (0-based)
    offset: int  # position of data's first entry within that source chunk
    start: int  # position of data's first entry in the whole stream
    data: np.ndarray  # (2, k) ints, or (k,) weights

    @property
    def size(self) -> int:
        return int(self.data.shape[-1])


class Source:
    """Chunks of one kind (``"edges"``: (2, k) ints, or ``"weights"``: (k,) floats)."""

    reiterable = True
    dtype = None
    slice_edges = SLICE  # entries per chunk handed out (build_csr lowers it under a small budget)

    def __init__(self, name: str, kind: str):
        self.name, self.kind = name, kind

    def pieces(self) -> Iterator[np.ndarray]:  # pragma: no cover - every source overrides it
        raise NotImplementedError

    def chunks(self) -> Iterator[Chunk]:
        start = 0
        for index, piece in enumerate(self.pieces()):
            piece = self._checked(index, piece)
            length = piece.shape[-1]
            for offset in range(0, max(length, 1), self.slice_edges):
                data = piece[..., offset : offset + self.slice_edges]
                if data.shape[-1] or length == 0:
                    yield Chunk(index, offset, start + offset, np.ascontiguousarray(data))
            start += length

    def _checked(self, index: int, piece) -> np.ndarray:
        where = f"{self.name} chunk {index}"
        piece = _as_array(where, piece, self.kind)
        if self.kind == "edges":
            if piece.dtype.kind not in "iu" or piece.ndim != 2 or piece.shape[0] != 2:
                raise ValueError(f"{where} must be a (2, k) integer array, got {piece.dtype} {piece.shape}")
            if piece.dtype not in (np.int32, np.int64):
                if uint64_beyond_int64(piece) is not None:
                    raise ValueError(f"{where} holds ids that do not fit in int64")
                piece = piece.astype(np.int64)
            return piece
        if piece.dtype.kind not in "fiu" or piece.ndim != 1:
            raise ValueError(f"{where} must be a 1-D float array, got {piece.dtype} {piece.shape}")
        dtype = piece.dtype if piece.dtype in (np.float32, np.float64) else np.dtype(np.float64)
        if self.dtype is None:
            self.dtype = dtype
        elif dtype != self.dtype:
            raise ValueError(f"{where} is {dtype}, but earlier chunks are {self.dtype}: give one dtype")
        return piece.astype(dtype, copy=False)

    def spill_to(self, folder: str, prefix: str = "e") -> Spill:
        return Spill(folder, prefix, self)


def _as_array(where: str, piece, kind: str) -> np.ndarray:
    """``piece`` as a NumPy array, or ``ValueError`` naming the chunk when it is ragged (NumPy
    says only "inhomogeneous shape"): a ``(src, dst)`` pair of unequal lengths, or rows that differ."""
    from ..device import to_numpy

    if isinstance(piece, np.ndarray):
        return piece
    try:
        return to_numpy(piece)
    except ValueError:
        if not isinstance(piece, (list, tuple)):
            raise
    lengths = [len(row) if hasattr(row, "__len__") else None for row in piece]
    expected = "a (2, k) integer array ([sources; targets])" if kind == "edges" else "a 1-D float array"
    if kind == "edges" and len(piece) == 2 and None not in lengths:
        raise ValueError(
            f"{where} must be {expected}: its (src, dst) rows have unequal lengths {lengths[0]} and {lengths[1]} "
            f"(shapes ({lengths[0]},) and ({lengths[1]},))"
        ) from None
    raise ValueError(ragged_message(where, piece, expected)) from None


class ArraysSource(Source):
    """A list or tuple of arrays (or tensors) already in memory."""

    def __init__(self, name, kind, arrays):
        super().__init__(name, kind)
        self.arrays = arrays

    def pieces(self):
        return iter(self.arrays)


class IterableSource(Source):
    """Any other iterable of arrays: read once (a generator cannot be rewound), unless it says
    ``reiterable = True`` (each ``iter()`` starts it again, as the synthetic generators do)."""

    def __init__(self, name, kind, iterable):
        super().__init__(name, kind)
        self.iterable, self.used = iterable, False
        self.reiterable = getattr(iterable, "reiterable", False) is True

    def pieces(self):
        if self.used and not self.reiterable:
            raise RuntimeError(f"{self.name} is a one-pass iterable and was already read")
        self.used = True
        return iter(self.iterable)


class NpySource(Source):
    """``.npy`` files, each read slice by slice with plain reads (never memory-mapped whole, so the
    build's resident memory does not grow with the files)."""

    def __init__(self, name, kind, files):
        super().__init__(name, kind)
        self.files = [os.fspath(f) for f in files]
        for file in self.files:
            if not os.path.isfile(file):
                raise FileNotFoundError(f"{name}: {file!r} not found")

    def chunks(self):
        start = 0
        for index, file in enumerate(self.files):
            with open(file, "rb") as handle:
                try:
                    version = np.lib.format.read_magic(handle)
                    read = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shape, fortran, dtype = read(handle)
                except ValueError as error:
                    raise ValueError(f"{self.name} chunk {index} ({file!r}) is not a .npy file: {error}") from None
                base = handle.tell()
                length = shape[-1] if shape else 0
                rows = 2 if self.kind == "edges" else 1
                expected = (2, length) if self.kind == "edges" else (length,)
                if tuple(shape) != expected or dtype.hasobject:
                    self._checked(index, np.empty(shape if not dtype.hasobject else (0,), dtype))
                    raise ValueError(f"{self.name} chunk {index} ({file!r}) has shape {shape}")
                if os.fstat(handle.fileno()).st_size < base + rows * length * dtype.itemsize:
                    raise ValueError(f"{self.name} chunk {index} ({file!r}) is truncated")
                for offset in range(0, max(length, 1), self.slice_edges):
                    count = min(self.slice_edges, length - offset)
                    if count <= 0 and length:
                        break
                    data = self._read(handle, base, length, offset, count, dtype, fortran, rows)
                    yield Chunk(index, offset, start + offset, self._checked(index, data))
                start += length

    @staticmethod
    def _read(handle, base, length, offset, count, dtype, fortran, rows):
        size = dtype.itemsize
        if rows == 1:
            handle.seek(base + offset * size)
            return np.fromfile(handle, dtype, count)
        if fortran:  # pairs interleaved: [u0, v0, u1, v1, ...]
            handle.seek(base + 2 * offset * size)
            return np.fromfile(handle, dtype, 2 * count).reshape(count, 2).T
        out = np.empty((2, count), dtype)
        for row in range(2):
            handle.seek(base + (row * length + offset) * size)
            out[row] = np.fromfile(handle, dtype, count)
        return out


class CSVSource(Source):
    """An OGB raw edge file (``edge.csv.gz``: ``src,dst`` per line), parsed block by block."""

    reiterable = False

    def __init__(self, name, file):
        super().__init__(name, "edges")
        self.file = file

    def pieces(self):
        opener = gzip.open if self.file.endswith(".gz") else open
        line = 0
        try:
            with opener(self.file, "rb") as handle:
                tail = b""
                while True:
                    block = handle.read(_CSV_BLOCK)
                    if not block:
                        break
                    block = tail + block
                    cut = block.rfind(b"\n") + 1
                    block, tail = block[:cut], block[cut:]
                    if block:
                        yield self._parse(block, line)
                        line += block.count(b"\n")
                if tail.strip():
                    yield self._parse(tail + b"\n", line)
        except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
            raise ValueError(f"{self.file!r} is not a readable edge file: {error}") from error

    def _parse(self, block: bytes, first_line: int) -> np.ndarray:
        lines = block.count(b"\n")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                values = np.fromstring(block.replace(b"\n", b","), dtype=np.int64, sep=",")
            except (ValueError, DeprecationWarning):
                values = np.empty(0, np.int64)
        if values.shape[0] != 2 * lines:
            raise ValueError(
                f"{self.file!r}: lines {first_line + 1}..{first_line + lines} must each hold two integers 'src,dst'"
            )
        return values.reshape(lines, 2).T


class Spill:
    """Copies a one-pass source's chunks to ``.npy`` files in ``folder`` during the first pass."""

    def __init__(self, folder: str, prefix: str, source: Source):
        os.makedirs(folder, exist_ok=True)
        self.folder, self.prefix, self.source = folder, prefix, source
        self.files: list[str] = []
        self.pending: list[np.ndarray] = []
        self.pending_size = 0

    def add(self, data: np.ndarray) -> None:
        if data.dtype == np.int64 and (data.size == 0 or (data.min() >= 0 and data.max() <= _INT32_MAX)):
            data = data.astype(np.int32)  # node ids that fit: half the scratch space and reads
        self.pending.append(data)
        self.pending_size += data.shape[-1]
        if self.pending_size >= self.source.slice_edges:
            self._flush()

    def _flush(self) -> None:
        if not self.pending:
            return
        dtype = np.result_type(*(p.dtype for p in self.pending))
        data = np.concatenate([p.astype(dtype, copy=False) for p in self.pending], axis=-1)
        file = os.path.join(self.folder, f"{self.prefix}{len(self.files):06d}.npy")
        np.save(file, data)
        self.files.append(file)
        self.pending, self.pending_size = [], 0

    def finish(self) -> NpySource:
        self._flush()
        spilled = NpySource(self.source.name, self.source.kind, self.files)
        spilled.dtype, spilled.slice_edges = self.source.dtype, self.source.slice_edges
        return spilled


def as_source(name: str, value, kind: str = "edges") -> Source:
    """The :class:`Source` for a ``build_csr`` argument: arrays, ``.npy`` files, an OGB folder or an
    iterable (see :func:`~gglspeedup.datasets.build_csr`)."""
    if isinstance(value, (str, os.PathLike)):
        folder = os.fspath(value)
        if kind == "edges" and os.path.isdir(folder):
            for candidate in (
                "edge.csv.gz",
                "edge.csv",
                os.path.join("raw", "edge.csv.gz"),
                os.path.join("raw", "edge.csv"),
            ):
                if os.path.isfile(os.path.join(folder, candidate)):
                    return CSVSource(name, os.path.join(folder, candidate))
            raise FileNotFoundError(f"{name}: {folder!r} holds no edge.csv.gz (nor raw/edge.csv.gz)")
        if folder.endswith(".npy"):
            return NpySource(name, kind, [folder])
        raise ValueError(f"{name} must be chunks, a list of .npy files or an OGB raw folder, got the path {folder!r}")
    if isinstance(value, np.ndarray) or hasattr(value, "__dlpack__"):
        raise TypeError(f"{name} must be chunks of edges (e.g. [edge_index]), not one array; wrap it in a list")
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (str, os.PathLike)) for v in value):
            return NpySource(name, kind, value)
        return ArraysSource(name, kind, value)
    if isinstance(value, Iterable):
        return IterableSource(name, kind, value)
    raise TypeError(
        f"{name} must be an iterable of arrays, a list of .npy files or a folder, got {type(value).__name__}"
    )
