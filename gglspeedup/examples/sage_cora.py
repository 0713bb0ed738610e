"""The main job: train GraphSAGE on the bundled Cora with gglspeedup's sampler, feature store and
prefetching loader, feeding PyTorch zero-copy, then print test accuracy and throughput.

    python -m gglspeedup.demo            # or the console script gglspeedup-demo, or
    python -m gglspeedup.examples.sage_cora
    python -m gglspeedup.demo --help     # dataset, device, fanouts, batch size, cache size, ...
    python -m gglspeedup.demo --task link   # link prediction instead (gglspeedup.examples.link_cora)

Runs on a real GPU when one is usable (CuPy + numba-cuda), else on the CPU. The model with the best
validation accuracy (full-neighbourhood evaluation) is tested on the test split. The layers are the
demos' own plain-torch ``SAGEConv`` whether or not ``torch_geometric`` is installed (the banner
says which ran; ``--pyg-layers`` picks PyG's). A plot of loss and accuracy per epoch is written to
``--out/gglspeedup-demo.png`` (default: the current folder).
"""

from __future__ import annotations

import sys
import time

__all__ = ["main", "run"]


def main(argv=None) -> int:
    """Console entry point (``gglspeedup-demo``): run the demo, return exit status 0."""
    run(argv)
    return 0


def run(argv=None) -> dict:
    """Run the demo with command-line arguments ``argv`` (default: ``sys.argv[1:]``); return the
    result dict (``test_acc``, ``best_epoch``, ``seeds_per_s``, ``edges_per_s``, ``plot``, ...)."""
    import argparse

    from . import cli, data, loop

    chooser = cli.add_task_option(argparse.ArgumentParser(add_help=False), "node")
    if chooser.parse_known_args(argv)[0].task == "link":  # before the node options reject link ones
        from . import link_cora

        return link_cora.run(argv)
    parser = cli.build_parser(
        "Train GraphSAGE on Cora with gglspeedup (sampling + gathering + zero-copy to PyTorch).",
        epochs=30,
        fanouts="10,10",
        batch_size=64,
        hidden=256,
    )
    cli.set_out_default(cli.add_layers_option(parser), ".")
    args = cli.add_task_option(parser, "node").parse_args(argv)
    start = time.perf_counter()
    try:
        import torch
    except ImportError:
        sys.exit(cli.NO_TORCH)
    from .torch_models import SAGE, conv_classes, train_model

    torch.manual_seed(args.seed)
    torch.set_num_threads(cli.cpu_threads(args))
    try:
        setup = data.setup_training(args, "torch")
    except (RuntimeError, FileNotFoundError) as error:  # no usable GPU for --device cuda, a missing dataset path
        sys.exit(f"gglspeedup demo: {error}")
    try:
        conv, _, conv_source = conv_classes(pyg=args.pyg_layers)
    except ImportError as error:
        sys.exit(f"gglspeedup demo: {error}")
    info = setup.info
    print(
        f"gglspeedup demo: GraphSAGE on {info['dataset']} ({info['nodes']} nodes, {info['edges']} edges, "
        f"{info['features']} features, {info['classes']} classes, train/val/test {info['train/val/test']}), "
        f"device {setup.device}, fanouts {args.fanouts}, batch size {args.batch_size}, "
        f"layers: {conv_source}, torch {torch.__version__} with {torch.get_num_threads()} CPU thread(s)"
    )
    model = SAGE(info["features"], args.hidden, setup.num_classes, len(args.fanouts), args.dropout, conv=conv)
    history, result = train_model(model, setup, args)
    result = loop.report(
        result, history, args, name="gglspeedup-demo.png", title=f"GraphSAGE on {info['dataset']} (gglspeedup)"
    )
    result["layers"] = conv_source
    result["total_s"] = time.perf_counter() - start
    print(f"total time {result['total_s']:.1f} s (set-up {setup.setup_s:.1f} s)")
    return result


if __name__ == "__main__":
    sys.exit(main())
