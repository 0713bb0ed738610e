"""GraphSAGE through the service: a papers-like graph cut into parts, served by Ray actors.

``python demos/service_sage.py`` builds (or loads from the cache) a papers-like graph
(ogbn-papers100M's shape, ``--nodes`` of it) with float16 features and 172-class labels, cuts it
into ``--parts`` partitions (``gglspeedup.service.partition``) and trains GraphSAGE twice for
``--batches`` batches with the same seeds: once on the whole graph in this process (a
``NeighborSampler`` and a ``FeatureStore``), once through ``--servers`` Ray actors serving the
parts (``serve(...)``: ``cluster.sampler``, ``cluster.features``, ``cluster.labels``). The batches
through the service are the local ones bit for bit, so the two loss curves are equal; the demo
prints them side by side and says whether they are.

Ray runs in a private network namespace this process makes (loopback only) unless ``--address``
names a cluster to join or this process is already connected to Ray.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

__all__ = ["run", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    from .._argtypes import address_text
    from .cli import above, at_least, parse_fanouts, size_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=at_least(1), default=1_000_000, help="papers-like nodes (default 1,000,000)")
    parser.add_argument("--parts", type=at_least(1), default=4, help="partitions (default 4)")
    parser.add_argument("--servers", type=at_least(1), default=4, help="server actors (default 4: one per part)")
    parser.add_argument(
        "--method", default="range", choices=("range", "metis"), help="partitioning: range or metis (default range)"
    )
    parser.add_argument("--feature-dim", type=at_least(1), default=128, help="feature width (default 128)")
    parser.add_argument("--fanouts", type=parse_fanouts, default=[15, 10], help="seeds' hop first (default 15,10)")
    parser.add_argument("--batch-size", type=at_least(1), default=1024, help="seeds per batch (default 1024)")
    parser.add_argument("--batches", type=at_least(1), default=30, help="training batches per run (default 30)")
    parser.add_argument("--hidden", type=at_least(1), default=128, help="hidden width (default 128)")
    parser.add_argument("--lr", type=above(0.0), default=3e-3, help="Adam learning rate")
    parser.add_argument(
        "--cache-size",
        default="64M",
        type=size_text("the cache size"),
        help="the service's feature cache in RAM (default 64M)",
    )
    parser.add_argument("--prefetch", type=at_least(0), default=2, help="batches sampled ahead (default 2)")
    parser.add_argument("--seed", type=at_least(0), default=0, help="graph, feature, split and model seed")
    parser.add_argument(
        "--folder", default=None, help="dataset cache (default $GGLSPEEDUP_CACHE or ~/.cache/gglspeedup)"
    )
    parser.add_argument(
        "--address", default=None, type=address_text, help="a Ray cluster to join (default: a local one)"
    )
    return parser


def _data(args):
    from ..datasets.papers_like import cache_folder, load_papers_like, papers_like_features

    folder = args.folder or cache_folder()
    os.makedirs(folder, exist_ok=True)
    graph, _ = load_papers_like(args.nodes, args.seed, folder=folder)
    stem = os.path.join(folder, f"papers-like-{graph.num_nodes}-{args.seed}-x{args.feature_dim}-float16")
    path, label_path = f"{stem}.npy", f"{stem}-labels.npy"
    if not (os.path.exists(path) and os.path.exists(label_path)):
        _, labels = papers_like_features(path, graph.num_nodes, args.feature_dim, seed=args.seed)
        np.save(label_path, labels.astype(np.int16))
    return graph, np.load(path, mmap_mode="r"), np.load(label_path)


def _train(sampler, features, labels, train, args) -> tuple[list[float], float]:
    """The loss of every batch, and the seconds the batches after the first took (the first one
    compiles kernels and fills the loader's queue)."""
    import torch
    import torch.nn.functional as F

    import gglspeedup as gg

    from .torch_models import SAGE

    loader = gg.NodeLoader(
        sampler, features, train, args.batch_size, labels=labels, prefetch=args.prefetch, seed=args.seed
    )
    torch.manual_seed(args.seed)
    model = SAGE(args.feature_dim, args.hidden, 172, len(args.fanouts), dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model.train()
    losses, start = [], None
    while len(losses) < args.batches:
        for batch in loader:
            if start is None and losses:
                start = time.perf_counter()
            optimizer.zero_grad()
            loss = F.cross_entropy(model(batch.x.float(), batch.adjs), batch.y.long())
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == args.batches:
                break
    return losses, (time.perf_counter() - start if start is not None else 0.0)


def _both_runs(args):
    """Train locally, partition, train through the servers: ``(local losses, service losses,
    transport stats, (local s, service s, serve s, partition s))``."""
    import gglspeedup as gg
    from gglspeedup.service import partition

    graph, x, y = _data(args)
    rng = np.random.default_rng(args.seed)
    train = np.sort(rng.choice(graph.num_nodes, size=max(args.batch_size, graph.num_nodes // 90), replace=False))
    print(
        f"papers-like:{graph.num_nodes:,}: {graph.num_edges:,} edges, features {x.shape} {x.dtype}, "
        f"{len(train):,} training nodes"
    )
    table = gg.FeatureStore(np.ascontiguousarray(x))  # in RAM: the local run's features are not read from disk
    local, local_s = _train(gg.NeighborSampler(graph, args.fanouts, seed=args.seed), table, y, train, args)
    with tempfile.TemporaryDirectory(prefix="gglspeedup-service-sage-") as tmp:
        start = time.perf_counter()
        partition(graph, os.path.join(tmp, "parts"), args.parts, features=x, labels=y, method=args.method)
        partition_s = time.perf_counter() - start
        remote, stats, serve_s, service_s = _through_service(os.path.join(tmp, "parts"), train, args)
    return local, remote, stats, (local_s, service_s, serve_s, partition_s)


def _through_service(folder, train, args):
    """Serve ``folder`` and train on the cluster: ``(losses, transport stats, serve s, train s)``."""
    from gglspeedup.service import serve

    start = time.perf_counter()
    with serve(folder, args.servers, address=args.address) as cluster:
        serve_s = time.perf_counter() - start
        sampler = cluster.sampler(args.fanouts, seed=args.seed)
        features = cluster.features(cache_size=args.cache_size)
        losses, seconds = _train(sampler, features, cluster.labels, train, args)
        return losses, cluster.stats(), serve_s, seconds


def run(argv=None) -> dict:
    parser = build_parser()
    args = parser.parse_args(argv)
    from gglspeedup.service.cluster import ray_connection

    if args.servers > args.parts:
        parser.error(f"--servers ({args.servers}) must be at most --parts ({args.parts})")
    try:  # Ray first: its processes start before this one runs Numba's threads (no fork after them)
        with ray_connection(args.address, private_network=True):
            local, remote, stats, times = _both_runs(args)
    except PermissionError as error:
        raise SystemExit(f"run as root (or under unshare -rn), or pass --address: {error}") from None
    local_s, service_s, serve_s, partition_s = times
    equal = remote == local
    print(f"{'batch':>5}  {'local loss':>10}  {'service loss':>12}")
    for index, (a, b) in enumerate(zip(local, remote)):
        print(f"{index:>5}  {a:>10.5f}  {b:>12.5f}")
    rate = max(args.batches - 1, 0)
    print(
        f"loss curves {'equal' if equal else 'DIFFERENT'}; batches after the first: local "
        f"{rate / max(local_s, 1e-9):.1f}/s, through {args.servers} servers {rate / max(service_s, 1e-9):.1f}/s "
        f"(servers started in {serve_s:.1f} s, partition {partition_s:.1f} s, {stats['retries']} retries)"
    )
    return {
        "local_losses": local,
        "service_losses": remote,
        "equal": equal,
        "local_s": local_s,
        "service_s": service_s,
        "serve_s": serve_s,
        "partition_s": partition_s,
        "transport": stats,
    }
