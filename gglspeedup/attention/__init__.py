"""The attention models' data side: attention graphs over sequences and attention pooling over graph batches.

Two families of models run attention on a sampled or structured graph:

- pooling a batch of graphs with attention (softmax, sparsemax, gfusedmax: the attpool2 family),
  in :mod:`.pooling` with its layers in :mod:`.modules`;
- long-sequence transformers whose attention runs on a sparse pattern over tokens (Diffuser and
  fractional attention), with the pattern sampler in :mod:`.patterns` and the fused kernels in
  :mod:`.diffusion`.

Kernels live in ``_kernels/`` (one body compiled for the CPU with ``numba.njit`` and for the GPU
with ``numba.cuda.jit``, as in :mod:`gglspeedup.sampling`). Names load on first access, so
``import gglspeedup.attention`` imports neither torch nor Numba.
"""

from __future__ import annotations

import importlib

# public name -> submodule that defines it (imported on first access)
_POOLING_NAMES: dict[str, str] = {
    **dict.fromkeys(("softmax", "sparsemax", "gfusedmax", "fused_lasso"), "pooling"),
    **dict.fromkeys(
        (
            "softmax_numpy",
            "sparsemax_numpy",
            "gfusedmax_numpy",
            "fused_lasso_numpy",
            "PoolingResult",
            "CertificateError",
        ),
        "pooling_numpy",
    ),
    **dict.fromkeys(("GraphBatch", "graph_batch"), "pooling_batch"),
    **dict.fromkeys(
        (
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
        ),
        "pooling_modules",
    ),
    **dict.fromkeys(
        ("partition_graphs", "split_batch", "LocalBatch", "sum_gradients", "pool_across_devices"), "pooling_distributed"
    ),
}
_SEQUENCE_NAMES: dict[str, str] = {
    "SequencePattern": "patterns",
    "AttentionGraph": "pattern_graph",
    "diffusion_attention": "diffusion",
    "fractional_attention": "fractional",
    "DiffuserSelfAttention": "diffuser_modules",
    "DiffuserFracSelfAttention": "diffuser_modules",
    "ShardPlan": "sharded",
    "sharded_diffusion_attention": "sharded",
}
_LAZY_NAMES = {**_POOLING_NAMES, **_SEQUENCE_NAMES}

__all__ = [*_LAZY_NAMES]


def __getattr__(name: str):
    if name not in _LAZY_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY_NAMES[name]}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
