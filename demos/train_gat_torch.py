"""A graph-attention network (GAT) in PyTorch on gglspeedup's sampled blocks: attention over each
target's sampled neighbours plus itself (the built-in plain-torch GATConv; ``--pyg-layers``: PyG's).

    python demos/train_gat_torch.py --dataset cora --epochs 20 --heads 8
"""

import sys

from gglspeedup import examples


def main(argv=None) -> dict:
    parser = examples.build_parser(
        "GAT (PyTorch) trained on gglspeedup's sampler and loader.",
        epochs=30,
        batch_size=64,
        hidden=16,
        lr=0.01,
        dropout=0.5,
    )
    parser.add_argument("--heads", type=int, default=8, help="attention heads in hidden layers (default: %(default)s)")
    args = examples.add_layers_option(parser).parse_args(argv)
    import torch

    from gglspeedup.examples.torch_models import GAT, conv_classes, train_model

    torch.manual_seed(args.seed)
    setup = examples.setup_training(args, "torch")
    _, conv, source = conv_classes(pyg=args.pyg_layers)
    print(f"GAT ({source}, {args.heads} heads) on {setup.info} with device {setup.device}, fanouts {args.fanouts}")
    model = GAT(
        setup.info["features"],
        args.hidden,
        setup.num_classes,
        len(args.fanouts),
        heads=args.heads,
        dropout=args.dropout,
        conv=conv,
    )
    history, result = train_model(model, setup, args)
    return examples.report(result, history, args, name="train_gat_torch.png", title="GAT (PyTorch)")


if __name__ == "__main__":
    main(sys.argv[1:])
