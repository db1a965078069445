"""Exercises of notebooks/13_my_topic.ipynb: a call counter, an output-mean recorder and a counter on every child."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from course_utils.hooks import count_hooks
from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable
from course_utils.machinery.messages import N_, _


# -- 13.1 a call counter ---------------------------------------------------------------------------------------
def _counter_test(attach_counter: Callable[[nn.Module, dict], Any]) -> Verdict:
    layer = nn.Linear(5, 2)
    counts: dict = {}
    handle = attach_counter(layer, counts)
    if not hasattr(handle, "remove"):
        return Verdict(False, _("attach_counter should return the handle that register_forward_hook gave you."))
    try:
        out = layer(torch.ones(4, 5))
        out2 = layer(torch.ones(1, 5))
    finally:
        handle.remove()
    if counts.get("calls") != 2:
        return Verdict(False, _("After 2 forward passes counts[\"calls\"] is {got}, not 2: add 1 in the hook, each "
                                "time it runs.").format(got=counts.get("calls")))
    if out.shape != (4, 2) or out2.shape != (1, 2):
        return Verdict(False, _("The layer's output changed: the hook should return None."))
    if count_hooks(layer):
        return Verdict(False, _("After handle.remove() a hook is still on the layer: return the hook's handle."))
    return Verdict(True)


_EXERCISE_13_1 = Exercise(
    "13.1",
    N_("Write attach_counter(module, counts): a forward hook that counts the module's calls in counts[\"calls\"]."),
    expect_callable(_counter_test, N_("a function attach_counter(module, counts)")),
    hints=(
        N_("A forward hook is called with (module, inputs, output) after each forward."),
        N_("counts.get(\"calls\", 0) + 1 starts from 0 when the key is missing."),
    ),
    kind="write",
    praise=N_("A counter in one hook: the simplest instrument there is."),
)


# -- 13.2 an output-mean recorder ------------------------------------------------------------------------------
def _mean_test(attach_mean_recorder: Callable[[nn.Module, list], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(13)
    layer = nn.Linear(3, 4)
    x = torch.randn(6, 3, generator=generator)
    expected = layer(x).mean().item()
    means: list = []
    handle = attach_mean_recorder(layer, means)
    try:
        out = layer(x)
    finally:
        if hasattr(handle, "remove"):
            handle.remove()
    if not torch.allclose(out, layer(x)):
        return Verdict(False, _("The layer's output changed: the hook should only record, and return None."))
    if len(means) != 1 or not isinstance(means[0], float):
        return Verdict(False, _("After one forward pass means should hold one Python float (use .item()); it holds "
                                "{got!r}.").format(got=means))
    if abs(means[0] - expected) > 1e-6:
        return Verdict(False, _("The recorded number is not the mean of the layer's output."))
    if count_hooks(layer):
        return Verdict(False, _("After handle.remove() a hook is still on the layer: return the hook's handle."))
    return Verdict(True)


_EXERCISE_13_2 = Exercise(
    "13.2",
    N_("Write attach_mean_recorder(module, means): a forward hook that appends the mean of each output."),
    expect_callable(_mean_test, N_("a function attach_mean_recorder(module, means)")),
    hints=(
        N_("The third argument of a forward hook is the output."),
        N_("output.mean().item() is a Python float."),
    ),
    kind="write",
    praise=N_("You read an activation without changing it."),
)


# -- 13.3 a counter on every child -----------------------------------------------------------------------------
class _Shared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(2, 2)
        self.act = nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.inner(self.act(self.inner(x))))


def _children_test(count_children: Callable[[nn.Module], Any]) -> Verdict:
    model = _Shared()
    result = count_children(model)
    if not (isinstance(result, tuple) and len(result) == 2):
        return Verdict(False, _("count_children should return a pair (counts, handles)."))
    counts, handles = result
    try:
        for _pass in range(2):
            model(torch.ones(1, 2))
    finally:
        for handle in handles:
            handle.remove()
    if dict(counts) != {"inner": 4, "act": 4}:
        return Verdict(False, _("After 2 passes through a model whose children each run twice per pass, counts is "
                                "{got}: count every call of every direct child, by its name.").format(got=dict(counts)))
    if count_hooks(model):
        return Verdict(False, _("After removing your handles a hook is still on the model: keep the handle of every "
                                "hook you register."))
    return Verdict(True)


_EXERCISE_13_3 = Exercise(
    "13.3",
    N_("Write count_children(model): a forward hook on each direct child counting its calls by name."),
    expect_callable(_children_test, N_("a function count_children(model)")),
    hints=(
        N_("model.named_children() gives each direct child with its name."),
        N_("A hook defined in a loop sees the loop variable's last value, unless you bind it: def bump(..., name=name)."),
    ),
    kind="write",
    stretch=True,
    praise=N_("One hook per child and every handle kept: that is how the course's own tools instrument a model."),
)

EXERCISES = (_EXERCISE_13_1, _EXERCISE_13_2, _EXERCISE_13_3)
