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
(:meth:`NeighborSampler.with_fanouts`), so epochs still differ; an int device means a CUDA device,
and ``"cpu"`` runs the same code on the CPU.
"""

from __future__ import annotations

from .device import as_device, parse_size
from .graph import as_csr_graph
from .validation import check_int

__all__ = ["GPUSampler", "CGPUFeature", "MultiGPUSampler", "Multi_CGPUFeature", "DEFAULT_SIZES"]

DEFAULT_SIZES = (25, 10)


class GPUSampler:
    """``GPUSampler(device, csr)``: a :class:`~gglspeedup.NeighborSampler` on one device.

    Parameters
    ----------
    device : int, str or device object
        ``0`` / ``"cuda:0"`` for a GPU, ``"cpu"`` for the CPU path.
    csr : scipy sparse matrix or CSRGraph
    seed : int
        Seeds the sampler (the original drew a fresh random state per batch).
    """

    def __init__(self, device, csr, *, seed: int = 0, **sampler_options):
        from .sampling import NeighborSampler

        self.csr = csr
        self.device = as_device(device)
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
        self._sampler = self._sampler.with_fanouts(list(sizes))

    def sample(self, seeds):
        """``(all_node, adjs)``: all touched nodes (seeds first) and one ``Adj`` per hop, outermost first."""
        return self._sampler.sample(seeds)


class CGPUFeature:
    """``CGPUFeature(csr, device, cache_size)``: a :class:`~gglspeedup.FeatureStore` filled later.

    ``from_cpu_tensor(x)`` builds the store: the rows of the highest-degree nodes of ``csr`` (row
    lengths) fill a device cache of ``cache_size`` bytes (``"0.1G"``), the rest stay in pinned host
    memory. ``feature[ids]`` returns ``x[ids]`` on ``device``.
    """

    def __init__(self, csr, device, cache_size="0.1G"):
        self.csr = csr
        self.device = as_device(device)
        parse_size(cache_size)  # a bad budget fails here, not at from_cpu_tensor
        self.cache_size = cache_size
        self.store = None

    def from_cpu_tensor(self, x) -> CGPUFeature:
        from .feature import FeatureStore

        graph = None if self.csr is None else as_csr_graph(self.csr)
        self.store = FeatureStore(x, device=self.device, cache_size=self.cache_size, graph=graph)
        return self

    def _built(self):
        if self.store is None:
            raise RuntimeError("call from_cpu_tensor(x) before reading rows")
        return self.store

    def __getitem__(self, ids):
        return self._built()[ids]

    @property
    def shape(self) -> tuple:
        return self._built().shape

    def stats(self) -> dict:
        return self._built().stats()


def _visible_devices(device, num_ranks):
    device = as_device(device)
    if num_ranks is not None:
        count = check_int("num_ranks", num_ranks, minimum=1)
    elif device.is_cuda and not device.simulated:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    else:
        count = 1
    kind = "cuda" if device.is_cuda else "cpu"
    return [f"cuda:{i}" if kind == "cuda" else "cpu" for i in range(count)]


class MultiGPUSampler:
    """``MultiGPUSampler(device, csr)``: one sampler per rank, picklable for ``spawn``.

    Rank ``r`` samples on ``cuda:r`` (as the original did) or, for ``device="cpu"``, on the CPU.
    Built on a :class:`~gglspeedup.MultiDeviceSampler` over every visible GPU (or ``num_ranks``
    devices); the graph is shared, not copied, with spawned processes.
    """

    def __init__(self, device, csr, *, seed: int = 0, num_ranks=None, **sampler_options):
        from .multigpu import MultiDeviceSampler

        self.csr = None  # the graph travels in shared memory inside the multi-device sampler
        self.device = as_device(device)
        self._multi = MultiDeviceSampler(
            as_csr_graph(csr), _visible_devices(device, num_ranks), list(DEFAULT_SIZES), seed=seed, **sampler_options
        )

    @property
    def sizes(self) -> list:
        return list(self._multi.fanouts)

    def set_size(self, sizes) -> None:
        self._multi.set_fanouts(list(sizes))

    def sample(self, seeds, rank: int):
        """``(all_node, adjs)`` for ``seeds`` on rank ``rank``'s device."""
        return self._multi.sample(seeds, rank)


class Multi_CGPUFeature:
    """``Multi_CGPUFeature(rank, device_list, cache_size, csr)``: one feature cache per device.

    ``from_cpu_tensor(x)`` builds a :class:`~gglspeedup.MultiDeviceFeature` (the table goes to shared
    memory once; each process builds its device's cache lazily). ``feature[ids]`` serves the rank
    whose device holds ``ids`` (as the original did), else the process's rank
    (``set_rank``, ``LOCAL_RANK``, ``torch.distributed``, Paddle's variables), else ``rank``.
    """

    def __init__(self, rank, device_list, cache_size="0.1G", csr=None):
        self.rank = check_int("rank", rank, minimum=0)
        if isinstance(device_list, (str, bytes, int)) or not hasattr(device_list, "__iter__"):
            raise TypeError(
                f"device_list must be a list of devices (e.g. ['cuda:0', 'cuda:1'] or ['cpu']), got {device_list!r}"
            )
        self.device_list = list(device_list)
        if not self.device_list:
            raise ValueError("device_list must name at least one device, got an empty list")
        parse_size(cache_size)  # a bad budget fails here, not at from_cpu_tensor
        self.cache_size = cache_size
        self.csr = csr
        self.feature = None

    def from_cpu_tensor(self, x) -> Multi_CGPUFeature:
        from .multigpu import MultiDeviceFeature

        graph = None if self.csr is None else as_csr_graph(self.csr)
        self.feature = MultiDeviceFeature(x, self.device_list, cache_size=self.cache_size, graph=graph)
        self.csr = None  # the cache order is computed; the graph need not travel with the feature
        return self

    def _built(self):
        if self.feature is None:
            raise RuntimeError("call from_cpu_tensor(x) before reading rows")
        return self.feature

    def __getitem__(self, ids):
        feature = self._built()
        try:
            rank = feature.current_rank(ids)
        except RuntimeError:
            rank = self.rank
        return feature.rank(rank)[ids]

    @property
    def shape(self) -> tuple:
        return self._built().shape
