"""Exercises of notebooks/06_grad_cam.ipynb: Grad-CAM by hand, where the element-wise variant is exact, and class sensitivity."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_choice


def _cam_test(cam_from: Callable[[torch.Tensor, torch.Tensor], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(6)
    activation = torch.randn(2, 5, 4, 3, generator=generator).relu()
    gradient = torch.randn(2, 5, 4, 3, generator=generator)
    before = (activation.clone(), gradient.clone())
    result = cam_from(activation, gradient)
    if not (torch.equal(activation, before[0]) and torch.equal(gradient, before[1])):
        return Verdict(False, "Your function changed its arguments in place.")
    if not isinstance(result, torch.Tensor) or tuple(result.shape) != (2, 4, 3):
        got = tuple(result.shape) if isinstance(result, torch.Tensor) else type(result).__name__
        return Verdict(False, f"Return one (h, w) map per sample: shape (N, h, w) = (2, 4, 3), got {got}.")
    weights = gradient.mean(dim=(2, 3), keepdim=True)
    expected = (weights * activation).sum(dim=1).clamp(min=0)
    if torch.allclose(result, (activation * gradient).sum(dim=1).clamp(min=0), atol=1e-6):
        return Verdict(False, "That is the element-wise product (article 003): average the gradient over space first.")
    if torch.allclose(result, (weights * activation).sum(dim=1), atol=1e-6):
        return Verdict(False, "Almost: Grad-CAM keeps only the positive part (ReLU) of the weighted sum.")
    if not torch.allclose(result, expected, atol=1e-6):
        return Verdict(False, "weights = spatial mean of the gradient per channel; map = ReLU(Σ_c weight_c × A_c).")
    return Verdict(True)


_EXERCISE_06_1 = Exercise(
    "06.1",
    "Write cam_from(activation, gradient) returning the Grad-CAM maps (N, h, w) before upsampling.",
    expect_callable(_cam_test, "a function cam_from(activation, gradient)"),
    praise="Spatially averaged gradients weight the channels; the ReLU keeps the evidence for the class.",
    kind="write",
)

_EXERCISE_06_2 = Exercise(
    "06.2",
    "Where does the element-wise product of activation and gradient equal Grad-CAM?",
    expect_choice(
        "where the gradient is spatially constant",
        [
            "where the gradient is spatially constant",
            "at every layer",
            "at the first convolution",
            "nowhere",
        ],
        "Σ_c A_c × g_c equals Σ_c A_c × mean(g_c) when ... ?",
    ),
    praise="At the last layer before global average pooling the gradient is the same at every position.",
    kind="choice",
)

_EXERCISE_06_3 = Exercise(
    "06.3",
    "On the cat|coffee composite, which half holds most of the Grad-CAM mass for 'espresso'?",
    expect_choice("right", ["left", "right", "both equally"], "Where is the cup in the composite photo?"),
    praise="Grad-CAM is class-sensitive: the cat class lights up the left, espresso the right.",
    kind="choice",
)

EXERCISES = (_EXERCISE_06_1, _EXERCISE_06_2, _EXERCISE_06_3,)
