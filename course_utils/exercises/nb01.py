"""Exercises of notebooks/01_tensor_hooks.ipynb: reading and changing gradients with tensor hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_tensor

_EXERCISE_01_1 = Exercise(
    "01.1",
    "On the T1a graph, hooks on z multiply by 3 and then add 1. Predict x.grad.",
    expect_tensor(
        [4.0, 7.0, 10.0, 13.0],
        "The first hook's result is the second hook's input, and x receives whatever the last hook returns.",
    ),
    praise="Hooks chain in registration order: (3·g) + 1 with g = w.",
    kind="predict",
)


def _run_on_graph(hook: Callable[[torch.Tensor], Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """Intermediate z with a known gradient [-3, -0.5, 0.5, 3]; returns (x.grad, the gradient z received)."""
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    z = x * 1.0
    weights = torch.tensor([-3.0, -0.5, 0.5, 3.0])
    with z.register_hook(hook):
        (z * weights).sum().backward()
    return x.grad, weights


def _clamp_test(hook: Callable[[torch.Tensor], Any]) -> Verdict:
    x_grad, weights = _run_on_graph(hook)
    if torch.equal(x_grad, weights):
        return Verdict(False, "The gradient reached x unchanged: does your hook *return* the clamped tensor?")
    if not torch.allclose(x_grad, weights.clamp(-1, 1)):
        return Verdict(False, f"x received {x_grad.tolist()}; values inside [-1, 1] must pass unchanged.")
    return Verdict(True)


_EXERCISE_01_2 = Exercise(
    "01.2",
    "Write a tensor hook that clamps the gradient to [-1, 1].",
    expect_callable(_clamp_test, "a hook function hook(grad)"),
    praise="Returning a new tensor is the supported way to change a gradient.",
    kind="write",
)


def _norm_recorder_test(make_hook: Callable[[list[float]], Callable[[torch.Tensor], Any]]) -> Verdict:
    norms: list[float] = []
    hook = make_hook(norms)
    if not callable(hook):
        return Verdict(False, "make_hook(norms) must return the hook function itself.")
    x_grad, weights = _run_on_graph(hook)
    if not torch.equal(x_grad, weights):
        return Verdict(False, "The gradient changed: a hook that only looks must return None.")
    if len(norms) != 1:
        return Verdict(False, f"After one backward the list should hold 1 norm, it holds {len(norms)}.")
    expected = float(weights.norm())
    value = norms[0]
    if isinstance(value, torch.Tensor):
        if value.requires_grad:
            return Verdict(False, "Store a plain number (e.g. grad.norm().item()), not a tensor attached to a graph.")
        value = float(value)
    if not isinstance(value, float) or abs(value - expected) > 1e-4:
        return Verdict(False, f"Expected the L2 norm of the gradient, got {norms[0]!r}.")
    return Verdict(True)


_EXERCISE_01_3 = Exercise(
    "01.3",
    "Write make_hook(norms) returning a hook that appends the gradient's L2 norm to norms and changes nothing.",
    expect_callable(_norm_recorder_test, "a function make_hook(norms)"),
    praise="A few bytes per step instead of a whole retained gradient.",
    kind="write",
)

EXERCISES = (_EXERCISE_01_1, _EXERCISE_01_2, _EXERCISE_01_3,)
