"""What :class:`~gglspeedup.NeighborSampler` and :class:`~gglspeedup.HeteroNeighborSampler` share:
the constructor's parameters and their checks, the batch counter, pickling, cloning with other
fanouts and the link call's plumbing. The subclasses supply what differs as small hooks (the
graph's type, the fanouts' form, the driver)."""

from __future__ import annotations

import threading

from ..device import as_device
from ..validation import check_bool, check_int
from .common import _UINT64_LIMIT, BatchKeys, check_expand, check_flags, place_like, resolve_placement
from .temporal import Timeline, temporal_setup

__all__ = ["SamplerBase"]


class SamplerBase(BatchKeys):
    """The constructor and plumbing of both samplers (see :class:`~gglspeedup.NeighborSampler`
    for the parameters). Subclasses set :attr:`_TYPED` and define the hooks below."""

    _TYPED = False  # temporal_setup's typed graph (per-type node times, per-relation edge times)

    def __init__(
        self,
        graph,
        fanouts,
        *,
        replace: bool = False,
        weighted: bool = False,
        seed: int = 0,
        device="cpu",
        placement: str = "auto",
        expand: str = "all",
        disjoint: bool = False,
        node_time=None,
        edge_time=None,
        temporal_strategy: str = "uniform",
    ) -> None:
        graph = self._check_graph(graph)
        self.fanouts = self._check_fanouts(graph, fanouts)
        self.expand, self.replace, self.weighted, self.disjoint = check_flags(expand, replace, weighted, disjoint)
        self._check_replace(self.fanouts)
        self.seed = check_int("seed", seed, minimum=0, below=_UINT64_LIMIT)
        if self.weighted:
            self._check_weights(graph)
        graph, times, node_times, strategy = temporal_setup(
            graph, node_time, edge_time, temporal_strategy, self.weighted, typed=self._TYPED
        )
        self.disjoint = self.disjoint or times is not None  # temporal implies disjoint, as in PyG
        self.device = as_device(device).check_available()
        self.placement = resolve_placement(self.device, placement, self._csr(graph), self.weighted)
        self.graph = graph.to(self.device, self.placement)
        placed = None if times is None else place_like(self._csr(self.graph), times)
        self.timeline = None if times is None else Timeline(placed, node_times, strategy)
        self.num_nodes = self._node_counts(graph)
        self._key = 0
        self._lock = threading.Lock()
        self._plan_hops()
        self._driver = self._make_driver()

    # ------------------------------------------------------------------ hooks
    @staticmethod
    def _check_graph(graph):
        """``graph`` checked (and converted) for this sampler."""
        raise NotImplementedError

    @staticmethod
    def _check_fanouts(graph, fanouts):
        """``fanouts`` checked against ``graph`` (the checked graph)."""
        raise NotImplementedError

    def _check_replace(self, fanouts) -> None:
        """Refuse fanouts whose draws with replacement cannot fit (``check_replace_fanouts``)."""
        raise NotImplementedError

    @staticmethod
    def _check_weights(graph) -> None:
        """Refuse ``weighted=True`` for a graph without weights."""
        raise NotImplementedError

    @staticmethod
    def _csr(graph):
        """The CSRGraph that holds ``graph``'s arrays (a typed graph's stacked one)."""
        return graph

    @staticmethod
    def _node_counts(graph):
        return graph.num_nodes

    def _plan_hops(self) -> None:
        """Derive from :attr:`fanouts` what the driver calls need (after a change of fanouts too)."""

    def _make_driver(self):
        """The CPU or CUDA driver of this sampler (:mod:`.drivers`): the placed graph's records,
        built once."""
        raise NotImplementedError

    def _tree_stride(self) -> int:
        """The stride of a disjoint call's virtual ids: the node count (typed: the largest type's)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared
    @property
    def expand(self) -> str:
        """The hop rule, ``"all"`` or ``"new"``; may be set between calls (checked as at
        construction: a misspelt rule raises instead of sampling ``"all"``)."""
        return self._expand

    @expand.setter
    def expand(self, expand) -> None:
        self._expand = check_expand(expand)

    @property
    def disjoint(self) -> bool:
        """Whether every seed grows its own tree; may be set between calls (a bool, checked as at
        construction; a temporal sampler stays disjoint, as ``disjoint=False`` with times does:
        shared sampling would read no times at all)."""
        return self._disjoint

    @disjoint.setter
    def disjoint(self, disjoint) -> None:
        self._disjoint = check_bool("disjoint", disjoint) or getattr(self, "timeline", None) is not None

    @property
    def temporal(self) -> bool:
        """Whether this sampler filters by time (``node_time`` or ``edge_time`` given)."""
        return self.timeline is not None

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_lock"] = None
        state["_driver"] = None  # rebuilt on arrival: cheaper than pickling weight tables and maps
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._driver = self._make_driver()

    def _clone(self, cls, fanouts):
        """A ``cls`` like this sampler drawing ``fanouts`` (checked), sharing its placed graph and
        driver; its batch counter continues from this sampler's."""
        clone = cls.__new__(cls)
        clone.__dict__.update(self.__dict__)
        clone.fanouts = self._check_fanouts(self.graph, fanouts)
        clone._check_replace(clone.fanouts)
        clone._plan_hops()
        self._continue_keys(clone)
        return clone

    def _call_options(self, tree_time=None):
        """This call's :class:`~._kernels.records.SampleOptions`: the driver's record with the
        sampler's hop rule (:attr:`expand`), a disjoint sampler's stride and the trees' times
        ``tree_time`` (read per call: ``expand`` and ``disjoint`` may be set between calls)."""
        options = self._driver.options
        expand_new = self.expand == "new"
        if not (expand_new or self.disjoint):
            return options  # the driver's own record: nothing to replace, nothing to view again
        stride = self._tree_stride() if self.disjoint else 0
        seed_time = options.seed_time if tree_time is None or not stride else tree_time
        return options._replace(expand_new=expand_new, stride=stride, seed_time=seed_time)

    def _link_batch(self, call, pairs, labels, options: tuple, pair_time, check: bool, total_negatives=None):
        """``sample_links``' run: ``call`` the sampler's hooks (``links.UntypedLinks``,
        ``hetero_links.TypedLinks``, built from its public pieces), ``options`` ``(negatives,
        num_negatives, strict_negatives, exclude, key)``."""
        from .links import link_batch

        driver = self._driver
        return link_batch(call, driver, self._next_key, pairs, labels, *options, pair_time, check, total_negatives)
