"""splitmix64: the one 64-bit mixing function of the package (Steele, Lea and Flood, 2014).

Every hash in gglspeedup is built from :func:`mix64` and the golden-ratio step :data:`GAMMA`:
the kernels' counter-based RNG (:mod:`gglspeedup._rng`, which registers :func:`mix64` with
Numba so the same body runs compiled on the CPU and on CUDA), per-rank sampler
seeds (:func:`gglspeedup.multigpu.rank_seed`) and hash partitions
(:func:`gglspeedup.distributed.hash_partition`).

:func:`mix64` takes ``np.uint64`` scalars or arrays (elementwise); :func:`splitmix64` takes and
returns Python ints, for host-side state. Every constant is a ``np.uint64``, so compiled code
(Numba's typing rules) and the CUDA simulator (NumPy's promotion rules) compute the same bits.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GAMMA", "MASK", "mix64", "splitmix64", "dropout_key"]

GAMMA = np.uint64(0x9E3779B97F4A7C15)  # the golden-ratio increment of splitmix64's stream
MASK = (1 << 64) - 1
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_M1_INT, _M2_INT = int(_M1), int(_M2)


def mix64(z):
    """splitmix64's finaliser: a bijective avalanche of a uint64 (scalar or array, elementwise).

    NumPy scalars wrap around with an "overflow encountered" warning; arrays wrap silently.
    """
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def splitmix64(value: int) -> int:
    """:func:`mix64` of ``value mod 2**64``, as a Python int (no NumPy warnings).

    >>> hex(splitmix64(0))
    '0x0'
    >>> hex(splitmix64(int(GAMMA)))   # splitmix64's first output for seed 0
    '0xe220a8397b1dcdaf'
    """
    # Python ints, not mix64 on NumPy scalars under np.errstate: the same bits in 0.5 instead of
    # 4-5 us, and a batch's hop states take six of these.
    z = int(value) & MASK
    z = ((z ^ (z >> 30)) * _M1_INT) & MASK
    z = ((z ^ (z >> 27)) * _M2_INT) & MASK
    return z ^ (z >> 31)


def dropout_key(seed: int, stream: int) -> int:
    """The uint64 key of dropout stream ``stream`` (0: attention edges, ``1 + t``: hop ``t``) of an
    attention call whose seed is ``seed`` (:mod:`gglspeedup.attention`; drawn from torch's
    generator, so ``torch.manual_seed`` rules it). Here, beside :func:`splitmix64`, so the kernels'
    wrappers and the references in :mod:`gglspeedup.testing` share one definition."""
    return splitmix64((splitmix64(int(seed)) ^ ((int(stream) + 1) * int(GAMMA))) & MASK)
