"""What the GPU checks and measurements share: the device they run on and how they wait for it."""

from __future__ import annotations

__all__ = ["_device", "_sync"]


def _device():
    """``cuda:0``, checked: a real GPU, or the simulator under ``NUMBA_ENABLE_CUDASIM=1``."""
    import gglspeedup as gg

    return gg.device.as_device("cuda:0").check_available()


def _sync(device) -> None:
    """Wait for the work queued on the current stream (nothing to wait for on the simulator)."""
    if not device.simulated:
        device.xp.cuda.get_current_stream().synchronize()
