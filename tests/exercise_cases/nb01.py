"""Answers for the checks of notebooks/01_tensor_hooks.ipynb."""

from __future__ import annotations

import torch

from tests.exercise_cases import Cases, answer, mutants

CLAMP = "def clamp_hook(grad):\n    return grad.clamp(-1, 1)\n"
WATCH = """
def watch_grad(tensor, store, name):
    def keep(grad):
        store[name] = grad

    return tensor.register_hook(keep)
"""
REVERSE = """
def reverse_grad(x, lam):
    y = x.view_as(x)
    y.register_hook(lambda grad: -lam * grad)
    return y
"""

CASES = {
    "01.1": Cases(
        right=[answer("""
                   def clamp_hook(grad):
                       return torch.where(grad > 1, torch.ones_like(grad), torch.where(grad < -1, -torch.ones_like(grad), grad))
                   """),
               lambda grad: torch.clip(grad, min=-1, max=1)],
        wrong=mutants(
            CLAMP,
            ("return grad.clamp(-1, 1)", "grad.clamp_(-1, 1)", "in place"),  # the unsupported in-place change
            ("grad.clamp(", "grad.clamp_(", "in place"),  # ... and returned
            ("return grad", "grad", "return"),
            ("(-1, 1)", "(0, 1)", "-1"),
            ("grad.clamp(-1, 1)", "grad / grad.abs().max()", "inside [-1, 1] must pass unchanged"),  # rescales
        ),
    ),
    "01.2": Cases(
        right=[answer("""
                   def watch_grad(tensor, store, name):
                       def keep(grad):
                           store.update({name: grad.detach().clone()})

                       return tensor.register_hook(keep)
                   """)],
        wrong=mutants(
            WATCH,
            ("    def keep(grad):\n        store[name] = grad\n\n    return tensor.register_hook(keep)",
             "    tensor.retain_grad()\n    handle = tensor.register_hook(lambda grad: None)\n    store[name] = tensor.grad\n"
             "    return handle", "inside the hook"),  # .grad is still empty when read
            ("store[name] = grad", "store[name] = grad\n        return grad * 0.5", "must return None"),
            ("store[name] = grad", "store[name] = grad.norm()", "whole gradient"),
            ("store[name]", "store['grad']", "name you were given"),
            ("    return tensor", "    tensor", "returned None: return the handle"),
            ("store[name] = grad", "return store.setdefault(name, grad)", "On a second backward"),
        ),
    ),
    "01.3": Cases(
        right=[answer(REVERSE),
               answer("""
                   def reverse_grad(x, lam):  # the classic autograd.Function, no hook at all
                       class Reverse(torch.autograd.Function):
                           @staticmethod
                           def forward(ctx, t):
                               return t.view_as(t)

                           @staticmethod
                           def backward(ctx, grad):
                               return -lam * grad

                       return Reverse.apply(x)
                   """)],
        wrong=mutants(
            REVERSE,
            ("    y = x.view_as(x)\n    y.register_hook", "    y = x * 1.0\n    x.register_hook", "hook on x itself"),
            ("-lam * grad", "lam * grad", "reverse its sign"),
            ("    y = x.view_as(x)\n    y.register_hook(lambda grad: -lam * grad)\n    return y", "    return x.detach()",
             "detached"),
            ("    y = x.view_as(x)", "    y = x", "x itself"),
            ("    y.register_hook(lambda grad: -lam * grad)\n", "", "arrives unchanged"),
            ("    y.register_hook(lambda grad: -lam * grad)",  # flips the gradient it is handed, returns None
             "    def flip(grad):\n        grad.mul_(-lam)\n\n    y.register_hook(flip)", "in place"),
        ),
    ),
}
