"""check() switches off the course helpers an exercise names (Exercise.blocked), and always switches them back on."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from course_utils import saliency
from course_utils.machinery.blocked_helpers import HelperBlocked, blocked, is_blocked, resolve_helper
from course_utils.recorder import ActivationRecorder
from course_utils.saliency import grad_cam  # the learner's own name for it: the same object


def test_a_blocked_function_raises_under_every_name_and_comes_back() -> None:
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2, 2)).eval()
    x = torch.randn(1, 1, 5, 5)
    before = grad_cam(model, "0", x, 0)
    with blocked(("course_utils.saliency.grad_cam", "course_utils.recorder.ActivationRecorder")):
        assert is_blocked(grad_cam) and is_blocked(saliency.grad_cam)
        with pytest.raises(HelperBlocked, match=r"course_utils\.saliency\.grad_cam is switched off"):
            grad_cam(model, "0", x, 0)
        with pytest.raises(HelperBlocked, match="ActivationRecorder"):
            ActivationRecorder(model, ["0"])
        assert saliency.vanilla_gradient(model, x, 0).shape == x.shape  # what is not named still works
    assert not is_blocked(grad_cam)
    assert torch.equal(grad_cam(model, "0", x, 0), before)
    with ActivationRecorder(model, ["0"]):
        model(x)


def test_helpers_come_back_when_the_block_raises() -> None:
    with pytest.raises(KeyError):
        with blocked(("course_utils.saliency.grad_cam",)):
            raise KeyError("the validator failed")
    assert not is_blocked(grad_cam)


@pytest.mark.parametrize(("name", "message"), [
    ("torch.relu", "Only course_utils"),
    ("course_utils.saliency.no_such_thing", "Cannot block"),
    ("course_utils.saliency.GUIDED_ACTIVATIONS", "not a Python function"),
])
def test_bad_names_get_a_clear_error(name: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        resolve_helper(name)


def test_every_blocked_name_of_every_exercise_resolves() -> None:
    from course_utils.machinery.checks import all_exercises

    names = [(item.id, name) for item in all_exercises().values() for name in item.blocked]
    assert names, "some exercises block the helper that would solve them"
    for exercise_id, name in names:
        resolve_helper(name)  # raises with the name if an exercise names something that does not exist
