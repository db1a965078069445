"""course_utils.optim_hooks finds every hook an optimizer (or the process) still carries."""

from __future__ import annotations

import pytest
import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

from course_utils.optim_hooks import assert_no_optimizer_hooks, optimizer_hook_report


def _optimizer() -> torch.optim.Optimizer:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)


def test_every_kind_of_optimizer_hook_is_reported_until_removed() -> None:
    optimizer = _optimizer()
    handles = [
        optimizer.register_step_pre_hook(lambda o, a, k: None),
        optimizer.register_step_post_hook(lambda o, a, k: None),
        optimizer.register_state_dict_pre_hook(lambda o: None),
        optimizer.register_state_dict_post_hook(lambda o, sd: None),
        optimizer.register_load_state_dict_pre_hook(lambda o, sd: None),
        optimizer.register_load_state_dict_post_hook(lambda o: None),
    ]
    report = optimizer_hook_report(optimizer)
    assert len(report) == 6 and set(report.values()) == {1}
    with pytest.raises(AssertionError, match="_optimizer_step_pre_hooks"):
        assert_no_optimizer_hooks(optimizer)
    for handle in handles:
        handle.remove()
    assert optimizer_hook_report(optimizer) == {}
    assert_no_optimizer_hooks(optimizer)


def test_global_optimizer_hooks_are_reported_and_bad_input_is_refused_clearly() -> None:
    handle = register_optimizer_step_pre_hook(lambda o, a, k: None)
    try:
        assert optimizer_hook_report(_optimizer()) == {"torch.optim.optimizer._global_optimizer_pre_hooks": 1}
        assert optimizer_hook_report(_optimizer(), include_global=False) == {}
    finally:
        handle.remove()
    with pytest.raises(ValueError, match="Pass the optimizers"):
        assert_no_optimizer_hooks()
    with pytest.raises(TypeError, match="torch.optim.Optimizer"):
        optimizer_hook_report(torch.nn.Linear(1, 1))  # type: ignore[arg-type]
