"""`import gglspeedup` stays light, lazy names resolve, and capability flags are probed honestly."""

import importlib
import importlib.util
import json
import os
import subprocess
import sys

import pytest

import gglspeedup
from gglspeedup import _config

HEAVY = ("torch", "tensorflow", "paddle", "jax", "numba", "llvmlite", "scipy", "cupy", "tensorlayerx")


def run_python(code: str, **env) -> dict:
    """Run ``code`` in a fresh interpreter; it prints one JSON object as its last line."""
    full_env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    full_env.update(env)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_import_loads_no_framework_numba_or_scipy():
    report = run_python(
        "import sys, json, time\n"
        "t = time.perf_counter()\n"
        "import gglspeedup\n"
        "seconds = time.perf_counter() - t\n"
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "sub = sorted(m for m in sys.modules if m.startswith('gglspeedup.'))\n"
        "print(json.dumps(dict(heavy=heavy, sub=sub, seconds=seconds)))"
    )
    assert report["heavy"] == []
    # Only the eager core: config flags, devices, the graph, the threading-layer set-up (a
    # shared library made loadable before the user can start Numba's threads; no Numba import)
    # NumPy's restored alias for numba-cuda (NumPy only) and the hook that locks Numba's cache
    # saves when Numba's caching module loads (no Numba import either).
    assert set(report["sub"]) <= {
        "gglspeedup._numba_cache",
        "gglspeedup._numpy_compat",
        "gglspeedup._config",
        "gglspeedup.device",
        "gglspeedup.graph",
        "gglspeedup._threading",
    }


def test_datasets_load_lazily_and_cora_needs_no_numba():
    report = run_python(
        "import sys, json\n"
        "import gglspeedup as gg\n"
        "before = 'gglspeedup.datasets' in sys.modules\n"
        "graph, x, y, split = gg.datasets.load('cora')\n"
        "after_load = sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'scipy'))\n"
        "gg.datasets.synthetic_powerlaw\n"
        "print(json.dumps(dict(before=before, after_load=after_load, n=graph.num_nodes,\n"
        "                      numba='numba' in sys.modules)))"
    )
    assert report == {"before": False, "after_load": [], "n": 2708, "numba": True}


def test_service_loads_lazily_and_imports_neither_ray_nor_numba():
    report = run_python(
        "import sys, json\n"
        "import gglspeedup as gg\n"
        "before = 'gglspeedup.service' in sys.modules\n"
        "error = gg.service.ServerUnavailable\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'numba', 'scipy', 'pymetis'))\n"
        "print(json.dumps(dict(before=before, heavy=heavy, base=error.__mro__[1].__name__)))"
    )
    assert report == {"before": False, "heavy": [], "base": "RuntimeError"}


def test_all_lists_distinct_identifiers():
    names = gglspeedup.__all__
    assert len(names) == len(set(names))
    assert all(name.isidentifier() for name in names)  # a missing comma would merge two names
    assert set(names) <= set(dir(gglspeedup))
    assert {"CSRGraph", "Device", "parse_size", "datasets", "NeighborSampler", "FeatureStore"} <= set(names)


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@pytest.mark.parametrize("name", sorted(gglspeedup._LAZY_NAMES))
def test_lazy_names_resolve_to_their_module_objects(name):
    module = gglspeedup._LAZY_NAMES[name]
    assert _module_exists(module), f"gglspeedup.{name} points at {module}, which does not exist"
    value = getattr(gglspeedup, name)
    assert value is getattr(importlib.import_module(module), name)
    assert gglspeedup.__dict__[name] is value  # cached after the first access


@pytest.mark.parametrize("name", gglspeedup._LAZY_MODULES)
def test_lazy_submodules_resolve(name):
    assert _module_exists(f"gglspeedup.{name}"), f"gglspeedup.{name} is a lazy submodule that does not exist"
    module = getattr(gglspeedup, name)
    assert module is sys.modules[f"gglspeedup.{name}"]
    assert isinstance(getattr(module, "__all__", None), (list, tuple)), f"gglspeedup.{name} lacks __all__"


def test_a_lazy_name_whose_module_is_missing_fails_rather_than_skips(monkeypatch):
    monkeypatch.setitem(gglspeedup._LAZY_NAMES, "Ghost", "gglspeedup.no_such_module")
    with pytest.raises(AssertionError, match="does not exist"):
        test_lazy_names_resolve_to_their_module_objects("Ghost")
    monkeypatch.setattr(gglspeedup, "_LAZY_MODULES", [*gglspeedup._LAZY_MODULES, "no_such_module"])
    with pytest.raises(AssertionError, match="does not exist"):
        test_lazy_submodules_resolve("no_such_module")


def test_unknown_attribute_raises_attribute_error():
    with pytest.raises(AttributeError, match=r"module 'gglspeedup' has no attribute 'NoSuchThing'"):
        gglspeedup.NoSuchThing  # noqa: B018
    assert not hasattr(gglspeedup, "nosuchmodule")


def test_eager_names():
    from gglspeedup.device import Device, parse_size
    from gglspeedup.graph import CSRGraph

    assert (gglspeedup.CSRGraph, gglspeedup.Device, gglspeedup.parse_size) == (CSRGraph, Device, parse_size)
    assert isinstance(gglspeedup.__version__, str) and gglspeedup.__version__.count(".") == 2


# ---------------------------------------------------------------------------- _config
def test_probe_reports_every_flag_as_bool():
    flags = _config.probe()
    expected = {
        "HAS_CUPY",
        "HAS_CUPY_GPU",
        "CUDA_SIM",
        "HAS_NUMBA_CUDA",
        "HAS_CUDA",
        "HAS_TORCH",
        "HAS_TENSORFLOW",
        "HAS_PADDLE",
        "HAS_JAX",
        "HAS_TLX",
        "HAS_TORCH_GEOMETRIC",
        "HAS_DGL",
    }
    assert set(flags) == expected
    assert all(type(value) is bool for value in flags.values())
    assert flags["HAS_CUDA"] == (flags["CUDA_SIM"] or flags["HAS_NUMBA_CUDA"])
    assert not (flags["CUDA_SIM"] and (flags["HAS_NUMBA_CUDA"] or flags["HAS_CUPY_GPU"]))
    assert not flags["HAS_CUPY_GPU"] or flags["HAS_CUPY"]
    for flag, module in _config._FRAMEWORK_MODULES.items():
        assert flags[flag] == (importlib.util.find_spec(module) is not None), flag
    assert _config.HAS_TORCH is flags["HAS_TORCH"]


def test_unknown_flag_raises():
    with pytest.raises(AttributeError, match=r"has no attribute 'HAS_NOTHING'"):
        _config.HAS_NOTHING  # noqa: B018


@pytest.mark.parametrize("value, expected", [("1", True), ("yes", True), ("0", False), ("", False), (None, False)])
def test_cuda_sim_enabled_reads_the_environment(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    else:
        monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", value)
    assert _config.cuda_sim_enabled() is expected


@pytest.mark.parametrize("simulator", ["0", "1"])
def test_flags_in_a_fresh_process_import_no_framework(simulator):
    report = run_python(
        "import sys, json\n"
        "from gglspeedup import _config\n"
        "flags = {name: getattr(_config, name) for name in ('HAS_TORCH', 'HAS_TENSORFLOW', 'HAS_PADDLE',\n"
        "         'HAS_JAX', 'HAS_TLX', 'CUDA_SIM', 'HAS_CUDA', 'HAS_NUMBA_CUDA', 'HAS_CUPY_GPU')}\n"
        "frameworks = sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "                    ('torch', 'tensorflow', 'paddle', 'jax', 'tensorlayerx'))\n"
        "print(json.dumps(dict(flags=flags, frameworks=frameworks)))",
        NUMBA_ENABLE_CUDASIM=simulator,
    )
    assert report["frameworks"] == []
    flags = report["flags"]
    assert flags["HAS_TORCH"] == (importlib.util.find_spec("torch") is not None)
    if simulator == "1":
        assert flags["CUDA_SIM"] and flags["HAS_CUDA"]
        assert not flags["HAS_NUMBA_CUDA"] and not flags["HAS_CUPY_GPU"]
    else:
        assert not flags["CUDA_SIM"]
        assert flags["HAS_CUDA"] == flags["HAS_NUMBA_CUDA"]
