"""``first_order_only``: the attention Functions' backward decorator (both rooms).

Their backward passes are kernels, not torch graphs, so a second derivative through them would be
a silent zero. ``torch.autograd.function.once_differentiable`` catches that only when the incoming
gradient itself requires grad; a gradient penalty on ``out.sum()`` (a constant incoming gradient)
got a first derivative with no graph, and its second-order terms were dropped without a word. Here,
whenever the backward runs with ``create_graph=True`` (grad mode on), its outputs get a node that
raises when differentiated again.
"""

from __future__ import annotations

import functools

import torch

__all__ = ["first_order_only"]


class _SecondDerivative(torch.autograd.Function):
    """Identity on the first derivatives; differentiating them raises (named)."""

    @staticmethod
    def forward(ctx, name, *grads):
        ctx.name = name
        return tuple(grad.clone() for grad in grads)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(
            f"{ctx.name} has first derivatives only: its backward is a kernel, not a torch graph, so a "
            "second derivative (create_graph=True, then backward through the gradient) cannot be taken"
        )


def first_order_only(name: str):
    """Decorate a ``torch.autograd.Function.backward``: run it without recording, and with
    ``create_graph=True`` give its tensor outputs a node that raises naming ``name`` when they are
    differentiated (see the module docstring)."""

    def decorate(backward):
        @functools.wraps(backward)
        def wrapper(ctx, *grads):
            with torch.no_grad():
                outputs = backward(ctx, *grads)
            if not torch.is_grad_enabled():  # the usual backward (create_graph=False): nothing to add
                return outputs
            single = not isinstance(outputs, tuple)
            outputs = (outputs,) if single else outputs
            where = [i for i, out in enumerate(outputs) if isinstance(out, torch.Tensor)]
            if not where:
                return outputs[0] if single else outputs
            marked = _SecondDerivative.apply(name, *(outputs[i].detach().requires_grad_() for i in where))
            outputs = list(outputs)
            for i, out in zip(where, marked):
                outputs[i] = out
            return outputs[0] if single else tuple(outputs)

        return wrapper

    return decorate
