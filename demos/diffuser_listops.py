"""A Diffuser-style classifier trained on a generated ListOps task (sequences of 1-4k tokens), on the CPU.

    python demos/diffuser_listops.py                       # defaults: 1024-2048 tokens, 3 epochs
    python demos/diffuser_listops.py --min-len 2048 --max-len 4096 --out plots
    python demos/diffuser_listops.py --compare-dgl         # also time one step on Diffuser's DGL layer

Attention runs on gglspeedup's pattern (Diffuser's chunked window, random keys fresh every step,
global tokens) and fused diffusion kernels; the loss/accuracy plot goes to ``--out``.
"""

import argparse
import sys


def _window(text):
    """``--window``: a positive even int (Diffuser's chunked window is split in two halves)."""
    value = int(text) if text.strip().lstrip("+-").isdigit() else None
    if value is None or value < 2 or value % 2:
        raise argparse.ArgumentTypeError(f"must be a positive even int, got {text!r}")
    return value


def build_parser():
    from gglspeedup.examples.cli import above, at_least, out_folder

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=at_least(1), default=512, help="training sequences")
    parser.add_argument("--val", type=at_least(1), default=128, help="validation (and test) sequences")
    parser.add_argument("--min-len", type=int, default=1024)
    parser.add_argument("--max-len", type=int, default=2048)
    parser.add_argument("--epochs", type=at_least(1), default=3)
    parser.add_argument("--batch-size", type=at_least(1), default=8)
    parser.add_argument("--hidden", type=at_least(1), default=64)
    parser.add_argument("--heads", type=at_least(1), default=2)
    parser.add_argument("--layers", type=at_least(1), default=2)
    parser.add_argument("--window", type=_window, default=64, help="attention window, a positive even int")
    parser.add_argument("--num-random", type=at_least(0), default=8)
    parser.add_argument("--num-global", type=at_least(0), default=8)
    parser.add_argument("--lr", type=above(0.0), default=1e-3)
    parser.add_argument("--seed", type=at_least(0), default=0)
    parser.add_argument(
        "--out", default=None, type=out_folder, help="folder for the loss/accuracy plot (default: no plot)"
    )
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--compare-dgl", action="store_true", help="time a step with Diffuser's DGL layer too")
    return parser


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    if args.min_len < 2 or args.max_len < args.min_len:
        raise SystemExit(f"--min-len must be >= 2 and <= --max-len, got {args.min_len} and {args.max_len}")
    from gglspeedup.examples import listops
    from gglspeedup.examples.loop import plot_history

    print(
        f"ListOps, {args.min_len}-{args.max_len} tokens, {args.train} training sequences; Diffuser blocks: "
        f"{args.layers} x hidden {args.hidden}, {args.heads} heads, window {args.window}"
    )
    result = listops.train(args)
    print(f"test accuracy: {result['test_acc']:.3f} (10 classes); median step {result['step_s']:.3f} s")
    if args.compare_dgl:
        from gglspeedup.examples.listops_dgl import dgl_step_time

        print(dgl_step_time(result["model"], args))
    if args.out:

        class _Rows:
            rows = result["history"]

        path = plot_history(_Rows(), args.out, name="diffuser_listops.png", title="Diffuser on ListOps")
        result["plot"] = path
        if path:
            print(f"plot of loss and accuracy per epoch: {path}")
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
