"""Exercises of notebooks/06_grad_cam.ipynb: channel weights, Grad-CAM from two hooks, one map per call.

The ground truth splits the network at the layer and asks ``torch.autograd.grad`` for the gradient there (no hooks);
a wrong answer is matched against the usual mistakes, recomputed the same way."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from course_utils.machinery.exercise_kit import *

_TARGETS = [6, 0, 3]
_LAYER_INPUT_MISTAKE = N_("These are the Grad-CAM maps of the layer's input, not of its output: a forward hook is "
                          "called as hook(module, args, output), and args is what goes into the layer. Keep the "
                          "output, and register the tensor hook on it.")


def _cam_net(inplace: bool, stride: int = 1) -> nn.Sequential:
    """Conv layers "0", "2", "4"; "3" is a ReLU that works in place when ``inplace``; ``stride=2``: layer "2" halves
    the spatial size, so the maps at "2" and "4" are smaller than the input (an upsampled map shows)."""
    return seeded(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                                nn.Conv2d(4, 6, 3, stride=stride, padding=1), nn.ReLU(inplace=inplace),
                                nn.Conv2d(6, 5, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                nn.Linear(5, 7)), 61, 0.6)


def _batch() -> torch.Tensor:
    return torch.randn(3, 3, 7, 5, generator=generator(62))  # not square: catches dim mix-ups


def _split_truth(model: nn.Sequential, index: int, x: torch.Tensor, targets: list[int],
                 every_column: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Activation of model[index] and the gradient of the target scores at it, without any hook (``targets[i]``:
    sample i's class; ``every_column``: the mistake ``logits[:, targets].sum()``)."""
    with torch.no_grad():
        activation = model[: index + 1](x)
    leaf = activation.clone().requires_grad_(True)
    logits = model[index + 1:](leaf.clone())  # the clone: an in-place layer next must not touch the leaf
    score = logits[:, torch.tensor(targets)] if every_column else logits.gather(1, torch.tensor(targets)[:, None])
    return activation, torch.autograd.grad(score.sum(), leaf)[0]


_CLASS_MISTAKES = {  # the ✗ of 06.1 and 06.2 for an answer explaining the wrong classes
    "top": N_("You back-propagated each sample's top class, not the class asked for: sample i is explained for "
              "targets[i], whatever the model predicts."),
    "one": N_("You back-propagated one class for the whole batch: each sample must be explained for its own class, "
              "targets[i] for sample i (row i of the logits, column targets[i])."),
    "every": N_("You back-propagated the sum of every target's score for every sample: logits[:, targets] takes all "
                "the target columns of each row (an N x N block of scores). Each row needs only its own score, "
                "logits[i, targets[i]]: look at torch.gather, which picks one column per row."),
}


def _other_classes(model: nn.Sequential, index: int, x: torch.Tensor) -> list[tuple[torch.Tensor, str]]:
    """The gradient at model[index] for the usual wrong choices of class, each with its ✗: each sample's top class,
    one of the targets for the whole batch, ``logits[:, targets]`` (all of them)."""
    top = model(x).argmax(dim=1).tolist()
    choices = [("top", top, False)] + [("one", [target] * 3, False) for target in dict.fromkeys(_TARGETS)]
    return [(_split_truth(model, index, x, classes, every_column=every)[1], _CLASS_MISTAKES[name])
            for name, classes, every in choices + [("every", _TARGETS, True)] if every or classes != _TARGETS]


def _tidy(model: nn.Module, x: torch.Tensor, x_before: torch.Tensor) -> None:
    require_no_hooks(model, N_("A hook is left behind ({where}): remove it with its handle, in a finally block."))
    require_untouched(x, x_before, N_("Your function changed the input x (its values, requires_grad or .grad): work "
                                      "on a copy and leave the caller's tensor alone."))


@exercise("06.1")
def _weights_test(channel_weights: Callable[..., Any]) -> Verdict:
    for layer, index in (("2", 2), ("4", 4)):
        model, x = _cam_net(inplace=False), _batch()
        activation, gradient = _split_truth(model, index, x, _TARGETS)
        with watch_hooks(model[index]) as seen:
            raw = channel_weights(model, layer, x, list(_TARGETS))
        require(not (isinstance(raw, torch.Tensor) and tuple(raw.shape) == (3, model[index].in_channels)),
                N_("Shape {shape} has the channels of the layer's input: grad_input is the gradient at the input, "
                   "grad_output[0] the one at the layer's output."), shape=tuple(getattr(raw, "shape", ())))
        result = tensor_result(raw, (3, activation.shape[1]), Text(N_("one weight per sample and channel at layer "
                                                                      "{layer}"), layer=repr(layer)))
        _tidy(model, x, _batch())  # x as it was drawn
        if same(result, gradient.mean(dim=(2, 3))):
            require("_backward_hooks" in seen.kinds,
                    N_("The right weights, but while the model ran, layer {layer} carried no full backward hook: catch "
                       "the gradient with register_full_backward_hook on that layer, as the exercise asks."),
                    layer=repr(layer))
            continue
        name_the_mistake(result, [(gradient.sum(dim=(2, 3)), N_("That is the spatial sum: Grad-CAM's weight is the "
                                                                "spatial mean of the gradient."))]
                         + [(other.mean(dim=(2, 3)), why) for other, why in _other_classes(model, index, x)])
        fail(N_("Not Grad-CAM's channel weights at layer {layer}: the spatial mean of the gradient of each sample's "
                "target score at the layer's output."), layer=repr(layer))
    failing = nn.Sequential(*_cam_net(inplace=False), FailsOnPurpose())  # layer "2" is there; the forward raises
    the_error_gets_out(lambda: channel_weights(failing, "2", _batch(), list(_TARGETS)))
    require_no_hooks(failing, N_("When the model raises, your hook stays behind ({where}): remove it with its handle "
                                 "in a finally block."))
    return Verdict(True)


def _cam(activation: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    return (gradient.mean(dim=(2, 3), keepdim=True) * activation).sum(dim=1).clamp(min=0)


@exercise("06.2")
def _two_hooks_test(grad_cam_two_hooks: Callable[..., Any]) -> Verdict:
    # an in-place ReLU right after layer "2"; with stride 2 the layer's maps (4x3) are smaller than the input (7x5),
    # so a map upsampled to the input's size does not pass for the raw one
    for stride, layer, index in ((2, "2", 2), (2, "4", 4), (1, "2", 2), (1, "4", 4)):
        model, x = _cam_net(inplace=True, stride=stride), _batch()
        activation, gradient = _split_truth(model, index, x, _TARGETS)
        shape, input_shape = (3,) + tuple(activation.shape[-2:]), (3,) + tuple(x.shape[-2:])
        try:
            with watch_hooks(model[index]) as seen:
                raw = grad_cam_two_hooks(model, layer, x, list(_TARGETS))
        except RuntimeError as error:
            require("BackwardHookFunction" not in str(error),
                    N_("PyTorch refused an in-place change of the output of layer {layer}: a full backward hook "
                       "forbids that (notebook 04), and the ReLU after the layer works in place. This exercise asks "
                       "for a tensor hook, registered on the output inside the forward hook."), layer=repr(layer))
            raise
        layer_input = _cam(*_split_truth(model, index - 1, x, _TARGETS))  # the mistake: args instead of output
        if isinstance(raw, torch.Tensor) and tuple(raw.shape) == input_shape != shape:
            if raw.is_floating_point():
                name_the_mistake(raw, [(layer_input, _LAYER_INPUT_MISTAKE)])
            fail(N_("Your maps have the input's size {input}, but the output of layer {layer} is {size}: return the "
                    "raw maps at the layer's own resolution, after the ReLU and before any upsampling or scaling (step "
                    "3 of section 1 is for display only)."), input=tuple(x.shape[-2:]), layer=repr(layer),
                 size=tuple(activation.shape[-2:]))
        result = tensor_result(raw, shape, Text(N_("one raw map per sample at layer {layer} (no upsampling)"),
                                                layer=repr(layer)))
        _tidy(model, x, _batch())  # x as it was drawn
        expected = _cam(activation, gradient)
        if same(result, expected):
            require(not seen.from_the_course,
                    N_("The right maps, but the hook on layer {layer} is the course's own ({hook}), not yours: write "
                       "the forward hook and the tensor hook yourself."), layer=repr(layer),
                    hook=seen.from_the_course[0] if seen.from_the_course else "")
            continue
        _what_went_wrong(result, expected, model, layer, index, x, activation, gradient, layer_input)
    return Verdict(True)


def _what_went_wrong(result: torch.Tensor, expected: torch.Tensor, model: nn.Sequential, layer: str, index: int,
                     x: torch.Tensor, activation: torch.Tensor, gradient: torch.Tensor, layer_input: torch.Tensor
                     ) -> None:
    """06.2's ✗ for maps of the right shape that are not Grad-CAM's: the usual mistakes, each recomputed and named."""
    low, high = expected.amin(dim=(1, 2), keepdim=True), expected.amax(dim=(1, 2), keepdim=True)
    rectified, kept = activation.clamp(min=0), (activation, activation.clamp(min=0))
    # the gradient at the in-place ReLU's output, with the activation kept or rectified
    rewritten = _split_truth(model, index + 1, x, _TARGETS)[1] if getattr(model[index + 1], "inplace", False) else None
    cells, channels = activation.shape[2] * activation.shape[3], activation.shape[1]
    fields = {"layer": repr(layer), "cells": cells, "channels": channels}
    scaled = N_("Your maps are scaled: return the raw maps, after the ReLU and before any scaling or upsampling (step "
                "3 of section 1 is for display only).")
    name_the_mistake(result, [
        ((expected - low) / (high - low).clamp(min=1e-12), scaled),
        (expected / high.clamp(min=1e-12), scaled),
        (_cam(rectified, gradient), N_("At layer {layer} the ReLU after the layer works in place: the activation you "
                                       "kept was rectified after your hook ran. Keep a copy of it.")),
        *[(_cam(a, rewritten), N_("At layer {layer} you caught the gradient at the in-place ReLU's output, not at the "
                                  "layer's output: once the ReLU has rewritten the tensor, a tensor hook registered on "
                                  "it afterwards (or torch.autograd.grad asked about it) gets the gradient after the "
                                  "ReLU. Register the tensor hook inside the forward hook, before the ReLU runs "
                                  "(notebook 04's fix 2).")) for a in kept if rewritten is not None],
        ((activation * gradient).sum(dim=1).clamp(min=0), N_("That is the element-wise product (article 003): average "
                                                             "the gradient over space first.")),
        ((gradient.mean(dim=(2, 3), keepdim=True) * activation).sum(dim=1),
         N_("Almost: Grad-CAM keeps only the positive part (ReLU) of the weighted sum.")),
    ], **fields)
    name_the_mistake(result, [(expected * cells, N_("Your maps are {cells} times too large, the number of positions (h "
                                                    "x w) of the layer's output: Grad-CAM's channel weight is the "
                                                    "spatial mean of the gradient, not its sum."))],
                     lambda got, wrong: same(got, wrong, 1e-5 * cells), **fields)
    name_the_mistake(result * channels, [(expected, N_("Your maps are {channels} times too small, the number of "
                                                       "channels of layer {layer}: the map is the sum over channels of "
                                                       "weight x activation, not their mean."))], **fields)
    name_the_mistake(result, [(_cam(a, other), why) for other, why in _other_classes(model, index, x) for a in kept]
                     + [(layer_input, _LAYER_INPUT_MISTAKE)])
    fail(N_("Not the Grad-CAM maps at layer {layer}: weights = spatial mean of the gradient of each sample's target "
            "score, map = ReLU(sum over channels of weight x activation)."), layer=repr(layer))


def _shared_block_net() -> nn.Module:
    """The same conv block applied twice (shared weights), each call followed by an in-place ReLU."""

    def forward(m: nn.Module, x: torch.Tensor) -> torch.Tensor:
        return m.head(torch.relu_(m.block(torch.relu_(m.block(torch.relu_(m.stem(x)))))).mean(dim=(2, 3)))

    return seeded(Net(forward, stem=nn.Conv2d(3, 5, 3, padding=1), block=nn.Conv2d(5, 5, 3, padding=1),
                      head=nn.Linear(5, 6)), 63)


def _per_call_truth(model: nn.Module, x: torch.Tensor, targets: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(activation, gradient) of each call of ``model.block``, computed without hooks."""
    h = torch.relu(model.stem(x)).detach()
    first = model.block(h)
    second = model.block(torch.relu(first))
    logits = model.head(torch.relu(second).mean(dim=(2, 3)))
    gradients = torch.autograd.grad(logits.gather(1, torch.tensor(targets)[:, None]).sum(), [first, second])
    return [(first.detach(), gradients[0]), (second.detach(), gradients[1])]


@exercise("06.3")
def _per_call_test(cam_per_call: Callable[..., Any]) -> Verdict:
    model, x, targets = _shared_block_net(), torch.randn(2, 3, 6, 5, generator=generator(64)), [4, 1]
    x_before, truth = x.clone(), _per_call_truth(model, x, targets)
    result = cam_per_call(model, model.block, x, list(targets))
    require(isinstance(result, (list, tuple)) and len(result) == 2,
            N_("The block runs twice in one forward: return a list of 2 maps, one per call (got {got})."),
            got=len(result) if isinstance(result, (list, tuple)) else type(result).__name__)
    _tidy(model, x, x_before)
    maps = [tensor_result(item, (2, 6, 5), Text(N_("map {position}"), position=position))
            for position, item in enumerate(result)]
    expected = [_cam(a, g) for a, g in truth]
    if all(map(same, maps, expected)):
        return Verdict(True)
    swapped = [_cam(truth[0][0], truth[1][1]), _cam(truth[1][0], truth[0][1])]
    name_the_mistake(maps, [
        (swapped, N_("Activations and gradients are paired the wrong way round: the backward reaches the second call "
                     "first. Pair each gradient with its own call.")),
        (expected[::-1], N_("The maps are in reverse order: return them in the order of the calls.")),
    ], lambda got, wrong: all(map(same, got, wrong)))
    rectified = [_cam(a.clamp(min=0), g) for a, g in truth]
    require(not any(same(m, r) and not same(m, e) for m, r, e in zip(maps, rectified, expected)),
            N_("An in-place ReLU follows each call: the activation you kept was rectified after your hook ran. Keep a "
               "copy."))
    fail(N_("Not the Grad-CAM map of each call: each call's own activation, and the gradient at that call's output."))


EXERCISES = (_weights_test, _two_hooks_test, _per_call_test)
