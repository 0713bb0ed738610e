"""Torch layers of the attention models, under the seed models' names.

Import them from :mod:`gglspeedup.attention` (``from gglspeedup.attention import
FastFlexAddAttention``); this module gathers them by family.
"""

# ---------------------------------------------------------------------------------------------
# Attention pooling over graph batches (attpool2's layers; defined in .pooling_modules)
# ---------------------------------------------------------------------------------------------

POOLING_LAYERS = [
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

__all__ = [*POOLING_LAYERS]
