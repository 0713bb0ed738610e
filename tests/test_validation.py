"""gglspeedup.validation: the one set of argument checks, and the contracts in gglspeedup.protocols."""

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup.protocols import FeatureSource, Sampler
from gglspeedup.validation import check_bool, check_fanouts, check_ids_in_range, check_int, int_array, parse_fanouts


@pytest.mark.parametrize(
    "value, kwargs, error, message",
    [
        (True, {}, TypeError, r"n must be an int, got bool True"),
        (np.bool_(False), {}, TypeError, r"n must be an int, got bool"),
        (2.0, {}, TypeError, r"n must be an int, got float 2.0"),
        ("3", {}, TypeError, r"n must be an int, got str '3'"),
        (0, dict(minimum=1), ValueError, r"n must be >= 1, got 0"),
        (5, dict(below=5), ValueError, r"n must be < 5, got 5"),
        (
            2**64,
            dict(minimum=0, below=2**64),
            ValueError,
            r"n must be an int in \[0, 2\*\*64\), got 18446744073709551616",
        ),
        (7, dict(minimum=0, below=3, error=IndexError), IndexError, r"n must be an int in \[0, 3\), got 7"),
        (-1, dict(minimum=0, expected="a non-negative int"), ValueError, r"n must be a non-negative int, got -1"),
        (1.5, dict(minimum=0, expected="a non-negative int"), TypeError, r"n must be a non-negative int, got 1.5"),
    ],
)
def test_check_int_names_the_argument_and_the_expectation(value, kwargs, error, message):
    with pytest.raises(error, match=message):
        check_int("n", value, **kwargs)


def test_check_int_returns_python_ints():
    for value in (3, np.int32(3), np.uint64(3)):
        out = check_int("n", value, minimum=0)
        assert out == 3 and type(out) is int


def test_check_bool_refuses_truthy_values():
    assert check_bool("flag", np.bool_(True)) is True and check_bool("flag", False) is False
    for value in ("no", "yes", 1, 0, None, np.array(True)):
        with pytest.raises(TypeError, match="flag must be a bool"):
            check_bool("flag", value)


def test_one_fanout_rule_for_lists_arrays_and_command_lines():
    assert check_fanouts([25, 0, -1]) == [25, 0, -1]
    assert check_fanouts(np.array([3, 2])) == [3, 2] and check_fanouts((1,)) == [1]
    assert parse_fanouts(" 25 , 10 ") == [25, 10] and parse_fanouts("0") == [0]
    assert parse_fanouts([4, 2]) == [4, 2]
    for bad, error in [
        ([], ValueError),
        ([2, -2], ValueError),
        ([1.5], TypeError),
        ("25", TypeError),
        ([True], TypeError),
        ([2**62], ValueError),
    ]:
        with pytest.raises(error, match=r"fanouts"):
            check_fanouts(bad)
    with pytest.raises(ValueError, match=r"fanouts\[1\] must be below 2\*\*62 \(fanouts travel as int64\), got 4611"):
        check_fanouts([1, 2**62])  # the message said "must be an int >= 0 or -1", which 2**62 is
    for bad in ("", "25,", "a,b", "2.5", "-3", "25;10"):
        with pytest.raises(ValueError, match=r"--fanouts"):
            parse_fanouts(bad)


def test_int_array_and_range_checks():
    assert int_array("ids", []).dtype == np.int64 and int_array("ids", [1, 2]).tolist() == [1, 2]
    array = np.arange(3, dtype=np.int64)
    assert int_array("ids", array) is array  # already C-contiguous int64: no copy
    with pytest.raises(TypeError, match=r"ids must hold integers, got dtype bool"):
        int_array("ids", [True])
    with pytest.raises(TypeError, match=r"ids must hold integer node ids, got dtype float64"):
        int_array("ids", [0.5], expected="must hold integer node ids")
    with pytest.raises(TypeError, match=r"ids must be an integer array, got None"):
        int_array("ids", None)
    with pytest.raises(ValueError, match=r"ids must be 1-D, got shape \(1, 2\)"):
        int_array("ids", [[1, 2]])
    with pytest.raises(IndexError, match=r"ids\[1\] = -1 is out of range \[0, num_nodes = 4\)"):
        check_ids_in_range("ids", np.array([0, -1, 9]), 4, what="num_nodes")
    with pytest.raises(ValueError, match=r"ids\[0\] = 9 is out of range \[0, 4\)"):
        check_ids_in_range("ids", np.array([9]), 4, error=ValueError)


def test_uint64_values_past_int64_are_refused_at_the_first_one_and_named_by_position():
    # 2**63 itself: NumPy 1.x compared a uint64 maximum with int64's largest Python int in float64,
    # where both are 9.223372036854776e18, so [0, 2**63] passed and wrapped to a negative id
    first = np.uint64(2**63)
    with pytest.raises(IndexError, match=r"ids\[1\] = 9223372036854775808 does not fit in int64"):
        int_array("ids", np.array([0, first, 5], np.uint64), beyond=IndexError)
    with pytest.raises(ValueError, match=r"pairs\[1, 0\] = 9223372036854775808 does not fit in int64"):
        int_array("pairs", np.array([[0, 1], [first, 2]], np.uint64), ndim=2)
    fits = int_array("ids", np.array([0, 2**63 - 1], np.uint64))
    assert fits.dtype == np.int64 and fits.tolist() == [0, 2**63 - 1]


def test_python_ints_beyond_int64_are_ids_out_of_range_not_of_the_wrong_type():
    # NumPy reads [2**70] as dtype object and [2**63, -1] as float64: both were refused as
    # "must hold integers, got dtype object / float64", though every entry is an integer id
    for values, where, value in (([2**70], "0", 2**70), ([3, -(2**70)], "1", -(2**70)), ([2**63, -1], "0", 2**63)):
        with pytest.raises(ValueError, match=rf"ids\[{where}\] = {value} does not fit in int64"):
            int_array("ids", values)
        with pytest.raises(IndexError, match=rf"ids\[{where}\] = {value} does not fit in int64"):
            int_array("ids", values, beyond=IndexError)
    with pytest.raises(IndexError, match=r"pairs\[1, 0\] = 1180591620717411303424 does not fit in int64"):
        int_array("pairs", [[0], [2**70]], ndim=2, beyond=IndexError)
    with pytest.raises(ValueError, match=r"ids must be 1-D, got shape \(1, 1\)"):
        int_array("ids", [[2**70]])
    for values in ([2**70, 1.5], [True, 2**70], np.array([1, 2], dtype=object)):  # not integers only, or none beyond
        with pytest.raises(TypeError, match="got dtype"):
            int_array("ids", values)

    graph = gg.CSRGraph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), num_nodes=10)
    store = gg.FeatureStore(np.zeros((10, 2), np.float32))
    for ids, where, value in (([2**70], 0, 2**70), ([3, -(2**70)], 1, -(2**70)), ([2**63, -1], 0, 2**63)):
        with pytest.raises(IndexError, match=rf"ids\[{where}\] = {value} is out of range for a table of 10 rows"):
            store[ids]
    with pytest.raises(IndexError, match=r"ids\[0\] = 1180591620717411303424 is out of range"):
        store.gather(np.array([2**70], dtype=object))
    sampler = gg.NeighborSampler(graph, [2])
    with pytest.raises(IndexError, match=r"seeds\[0\] = 1180591620717411303424"):
        sampler.sample([2**70])
    with pytest.raises(IndexError, match=r"pairs\[1, 0\] = 1180591620717411303424"):
        sampler.sample_links([[0], [2**70]])
    with pytest.raises(IndexError, match=r"seeds\[0\] = 1180591620717411303424 does not fit in int64"):
        gg.NodeLoader(sampler, store, [2**70], batch_size=1)
    with pytest.raises(IndexError, match=r"pairs\[1, 0\] = 1180591620717411303424 does not fit in int64"):
        gg.LinkLoader(sampler, store, [[0], [2**70]], batch_size=1)


def test_ids_and_integer_times_beyond_int64_share_one_message():
    from gglspeedup.sampling.temporal import check_int64_times
    from gglspeedup.validation import beyond_int64, ints_beyond_int64

    cases = {
        "list past int64": ([3, 2**70], "values[1] = 1180591620717411303424"),
        "list below int64": ([-(2**63) - 1, 0], "values[0] = -9223372036854775809"),
        "uint64 past int64": (np.array([0, 2**64 - 1], np.uint64), "values[1] = 18446744073709551615"),
    }
    for values, named in cases.values():
        exact = values if isinstance(values, np.ndarray) else ints_beyond_int64(values)
        assert beyond_int64("values", exact) == f"{named} does not fit in int64"
        with pytest.raises(ValueError) as ids:
            int_array("values", values)
        with pytest.raises(ValueError) as times:
            check_int64_times("values", values, np.asarray(values))  # the times as NumPy reads them
        assert str(ids.value) == f"{named} does not fit in int64"
        assert str(times.value) == f"{named} does not fit in int64 (the dtype of integer times)"
    assert beyond_int64("values", np.array([[0, 1], [2**63, 2]], np.uint64)) == (
        "values[1, 0] = 9223372036854775808 does not fit in int64"
    )
    for fits in (np.array([0, 2**63 - 1], np.uint64), np.arange(3), np.array([1.5])):
        assert beyond_int64("values", fits) is None


def test_ragged_lists_are_refused_by_name_at_every_entry_point():
    # NumPy's "setting an array element with a sequence ... inhomogeneous shape" named no argument
    from gglspeedup.validation import list_array

    graph = gg.CSRGraph.from_edge_index(np.array([[0, 1, 2], [1, 2, 3]]), num_nodes=10)
    sampler = gg.NeighborSampler(graph, [2])
    store = gg.FeatureStore(np.zeros((10, 2), np.float32))
    ragged, short_first = [[0, 1, 2], [1, 2]], [[0], [1, 2]]
    calls = {
        "edge_index": lambda: gg.CSRGraph.from_edge_index(ragged, num_nodes=10),
        "indices": lambda: gg.CSRGraph([0, 1, 2], short_first),
        "seeds": lambda: sampler.sample(short_first),
        "pairs": lambda: sampler.sample_links(ragged),
        "node_time": lambda: gg.NeighborSampler(graph, [2], node_time=short_first),
        "seeds of a loader": lambda: gg.NodeLoader(sampler, store, short_first, batch_size=1),
        "pairs of a loader": lambda: gg.LinkLoader(sampler, store, ragged, batch_size=1),
    }
    for name, call in calls.items():
        argument = name.split(" ")[0]
        lengths = "3, 2" if argument in ("edge_index", "pairs") else "1, 2"
        expected = rf"^{argument} must be a rectangular array, got a ragged list of rows of lengths {lengths} \(no"
        with pytest.raises(ValueError, match=expected):
            call()
    long = [[0, 1]] * 1000 + [[1]]  # past the six rows shown: the first row that differs
    with pytest.raises(ValueError, match=r"rows of lengths 2, 2, 2, 2, 2, 2, \.\.\. \(ids\[1000\]: 1\) \(no array"):
        list_array("ids", long)
    with pytest.raises(ValueError, match=r"rows of lengths 2, 2, whose own rows differ \(no array shape\)"):
        int_array("ids", [[[0], [1, 2]], [[0], [1]]], ndim=3)
    with pytest.raises(ValueError, match=r"rows of lengths scalar, 2 \(no array shape\)"):
        int_array("ids", [0, [1, 2]])
    assert list_array("ids", ((0, 1), (2, 3))).tolist() == [[0, 1], [2, 3]]


class _UserSampler:
    def sample(self, seeds, key=None):
        return gg.SampleOutput(np.asarray(seeds, np.int64), [])


class _UserFeatures:
    def __init__(self, x):
        self.x = x

    def gather(self, ids, out=None):
        return self.x[ids]

    def __getitem__(self, ids):
        return self.gather(ids)

    def stats(self):
        return {"lookups": 0}


def test_protocols_recognise_the_library_and_user_classes():
    graph = gg.CSRGraph([0, 1, 2], [1, 0])
    x = np.zeros((2, 3), np.float32)
    assert isinstance(gg.NeighborSampler(graph, [1]), Sampler) and isinstance(_UserSampler(), Sampler)
    assert not isinstance(graph, Sampler) and not isinstance(x, Sampler)
    assert isinstance(gg.FeatureStore(x), FeatureSource) and isinstance(_UserFeatures(x), FeatureSource)
    multi = gg.MultiDeviceFeature(x, ["cpu", "cpu"])
    assert isinstance(multi, FeatureSource) and isinstance(multi.rank(1), FeatureSource)
    assert not isinstance(x, FeatureSource)  # arrays are indexed, not gathered
    assert gg.Sampler is Sampler and gg.FeatureSource is FeatureSource


def test_a_user_sampler_and_feature_source_drive_the_loader():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    loader = gg.NodeLoader(_UserSampler(), _UserFeatures(x), np.arange(6), 4, shuffle=False, backend=None)
    batches = list(loader)
    assert [b.batch_size for b in batches] == [4, 2]
    np.testing.assert_array_equal(batches[1].x, x[4:])


def test_presample_policy_takes_only_samplers():
    graph = gg.CSRGraph.from_edge_index([[0, 1, 2, 3], [1, 2, 3, 0]], num_nodes=4)
    with pytest.raises(TypeError, match=r"presample\['sampler'\] must have a sample"):
        gg.FeatureStore(
            np.zeros((4, 2), np.float32),
            device="cpu",
            policy="presample",
            graph=graph,
            presample=dict(sampler=object()),
        )


def test_seed_range_check_names_the_first_id_outside_for_every_integer_dtype():
    # int64 seeds are checked with one comparison (their uint64 view against num_nodes): a negative
    # id reads as a uint64 past any num_nodes, so the ids refused and the first named are the same
    from gglspeedup.device import Device
    from gglspeedup.sampling.common import check_seeds

    cpu = Device("cpu")
    cases = [([0, 4, -1, 9], 2, -1), ([3, 10], 1, 10), ([-(2**63), 1], 0, -(2**63)), ([2**63 - 1], 0, 2**63 - 1)]
    for dtype in (np.int64, np.int32, np.uint64, np.int16):
        for values, where, value in cases:
            ids = np.array(values).astype(dtype)
            if ids.tolist() != values:
                continue  # values this dtype cannot hold
            with pytest.raises(IndexError, match=rf"seeds\[{where}\] = {value}$"):
                check_seeds(ids, 10, cpu)
        ok = check_seeds(np.array([0, 9, 5], dtype), 10, cpu)
        assert ok.dtype == np.int64 and ok.flags.c_contiguous and ok.tolist() == [0, 9, 5]
    strided = np.arange(20, dtype=np.int64)[::-3]  # a view: checked as it is
    assert check_seeds(strided, 20, cpu).tolist() == strided.tolist()
    with pytest.raises(IndexError, match=r"seeds\[0\] = 19"):
        check_seeds(strided, 19, cpu)
