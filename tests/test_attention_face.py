"""The attention package's two rooms (pooling/, sequence/), their faces and the old module paths."""

import importlib
import json
import subprocess
import sys

import pytest

pytest.importorskip("torch")

import gglspeedup.attention as attention
from gglspeedup.attention import _face, pooling, sequence

ROOM_MODULES = {
    pooling: ("maps", "numpy_maps", "batch", "layers", "distributed"),
    sequence: ("patterns", "graph", "diffusion", "fractional", "layers", "sharded"),
}
# the modules moved in issue 41, by their old path: the path keeps its public names
OLD_PATHS = {
    "pooling_numpy": ("pooling.numpy_maps", "pooling._state"),
    "pooling_batch": ("pooling.batch",),
    "pooling_modules": ("pooling.layers",),
    "pooling_distributed": ("pooling.distributed",),
    "pooling_layer": ("pooling._layer",),
    "patterns": ("sequence.patterns",),
    "pattern_graph": ("sequence.graph",),
    "diffusion": ("sequence.diffusion",),
    "fractional": ("sequence.fractional",),
    "diffuser_modules": ("sequence.layers",),
    "sharded": ("sequence.sharded",),
}
# the names the package face exported before the rooms (none may go)
FACE_BEFORE = {
    "softmax", "sparsemax", "gfusedmax", "fused_lasso", "softmax_numpy", "sparsemax_numpy", "gfusedmax_numpy",
    "fused_lasso_numpy", "PoolingResult", "CertificateError", "GraphBatch", "graph_batch", "AttentionPooling",
    "standardize_scores", "FastFlexAddAttention", "MultipleAttention", "Softmax", "Sparsemax", "Gfusedmax",
    "SoftmaxN", "SparsemaxN", "GfusedmaxN", "Sigmoid", "Tanh", "Sum", "Mean", "Max", "TopK", "TopKN",
    "partition_graphs", "split_batch", "LocalBatch", "sum_gradients", "pool_across_devices", "SequencePattern",
    "AttentionGraph", "diffusion_attention", "fractional_attention", "DiffuserSelfAttention",
    "DiffuserFracSelfAttention", "ShardPlan", "sharded_diffusion_attention",
}  # fmt: skip


@pytest.mark.parametrize("room", ROOM_MODULES, ids=lambda room: room.__name__.rpartition(".")[2])
def test_each_room_lists_exactly_its_modules_all(room):
    listed = []
    for name in ROOM_MODULES[room]:
        module = importlib.import_module(f"{room.__name__}.{name}")
        listed += module.__all__  # the face read these from the source; here they are imported
        for public in module.__all__:
            assert getattr(room, public) is getattr(module, public)
            assert getattr(attention, public) is getattr(module, public)
    assert room.__all__ == listed
    assert set(room.__all__) <= set(dir(room))


def test_the_package_face_is_both_rooms_and_keeps_every_earlier_name():
    assert attention.__all__ == [*pooling.__all__, *sequence.__all__]
    assert len(set(attention.__all__)) == len(attention.__all__)  # no name in both rooms
    assert FACE_BEFORE <= set(attention.__all__)
    assert not hasattr(attention, "modules")  # the re-export module is gone; the layers are names of the face


@pytest.mark.parametrize("old", OLD_PATHS)
def test_old_module_paths_keep_their_public_names(old):
    module = importlib.import_module(f"gglspeedup.attention.{old}")
    homes = [importlib.import_module(f"gglspeedup.attention.{new}") for new in OLD_PATHS[old]]
    assert module.__all__
    for name in module.__all__:
        value = getattr(module, name)
        assert any(getattr(home, name, None) is value for home in homes), name


def test_a_face_refuses_a_module_without_a_literal_all(tmp_path):
    (tmp_path / "computed.py").write_text("names = ['a']\n__all__ = names\n")
    (tmp_path / "one.py").write_text('__all__ = ["a", "b"]\n')
    (tmp_path / "two.py").write_text('__all__ = ["b"]\n')
    assert _face.read_names("pkg", str(tmp_path), ["one"]) == {"a": "pkg.one", "b": "pkg.one"}
    with pytest.raises(ImportError, match="literal __all__"):
        _face.read_names("pkg", str(tmp_path), ["computed"])
    with pytest.raises(ImportError, match=r"'b' is in the __all__ of both pkg\.one and two"):
        _face.read_names("pkg", str(tmp_path), ["one", "two"])


def test_importing_the_rooms_imports_neither_torch_nor_numba():
    code = (
        "import json, sys\n"
        "import gglspeedup.attention, gglspeedup.attention.pooling, gglspeedup.attention.sequence\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numba'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
