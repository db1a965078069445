"""Exercises of notebooks/00_start_here.ipynb: the learner's first hook, and what a lost handle leaves behind."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from course_utils.machinery.exercise_kit import *


def _hooks_in_words(module: nn.Module) -> Text | None:
    """The forward hooks and forward pre-hooks ``module`` carries, in words ("one forward hook and 2 forward
    pre-hooks"); None when it has neither."""
    forward, pre = len(module._forward_hooks), len(module._forward_pre_hooks)
    words = []
    if forward:
        words.append(Text(N_("one forward hook") if forward == 1 else N_("{count} forward hooks"), count=forward))
    if pre:
        words.append(Text(N_("one forward pre-hook") if pre == 1 else N_("{count} forward pre-hooks"), count=pre))
    if len(words) == 2:
        return Text(N_("{forward} and {pre}"), forward=words[0], pre=words[1])
    return words[0] if words else None


def _hooks_found(model: nn.Module, layer: nn.Module) -> Text | None:
    """The forward hooks and pre-hooks on ``model``'s modules, in words and where: those on ``layer`` first ("... on
    it"), then each other module's; None when there are none."""
    places = []
    for name, module in sorted(model.named_modules(), key=lambda item: item[1] is not layer):
        hooks = _hooks_in_words(module)
        if hooks is not None:
            places.append(Text(N_("{hooks} on it"), hooks=hooks) if module is layer
                          else Text(N_("{hooks} on submodule '{name}'"), hooks=hooks, name=name) if name
                          else Text(N_("{hooks} on the model itself"), hooks=hooks))
    return functools.reduce(lambda first, second: Text(N_("{first}, and {second}"), first=first, second=second),
                            places) if places else None


@exercise("00.1")
def _shape_recorder_test(attach: Callable[[nn.Module, list], Any]) -> Verdict:
    torch.manual_seed(0)
    # a layer the learner has not seen, followed by an in-place layer; batches of several sizes
    model = nn.Sequential(nn.Conv2d(2, 5, 3), nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(5 * 4 * 4, 3))
    layer, batches = model[0], [torch.randn(n, 2, 6, 6) for n in (4, 1, 7)]
    with torch.no_grad():  # what the model gives before anything is attached
        before, before_layer = [model(x).clone() for x in batches], layer(batches[0]).clone()
    truth = [(n, 5, 4, 4) for n in (4, 1, 7)]  # Conv2d(3x3, no padding): 6x6 -> 4x4, by hand
    shapes: list = []
    handle = attach(layer, shapes)
    with removing(handle):
        found = _hooks_found(model, layer)
        require_handle(handle, N_("attach_shape_recorder returned {type}: return the handle that register_forward_hook "
                                  "gave you, so the caller can remove the hook."))
        removed_already = (isinstance(handle, RemovableHandle) and handle.hooks_dict_ref() is layer._forward_hooks
                           and handle.id not in layer._forward_hooks)
        require(not removed_already,
                N_("The hook of the handle you returned is already gone: it was removed before "
                   "attach_shape_recorder returned (a `with` block removes it where the block ends). Leave it on and "
                   "return the handle: the caller removes it."))
        require(layer._forward_hooks, N_("No forward hook on the layer you were given{where}: register it with "
                                         "layer.register_forward_hook(...)."),
                where=Text(N_(" (found {found})"), found=found) if found else "")
        # the layer has a forward hook: it must be the only forward hook or pre-hook of the model
        require(sum(len(module._forward_hooks) + len(module._forward_pre_hooks) for module in model.modules()) == 1,
                N_("Expected exactly one forward hook, on the layer you were given; found {found}."), found=found)
        require(not shapes, N_("The list filled before the layer ran: record inside the hook, not when attaching."))
        with torch.no_grad():
            after = [model(x) for x in batches]
        require(all(torch.equal(a, b) for a, b in zip(after, before)),
                N_("The model's output changed: a hook that only records must return None."))
        require(not any(isinstance(s, torch.Tensor) and s.dim() > 1 for s in shapes),
                N_("The list holds tensors: append the output's shape (a tuple such as (2, 4)), not the output "
                   "itself."))
        require(len(shapes) == len(batches), N_("After {passes} forward passes the list holds {entries} entries: "
                                                "append one shape per forward (don't replace the list or keep only "
                                                "the first)."), passes=len(batches), entries=len(shapes))
        lists = [s for s in shapes if isinstance(s, list)]
        require(not lists, N_("The list holds shapes as lists, such as {shape}: the task asks for tuples, such as "
                              "(2, 4) (a list never equals a tuple in Python)."), shape=lists[0] if lists else None)
        recorded = [tuple(s) if isinstance(s, (tuple, torch.Size)) else s for s in shapes]
        require(recorded != [tuple(x.shape) for x in batches],
                N_("You recorded the shapes of the layer's input: record its output."))
        require(recorded == truth, N_("Recorded {shapes}; expected the output shapes {truth}."), shapes=shapes,
                truth=truth)
        with torch.no_grad():
            require(torch.equal(layer(batches[0]), before_layer),
                    N_("The layer's output changed: a hook that only records must return None."))
    require(not layer._forward_hooks, N_("handle.remove() left a forward hook on the layer: return the handle of the "
                                         "hook that records."))
    count = len(shapes)
    with torch.no_grad():
        model(batches[0])
    require(len(shapes) == count, N_("After handle.remove() the list still grows: return the handle of the hook that "
                                     "records."))
    return Verdict(True)


def _live_double_registration() -> int:
    """Exercise 00.2's code, run live with plain PyTorch calls: how many times the hook runs."""
    calls: list[tuple[int, ...]] = []

    def announce(module: nn.Module, inputs: tuple, output: torch.Tensor) -> None:
        calls.append(tuple(output.shape))

    layer = nn.Linear(3, 4)
    first = layer.register_forward_hook(announce)  # the exercise overwrites this handle; the check keeps it
    layer.register_forward_hook(announce).remove()
    with removing(first), torch.no_grad():
        layer(torch.ones(1, 3))
        layer(torch.ones(2, 3))
    return len(calls)


@exercise("00.2")
def _predict_double_registration(answer: Any) -> Verdict:
    guess = as_whole_number(answer)
    require(guess is not None, N_("Answer with a whole number, how many lines announce prints; got {answer}."),
            answer=repr(answer))
    truth = _live_double_registration()
    if guess == truth:
        return Verdict(True)
    require(guess != 0, N_("The second registration did not replace the first: every register_forward_hook call adds "
                           "a hook, and handle.remove() takes off only the hook of that handle."))
    require(guess != 2 * truth, N_("handle.remove() did take a hook off: the one registered by the call that returned "
                                   "that handle."))
    fail(N_("Count two things: the hooks still on the layer after remove(), and the forward passes."))


EXERCISES = (_shape_recorder_test, _predict_double_registration)
