"""Exercises of notebooks/03_forward_hooks.ipynb: reading and changing what modules compute."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_choice, expect_live_order
from course_utils.hooks import count_hooks
from course_utils.models import LeNet
from course_utils.timeline import HookTimeline


def _conv2_test(extract: Callable[[nn.Module, torch.Tensor], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(3)
    model = LeNet()
    x = torch.randn(2, 1, 32, 32, generator=generator)
    expected = model.conv2(F.max_pool2d(F.relu(model.conv1(x)), 2)).detach()
    result = extract(model, x)
    if count_hooks(model):
        return Verdict(False, f"{count_hooks(model)} hook(s) are still on the model: remove the hook before returning.")
    if not isinstance(result, torch.Tensor):
        return Verdict(False, f"extract(model, x) should return a tensor, got {type(result).__name__}.")
    if tuple(result.shape) != (2, 16, 10, 10):
        return Verdict(False, f"conv2's output has shape (N, 16, 10, 10); you returned {tuple(result.shape)}.")
    if not torch.allclose(result, expected, atol=1e-6):
        return Verdict(False, "Right shape, wrong values: hook conv2 itself (not conv1, not after the ReLU).")
    if result.requires_grad:
        return Verdict(False, "Store output.detach(): a stored tensor that requires grad keeps the whole graph alive.")
    return Verdict(True)


_EXERCISE_03_1 = Exercise(
    "03.1",
    "Write extract(model, x) that returns LeNet's conv2 output via a forward hook and leaves no hook behind.",
    expect_callable(_conv2_test, "a function extract(model, x)"),
    praise="One hook, one stored detach(), removed on the way out.",
    kind="write",
)


def _normalise_test(hook: Callable[..., Any]) -> Verdict:
    seen: list[torch.Tensor] = []
    layer = nn.Identity()
    x = torch.tensor([[1.0, 2.0, 3.0, 6.0], [10.0, 10.0, 14.0, 14.0]])
    original = x.clone()
    with layer.register_forward_pre_hook(hook), layer.register_forward_hook(lambda m, a, out: seen.append(a[0])):
        output = layer(x)
    if not torch.equal(x, original):
        return Verdict(False, "Your hook changed the caller's tensor in place: return a new tensor instead.")
    received = seen[0]
    mean = received.mean(dim=1)
    std = received.std(dim=1, unbiased=False)
    if torch.equal(received, x):
        return Verdict(False, "The layer received the raw input: a pre-hook changes it only by returning (new_x,).")
    if not (torch.allclose(mean, torch.zeros(2), atol=1e-5) and torch.allclose(std, torch.ones(2), atol=1e-4)):
        return Verdict(False, "Each sample (row) should have mean 0 and standard deviation 1 (use unbiased=False).")
    if not torch.equal(output, received):
        return Verdict(False, "The layer's output should be computed from the normalised input.")
    return Verdict(True)


_EXERCISE_03_2 = Exercise(
    "03.2",
    "Write a forward pre-hook that standardises each sample of the input (mean 0, std 1 per row).",
    expect_callable(_normalise_test, "a pre-hook normalise(module, args)"),
    praise="A pre-hook's return value replaces the positional inputs, and the caller's tensor stays untouched.",
    kind="write",
)


def _recorded_forward_order() -> list[str]:
    layer = nn.Linear(2, 2)
    with HookTimeline() as timeline:
        timeline.watch_global(backward=False)
        timeline.watch_module(layer, backward=False)
        layer(torch.ones(1, 2))
    return [event.kind for event in timeline.events]



_EXERCISE_03_3 = Exercise(
    "03.3",
    "Order the global and local forward pre-hooks and forward hooks of one layer (checked against a live run).",
    expect_live_order(_recorded_forward_order, "Which runs first before forward, and which first after it?"),
    praise="Global hooks wrap the local ones on the way in; after forward the global hook runs first too.",
    kind="predict",
)

_EXERCISE_03_4 = Exercise(
    "03.4",
    "What does a forward hook on nn.ReLU(inplace=True) receive as its input?",
    expect_choice(
        "the rectified values",
        ["the rectified values", "the original values", "None", "a copy of the input"],
        "An in-place ReLU writes its result into its input tensor. Which object does the hook get?",
    ),
    praise="The input *is* the output object: record inputs of in-place layers with a pre-hook.",
    kind="choice",
)

EXERCISES = (_EXERCISE_03_1, _EXERCISE_03_2, _EXERCISE_03_3, _EXERCISE_03_4,)
