"""Feature tables on disk whose file changes under the store (issue 39): a gather never returns
old cached rows beside new mapped ones; it raises ``FileChangedError`` naming the file. Also the
``from_npy`` path argument and the ``cache_size`` name in budget errors."""

import os

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup._backing import backing_file
from gglspeedup.feature import FileChangedError
from gglspeedup.feature._tiers import HostCacheTier, HostTier

from conftest import DEVICES, to_host

ROWS, DIM = 400, 6


def _tables():
    old = np.arange(ROWS * DIM, dtype=np.float32).reshape(ROWS, DIM)
    return old, -old - 1  # every row differs


def _rewrite_in_place(path, table):
    """Overwrite the array's bytes where they lie: same inode, same size (what ``np.save`` over
    the file or a writer opening it ``"r+b"`` does), then move the modification time on so the
    change is visible on file systems with coarse timestamps too."""
    before = os.stat(path)
    with open(path, "r+b") as handle:
        handle.seek(before.st_size - table.nbytes)
        handle.write(table.tobytes())
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))
    assert os.stat(path).st_ino == before.st_ino and os.stat(path).st_size == before.st_size


@pytest.mark.parametrize("cached_rows", [0, 100, ROWS])
def test_a_mapped_table_rewritten_in_place_raises_naming_the_file_instead_of_mixing_rows(tmp_path, cached_rows):
    old, new = _tables()
    path = tmp_path / "x.npy"
    np.save(path, old)
    order = np.random.default_rng(0).permutation(ROWS)
    store = gg.FeatureStore.from_npy(path, cache_size=cached_rows * DIM * 4, policy=order)
    assert isinstance(store._tier, HostCacheTier if cached_rows else HostTier)
    ids = np.arange(ROWS)
    assert np.array_equal(store[ids], old)
    _rewrite_in_place(path, new)
    for gather in (lambda: store[ids], lambda: store.gather(ids[:3], out=np.empty((3, DIM), np.float32))):
        with pytest.raises(FileChangedError, match="changed on disk since it was opened") as info:
            gather()
        assert str(path) in str(info.value)
    assert isinstance(info.value, OSError) and isinstance(info.value, RuntimeError)
    # Reloading reads the new contents.
    again = gg.FeatureStore.from_npy(path, cache_size=cached_rows * DIM * 4, policy=order)
    assert np.array_equal(again[ids], new)


def test_np_save_over_a_mapped_file_is_refused_by_name(tmp_path):
    old, new = _tables()
    path = tmp_path / "x.npy"
    np.save(path, old)
    store = gg.FeatureStore.from_npy(path, cache_size=50 * DIM * 4, policy=np.arange(ROWS))
    stat = os.stat(path)
    np.save(path, new)  # truncates and rewrites the same inode at the same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(FileChangedError, match=r"x\.npy' changed on disk since it was opened"):
        store[np.arange(ROWS)]


def test_a_file_replaced_at_the_same_path_leaves_the_store_reading_the_old_table(tmp_path):
    old, new = _tables()
    path = tmp_path / "x.npy"
    np.save(path, old)
    store = gg.FeatureStore.from_npy(path, cache_size=100 * DIM * 4, policy=np.arange(ROWS)[::-1])
    np.save(tmp_path / "next.npy", new)
    os.replace(tmp_path / "next.npy", path)  # a new inode: the mapping keeps the old one alive
    assert np.array_equal(store[np.arange(ROWS)], old)
    os.remove(path)
    assert np.array_equal(store[np.arange(ROWS)], old)


def test_writes_through_a_callers_writable_mapping_without_a_cache_show_in_gathers(tmp_path):
    old, _ = _tables()
    path = tmp_path / "x.npy"
    np.save(path, old)
    writable = np.load(path, mmap_mode="r+")
    store = gg.FeatureStore(writable)  # one tier: the mapping itself, read as it is
    writable[7] = 42.0
    writable.flush()
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    assert np.array_equal(store[[7, 8]], np.stack([np.full(DIM, 42.0, np.float32), old[8]]))
    cached = gg.FeatureStore(writable, cache_size=10 * DIM * 4, policy=np.arange(ROWS))
    writable[7] = 43.0  # row 7 is in this store's RAM cache: it now differs from the file
    writable.flush()
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    with pytest.raises(FileChangedError, match="cache still holds rows of the old contents"):
        cached[[7]]


def test_a_change_while_the_cache_is_filled_is_refused_when_the_fill_ends(tmp_path):
    old, new = _tables()
    path = tmp_path / "x.npy"
    np.save(path, old)
    table = np.load(path, mmap_mode="r")
    backing = backing_file(table)  # what from_npy records when it opens the file
    _rewrite_in_place(path, new)  # e.g. during a long presample policy run
    with pytest.raises(FileChangedError, match="changed on disk since it was opened"):
        HostCacheTier(np.asarray(table), np.arange(10, dtype=np.int64), backing)


def test_typed_tables_on_disk_are_checked_per_type(tmp_path):
    old, new = _tables()
    np.save(tmp_path / "a.npy", old)
    np.save(tmp_path / "b.npy", old[:50])
    store = gg.HeteroFeatureStore.from_npy({"a": tmp_path / "a.npy", "b": tmp_path / "b.npy"}, cache_size="4K")
    _rewrite_in_place(tmp_path / "b.npy", new[:50])
    assert np.array_equal(store[{"a": [1, 2]}]["a"], old[[1, 2]])
    with pytest.raises(FileChangedError, match=r"b\.npy"):
        store[{"b": [1, 2]}]


@pytest.mark.parametrize("device", DEVICES[1:])  # the CPU tiers are tested above
def test_cuda_stores_refuse_a_changed_file_they_read_and_keep_copies_they_made(tmp_path, device):
    old, new = _tables()
    path = tmp_path / "x.npy"
    np.save(path, old)
    ids = np.arange(0, ROWS, 37)
    copied = gg.FeatureStore.from_npy(path, device, cache_size=50 * DIM * 4, policy=np.arange(ROWS))
    registered = gg.FeatureStore.from_npy(path, device, cache_size=50 * DIM * 4, policy=np.arange(ROWS), pin="register")
    _rewrite_in_place(path, new)
    assert np.array_equal(to_host(copied[ids]), old[ids])  # every row was copied at construction
    with pytest.raises(FileChangedError, match="changed on disk since it was opened"):
        registered[ids]


# ------------------------------------------------------------------ from_npy's path argument


def test_from_npy_with_a_npz_names_the_argument_and_says_how_to_get_a_npy(tmp_path):
    np.savez(tmp_path / "x.npz", feat=np.zeros((4, 2), np.float32))
    with pytest.raises(ValueError, match=r"path must be a \.npy file") as info:
        gg.FeatureStore.from_npy(tmp_path / "x.npz")
    message = str(info.value)
    assert "x.npz" in message and "['feat']" in message and "np.save(" in message
    with pytest.raises(ValueError, match=r"paths\['paper'\] must be a \.npy file"):
        gg.HeteroFeatureStore.from_npy({"paper": tmp_path / "x.npz"})
    with pytest.raises(TypeError, match=r"path must be a path to a \.npy file"):
        gg.FeatureStore.from_npy(3.5)


# ------------------------------------------------------------------ budgets name their argument


@pytest.mark.parametrize(
    "make",
    [
        lambda x: gg.FeatureStore(x, cache_size="4Q"),
        lambda x: gg.HeteroFeatureStore({"a": x}, cache_size="4Q"),
        lambda x: gg.MultiDeviceFeature(x, ["cpu"], cache_size="4Q"),
        lambda x: gg.CGPUFeature(None, "cpu", "4Q"),
    ],
    ids=["FeatureStore", "HeteroFeatureStore", "MultiDeviceFeature", "CGPUFeature"],
)
def test_a_bad_cache_size_is_named_cache_size(make):
    with pytest.raises(ValueError, match=r"^cache_size must be a number with an optional K/M/G/T unit .*'4Q'"):
        make(np.zeros((4, 2), np.float32))


def test_a_bad_staging_size_is_named_staging():
    with pytest.raises(ValueError, match=r"^staging must be"):
        gg.FeatureStore(np.zeros((4, 2), np.float32), staging="lots")


def test_parse_size_names_the_callers_argument():
    from gglspeedup.device import parse_size

    with pytest.raises(ValueError, match=r"^memory must be >= 0 bytes"):
        parse_size(-1, "memory")
    with pytest.raises(TypeError, match=r"^size must be a str"):
        parse_size(None)
