"""Exercises of notebooks/01_tensor_hooks.ipynb: change a gradient, keep one, reverse one (on unseen graphs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from course_utils.machinery.exercise_kit import *


@exercise("01.1")
def _clamp_test(hook: Callable[[torch.Tensor], Any]) -> Verdict:
    draw = generator(1)
    # 1. called on its own: the argument must be left as it was (a hook should not modify its argument)
    probe = torch.randn(3, 5, generator=draw) * 3
    original = probe.clone()
    hook(probe)
    require(torch.equal(probe, original), N_("Your hook changed `grad` in place. That is unsupported (section 5): "
                                             "return a new tensor instead."))
    # 2. on a batch graph whose intermediate gradient has entries inside and outside [-1, 1]
    x, upstream = randn(draw, 3, 5).requires_grad_(), randn(draw, 3, 5) * 3
    upstream[0, :4] = torch.tensor([-1.0, 1.0, 0.25, -0.5])  # on and inside the bounds: must pass unchanged
    z = x * 1.5
    z.register_hook(hook)  # z dies with this function: nothing to remove
    (z * upstream).sum().backward()
    expected = 1.5 * upstream.clamp(-1.0, 1.0)  # by hand: dz = upstream, clamped, times dz/dx = 1.5
    require(not torch.allclose(x.grad, 1.5 * upstream), N_("The gradient reached x unchanged: does your hook return "
                                                           "the clamped tensor (not only compute it)?"))
    if torch.allclose(x.grad, expected):
        return Verdict(True)
    inside = upstream.abs() <= 1.0
    require(torch.allclose(x.grad[inside], expected[inside]),
            N_("Values already inside [-1, 1] must pass unchanged; yours were altered."))
    fail(N_("Values outside [-1, 1] must become -1 (below) or 1 (above), keeping their sign."))


@exercise("01.2")
def _watch_test(watch: Callable[[torch.Tensor, dict, str], Any]) -> Verdict:
    draw = generator(2)
    x, a, b = (torch.randn(4, 3, generator=draw, requires_grad=i == 0) for i in range(3))

    def forward(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(x)  # the intermediate, used twice: its gradient is the sum of two paths
        return h, (h * a).sum() + (h ** 2 * b).sum()

    h0, loss0 = forward(x)  # ground truth without hooks: plain autograd on a twin graph
    dh_true, dx_true = torch.autograd.grad(loss0, (h0, x))
    store: dict = {}
    h, loss = forward(x)
    handle = watch(h, store, "tanh")
    with removing(handle):
        require_handle(handle, N_("watch_grad returned {type}: return the handle register_hook gave you."))
        require(count_hooks(h) == 1, N_("Expected one hook on the tensor, found {count}."), count=count_hooks(h))
        require(not store, N_("store was filled before backward(): save the gradient inside the hook."))
        loss.backward(retain_graph=True)
        kept = store.get("tanh")
        require(kept is not None or not store, N_("Nothing under the name you were given ('tanh'); store has "
                                                  "{keys}."), keys=sorted(store))
        require(kept is not None, N_("store is empty (or holds None) after backward: the hook must put the gradient "
                                     "it receives into store[name]."))
        require(torch.allclose(x.grad, dx_true), N_("The gradient that reached x changed: a hook that only keeps must "
                                                    "return None."))
        require(isinstance(kept, torch.Tensor) and kept.shape == dh_true.shape,
                N_("store[name] should be the whole gradient (shape {expected}), got {type} {shape}."),
                expected=tuple(dh_true.shape), type=type(kept).__name__, shape=tuple(getattr(kept, "shape", ())))
        require(torch.allclose(kept, dh_true), N_("store[name] is not the gradient that reached the tensor."))
        # a second backward, from another loss on the same graph: the store holds its gradient, x.grad is untouched
        c = torch.randn(4, 3, generator=draw)
        x.grad = None
        (h * c).sum().backward(retain_graph=True)
        require(torch.allclose(x.grad, (1 - h.detach() ** 2) * c, atol=1e-6),  # d tanh = 1 - tanh², by hand
                N_("On a second backward (another loss) the gradient that reached x changed: your hook returned a "
                   "tensor, which replaces the gradient -- a lambda returns the value of its expression. A hook that "
                   "only keeps returns None."))
        require(isinstance(store.get("tanh"), torch.Tensor) and torch.allclose(store["tanh"], c),
                N_("After a second backward (another loss) store[name] does not hold that backward's gradient: keep "
                   "the gradient of every backward, the latest replacing the earlier."))
    require_no_hooks(h, N_("handle.remove() left a hook on the tensor: return the handle of the hook you registered."))
    store.clear()
    x.grad = None
    loss.backward()
    require(not store, N_("After handle.remove() the hook still stored a gradient."))
    return Verdict(True)


@exercise("01.3")
def _reversal_test(reverse: Callable[[torch.Tensor, float], Any]) -> Verdict:
    draw = generator(3)
    # x used directly and through the reversal; in the last case through `y + x`, whose backward hands the very same
    # gradient tensor to both paths: a hook that changes it in place would flip the direct path's gradient too
    for lam, intermediate, shared in ((0.5, False, False), (2.0, True, False), (1.5, True, True)):
        leaf, a, b = randn(draw, 5, 3).requires_grad_(), randn(draw, 5, 3), randn(draw, 5, 3)
        x = leaf * 1.0 if intermediate else leaf
        y = reverse(x, lam)
        require(isinstance(y, torch.Tensor), N_("reverse_grad returned {type}: return a tensor."),
                type=type(y).__name__)
        require(y is not x, N_("reverse_grad returned x itself: return a new tensor (with the same values), so the "
                               "hook acts only on the gradient that flows through it."))
        require(y.shape == x.shape and torch.equal(y.detach(), x.detach()),
                N_("The values changed: in the forward pass the result must equal x."))
        require(y.requires_grad, N_("The result does not require grad (detached?): no gradient can flow back through "
                                    "it."))
        require_no_hooks(x, N_("You put the hook on x itself: it would also flip the gradient of every other use of x. "
                               "Hook the new tensor."))
        if shared:  # x is used twice, through one sum: ((x + y) * b), the same gradient b for both uses
            a = b
            ((x + y) * b).sum().backward()
        else:  # x is used twice: directly (weights a) and through the reversal (weights b)
            ((x * a).sum() + (y * b).sum()).backward()
        expected = a - lam * b  # by hand
        require(not torch.allclose(leaf.grad, a + lam * b), N_("The gradient through your tensor is multiplied by "
                                                               "lam: reverse its sign (-lam)."))
        require(not torch.allclose(leaf.grad, a + b), N_("The gradient through your tensor arrives unchanged: register "
                                                         "a hook that returns the new gradient."))
        require(not shared or torch.allclose(leaf.grad, expected, atol=1e-6),
                N_("In `(x + y) * b` the sum hands the very same gradient tensor to x and to your tensor, and the "
                   "gradient that reached x directly changed too: does your hook change `grad` in place? Compute a "
                   "new tensor and return it."))
        require(not torch.allclose(leaf.grad, -lam * (a + b)),
                N_("Every gradient reaching x was flipped, also the one that does not pass through your tensor: hook "
                   "the new tensor, not x."))
        require(torch.allclose(leaf.grad, expected, atol=1e-6),
                N_("With lam = {lam}, the gradient through your tensor should be -lam times what arrives; x.grad does "
                   "not match that."), lam=lam)
    return Verdict(True)


EXERCISES = (_clamp_test, _watch_test, _reversal_test)
