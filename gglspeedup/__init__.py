"""gglspeedup: fast neighbour sampling and feature gathering for sampling-based GNN training.

>>> import gglspeedup as gg
>>> graph = gg.CSRGraph.from_edge_index([[0, 1, 2], [1, 2, 0]], num_nodes=3)
>>> sampler = gg.NeighborSampler(graph, fanouts=[2, 2], seed=0)   # doctest: +SKIP
>>> n_id, adjs = sampler.sample([0, 1])                           # doctest: +SKIP

Everything except this file, :mod:`gglspeedup.device` and :mod:`gglspeedup.graph` loads on first
attribute access, so ``import gglspeedup`` imports no framework, no Numba and no GPU library; it
only makes a pip-installed TBB loadable for Numba's threading layer (see ``gglspeedup._threading``).
"""

from __future__ import annotations

import importlib

try:
    from ._numba_cache import install as _lock_numba_cache
    from ._numpy_compat import restore_removed_aliases as _restore_removed_aliases
    from ._threading import prefer_tbb as _prefer_tbb
    from .device import Device, parse_size
    from .graph import CSRGraph
except ModuleNotFoundError as _error:  # a Python without the project's environment: say which to use
    from ._config import missing_core_message as _missing_core_message

    if _missing_core_message(_error) is None:
        raise
    raise ModuleNotFoundError(_missing_core_message(_error), name=_error.name) from None

# Numba picks its threading layer at its first parallel launch, which a user's
# numba.set_num_threads() also triggers: make TBB loadable now (a shared library; Numba is not imported).
_prefer_tbb()
_restore_removed_aliases()  # before any numba-cuda compile: see _numpy_compat
_lock_numba_cache()  # processes compiling at once must not mix their cached kernels: see _numba_cache

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_LAZY_NAMES = {
    "NeighborSampler": "gglspeedup.sampling",
    "SampleOutput": "gglspeedup.sampling",
    "Adj": "gglspeedup.sampling",
    "LinkSampleOutput": "gglspeedup.sampling",
    "HeteroGraph": "gglspeedup.heterograph",
    "HeteroNeighborSampler": "gglspeedup.sampling",
    "HeteroSampleOutput": "gglspeedup.sampling",
    "HeteroLinkSampleOutput": "gglspeedup.sampling",
    "FeatureStore": "gglspeedup.feature",
    "HeteroFeatureStore": "gglspeedup.feature",
    "FileChangedError": "gglspeedup.feature",
    "MultiDeviceSampler": "gglspeedup.multigpu",
    "MultiDeviceFeature": "gglspeedup.multigpu",
    "NodeLoader": "gglspeedup.loader",
    "LinkLoader": "gglspeedup.loader",
    "Sampler": "gglspeedup.protocols",
    "LinkSampler": "gglspeedup.protocols",
    "FeatureSource": "gglspeedup.protocols",
    "DeviceUnavailableError": "gglspeedup.device",
    "GPUSampler": "gglspeedup.compat",
    "CGPUFeature": "gglspeedup.compat",
    "MultiGPUSampler": "gglspeedup.compat",
    "Multi_CGPUFeature": "gglspeedup.compat",
}
_LAZY_MODULES = (
    "attention",
    "backends",
    "bench",
    "compat",
    "datasets",
    "distributed",
    "examples",
    "feature",
    "gammagl",
    "inference",
    "loader",
    "multigpu",
    "protocols",
    "sampling",
    "service",
    "testing",
    "validation",
)

__all__ = ["CSRGraph", "Device", "parse_size", *_LAZY_NAMES, *_LAZY_MODULES]


def __getattr__(name: str):
    if name in _LAZY_NAMES:
        value = getattr(importlib.import_module(_LAZY_NAMES[name]), name)
    elif name in _LAZY_MODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
