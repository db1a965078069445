"""How many graphs ``torch.compile`` builds, call after call, for a hook used in a given way (notebook 11, case 7).

Each pattern registers forward hooks on a small model's first layer in its own way and calls the compiled model
(backend ``"eager"``: dynamo traces and guards as with the default backend, without generating code);
:func:`graphs_per_call` counts, after each call, the graphs dynamo has built so far (its ``unique_graphs`` tally,
``torch._dynamo.utils.counters``; private, as ``TORCH_LOGS=recompiles`` is the public way to see recompiles).
Every hook is removed afterwards, also when a call raises.

Usage::

    graphs_per_call("a fresh hook, a new number each call")   # [1, 2, 3, 4]: a recompile per call
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

__all__ = ["PATTERNS", "graphs_per_call"]


def _scale_by(factor: float) -> Callable[..., torch.Tensor]:
    def hook(module: nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        return output * factor

    return hook


def _fresh_hook_new_number(model: nn.Module, call: int, kept: list[Any]) -> None:
    kept.append(model[0].register_forward_hook(_scale_by(float(call + 1))))


def _fresh_hook_same_number(model: nn.Module, call: int, kept: list[Any]) -> None:
    kept.append(model[0].register_forward_hook(_scale_by(2.0)))


def _hooks_pile_up(model: nn.Module, call: int, kept: list[Any]) -> None:
    kept.append(model[0].register_forward_hook(_scale_by(1.0)))
    kept.append(None)  # this pattern never removes its hooks: they stay until the end of the run


def _no_hook(model: nn.Module, call: int, kept: list[Any]) -> None:
    return None


PATTERNS: dict[str, Callable[[nn.Module, int, list[Any]], None]] = {
    "a fresh hook, a new number each call": _fresh_hook_new_number,
    "a fresh hook, the same number each call": _fresh_hook_same_number,
    "hooks never removed (case 3)": _hooks_pile_up,
    "no hook": _no_hook,
}
"""Ways of using a forward hook around each call, by name: before each call, the pattern registers its hook(s);
after the call, the hooks of that call are removed -- except by the pattern whose hooks pile up."""


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
                kept: list[Any] = []
                PATTERNS[pattern](model, call, kept)
                every_handle += [h for h in kept if h is not None]
                compiled(x)
                if None not in kept:  # this call's hooks go, as a well-behaved helper's would
                    for handle in kept:
                        handle.remove()
                totals.append(counters["stats"]["unique_graphs"] - start)
    finally:
        for handle in every_handle:
            handle.remove()
        torch.compiler.reset()
    return totals
