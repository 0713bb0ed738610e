"""One SHA-256 per sampling mode of this checkout: the bit-identity check of a refactor, every mode.

    python tools/sample_digests.py [--device cpu|cuda:0] [--nodes 3000] > digests.txt

Run it in two checkouts (``git worktree add /tmp/base <commit>``; ``PYTHONPATH=/tmp/base``) and
``diff`` the outputs: a line that differs names the mode whose output changed. Every mode runs
through the public API only (so any commit runs it), on small seeded graphs, and hashes every array
of every output (``n_id``, each hop's ``edge_index``, ``e_id`` and ``size``, ``batch``, a link
batch's ``pair_index``, labels, negatives and strict-mode count; typed outputs per type and
relation, in the graph's order) with its dtype and shape, over several batch keys:

- untyped and typed: plain, ``replace``, ``weighted`` (with and without replacement), ``-1``
  fanouts, ``expand="new"``, ``disjoint``, temporal by node and by edge times (``"uniform"`` and
  ``"last"``), duplicate seeds;
- link batches: every negative mode, strict negatives, ``exclude`` none / self / reverse, disjoint
  and temporal ones (``pair_time``).

``tools/alternate_commits.py`` and ``tools/compare_commits.py`` time the commits (and the latter
checks plain and link batches bit for bit); this covers the modes they do not. On the CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1 --device cuda:0``) keep ``--nodes`` at about 60.
"""

from __future__ import annotations

import argparse
import hashlib
import warnings

import numpy as np


def _feed(digest, value) -> None:
    """Hash ``value`` (arrays with dtype and shape; dicts in key order; sequences in order)."""
    from gglspeedup.device import to_numpy

    if value is None or isinstance(value, (bool, int, float, str)):
        digest.update(repr(value).encode())
    elif isinstance(value, dict):
        for key in value:
            digest.update(repr(key).encode())
            _feed(digest, value[key])
    elif isinstance(value, (list, tuple)):
        digest.update(f"[{len(value)}".encode())
        for item in value:
            _feed(digest, item)
    else:
        array = np.ascontiguousarray(to_numpy(value))
        digest.update(f"{array.dtype.str}{array.shape}".encode())
        digest.update(array.tobytes())


def _graphs(nodes: int):
    import gglspeedup as gg

    rng = np.random.default_rng(7)
    edges = rng.integers(0, nodes, size=(2, 8 * nodes))
    edges[1, : nodes // 4] = 3  # a hub
    edges = np.concatenate((edges, edges[::-1, : 2 * nodes]), axis=1)  # some edges both ways: exclude="reverse"
    weights = rng.random(edges.shape[1])
    weights[::9] = 0
    node_time = rng.integers(0, 100, nodes)
    edge_time = rng.integers(0, 100, edges.shape[1])
    untyped = gg.CSRGraph.from_edge_index(edges, num_nodes=nodes, weights=weights)
    counts = {"a": nodes, "b": nodes // 2 + 1}
    relations = {
        ("a", "to", "a"): edges[:, ::2],
        ("a", "writes", "b"): np.stack((edges[0, 1::2], edges[1, 1::2] % counts["b"])),
        ("b", "rev", "a"): np.stack((edges[1, 1::2] % counts["b"], edges[0, 1::2])),
    }
    typed_weights = {et: rng.random(index.shape[1]) for et, index in relations.items()}
    typed = gg.HeteroGraph(
        {
            et: gg.CSRGraph.from_edge_index(
                index, num_nodes=counts[et[2]], num_src_nodes=counts[et[0]], weights=typed_weights[et]
            )
            for et, index in relations.items()
        },
        counts,
    )
    typed_node_time = {t: rng.integers(0, 100, n) for t, n in counts.items()}
    typed_edge_time = {et: rng.integers(0, 100, index.shape[1]) for et, index in relations.items()}
    return untyped, node_time, edge_time, typed, typed_node_time, typed_edge_time, edges, relations


def _modes():
    """``(name, sampler options)`` of every mode, untyped and typed alike."""
    modes = [
        ("plain", {}),
        ("replace", {"replace": True}),
        ("weighted", {"weighted": True}),
        ("weighted-replace", {"weighted": True, "replace": True}),
        ("expand-new", {"expand": "new"}),
        ("disjoint", {"disjoint": True}),
        ("disjoint-new", {"disjoint": True, "expand": "new"}),
    ]
    for kind in ("node", "edge"):
        modes.append((f"{kind}-time", {"time": kind}))
        modes.append((f"{kind}-time-last", {"time": kind, "temporal_strategy": "last"}))
        modes.append((f"{kind}-time-weighted", {"time": kind, "weighted": True}))
    return modes


def _link_calls(temporal: bool):
    calls = []
    for negatives in (None, "binary", "per_source", "triplet"):
        for exclude in (None, "self", "reverse"):
            calls.append((f"{negatives}-{exclude}", {"negatives": negatives, "exclude": exclude, "num_negatives": 2}))
    calls.append(("strict", {"negatives": "binary", "strict_negatives": True, "num_negatives": 3}))
    if temporal:
        calls = [(name, call) for name, call in calls if call.get("exclude") != "reverse"]
    return calls


def run(device: str, nodes: int) -> list:
    import gglspeedup as gg

    untyped, node_time, edge_time, typed, typed_node_time, typed_edge_time, edges, relations = _graphs(nodes)
    rng = np.random.default_rng(11)
    seeds = [np.concatenate((rng.choice(nodes, 12, replace=False), [3, 3])) for _ in range(3)]

    def some_pairs(edges, sources, targets):  # half of them edges (exclusion removes them), half not
        real = edges[:, rng.choice(edges.shape[1], 5, replace=False)]
        return np.concatenate((real, np.stack((rng.integers(0, sources, 5), rng.integers(0, targets, 5)))), axis=1)

    half = nodes // 2 + 1
    pairs = [some_pairs(edges, nodes, nodes) for _ in range(2)]
    typed_pairs = [some_pairs(relations[("a", "writes", "b")], nodes, half) for _ in range(2)]
    times = [rng.integers(20, 100, len(s)) for s in seeds]
    pair_times = [rng.integers(20, 100, p.shape[1]) for p in pairs]
    typed_seeds = [{"a": s[:8], "b": s[8:] % half} for s in seeds]
    lines = []
    for typed_mode in (False, True):
        for name, options in _modes():
            options = dict(options)
            kind = options.pop("time", None)
            fanouts = [4, -1] if name == "plain" else [3, 2]
            if typed_mode:
                if kind:
                    options[f"{kind}_time"] = typed_node_time if kind == "node" else typed_edge_time
                sampler = gg.HeteroNeighborSampler(typed, fanouts, seed=5, device=device, **options)
            else:
                if kind:
                    options[f"{kind}_time"] = node_time if kind == "node" else edge_time
                sampler = gg.NeighborSampler(untyped, fanouts, seed=5, device=device, **options)
            prefix = f"{'typed' if typed_mode else 'untyped'} {name}"
            digest = hashlib.sha256()
            for key, batch in enumerate(typed_seeds if typed_mode else seeds):
                seed_time = None
                if kind:
                    seed_time = {t: times[key][: len(ids)] for t, ids in batch.items()} if typed_mode else times[key]
                out = sampler.sample(batch, key=key, seed_time=seed_time) if kind else sampler.sample(batch, key=key)
                _feed(digest, tuple(out))
            lines.append(f"{prefix} sample {digest.hexdigest()}")
            for call_name, call in _link_calls(bool(kind)):
                if name not in ("plain", "weighted", "expand-new", "disjoint") and not kind:
                    continue
                digest = hashlib.sha256()
                for key, batch in enumerate(typed_pairs if typed_mode else pairs):
                    extra = {"pair_time": pair_times[key]} if kind else {}
                    if typed_mode:
                        extra.update(edge_type=("a", "writes", "b"), reverse_edge_type=("b", "rev", "a"))
                    out = sampler.sample_links(batch, key=key, **call, **extra)
                    _feed(digest, tuple(out))
                lines.append(f"{prefix} links {call_name} {digest.hexdigest()}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--nodes", type=int, default=3000)
    args = parser.parse_args()
    warnings.simplefilter("ignore", RuntimeWarning)  # the simulator's uint64 overflow warnings
    for line in run(args.device, args.nodes):
        print(line)


if __name__ == "__main__":
    main()
