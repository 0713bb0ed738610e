"""Saved graphs: the folder format (O(1) memory-mapped loads, checksums, atomic saves) and the old
``.npz`` files, for CSRGraph and HeteroGraph."""

import errno
import json
import mmap
import os
import re

import numpy as np
import pytest

import gglspeedup as gg
from gglspeedup import _storage


def _graph(dtype=None, **options):
    edges = np.array([[1, 2, 0, 2, 3, 3], [0, 0, 1, 1, 2, 0]])
    weights = np.array([0.5, 1.0, 2.0, 0.25, 1.5, 3.0], np.float32)
    return gg.CSRGraph.from_edge_index(edges, num_nodes=4, weights=weights, dtype=dtype, **options)


def _typed():
    relations = {("a", "to", "b"): [[0, 1, 2, 2], [0, 0, 1, 2]], ("b", "back", "a"): [[0, 2], [1, 2]]}
    return gg.HeteroGraph(relations, {"a": 3, "b": 3})


def _is_mapped(array):
    while array is not None:
        if isinstance(array, (np.memmap, mmap.mmap)):
            return True
        array = array.base
    return False


def _same(a, b):
    for name in ("indptr", "indices", "edge_ids", "weights"):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            assert x.dtype == y.dtype and np.array_equal(np.asarray(x), np.asarray(y)), name
    assert a.num_src_nodes == b.num_src_nodes


@pytest.mark.parametrize("mmap", [True, False])
@pytest.mark.parametrize("dtype", [None, np.int64])
@pytest.mark.parametrize("keep_edge_ids", [True, False])
def test_round_trip_keeps_arrays_and_widths(tmp_path, mmap, dtype, keep_edge_ids):
    graph = _graph(dtype, keep_edge_ids=keep_edge_ids)
    graph.save(tmp_path / "g")
    assert sorted(os.listdir(tmp_path)) == ["g"]  # no temporary folder left behind
    loaded = gg.CSRGraph.load(tmp_path / "g", mmap=mmap)
    _same(graph, loaded)
    assert _is_mapped(loaded.indices) == mmap
    _same(graph, gg.CSRGraph.load(tmp_path / "g", verify=True))


def test_bipartite_round_trip(tmp_path):
    graph = gg.CSRGraph.from_edge_index([[0, 7, 3], [1, 0, 1]], num_nodes=2, num_src_nodes=8)
    graph.save(tmp_path / "g")
    _same(graph, gg.CSRGraph.load(tmp_path / "g"))


def test_saving_over_the_loaded_graph_keeps_both_readable(tmp_path):
    path = tmp_path / "g"
    _graph().save(path)
    loaded = gg.CSRGraph.load(path, mmap=True)
    before = np.array(loaded.indices)
    loaded.save(path)  # used to truncate the mapped file: SIGBUS
    assert np.array_equal(loaded.indices, before)  # the old mapping still reads the old (unlinked) file
    _same(loaded, gg.CSRGraph.load(path, verify=True))
    typed = _typed()
    typed.save(tmp_path / "h")
    again = gg.HeteroGraph.load(tmp_path / "h")
    typed_before = np.array(again.stacked.indices)
    again.save(tmp_path / "h")
    assert np.array_equal(again.stacked.indices, typed_before)  # still mapped and readable: no SIGBUS
    assert gg.HeteroGraph.load(tmp_path / "h", verify=True).num_edges == typed.num_edges


def _flip(path, array_file, offset_from_end=3):
    with open(path / array_file, "r+b") as handle:
        handle.seek(-offset_from_end, os.SEEK_END)
        byte = handle.read(1)
        handle.seek(-offset_from_end, os.SEEK_END)
        handle.write(bytes([byte[0] ^ 0x10]))


@pytest.mark.parametrize("array", ["indptr", "indices", "edge_ids", "weights"])
def test_a_flipped_byte_fails_verify_naming_the_array(tmp_path, array):
    _graph().save(tmp_path / "g")
    _flip(tmp_path / "g", f"{array}.npy")
    if array == "indptr":  # verify=False still checks indptr, O(num_nodes): the samplers rely on it
        with pytest.raises(
            ValueError, match=r"indptr\[-1\] = \d+, not len\(indices\) = 6; the graph folder is corrupt"
        ):
            gg.CSRGraph.load(tmp_path / "g")
    else:
        gg.CSRGraph.load(tmp_path / "g")  # verify=False: O(1), contents trusted
    with pytest.raises(ValueError, match=rf"array '{array}' fails its checksum"):
        gg.CSRGraph.load(tmp_path / "g", verify=True)


def test_a_flipped_byte_in_a_typed_graph_fails_verify(tmp_path):
    _typed().save(tmp_path / "h")
    _flip(tmp_path / "h", "indices.npy", 1)
    with pytest.raises(ValueError, match=r"array 'indices' fails its checksum"):
        gg.HeteroGraph.load(tmp_path / "h", verify=True)


def test_truncated_missing_and_mismatched_arrays_are_named_without_reading_them(tmp_path):
    path = tmp_path / "g"
    _graph().save(path)
    with open(path / "indices.npy", "r+b") as handle:
        handle.truncate(os.path.getsize(path / "indices.npy") - 4)
    with pytest.raises(ValueError, match=r"array 'indices' \(indices.npy\) is unreadable"):
        gg.CSRGraph.load(path)
    _graph().save(path)
    os.remove(path / "weights.npy")
    with pytest.raises(ValueError, match=r"array 'weights' is missing"):
        gg.CSRGraph.load(path)
    _graph().save(path)
    np.save(path / "indices.npy", np.zeros(6, np.int64))  # right length, wrong dtype
    with pytest.raises(ValueError, match=r"array 'indices' holds int64 \(6,\) but the header says int32 \(6,\)"):
        gg.CSRGraph.load(path)


def test_headers_that_do_not_fit_are_refused(tmp_path):
    path = tmp_path / "g"
    _graph().save(path)
    header = json.loads((path / "header.json").read_text())
    for change, message in [
        ({"version": 99}, "format version 99"),
        ({"format": "other"}, "not a gglspeedup graph header"),
        ({"kind": "HeteroGraph"}, "is not a saved CSRGraph: it holds a saved HeteroGraph"),
    ]:
        (path / "header.json").write_text(json.dumps({**header, **change}))
        with pytest.raises(ValueError, match=message):
            gg.CSRGraph.load(path)
    (path / "header.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"header.json is unreadable or corrupt"):
        gg.CSRGraph.load(path)
    os.remove(path / "header.json")
    with pytest.raises(ValueError):
        gg.CSRGraph.load(path)
    with pytest.raises(FileNotFoundError):
        gg.CSRGraph.load(tmp_path / "absent")


def test_typed_and_untyped_files_are_told_apart(tmp_path):
    _typed().save(tmp_path / "h")
    _graph().save(tmp_path / "g")
    with pytest.raises(
        ValueError, match=r"is not a saved CSRGraph: it holds a saved HeteroGraph; use HeteroGraph.load"
    ):
        gg.CSRGraph.load(tmp_path / "h")
    with pytest.raises(ValueError, match=r"is not a saved HeteroGraph: it holds a saved CSRGraph"):
        gg.HeteroGraph.load(tmp_path / "g")
    _legacy_typed_npz(tmp_path / "old.npz", _typed().stacked, edge_types=[["a", "to", "b"], ["b", "back", "a"]])
    with pytest.raises(ValueError, match=r"is not a saved CSRGraph: it holds a saved HeteroGraph"):
        gg.CSRGraph.load(tmp_path / "old.npz")


def _legacy_typed_npz(path, stacked, *, edge_types, has_edge_ids=None, drop=()):
    meta = {
        "node_types": ["a", "b"],
        "num_nodes": [3, 3],
        "edge_types": edge_types,
        "has_edge_ids": has_edge_ids if has_edge_ids is not None else [True] * len(edge_types),
    }
    arrays = {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8)}
    for name in ("indptr", "indices", "edge_ids"):
        if name not in drop:
            arrays[name] = np.asarray(getattr(stacked, name)).astype(np.int64)
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)


def test_old_npz_files_still_load_and_are_checked(tmp_path):
    graph = _graph()
    np.savez(tmp_path / "g.npz", indptr=graph.indptr, indices=graph.indices.astype(np.int64), weights=graph.weights)
    loaded = gg.CSRGraph.load(tmp_path / "g.npz")
    assert loaded.indices.tolist() == graph.indices.tolist()
    assert loaded.indices.dtype == np.int64  # a loaded graph keeps the width it was saved at: no copy
    gg.CSRGraph.load(tmp_path / "g.npz", verify=True)  # zip CRCs
    stacked = _typed().stacked
    _legacy_typed_npz(tmp_path / "h.npz", stacked, edge_types=[["a", "to", "b"], ["b", "back", "a"]])
    assert gg.HeteroGraph.load(tmp_path / "h.npz").num_edges == _typed().num_edges


@pytest.mark.parametrize("count", [np.array([7, 8]), np.array(7.5), np.array(True)], ids=["1-D", "float", "bool"])
def test_an_old_npz_whose_num_src_nodes_is_not_one_integer_is_refused_naming_it(tmp_path, count):
    path = tmp_path / "g.npz"
    np.savez(path, indptr=np.array([0, 1, 2]), indices=np.array([1, 0]), num_src_nodes=count)
    for mapped in (True, False):  # not int()'s TypeError, nor 7.5 read as 7
        with pytest.raises(ValueError, match=r"g\.npz': its num_src_nodes member must be one integer"):
            gg.CSRGraph.load(path, mmap=mapped)


@pytest.mark.parametrize("flag", ["mmap", "verify"])
def test_load_refuses_flags_that_are_not_bools(tmp_path, flag):
    _graph().save(tmp_path / "g")
    for load in (gg.CSRGraph.load, gg.HeteroGraph.load):
        with pytest.raises(TypeError, match=rf"{flag} must be a bool \(True or False\), got str 'no'"):
            load(tmp_path / "g", **{flag: "no"})  # "no" would have been read as true


@pytest.mark.parametrize(
    "edge_types, options, message",
    [
        ([["a", "to", "b"]], {}, r"edge types have 3 target rows in all, but the stacked indptr holds 6"),
        ([["a", "to", "b"], ["b", "back", "a"], ["a", "x", "b"]], {}, r"have 9 target rows in all, but the"),
        ([["a", "to", "b"], ["b", "back", "a"]], {"drop": ("edge_ids",)}, r"the edge_ids array is missing"),
        ([["a", "to", "b"], ["b", "back", "c"]], {}, r"names node type 'c', absent from the header"),
        ([["a", "to", "b"], ["b", "back", "a"]], {"has_edge_ids": [True]}, r"2 edge types but 1 has_edge_ids"),
        # loaded with one relation hidden behind the other; a flag "no" was read as true
        ([["a", "to", "b"], ["a", "to", "b"]], {}, r"names edge type \('a', 'to', 'b'\) twice"),
        ([["a", "to", "b"], ["b", "back", "a"]], {"has_edge_ids": ["no", True]}, r"has_edge_ids must be true / false"),
    ],
)
def test_typed_files_whose_header_disagrees_with_their_arrays_are_refused(tmp_path, edge_types, options, message):
    _legacy_typed_npz(tmp_path / "h.npz", _typed().stacked, edge_types=edge_types, **options)
    with pytest.raises(ValueError, match=message):
        gg.HeteroGraph.load(tmp_path / "h.npz")


def test_typed_folder_with_a_relation_missing_from_its_header_is_refused(tmp_path):
    _typed().save(tmp_path / "h")
    header = json.loads((tmp_path / "h" / "header.json").read_text())
    meta = header["meta"]
    for key in ("edge_types", "has_edge_ids", "edges_per_type"):
        meta[key] = meta[key][:1]
    (tmp_path / "h" / "header.json").write_text(json.dumps(header))
    with pytest.raises(ValueError, match=r"edge types are missing from or extra in the header"):
        gg.HeteroGraph.load(tmp_path / "h")


@pytest.mark.parametrize("counts", [["a", 2], [4.9, 2]], ids=["str", "float"])
def test_typed_folder_whose_edge_counts_are_not_integers_is_refused(tmp_path, counts):
    # "a" raised int()'s bare "invalid literal" naming no file; 4.9 was read as 4 and agreed
    _typed().save(tmp_path / "h")
    header = json.loads((tmp_path / "h" / "header.json").read_text())
    assert header["meta"]["edges_per_type"] == [4, 2]
    header["meta"]["edges_per_type"] = counts
    (tmp_path / "h" / "header.json").write_text(json.dumps(header))
    for verify in (False, True):
        with pytest.raises(ValueError, match=r"h': its header does not describe a HeteroGraph .*edges_per_type must"):
            gg.HeteroGraph.load(tmp_path / "h", verify=verify)


@pytest.mark.parametrize("name", ["g" * 250, "é" * 127], ids=["250 ASCII", "254 bytes of UTF-8"])
def test_a_name_near_the_file_systems_limit_saves_and_replaces(tmp_path, name):
    # The temporary folder was named '.{name}.tmp-{12 hex}': 'File name too long' before any work.
    _graph().save(tmp_path / name)
    _graph(np.int64).save(tmp_path / name)  # replacing: the old folder is renamed aside too
    assert gg.CSRGraph.load(tmp_path / name, verify=True).indices.dtype == np.int64
    assert os.listdir(tmp_path) == [name]


@pytest.mark.parametrize("failure", [OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_save_leaves_the_old_graph_and_no_temporary_files(tmp_path, monkeypatch, failure):
    path = tmp_path / "g"
    old = _graph()
    old.save(path)
    calls = []

    def failing_write(self, piece, original=_storage.ArrayWriter.write):
        calls.append(self.name)
        if self.name == "indices":
            raise failure
        original(self, piece)

    monkeypatch.setattr(_storage.ArrayWriter, "write", failing_write)
    with pytest.raises(type(failure)):
        _graph(np.int64).save(path)
    monkeypatch.undo()
    assert "indices" in calls and sorted(os.listdir(tmp_path)) == ["g"]
    _same(old, gg.CSRGraph.load(path, verify=True))


def test_saving_into_a_missing_folder_says_so(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        _graph().save(tmp_path / "nowhere" / "g")


# ---------------------------------------------------------------- writes never delete what they did not write
def _user_folder(path):
    path.mkdir()
    np.save(path / "x.npy", np.arange(5))
    (path / "notes.txt").write_text("mine")
    return path


def _same_user_files(path):
    assert sorted(os.listdir(path)) == ["notes.txt", "x.npy"]
    assert np.array_equal(np.load(path / "x.npy"), np.arange(5)) and (path / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("make", [_graph, _typed], ids=["CSRGraph", "HeteroGraph"])
def test_save_over_a_users_folder_or_file_refuses_naming_the_path_and_keeps_them(tmp_path, make):
    results = _user_folder(tmp_path / "results")
    with pytest.raises(FileExistsError, match=r"'.*results' is not a graph folder written by gglspeedup"):
        make().save(results)
    _same_user_files(results)
    features = tmp_path / "features.npy"
    np.save(features, np.ones((3, 2)))
    with pytest.raises(FileExistsError, match=r"features\.npy' exists and is not a saved graph"):
        make().save(features)
    assert np.array_equal(np.load(features), np.ones((3, 2)))  # a file, not replaced by a folder
    os.symlink(results, tmp_path / "link")
    with pytest.raises(FileExistsError, match=r"link' is a symbolic link"):
        make().save(tmp_path / "link")
    _same_user_files(results)
    assert sorted(os.listdir(tmp_path)) == ["features.npy", "link", "results"]  # no temporary folder left


@pytest.mark.parametrize("make", [_graph, _typed], ids=["CSRGraph", "HeteroGraph"])
@pytest.mark.parametrize("where", [".", ""])
def test_save_to_the_working_directory_refuses_and_deletes_nothing(tmp_path, monkeypatch, make, where):
    _user_folder(tmp_path / "cwd")
    monkeypatch.chdir(tmp_path / "cwd")
    with pytest.raises(FileExistsError, match=rf"'{re.escape(where)}' \(.*cwd\) is the working directory"):
        make().save(where)
    _same_user_files(tmp_path / "cwd")
    with pytest.raises(FileExistsError, match=r"working directory or one of its ancestors"):
        make().save(tmp_path)  # an ancestor of the working directory
    _same_user_files(tmp_path / "cwd")


def test_a_user_file_inside_a_saved_graph_makes_it_not_ours(tmp_path):
    path = tmp_path / "g"
    _graph().save(path)
    (path / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError, match=r"also holds files its header does not list \(mine\.txt\)"):
        _graph(np.int64).save(path)
    assert (path / "mine.txt").read_text() == "keep"
    assert gg.CSRGraph.load(path, verify=True).indices.dtype == np.int32  # the old graph, untouched
    os.remove(path / "mine.txt")
    os.remove(path / "weights.npy")
    (path / "weights.npy").mkdir()  # a folder under a name the header lists
    (path / "weights.npy" / "mine.txt").write_text("keep")
    with pytest.raises(FileExistsError, match=r"weights\.npy is not a plain file"):
        _graph().save(path)
    assert (path / "weights.npy" / "mine.txt").read_text() == "keep"


def test_overwrite_replaces_only_a_graph_this_library_wrote(tmp_path):
    path = tmp_path / "g"
    _graph().save(path)
    with pytest.raises(FileExistsError, match=r"'.*g' already holds a saved graph and overwrite=False"):
        _graph(np.int64).save(path, overwrite=False)
    assert gg.CSRGraph.load(path).indices.dtype == np.int32
    _graph(np.int64).save(path)  # the default: a graph saved earlier is replaced
    assert gg.CSRGraph.load(path, verify=True).indices.dtype == np.int64
    (tmp_path / "empty").mkdir()
    _graph().save(tmp_path / "empty", overwrite=False)  # an empty folder loses nothing
    assert gg.CSRGraph.load(tmp_path / "empty").num_edges == 6
    old = tmp_path / "old.npz"
    np.savez(old, indptr=_graph().indptr, indices=_graph().indices)
    _typed().save(old)  # an older saved graph (.npz) is ours too
    assert gg.HeteroGraph.load(old).num_edges == _typed().num_edges
    not_a_graph = tmp_path / "arrays.npz"
    np.savez(not_a_graph, x=np.arange(3))
    with pytest.raises(FileExistsError, match=r"arrays\.npz' exists and is not a saved graph"):
        _graph().save(not_a_graph)
    assert sorted(os.listdir(tmp_path)) == ["arrays.npz", "empty", "g", "old.npz"]
    with pytest.raises(TypeError, match="overwrite must be a bool"):
        _graph().save(tmp_path / "h", overwrite="yes")


def test_a_file_appearing_during_a_save_is_kept_and_the_save_refused(tmp_path, monkeypatch):
    path = tmp_path / "g"
    _graph().save(path)
    original = _storage.ArrayWriter.close

    def close_and_meddle(self):
        (path / "late.txt").write_text("mine")  # while the new folder is being written
        return original(self)

    monkeypatch.setattr(_storage.ArrayWriter, "close", close_and_meddle)
    with pytest.raises(FileExistsError, match=r"header does not list \(late\.txt\)"):
        _graph(np.int64).save(path)
    monkeypatch.undo()
    assert (path / "late.txt").read_text() == "mine" and sorted(os.listdir(tmp_path)) == ["g"]
    assert gg.CSRGraph.load(path, verify=True).indices.dtype == np.int32
