"""Exercises of notebooks/00_start_here.ipynb: the learner's first hook, and how the course asserts its numbers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_choice


def _hook_counts(model: nn.Module) -> dict[str, int]:
    """Forward and forward-pre hooks per submodule name (only the non-empty ones)."""
    counts = {}
    for name, module in model.named_modules():
        n = len(module._forward_hooks) + len(module._forward_pre_hooks)
        if n:
            counts[name or "(the model)"] = n
    return counts


def _shape_recorder_test(attach: Callable[[nn.Module, list], Any]) -> Verdict:
    torch.manual_seed(0)
    # a layer the learner has not seen, followed by an in-place layer; batches of several sizes
    model = nn.Sequential(nn.Conv2d(2, 5, 3), nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(5 * 4 * 4, 3))
    layer = model[0]
    batches = [torch.randn(n, 2, 6, 6) for n in (4, 1, 7)]
    with torch.no_grad():  # what the model gives before anything is attached
        before = [model(x).clone() for x in batches]
        before_layer = layer(batches[0]).clone()
    truth = [(n, 5, 4, 4) for n in (4, 1, 7)]  # Conv2d(3x3, no padding): 6x6 -> 4x4, by hand

    shapes: list = []
    handle = attach(layer, shapes)
    try:
        counts = _hook_counts(model)
        if not callable(getattr(handle, "remove", None)):
            return Verdict(False, f"attach_shape_recorder returned {type(handle).__name__}: return the handle that "
                                  "register_forward_hook gave you, so the caller can remove the hook.")
        if not layer._forward_hooks:
            where = f" (found {counts})" if counts else ""
            return Verdict(False, f"No forward hook on the layer you were given{where}: register it with "
                                  "layer.register_forward_hook(...).")
        if counts != {"0": 1}:
            return Verdict(False, f"Expected exactly one forward hook, on the layer you were given; found {counts}.")
        if shapes:
            return Verdict(False, "The list filled before the layer ran: record inside the hook, not when attaching.")
        with torch.no_grad():
            after = [model(x) for x in batches]
        if not all(torch.equal(a, b) for a, b in zip(after, before)):
            return Verdict(False, "The model's output changed: a hook that only records must return None.")
        if any(isinstance(s, torch.Tensor) and s.dim() > 1 for s in shapes):
            return Verdict(False, "The list holds tensors: append the output's shape (a tuple such as (2, 4)), "
                                  "not the output itself.")
        if len(shapes) != len(batches):
            return Verdict(False, f"After {len(batches)} forward passes the list holds {len(shapes)} entries: append "
                                  "one shape per forward (don't replace the list or keep only the first).")
        recorded = [tuple(s) if isinstance(s, (tuple, list, torch.Size)) else s for s in shapes]
        inputs = [tuple(x.shape) for x in batches]
        if recorded == inputs:
            return Verdict(False, "You recorded the shapes of the layer's input: record its output.")
        if recorded != truth:
            return Verdict(False, f"Recorded {shapes}; expected the output shapes {truth}.")
        with torch.no_grad():
            changed = not torch.equal(layer(batches[0]), before_layer)
        if changed:
            return Verdict(False, "The layer's output changed: a hook that only records must return None.")
    finally:
        if callable(getattr(handle, "remove", None)):
            handle.remove()
    if layer._forward_hooks:
        return Verdict(False, "handle.remove() left a forward hook on the layer: return the handle of the hook "
                              "that records.")
    count = len(shapes)
    with torch.no_grad():
        model(batches[0])
    if len(shapes) != count:
        return Verdict(False, "After handle.remove() the list still grows: return the handle of the hook that records.")
    return Verdict(True)


_EXERCISE_00_1 = Exercise(
    "00.1",
    "Write attach_shape_recorder(layer, shapes): a forward hook that appends each output's shape to shapes; "
    "return the handle.",
    expect_callable(_shape_recorder_test, "a function attach_shape_recorder(layer, shapes)"),
    hints=(
        "A forward hook is a function hook(module, inputs, output); the layer's own register_forward_hook attaches "
        "it and returns the handle.",
        "Define the hook inside attach_shape_recorder so that it can reach `shapes`; it appends a tuple made from "
        "output.shape and returns nothing. Return what register_forward_hook returned.",
    ),
    kind="write",
    praise="Your first hook: it ran on layers and batches you had not seen, changed nothing, and its handle removed it.",
)

_EXERCISE_00_2 = Exercise(
    "00.2",
    "A then-vs-now box: the article printed e.grad = 1, PyTorch 2.14.1 gives 2. Which value does the notebook assert?",
    expect_choice(
        "b",
        ["a", "b"],
        "The notebooks compute every number live on the installed PyTorch and assert what they get.",
    ),
    hints=(
        "A then-vs-now box explains a difference; the cell above it computes the number.",
        "An assert against a number PyTorch no longer gives would fail every time the notebook runs.",
    ),
    praise="Every number is computed live and asserted against today's PyTorch; the box tells you what changed.",
    kind="choice",
)

EXERCISES = (_EXERCISE_00_1, _EXERCISE_00_2)
