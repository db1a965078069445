"""Which hooks an optimizer still carries: :func:`optimizer_hook_report` and :func:`assert_no_optimizer_hooks`.

``torch.optim.Optimizer`` keeps six hook dictionaries (step pre/post, state-dict pre/post, load-state-dict
pre/post), and ``torch.optim.optimizer`` keeps the global step hooks that every optimizer in the process runs.
:func:`course_utils.hooks.assert_no_hooks` looks at modules and tensors; these two look at optimizers.

Usage::

    handle = optimizer.register_step_post_hook(lambda opt, args, kwargs: None)
    handle.remove()
    assert_no_optimizer_hooks(optimizer)      # the last cell of notebook 09
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from course_utils._torch_internals import global_hook_dicts

__all__ = ["optimizer_hook_report", "assert_no_optimizer_hooks"]


def _global_report() -> dict[str, int]:
    return {name: len(hooks) for name, hooks in global_hook_dicts(modules=False).items() if hooks}


def optimizer_hook_report(*optimizers: torch.optim.Optimizer, include_global: bool = True) -> dict[str, int]:
    """Non-empty hook dictionaries of the given optimizers (keys ``"Adam#0._optimizer_step_pre_hooks"``), plus
    the global optimizer hooks when ``include_global``.

    Usage: ``optimizer_hook_report(optimizer)``
    """
    report: dict[str, int] = {}
    for index, optimizer in enumerate(optimizers):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"Expected torch.optim.Optimizer objects, got {type(optimizer).__name__} (argument {index}).")
        for name, value in vars(optimizer).items():
            if "hook" in name and isinstance(value, Mapping) and value:
                report[f"{type(optimizer).__name__}#{index}.{name}"] = len(value)
    if include_global:
        report.update(_global_report())
    return report


def assert_no_optimizer_hooks(*optimizers: Any) -> None:
    """Raise ``AssertionError`` naming every hook still registered on the optimizers or globally.

    Usage: ``assert_no_optimizer_hooks(optimizer, other_optimizer)``
    """
    if not optimizers:
        raise ValueError("Pass the optimizers to check, e.g. assert_no_optimizer_hooks(optimizer).")
    leftovers = optimizer_hook_report(*optimizers)
    if leftovers:
        lines = "\n".join(f"  {key}: {n}" for key, n in leftovers.items())
        raise AssertionError(f"Optimizer hooks are still registered:\n{lines}\nRemove them with handle.remove().")
