"""Drop-in torch layers for Diffuser and fractional attention, running on our pattern and kernels.

``DiffuserSelfAttention`` and ``DiffuserFracSelfAttention`` keep Diffuser's parameter names
(``query``, ``key``, ``value``: ``nn.Linear(hidden, hidden)``), constructor ``(config, layer_id)``
(``(config, layer_id, gamma)`` for the fractional one) and ``forward`` signature, so a Diffuser
``state_dict`` loads unchanged; ``g`` is an :class:`~gglspeedup.attention.AttentionGraph` (or a
:class:`~gglspeedup.attention.SequencePattern`, built for the batch on the fly) instead of a DGL
graph.

>>> import types, torch
>>> from gglspeedup.attention import SequencePattern
>>> config = types.SimpleNamespace(hidden_size=8, num_attention_heads=2, attention_probs_dropout_prob=0.1,
...                                attention_window=[4])
>>> layer = DiffuserSelfAttention(config, layer_id=0).eval()
>>> graph = SequencePattern(window=4, num_random=1, num_global=1).csc(6, batch=2, shared=True)
>>> layer(torch.randn(2, 6, 8), g=graph)[0].shape
torch.Size([2, 6, 8])
"""

from __future__ import annotations

import math

from torch import nn

from ...validation import check_int
from .diffusion import diffusion_attention
from .fractional import fractional_attention
from .patterns import SequencePattern

__all__ = ["DiffuserSelfAttention", "DiffuserFracSelfAttention"]


class LayerIndexError(IndexError, ValueError):
    """``layer_id`` past the layers ``config.attention_window`` lists: an ``IndexError`` (what
    Diffuser's own ``config.attention_window[layer_id]`` raises) and a ``ValueError`` (a bad
    argument), as NumPy's ``AxisError`` is both."""


class _SelfAttentionBase(nn.Module):
    def __init__(self, config, layer_id: int):
        super().__init__()
        check_int("config.num_attention_heads", config.num_attention_heads, minimum=1)  # before the modulo below
        check_int("config.hidden_size", config.hidden_size, minimum=1)
        if config.hidden_size % config.num_attention_heads != 0:
            raise ValueError(
                f"The hidden size ({config.hidden_size}) is not a multiple of the number of attention "
                f"heads ({config.num_attention_heads})"
            )
        self.num_heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        self.embed_dim = config.hidden_size
        self.query = nn.Linear(config.hidden_size, self.embed_dim)
        self.key = nn.Linear(config.hidden_size, self.embed_dim)
        self.value = nn.Linear(config.hidden_size, self.embed_dim)
        self.dropout = config.attention_probs_dropout_prob
        self.layer_id = check_int("layer_id", layer_id, minimum=0)
        window = config.attention_window
        if isinstance(window, (list, tuple)):
            if layer_id >= len(window):
                raise LayerIndexError(
                    f"layer_id = {layer_id} is past config.attention_window, which lists {len(window)} "
                    f"window(s), one per layer (layer_id in [0, {len(window)}))"
                )
            window = window[layer_id]
        if window % 2 != 0 or window <= 0:
            raise ValueError(f"attention_window for layer {layer_id} must be a positive even value, got {window}")

    def _project(self, hidden_states, g, attention_mask):
        if hidden_states.dim() != 3 or hidden_states.shape[-1] != self.embed_dim:
            raise ValueError(
                f"hidden_states must have shape (batch, seq_len, {self.embed_dim}), got {tuple(hidden_states.shape)}"
            )
        batch, length, _ = hidden_states.shape
        query = self.query(hidden_states) / math.sqrt(self.head_dim)
        key, value = self.key(hidden_states), self.value(hidden_states)
        shape = (batch, length, self.num_heads, self.head_dim)
        if isinstance(g, SequencePattern):
            g = g.csc(length, batch=batch, shared=True)
        if g is None:
            raise ValueError("g must be an AttentionGraph or a SequencePattern (the attention pattern)")
        padding = None
        if attention_mask is not None:
            if tuple(attention_mask.shape) != (batch, length):
                raise ValueError(f"attention_mask must have shape {(batch, length)}, got {tuple(attention_mask.shape)}")
            padding = attention_mask < 0  # Diffuser: tokens with attention_mask >= 0 are real
            if not bool(padding.any()):
                padding = None
        return query.reshape(shape), key.reshape(shape), value.reshape(shape), g, padding

    def _output(self, out, is_global_attn, output_attentions):
        batch, length = out.shape[:2]
        return (out.reshape(batch, length, self.embed_dim),)

    def _attend(self, q, k, v, graph, padding, dropout):
        """The layer's attention on the projected ``(batch, seq_len, heads, head_dim)`` tensors."""
        raise NotImplementedError

    def forward(
        self,
        hidden_states,
        g=None,
        attention_mask=None,
        layer_head_mask=None,
        is_index_masked=None,
        is_index_global_attn=None,
        is_global_attn=None,
        output_attentions=False,
    ):
        q, k, v, graph, padding = self._project(hidden_states, g, attention_mask)
        dropout = self.dropout if self.training else 0.0
        return self._output(self._attend(q, k, v, graph, padding, dropout), is_global_attn, output_attentions)


class DiffuserSelfAttention(_SelfAttentionBase):
    """Diffuser's ``DiffuserSelfAttention`` (github asFeng/Diffuser, ``models/diffuser_att.py``) on
    :func:`~gglspeedup.attention.diffusion_attention`: 5 hops, ``alpha = 0.1``, attention dropout
    ``config.attention_probs_dropout_prob`` in training."""

    hops = 5
    alpha = 0.1

    def _attend(self, q, k, v, graph, padding, dropout):
        return diffusion_attention(q, k, v, graph, self.hops, self.alpha, padding, dropout)


class DiffuserFracSelfAttention(_SelfAttentionBase):
    """fractional-attn's ``DiffuserFracSelfAttention(config, layer_id, gamma)`` (github
    CKQu1/fractional-attn, ``models/diffuser_att.py``) on
    :func:`~gglspeedup.attention.fractional_attention`, with the operator of its
    ``attn_rw/frac_diffuser_forward_dgl.py`` (see that function for what differs from the class)."""

    terms = 6
    steps = 5

    def __init__(self, config, layer_id: int, gamma: float = 0.5):
        super().__init__(config, layer_id)
        self.gamma = gamma

    def _attend(self, q, k, v, graph, padding, dropout):
        return fractional_attention(q, k, v, graph, self.gamma, self.terms, self.steps, padding, dropout)
