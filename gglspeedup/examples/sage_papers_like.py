"""GraphSAGE on the papers-like graph (ogbn-papers100M's shape) with its features on disk.

``python demos/train_sage_papers_like.py`` trains for a fixed number of batches on the full shape
(111M nodes, about 1.6B edges) on one machine: the graph is built out of core once
(:func:`~gglspeedup.datasets.papers_like.load_papers_like`, cached), the feature table is a
``.npy`` file on disk read through :meth:`~gglspeedup.FeatureStore.from_npy` with a cache of the
best-connected rows (RAM on the CPU, GPU memory on a GPU), and a prefetching
:class:`~gglspeedup.NodeLoader` samples and gathers batch ``i + 1`` while the model trains on
batch ``i``. It prints throughput every ``--log-every`` batches and, at the end, batches/s,
sampled edges/s, feature rows/s and the process's peak RSS. ``--nodes`` makes it small.
"""

from __future__ import annotations

import argparse
import os
import resource
import time

import numpy as np

__all__ = ["run", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    from ..datasets.papers_like import PAPERS_NODES
    from .cli import above, at_least, device_text, numeric_dtype_text, parse_fanouts, size_text

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=at_least(1), default=PAPERS_NODES, help="graph size (default: papers100M's)")
    parser.add_argument("--seed", type=at_least(0), default=0, help="graph, feature, split and model seed")
    parser.add_argument(
        "--folder", default=None, help="cache folder (default $GGLSPEEDUP_CACHE or ~/.cache/gglspeedup)"
    )
    parser.add_argument(
        "--memory",
        default="2G",
        type=size_text("the memory budget"),
        help="the out-of-core build's buffer budget (default 2G)",
    )
    parser.add_argument(
        "--feature-dim", type=at_least(1), default=128, help="feature width (default 128, as papers100M)"
    )
    parser.add_argument(
        "--feature-dtype", default="float16", type=numeric_dtype_text, help="feature dtype on disk (default float16)"
    )
    parser.add_argument(
        "--cache-size",
        default="2G",
        type=size_text("the cache size"),
        help="feature cache: RAM on the CPU, GPU memory on a GPU",
    )
    parser.add_argument("--fanouts", type=parse_fanouts, default=[15, 10, 5], help="seeds' hop first (default 15,10,5)")
    parser.add_argument("--batch-size", type=at_least(1), default=1024, help="seeds per batch (default 1024)")
    parser.add_argument("--batches", type=at_least(1), default=200, help="training batches (default 200)")
    parser.add_argument("--hidden", type=at_least(1), default=256, help="hidden width (default 256)")
    parser.add_argument("--lr", type=above(0.0), default=3e-3, help="Adam learning rate")
    parser.add_argument("--prefetch", type=at_least(0), default=2, help="batches sampled ahead by the loader (0: none)")
    parser.add_argument("--device", default="cpu", type=device_text, help="cpu or cuda:N")
    parser.add_argument("--log-every", type=at_least(1), default=20, help="batches between progress lines")
    return parser


def _features(args, graph, folder):
    from ..datasets.papers_like import papers_like_features, papers_like_labels

    stem = os.path.join(folder, f"papers-like-{graph.num_nodes}-{args.seed}-x{args.feature_dim}-{args.feature_dtype}")
    path, label_path = f"{stem}.npy", f"{stem}-labels.npy"
    if not os.path.exists(path):  # a file already there is reused, never rewritten
        start = time.perf_counter()
        papers_like_features(
            path, graph.num_nodes, args.feature_dim, seed=args.seed, dtype=np.dtype(args.feature_dtype)
        )
        print(f"wrote {os.path.getsize(path) / 1e9:.1f} GB of features in {time.perf_counter() - start:.0f} s: {path}")
    if not os.path.exists(label_path):
        labels = papers_like_labels(graph.num_nodes, seed=args.seed).astype(np.int16)
        with open(label_path, "xb") as handle:  # a new file only: what appeared meanwhile is not ours
            np.save(handle, labels)
    return path, np.load(label_path, mmap_mode="r")


def run(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    import torch
    import torch.nn.functional as F

    import gglspeedup as gg

    from ..datasets.papers_like import cache_folder, load_papers_like
    from .torch_models import SAGE

    folder = args.folder or cache_folder()
    os.makedirs(folder, exist_ok=True)
    start = time.perf_counter()
    graph, built = load_papers_like(args.nodes, args.seed, folder=folder, memory=args.memory)
    print(
        f"papers-like:{graph.num_nodes:,}: {graph.num_edges:,} edges ({graph.nbytes / graph.num_edges:.2f} bytes "
        f"per edge), {'built' if built else 'loaded'} in {time.perf_counter() - start:.1f} s"
    )
    path, labels = _features(args, graph, folder)
    start = time.perf_counter()
    features = gg.FeatureStore.from_npy(path, device=args.device, cache_size=args.cache_size, graph=graph)
    print(f"features: {features.shape} {features.dtype} on disk, {features.num_cached:,} hottest rows cached "
          f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    rng = np.random.default_rng(args.seed)
    train = np.sort(rng.choice(graph.num_nodes, size=max(1, graph.num_nodes // 90), replace=False))  # papers100M: 1.1%
    sampler = gg.NeighborSampler(graph, args.fanouts, seed=args.seed, device=args.device)
    loader = gg.NodeLoader(
        sampler, features, train, args.batch_size, labels=np.asarray(labels), prefetch=args.prefetch, seed=args.seed
    )
    torch.manual_seed(args.seed)
    model = SAGE(args.feature_dim, args.hidden, 172, len(args.fanouts), dropout=0.5)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model.train()
    done, edges, rows, losses = 0, 0, 0, []
    start = last = time.perf_counter()  # restarted after the first batch: compilation is not throughput
    first_batch_s = None
    while done < args.batches:
        for batch in loader:
            optimizer.zero_grad()
            out = model(batch.x.float(), batch.adjs)
            loss = F.cross_entropy(out, batch.y.long())
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            done += 1
            if first_batch_s is None:
                first_batch_s = time.perf_counter() - start
                start = last = time.perf_counter()
                if done >= args.batches:
                    break
                continue
            edges += sum(int(adj.e_id.shape[0]) for adj in batch.adjs)
            rows += int(batch.n_id.shape[0])
            if done % args.log_every == 0:
                now = time.perf_counter()
                print(f"batch {done}: loss {np.mean(losses[-args.log_every:]):.3f}, "
                      f"{args.log_every / (now - last):.2f} batches/s")  # fmt: skip
                last = now
            if done >= args.batches:
                break
    seconds = max(time.perf_counter() - start, 1e-9)
    stats = loader.stats()
    result = {
        "batches": done,
        "first_batch_s": first_batch_s,
        "seconds": seconds,
        "batches_per_s": (done - 1) / seconds,
        "sampled_edges_per_s": edges / seconds,
        "feature_rows_per_s": rows / seconds,
        "first_loss": losses[0],
        "last_loss": float(np.mean(losses[-min(len(losses), args.log_every) :])),
        "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "cache_hit_rate": features.stats()["hit_rate"],
        "loader_wait_s": stats.get("wait_s"),
        "sample_s": stats.get("sample_s"),
        "gather_s": stats.get("gather_s"),
    }
    print(
        f"{done} batches; first (compiling the kernels) {first_batch_s:.1f} s, then {done - 1} in {seconds:.1f} s: "
        f"{result['batches_per_s']:.2f} batches/s, "
        f"{edges / seconds / 1e6:.2f} M sampled edges/s, {rows / seconds / 1e6:.2f} M feature rows/s, "
        f"cache hit rate {result['cache_hit_rate']:.2f}; loss {result['first_loss']:.3f} -> {result['last_loss']:.3f}; "
        f"peak RSS {result['peak_rss_gib']:.2f} GiB"
    )
    return result
