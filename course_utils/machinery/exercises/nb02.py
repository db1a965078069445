"""Exercises of notebooks/02_hook_lifecycle.ipynb: no hook left when forward raises, leaf hooks, a one-shot hook."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from course_utils.machinery.exercise_kit import *


@exercise("02.1")
def _leak_test(measure: Callable[[torch.Tensor, torch.Tensor], Any]) -> Verdict:
    draw = generator(4)
    # shapes the learner has not seen: a batch of x broadcast against w
    w, x = randn(draw, 3).requires_grad_(), randn(draw, 5, 3)
    expected = 2 * (w.detach() * x).sum() * x.sum(dim=0)  # d/dw of (sum w*x)^2, by hand
    for stale, wrong in ((False, N_("measure(w, x) should still return the gradient that reached w.")),
                         (True, N_("When w already holds a gradient from an earlier backward, measure(w, x) returned "
                                   "something else than the gradient of this call: w.grad accumulates over backward "
                                   "passes, so it is not what reached w this time."))):
        if stale:  # a w that already holds a gradient from an earlier backward: the answer is still this call's
            w.grad = torch.full_like(w, 10.0)
        result = measure(w, x)
        require_no_hooks(w, N_("{count} hook(s) still registered on w after measure() returned: remove the hook before "
                               "returning."))
        require(stale or not isinstance(result, torch.Tensor) or (result.is_floating_point()
                                                                   and result.shape == expected.shape),
                N_("measure(w, x) should still return the gradient that reached w (a float tensor of shape "
                   "{expected}); it returned a {dtype} tensor of shape {shape}."), expected=tuple(expected.shape),
                dtype=getattr(result, "dtype", None), shape=tuple(getattr(result, "shape", ())))
        require(isinstance(result, torch.Tensor) and torch.allclose(plain(result).detach().float(), expected), wrong)
    w2 = torch.randn(2, generator=draw, requires_grad=True)
    the_error_gets_out(lambda: measure(w2, torch.ones(3)), N_("With mismatched shapes measure() must let the "
                                                              "RuntimeError propagate, not hide it."), RuntimeError)
    require_no_hooks(w2, N_("When the forward raises, the hook stays on w: remove it in a `finally` block, or use the "
                            "handle as a context manager."))
    return Verdict(True)


def _live_leaf_run() -> list[float]:
    d, seen = torch.tensor(1.0, requires_grad=True), []

    def add_one(leaf: torch.Tensor) -> None:
        leaf.grad.add_(1)  # in place; a post-accumulate hook returns None

    with d.register_hook(lambda grad: grad * 2), d.register_post_accumulate_grad_hook(add_one):
        for _repeat in range(2):
            (5 * d).backward()
            seen.append(d.grad.item())
    return seen


@exercise("02.2")
def _predict_leaf(answer: Any) -> Verdict:
    value = as_float_tensor(answer, form=N_("Answer with a list of two numbers, [d.grad after the first backward, "
                                            "after the second]; got {answer}, not a list of numbers."))
    truth = torch.tensor(_live_leaf_run())
    require(value.numel() == 2, N_("Answer with two numbers, [after the first backward, after the second]; got "
                                   "{count}."), count=value.numel())
    value = value.reshape(2)
    if torch.allclose(value, truth):
        return Verdict(True)
    require(torch.isclose(value[0], truth[0]), N_("The first number is off: follow the contribution 5 through the "
                                                  "tensor hook, into .grad, then the post-accumulate hook."))
    fail(N_("The first number is right, the second is not: does the tensor hook see the whole .grad or only the new "
            "contribution?"))


@exercise("02.3")
def _once_test(on_next_backward: Callable[[torch.Tensor, Callable[[torch.Tensor], Any]], Any]) -> Verdict:
    draw = generator(5)
    x, a = randn(draw, 4, 2).requires_grad_(), randn(draw, 4, 2)
    z = torch.sin(x)
    loss, calls = (z * a).sum(), []

    def fn(grad: torch.Tensor) -> torch.Tensor:
        """Returns a tensor, as many functions do: the hook must not pass it on."""
        calls.append(grad.detach().clone())
        return torch.full_like(grad, 7.0)

    handle = on_next_backward(z, fn)
    with removing(handle):
        require_handle(handle, N_("on_next_backward returned {type}: return the handle, so the caller can cancel the "
                                  "hook before it fires."))
        require(count_hooks(z) == 1, N_("Before any backward, expected one hook on the tensor, found {count}."),
                count=count_hooks(z))
        loss.backward(retain_graph=True)
        require(calls, N_("fn never ran during the first backward: call fn(grad) inside the hook."))
        require(torch.allclose(calls[0], a), N_("fn did not receive the gradient that reached the tensor."))
        require(torch.allclose(x.grad, torch.cos(x.detach()) * a),  # by hand
                N_("The gradient that reached x changed: the hook must return None, whatever fn returns (this fn "
                   "returns a tensor)."))
        left = count_hooks(z)
        loss.backward()
    require(len(calls) <= 1, N_("fn ran {count} times over two backward passes: the hook must remove itself the first "
                                "time it fires."), count=len(calls))
    require(not left, N_("After firing, the hook is still registered: remove it from inside the hook."))
    # the caller can cancel it before it ever fires
    x.grad, z = None, torch.sin(x)
    calls.clear()
    on_next_backward(z, lambda grad: calls.append(grad)).remove()
    (z * a).sum().backward()
    require(not calls and not count_hooks(z), N_("After the caller removed the returned handle, the hook still ran (or "
                                                 "stayed): return the handle of the hook you registered."))
    # and it works on a leaf, too
    leaf = torch.randn(3, generator=draw, requires_grad=True)
    calls.clear()
    on_next_backward(leaf, lambda grad: calls.append(grad))
    for _repeat in range(2):
        (leaf * 3).sum().backward()
    require(len(calls) == 1 and not count_hooks(leaf),
            N_("On a leaf tensor your hook did not fire exactly once and disappear."))
    # another hook on the tensor, registered by other code before yours: it stays, and keeps firing
    z, others = torch.sin(x), []
    calls.clear()
    with z.register_hook(lambda grad: others.append(1)):
        on_next_backward(z, lambda grad: calls.append(grad))
        for _repeat in range(2):
            (z * a).sum().backward(retain_graph=True)
        kept = count_hooks(z)
    require(len(others) == 2 and kept == 1, N_("The tensor also carried another hook, registered by other code: after "
                                               "yours fired it was gone too (or stopped firing). Remove only your own "
                                               "hook, through its handle."))
    return Verdict(True)


EXERCISES = (_leak_test, _predict_leaf, _once_test)
