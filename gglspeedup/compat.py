"""The original gglspeedup names, as thin wrappers over the modern API.

They behave as the original project's README shows::

    csr = sp.csr_matrix((np.ones(E), (edge_index[0], edge_index[1])))   # row u: targets of u's edges
    cgpu_feat = CGPUFeature(csr, 0, "0.1G")
    cgpu_feat.from_cpu_tensor(x)
    sampler = GPUSampler(0, csr)
    sampler.set_size([25, 10])
    for seed in train_loader:
        all_node, adjs = sampler.sample(seed)
        cur_feat = cgpu_feat[all_node]
        adjs = [adj.cp2torch() for adj in adjs]

Differences from the original, all deliberate: a scipy matrix keeps the original's row semantics
(``CSRGraph.from_scipy``: row ``u`` of the matrix is the neighbour list sampled for ``u``);
sampling is seeded (``seed=0`` unless given) instead of drawing a fresh random state; sizes default
to ``[25, 10]`` (every example in that README), so ``sample`` works before ``set_size``; calling
``set_size`` again (the multi-GPU example does, every epoch) keeps advancing the batch key
(:meth:`NeighborSampler.with_fanouts`), so epochs still differ.

Devices: an int ``>= 0`` means a CUDA device, ``-1`` (GammaGL's convention) or ``"cpu"`` the CPU,
which runs the same code. A CUDA device this machine cannot use raises
:class:`~gglspeedup.DeviceUnavailableError` (a ``RuntimeError``) in the constructor, for every name
here. A script written for GPUs runs on the CPU with only its device arguments changed
(``MultiGPUSampler(-1, csr)``, ``Multi_CGPUFeature(rank, [-1, -1], "0.1G", csr)``): CPU outputs
(``all_node``, feature rows) are NumPy arrays that also answer CuPy's ``toDlpack()``, so the
original ``from_dlpack(x.toDlpack())`` lines keep working, and a CPU ``MultiGPUSampler`` serves as
many ranks as the spawn starts.
"""

from __future__ import annotations

import numpy as np

from .device import aligned_empty, as_device, parse_size
from .graph import as_csr_graph
from .validation import check_fanouts, check_int

__all__ = [
    "GPUSampler",
    "CGPUFeature",
    "MultiGPUSampler",
    "Multi_CGPUFeature",
    "DEFAULT_SIZES",
    "HostArray",
    "as_compat_device",
]

DEFAULT_SIZES = (25, 10)


def as_compat_device(device):
    """``device`` as a :class:`~gglspeedup.Device`: ``-1`` is the CPU (GammaGL's convention), an
    int ``>= 0`` a CUDA device; a CUDA device this process cannot use raises
    :class:`~gglspeedup.DeviceUnavailableError` now.

    >>> as_compat_device(-1), as_compat_device("cpu")
    (Device(type='cpu', index=0), Device(type='cpu', index=0))
    """
    if isinstance(device, (int, np.integer)) and not isinstance(device, bool) and device == -1:
        return as_device("cpu")
    return as_device(device).check_available()


class HostArray(np.ndarray):
    """A NumPy array that also has CuPy's ``toDlpack()``: the seed scripts' ``x.toDlpack()`` on CPU outputs.

    >>> import numpy as np
    >>> capsule = np.arange(3).view(HostArray).toDlpack()
    >>> type(capsule).__name__
    'PyCapsule'
    """

    def toDlpack(self):  # CuPy's name, called by the original scripts
        """A DLPack capsule of these elements (64-byte aligned and C-contiguous, as every framework
        accepts; copied only when this array is not).

        A bfloat16 array (``ml_dtypes``, as a bfloat16 feature table's rows come back) is exported
        as DLPack's bfloat16 over the same bits, through torch (NumPy's export has no bfloat16;
        without torch a ``TypeError`` says so). Arrays DLPack cannot carry raise a ``TypeError``
        naming the dtype, as :func:`gglspeedup.backends.to` does: swapped bytes (big-endian;
        DLPack carries native byte order only) and strings, objects, dates and records.
        """
        array = self.view(np.ndarray)
        dtype = array.dtype
        bfloat16 = dtype.name == "bfloat16"
        if not bfloat16:
            _check_dlpack_dtype(dtype)
        if not array.flags.c_contiguous or array.ctypes.data % 64:
            copy = aligned_empty(array.shape, array.dtype)
            copy[...] = array
            array = copy
        if bfloat16:
            return _bfloat16_capsule(array)
        return array.__dlpack__()


def _check_dlpack_dtype(dtype: np.dtype) -> None:
    """Raise ``TypeError`` naming ``dtype`` when a DLPack capsule cannot carry it (NumPy's
    ``BufferError`` named neither the array nor a way out)."""
    if not dtype.isnative:
        raise TypeError(
            f"toDlpack() cannot export a HostArray of dtype {dtype}: its bytes are swapped (big-endian) "
            "and DLPack carries native byte order only; convert it first, e.g. "
            "array.astype(array.dtype.newbyteorder('='))"
        )
    if dtype.kind not in "biufc":
        raise TypeError(
            f"toDlpack() cannot export a HostArray of dtype {dtype}: DLPack carries bool, signed and "
            "unsigned integer, float (float16/32/64, bfloat16) and complex arrays only; encode strings, "
            "objects, dates and records as numbers first"
        )


def _bfloat16_capsule(array: np.ndarray):
    """A DLPack bfloat16 capsule over ``array``'s bits (C-contiguous ``ml_dtypes.bfloat16``), made by
    torch: NumPy exports no bfloat16, and torch (the seed scripts' ``from_dlpack``) reads it."""
    from . import _config

    if not _config.HAS_TORCH:
        raise TypeError(
            "toDlpack() of a bfloat16 HostArray needs torch (NumPy's DLPack export has no bfloat16): "
            "pip install torch, or export array.view(numpy.uint16) and reinterpret the bits"
        )
    import torch

    # Zero-copy: the int16 view shares the array's memory, and the capsule keeps the tensor alive.
    return torch.from_dlpack(array.view(np.int16)).view(torch.bfloat16).__dlpack__()


def _with_to_dlpack(array):
    """``array`` with a ``toDlpack()`` method: host arrays viewed as :class:`HostArray`, CuPy as is."""
    return array.view(HostArray) if type(array) is np.ndarray else array


def _with_to_dlpack_ids(out):
    """A sampler output whose ``n_id`` (the seed API's ``all_node``) answers ``toDlpack()``."""
    return out._replace(n_id=_with_to_dlpack(out.n_id))


class GPUSampler:
    """``GPUSampler(device, csr)``: a :class:`~gglspeedup.NeighborSampler` on one device.

    Parameters
    ----------
    device : int, str or device object
        ``0`` / ``"cuda:0"`` for a GPU, ``-1`` / ``"cpu"`` for the CPU path.
    csr : scipy sparse matrix or CSRGraph
    seed : int
        Seeds the sampler (the original drew a fresh random state per batch).
    """

    def __init__(self, device, csr, *, seed: int = 0, **sampler_options):
        from .sampling import NeighborSampler

        self.csr = csr
        self.device = as_compat_device(device)
        self._sampler = NeighborSampler(
            as_csr_graph(csr), list(DEFAULT_SIZES), seed=seed, device=self.device, **sampler_options
        )

    @property
    def sizes(self) -> list:
        return list(self._sampler.fanouts)

    def set_size(self, sizes) -> None:
        """Fanouts per hop, seed hop first (``[25, 10]``); checked now, used by the next ``sample``.

        The placed graph is kept and the batch counter continues (no replayed epochs).
        """
        self._sampler = self._sampler.with_fanouts(check_fanouts(sizes, name="sizes"))

    def sample(self, seeds):
        """``(all_node, adjs)``: all touched nodes (seeds first) and one ``Adj`` per hop, outermost first."""
        return _with_to_dlpack_ids(self._sampler.sample(seeds))


class _FilledLater:
    """A feature table given later, by ``from_cpu_tensor(x)``: the subclass's ``_build(x, graph)``
    makes it (``graph``: its ``csr`` as a :class:`~gglspeedup.CSRGraph`, or ``None``) and keeps it
    in the attribute named by ``_table``."""

    _table: str

    def from_cpu_tensor(self, x):
        graph = None if self.csr is None else as_csr_graph(self.csr)
        setattr(self, self._table, self._build(x, graph))
        return self

    def _built(self):
        table = getattr(self, self._table)
        if table is None:
            raise RuntimeError("call from_cpu_tensor(x) before reading rows")
        return table

    @property
    def shape(self) -> tuple:
        return self._built().shape


class CGPUFeature(_FilledLater):
    """``CGPUFeature(csr, device, cache_size)``: a :class:`~gglspeedup.FeatureStore` filled later.

    ``from_cpu_tensor(x)`` builds the store: the rows of the highest-degree nodes of ``csr`` (row
    lengths) fill a device cache of ``cache_size`` bytes (``"0.1G"``), the rest stay in pinned host
    memory. ``feature[ids]`` returns ``x[ids]`` on ``device``.
    """

    def __init__(self, csr, device, cache_size="0.1G"):
        self.csr = csr
        self.device = as_compat_device(device)
        parse_size(cache_size, "cache_size")  # a bad budget fails here, not at from_cpu_tensor
        self.cache_size = cache_size
        self.store = None

    _table = "store"

    def _build(self, x, graph):
        from .feature import FeatureStore

        return FeatureStore(x, device=self.device, cache_size=self.cache_size, graph=graph)

    def __getitem__(self, ids):
        return _with_to_dlpack(self._built()[ids])

    def stats(self) -> dict:
        return self._built().stats()


def _visible_devices(device, num_ranks):
    """One device per rank: ``cuda:0 ..`` for every visible GPU (or ``num_ranks`` of them), or
    ``num_ranks`` CPU ranks (one without it: a CPU sampler adds ranks as they are asked for)."""
    device = as_compat_device(device)
    if num_ranks is not None:
        count = check_int("num_ranks", num_ranks, minimum=1)
    elif device.is_cuda and not device.simulated:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    else:
        count = 1
    if not device.is_cuda:
        return ["cpu"] * count
    devices = [as_device(f"cuda:{i}") for i in range(count)]
    if not device.simulated:
        for rank, each in enumerate(devices):
            try:
                each.check_available()
            except RuntimeError as error:
                raise type(error)(f"num_ranks={count} needs a CUDA device per rank; rank {rank}: {error}") from None
    return devices


class MultiGPUSampler:
    """``MultiGPUSampler(device, csr)``: one sampler per rank, picklable for ``spawn``.

    Rank ``r`` samples on ``cuda:r`` (as the original did) or, for ``device="cpu"`` / ``-1``, on
    the CPU. Built on a :class:`~gglspeedup.MultiDeviceSampler` over every visible GPU (or
    ``num_ranks`` devices); the graph is shared, not copied, with spawned processes. A CPU sampler
    built without ``num_ranks`` serves any rank ``>= 0`` (each rank its own seed stream, as
    :func:`~gglspeedup.multigpu.rank_seed` gives), so a spawn of any size works unchanged; with
    ``num_ranks`` a rank beyond it raises ``IndexError``.
    """

    def __init__(self, device, csr, *, seed: int = 0, num_ranks=None, **sampler_options):
        from .multigpu import MultiDeviceSampler

        self.csr = None  # the graph travels in shared memory inside the multi-device sampler
        self.device = as_compat_device(device)
        self._open_cpu_ranks = not self.device.is_cuda and num_ranks is None
        self._multi = MultiDeviceSampler(
            as_csr_graph(csr), _visible_devices(device, num_ranks), list(DEFAULT_SIZES), seed=seed, **sampler_options
        )

    @property
    def sizes(self) -> list:
        return list(self._multi.fanouts)

    def set_size(self, sizes) -> None:
        """Fanouts per hop, seed hop first, as for :meth:`GPUSampler.set_size`."""
        self._multi.set_fanouts(check_fanouts(sizes, name="sizes"))

    def sample(self, seeds, rank: int):
        """``(all_node, adjs)`` for ``seeds`` on rank ``rank``'s device."""
        rank = check_int("rank", rank, minimum=0)
        if self._open_cpu_ranks and rank >= self._multi.num_devices:
            return _with_to_dlpack_ids(self._cpu_rank(rank).sample(seeds))
        return _with_to_dlpack_ids(self._multi.sample(seeds, rank))

    def _cpu_rank(self, rank: int):
        """Another CPU rank's sampler over the shared graph, built on first use among the
        multi-device sampler's ranks (so ``set_size`` reaches it). Its device list is not grown to
        ``rank + 1`` entries: that cost memory and pickled bytes in proportion to the rank number."""
        multi = self._multi
        with multi._lock:
            built = multi._samplers
            if rank not in built:
                built[rank] = multi._new_sampler(rank, multi.devices[0])
            return built[rank]


class Multi_CGPUFeature(_FilledLater):
    """``Multi_CGPUFeature(rank, device_list, cache_size, csr)``: one feature cache per device.

    ``from_cpu_tensor(x)`` builds a :class:`~gglspeedup.MultiDeviceFeature` (the table goes to shared
    memory once; each process builds its device's cache lazily). ``feature[ids]`` serves the rank
    whose device holds ``ids`` (as the original did), else the process's rank
    (``set_rank``, ``LOCAL_RANK``, ``torch.distributed``, Paddle's variables), else ``rank``, which
    must index ``device_list`` (``IndexError``). With CPU devices only (``[-1, -1]``) every process
    reads the one shared host table, whatever its rank (``rank`` included).
    """

    def __init__(self, rank, device_list, cache_size="0.1G", csr=None):
        self.rank = check_int("rank", rank, minimum=0)
        if isinstance(device_list, (str, bytes, int)) or not hasattr(device_list, "__iter__"):
            raise TypeError(
                f"device_list must be a list of devices (e.g. ['cuda:0', 'cuda:1'] or ['cpu']), got {device_list!r}"
            )
        self.device_list = [as_compat_device(device) for device in device_list]
        if not self.device_list:
            raise ValueError("device_list must name at least one device, got an empty list")
        num_devices = len(self.device_list)
        if self.rank >= num_devices and any(device.is_cuda for device in self.device_list):
            # the rank picks a device: refused now, not at the first lookup after from_cpu_tensor
            raise IndexError(
                f"rank must be in [0, {num_devices}) (one rank per device of device_list, {num_devices} devices), "
                f"got {self.rank}"
            )
        parse_size(cache_size, "cache_size")  # a bad budget fails here, not at from_cpu_tensor
        self.cache_size = cache_size
        self.csr = csr
        self.feature = None

    _table = "feature"

    def _build(self, x, graph):
        from .multigpu import MultiDeviceFeature

        feature = MultiDeviceFeature(x, self.device_list, cache_size=self.cache_size, graph=graph)
        self.csr = None  # the cache order is computed; the graph need not travel with the feature
        return feature

    def __getitem__(self, ids):
        feature = self._built()
        if not any(device.is_cuda for device in feature.devices):
            rank = 0  # CPU ranks all read the one shared host table: any spawn size, the same rows
        else:
            try:
                rank = feature.current_rank(ids)
            except RuntimeError:
                rank = self.rank
        return _with_to_dlpack(feature.rank(rank)[ids])
