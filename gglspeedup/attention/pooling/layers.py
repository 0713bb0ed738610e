"""Attention-pooling layers: :class:`AttentionPooling`, and attpool2's classes under its names.

:class:`AttentionPooling` is attpool2's attentional pooling (silent567/attpool2,
``FastFlexAddAttention``) with every head in one call: per node a score ``s = score(x)``
(one linear map per head) and a projection ``p = proj(x)``; the scores standardised inside each
graph (``(s - mean) / (std + 1e-7)``, unbiased ``std``); weights ``w = map(s)`` per graph
(:func:`~gglspeedup.attention.softmax`, :func:`~gglspeedup.attention.sparsemax` or
:func:`~gglspeedup.attention.gfusedmax`); and the output of graph ``g`` is ``sum_i w_i p_i``.
With ``heads = H`` the projection's columns are cut in ``H`` consecutive blocks
(``int(h * out / H) .. int((h + 1) * out / H)``, attpool2's ``MultipleAttention`` split) and
block ``h`` is pooled with head ``h``'s weights: ``AttentionPooling(..., heads=H)`` is
``MultipleAttention`` of ``H`` single-head layers, computed as one batch.

Differences from attpool2, on purpose: a one-node graph standardises to score 0 (attpool2 divides
0 by ``std = nan`` and returns NaN weights), and a graph whose scores are all equal gets a finite
gradient.

float16 and bfloat16 layers on the CPU (whose kernels compute in float32 or float64 only) compute
in float32: ``x`` and the parameters are widened exactly, and the output is the float32 result
rounded to the layer's dtype (gradients come back in the parameters' and ``x``'s dtype).

The attpool2 names (``FastFlexAddAttention``, ``MultipleAttention``, ``Softmax``,
``Sparsemax``, ``Gfusedmax`` and the rest of its ``torch_mapping`` classes) take its arguments
``(x, graph_size_list, edge_list)`` and keep its behaviour, ``lam or 1.0`` included, so its
scripts run with the import changed to ``from gglspeedup.attention import ...``.
"""

from __future__ import annotations

import numpy as np
import torch

from ...device import reject_meta
from ...validation import check_int
from ._layer import linear_parameters
from ._state import check_stored, per_head
from .batch import GraphBatch, graph_batch
from .maps import gfusedmax, softmax, sparsemax

__all__ = [
    "AttentionPooling",
    "standardize_scores",
    "FastFlexAddAttention",
    "MultipleAttention",
    "Softmax",
    "Sparsemax",
    "Gfusedmax",
    "SoftmaxN",
    "SparsemaxN",
    "GfusedmaxN",
    "Sigmoid",
    "Tanh",
    "Sum",
    "Mean",
    "Max",
    "TopK",
    "TopKN",
]

MAPPINGS = ("softmax", "sparsemax", "gfusedmax")
_WIDENED = (torch.float16, torch.bfloat16)  # no CPU kernel computes in them: float32 instead


def _identity(x):
    return x


def _index(batch: GraphBatch, device):
    """``(graph of each node, nodes per graph)`` as torch tensors on ``device``, cached on the batch."""

    def make():
        sizes = torch.as_tensor(batch.sizes)
        return torch.repeat_interleave(torch.arange(batch.num_graphs), sizes).to(device), sizes.to(device)

    return batch.placed(("torch_index", str(device)), make)


def standardize_scores(scores, batch: GraphBatch, eps: float = 1e-7):
    """``(s - mean) / (std + eps)`` inside each graph (and head), ``std`` unbiased; a one-node
    graph, or one with equal scores, gives 0 (with a finite gradient). ``batch``: a
    :class:`GraphBatch` or its ``ptr``, covering the scores' rows."""
    batch = graph_batch(batch, num_nodes=scores.shape[0])  # a GraphBatch as it is: two checks
    index, sizes = _index(batch, scores.device)
    shape = (batch.num_graphs,) + tuple(scores.shape[1:])
    counts = sizes.to(scores.dtype).reshape((-1,) + (1,) * (scores.dim() - 1))
    mean = scores.new_zeros(shape).index_add_(0, index, scores) / counts.clamp(min=1)
    centered = scores - mean[index]
    var = scores.new_zeros(shape).index_add_(0, index, centered * centered) / (counts - 1).clamp(min=1)
    positive = var > 0
    std = torch.where(positive, torch.where(positive, var, torch.ones_like(var)).sqrt(), torch.zeros_like(var))
    return centered / (std[index] + eps)


class AttentionPooling(torch.nn.Module):
    """Pool each graph of a batch to one vector with attention weights.

    Parameters
    ----------
    input_size, output_size : int
    mapping : {"softmax", "sparsemax", "gfusedmax"}
    norm : bool
        Standardise the scores inside each graph first (attpool2's ``norm_flag``).
    lam, gamma : float
        The fused-lasso strength (gfusedmax) and the sparsemax temperature (sparsemax, gfusedmax);
        parameters named ``lam`` and ``gamma`` (one per head, in torch's default dtype: a value it
        cannot hold, such as ``lam=1e39`` or ``gamma=1e-50`` in float32, raises ``ValueError``),
        trained when ``learn_lam`` / ``learn_gamma``.
    heads : int
        Attention heads, all computed in one call, in ``[1, output_size]`` (``ValueError`` outside,
        ``TypeError`` for a non-int such as ``2.0``, as for every int option).
    score_activation, proj_activation : callable, optional
        Applied to the scores and the projections (attpool2's ``*_activation_func``).

    ``forward(x, ptr=None, edge_index=None, *, sizes=None)`` takes node features ``(N,
    input_size)``, the batch (``ptr``, ``sizes`` or a :class:`GraphBatch`) and, for gfusedmax,
    the edges; it returns ``(B, output_size)``.
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        mapping: str = "softmax",
        norm: bool = True,
        lam: float = 1.0,
        gamma: float = 1.0,
        learn_lam: bool = False,
        learn_gamma: bool = False,
        heads: int = 1,
        score_activation=None,
        proj_activation=None,
    ):
        super().__init__()
        # named before torch.nn.Linear sees them (-1: its "negative dimension"; 0 outputs: no head fits)
        input_size = check_int("input_size", input_size, minimum=0)
        output_size = check_int("output_size", output_size, minimum=1)
        if mapping not in MAPPINGS:
            raise ValueError(f"mapping must be one of {', '.join(MAPPINGS)}, got {mapping!r}")
        heads = check_int(
            "heads", heads, minimum=1, below=output_size + 1,
            expected=f"an int in [1, output_size = {output_size}] (every head pools at least one column)",
        )  # fmt: skip
        if mapping in ("sparsemax", "gfusedmax"):
            per_head("gamma", gamma, 1, positive=True)  # the given value in the message, not its float32
            check_stored("gamma", gamma, positive=True)
        if mapping == "gfusedmax":
            per_head("lam", lam, 1, positive=False)
            check_stored("lam", lam, positive=False)
        self.mapping, self.norm, self.heads, self.output_size = mapping, bool(norm), int(heads), int(output_size)
        self.proj_func = torch.nn.Linear(input_size, output_size)
        self.score_func = torch.nn.Linear(input_size, self.heads)
        self.score_activation, self.proj_activation = score_activation, proj_activation
        shape = () if self.heads == 1 else (self.heads,)
        if mapping in ("sparsemax", "gfusedmax"):
            self.gamma = torch.nn.Parameter(torch.full(shape, float(gamma)), requires_grad=bool(learn_gamma))
        if mapping == "gfusedmax":
            self.lam = torch.nn.Parameter(torch.full(shape, float(lam)), requires_grad=bool(learn_lam))
        bounds = [int(h * self.output_size / self.heads) for h in range(self.heads + 1)]
        self._bounds = np.asarray(bounds, np.int64)
        self.register_buffer(
            "head_of_column",
            torch.repeat_interleave(torch.arange(self.heads), torch.tensor(np.diff(bounds))),
            persistent=False,
        )

    def weights(self, x, batch: GraphBatch):
        """The attention weights ``(N, heads)`` of the batch's nodes."""
        scores = self.score_func(x)
        if self.score_activation is not None:
            scores = self.score_activation(scores)
        if self.norm:
            scores = standardize_scores(scores, batch)
        if self.mapping == "softmax":
            return softmax(scores, batch)
        if self.mapping == "sparsemax":
            return sparsemax(scores, batch, gamma=self.gamma)
        return gfusedmax(scores, batch, lam=self.lam, gamma=self.gamma)

    def forward(self, x, ptr=None, edge_index=None, *, sizes=None):
        self._check_x(x)
        batch = graph_batch(ptr, edge_index, sizes=sizes, num_nodes=x.shape[0])
        # __dict__ / _parameters lookups, not getattr: a name a Module lacks costs an AttributeError
        # raised and caught (about 3 us a call, on a layer whose whole step is a few hundred)
        if x.device.type == "cpu" and self.__dict__.get("max_type", self.mapping) in MAPPINGS:
            if x.dtype in _WIDENED:
                return self._forward_fused(x.float(), batch).to(x.dtype)
            return self._forward_fused(x, batch)
        return self._forward_composed(x, batch)

    def _check_x(self, x) -> None:
        """Raise naming ``x`` unless it is a float tensor ``(N, input_size)`` of the layer's dtype."""
        proj_func = self._modules["proj_func"]  # not Module.__getattr__: about 1 us a lookup
        size, dtype = proj_func.in_features, linear_parameters(proj_func)[0].dtype
        if not torch.is_tensor(x):
            raise TypeError(f"x must be a torch.Tensor (N, input_size = {size}), got {type(x).__name__}")
        reject_meta("x", x)
        if x.dim() != 2 or x.shape[1] != size:
            raise ValueError(f"x must have shape (N, input_size = {size}) (one row per node), got {tuple(x.shape)}")
        if x.dtype != dtype:
            raise TypeError(f"x must have the layer's dtype {dtype} (convert x or the layer), got {x.dtype}")

    def _forward_composed(self, x, batch):
        """The general path (any device, any mapping): torch operations around the batched maps."""
        weights = self.weights(x, batch)
        proj = self.proj_func(x)
        if self.proj_activation is not None:
            proj = self.proj_activation(proj)
        index, _ = _index(batch, x.device)
        weighted = proj * weights.to(proj.dtype)[:, self.head_of_column]
        return proj.new_zeros(batch.num_graphs, self.output_size).index_add_(0, index, weighted)

    def _forward_fused(self, x, batch):
        """The CPU path: standardise, map and pool in one kernel (:mod:`._layer`, the CPU pooling
        driver's ``layer_forward``); without activations, both linear maps run as one."""
        from ._layer import linear_pool_layer, pool_layer

        if self.mapping == "gfusedmax" and not batch.has_edges:
            raise ValueError("gfusedmax needs the graphs' edges: give edge_index")
        lam, gamma = self._parameters.get("lam"), self._parameters.get("gamma")
        # computed in x's dtype: the layer's, or float32 for a float16 / bfloat16 layer (exact widening)
        if self.score_activation in (None, _identity) and self.proj_activation in (None, _identity):
            # both linear maps inside the pooling's one autograd Function (:func:`._layer.linear_pool_layer`)
            modules = self._modules  # not Module.__getattr__ (as below)
            return linear_pool_layer(
                x, modules["score_func"], modules["proj_func"], batch, self.mapping, self.norm, lam, gamma, self._bounds
            )
        scores = _linear(self.score_func, x)
        if self.score_activation is not None:
            scores = self.score_activation(scores)
        proj = _linear(self.proj_func, x)
        if self.proj_activation is not None:
            proj = self.proj_activation(proj)
        return pool_layer(scores, proj, batch, self.mapping, self.norm, lam, gamma, self._bounds)


def _linear(layer, x):
    """``layer(x)`` in ``x``'s dtype (the layer's parameters widened to it: differentiable)."""
    return torch.nn.functional.linear(x, layer.weight.to(x.dtype), layer.bias.to(x.dtype))


# ------------------------------------------------------------------ attpool2's names
class FastFlexAddAttention(AttentionPooling):
    """attpool2's ``FastFlexAddAttention(input_size, output_size, max_type, norm_flag, lam,
    gamma, train_gamma_flag, train_lam_flag, score_activation_func, proj_activation_func)``;
    ``forward(x, graph_size_list, edge_list)`` -> ``(B, output_size)``. ``max_type`` is one of
    softmax / sparsemax / gfusedmax (the batched maps) or attpool2's other mappings
    (``"softmax-n"``, ``"sigmoid"``, ``"mean"``, ...; see :data:`OTHER_MAPPINGS`). As in attpool2,
    ``lam`` and ``gamma`` of ``0`` or ``None`` mean ``1.0``."""

    def __init__(
        self,
        input_size,
        output_size,
        max_type="softmax",
        norm_flag=True,
        lam=1.0,
        gamma=1.0,
        train_gamma_flag=False,
        train_lam_flag=False,
        score_activation_func=_identity,
        proj_activation_func=_identity,
    ):
        base = max_type if max_type in MAPPINGS else "softmax"
        if max_type not in MAPPINGS and max_type not in OTHER_MAPPINGS:
            raise ValueError(f"Wrong max_type: {max_type}")
        super().__init__(
            input_size,
            output_size,
            base,
            norm_flag,
            lam or 1.0,
            gamma or 1.0,
            train_lam_flag,
            train_gamma_flag,
            1,
            score_activation_func,
            proj_activation_func,
        )
        self.max_type = max_type
        if max_type in OTHER_MAPPINGS:
            if max_type in ("sparsemax-n", "gfusedmax-n"):
                self.gamma = torch.nn.Parameter(torch.tensor(float(gamma or 1.0)), requires_grad=train_gamma_flag)
            if max_type == "gfusedmax-n":
                self.lam = torch.nn.Parameter(torch.tensor(float(lam or 1.0)), requires_grad=train_lam_flag)
            self.mapping_func = OTHER_MAPPINGS[max_type](
                gamma=getattr(self, "gamma", None), lam=getattr(self, "lam", None)
            )

    def weights(self, x, batch):
        if self.max_type in MAPPINGS:
            return super().weights(x, batch)
        scores = self.score_activation(self.score_func(x))
        if self.norm:
            scores = standardize_scores(scores, batch)
        return self.mapping_func(scores[:, 0], batch, None)[:, None]

    def forward(self, x, graph_size_list, edge_list=None):
        return super().forward(
            x, sizes=graph_size_list, edge_index=edge_list if self.max_type.startswith("gfused") else None
        )


class MultipleAttention(torch.nn.Module):
    """attpool2's ``MultipleAttention(att_module, output_size, head_cnt)``: head ``i`` is
    ``att_module(int((i + 1) * output_size / head_cnt) - int(i * output_size / head_cnt))``,
    stored as ``attention{i}``; the heads' outputs are concatenated. (For heads in one batched
    call use :class:`AttentionPooling` with ``heads``.)"""

    def __init__(self, att_module, output_size, head_cnt):
        super().__init__()
        output_size = check_int("output_size", output_size, minimum=1)
        head_cnt = check_int(
            "head_cnt", head_cnt, minimum=1, below=output_size + 1,
            expected=f"an int in [1, output_size = {output_size}] (every head pools at least one column)",
        )  # fmt: skip
        self.head_cnt, self.output_size = head_cnt, output_size
        for i in range(head_cnt):
            size = int((i + 1) * output_size / head_cnt) - int(i * output_size / head_cnt)
            setattr(self, f"attention{i}", att_module(size))

    def forward(self, *args, **kwargs):
        return torch.cat([getattr(self, f"attention{i}")(*args, **kwargs) for i in range(self.head_cnt)], dim=-1)


class _Mapping(torch.nn.Module):
    """attpool2's mapping modules: ``forward(x, graph_size_list, edge_list=None) -> (N,)``."""

    def __init__(self, gamma=1.0, lam=1.0):
        super().__init__()
        self.gamma, self.lam = gamma, lam

    def forward(self, x, graph_size_list, edge_list=None):
        batch = graph_size_list if isinstance(graph_size_list, GraphBatch) else graph_batch(sizes=graph_size_list)
        return self.map(x, batch, edge_list)

    def map(self, x, batch, edge_list):
        raise NotImplementedError


def _sizes_of(x, batch):
    _, sizes = _index(batch, x.device)
    return sizes.to(x.dtype)[_index(batch, x.device)[0]]


class Softmax(_Mapping):
    def __init__(self, gamma=None, lam=None):
        super().__init__(gamma, lam)

    def map(self, x, batch, edge_list):
        return softmax(x, batch)


class Sparsemax(_Mapping):
    def __init__(self, gamma=1.0, lam=None):
        super().__init__(gamma, lam)

    def map(self, x, batch, edge_list):
        return sparsemax(x, batch, gamma=self.gamma)


class Gfusedmax(_Mapping):
    def map(self, x, batch, edge_list):
        batch = batch if edge_list is None else graph_batch(batch.ptr, edge_list)
        return gfusedmax(x, batch, lam=self.lam, gamma=self.gamma)


class SoftmaxN(Softmax):
    def map(self, x, batch, edge_list):
        return super().map(x, batch, edge_list) * _sizes_of(x, batch)


class SparsemaxN(Sparsemax):
    def map(self, x, batch, edge_list):
        return super().map(x, batch, edge_list) * _sizes_of(x, batch)


class GfusedmaxN(Gfusedmax):
    def map(self, x, batch, edge_list):
        return super().map(x, batch, edge_list) * _sizes_of(x, batch)


class Sigmoid(_Mapping):
    def map(self, x, batch, edge_list):
        return torch.sigmoid(x)


class Tanh(_Mapping):
    def map(self, x, batch, edge_list):
        return torch.tanh(x)


class Sum(_Mapping):
    def map(self, x, batch, edge_list):
        return torch.ones_like(x)


class Mean(_Mapping):
    def map(self, x, batch, edge_list):
        return 1.0 / _sizes_of(x, batch)


class Max(_Mapping):
    def map(self, x, batch, edge_list):
        out = torch.zeros_like(x)
        for start, stop in zip(batch.ptr[:-1].tolist(), batch.ptr[1:].tolist()):
            if stop > start:
                out[start + int(torch.argmax(x[start:stop]))] = 1.0
        return out


class TopK(_Mapping):
    """attpool2's top-k map: ``tanh(x * mask) / n`` with the ``int(n * ratio)`` largest scores of
    each graph in the mask."""

    def __init__(self, gamma=None, lam=None, ratio=None):
        super().__init__(gamma, lam)
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.number))):
            raise TypeError(f"ratio must be a number in (0, 1] (None or 0: 0.5, as attpool2), got {ratio!r}")
        if ratio and not 0 < ratio <= 1:  # None and 0 mean 0.5; NaN is true and out of range
            raise ValueError(f"ratio must be in (0, 1] (each graph's share kept; None or 0: 0.5), got {ratio}")
        self.ratio = float(ratio or 0.5)

    def map(self, x, batch, edge_list):
        mask = torch.zeros_like(x)
        for start, stop in zip(batch.ptr[:-1].tolist(), batch.ptr[1:].tolist()):
            count = int((stop - start) * self.ratio)
            if count:
                mask[start + torch.topk(x[start:stop], count, sorted=False).indices] = 1.0
        return torch.tanh(x * mask) / _sizes_of(x, batch)


class TopKN(TopK):
    def map(self, x, batch, edge_list):
        return super().map(x, batch, edge_list) * _sizes_of(x, batch)


OTHER_MAPPINGS = {
    "softmax-n": SoftmaxN,
    "sparsemax-n": SparsemaxN,
    "gfusedmax-n": GfusedmaxN,
    "sigmoid": Sigmoid,
    "tanh": Tanh,
    "sum": Sum,
    "mean": Mean,
    "max": Max,
    "topk": TopK,
    "topk-n": TopKN,
}
