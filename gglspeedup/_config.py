"""Capability flags, probed once and cached.

Every optional dependency is probed at most once, on first use, so ``import gglspeedup`` imports
no framework and no GPU library. Read a flag as ``_config.HAS_TORCH`` (module attribute, computed
lazily) or call :func:`probe` for the whole table.

Flags
-----
HAS_CUPY : cupy imports.
HAS_CUPY_GPU : cupy imports *and* ``cupy.cuda.is_available()`` (a usable GPU).
CUDA_SIM : numba's CUDA simulator is active (``NUMBA_ENABLE_CUDASIM=1``).
HAS_NUMBA_CUDA : numba-cuda sees a real GPU (never true under the simulator).
HAS_CUDA : GPU kernels can run, really or simulated (``HAS_NUMBA_CUDA or CUDA_SIM``).
HAS_TORCH, HAS_TENSORFLOW, HAS_PADDLE, HAS_JAX, HAS_TLX : the framework is installed (found by
    ``importlib.util.find_spec``, not imported).

:func:`missing_core_message` turns the ``ModuleNotFoundError`` of a missing core dependency (a
Python without the project's environment) into a message that says which environment to use;
the ``python -m gglspeedup ...`` entry points print it instead of a traceback.
"""

from __future__ import annotations

import functools
import importlib.util
import os

__all__ = ["probe", "cuda_sim_enabled", "CORE_DEPENDENCIES", "missing_core_message", "run_command"]

# Import name -> pip name of every install_requires entry (setup.cfg).
CORE_DEPENDENCIES = {
    "numpy": "numpy",
    "scipy": "scipy",
    "numba": "numba",
    "tqdm": "tqdm",
    "xxhash": "xxhash",
}


def missing_core_message(error: BaseException) -> str | None:
    """What to tell a user whose Python lacks a core dependency: ``error`` is the
    ``ModuleNotFoundError`` of one of :data:`CORE_DEPENDENCIES`; ``None`` for anything else (an
    optional framework, a bug), which the caller re-raises."""
    import sys

    name = (getattr(error, "name", None) or "").partition(".")[0]
    if not isinstance(error, ModuleNotFoundError) or name not in CORE_DEPENDENCIES:
        return None
    return (
        f"gglspeedup needs {CORE_DEPENDENCIES[name]} (a core dependency), which this Python "
        f"({sys.executable}) cannot import: it is not the project's environment. Use the environment "
        "scripts/demo.sh and scripts/test.sh create: `source .venv/bin/activate` (then `python -m gglspeedup ...`), "
        "or run `.venv/bin/python -m gglspeedup ...`; or install gglspeedup into this Python: "
        "`pip install -c constraints.txt -e .` (add `.[torch,demo]` for the demos)"
    )


def run_command(command: str, function, *args) -> int:
    """``function(*args)`` for a command-line entry point (``command`` is how it was called, e.g.
    ``"python -m gglspeedup warmup"``): a missing core dependency prints
    :func:`missing_core_message` to stderr and returns exit status 1 instead of a traceback."""
    import sys

    try:
        return function(*args)
    except ModuleNotFoundError as error:
        message = missing_core_message(error)
        if message is None:
            raise
        print(f"{command}: {message}", file=sys.stderr)
        return 1


_FRAMEWORK_MODULES = {
    "HAS_TORCH": "torch",
    "HAS_TENSORFLOW": "tensorflow",
    "HAS_PADDLE": "paddle",
    "HAS_JAX": "jax",
    "HAS_TLX": "tensorlayerx",
    "HAS_TORCH_GEOMETRIC": "torch_geometric",
    "HAS_DGL": "dgl",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def cuda_sim_enabled() -> bool:
    """Whether numba's CUDA simulator is on (read from the environment, as numba reads it)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


@functools.cache
def _has_cupy() -> bool:
    return _installed("cupy")


@functools.cache
def _has_cupy_gpu() -> bool:
    if cuda_sim_enabled() or not _has_cupy():
        return False
    try:
        import cupy

        return bool(cupy.cuda.is_available())
    except Exception:  # a broken CUDA runtime counts as "no GPU"
        return False


@functools.cache
def _has_numba_cuda() -> bool:
    if cuda_sim_enabled():
        return False
    try:
        from numba import cuda

        return bool(cuda.is_available())
    except Exception:
        return False


_PROBES = {
    "HAS_CUPY": _has_cupy,
    "HAS_CUPY_GPU": _has_cupy_gpu,
    "CUDA_SIM": cuda_sim_enabled,
    "HAS_NUMBA_CUDA": _has_numba_cuda,
    "HAS_CUDA": lambda: cuda_sim_enabled() or _has_numba_cuda(),
}
for _flag, _module in _FRAMEWORK_MODULES.items():
    _PROBES[_flag] = functools.cache(functools.partial(_installed, _module))


def probe() -> dict[str, bool]:
    """All capability flags as a dict (probes what has not been probed yet)."""
    return {name: bool(fn()) for name, fn in _PROBES.items()}


def __getattr__(name: str) -> bool:
    try:
        return bool(_PROBES[name]())
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
