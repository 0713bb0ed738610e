"""``python -m gglspeedup.bench scale``: the papers-like graph, out of core, at a given size.

Examples (the billion-edge issue's targets; the full shape takes about 20 minutes the first time)::

    python -m gglspeedup.bench scale                        # 2M nodes: a quick run
    python -m gglspeedup.bench scale --nodes 111000000 --rebuild --json scale.json

What it reports, in one run:

1. **Build**: ``papers-like:NODES`` built out of core (:func:`~gglspeedup.datasets.build_csr`
   under ``--memory``) in a child process, its wall time and peak RSS (the child's own
   ``ru_maxrss``), bytes per edge on disk and resident (``graph.nbytes``). A graph already in the
   cache folder is reused (``--rebuild`` builds it again) and its build is not timed.
2. **Sampling** (fanouts ``--fanouts``, batches of ``--batch``): the big graph memory-mapped (page
   cache warmed first) and, when it fits, read into memory (huge pages), beside the same generator
   at ``--base-nodes`` in memory, interleaved rounds; the ratio big / base. DGL beside them where it
   can hold the graph (its int64 CSC with edge ids: 16 bytes per edge); where it cannot, the memory
   it would need, not a number. ``--reorder degree``: the same graph built renumbered hubs first
   (``build_csr(..., reorder=)``, its own cached folder) is sampled in memory beside them, from the
   same seeds mapped to its ids; its row gives its share of the base and of the unordered copy.
3. **Huge pages**: the base graph and a ``base-nodes x 128`` float32 table copied twice, with
   NumPy's huge-page advice off and on; sampling and gathers of each, interleaved.
4. **Features on disk** (``--feature-dim``, ``--feature-dtype``): a table written next to the graph,
   read through ``FeatureStore.from_npy`` with a ``--cache-size`` RAM cache of the best-connected
   rows; gathers of the nodes of sampled batches, page cache dropped for the file first (cold,
   ``posix_fadvise(DONTNEED)``) and then again (warm).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np

from ..validation import available_memory

__all__ = ["add_arguments", "run"]

_BUILD = """
import json, resource, sys, time
from gglspeedup.datasets.papers_like import load_papers_like
start = time.perf_counter()
graph, built = load_papers_like(int(sys.argv[1]), int(sys.argv[2]), folder=sys.argv[3], memory=sys.argv[4],
                                rebuild=sys.argv[5] == "1", reorder=sys.argv[6] or None)
print(json.dumps({"seconds": time.perf_counter() - start, "built": built, "num_edges": graph.num_edges,
                  "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""


def add_arguments(parser) -> None:
    from ._options import add_common_arguments

    parser.add_argument("--nodes", type=int, default=2_000_000, help="papers-like size (111000000: the full shape)")
    parser.add_argument("--base-nodes", type=int, default=2_000_000, help="the same generator's size to compare with")
    add_common_arguments(parser, seed=(0, "graph seed and batch seed"))
    parser.add_argument("--memory", default="2G", help="the out-of-core build's buffer budget (default 2G)")
    parser.add_argument(
        "--folder", default=None, help="cache folder (default $GGLSPEEDUP_CACHE or ~/.cache/gglspeedup)"
    )
    parser.add_argument("--rebuild", action="store_true", help="build the graphs even when cached")
    parser.add_argument(
        "--reorder",
        choices=["degree"],
        default=None,
        help="also build papers-like:NODES renumbered hubs first (build_csr(..., reorder=)) and sample it in "
        "memory beside the unordered copy, from the same seeds mapped to its ids",
    )
    add_common_arguments(
        parser, fanouts="15,10,5", batch=1024, batches=20, repeats=(3, "interleaved rounds; the median is reported")
    )
    parser.add_argument("--feature-dim", type=int, default=128, help="disk table width (default 128; 0: skip)")
    parser.add_argument("--feature-dtype", default="float16", help="disk table dtype (default float16)")
    parser.add_argument("--cache-size", default="1G", help="RAM cache in front of the disk table (default 1G)")
    add_common_arguments(parser, threads=(None, "CPU threads for Numba"))


def run(args) -> dict:
    from ..datasets.papers_like import cache_folder
    from ..validation import parse_fanouts
    from ._common import apply_threads, machine_info
    from ._options import check_at_least_one

    fanouts = parse_fanouts(args.fanouts)
    check_at_least_one(args, "nodes", "base_nodes", "batch", "batches", "repeats")
    _check_build_and_disk_args(args)
    apply_threads(args.threads)
    folder = args.folder or cache_folder()
    if os.path.lexists(folder) and not os.path.isdir(folder):  # was os.makedirs' FileExistsError traceback
        raise ValueError(f"--folder must be a folder (made when missing), got the file {folder!r}")
    os.makedirs(folder, exist_ok=True)
    results = {"command": "scale", "nodes": args.nodes, "base_nodes": args.base_nodes, "fanouts": fanouts}
    results["machine"] = machine_info()
    _progress(f"building (or finding) papers-like:{args.nodes} and :{args.base_nodes} in {folder}")
    results["build"] = _build(args, folder, args.nodes)
    results["base_build"] = _build(args, folder, args.base_nodes)
    reorder = getattr(args, "reorder", None)
    if reorder:
        results["ordered_build"] = _build(args, folder, args.nodes, reorder)
    from ..graph import CSRGraph

    big = CSRGraph.load(results["build"]["path"], mmap=True)
    args.big_path = results["build"]["path"]
    base = CSRGraph.load(results["base_build"]["path"], mmap=False)
    results["graph"] = _sizes(big, results["build"]["path"])
    _progress("sampling")
    ordered = CSRGraph.load(results["ordered_build"]["path"], mmap=True) if reorder else None
    results["sampling"] = _sampling(args, fanouts, big, base, ordered)
    _progress("huge pages")
    results["huge_pages"] = _huge_pages(args, fanouts, base)
    if args.feature_dim:
        _progress("features on disk")
        results["features"] = _features(args, folder, big, fanouts)
    _print(results)
    return results


def _check_build_and_disk_args(args) -> None:
    """The options the graph builds and the disk table read, checked before the builds (minutes
    each): a bad --memory failed in the build's child process, a bad --feature-dim, --feature-dtype
    or --cache-size only after both graphs were built (--seed: its argparse type, ``seed_int``)."""
    from ..device import parse_size

    parse_size(args.memory, "--memory")
    parse_size(args.cache_size, "--cache-size")
    if args.feature_dim < 0:
        raise ValueError(f"--feature-dim must be >= 0 (0: no disk table), got {args.feature_dim}")
    try:
        kind = np.dtype(args.feature_dtype).kind
    except TypeError:
        kind = None
    if kind != "f":
        raise ValueError(f"--feature-dtype must be a float dtype like float16 or float32, got {args.feature_dtype!r}")


def _progress(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def _build(args, folder, nodes, reorder=None) -> dict:
    command = [sys.executable, "-c", _BUILD, str(nodes), str(args.seed), folder, str(args.memory)]
    done = subprocess.run([*command, "1" if args.rebuild else "0", reorder or ""], capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"bench scale: building papers-like:{nodes} failed:\n{done.stderr[-2000:]}")
    report = json.loads(done.stdout.strip().splitlines()[-1])
    report["path"] = os.path.join(folder, f"papers-like-{nodes}-{args.seed}" + (f"-{reorder}" if reorder else ""))
    return report


def _sizes(graph, path) -> dict:
    on_disk = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return {
        "num_nodes": graph.num_nodes,
        "num_edges": graph.num_edges,
        "bytes_per_edge_disk": on_disk / max(1, graph.num_edges),
        "bytes_per_edge_resident": graph.nbytes / max(1, graph.num_edges),
        "index_dtype": graph.index_dtype.name,
    }


def _warm(folder) -> None:
    """Read the graph folder's files once, front to back (with read-ahead), into the page cache."""
    buffer = bytearray(64 << 20)
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb", buffering=0) as handle:
            while handle.readinto(buffer):
                pass


def _contender(graph, fanouts, seed):
    from ..sampling import NeighborSampler

    sampler = NeighborSampler(graph, fanouts, seed=seed)

    def sample(seeds) -> int:
        return sum(int(adj.e_id.shape[0]) for adj in sampler.sample(seeds).adjs)

    return sample


def _touch(*arrays) -> None:
    """Read every page of ``arrays`` once (a sequential pass, untimed). On these VMs memory not
    touched for a while comes back slowly (the host reclaims it: a first random read then costs tens
    of microseconds), so each timed pass starts from a graph whose pages were all just read, as a
    training loop's graph is."""
    for array in arrays:
        step = 1 << 24
        for start in range(0, array.shape[0], step):
            np.asarray(array[start : start + step]).max(initial=0)


def _timed(contenders: dict, args) -> dict:
    """Rounds of one timed pass per contender (each after its ``touch``), interleaved; the median
    round's rate per contender and, per round, every rate over the base's in the same round."""
    from ._common import seed_batches, time_pass

    batches_of, passes = {}, {}
    for name, (sample, num_nodes, convert, touch) in contenders.items():
        batches = batches_of.setdefault(num_nodes, seed_batches(num_nodes, args.batch, 3 + args.batches, args.seed))
        batches = [convert(b) for b in batches] if convert else batches
        for batch in batches[:3]:
            sample(batch)
        passes[name] = (sample, batches[3:], touch)
    rates = {name: [] for name in contenders}
    seconds = {name: [] for name in contenders}
    for _ in range(args.repeats):
        for name, (sample, batches, touch) in passes.items():
            if touch is not None:
                touch()
            elapsed, edges = time_pass(sample, batches)
            rates[name].append(edges / elapsed)
            seconds[name].append(elapsed / len(batches))
    rows = {}
    for name in contenders:
        middle = sorted(range(args.repeats), key=rates[name].__getitem__)[args.repeats // 2]
        rows[name] = {"edges_per_s": rates[name][middle], "ms_per_batch": 1e3 * seconds[name][middle]}
        rows[name]["round_edges_per_s"] = rates[name]
    return rows


def _paired(rows, name, base_name) -> float:
    ratios = sorted(a / b for a, b in zip(rows[name]["round_edges_per_s"], rows[base_name]["round_edges_per_s"]))
    return ratios[len(ratios) // 2]


def _sampling(args, fanouts, big, base, ordered=None) -> dict:
    _warm(args.big_path)
    contenders = {
        "big, mapped": (
            _contender(big, fanouts, args.seed),
            big.num_nodes,
            None,
            lambda: _touch(big.indptr, big.indices),
        )
    }
    needed = big.nbytes
    rows = {}
    if needed < 0.6 * available_memory():
        from ..graph import CSRGraph

        loaded = CSRGraph(np.array(big.indptr), np.array(big.indices), _checked=True)
        touch = lambda: _touch(loaded.indptr, loaded.indices)  # noqa: E731
        contenders["big, in memory"] = (_contender(loaded, fanouts, args.seed), big.num_nodes, None, touch)
    else:
        rows["big, in memory"] = {"status": f"not run: needs {needed / 2**30:.1f} GiB, too close to available memory"}
    if ordered is not None:  # the same seeds (drawn from the unordered ids), mapped to the ordered graph's
        from ..graph import CSRGraph

        name = f"big, in memory, {args.reorder} order"
        if ordered.nbytes < 0.6 * available_memory():
            copy = CSRGraph(np.array(ordered.indptr), np.array(ordered.indices), node_order=ordered.node_order,
                            _checked=True)  # fmt: skip
            touch = lambda: _touch(copy.indptr, copy.indices)  # noqa: E731
            contenders[name] = (_contender(copy, fanouts, args.seed), big.num_nodes, copy.new_ids, touch)
        else:
            rows[name] = {"status": f"not run: needs {ordered.nbytes / 2**30:.1f} GiB, too close to available memory"}
    touch_base = lambda: _touch(base.indptr, base.indices)  # noqa: E731
    contenders["base, in memory"] = (_contender(base, fanouts, args.seed), base.num_nodes, None, touch_base)
    for label, graph in (("big", big), ("base", base)):
        status = _add_dgl(contenders, f"dgl, {label}", graph, fanouts, args.seed)
        if status:
            rows[f"dgl, {label}"] = {"status": status}
    rows.update(_timed(contenders, args))
    for name in ("big, mapped", "big, in memory", "dgl, big"):
        base_name = "dgl, base" if name.startswith("dgl") else "base, in memory"
        if "edges_per_s" in rows.get(name, {}) and "edges_per_s" in rows.get(base_name, {}):
            rows[name]["of_base"] = _paired(rows, name, base_name)
    for name in [n for n in rows if n.startswith("big, in memory, ") and "edges_per_s" in rows[n]]:
        rows[name]["of_base"] = _paired(rows, name, "base, in memory")
        if "edges_per_s" in rows.get("big, in memory", {}):
            rows[name]["of_unordered"] = _paired(rows, name, "big, in memory")
    return rows


def _add_dgl(contenders, name, graph, fanouts, seed) -> str | None:
    """Add DGL's sampler on ``graph`` where DGL can hold it; else the reason it is not run."""
    from . import peers

    needed = 8 * (graph.num_nodes + 1) + 16 * graph.num_edges  # its int64 CSC indices and edge ids
    available = available_memory()
    if needed > 0.6 * available:
        return (f"cannot hold it: needs {needed / 2**30:.1f} GiB (int64 CSC + edge ids) with "
                f"{available / 2**30:.1f} GiB available; not run")  # fmt: skip
    try:
        contender = peers.prepare("dgl", graph, fanouts, seed=seed)
    except (ImportError, peers.PeerUnavailable) as error:
        return f"unavailable: {error}"
    contenders[name] = (contender.sample, graph.num_nodes, contender.convert, None)
    return None


def _huge_pages(args, fanouts, base) -> dict:
    from .._hugepages import huge_empty
    from ..feature import FeatureStore
    from ..graph import CSRGraph

    def copy(array, huge):
        out = huge_empty(array.shape, array.dtype, huge=huge)
        out[...] = array
        return out

    graphs = {
        huge: CSRGraph(copy(base.indptr, huge), copy(base.indices, huge), _checked=True) for huge in (False, True)
    }
    contenders = {
        f"sample, huge pages {'on' if h else 'off'}": (
            _contender(g, fanouts, args.seed),
            g.num_nodes,
            None,
            lambda g=g: _touch(g.indptr, g.indices),
        )
        for h, g in graphs.items()
    }
    rows = _timed(contenders, args)
    rng = np.random.default_rng(args.seed)
    ids = [rng.integers(0, base.num_nodes, 200_000) for _ in range(3 + args.batches // 4)]
    for huge in (False, True):
        table = huge_empty((base.num_nodes, 128), np.float32, huge=huge)
        table[...] = 1.0
        store, out = FeatureStore(table), huge_empty((200_000, 128), np.float32, huge=huge)
        contenders = {
            f"gather, huge pages {'on' if huge else 'off'}": (lambda i, s=store, o=out: s.gather(i, out=o).nbytes, None)
        }
        prepared = {n: (f, ids[3:], ids[:3], None) for n, (f, _) in contenders.items()}
        from ._common import time_contenders

        for name, timing in time_contenders(prepared, args.repeats).items():
            rows[name] = {"gb_per_s": timing.edges_per_s / 1e9}
        del table, store, out
    return rows


def _drop_page_cache(path) -> bool:
    try:
        handle = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.posix_fadvise(handle, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (AttributeError, OSError):
        return False
    finally:
        os.close(handle)


def _features(args, folder, graph, fanouts) -> dict:
    from ..datasets.papers_like import papers_like_features
    from ..feature import FeatureStore
    from ..sampling import NeighborSampler
    from ._common import seed_batches

    path = os.path.join(
        folder, f"papers-like-{graph.num_nodes}-{args.seed}-x{args.feature_dim}-{args.feature_dtype}.npy"
    )
    start = time.perf_counter()
    if args.rebuild or not os.path.exists(path):
        papers_like_features(
            path,
            graph.num_nodes,
            args.feature_dim,
            seed=args.seed,
            dtype=np.dtype(args.feature_dtype),
            overwrite=bool(args.rebuild),  # --rebuild: the bench's own cached file, asked for again
        )
        written_s = time.perf_counter() - start
    else:
        written_s = None
    store = FeatureStore.from_npy(path, cache_size=args.cache_size, graph=graph)
    sampler = NeighborSampler(graph, fanouts, seed=args.seed)
    ids = [np.asarray(sampler.sample(b).n_id) for b in seed_batches(graph.num_nodes, args.batch, 4, args.seed + 1)]
    ids = np.concatenate(ids)
    out = np.empty((len(ids), store.dim), store.dtype)
    rows = {
        "written_s": written_s,
        "rows": len(ids),
        "cached_rows": store.num_cached,
        "file_gb": os.path.getsize(path) / 1e9,
    }
    for label in ("cold", "warm"):
        if label == "cold":
            rows["cold_dropped"] = _drop_page_cache(path)
        store.reset_stats()
        start = time.perf_counter()
        store.gather(ids, out=out)
        seconds = time.perf_counter() - start
        rows[f"{label}_gb_per_s"] = out.nbytes / seconds / 1e9
        rows[f"{label}_s"] = seconds
        rows["hit_rate"] = store.stats()["hit_rate"]
    return rows


def _print(results: dict) -> None:
    build, graph = results["build"], results["graph"]
    print(f"scale: papers-like:{results['nodes']:,} ({graph['num_edges']:,} edges, {graph['index_dtype']} indices), "
          f"fanouts {results['fanouts']}")  # fmt: skip
    if build["built"]:
        print(f"  build: {build['seconds']:.0f} s, peak RSS {build['peak_rss'] / 2**30:.2f} GiB")
    else:
        print("  build: cached (not timed; --rebuild times it)")
    print(
        f"  bytes per edge: {graph['bytes_per_edge_disk']:.2f} on disk, {graph['bytes_per_edge_resident']:.2f} resident"
    )
    for name, row in results["sampling"].items():
        if "edges_per_s" in row:
            share = f", {row['of_base']:.2f} of base" if "of_base" in row else ""
            share += f", {row['of_unordered']:.2f} of unordered" if "of_unordered" in row else ""
            rate = f"{row['edges_per_s'] / 1e6:.2f} M edges/s, {row['ms_per_batch']:.1f} ms/batch"
            print(f"  sampling {name}: {rate}{share}")
        else:
            print(f"  sampling {name}: {row['status']}")
    for name, row in results["huge_pages"].items():
        value = f"{row['edges_per_s'] / 1e6:.2f} M edges/s" if "edges_per_s" in row else f"{row['gb_per_s']:.2f} GB/s"
        print(f"  {name}: {value}")
    features = results.get("features")
    if features:
        print(f"  disk gather ({features['rows']:,} rows, {features['file_gb']:.1f} GB file, "
              f"{features['cached_rows']:,} rows cached, hit rate {features['hit_rate']:.2f}): "
              f"cold {features['cold_gb_per_s']:.3f} GB/s, warm {features['warm_gb_per_s']:.2f} GB/s")  # fmt: skip
