"""The pooling maps against exact references: the fused lasso against a dual active-set solver
(SciPy's BVLS) and its central differences, sparsemax against the sorting algorithm, on batches
with empty graphs, single nodes, edgeless graphs, ties, repeated and self-loop edges, and every
``lam`` regime; plus the structure (connected certified groups) and the batch cache."""

import numpy as np
import pytest

from gglspeedup.attention import (
    fused_lasso_numpy,
    gfusedmax_numpy,
    graph_batch,
    softmax_numpy,
    sparsemax_numpy,
)
from gglspeedup.testing.pooling_reference import (
    fused_groups_reference,
    fused_lasso_jacobian_reference,
    fused_lasso_reference,
    gfusedmax_reference,
    simple_edges,
    softmax_reference,
    sparsemax_reference,
)

LAMS = [0.0, 1e-3, 0.1137, 0.6931, 3.1416, 1e6]


def random_batch(rng, num_graphs=12, max_nodes=14, ties=False):
    """Sizes (0, 1 and edgeless graphs included), per-graph local edge lists with repeats, both
    directions and self loops, and scores (rounded to one decimal when ``ties``)."""
    sizes = rng.integers(0, max_nodes + 1, size=num_graphs)
    sizes[:3] = [0, 1, 5]  # an empty graph, a single node, and (below) an edgeless graph
    edges = []
    for g, n in enumerate(sizes):
        count = 0 if g == 2 or n < 2 else int(rng.integers(n // 2, 2 * n + 1))
        pairs = rng.integers(0, max(n, 1), size=(count, 2))
        if count:
            pairs = np.concatenate([pairs, pairs[:2, ::-1], pairs[:1]])  # reversed and repeated edges
        edges.append(pairs.astype(np.int64))
    scores = rng.standard_normal(int(sizes.sum()))
    if ties:
        scores = np.round(scores, 1)
    return sizes, edges, scores


def per_graph(sizes):
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    return [(g, int(ptr[g]), int(ptr[g + 1])) for g in range(len(sizes))]


@pytest.mark.parametrize("lam", LAMS)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
def test_fused_lasso_matches_the_dual_active_set_reference(lam, ties):
    rng = np.random.default_rng(int(lam * 1000) + ties)
    sizes, edges, scores = random_batch(rng, ties=ties)
    result = fused_lasso_numpy(scores, sizes=sizes, edge_index=edges, lam=lam)
    for g, n0, n1 in per_graph(sizes):
        expected = fused_lasso_reference(scores[n0:n1], edges[g], lam)
        np.testing.assert_allclose(result.fused[n0:n1], expected, atol=1e-9, rtol=0)
    assert result.residual.max() < 1e-9


@pytest.mark.parametrize("lam", LAMS[1:-1])
def test_groups_are_the_connected_fused_groups(lam):
    rng = np.random.default_rng(7)
    sizes, edges, scores = random_batch(rng, num_graphs=10, max_nodes=30)
    result = fused_lasso_numpy(scores, sizes=sizes, edge_index=edges, lam=lam)
    for g, n0, n1 in per_graph(sizes):
        reference = fused_lasso_reference(scores[n0:n1], edges[g], lam)
        np.testing.assert_array_equal(result.groups[n0:n1] - n0, fused_groups_reference(reference, edges[g]))
        # closed form: mean of the scores minus lam * signed boundary count / size, per group
        for label in np.unique(result.groups[n0:n1]):
            members = np.flatnonzero(result.groups == label)
            value = (scores[members].sum() - lam * result.boundary[members].sum()) / members.size
            np.testing.assert_allclose(result.fused[members], value, rtol=0, atol=1e-12)


def test_huge_lam_fuses_each_connected_component_and_lam_zero_is_the_identity():
    rng = np.random.default_rng(3)
    sizes, edges, scores = random_batch(rng)
    batch = graph_batch(sizes=sizes, edge_index=edges)
    arrays = batch.arrays
    huge = fused_lasso_numpy(scores, batch, lam=1e9)
    for c in range(arrays.comp_ptr.shape[0] - 1):
        members = arrays.order0[arrays.comp_ptr[c] : arrays.comp_ptr[c + 1]]
        assert np.unique(huge.groups[members]).size == 1
        np.testing.assert_allclose(huge.fused[members], scores[members].mean(), rtol=0, atol=1e-9)
    zero = gfusedmax_numpy(scores, batch, lam=0.0, gamma=0.5)
    np.testing.assert_array_equal(zero.fused, scores)
    np.testing.assert_array_equal(zero.groups, np.arange(scores.size))
    np.testing.assert_array_equal(zero.output, sparsemax_numpy(scores, batch.ptr, gamma=0.5).output)


@pytest.mark.parametrize("heads", [1, 3])
def test_gfusedmax_and_sparsemax_and_softmax_match_references(heads):
    rng = np.random.default_rng(heads)
    sizes, edges, _ = random_batch(rng)
    scores = rng.standard_normal((int(sizes.sum()), heads)) * 2
    lam = np.array([0.25, 1.5, 0.0][:heads])
    gamma = np.array([0.7, 1.0, 2.5][:heads])
    arg = scores if heads > 1 else scores[:, 0]
    lam_arg, gamma_arg = (lam, gamma) if heads > 1 else (lam[0], gamma[0])
    fused_max = gfusedmax_numpy(arg, sizes=sizes, edge_index=edges, lam=lam_arg, gamma=gamma_arg).output
    sparse = sparsemax_numpy(arg, sizes=sizes, gamma=gamma_arg).output
    soft = softmax_numpy(arg, sizes=sizes).output
    fused_max, sparse, soft = (a.reshape(-1, heads) for a in (fused_max, sparse, soft))
    for g, n0, n1 in per_graph(sizes):
        for h in range(heads):
            s = scores[n0:n1, h]
            np.testing.assert_allclose(
                fused_max[n0:n1, h], gfusedmax_reference(s, edges[g], lam[h], gamma[h]), atol=1e-9
            )
            np.testing.assert_allclose(sparse[n0:n1, h], sparsemax_reference(s / gamma[h]), atol=1e-12)
            np.testing.assert_allclose(soft[n0:n1, h], softmax_reference(s), atol=1e-12)
            if n1 > n0:
                for weights in (fused_max, sparse, soft):
                    assert weights[n0:n1, h].sum() == pytest.approx(1.0, abs=1e-12)


def test_sparsemax_gives_zero_weight_at_exactly_the_threshold_like_the_sorting_method():
    # graph 0: z = (1, 0, 0) has tau = 0 exactly, so the zeros get no weight (and no gradient)
    scores = np.array([1.0, 0.0, 0.0, 0.5, 0.5, 0.5, 2.0, -1.0])
    result = sparsemax_numpy(scores, sizes=[3, 3, 2])
    expected = np.concatenate([sparsemax_reference(scores[:3]), sparsemax_reference(scores[3:6]), [1.0, 0.0]])
    np.testing.assert_allclose(result.output, expected, rtol=0, atol=1e-15)
    assert result.output[1] == 0.0 and result.output[2] == 0.0 and result.output[7] == 0.0
    grad, _, _ = result.vjp(np.arange(8.0))
    assert grad[1] == 0.0 and grad[2] == 0.0 and grad[0] == 0.0  # support {0}: projection is zero


@pytest.mark.parametrize("lam", [0.05, 0.4, 2.0])
def test_fused_lasso_backward_equals_the_references_central_differences(lam):
    rng = np.random.default_rng(11)
    sizes, edges, scores = random_batch(rng, num_graphs=6, max_nodes=9)
    result = fused_lasso_numpy(scores, sizes=sizes, edge_index=edges, lam=lam)
    grad_out = rng.standard_normal(scores.size)
    grad_scores, grad_lam, grad_gamma = result.vjp(grad_out)
    assert grad_gamma is None
    expected_lam = 0.0
    for g, n0, n1 in per_graph(sizes):
        jacobian, d_lam = fused_lasso_jacobian_reference(scores[n0:n1], edges[g], lam)
        np.testing.assert_allclose(grad_scores[n0:n1], jacobian.T @ grad_out[n0:n1], atol=1e-6)
        expected_lam += d_lam @ grad_out[n0:n1]
    assert grad_lam == pytest.approx(expected_lam, abs=1e-6)


def test_gfusedmax_backward_for_scores_lam_and_gamma_per_head_equals_central_differences():
    rng = np.random.default_rng(5)
    sizes, edges, _ = random_batch(rng, num_graphs=5, max_nodes=8)
    scores = rng.standard_normal((int(sizes.sum()), 2)) * 3
    lam, gamma = np.array([0.3, 0.05]), np.array([0.8, 2.0])
    grad_out = rng.standard_normal(scores.shape)

    def loss(s, lam_, gamma_):
        return (gfusedmax_numpy(s, sizes=sizes, edge_index=edges, lam=lam_, gamma=gamma_).output * grad_out).sum()

    grad_s, grad_lam, grad_gamma = gfusedmax_numpy(scores, sizes=sizes, edge_index=edges, lam=lam, gamma=gamma).vjp(
        grad_out
    )
    eps = 1e-6
    numeric = np.zeros_like(scores)
    for index in np.ndindex(scores.shape):
        step = np.zeros_like(scores)
        step[index] = eps
        numeric[index] = (loss(scores + step, lam, gamma) - loss(scores - step, lam, gamma)) / (2 * eps)
    np.testing.assert_allclose(grad_s, numeric, atol=1e-6)
    for h in range(2):
        unit = np.eye(2)[h] * eps
        assert grad_lam[h] == pytest.approx(
            (loss(scores, lam + unit, gamma) - loss(scores, lam - unit, gamma)) / 2 / eps, abs=1e-6
        )
        assert grad_gamma[h] == pytest.approx(
            (loss(scores, lam, gamma + unit) - loss(scores, lam, gamma - unit)) / 2 / eps, abs=1e-6
        )


def test_edges_are_read_as_one_undirected_simple_graph_in_either_form():
    rng = np.random.default_rng(2)
    sizes, edges, scores = random_batch(rng)
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    global_index = np.concatenate([(e + ptr[g]).T for g, e in enumerate(edges)], axis=1)
    local = fused_lasso_numpy(scores, sizes=sizes, edge_index=edges, lam=0.5)
    glob = fused_lasso_numpy(scores, ptr, global_index[::-1], lam=0.5)  # directions swapped
    np.testing.assert_array_equal(local.fused, glob.fused)
    batch = graph_batch(ptr, global_index)
    assert batch.num_edges == sum(simple_edges(e, n).shape[0] for e, n in zip(edges, sizes))


def test_batch_structure_is_cached_by_content():
    edges = [np.array([[0, 1], [1, 2]]), np.zeros((0, 2), np.int64)]
    first = graph_batch(sizes=[3, 2], edge_index=edges)
    again = graph_batch(sizes=np.array([3, 2]), edge_index=[e.copy() for e in edges])
    other = graph_batch(sizes=[3, 2], edge_index=[np.array([[0, 1]]), np.zeros((0, 2), np.int64)])
    assert again is first and other is not first
    assert first.arrays is again.arrays  # the structure is built once


def test_a_cached_batch_keeps_its_offsets_and_edges_when_the_callers_buffers_are_reused():
    # the cached batch held the caller's int64 ptr (and its edge rows until first use) without a
    # copy: a buffer reused for the next batch rewrote it, and the next call with the first batch's
    # offsets got the cached structure of the rewritten ones (softmax over graphs [0, 3) and [3, 5))
    ptr, edges = np.array([0, 2, 5]), np.array([[0, 2], [1, 4]])
    batch = graph_batch(ptr, edges)
    ptr[1], edges[1, 1] = 3, 3  # the caller's buffers, filled with the next batch
    again = graph_batch(np.array([0, 2, 5]), np.array([[0, 2], [1, 4]]))
    assert again is batch and batch.ptr.tolist() == [0, 2, 5]
    assert batch.edge_index.tolist() == [[0, 2], [1, 4]]
    weights = softmax_numpy(np.zeros(5), np.array([0, 2, 5])).output
    np.testing.assert_array_equal(weights, [1 / 2, 1 / 2, 1 / 3, 1 / 3, 1 / 3])


@pytest.mark.parametrize("shape", [(5,), (5, 1), (5, 2)])
def test_a_results_arrays_are_its_own_so_editing_them_leaves_the_backward_alone(shape):
    # with scores (N, 1) result.output was the state's own array (a transposed (1, N) view, already
    # contiguous): scaling it in place changed what vjp computed (26.7 for 0.498)
    scores = np.linspace(-1.0, 1.5, int(np.prod(shape))).reshape(shape)
    upstream = np.linspace(2.0, -1.0, int(np.prod(shape))).reshape(shape)
    for result in (
        softmax_numpy(scores, [0, 3, 5]),
        gfusedmax_numpy(scores, [0, 3, 5], [[0, 1, 3], [1, 2, 4]], lam=0.2),
    ):
        expected = result.vjp(upstream)
        for array in (result.output, result.fused, result.groups, result.boundary):
            if array is not None:
                array *= 10
        for got, want in zip(result.vjp(upstream), expected):
            np.testing.assert_array_equal(got, want)


def test_sizes_summing_past_int64_are_refused_by_name_not_wrapped():
    # sizes=[2**62, 2**62] gave ptr [0, 2**62, -2**63] (a batch of -2**63 nodes, split_batch a part
    # of no graphs), and with edges NumPy's "negative dimensions not allowed"
    expected = r"^sizes must sum to less than 2\*\*63 nodes \(int64 offsets\): sizes\[0\] \.\. sizes\[1\] sum past it"
    for sizes, edges in (([2**62, 2**62], None), ([2**63 - 1, 1], [[], []]), ([2**62, 2**62, 5], [[[0, 1]], [], []])):
        with pytest.raises(ValueError, match=expected):
            graph_batch(sizes=sizes, edge_index=edges)
    assert graph_batch(sizes=[2**61, 2**61, 2**61]).ptr.tolist() == [0, 2**61, 2**62, 3 * 2**61]
    assert graph_batch(sizes=[2**63 - 1]).num_nodes == 2**63 - 1


@pytest.mark.parametrize("copy_of", ["pickle", "deepcopy"])
def test_a_batch_structure_pickles_and_deep_copies(copy_of):
    # its lock made pickle and copy.deepcopy fail ("cannot pickle '_thread.lock' object")
    import copy
    import pickle

    batch = graph_batch(sizes=[3, 2, 0], edge_index=[np.array([[0, 1], [1, 2]]), np.array([[1, 0]]), []])
    scores = np.array([0.5, 0.4, -1.0, 2.0, 2.5])
    expected = gfusedmax_numpy(scores, batch, lam=0.3)
    other = pickle.loads(pickle.dumps(batch)) if copy_of == "pickle" else copy.deepcopy(batch)
    assert other is not batch and np.array_equal(other.ptr, batch.ptr)
    assert np.array_equal(other.edge_index, batch.edge_index)
    result = gfusedmax_numpy(scores, other, lam=0.3)
    assert np.array_equal(result.output, expected.output) and np.array_equal(result.groups, expected.groups)


def test_float32_scores_are_computed_in_float64():
    rng = np.random.default_rng(9)
    sizes, edges, scores = random_batch(rng)
    single = gfusedmax_numpy(scores.astype(np.float32), sizes=sizes, edge_index=edges, lam=0.3)
    double = gfusedmax_numpy(scores.astype(np.float32).astype(np.float64), sizes=sizes, edge_index=edges, lam=0.3)
    np.testing.assert_array_equal(single.output, double.output)  # computed in float64 inside


@pytest.mark.slow
def test_parallel_and_serial_cpu_kernels_agree_bit_for_bit(monkeypatch):
    from gglspeedup import _parallel

    rng = np.random.default_rng(8)
    sizes, edges, _ = random_batch(rng, num_graphs=9, max_nodes=20)
    scores = rng.standard_normal((int(sizes.sum()), 3))
    grad = rng.standard_normal(scores.shape)

    def everything():
        results = [
            gfusedmax_numpy(scores, sizes=sizes, edge_index=edges, lam=[0.2, 0.0, 1.3], gamma=[1.0, 0.5, 2.0]),
            sparsemax_numpy(scores, sizes=sizes, gamma=0.7),
            softmax_numpy(scores, sizes=sizes),
        ]
        return [(r.output, r.fused, r.groups, *r.vjp(grad)) for r in results]

    serial = everything()
    monkeypatch.setitem(_parallel.PARALLEL_MIN, "fused", 0)
    monkeypatch.setitem(_parallel.PARALLEL_MIN, "pooling", 0)
    for mine, theirs in zip(everything(), serial):
        for a, b in zip(mine, theirs):
            assert (a is None and b is None) or np.array_equal(a, b)
