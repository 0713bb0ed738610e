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


def pytest_configure(config):
    # numba-cuda 0.30's NumbaPerformanceWarning is not a subclass of numba's, and the module that
    # holds it moves between numba-cuda releases (a GPU machine's image may carry another one), so
    # the filter is added here where a missing module can be skipped, not in pyproject.toml where
    # it would stop pytest before any test ran.
    try:
        from numba.cuda.core.errors import NumbaPerformanceWarning  # noqa: F401
    except ImportError:
        return
    config.addinivalue_line("filterwarnings", "ignore::numba.cuda.core.errors.NumbaPerformanceWarning")


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
    """A NumPy copy of a NumPy or CuPy array, or of a torch tensor on any device (test helper)."""
    if hasattr(array, "detach"):
        return array.detach().cpu().numpy()
    return array.get() if hasattr(array, "get") else np.asarray(array)


def gpu_hardware(device) -> bool:
    """Whether ``device`` names a real GPU here (not the CPU, not numba's simulator)."""
    return str(device).startswith("cuda") and not _config.cuda_sim_enabled()


def assert_same_bits(device, actual, expected, err_msg=""):
    """``actual`` (computed on ``device``) equals ``expected`` (the CPU's) bit for bit on the CPU
    and the simulator. On a real GPU, floats agree to 1024 ulps of the values' scale instead: NVVM
    fuses multiply-adds and libdevice rounds ``exp`` its own way (docs/DESIGN.md, attention);
    integers and booleans still exactly."""
    a, b = to_host(actual), to_host(expected)
    assert a.shape == b.shape, (a.shape, b.shape, err_msg)
    if not gpu_hardware(device) or a.dtype.kind not in "fc":
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    assert a.dtype == b.dtype, (a.dtype, b.dtype, err_msg)
    tol = 1024 * np.finfo(a.dtype).eps
    scale = float(np.max(np.abs(b))) if b.size else 0.0
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale, err_msg=err_msg)


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
