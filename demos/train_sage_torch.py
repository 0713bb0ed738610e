"""GraphSAGE in PyTorch on gglspeedup batches (PyG's SAGEConv when torch_geometric imports, a
plain-torch layer otherwise).

    python demos/train_sage_torch.py --dataset cora --epochs 20
    python demos/train_sage_torch.py --dataset powerlaw:100000:15 --fanouts 15,10 --batch-size 1024
"""

import sys

from gglspeedup import examples


def main(argv=None) -> dict:
    parser = examples.build_parser(
        "GraphSAGE (PyTorch) trained on gglspeedup's sampler and loader.", epochs=20, batch_size=64
    )
    args = parser.parse_args(argv)
    import torch

    from gglspeedup.examples.torch_models import SAGE, conv_classes, train_model

    torch.manual_seed(args.seed)
    setup = examples.setup_training(args, "torch")
    conv, _, source = conv_classes()
    print(f"GraphSAGE ({source}) on {setup.info} with device {setup.device}, fanouts {args.fanouts}")
    model = SAGE(setup.info["features"], args.hidden, setup.num_classes, len(args.fanouts), args.dropout, conv=conv)
    history, result = train_model(model, setup, args)
    return examples.report(result, history, args, name="train_sage_torch.png", title="GraphSAGE (PyTorch)")


if __name__ == "__main__":
    main(sys.argv[1:])
