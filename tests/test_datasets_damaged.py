"""A damaged bundled dataset file is named (issue 39): truncated, flipped or missing a member, the
loader raises one ValueError naming the file, not zipfile's, zlib's or a graph check's message."""

import os
import shutil
import zipfile

import numpy as np
import pytest

from gglspeedup import datasets

DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gglspeedup", "data")

# loader, its file, how the loader is called with a root folder
LOADERS = {
    "cora": ("cora.npz", lambda root: datasets.load("cora", root=root)),
    "citeseer": ("citeseer.npz", lambda root: datasets.load("citeseer", root=root)),
    "wordnet": ("wordnet.npz", lambda root: datasets.load_wordnet(root)),
    "enzymes": ("tu_enzymes.npz", lambda root: datasets.load_tu("enzymes", root=root)),
    "uci": ("uci_messages.npz", lambda root: datasets.load_uci_messages(root)),
}


def _truncate(path):
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)


def _flip(path):
    """Flip bytes inside the compressed or stored data of the first member (its CRC no longer
    matches, or the deflate stream breaks)."""
    with zipfile.ZipFile(path) as archive:
        info = archive.infolist()[0]
    with open(path, "r+b") as handle:
        handle.seek(info.header_offset + 30 + len(info.filename) + 8)
        data = bytearray(handle.read(64))
        handle.seek(info.header_offset + 30 + len(info.filename) + 8)
        handle.write(bytes(b ^ 0xFF for b in data))


def _drop_member(path):
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.pop(sorted(arrays)[0])
    np.savez(path[: -len(".npz")], **arrays)


@pytest.mark.parametrize("damage", [_truncate, _flip, _drop_member], ids=["truncated", "flipped", "member missing"])
@pytest.mark.parametrize("name", sorted(LOADERS))
def test_a_damaged_bundled_file_is_named(tmp_path, name, damage):
    file_name, load = LOADERS[name]
    path = tmp_path / file_name
    shutil.copy(os.path.join(DATA, file_name), path)
    damage(str(path))
    with pytest.raises(ValueError, match="is not a readable dataset file") as info:
        load(tmp_path)
    assert isinstance(info.value, OSError) and isinstance(info.value, datasets.DatasetFileError)
    message = str(info.value)
    assert str(path) in message and "Reinstall gglspeedup" in message and "tools/convert_" in message


def test_an_absent_file_still_says_how_to_write_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"tools/convert_planetoid\.py"):
        datasets.load("cora", root=tmp_path)
    with pytest.raises(FileNotFoundError, match=r"tools/convert_tu\.py"):
        datasets.load_tu("proteins", root=tmp_path)


def test_intact_copies_load_as_the_bundled_ones(tmp_path):
    shutil.copy(os.path.join(DATA, "cora.npz"), tmp_path / "cora.npz")
    graph, x, y, _ = datasets.load("cora", root=tmp_path)
    bundled = datasets.load("cora")
    assert graph.num_edges == bundled[0].num_edges and np.array_equal(x, bundled[1]) and np.array_equal(y, bundled[2])
