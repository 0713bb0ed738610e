"""A small Diffuser-style classifier on a generated ListOps task (LRA-style long-range reasoning).

ListOps (Nangia and Bowman, 2018; the Long Range Arena's ``listops``): nested prefix expressions
over the digits 0-9 with ``MAX``, ``MIN``, ``MED`` (median) and ``SM`` (sum mod 10), e.g.
``[MAX 2 9 [MIN 4 7 ] 0 ]`` -> 9; the label is the value (10 classes). Sequences are generated
here (no network): a top-level operator over random sub-expressions until a drawn length is reached.

The model: token + position embeddings, ``layers`` Diffuser blocks (our ``DiffuserSelfAttention``
on a ``SequencePattern`` with each sequence's own length, output projection, LayerNorm,
feed-forward), mean pooling over the tokens, a linear classifier.
"""

from __future__ import annotations

import time

import numpy as np

__all__ = ["VOCAB", "make_listops", "ListOpsModel", "train"]

OPS = ("MAX", "MIN", "MED", "SM")
VOCAB = ["<pad>", *[str(d) for d in range(10)], *[f"[{op}" for op in OPS], "]"]
PAD = 0
_DIGIT = 1
_OP = 11
_CLOSE = 15


def _apply(op: int, values: list[int]) -> int:
    if op == 0:
        return max(values)
    if op == 1:
        return min(values)
    if op == 2:
        return int(np.median(values)) if len(values) % 2 else int(sorted(values)[len(values) // 2 - 1])
    return sum(values) % 10


def _subtree(rng, depth: int, tokens: list[int]) -> int:
    if depth == 0 or rng.random() < 0.3:
        digit = int(rng.integers(10))
        tokens.append(_DIGIT + digit)
        return digit
    op = int(rng.integers(4))
    tokens.append(_OP + op)
    values = [_subtree(rng, depth - 1, tokens) for _ in range(int(rng.integers(2, 6)))]
    tokens.append(_CLOSE)
    return _apply(op, values)


def make_listops(count: int, min_len: int, max_len: int, seed: int = 0):
    """``(tokens (count, max_len) int64 padded with 0, lengths (count,), labels (count,))``."""
    rng = np.random.default_rng(seed)
    tokens = np.zeros((count, max_len), np.int64)
    lengths = np.zeros(count, np.int64)
    labels = np.zeros(count, np.int64)
    for i in range(count):
        target = int(rng.integers(min_len, max_len + 1))
        while True:
            op = int(rng.integers(4))
            seq = [_OP + op]
            values = []
            while len(seq) < target - 1:
                part: list[int] = []
                values.append(_subtree(rng, 3, part))
                if len(seq) + len(part) > target - 1 and values[:-1]:
                    values.pop()
                    break
                seq.extend(part)
            if values and len(seq) + 1 <= max_len:
                break
        seq.append(_CLOSE)
        tokens[i, : len(seq)] = seq
        lengths[i] = len(seq)
        labels[i] = _apply(op, values)
    return tokens, lengths, labels


def _model_class():
    import torch
    from torch import nn

    from ..attention import DiffuserSelfAttention

    class Block(nn.Module):
        def __init__(self, config):
            super().__init__()
            self.attention = DiffuserSelfAttention(config, 0)
            self.dense = nn.Linear(config.hidden_size, config.hidden_size)
            self.norm1 = nn.LayerNorm(config.hidden_size)
            self.ffn = nn.Sequential(
                nn.Linear(config.hidden_size, 2 * config.hidden_size),
                nn.GELU(),
                nn.Linear(2 * config.hidden_size, config.hidden_size),
            )
            self.norm2 = nn.LayerNorm(config.hidden_size)

        def forward(self, x, graph):
            x = self.norm1(x + self.dense(self.attention(x, g=graph)[0]))
            return self.norm2(x + self.ffn(x))

    class ListOpsModel(nn.Module):
        def __init__(self, config, layers: int, max_len: int, classes: int = 10):
            super().__init__()
            self.tokens = nn.Embedding(len(VOCAB), config.hidden_size, padding_idx=PAD)
            self.positions = nn.Embedding(max_len, config.hidden_size)
            self.blocks = nn.ModuleList([Block(config) for _ in range(layers)])
            self.classify = nn.Linear(config.hidden_size, classes)

        def forward(self, tokens, lengths, graph):
            positions = torch.arange(tokens.shape[1], device=tokens.device)
            x = self.tokens(tokens) + self.positions(positions)[None]
            for block in self.blocks:
                x = block(x, graph)
            valid = (positions[None] < lengths[:, None]).to(x.dtype)[..., None]
            pooled = (x * valid).sum(dim=1) / lengths[:, None].to(x.dtype)
            return self.classify(pooled)

    return ListOpsModel


def ListOpsModel(config, layers: int, max_len: int, classes: int = 10):
    """The classifier (torch imported on first use)."""
    return _model_class()(config, layers, max_len, classes)


def _progress(iterable, total, enabled, desc):
    if enabled:
        try:
            from tqdm import tqdm

            return tqdm(iterable, total=total, desc=desc, leave=False)
        except ImportError:
            pass
    return iterable


def train(args) -> dict:
    """Train and evaluate; returns ``{"history": rows, "test_acc": ..., "step_s": ...}``."""
    import types

    import torch

    from ..attention import SequencePattern

    torch.manual_seed(args.seed)
    data = {
        split: make_listops(count, args.min_len, args.max_len, seed=args.seed + offset)
        for split, count, offset in (("train", args.train, 0), ("val", args.val, 1), ("test", args.val, 2))
    }
    config = types.SimpleNamespace(
        hidden_size=args.hidden,
        num_attention_heads=args.heads,
        attention_probs_dropout_prob=0.1,
        attention_window=[args.window],
    )
    model = ListOpsModel(config, args.layers, args.max_len)
    pattern = SequencePattern(args.window, args.num_random, args.num_global, seed=args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)

    def batches(split, shuffle, epoch):
        tokens, lengths, labels = data[split]
        order = np.random.default_rng(args.seed + epoch).permutation(len(labels)) if shuffle else np.arange(len(labels))
        for start in range(0, len(order), args.batch_size):
            idx = order[start : start + args.batch_size]
            width = int(lengths[idx].max())
            yield (torch.from_numpy(tokens[idx, :width]), torch.from_numpy(lengths[idx]), torch.from_numpy(labels[idx]))

    def graph_for(lengths, width, step):
        # each sequence its own length (no padding tokens in the graph); fresh random keys per step
        return pattern.csc(width, batch=len(lengths), step=step, lengths=lengths.numpy())

    def evaluate(split):
        model.eval()
        correct = total = 0
        with torch.no_grad():
            for tokens, lengths, labels in batches(split, False, 0):
                logits = model(tokens, lengths, graph_for(lengths, tokens.shape[1], None))
                correct += int((logits.argmax(-1) == labels).sum())
                total += len(labels)
        return correct / max(total, 1)

    history, step, step_times = [], 0, []
    steps_per_epoch = -(-args.train // args.batch_size)
    for epoch in range(1, args.epochs + 1):
        model.train()
        losses, correct, seen = [], 0, 0
        for tokens, lengths, labels in _progress(
            batches("train", True, epoch), steps_per_epoch, not args.no_progress, f"epoch {epoch}"
        ):
            start = time.perf_counter()
            logits = model(tokens, lengths, graph_for(lengths, tokens.shape[1], step))
            loss = torch.nn.functional.cross_entropy(logits, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step_times.append(time.perf_counter() - start)
            step += 1
            losses.append(loss.item())
            correct += int((logits.argmax(-1) == labels).sum())
            seen += len(labels)
        row = {"epoch": epoch, "loss": float(np.mean(losses)), "train_acc": correct / seen, "val_acc": evaluate("val")}
        history.append(row)
        print(
            f"epoch {epoch}: loss {row['loss']:.4f}, train acc {row['train_acc']:.3f}, val acc {row['val_acc']:.3f}, "
            f"step {np.median(step_times[-steps_per_epoch:]):.3f} s"
        )
    return {"history": history, "test_acc": evaluate("test"), "step_s": float(np.median(step_times)), "model": model}
