"""Exercises of notebooks/07_hooks_in_training.ipynb: plug-in regularisers and clipping through hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_choice
from course_utils.hooks import count_hooks, hook_report


def _attach_test(attach: Callable[[nn.Module], Any]) -> Verdict:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU())
    registry = attach(model)
    if not callable(getattr(registry, "remove", None)):
        return Verdict(False, "Return what dropout2d(...) returns (the registry), so the caller can remove it.")
    try:
        hooked = sorted(key for key, n in hook_report(model).items() if key.endswith("_forward_hooks"))
        if hooked != ["2._forward_hooks"]:
            return Verdict(False, f"Exactly one forward hook, on layer '2', was expected; found {hooked or 'none'}.")
        x = torch.ones(16, 1, 6, 6)
        model.eval()
        if not torch.equal(model(x), nn.Sequential(*model)(x)):
            return Verdict(False, "In eval mode the model's output must not change.")
        model.train()
        with torch.no_grad():
            maps = model[2](model[1](model[0](x))).flatten(2)  # called as a module: the hook applies
        zero_channels = (maps == 0).all(dim=2)
        if not zero_channels.any() or zero_channels.all():
            return Verdict(False, "In training mode about half of layer '2''s channels should be zeroed (p=0.5).")
    finally:
        registry.remove()
    if count_hooks(model):
        return Verdict(False, "remove() left hooks behind.")
    return Verdict(True)


_EXERCISE_07_1 = Exercise(
    "07.1",
    "Write attach(model) that puts Dropout2d (p=0.5) on layer '2' only and returns the registry.",
    expect_callable(_attach_test, "a function attach(model)"),
    praise="One named layer, one hook, removable: the model's code never changed.",
    kind="write",
)

_EXERCISE_07_2 = Exercise(
    "07.2",
    "Why does DropBlock with block_size > 1 drop less than p of the units?",
    expect_choice(
        "blocks overlap and fewer blocks cover the borders",
        [
            "blocks overlap and fewer blocks cover the borders",
            "the hook runs only every other batch",
            "gamma is rounded down",
            "eval mode switches it off halfway",
        ],
        "Where can a block centre fall, and what happens when two blocks cover the same unit?",
    ),
    praise="gamma assumes disjoint, fully covering blocks; overlaps and borders make the real fraction smaller.",
    kind="choice",
)

_EXERCISE_07_3 = Exercise(
    "07.3",
    "Which hook gives the same gradients as calling clip_grad_value_ after every backward of an accumulation?",
    expect_choice(
        "post-accumulate-grad hook",
        ["post-accumulate-grad hook", "tensor hook on the parameter", "full backward hook", "forward hook"],
        "Which hook sees .grad after the new contribution has been added?",
    ),
    praise="It runs after .grad was accumulated, so it clamps exactly what clip_grad_value_ would.",
    kind="choice",
)

EXERCISES = (_EXERCISE_07_1, _EXERCISE_07_2, _EXERCISE_07_3,)
