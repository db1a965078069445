"""Exercises of notebooks/05_guided_backprop.ipynb: the guided rule, functional ReLUs, and what GBP shows."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_choice


def _rule_test(rule: Callable[[torch.Tensor, torch.Tensor], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(5)
    forward_input = torch.randn(50, generator=generator)
    grad_output = torch.randn(50, generator=generator)
    before = (forward_input.clone(), grad_output.clone())
    result = rule(forward_input, grad_output)
    if not (torch.equal(forward_input, before[0]) and torch.equal(grad_output, before[1])):
        return Verdict(False, "Your rule changed its arguments in place: compute a new tensor.")
    if not isinstance(result, torch.Tensor) or result.shape != grad_output.shape:
        return Verdict(False, "Return a tensor with the shape of grad_output.")
    if torch.allclose(result, grad_output * (forward_input > 0)):
        return Verdict(False, "That is the plain ReLU backward: Guided Backprop also drops negative gradients.")
    if torch.allclose(result, grad_output.clamp(min=0)):
        return Verdict(False, "That is the 'deconvnet' rule: the forward mask (input > 0) is missing.")
    if torch.allclose(result, grad_output.clamp(min=0) * (forward_input > 0)):
        return Verdict(True)
    return Verdict(False, "Keep a gradient only where both the forward input and the gradient are positive.")


_EXERCISE_05_1 = Exercise(
    "05.1",
    "Write guided_rule(forward_input, grad_output) returning the gradient a guided ReLU passes back.",
    expect_callable(_rule_test, "a function guided_rule(forward_input, grad_output)"),
    praise="Two masks: where the ReLU was open in the forward pass, and where the gradient is positive.",
    kind="write",
)


class FunctionalCNN(nn.Module):
    """A small CNN that calls F.relu instead of using nn.ReLU modules (seeded weights)."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(11)
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 4)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))


def exercise_05_2() -> tuple[nn.Module, torch.Tensor]:
    """The model and input of Exercise 05.2: ``model, x = exercise_05_2()``."""
    return FunctionalCNN().eval(), torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(12))


def _functional_test(answer: Any) -> Verdict:
    if not isinstance(answer, torch.Tensor):
        return Verdict(False, f"Pass the saliency tensor, got {type(answer).__name__}.")
    model, x = exercise_05_2()
    inputs = x.clone().requires_grad_(True)
    hooks = []

    def guide(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        hooks.append(output.register_hook(lambda grad: grad.clamp(min=0)))

    # independent reference: the same network with module ReLUs, guided by hand
    relu = nn.ReLU()
    handle = relu.register_forward_hook(guide)
    try:
        h = relu(model.conv1(inputs))
        h = relu(model.conv2(h))
        score = model.fc(h.mean(dim=(2, 3)))[0]
        score[score.argmax()].backward()
    finally:
        handle.remove()
        for item in hooks:
            item.remove()
    expected = inputs.grad
    vanilla_inputs = x.clone().requires_grad_(True)
    logits = model(vanilla_inputs)[0]
    logits[logits.argmax()].backward()
    if answer.shape != expected.shape:
        return Verdict(False, f"Expected shape {tuple(expected.shape)}, got {tuple(answer.shape)}.")
    if torch.allclose(answer, vanilla_inputs.grad, atol=1e-7):
        return Verdict(False, "That is the vanilla gradient: no ReLU module was found to guide. See the warning.")
    if not torch.allclose(answer, expected, atol=1e-6):
        return Verdict(False, "Not the guided map of the top class: guide the functional ReLUs, target=None.")
    return Verdict(True)


_EXERCISE_05_2 = Exercise(
    "05.2",
    "Compute the Guided Backprop map of exercise_05_2()'s model, which uses F.relu, for its top class.",
    _functional_test,
    praise="functional=True catches F.relu calls that module hooks cannot see.",
    kind="predict",
)

_EXERCISE_05_3 = Exercise(
    "05.3",
    "GBP of a random-weight network still draws the cat, whatever the class. What follows?",
    expect_choice(
        "the map mostly shows the image, not what the model learned",
        [
            "the map mostly shows the image, not what the model learned",
            "the random network learned the cat too",
            "the trained network is broken",
            "Guided Backprop needs more samples",
        ],
        "If the weights hardly matter, where does the picture come from?",
    ),
    praise="Adebayo et al. (2018): a saliency method that ignores the weights cannot explain them.",
    kind="choice",
)

EXERCISES = (_EXERCISE_05_1, _EXERCISE_05_2, _EXERCISE_05_3,)
