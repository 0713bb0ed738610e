"""Shared fixtures: device parametrisation and process-level import order.

``device`` parametrises a test over ``"cpu"`` and ``"cuda:0"``. The CUDA case carries the ``cuda``
marker and is skipped unless GPU kernels can run here: on a real GPU, or on numba's simulator when
``NUMBA_ENABLE_CUDASIM=1`` (``scripts/test.sh`` runs ``pytest -m cuda`` that way).
"""

import importlib.util
import os
import warnings

import numpy as np
import pytest

# Importing TensorFlow and then Paddle in one process segfaults (paddle's C extension); Paddle
# first is safe, so any test session that may touch both imports Paddle up front.
if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") in ("", "0") and importlib.util.find_spec("paddle"):
    from gglspeedup._threading import prefer_tbb

    prefer_tbb()  # Paddle 3.3's libpaddle.so needs libtbb.so.12, which pip puts outside the loader's path
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import paddle  # noqa: F401

from gglspeedup import _config

HAS_CUDA = _config.HAS_CUDA
HAS_GPU_HARDWARE = _config.HAS_NUMBA_CUDA and _config.HAS_CUPY_GPU

cuda_only = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU and the CUDA simulator is off")
DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda:0", id="cuda", marks=[pytest.mark.cuda, cuda_only]),
]


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames and not any(
        mark.name == "parametrize" and "device" in mark.args[0] for mark in metafunc.definition.iter_markers()
    ):
        metafunc.parametrize("device", DEVICES)


def pytest_collection_modifyitems(config, items):
    skip_hw = pytest.mark.skip(reason="needs a real CUDA GPU")
    for item in items:
        if "gpu_hardware" in item.keywords and not HAS_GPU_HARDWARE:
            item.add_marker(skip_hw)
        if "cuda" in item.keywords and not HAS_CUDA:
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU and the CUDA simulator is off"))


def to_host(array):
    """A NumPy copy of a NumPy or CuPy array (test helper)."""
    return array.get() if hasattr(array, "get") else np.asarray(array)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
