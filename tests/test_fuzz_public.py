"""Generated bad arguments at every public entry point (issue 19, item 14).

Each entry point gets one argument replaced by a generated value (wrong types, shapes and dtypes,
out-of-range and negative ids, NaN / inf, empty, huge), the others valid. It must either succeed
with a result that is checked, or raise ``TypeError`` / ``ValueError`` / ``IndexError`` /
``KeyError`` (``FileNotFoundError`` for a dataset path) whose message names the argument: never
another exception type (an error from inside NumPy or a kernel), a crash or a hang. The example
count is bounded (``EXAMPLES`` per entry point, ``GGLSPEEDUP_FUZZ_EXAMPLES`` to change) so the module
stays in CI.
"""

from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import gglspeedup as gg
from gglspeedup import backends, compat, datasets
from gglspeedup.device import DeviceUnavailableError, parse_size

EXAMPLES = int(os.environ.get("GGLSPEEDUP_FUZZ_EXAMPLES", "20"))  # more for a longer hunt than CI's
ALLOWED = (TypeError, ValueError, IndexError, KeyError, DeviceUnavailableError)
NUM_NODES = 12
DIM = 3

_DTYPES = [np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float32, np.float64, np.bool_, np.complex64]
_ARRAYS = hnp.arrays(
    dtype=st.sampled_from(_DTYPES),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    elements=None,
)
_INT_ARRAYS = hnp.arrays(  # the most dangerous kind: ids of the right dtype, some out of range or negative
    dtype=st.sampled_from([np.int32, np.int64]),
    shape=st.integers(0, 6),
    elements=st.integers(-(2**31), 2**31 - 1),
)
BAD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.sampled_from([-1, 0, NUM_NODES, 2**31, 2**63, 10**12]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.binary(max_size=4),
    st.lists(st.integers(-(2**40), 2**40), max_size=5),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=3),
    _ARRAYS,
    _INT_ARRAYS,
    st.dictionaries(st.text(max_size=3), st.integers(-2, 5), max_size=2),
    st.just(object()),
    st.just(slice(0, 2)),
)


@functools.cache
def _graph():
    rng = np.random.default_rng(0)
    return gg.CSRGraph.from_edge_index(rng.integers(0, NUM_NODES, (2, 40)), num_nodes=NUM_NODES)


@functools.cache
def _hetero():
    rng = np.random.default_rng(1)
    return gg.HeteroGraph(
        {("a", "r", "b"): rng.integers(0, 6, (2, 20)), ("b", "s", "a"): rng.integers(0, 6, (2, 20))},
        {"a": 6, "b": 6},
    )


@functools.cache
def _x():
    return np.arange(NUM_NODES * DIM, dtype=np.float32).reshape(NUM_NODES, DIM)


@functools.cache
def _sampler():
    return gg.NeighborSampler(_graph(), [2, 2])


@functools.cache
def _hetero_sampler():
    return gg.HeteroNeighborSampler(_hetero(), [2])


@functools.cache
def _store():
    return gg.FeatureStore(_x())


@functools.cache
def _hetero_store():
    return gg.HeteroFeatureStore({"a": np.ones((6, 2), np.float32), "b": np.zeros((6, 2), np.float32)})


def _ids(value):
    """``value`` as the ids a successful call must have read (an exact NumPy reference)."""
    if isinstance(value, slice):  # a gather of a range of rows
        return np.arange(NUM_NODES)[value]
    return np.asarray(value).astype(np.int64).reshape(-1)


def _check_sample(out, seeds):
    ids = _ids(seeds)
    assert np.all((ids >= 0) & (ids < NUM_NODES))
    n_id = np.asarray(out.n_id)
    assert np.array_equal(n_id[: len(ids)], ids)  # the seeds first, in order, duplicates kept (README)
    assert n_id.min(initial=0) >= 0 and n_id.max(initial=0) < NUM_NODES


def _check_gather(out, ids):
    np.testing.assert_array_equal(np.asarray(out), _x()[_ids(ids)])


def _check_graph(graph, value):
    edge_index = np.asarray(value)
    assert graph.num_edges == edge_index.shape[1]
    assert np.array_equal(np.sort(np.asarray(graph.indices)), np.sort(edge_index[0]))


def _ok(result, value):
    """A constructor or call that accepted ``value`` returned an object (its own tests check it)."""
    assert result is not None


def _check_same(result, value):
    """A conversion to NumPy hands back the same structure and values (None and scalars as they are)."""
    np.testing.assert_equal(result, value)


def _loader(value, key):
    kwargs = {"batch_size": 4, "seeds": np.arange(NUM_NODES), "backend": None, "prefetch": 0}
    kwargs[key] = value
    loader = gg.NodeLoader(_sampler(), _store(), kwargs.pop("seeds"), kwargs.pop("batch_size"), **kwargs)
    for batch in loader:
        np.testing.assert_array_equal(batch.x, _x()[np.asarray(batch.n_id)])
    return loader


def _link_loader(value):
    loader = gg.LinkLoader(_sampler(), _store(), value, 4, backend=None, prefetch=0)
    for batch in loader:
        np.testing.assert_array_equal(batch.x, _x()[np.asarray(batch.n_id)])
    return loader


def _pyg_loader(value):
    from gglspeedup import pyg

    graph_store, feature_store = pyg.GraphStore(_graph()), pyg.FeatureStore({"x": _x()})
    return pyg.NeighborLoader((feature_store, graph_store), value, batch_size=4)


def _none(result, value):
    """A setter that accepted ``value`` returns nothing."""
    assert result is None


def _build_csr(value):
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        graph = datasets.build_csr(value, os.path.join(folder, "g"), NUM_NODES)
        return graph.num_edges


def _typed_loader(value):
    loader = gg.NodeLoader(_hetero_sampler(), _hetero_store(), value, 4, backend=None, prefetch=0)
    for batch in loader:
        for node_type, rows in batch.x.items():
            assert np.asarray(rows).shape == (len(batch.n_id[node_type]), 2)
    return loader


def _pyg_link_loader(value):
    from gglspeedup import pyg

    graph_store, feature_store = pyg.GraphStore(_graph()), pyg.FeatureStore({"x": _x()})
    return pyg.LinkNeighborLoader((feature_store, graph_store), [2], edge_label_index=value, batch_size=4)


def _set_size(value):
    sampler = compat.GPUSampler(-1, _graph())
    sampler.set_size(value)
    return sampler.sizes


# (label, what the message must name (a regex), call(value), check(result, value))
ENTRIES = [
    ("CSRGraph(indptr)", r"indptr", lambda v: gg.CSRGraph(v, np.zeros(0, np.int64)), _ok),
    ("CSRGraph(indices)", r"indices", lambda v: gg.CSRGraph(np.array([0, 1, 2]), v), _ok),
    ("CSRGraph(num_nodes)", r"num_nodes", lambda v: gg.CSRGraph(np.array([0, 1]), np.array([0]), v), _ok),
    ("from_edge_index(edge_index)", r"edge_index", lambda v: gg.CSRGraph.from_edge_index(v, NUM_NODES), _check_graph),
    ("from_edge_index(num_nodes)", r"num_nodes", lambda v: gg.CSRGraph.from_edge_index([[0], [1]], v), _ok),
    ("from_edge_index(direction)", r"direction", lambda v: gg.CSRGraph.from_edge_index([[0], [1]], 2, v), _ok),
    ("from_edge_index(weights)", r"weights", lambda v: gg.CSRGraph.from_edge_index([[0], [1]], 2, weights=v), _ok),
    ("HeteroGraph(relations)", r"relations|edge type", lambda v: gg.HeteroGraph(v, {"a": 2}), _ok),
    ("HeteroGraph(num_nodes)", r"num_nodes", lambda v: gg.HeteroGraph({("a", "r", "a"): [[0], [1]]}, v), _ok),
    ("NeighborSampler(fanouts)", r"fanouts", lambda v: gg.NeighborSampler(_graph(), v), _ok),
    ("NeighborSampler(seed)", r"seed", lambda v: gg.NeighborSampler(_graph(), [2], seed=v), _ok),
    ("NeighborSampler(device)", r"device", lambda v: gg.NeighborSampler(_graph(), [2], device=v), _ok),
    ("sample(seeds)", r"seeds", lambda v: _sampler().sample(v), lambda out, v: _check_sample(out, v)),
    ("sample(key)", r"key", lambda v: _sampler().sample([0, 1], key=v), _ok),
    ("sample_links(pairs)", r"pairs", lambda v: _sampler().sample_links(v), _ok),
    ("sample_links(labels)", r"labels", lambda v: _sampler().sample_links([[0, 1], [2, 3]], v), _ok),
    (
        "sample_links(num_negatives)",
        r"num_negatives",
        lambda v: _sampler().sample_links([[0], [1]], negatives="binary", num_negatives=v),
        _ok,
    ),
    ("HeteroNeighborSampler(fanouts)", r"fanouts", lambda v: gg.HeteroNeighborSampler(_hetero(), v), _ok),
    ("hetero sample(seeds)", r"seeds", lambda v: _hetero_sampler().sample(v), _ok),
    ("hetero sample({'a': ids})", r"seeds", lambda v: _hetero_sampler().sample({"a": v}), _ok),
    (
        "hetero sample_links(pairs)",
        r"pairs",
        lambda v: _hetero_sampler().sample_links(v, edge_type=("a", "r", "b")),
        _ok,
    ),
    (
        "hetero sample_links(edge_type)",
        r"edge_type",
        lambda v: _hetero_sampler().sample_links([[0], [1]], edge_type=v),
        _ok,
    ),
    ("FeatureStore(x)", r"\bx\b|table", lambda v: gg.FeatureStore(v), _ok),
    ("FeatureStore(cache_size)", r"cache_size|size", lambda v: gg.FeatureStore(_x(), cache_size=v), _ok),
    ("FeatureStore(policy)", r"policy", lambda v: gg.FeatureStore(_x(), cache_size=64, policy=v), _ok),
    ("gather(ids)", r"ids", lambda v: _store().gather(v), lambda out, v: _check_gather(out, v)),
    ("gather(out)", r"\bout\b", lambda v: _store().gather([0, 1], out=v), _ok),
    ("HeteroFeatureStore(x)", r"\bx\b", lambda v: gg.HeteroFeatureStore(v), _ok),
    ("hetero gather(ids)", r"ids", lambda v: _hetero_store().gather(v), _ok),
    ("NodeLoader(seeds)", r"seeds", lambda v: _loader(v, "seeds"), _ok),
    ("NodeLoader(batch_size)", r"batch_size", lambda v: _loader(v, "batch_size"), _ok),
    ("NodeLoader(prefetch)", r"prefetch", lambda v: _loader(v, "prefetch"), _ok),
    ("LinkLoader(pairs)", r"pairs", _link_loader, _ok),
    ("backends.to(name)", r"backend|name", lambda v: backends.to(v, np.zeros(2)), _ok),
    ("backends.to(obj)", r"obj|leaf|array|tensor|dtype", lambda v: backends.to("numpy", v), _check_same),
    ("parse_size", r"size", parse_size, lambda n, v: isinstance(n, int) and n >= 0),
    ("datasets.load(name)", r"name|dataset", lambda v: datasets.load(v), _ok),
    ("split_edges(val)", r"val", lambda v: datasets.split_edges(_graph(), val=v), _ok),
    ("split_edges(graph)", r"graph", lambda v: datasets.split_edges(v), _ok),
    ("pyg.NeighborLoader(num_neighbors)", r"num_neighbors", _pyg_loader, _ok),
    ("pyg.FeatureStore(features)", r"feature", lambda v: __import__("gglspeedup.pyg").pyg.FeatureStore(v), _ok),
    ("CSRGraph.from_scipy(matrix)", r"matrix", lambda v: gg.CSRGraph.from_scipy(v), _ok),
    ("CSRGraph.load(path)", r"path|saved graph", lambda v: gg.CSRGraph.load(v), _ok),
    ("build_csr(source)", r"source|edge", _build_csr, _ok),
    ("typed NodeLoader(seeds)", r"seeds", _typed_loader, _ok),
    (
        "HeteroFeatureStore(cache_size)",
        r"cache_size|size",
        lambda v: gg.HeteroFeatureStore({"a": _x()}, cache_size=v),
        _ok,
    ),
    ("pyg.GraphStore(graph)", r"graph", lambda v: __import__("gglspeedup.pyg").pyg.GraphStore(v), _ok),
    ("pyg.LinkNeighborLoader(edge_label_index)", r"edge_label_index|pairs", _pyg_link_loader, _ok),
    ("compat.MultiGPUSampler.set_size", r"sizes", lambda v: compat.MultiGPUSampler(-1, _graph()).set_size(v), _none),
    ("compat.GPUSampler.set_size", r"sizes", _set_size, lambda sizes, v: sizes == _ids(v).tolist()),
    ("compat.CGPUFeature(cache_size)", r"size", lambda v: compat.CGPUFeature(_graph(), -1, v), _ok),
    ("compat.Multi_CGPUFeature(rank)", r"rank", lambda v: compat.Multi_CGPUFeature(v, [-1]), _ok),
]

# Entries that take a path: a missing file is FileNotFoundError (naming the argument), as open() raises.
_FILE_ERRORS = {
    "datasets.load(name)": (FileNotFoundError,),
    "CSRGraph.load(path)": (FileNotFoundError,),
    "build_csr(source)": (FileNotFoundError,),  # a folder without edge.csv.gz ("/" was drawn once)
}


@pytest.mark.parametrize("entry", ENTRIES, ids=[entry[0] for entry in ENTRIES])
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(value=BAD)
def test_a_bad_argument_is_refused_by_name_or_gives_a_checked_result(entry, value):
    label, names, call, check = entry
    allowed = ALLOWED + _FILE_ERRORS.get(label, ())
    try:
        result = call(value)
    except allowed as error:
        message = str(error)
        assert re.search(names, message), f"{label}: {type(error).__name__}({message!r}) does not name {names}"
        return
    check(result, value)
