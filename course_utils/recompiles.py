"""How many graphs ``torch.compile`` builds, call after call, for a hook used in a given way (notebook 11, case 7).

Each pattern registers forward hooks on a small model's first layer its own way before each call of the compiled
model (backend ``"eager"``: dynamo traces and guards as usual, without generating code); :func:`graphs_per_call`
reads dynamo's ``unique_graphs`` tally after each call (private; ``TORCH_LOGS=recompiles`` is the public view).

Usage::

    graphs_per_call("a fresh hook, a new number each call")   # [1, 2, 3, 4]: a recompile per call
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

from course_utils.machinery.messages import N_, _

__all__ = ["PATTERNS", "Pattern", "graphs_per_call", "pattern_options"]


def _scale_by(factor: float) -> Callable[..., torch.Tensor]:
    def hook(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        return output * factor

    return hook


def _fresh_hook_new_number(model: nn.Sequential, call: int) -> list[Any]:
    return [model[0].register_forward_hook(_scale_by(float(call + 1)))]


def _fresh_hook_same_number(model: nn.Sequential, call: int) -> list[Any]:
    return [model[0].register_forward_hook(_scale_by(2.0))]


def _no_hook(model: nn.Sequential, call: int) -> list[Any]:
    return []


@dataclass(frozen=True)
class Pattern:
    """A way of using forward hooks around each call: ``register(model, call)`` registers the call's hooks and
    returns their handles; ``removed``: whether they are removed after the call (a well-behaved helper's hooks are;
    a leaky helper's pile up)."""

    register: Callable[[nn.Sequential, int], list[Any]]
    removed: bool = True


PATTERNS: dict[str, Pattern] = {
    N_("a fresh hook, a new number each call"): Pattern(_fresh_hook_new_number),
    N_("a fresh hook, the same number each call"): Pattern(_fresh_hook_same_number),
    N_("hooks never removed (case 3)"): Pattern(_fresh_hook_same_number, removed=False),
    N_("no hook"): Pattern(_no_hook),
}
"""The ways of using a hook that :func:`graphs_per_call` compares, by name (English in every language: code passes
the name; :func:`pattern_options` and the chart show it in the course's language)."""


def pattern_options() -> list[tuple[str, str]]:
    """:data:`PATTERNS` as an explorer's options: ``(the name in the course's language, the name)`` pairs.

    Usage: ``pattern_options()[-1]  # ("no hook", "no hook"); in Chinese ("没有钩子", "no hook")``
    """
    return [(_(name), name) for name in PATTERNS]


def graphs_per_call(pattern: str, calls: int = 4) -> list[int]:
    """The graphs dynamo has built after each of ``calls`` calls of a freshly compiled model, ``pattern`` (a key of
    :data:`PATTERNS`) applied before each call. Starts with ``torch.compiler.reset()``.

    Usage: ``graphs_per_call("no hook")  # [1, 1, 1, 1]``
    """
    from torch._dynamo.utils import counters

    if pattern not in PATTERNS:
        raise ValueError(f"Unknown pattern {pattern!r}; choose one of {list(PATTERNS)}.")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        x = torch.randn(3, 4)
    torch.compiler.reset()
    compiled = torch.compile(model, backend="eager")
    start = counters["stats"]["unique_graphs"]
    totals, every_handle = [], []
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Guards may run slower", category=RuntimeWarning)
            for call in range(calls):
                handles = PATTERNS[pattern].register(model, call)
                every_handle += handles
                compiled(x)
                if PATTERNS[pattern].removed:
                    for handle in handles:
                        handle.remove()
                totals.append(counters["stats"]["unique_graphs"] - start)
    finally:
        for handle in every_handle:
            handle.remove()
        torch.compiler.reset()
    return totals
