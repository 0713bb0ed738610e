"""gglspeedup.gammagl's loaders on a service cluster: every batch equals the local loader's (issue 40).

Runs in the GammaGL environment with the service's packages (``GAMMAGL_SERVICE=1 bash
scripts/peer_env_gammagl.sh``: GammaGL, TensorLayerX, Ray, pymetis). Ray runs inside a private
network namespace this process enters (:mod:`gglspeedup.service.netns`: loopback only), never on
the machine's interfaces.

A random graph (``--nodes``, ``--edges``; float32 features, int64 labels) is partitioned
``--parts`` ways by each of ``--methods`` and served by ``--servers`` Ray actors. For each, the
same loader runs over the local graph and over the cluster, for two epochs, with and without
prefetching, and every batch is compared with exact equality:

- ``gglspeedup.gammagl.NeighborSampler`` given ``cluster.sampler(...)`` and
  ``x=cluster.features()``, against the drop-in over the ``edge_index``: ``dst_node``, ``n_id``,
  each hop's ``edge_index``, ``e_id`` and ``size``, the feature rows;
- ``NodeNeighborLoader`` / ``LinkNeighborLoader`` over a ``gammagl.data.Graph`` holding only
  ``num_nodes``, given ``neighbor_sampler=cluster.sampler(...)`` and ``node_attrs={"x":
  cluster.features(), "y": cluster.labels}``, against the same loaders over the whole ``Graph``
  (``edge_index``, ``x``, ``y``, and ``n_id`` / ``edge_id`` as attributes GammaGL's slicing
  carries into each batch; ``e_id`` is compared with ``edge_id``): ``n_id``, ``e_id``,
  ``edge_index``, ``x``, ``y``, ``num_nodes``, ``batch_size`` (node batches),
  ``edge_label_index`` / ``edge_label`` (link batches, with and without negatives).

    /work/peers/gammagl/bin/python tools/gammagl_service.py [--methods range,metis] [--servers 2]

Exit status 0 when every batch matched (the count is printed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FANOUTS = [4, 3]
NODE_FIELDS = ("n_id", "e_id", "edge_index", "x", "y", "num_nodes", "batch_size")
LINK_FIELDS = ("n_id", "e_id", "edge_index", "x", "y", "num_nodes", "edge_label_index", "edge_label")


def host(value):
    """A NumPy view of a tensor, array or number (``None`` stays ``None``)."""
    import tensorlayerx as tlx

    if value is None:
        return None
    if tlx.is_tensor(value):
        return tlx.convert_to_numpy(value)
    return np.asarray(value)


def same(a, b) -> bool:
    """Exact equality of two values as arrays: shape, dtype and every element."""
    a, b = host(a), host(b)
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and a.dtype == b.dtype and bool(np.array_equal(a, b))


class Tally:
    """Batches compared per case, and the first differences found."""

    def __init__(self):
        self.counts, self.failures = {}, []

    def check(self, case: str, index: int, pairs: dict) -> None:
        bad = [name for name, (a, b) in pairs.items() if not same(a, b)]
        self.counts[case] = self.counts.get(case, 0) + 1
        if bad:
            self.failures.append(f"{case}, batch {index}: {', '.join(bad)} differ")


def random_graph(nodes: int, edges: int, seed: int):
    """``(edge_index, x, y)``: a random multigraph, 16-wide float32 features, int64 labels."""
    rng = np.random.default_rng(seed)
    edge_index = rng.integers(0, nodes, (2, edges), dtype=np.int64)
    x = rng.standard_normal((nodes, 16)).astype(np.float32)
    y = rng.integers(0, 7, nodes).astype(np.int64)
    return edge_index, x, y


def neighbor_sampler_case(tally, cluster, edge_index, x, num_nodes, label):
    from gglspeedup.gammagl import NeighborSampler

    options = {"sample_lists": FANOUTS, "batch_size": 64, "shuffle": True, "seed": 2}
    for prefetch in (0, 2):
        case = f"{label} NeighborSampler prefetch={prefetch}"
        remote = NeighborSampler(cluster.sampler([1], seed=2), x=cluster.features(), prefetch=prefetch, **options)
        local = NeighborSampler(edge_index, x=x, num_nodes=num_nodes, prefetch=prefetch, **options)
        for _epoch in range(2):
            batches = list(zip(remote, local, strict=True))
            if len(batches) != len(local):
                tally.failures.append(f"{case}: {len(batches)} batches, {len(local)} expected")
            for index, ((dst_a, n_id_a, adjs_a, x_a), (dst_b, n_id_b, adjs_b, x_b)) in enumerate(batches):
                pairs = {"dst_node": (dst_a, dst_b), "n_id": (n_id_a, n_id_b), "x": (x_a, x_b)}
                pairs["hops"] = (len(adjs_a), len(adjs_b))
                for hop, (a, b) in enumerate(zip(adjs_a, adjs_b)):
                    pairs[f"hop {hop} edge_index"] = (a.edge_index, b.edge_index)
                    pairs[f"hop {hop} e_id"] = (a.e_id, b.e_id)
                    pairs[f"hop {hop} size"] = (a.size, b.size)
                tally.check(case, index, pairs)


def fields(remote, local, names) -> dict:
    """``name -> (remote value, local value)``; the local batch's edge ids are its ``edge_id``."""
    return {name: (getattr(remote, name), getattr(local, "edge_id" if name == "e_id" else name)) for name in names}


def graph_loader_cases(tally, cluster, edge_index, x, y, num_nodes, label):
    import tensorlayerx as tlx
    from gammagl.data import Graph

    from gglspeedup.gammagl import LinkNeighborLoader, NodeNeighborLoader

    t = tlx.convert_to_tensor
    whole = Graph(
        edge_index=t(edge_index),
        x=t(x),
        y=t(y),
        num_nodes=num_nodes,
        n_id=t(np.arange(num_nodes, dtype=np.int64)),  # node attributes GammaGL slices: the ids
        edge_id=t(np.arange(edge_index.shape[1], dtype=np.int64)),  # GammaGL slices edge attributes named *edge*
    )
    seeds = t(np.arange(0, num_nodes, 2, dtype=np.int64))
    for prefetch in (0, 2):
        case = f"{label} NodeNeighborLoader prefetch={prefetch}"
        options = {"batch_size": 50, "shuffle": True, "seed": 5, "prefetch": prefetch}
        remote = NodeNeighborLoader(
            Graph(num_nodes=num_nodes),
            FANOUTS,
            seeds,
            neighbor_sampler=cluster.sampler(FANOUTS, seed=5),
            node_attrs={"x": cluster.features(cache_size=1024), "y": cluster.labels},
            **options,
        )
        local = NodeNeighborLoader(whole, FANOUTS, seeds, **options)
        for _epoch in range(2):
            for index, (a, b) in enumerate(zip(remote, local, strict=True)):
                tally.check(case, index, fields(a, b, NODE_FIELDS))
    pairs = t(edge_index[:, :150])
    for ratio in (0.0, 1.0):
        case = f"{label} LinkNeighborLoader neg_sampling_ratio={ratio}"
        options = {"batch_size": 40, "shuffle": True, "seed": 7, "prefetch": 2, "neg_sampling_ratio": ratio}
        remote = LinkNeighborLoader(
            Graph(num_nodes=num_nodes),
            FANOUTS,
            pairs,
            neighbor_sampler=cluster.sampler(FANOUTS, seed=7),
            node_attrs={"x": cluster.features(), "y": cluster.labels},
            **options,
        )
        local = LinkNeighborLoader(whole, FANOUTS, pairs, **options)
        for _epoch in range(2):
            for index, (a, b) in enumerate(zip(remote, local, strict=True)):
                tally.check(case, index, fields(a, b, LINK_FIELDS))


# ---------------------------------------------------------------------------------- GammaGL's tests on a cluster
def _graph_key(graph, num_nodes, hetero_type, edges) -> str:
    """A digest of a graph's node counts and edges (an ``edge_index`` array, a ``Graph`` or a
    ``HeteroGraph``): loaders over the same graph share one cluster."""
    import hashlib

    digest = hashlib.sha256()
    if isinstance(graph, hetero_type):
        node_types, edge_types = graph.metadata()
        stores = [(repr(t), int(graph[t].num_nodes), None) for t in node_types]
        stores += [(repr(et), 0, edges(graph[et])) for et in edge_types]
    elif isinstance(graph, np.ndarray):
        stores = [("", num_nodes, graph)]
    else:
        stores = [("", int(graph.num_nodes), edges(graph))]
    for name, count, array in stores:
        digest.update(f"{name}:{count}".encode())
        if array is not None:
            digest.update(np.ascontiguousarray(array, dtype=np.int64).tobytes())
    return digest.hexdigest()


_OPEN: list = []  # what swap_in_cluster keeps open: the Ray connection, then every cluster


def _close_all() -> None:
    while _OPEN:
        _OPEN.pop().close()


def swap_in_cluster(servers: int = 2, method: str = "range") -> None:
    """Replace GammaGL's loader classes, wherever GammaGL's code or tests import them, by
    gglspeedup's sampling through a cluster: each loader built partitions the graph it is given
    (``method``, ``servers`` parts, into a temporary folder), serves it with ``servers`` Ray
    actors and samples with ``cluster.sampler(...)`` (GammaGL's slicing still reads the graph's
    attributes). Ray starts here, in a private network namespace; all of it is closed at exit.
    ``tools/gammagl_conformance.py --modes cluster`` runs GammaGL's loader tests this way."""
    import atexit

    import gammagl.loader
    import gammagl.loader.link_neighbor_loader
    import gammagl.loader.neighbor_sampler
    import gammagl.loader.node_neighbor_loader
    from gammagl.data import HeteroGraph

    import gglspeedup as gg
    from gglspeedup import gammagl as ours
    from gglspeedup.gammagl.neighbor_sampler import _infer_num_nodes
    from gglspeedup.service import partition, serve
    from gglspeedup.service.cluster import ray_connection

    connection = ray_connection(private_network=True)
    connection.__enter__()
    _OPEN.append(type("RayConnection", (), {"close": lambda self: connection.__exit__(None, None, None)})())
    atexit.register(_close_all)
    folder = tempfile.mkdtemp(prefix="gammagl-cluster-")
    atexit.register(__import__("shutil").rmtree, folder, True)

    def edges(store):
        return host(store.edge_index).astype(np.int64) if getattr(store, "edge_index", None) is not None else None

    served = {}  # one cluster per distinct graph (GammaGL's example builds three loaders over one)

    def serve_graph(graph, num_nodes=None):
        key = _graph_key(graph, num_nodes, HeteroGraph, edges)
        if key not in served:
            served[key] = _serve_new(graph, num_nodes)
        return served[key]

    def _serve_new(graph, num_nodes):
        if isinstance(graph, HeteroGraph):
            node_types, edge_types = graph.metadata()
            counts = {t: int(graph[t].num_nodes) for t in node_types}
            ours_graph = gg.HeteroGraph({et: edges(graph[et]) for et in edge_types}, counts)
        elif isinstance(graph, np.ndarray):
            ours_graph = gg.CSRGraph.from_edge_index(graph, num_nodes=num_nodes)
        else:
            ours_graph = gg.CSRGraph.from_edge_index(edges(graph), num_nodes=int(graph.num_nodes))
        path = os.path.join(folder, str(len(_OPEN)))
        partition(ours_graph, path, servers, method=method)
        cluster = serve(path, servers, deadline="60s")
        _OPEN.append(cluster)
        return cluster

    class NodeNeighborLoader(ours.NodeNeighborLoader):
        def __init__(self, graph, num_neighbors, input_nodes_type=None, replace=False, directed=True, **kwargs):
            sampler = serve_graph(graph).sampler(num_neighbors, replace=replace, seed=kwargs.get("seed", 0))
            super().__init__(
                graph, num_neighbors, input_nodes_type, replace, directed, neighbor_sampler=sampler, **kwargs
            )

    class LinkNeighborLoader(ours.LinkNeighborLoader):
        def __init__(self, graph, num_neighbors, edge_label_index=None, edge_label=None, replace=False, **kwargs):
            sampler = serve_graph(graph).sampler(num_neighbors, replace=replace, seed=kwargs.get("seed", 0))
            super().__init__(
                graph, num_neighbors, edge_label_index, edge_label, replace, neighbor_sampler=sampler, **kwargs
            )

    class NeighborSampler(ours.NeighborSampler):
        def __init__(self, edge_index, sample_lists, node_idx=None, num_nodes=None, *args, **kwargs):
            array = host(edge_index).astype(np.int64)
            num_nodes = _infer_num_nodes(array, node_idx, num_nodes)
            sampler = serve_graph(array, num_nodes).sampler([1], seed=kwargs.get("seed", 0))
            super().__init__(sampler, sample_lists, node_idx, None, *args, **kwargs)

    for cls in (NodeNeighborLoader, LinkNeighborLoader, NeighborSampler):
        cls.__name__ = cls.__qualname__ = cls.__mro__[1].__name__  # str(loader) as GammaGL's tests read it
    for module, cls in (
        (gammagl.loader, NeighborSampler),
        (gammagl.loader, NodeNeighborLoader),
        (gammagl.loader, LinkNeighborLoader),
        (gammagl.loader.neighbor_sampler, NeighborSampler),
        (gammagl.loader.node_neighbor_loader, NodeNeighborLoader),
        (gammagl.loader.link_neighbor_loader, LinkNeighborLoader),
    ):
        setattr(module, cls.__name__, cls)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="range,metis", help="partitioning methods (range, metis)")
    parser.add_argument("--parts", type=int, default=4, help="partitions (default 4)")
    parser.add_argument("--servers", type=int, default=2, help="Ray server actors (default 2)")
    parser.add_argument("--nodes", type=int, default=400)
    parser.add_argument("--edges", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    os.environ.setdefault("TL_BACKEND", "torch")
    try:
        import gammagl.data  # noqa: F401
        import ray  # noqa: F401
        import tensorlayerx  # noqa: F401
    except ImportError as error:
        print(
            f"skipped: {error}; GAMMAGL_SERVICE=1 bash scripts/peer_env_gammagl.sh builds the environment "
            "(GammaGL, TensorLayerX, Ray, pymetis)"
        )
        return 0
    import gglspeedup as gg
    from gglspeedup.service import partition, serve
    from gglspeedup.service.cluster import ray_connection
    from gglspeedup.service.netns import interfaces

    edge_index, x, y = random_graph(args.nodes, args.edges, args.seed)
    graph = gg.CSRGraph.from_edge_index(edge_index, num_nodes=args.nodes)  # edge ids: edge_index's columns
    tally = Tally()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gammagl-service-") as folder:
        with ray_connection(private_network=True):
            print(f"Ray in a private network namespace (interfaces: {', '.join(interfaces())})", flush=True)
            for method in args.methods.split(","):
                path = os.path.join(folder, method)
                partition(graph, path, args.parts, features=x, labels=y, method=method)
                label = f"{method} x{args.parts}, {args.servers} servers:"
                with serve(path, args.servers, deadline="60s") as cluster:
                    neighbor_sampler_case(tally, cluster, edge_index, x, args.nodes, label)
                    graph_loader_cases(tally, cluster, edge_index, x, y, args.nodes, label)
                print(f"{label} done ({time.perf_counter() - start:.0f} s)", flush=True)
    for case, count in tally.counts.items():
        print(f"  {case:70s} {count} batches")
    total = sum(tally.counts.values())
    for failure in tally.failures[:20]:
        print("  DIFFERS:", failure)
    verdict = "every batch equal" if not tally.failures else f"{len(tally.failures)} batches differ"
    print(f"{total} batches compared over {len(tally.counts)} cases: {verdict} ({time.perf_counter() - start:.0f} s)")
    return 0 if total and not tally.failures else 1


if __name__ == "__main__":
    sys.exit(main())
