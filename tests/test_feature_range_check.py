"""``first_out_of_range`` (the host gather's id check) finds exactly the first id outside
``[0, num_rows)``: negative ids of either width, ids equal to ``num_rows``, an empty table, and
int64 ids past ``2**62``, against a NumPy reference."""

import numpy as np
import pytest

from gglspeedup.feature._kernels.gather import first_out_of_range


def _reference(ids, num_rows):
    bad = np.flatnonzero((ids.astype(np.float64) < 0) | (ids.astype(np.float64) >= num_rows))
    return int(bad[0]) if bad.size else -1


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_first_out_of_range_matches_numpy_on_random_ids(dtype):
    rng = np.random.default_rng(0)
    for _ in range(300):
        ids = rng.integers(-3, 100, int(rng.integers(0, 400))).astype(dtype)
        num_rows = int(rng.integers(0, 110))
        assert first_out_of_range(ids, num_rows) == _reference(ids, num_rows)


@pytest.mark.parametrize(
    ("ids", "dtype", "num_rows", "expected"),
    [
        ([0, 4, 3], np.int64, 5, -1),
        ([0, 5, 3], np.int64, 5, 1),
        ([2, -1, 9], np.int32, 5, 1),
        ([-(2**31), 0], np.int32, 5, 0),
        ([0, 2**31 - 1], np.int32, 2**31 - 1, 1),
        ([0, 2**62, -(2**63)], np.int64, 2**62, 1),
        ([2**63 - 1], np.int64, 2**40, 0),
        ([0], np.int64, 0, 0),
        ([], np.int64, 0, -1),
    ],
)
def test_first_out_of_range_edge_cases(ids, dtype, num_rows, expected):
    assert first_out_of_range(np.array(ids, dtype=dtype), num_rows) == expected
