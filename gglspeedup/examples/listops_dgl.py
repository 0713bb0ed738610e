"""The ListOps demo's step on Diffuser's own DGL attention layer, for the step-time comparison."""

from __future__ import annotations

import time

__all__ = ["dgl_step_time"]


def dgl_step_time(model, args, steps: int = 3) -> str:
    """Median seconds of a training step of ``model`` with each attention layer's ``forward``
    replaced by Diffuser's ``DiffuserSelfAttention.forward`` (same weights) on the DGL graph of the
    same pattern, beside ours; or why it is unavailable."""
    try:
        from ..bench.diffuser_peer import load

        _, diffuser_att = load()
    except ImportError as error:
        return f"Diffuser's DGL path: unavailable ({error})"
    import numpy as np
    import torch

    from ..attention import SequencePattern
    from .listops import make_listops

    tokens, lengths, labels = make_listops(args.batch_size, args.max_len, args.max_len, seed=args.seed + 9)
    tokens, lengths, labels = torch.from_numpy(tokens), torch.from_numpy(lengths), torch.from_numpy(labels)
    pattern = SequencePattern(args.window, args.num_random, args.num_global, seed=args.seed)
    graph = pattern.csc(tokens.shape[1], batch=len(lengths))
    dgl_graph = graph.to_dgl()
    mask = torch.zeros(tokens.shape)
    blocks = [block.attention for block in model.blocks]
    times = {}
    for name in ("ours", "diffuser (DGL)"):
        if name != "ours":
            for layer in blocks:  # Diffuser's own forward, bound to our layer's (identically named) weights

                def forward(hidden_states, g=None, _layer=layer, **_):
                    return diffuser_att.DiffuserSelfAttention.forward(
                        _layer, hidden_states, g=dgl_graph, attention_mask=mask
                    )

                layer.forward = forward
        spent = []
        for _ in range(steps):
            start = time.perf_counter()
            loss = torch.nn.functional.cross_entropy(model(tokens, lengths, graph), labels)
            loss.backward()
            spent.append(time.perf_counter() - start)
        times[name] = float(np.median(spent))
    for layer in blocks:
        del layer.forward
    return (
        f"step at {tokens.shape[1]} tokens x {len(lengths)}: ours {times['ours']:.3f} s, "
        f"Diffuser's DGL layer {times['diffuser (DGL)']:.3f} s ({times['diffuser (DGL)'] / times['ours']:.2f}x)"
    )
