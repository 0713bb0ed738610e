"""A graph folder corrupted on disk and loaded without ``verify`` never crashes a sampler.

``load(verify=False)`` trusts the arrays' contents (an O(1) load) but checks ``indptr`` in
O(num_nodes), and every kernel bounds the neighbour ids it reads from ``indices`` before using
them as indices: a corrupt id is a ``ValueError`` naming it and its CSR position, on the CPU and
the (simulated) GPU alike, for plain, link, disjoint and temporal batches, untyped and typed.
The sampling runs in a child process, so a regression that segfaults fails the test instead of
ending the test session."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import gglspeedup as gg

from conftest import ROOT

BAD_ID = 10**9
HINT = "the graph folder is corrupt: load(..., verify=True) checks every array's checksum"

_CHILD = r"""
import json, sys
import numpy as np
import gglspeedup as gg

folder, typed, device, cases = sys.argv[1], sys.argv[2] == "typed", sys.argv[3], json.loads(sys.argv[4])
# verify=False: contents trusted. mmap=False reads the arrays into writable memory: the kernels'
# variants for these types are the in-memory graphs' that the warm-up compiled (mapped, read-only
# arrays are variants of their own, the same kernel source: about 58 s of compiles in this file's
# children on a fresh clone, nothing more proven).
graph = (gg.HeteroGraph if typed else gg.CSRGraph).load(folder, mmap=False)
for case in cases:
    try:
        if typed:
            seeds = {t: np.arange(n) for t, n in graph.num_nodes.items()}
            if case == "plain":
                gg.HeteroNeighborSampler(graph, [-1, 2], seed=0, device=device).sample(seeds)
            elif case == "disjoint":
                times = {et: np.zeros(graph.num_edges[et], np.int64) for et in graph.edge_types}
                sampler = gg.HeteroNeighborSampler(graph, [-1, 2], edge_time=times, device=device)
                sampler.sample(seeds, seed_time={t: np.ones(len(s), np.int64) for t, s in seeds.items()})
            elif case == "node_time":
                gg.HeteroNeighborSampler(graph, [-1], node_time={t: np.arange(n) for t, n in graph.num_nodes.items()})
        else:
            nodes = np.arange(graph.num_nodes)
            if case == "plain":
                gg.NeighborSampler(graph, [-1, 2], seed=0, device=device).sample(nodes)
            elif case == "bounded":  # fanout k: the GPU's padded hop
                gg.NeighborSampler(graph, [1000, 2], seed=0, device=device).sample(nodes)
            elif case == "links":
                pairs = np.stack([nodes, np.roll(nodes, 1)])
                sampler = gg.NeighborSampler(graph, [-1, 2], seed=0, device=device)
                sampler.sample_links(pairs, negatives="binary", exclude="reverse")
            elif case == "disjoint":
                times = np.zeros(graph.num_edges, np.int64)
                sampler = gg.NeighborSampler(graph, [-1, 2], edge_time=times, device=device)
                sampler.sample(nodes, seed_time=np.ones(len(nodes), np.int64))
            elif case == "node_time":
                gg.NeighborSampler(graph, [-1], node_time=np.arange(graph.num_nodes))
            elif case in ("fused", "blocks"):  # layer-wise inference: the fused kernel reads rows unchecked
                import torch
                from gglspeedup.examples.torch_models import SAGEConv

                with torch.no_grad():
                    x = np.ones((graph.num_nodes, 4), np.float32)
                    gg.inference.layerwise([SAGEConv(4, 2)], graph, x, fused=case == "fused")
        print(json.dumps([case, "no error", ""]), flush=True)
    except Exception as error:
        print(json.dumps([case, type(error).__name__, str(error)]), flush=True)
"""


def _untyped_folder(path, position, value):
    rng = np.random.default_rng(0)
    graph = gg.CSRGraph.from_edge_index(rng.integers(0, 40, size=(2, 300)), num_nodes=40)
    graph.save(path)
    _poke(path, "indices.npy", position, value)
    return path


def _typed_folder(path, position, value):
    rng = np.random.default_rng(1)
    relations = {
        ("a", "to", "b"): np.stack([rng.integers(0, 20, 100), rng.integers(0, 30, 100)]),
        ("b", "back", "a"): np.stack([rng.integers(0, 30, 80), rng.integers(0, 20, 80)]),
    }
    gg.HeteroGraph(relations, {"a": 20, "b": 30}).save(path)
    _poke(path, "indices.npy", position, value)
    return path


def _poke(folder, file, position, value):
    """Overwrite one entry of a saved array in place (the checksum in the header now lies)."""
    array = np.load(folder / file, mmap_mode="r+")
    array[position] = value
    array.flush()
    del array


def _run_child(folder, kind, device, cases):
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(folder), kind, device, json.dumps(cases)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
        timeout=900,
    )
    assert result.returncode == 0, f"the sampling process died (rc {result.returncode}): {result.stderr[-2000:]}"
    return {case: (kind, message) for case, kind, message in map(json.loads, result.stdout.splitlines())}


@pytest.mark.parametrize("value", [BAD_ID, -3], ids=["huge", "negative"])
@pytest.mark.slow
def test_a_corrupt_id_is_named_by_every_untyped_cpu_path(tmp_path, value):
    folder = _untyped_folder(tmp_path / "g", 123, value)
    outcomes = _run_child(folder, "untyped", "cpu", ["plain", "bounded", "links", "disjoint", "node_time"])
    expected = f"graph.indices holds id {value} outside [0, num_src_nodes = 40) at CSR position 123; {HINT}"
    for case in ("plain", "bounded", "links", "disjoint"):
        assert outcomes[case] == ("ValueError", expected), case
    if value >= 0:  # node_time[indices] at construction: an id past the node times is named too
        assert outcomes["node_time"] == ("ValueError", expected)
    with pytest.raises(ValueError, match=r"array 'indices' fails its checksum"):
        gg.CSRGraph.load(folder, verify=True)


@pytest.mark.parametrize("value", [BAD_ID, 40, -3], ids=["huge", "just-past", "negative"])
def test_layerwise_names_a_corrupt_id_fused_or_on_blocks(tmp_path, value):
    pytest.importorskip("torch")
    folder = _untyped_folder(tmp_path / "g", 123, value)  # fused, BAD_ID segfaulted; 40 and -3 read other memory
    outcomes = _run_child(folder, "untyped", "cpu", ["fused", "blocks"])
    expected = f"graph.indices holds id {value} outside [0, num_src_nodes = 40) at CSR position 123; {HINT}"
    assert outcomes == {"fused": ("ValueError", expected), "blocks": ("ValueError", expected)}


def test_a_corrupt_id_is_named_by_every_typed_cpu_path(tmp_path):
    # Stacked positions 100.. are relation ('b', 'back', 'a'): its source ids are b's, 30 of them.
    folder = _typed_folder(tmp_path / "h", 150, BAD_ID)
    outcomes = _run_child(folder, "typed", "cpu", ["plain", "disjoint", "node_time"])
    expected = (
        f"graph.indices holds id {BAD_ID} outside [0, num_src_nodes = 30) at CSR position 150 "
        f"(relation ('b', 'back', 'a'): its source ids are bound by num_nodes['b'], its edge 50); {HINT}"
    )
    for case in ("plain", "disjoint", "node_time"):
        assert outcomes[case] == ("ValueError", expected), case


def test_an_id_of_another_type_is_out_of_its_relations_range(tmp_path):
    # 25 is a node of type b (30 nodes) but not of a (20): in relation ('a', 'to', 'b') it is corrupt.
    folder = _typed_folder(tmp_path / "h", 7, 25)
    outcomes = _run_child(folder, "typed", "cpu", ["plain"])
    assert outcomes["plain"][1].startswith(
        "graph.indices holds id 25 outside [0, num_src_nodes = 20) at CSR position 7 (relation ('a', 'to', 'b'): "
        "its source ids are bound by num_nodes['a'], its edge 7)"
    )


@pytest.mark.cuda
def test_a_corrupt_id_is_named_on_the_gpu_as_on_the_cpu(tmp_path):
    untyped = _untyped_folder(tmp_path / "g", 123, BAD_ID)
    cases = ["plain", "bounded", "disjoint"]
    assert _run_child(untyped, "untyped", "cuda:0", cases) == _run_child(untyped, "untyped", "cpu", cases)
    typed = _typed_folder(tmp_path / "h", 150, BAD_ID)
    on_gpu = _run_child(typed, "typed", "cuda:0", ["plain", "disjoint"])
    assert on_gpu == _run_child(typed, "typed", "cpu", ["plain", "disjoint"])
    assert on_gpu["plain"][0] == "ValueError" and "at CSR position 150" in on_gpu["plain"][1]


@pytest.mark.parametrize(
    "position, value, message",
    [
        (17, 10**6, r"indptr\[18\] = \d+ < indptr\[17\] = 1000000 \(indptr must never decrease\)"),
        (0, 5, r"indptr\[0\] = 5, not 0"),
        (-1, 299, r"indptr\[-1\] = 299, not len\(indices\) = 300"),
    ],
    ids=["decreasing", "first", "last"],
)
def test_a_corrupt_indptr_is_refused_at_load_naming_the_position(tmp_path, position, value, message):
    folder = _untyped_folder(tmp_path / "g", 0, 0)
    _poke(folder, "indptr.npy", position, value)
    with pytest.raises(ValueError, match=rf"'.*g': {message}; the graph folder is corrupt"):
        gg.CSRGraph.load(folder)  # O(num_nodes) even without verify: the samplers rely on it
    typed = _typed_folder(tmp_path / "h", 0, 0)
    _poke(typed, "indptr.npy", position, value if position != -1 else 179)
    with pytest.raises(ValueError, match=r"the graph folder is corrupt"):
        gg.HeteroGraph.load(typed)
