"""GraphSAGE in PyTorch on gglspeedup batches (the built-in plain-torch SAGEConv; ``--pyg-layers``:
PyG's).

    python demos/train_sage_torch.py --dataset cora --epochs 20
    python demos/train_sage_torch.py --dataset powerlaw:100000:15 --fanouts 15,10 --batch-size 1024
    python demos/train_sage_torch.py --dataset cora --layerwise   # + sampled vs layer-wise test accuracy
"""

import sys

from gglspeedup import examples


def main(argv=None) -> dict:
    parser = examples.build_parser(
        "GraphSAGE (PyTorch) trained on gglspeedup's sampler and loader.", epochs=20, batch_size=64
    )
    examples.add_layers_option(parser)
    parser.add_argument(
        "--layerwise",
        action="store_true",
        help="after training, also test with sampled inference (the training fanouts) and with exact "
        "layer-wise inference over all nodes (gglspeedup.inference.layerwise), side by side",
    )
    args = parser.parse_args(argv)
    import torch

    from gglspeedup.examples.torch_models import SAGE, conv_classes, train_model

    torch.manual_seed(args.seed)
    setup = examples.setup_training(args, "torch")
    conv, _, source = conv_classes(pyg=args.pyg_layers)
    print(f"GraphSAGE ({source}) on {setup.info} with device {setup.device}, fanouts {args.fanouts}")
    model = SAGE(setup.info["features"], args.hidden, setup.num_classes, len(args.fanouts), args.dropout, conv=conv)
    history, result = train_model(model, setup, args)
    if args.layerwise:
        result.update(compare_inference(model, setup, args))
    return examples.report(result, history, args, name="train_sage_torch.png", title="GraphSAGE (PyTorch)")


def compare_inference(model, setup, args) -> dict:
    """Test accuracy of the trained ``model`` three ways: sampled with the training fanouts, the
    demo's full-neighbourhood multi-hop batches (``test_acc``), and layer-wise over all nodes."""
    import time

    import numpy as np
    import torch

    import gglspeedup as gg
    from gglspeedup.examples.torch_models import evaluate

    test = setup.split["test"]
    sampler = gg.NeighborSampler(setup.graph, args.fanouts, seed=args.seed, device=setup.device)
    target = gg.device.as_device(setup.device)
    labels = target.xp.asarray(setup.labels) if target.is_cuda else setup.labels  # on the sampler's device
    loader = gg.NodeLoader(sampler, setup.features, test, 1024, shuffle=False, labels=labels, backend="torch")
    sampled = evaluate(model, loader)
    model.eval()
    start = time.perf_counter()
    with torch.no_grad():
        out = gg.inference.layerwise(
            model.convs, setup.graph, setup.features, batch_size=4096, device=setup.device, activation=torch.relu
        )
    seconds = time.perf_counter() - start
    layerwise = float((out[test].argmax(axis=1) == np.asarray(setup.labels)[test]).mean())
    print(
        f"test accuracy, sampled inference (fanouts {args.fanouts}): {sampled:.4f}; layer-wise inference over all "
        f"{setup.graph.num_nodes} nodes: {layerwise:.4f} ({setup.graph.num_nodes * len(model.convs) / seconds:,.0f} "
        f"nodes/s x layers)"
    )
    return {"sampled_test_acc": sampled, "layerwise_test_acc": layerwise}


if __name__ == "__main__":
    main(sys.argv[1:])
