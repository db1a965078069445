"""Exercises of notebooks/04_backward_hooks.ipynb: module hooks in the backward pass."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_choice, expect_live_order
from course_utils.hooks import count_hooks
from course_utils.timeline import HookTimeline


def _deprecated_linear_shapes() -> tuple[tuple[int, ...], ...]:
    layer = nn.Linear(3, 4)
    shapes: list[tuple[tuple[int, ...], ...]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with layer.register_backward_hook(lambda m, gi, go: shapes.append(tuple(tuple(g.shape) for g in gi))):
            layer(torch.ones(2, 3, requires_grad=True)).sum().backward()
    return shapes[0]


def _shapes_test(answer: Any) -> Verdict:
    if not isinstance(answer, (list, tuple)) or not all(isinstance(s, (list, tuple)) for s in answer):
        return Verdict(False, "Answer with a tuple of shapes, e.g. ((1,), (2, 2)): one shape per grad_input entry.")
    truth = _deprecated_linear_shapes()
    given = tuple(tuple(int(d) for d in s) for s in answer)
    if len(given) != len(truth):
        return Verdict(False, f"The deprecated hook's grad_input has {len(truth)} entries for a Linear with bias.")
    if given == truth:
        return Verdict(True)
    return Verdict(False, "Order and shapes matter: the bias comes first, and the weight entry is transposed.")


_EXERCISE_04_1 = Exercise(
    "04.1",
    "Predict the shapes in grad_input of a deprecated backward hook on nn.Linear(3, 4) with a batch of 2.",
    _shapes_test,
    praise="(bias (4,), input (2, 3), weightᵀ (3, 4)): the raw inputs of the addmm node, bias summed over the batch.",
    kind="predict",
)


def _clip_test(hook: Callable[..., Any]) -> Verdict:
    layer = nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[3.0, -0.2, 0.5], [2.0, 0.1, -4.0]]))
    x = torch.tensor([[1.0, 2.0, 3.0]], requires_grad=True)
    with layer.register_full_backward_hook(hook):
        layer(x).sum().backward()
    if count_hooks(layer):
        return Verdict(False, "Something registered another hook on the layer.")
    expected = layer.weight.detach().sum(0).clamp(-1, 1)
    if x.grad is None:
        return Verdict(False, "x.grad is None: did the hook return a tuple of gradients?")
    if torch.allclose(x.grad, layer.weight.detach().sum(0).unsqueeze(0)):
        return Verdict(False, "The gradient is unchanged: return the clipped gradients as a tuple, e.g. (g.clamp(-1, 1),).")
    if not torch.allclose(x.grad, expected.unsqueeze(0)):
        return Verdict(False, f"x.grad should be {expected.tolist()}; clamp every entry of grad_input to [-1, 1].")
    if layer.weight.grad is not None and not torch.allclose(layer.weight.grad, torch.ones(2, 1) * x.detach()):
        return Verdict(False, "The weight gradient changed: a full backward hook should only change grad_input.")
    return Verdict(True)


_EXERCISE_04_2 = Exercise(
    "04.2",
    "Write a full backward hook that clamps the gradient w.r.t. the module's input to [-1, 1].",
    expect_callable(_clip_test, "a hook clip(module, grad_input, grad_output)"),
    praise="Returning a tuple replaces grad_input; the parameters' gradients are untouched.",
    kind="write",
)


def _recorded_backward_order() -> list[str]:
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    with HookTimeline() as timeline:
        timeline.watch_module(model, ["0", "1"])
        output = model(torch.ones(1, 2, requires_grad=True))
        timeline.events.clear()  # keep the backward only
        output.sum().backward()
    return timeline.order()



_EXERCISE_04_3 = Exercise(
    "04.3",
    "Order the backward pre-hooks and full backward hooks of a Linear -> Tanh model (checked live).",
    expect_live_order(_recorded_backward_order, "Backward walks the layers last-to-first; within one layer?"),
    praise="Last layer first; each layer's pre-hook (grad_output ready) before its full hook (grad_input ready).",
    kind="predict",
)

_EXERCISE_04_4 = Exercise(
    "04.4",
    "Why does a deprecated backward hook on the whole MLP only show fc2's numbers?",
    expect_choice(
        "it sees only the last autograd node",
        [
            "it sees only the last autograd node",
            "fc1 has no gradient",
            "the ReLU blocks the gradient",
            "hooks on containers are ignored",
        ],
        "Which autograd node does the deprecated hook attach to?",
    ),
    praise="The deprecated hook is a hook on the output's grad_fn: for the MLP that is fc2's addmm.",
    kind="choice",
)

EXERCISES = (_EXERCISE_04_1, _EXERCISE_04_2, _EXERCISE_04_3, _EXERCISE_04_4,)
