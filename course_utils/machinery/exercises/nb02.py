"""Exercises of notebooks/02_hook_lifecycle.ipynb: a hook removed even when the forward raises, a prediction about
leaf hooks and accumulation (run live), and a hook that removes itself after firing once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from course_utils.machinery.exercise_kit import Exercise, Verdict, _as_float_tensor, expect_callable, plain
from course_utils.machinery.messages import N_, _
from course_utils.hooks import count_hooks


# -- 02.1 measure without a leak -------------------------------------------------------------------------
def _leak_test(measure: Callable[[torch.Tensor, torch.Tensor], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(4)
    # shapes the learner has not seen: a batch of x broadcast against w
    w = torch.randn(3, generator=generator, requires_grad=True)
    x = torch.randn(5, 3, generator=generator)
    result = measure(w, x)
    if count_hooks(w):
        return Verdict(False, _("{count} hook(s) still registered on w after measure() returned: remove "
                                "the hook before returning.").format(count=count_hooks(w)))
    expected = 2 * (w.detach() * x).sum() * x.sum(dim=0)  # d/dw of (sum w*x)^2, by hand
    if isinstance(result, torch.Tensor) and not (result.is_floating_point() and result.shape == expected.shape):
        return Verdict(False, _("measure(w, x) should still return the gradient that reached w (a float tensor of "
                                "shape {expected}); it returned a {dtype} tensor of shape {shape}.").format(
            expected=tuple(expected.shape), dtype=result.dtype, shape=tuple(result.shape)))
    if not isinstance(result, torch.Tensor) or not torch.allclose(plain(result).detach().float(), expected):
        return Verdict(False, _("measure(w, x) should still return the gradient that reached w."))
    # a w that already holds a gradient from an earlier backward: the answer is still this call's gradient
    w.grad = torch.full_like(w, 10.0)
    result = measure(w, x)
    if count_hooks(w):
        return Verdict(False, _("{count} hook(s) still registered on w after measure() returned: remove "
                                "the hook before returning.").format(count=count_hooks(w)))
    if not isinstance(result, torch.Tensor) or not torch.allclose(plain(result).detach().float(), expected):
        return Verdict(False, _("When w already holds a gradient from an earlier backward, measure(w, x) returned "
                                "something else than the gradient of this call: w.grad accumulates over backward "
                                "passes, so it is not what reached w this time."))
    w2 = torch.randn(2, generator=generator, requires_grad=True)
    try:
        measure(w2, torch.ones(3))  # shapes do not match: the forward raises
    except RuntimeError:
        pass
    else:
        return Verdict(False, _("With mismatched shapes measure() must let the RuntimeError propagate, not hide "
                                "it."))
    if count_hooks(w2):
        return Verdict(False, _("When the forward raises, the hook stays on w: remove it in a `finally` block, "
                                "or use the handle as a context manager."))
    return Verdict(True)


_EXERCISE_02_1 = Exercise(
    "02.1",
    N_("Rewrite measure(w, x) so that no hook is left on w, also when the forward raises; errors still propagate."),
    expect_callable(_leak_test, N_("a function measure(w, x)")),
    hints=(
        N_("register_hook returns a handle; the hook is gone only once something calls remove() on it."),
        N_("Code after a line that raises never runs, unless it sits in a `finally` block -- or the handle is used "
           "in a `with` statement, which removes it on the way out either way."),
    ),
    kind="write",
    praise=N_("Handles used as context managers (or removed in finally) never leak, whatever the forward does."),
)


# -- 02.2 predict: a leaf hook and a post-accumulate hook over two backward passes ------------------------
def _live_leaf_run() -> list[float]:
    """The exercise's case, run live with plain PyTorch calls."""
    d = torch.tensor(1.0, requires_grad=True)
    seen = []

    def add_one(leaf: torch.Tensor) -> None:
        leaf.grad.add_(1)  # in place; a post-accumulate hook returns None

    with d.register_hook(lambda grad: grad * 2), d.register_post_accumulate_grad_hook(add_one):
        for _repeat in range(2):
            (5 * d).backward()
            seen.append(d.grad.item())
    return seen


def _predict_leaf(answer: Any) -> Verdict:
    value = _as_float_tensor(answer)
    if isinstance(value, Verdict):
        return value
    truth = torch.tensor(_live_leaf_run())
    if value.numel() != 2:
        return Verdict(False, _("Answer with two numbers, [after the first backward, after the second]; got "
                                "{count}.").format(count=value.numel()))
    value = value.reshape(2)
    if torch.allclose(value, truth):
        return Verdict(True)
    if not torch.isclose(value[0], truth[0]):
        return Verdict(False, _("The first number is off: follow the contribution 5 through the tensor hook, into "
                                ".grad, then the post-accumulate hook."))
    return Verdict(False, _("The first number is right, the second is not: does the tensor hook see the whole .grad "
                            "or only the new contribution?"))


_EXERCISE_02_2 = Exercise(
    "02.2",
    N_("Predict d.grad after each of two backward passes, with a tensor hook (x2) and a post-accumulate hook (+1) "
       "on the leaf d (checked against a live run)."),
    _predict_leaf,
    hints=(
        N_("Section 3: a leaf's tensor hook and its post-accumulate hook run at different moments of each "
           "backward."),
        N_("Each backward: the new contribution goes through the tensor hook, is added to .grad, and then the "
           "post-accumulate hook changes .grad."),
    ),
    kind="predict",
    praise=N_("The tensor hook sees each contribution; the post-accumulate hook sees (and may change) the running "
              ".grad."),
)


# -- 02.3 (stretch) a hook that removes itself ------------------------------------------------------------
def _once_test(on_next_backward: Callable[[torch.Tensor, Callable[[torch.Tensor], Any]], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(4, 2, generator=generator, requires_grad=True)
    a = torch.randn(4, 2, generator=generator)
    z = torch.sin(x)
    loss = (z * a).sum()
    calls: list[torch.Tensor] = []

    def fn(grad: torch.Tensor) -> torch.Tensor:
        """The caller's fn returns something (a tensor, as many functions do): the hook must not pass it on."""
        calls.append(grad.detach().clone())
        return torch.full_like(grad, 7.0)

    handle = on_next_backward(z, fn)
    if not callable(getattr(handle, "remove", None)):
        return Verdict(False, _("on_next_backward returned {type}: return the handle, so the caller "
                                "can cancel the hook before it fires.").format(type=type(handle).__name__))
    if count_hooks(z) != 1:
        n = count_hooks(z)
        handle.remove()
        return Verdict(False, _("Before any backward, expected one hook on the tensor, found {count}.").format(
            count=n))
    loss.backward(retain_graph=True)
    expected_x = torch.cos(x.detach()) * a  # by hand
    if not calls:
        handle.remove()
        return Verdict(False, _("fn never ran during the first backward: call fn(grad) inside the hook."))
    if not torch.allclose(calls[0], a):
        handle.remove()
        return Verdict(False, _("fn did not receive the gradient that reached the tensor."))
    if not torch.allclose(x.grad, expected_x):
        handle.remove()
        return Verdict(False, _("The gradient that reached x changed: the hook must return None, whatever fn "
                                "returns (this fn returns a tensor)."))
    left = count_hooks(z)
    loss.backward()
    handle.remove()
    if len(calls) > 1:
        return Verdict(False, _("fn ran {count} times over two backward passes: the hook must remove itself "
                                "the first time it fires.").format(count=len(calls)))
    if left:
        return Verdict(False, _("After firing, the hook is still registered: remove it from inside the hook."))
    # the caller can cancel it before it ever fires
    x.grad = None
    z = torch.sin(x)
    calls.clear()
    cancel = on_next_backward(z, lambda grad: calls.append(grad))
    cancel.remove()
    (z * a).sum().backward()
    if calls or count_hooks(z):
        return Verdict(False, _("After the caller removed the returned handle, the hook still ran (or stayed): "
                                "return the handle of the hook you registered."))
    # and it works on a leaf, too
    leaf = torch.randn(3, generator=generator, requires_grad=True)
    calls.clear()
    on_next_backward(leaf, lambda grad: calls.append(grad))
    for _repeat in range(2):
        (leaf * 3).sum().backward()
    if len(calls) != 1 or count_hooks(leaf):
        return Verdict(False, _("On a leaf tensor your hook did not fire exactly once and disappear."))
    # another hook on the tensor, registered by other code before yours: it stays, and keeps firing
    z = torch.sin(x)
    others: list[int] = []
    other = z.register_hook(lambda grad: others.append(1))
    calls.clear()
    on_next_backward(z, lambda grad: calls.append(grad))
    for _repeat in range(2):
        (z * a).sum().backward(retain_graph=True)
    kept = count_hooks(z)
    other.remove()
    if len(others) != 2 or kept != 1:
        return Verdict(False, _("The tensor also carried another hook, registered by other code: after yours fired "
                                "it was gone too (or stopped firing). Remove only your own hook, through its "
                                "handle."))
    return Verdict(True)


_EXERCISE_02_3 = Exercise(
    "02.3",
    N_("Write on_next_backward(tensor, fn): a hook that calls fn(grad) on the next backward only and then removes "
       "itself; return its handle."),
    expect_callable(_once_test, N_("a function on_next_backward(tensor, fn)")),
    hints=(
        N_("The hook needs its own handle, which exists only after register_hook returned: let the hook look it up "
           "when it runs (a variable of the enclosing function, a list, an attribute ...)."),
        N_("PyTorch allows a hook to call remove() on its own handle while it runs (fixed in PyTorch 1.10, "
           "pytorch/pytorch#58354); then call fn and return None."),
    ),
    kind="write",
    stretch=True,
    praise=N_("A one-shot hook: it cleans up after itself, and the caller can still cancel it before it fires."),
)

EXERCISES = (_EXERCISE_02_1, _EXERCISE_02_2, _EXERCISE_02_3)
