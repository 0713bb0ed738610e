"""TensorLayerX and GammaGL, imported on demand with errors that say what to install or fix."""

from __future__ import annotations

import inspect

__all__ = ["require_gammagl", "tensorlayerx_problem", "TLX_FIX_HINT"]

_INSTALL_HINT = (
    "GammaGL pins torch 2.1 and numpy 1.24, so it lives in an environment of its own: "
    "bash scripts/peer_env_gammagl.sh builds one (torch==2.1.2, tensorlayerx==0.5.8, gammagl_pt21==0.5.0.post121)"
)
TLX_FIX_HINT = (
    "fix the two call sites in tensorlayerx (nn/core/core_torch.py: Module._named_members must accept "
    "remove_duplicate; optimizers/torch_optimizers.py: Adam must call torch's adam with maximize=False and "
    "tensor steps), as scripts/peer_env_gammagl.sh does, or install a TensorLayerX that supports torch 2"
)


def require_gammagl(what: str):
    """``(tensorlayerx, gammagl)`` imported, or an ``ImportError`` naming the missing install."""
    try:
        import tensorlayerx
    except ImportError as error:
        raise ImportError(
            f"{what} needs TensorLayerX, which is not installed here ({error}). {_INSTALL_HINT}"
        ) from error
    try:
        import gammagl
        import gammagl.loader.utils
    except ImportError as error:
        raise ImportError(f"{what} needs GammaGL, which does not import here ({error}). {_INSTALL_HINT}") from error
    return tensorlayerx, gammagl


def tensorlayerx_problem() -> str | None:
    """One line naming why TensorLayerX cannot train here, or ``None`` when it can.

    On the torch backend, PyPI's TensorLayerX 0.5.8 breaks on torch 2 at two call sites: every
    ``net.trainable_weights`` (``Module._named_members() got an unexpected keyword argument
    'remove_duplicate'``) and the first Adam step (torch 2's functional ``adam`` needs
    ``maximize`` and singleton-tensor steps). This probes both on a one-weight model, without
    training anything of the caller's. Other backends are not probed (``None``).
    """
    try:
        import tensorlayerx as tlx
    except ImportError as error:
        return f"TensorLayerX does not import ({type(error).__name__}: {error}). {_INSTALL_HINT}"
    if str(getattr(tlx, "BACKEND", "")).lower() != "torch":
        return None
    import torch

    problems = []
    parameters = inspect.signature(tlx.nn.Module._named_members).parameters
    if "remove_duplicate" not in parameters and not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
        problems.append("Module._named_members() does not accept torch 2's remove_duplicate")
    weight = torch.nn.Parameter(torch.ones(2))
    try:
        optimizer = tlx.optimizers.Adam(lr=0.1)
        grads = optimizer.gradient((weight * weight).sum(), [weight])
        optimizer.apply_gradients(zip(grads, [weight]))
    except (TypeError, RuntimeError, AttributeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        problems.append(f"Adam fails on torch {torch.__version__} ({first})")
    if not problems:
        return None
    cause = "; ".join(problems)
    return f"TensorLayerX {tlx.__version__} cannot train on torch {torch.__version__}: {cause}. To run: {TLX_FIX_HINT}"
