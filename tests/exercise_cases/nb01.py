"""Answers for the checks of notebooks/01_tensor_hooks.ipynb."""

from __future__ import annotations

import torch

from tests.exercise_cases import Cases


def clamp_with_where(grad):  # noqa: ANN001, ANN201
    return torch.where(grad > 1, torch.ones_like(grad), torch.where(grad < -1, -torch.ones_like(grad), grad))


def clamp_in_place(grad):  # noqa: ANN001, ANN201 -- the unsupported in-place change
    grad.clamp_(-1, 1)


def clamp_forgets_return(grad):  # noqa: ANN001, ANN201
    grad.clamp(-1, 1)


def clamp_to_unit_positive(grad):  # noqa: ANN001, ANN201 -- clips the negative side to 0
    return grad.clamp(0, 1)


def normalised(grad):  # noqa: ANN001, ANN201 -- rescales instead of clamping: also changes small values
    return grad / grad.abs().max()


def watch_with_closure_dict(tensor, store, name):  # noqa: ANN001, ANN201
    def keep(grad):  # noqa: ANN001, ANN202
        store.update({name: grad.detach().clone()})

    return tensor.register_hook(keep)


def watch_with_retain_grad(tensor, store, name):  # noqa: ANN001, ANN201 -- .grad is still empty when read
    tensor.retain_grad()
    handle = tensor.register_hook(lambda grad: None)
    store[name] = tensor.grad
    return handle


def watch_returning_something(tensor, store, name):  # noqa: ANN001, ANN201 -- returns a changed gradient
    def keep(grad):  # noqa: ANN001, ANN202
        store[name] = grad
        return grad * 0.5

    return tensor.register_hook(keep)


def watch_norm_only(tensor, store, name):  # noqa: ANN001, ANN201
    return tensor.register_hook(lambda grad: store.__setitem__(name, grad.norm()))


def watch_fixed_key(tensor, store, name):  # noqa: ANN001, ANN201
    return tensor.register_hook(lambda grad: store.__setitem__("grad", grad))


def watch_no_handle(tensor, store, name):  # noqa: ANN001, ANN201
    tensor.register_hook(lambda grad: store.__setitem__(name, grad))


def reverse_with_view(x, lam):  # noqa: ANN001, ANN201
    y = x.view_as(x)
    y.register_hook(lambda grad: grad.neg().mul(lam))
    return y


def reverse_with_function(x, lam):  # noqa: ANN001, ANN201 -- the classic autograd.Function, no hook at all
    class Reverse(torch.autograd.Function):
        @staticmethod
        def forward(ctx, t):  # noqa: ANN001, ANN205
            return t.view_as(t)

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            return -lam * grad

    return Reverse.apply(x)


def reverse_on_x(x, lam):  # noqa: ANN001, ANN201 -- hooks x itself
    x.register_hook(lambda grad: -lam * grad)
    return x * 1.0


def reverse_wrong_sign(x, lam):  # noqa: ANN001, ANN201
    y = x.clone()
    y.register_hook(lambda grad: lam * grad)
    return y


def reverse_detached(x, lam):  # noqa: ANN001, ANN201
    return x.detach()


def reverse_returns_x(x, lam):  # noqa: ANN001, ANN201
    return x


def reverse_no_hook(x, lam):  # noqa: ANN001, ANN201
    return x.clone()



def reverse_in_place(x, lam):  # noqa: ANN001, ANN201 -- flips the gradient it is handed, returns None
    y = x.view_as(x)

    def flip(grad):  # noqa: ANN001, ANN202
        grad.mul_(-lam)

    y.register_hook(flip)
    return y


def clamp_in_place_and_returned(grad):  # noqa: ANN001, ANN201 -- returns the tensor it changed in place
    return grad.clamp_(-1, 1)


def watch_with_setdefault(tensor, store, name):  # noqa: ANN001, ANN201 -- returns the first gradient ever stored
    return tensor.register_hook(lambda grad: store.setdefault(name, grad))


CASES = {
    "01.1": Cases(
        right=[clamp_with_where, lambda grad: torch.clip(grad, min=-1, max=1)],
        wrong=[
            (clamp_in_place, "in place"),
            (clamp_in_place_and_returned, "in place"),
            (clamp_forgets_return, "return"),
            (clamp_to_unit_positive, "-1"),
            (normalised, "inside [-1, 1] must pass unchanged"),
        ],
    ),
    "01.2": Cases(
        right=[watch_with_closure_dict],
        wrong=[
            (watch_with_retain_grad, "inside the hook"),
            (watch_returning_something, "must return None"),
            (watch_norm_only, "whole gradient"),
            (watch_fixed_key, "name you were given"),
            (watch_no_handle, "return the handle"),
            (watch_with_setdefault, "On a second backward"),
        ],
    ),
    "01.3": Cases(
        right=[reverse_with_view, reverse_with_function],
        wrong=[
            (reverse_on_x, "hook on x itself"),
            (reverse_wrong_sign, "reverse its sign"),
            (reverse_detached, "detached"),
            (reverse_returns_x, "x itself"),
            (reverse_no_hook, "arrives unchanged"),
            (reverse_in_place, "in place"),
        ],
    ),
}
