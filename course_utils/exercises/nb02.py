"""Exercises of notebooks/02_hook_lifecycle.ipynb: handles, removal and firing order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_choice, expect_live_order
from course_utils.hooks import count_hooks
from course_utils.timeline import HookTimeline

_EXERCISE_02_1 = Exercise(
    "02.1",
    "A hook registered on z never fired. The code ran loss.backward() and then z.register_hook(report). Why?",
    expect_choice(
        "registered after backward",
        ["registered after backward", "the hook returns None", "z is a leaf", "hooks only fire on leaves"],
        "When did backward() walk the graph, and when did the hook arrive?",
    ),
    praise="A hook only sees backward passes that start after it was registered.",
    kind="choice",
)


def _leak_test(measure: Callable[[torch.Tensor, torch.Tensor], Any]) -> Verdict:
    w = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    x = torch.tensor([2.0, 1.0, 0.5])
    result = measure(w, x)
    if count_hooks(w):
        return Verdict(False, f"{count_hooks(w)} hook(s) are still registered on w after measure() returned.")
    expected = 2 * (w.detach() * x).sum() * x
    if not isinstance(result, torch.Tensor) or not torch.allclose(result, expected):
        return Verdict(False, f"measure(w, x) should return the gradient that reached w ({expected.tolist()}).")
    w2 = torch.tensor([1.0, 2.0], requires_grad=True)
    try:
        measure(w2, torch.ones(3))  # shapes do not match: the forward raises
    except RuntimeError:
        pass
    else:
        return Verdict(False, "With mismatched shapes measure() should let the RuntimeError propagate.")
    if count_hooks(w2):
        return Verdict(False, "When the forward raises, the hook stays on w: remove it in a finally block or use `with`.")
    return Verdict(True)


_EXERCISE_02_2 = Exercise(
    "02.2",
    "Fix measure(w, x) so that no hook is left on w, also when the forward raises.",
    expect_callable(_leak_test, "a function measure(w, x)"),
    praise="Handles used as context managers (or removed in finally) never leak.",
    kind="write",
)


def _recorded_order() -> list[str]:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    z = x * 3
    loss = (z * z).sum()
    with HookTimeline() as timeline:
        timeline.watch_leaf(x, "x")
        timeline.watch_node(z, "z")
        timeline.watch_retain_grad(z, "z")
        timeline.watch_tensor(z, "z")
        loss.backward()
    return [event.kind for event in timeline.events]



_EXERCISE_02_3 = Exercise(
    "02.3",
    "Put the five hook kinds in the order they fire during one backward (checked against a live recording).",
    expect_live_order(_recorded_order, "The tensor's own hooks come first; what needs them to be done?"),
    praise="Tensor hooks, then retain_grad, then the node's hooks, and the leaf's post-accumulate hook last.",
    kind="predict",
)

EXERCISES = (_EXERCISE_02_1, _EXERCISE_02_2, _EXERCISE_02_3,)
