"""Agreement of our attention layer with Diffuser's own, run in the Diffuser peer environment.

Diffuser's ``DiffuserSelfAttention.forward`` (github asFeng/Diffuser, ``models/diffuser_att.py``,
unmodified, on the DGL graph its ``graphTrainer._from_adj_to_batched_graphs`` builds from its own
``_create_adj_mat`` pattern) and ours (:class:`gglspeedup.attention.DiffuserSelfAttention` on
``SequencePattern(compat="diffuser")``), same weights (Diffuser's ``state_dict`` loaded into ours),
same inputs (one sequence padded), evaluation mode, float32. Compared: the output and the gradient
of a random projection of it with respect to the input and every parameter, to
``1e-5 * max(1, max|reference|)`` each.

    DGLBACKEND=pytorch PYTHONPATH=$PWD /work/peers/diffuser/venv/bin/python tools/diffuser_conformance.py
    ... tools/diffuser_conformance.py --simulator   # our side on the CUDA simulator (small sizes)

Exits non-zero when any tensor misses the tolerance.
"""

from __future__ import annotations

import argparse
import os
import sys
import types


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--simulator", action="store_true", help="run our kernels on the CUDA simulator (small sizes)")
    parser.add_argument("--seq-len", type=int, nargs="*", default=None)
    parser.add_argument("--batch", type=int, default=2)
    args = parser.parse_args()
    if args.simulator:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import warnings

    warnings.filterwarnings("ignore", "overflow encountered")
    import torch

    from gglspeedup.attention import DiffuserSelfAttention, SequencePattern
    from gglspeedup.bench.diffuser_peer import load

    graphtrainer, diffuser_att = load()
    if args.simulator:
        hidden, heads, lengths = 16, 2, args.seq_len or [128]
    else:
        hidden, heads, lengths = 256, 4, args.seq_len or [512, 1024]
    config = types.SimpleNamespace(
        hidden_size=hidden,
        num_attention_heads=heads,
        attention_probs_dropout_prob=0.1,
        attention_window=[64] * 12,
        num_rand=64,
        num_glob=64,
    )
    trainer = types.SimpleNamespace(config=config)
    graphtrainer.graphTrainer._create_adj_mat(trainer)
    device = "cuda:0" if args.simulator else "cpu"
    pattern = SequencePattern(64, 64, 64, compat="diffuser", seed=0, device=device)
    failures = 0
    for length in lengths:
        torch.manual_seed(length)
        theirs = diffuser_att.DiffuserSelfAttention(config, layer_id=0).eval()
        ours = DiffuserSelfAttention(config, layer_id=0).eval()
        ours.load_state_dict(theirs.state_dict())
        x = torch.randn(args.batch, length, hidden)
        mask = torch.zeros(args.batch, length)
        mask[-1, length - length // 5 :] = -10000.0  # Diffuser's extended mask: < 0 at padding
        projection = torch.randn(args.batch, length, hidden)
        g = graphtrainer.graphTrainer._from_adj_to_batched_graphs(trainer, torch.zeros(args.batch, length))
        results = {}
        for name, layer, graph in (("diffuser", theirs, g), ("ours", ours, pattern.csc(length, batch=args.batch))):
            inputs = x.clone().requires_grad_()
            out = layer(inputs, g=graph, attention_mask=mask)[0]
            grads = torch.autograd.grad((out * projection).sum(), [inputs, *layer.parameters()])
            names = ["output", "d input"] + [f"d {n}" for n, _ in layer.named_parameters()]
            results[name] = dict(zip(names, [out.detach(), *grads]))
        print(f"seq_len {length}, batch {args.batch}, hidden {hidden}, heads {heads}, {g.num_edges()} edges")
        for key, reference in results["diffuser"].items():
            ours_value = results["ours"][key]
            tolerance = 1e-5 * max(1.0, reference.abs().max().item())
            error = (ours_value - reference).abs().max().item()
            ok = error <= tolerance
            failures += not ok
            print(f"  {key:16s} max|ref| {reference.abs().max().item():10.4g}  max|ours - ref| {error:.3g}"
                  f"  tolerance {tolerance:.3g}  {'ok' if ok else 'FAIL'}")  # fmt: skip
    print("all within tolerance" if not failures else f"{failures} tensors outside the tolerance")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
