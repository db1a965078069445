"""Exercises of notebooks/06_grad_cam.ipynb: Grad-CAM's channel weights from a full backward hook, Grad-CAM from
one forward hook and one tensor hook, and one map per call of a shared module.

Every check builds its own small networks (an in-place ReLU after the hooked layer, layers whose maps are smaller
than the input (06.2), a batch with one class per sample, a non-square input; 06.1 also a network whose forward
raises) and computes the ground truth without hooks: the network split at the layer, the activation made a leaf, and
``torch.autograd.grad`` asked for the gradient at it. A wrong answer is matched against the usual mistakes, each
recomputed the same way (wrong class, the layer's input, the gradient after an in-place ReLU, sums for means).

Usage: ``catalogue()["06.2"]`` (through ``course_utils.machinery.exercises``); ``check("06.2", grad_cam_two_hooks)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from course_utils.machinery.exercise_kit import (
    Exercise, Verdict, expect_callable, hooks_while_running, lets_the_error_through, plain_tensor,
)
from course_utils.machinery.messages import _, N_
from course_utils.hooks import hook_report

_TARGETS = [6, 0, 3]


def _cam_net(inplace: bool, stride: int = 1) -> nn.Sequential:
    """Conv layers "0", "2", "4"; "3" is a ReLU that works in place when ``inplace``; ``stride=2``: layer "2" halves
    the spatial size, so the maps at "2" and "4" are smaller than the input (an upsampled map shows)."""
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
        nn.Conv2d(4, 6, 3, stride=stride, padding=1), nn.ReLU(inplace=inplace),
        nn.Conv2d(6, 5, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(5, 7),
    )
    generator = torch.Generator().manual_seed(61)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.6)
    return model.eval()


def _batch() -> torch.Tensor:
    return torch.randn(3, 3, 7, 5, generator=torch.Generator().manual_seed(62))  # not square: catches dim mix-ups


def _split_truth(model: nn.Sequential, index: int, x: torch.Tensor, targets: list[int],
                 every_column: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Activation of model[index] and the gradient of the target scores at it, without any hook.

    ``targets[i]`` is sample i's class; ``every_column``: the mistake ``logits[:, targets].sum()``, every target's
    score summed for every sample."""
    with torch.no_grad():
        activation = model[: index + 1](x)
    leaf = activation.clone().requires_grad_(True)
    logits = model[index + 1 :](leaf.clone())  # the clone: an in-place layer next must not touch the leaf
    if every_column:
        score = logits[:, torch.tensor(targets)].sum()
    else:
        score = logits.gather(1, torch.tensor(targets)[:, None]).sum()
    (gradient,) = torch.autograd.grad(score, leaf)
    return activation, gradient


def _other_classes(model: nn.Sequential, index: int, x: torch.Tensor,
                   targets: list[int]) -> list[tuple[str, torch.Tensor]]:
    """The gradient at model[index] for the usual wrong choices of class, each named: ``"top"`` (each sample's top
    class), ``"one"`` (one of the targets for the whole batch), ``"every"`` (``logits[:, targets]``: all of them)."""
    with torch.no_grad():
        top = model(x).argmax(dim=1).tolist()
    choices = [("top", top, False)] + [("one", [target] * len(targets), False) for target in dict.fromkeys(targets)]
    choices.append(("every", list(targets), True))
    return [(name, _split_truth(model, index, x, classes, every_column=every)[1])
            for name, classes, every in choices if every or classes != list(targets)]


def _hooks_left(model: nn.Module) -> list[str]:
    """Where hooks are still registered on ``model`` (``"2._forward_hooks"``), from course_utils.hooks."""
    return sorted(hook_report(model))


def _left_untidy(model: nn.Module, x: torch.Tensor, x_before: torch.Tensor) -> Verdict | None:
    """A ✗ when the learner's function left a hook on the model or changed the caller's x; None when all is tidy."""
    left = _hooks_left(model)
    if left:
        return Verdict(False, _("A hook is left behind ({where}): remove it with its handle, in a finally "
                                "block.").format(where=left[0]))
    if not torch.equal(x, x_before) or x.requires_grad or x.grad is not None:
        return Verdict(False, _("Your function changed the input x (its values, requires_grad or .grad): work on a "
                                "copy and leave the caller's tensor alone."))
    return None


def _as_tensor(result: Any, shape: tuple[int, ...], what: str) -> torch.Tensor | Verdict:
    if not isinstance(result, torch.Tensor):
        return Verdict(False, _("Return {what} as a tensor of shape {shape}, got {type}.").format(
            what=what, shape=shape, type=type(result).__name__))
    if tuple(result.shape) != shape:
        return Verdict(False, _("Expected {what} of shape {shape}, got {got}.").format(
            what=what, shape=shape, got=tuple(result.shape)))
    if not result.is_floating_point():
        return Verdict(False, _("Expected {what} as floating-point numbers, got a tensor of {dtype}: did an "
                                "integer tensor (or .long(), .int(), a comparison) slip into your computation?").format(
            what=what, dtype=result.dtype))
    try:
        return plain_tensor(result).detach().float()
    except TypeError as error:
        return Verdict(False, _("Return {what} as a plain tensor: {error}.").format(what=what, error=error))


def _class_mistake(choice: str) -> str:
    """The ✗ message of 06.1 and 06.2 for an answer explaining the wrong class (``choice`` as :func:`_other_classes`
    names it)."""
    if choice == "top":
        return _("You back-propagated each sample's top class, not the class asked for: sample i is explained for "
                 "targets[i], whatever the model predicts.")
    if choice == "one":
        return _("You back-propagated one class for the whole batch: each sample must be explained for its own class, "
                 "targets[i] for sample i (row i of the logits, column targets[i]).")
    return _("You back-propagated the sum of every target's score for every sample: logits[:, targets] takes all the "
             "target columns of each row (an N x N block of scores). Each row needs only its own score, "
             "logits[i, targets[i]]: look at torch.gather, which picks one column per row.")


class _Failure(RuntimeError):
    """What the check's failing network raises (06.1: the hook must go, also then)."""


class _FailsOnPurpose(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise _Failure("this layer fails on purpose")


# -- 06.1: channel weights from a full backward hook -------------------------------------------------------------
def _weights_test(channel_weights: Callable[..., Any]) -> Verdict:
    for layer, index in (("2", 2), ("4", 4)):
        model, x = _cam_net(inplace=False), _batch()
        x_before = x.clone()
        activation, gradient = _split_truth(model, index, x, _TARGETS)
        with hooks_while_running(model[index]) as seen:
            raw = channel_weights(model, layer, x, list(_TARGETS))
        if isinstance(raw, torch.Tensor) and tuple(raw.shape) == (3, model[index].in_channels):
            return Verdict(False, _("Shape {shape} has the channels of the layer's input: grad_input is the "
                                    "gradient at the input, grad_output[0] the one at the layer's output.").format(
                shape=tuple(raw.shape)))
        result = _as_tensor(raw, (3, activation.shape[1]),
                            _("one weight per sample and channel at layer {layer}").format(layer=repr(layer)))
        if isinstance(result, Verdict):
            return result
        untidy = _left_untidy(model, x, x_before)
        if untidy is not None:
            return untidy
        expected = gradient.mean(dim=(2, 3))
        if torch.allclose(result, expected, atol=1e-5):
            if "_backward_hooks" not in seen.kinds:
                return Verdict(False, _("The right weights, but while the model ran, layer {layer} carried no full "
                                        "backward hook: catch the gradient with register_full_backward_hook on that "
                                        "layer, as the exercise asks.").format(layer=repr(layer)))
            continue
        if torch.allclose(result, gradient.sum(dim=(2, 3)), atol=1e-5):
            return Verdict(False, _("That is the spatial sum: Grad-CAM's weight is the spatial mean of the gradient."))
        for choice, other in _other_classes(model, index, x, _TARGETS):
            if torch.allclose(result, other.mean(dim=(2, 3)), atol=1e-5):
                return Verdict(False, _class_mistake(choice))
        return Verdict(False, _("Not Grad-CAM's channel weights at layer {layer}: the spatial mean of the gradient of "
                                "each sample's target score at the layer's output.").format(layer=repr(layer)))
    failing = nn.Sequential(*_cam_net(inplace=False), _FailsOnPurpose())  # layer "2" is there; the forward raises
    refused = lets_the_error_through(lambda: channel_weights(failing, "2", _batch(), list(_TARGETS)), _Failure)
    if refused is not None:
        return refused
    left = _hooks_left(failing)
    if left:
        return Verdict(False, _("When the model raises, your hook stays behind ({where}): remove it with its handle "
                                "in a finally block.").format(where=left[0]))
    return Verdict(True)


_EXERCISE_06_1 = Exercise(
    "06.1",
    N_("Write channel_weights(model, layer_name, x, targets): Grad-CAM's weights (N, C) caught by a full backward "
       "hook."),
    expect_callable(_weights_test, N_("a function channel_weights(model, layer_name, x, targets)")),
    hints=(
        N_("register_full_backward_hook gives hook(module, grad_input, grad_output); which of the two belongs to the "
           "layer's output?"),
        N_("grad_output[0] has the output's shape (N, C, h, w); Grad-CAM's weight is a mean over two of those "
           "dimensions, and one backward can serve every sample of the batch."),
    ),
    kind="write",
    praise=N_("grad_output[0] is the gradient at the layer's output -- the same tensor a tensor hook on the output "
              "sees."),
    observe_only=True,
)


# -- 06.2: Grad-CAM from one forward hook and one tensor hook ---------------------------------------------------------
def _cam(activation: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    return (gradient.mean(dim=(2, 3), keepdim=True) * activation).sum(dim=1).clamp(min=0)


def _scaled(maps: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each map scaled to [0, 1] by min and max, and by max alone (what display code does)."""
    low = maps.amin(dim=(1, 2), keepdim=True)
    high = maps.amax(dim=(1, 2), keepdim=True)
    return (maps - low) / (high - low).clamp(min=1e-12), maps / high.clamp(min=1e-12)


_LAYER_INPUT_MISTAKE_TEXT = N_("These are the Grad-CAM maps of the layer's input, not of its output: a forward hook is "
                                "called as hook(module, args, output), and args is what goes into the layer. Keep "
                                "the output, and register the tensor hook on it.")


def _full_backward_hook_mistake(error: RuntimeError, layer: str) -> Verdict:
    """06.2's ✗ for PyTorch's refusal to let an in-place op change the output of a layer with a full backward hook
    (the exercise asks for a tensor hook); any other error goes on to the learner as it is."""
    if "BackwardHookFunction" not in str(error):
        raise error
    return Verdict(False, _("PyTorch refused an in-place change of the output of layer {layer}: a full backward hook "
                            "forbids that (notebook 04), and the ReLU after the layer works in place. This exercise "
                            "asks for a tensor hook, registered on the output inside the forward hook.").format(
        layer=repr(layer)))


def _layer_input_cam(model: nn.Sequential, index: int, x: torch.Tensor) -> torch.Tensor:
    """The Grad-CAM maps of model[index]'s input (the mistake: args instead of output)."""
    return _cam(*_split_truth(model, index - 1, x, _TARGETS))


def _two_hooks_test(grad_cam_two_hooks: Callable[..., Any]) -> Verdict:
    # (network, layer): an in-place ReLU right after layer "2"; with stride 2 the layer's maps (4x3) are smaller than
    # the input (7x5), so a map upsampled to the input's size does not pass for the raw one
    for stride, layer, index in ((2, "2", 2), (2, "4", 4), (1, "2", 2), (1, "4", 4)):
        model, x = _cam_net(inplace=True, stride=stride), _batch()
        x_before = x.clone()
        activation, gradient = _split_truth(model, index, x, _TARGETS)
        shape = (3,) + tuple(activation.shape[-2:])
        try:
            with hooks_while_running(model[index]) as seen:
                raw = grad_cam_two_hooks(model, layer, x, list(_TARGETS))
        except RuntimeError as error:
            return _full_backward_hook_mistake(error, layer)
        input_shape = (3,) + tuple(x.shape[-2:])
        if isinstance(raw, torch.Tensor) and tuple(raw.shape) == input_shape != shape:
            as_maps, layer_input = _as_tensor(raw, input_shape, "maps"), _layer_input_cam(model, index, x)
            if isinstance(as_maps, torch.Tensor) and layer_input.shape == as_maps.shape \
                    and torch.allclose(as_maps, layer_input, atol=1e-5):
                return Verdict(False, _(_LAYER_INPUT_MISTAKE_TEXT))
            return Verdict(False, _("Your maps have the input's size {input}, but the output of layer {layer} is {size}: "
                                    "return the raw maps at the layer's own resolution, after the ReLU and before "
                                    "any upsampling or scaling (step 3 of section 1 is for display only).").format(
                input=tuple(x.shape[-2:]), layer=repr(layer), size=tuple(activation.shape[-2:])))
        result = _as_tensor(raw, shape,
                            _("one raw map per sample at layer {layer} (no upsampling)").format(layer=repr(layer)))
        if isinstance(result, Verdict):
            return result
        untidy = _left_untidy(model, x, x_before)
        if untidy is not None:
            return untidy
        expected = _cam(activation, gradient)
        if torch.allclose(result, expected, atol=1e-5):
            if seen.from_the_course:
                return Verdict(False, _("The right maps, but the hook on layer {layer} is the course's own ({hook}), "
                                        "not yours: write the forward hook and the tensor hook yourself.").format(
                                            layer=repr(layer), hook=seen.from_the_course[0]))
            continue
        return _what_went_wrong(result, expected, model, layer, index, x, activation, gradient)
    return Verdict(True)


def _what_went_wrong(result: torch.Tensor, expected: torch.Tensor, model: nn.Sequential, layer: str, index: int,
                     x: torch.Tensor, activation: torch.Tensor, gradient: torch.Tensor) -> Verdict:
    """06.2's ✗ for maps of the right shape that are not Grad-CAM's: the usual mistakes, each recomputed and named."""
    if any(torch.allclose(result, scaled, atol=1e-5) for scaled in _scaled(expected)):
        return Verdict(False, _("Your maps are scaled: return the raw maps, after the ReLU and before any scaling "
                                "or upsampling (step 3 of section 1 is for display only)."))
    if torch.allclose(result, _cam(activation.clamp(min=0), gradient), atol=1e-5):
        return Verdict(False, _("At layer {layer} the ReLU after the layer works in place: the activation you kept "
                                "was rectified after your hook ran. Keep a copy of it.").format(layer=repr(layer)))
    following = model[index + 1]
    if isinstance(following, nn.ReLU) and following.inplace:
        rewritten = _split_truth(model, index + 1, x, _TARGETS)[1]  # the gradient at the in-place ReLU's output
        if any(torch.allclose(result, _cam(kept, rewritten), atol=1e-5)
               for kept in (activation, activation.clamp(min=0))):
            return Verdict(False, _("At layer {layer} you caught the gradient at the in-place ReLU's output, not at "
                                    "the layer's output: once the ReLU has rewritten the tensor, a tensor hook "
                                    "registered on it afterwards (or torch.autograd.grad asked about it) gets the "
                                    "gradient after the ReLU. Register the tensor hook inside the forward hook, "
                                    "before the ReLU runs (notebook 04's fix 2).").format(layer=repr(layer)))
    if torch.allclose(result, (activation * gradient).sum(dim=1).clamp(min=0), atol=1e-5):
        return Verdict(False, _("That is the element-wise product (article 003): average the gradient over "
                                "space first."))
    if torch.allclose(result, (gradient.mean(dim=(2, 3), keepdim=True) * activation).sum(dim=1), atol=1e-5):
        return Verdict(False, _("Almost: Grad-CAM keeps only the positive part (ReLU) of the weighted sum."))
    cells, channels = activation.shape[2] * activation.shape[3], activation.shape[1]
    if torch.allclose(result, expected * cells, atol=1e-5 * cells):
        return Verdict(False, _("Your maps are {cells} times too large, the number of positions (h x w) of the "
                                "layer's output: Grad-CAM's channel weight is the spatial mean of the gradient, not "
                                "its sum.").format(cells=cells))
    if torch.allclose(result * channels, expected, atol=1e-5):
        return Verdict(False, _("Your maps are {channels} times too small, the number of channels of layer {layer}: "
                                "the map is the sum over channels of weight x activation, not their "
                                "mean.").format(channels=channels, layer=repr(layer)))
    for choice, other in _other_classes(model, index, x, _TARGETS):
        if any(torch.allclose(result, _cam(kept, other), atol=1e-5) for kept in (activation, activation.clamp(min=0))):
            return Verdict(False, _class_mistake(choice))
    layer_input = _layer_input_cam(model, index, x)
    if layer_input.shape == result.shape and torch.allclose(result, layer_input, atol=1e-5):
        return Verdict(False, _(_LAYER_INPUT_MISTAKE_TEXT))
    return Verdict(False, _("Not the Grad-CAM maps at layer {layer}: weights = spatial mean of the gradient of "
                            "each sample's target score, map = ReLU(sum over channels of weight x "
                            "activation).").format(layer=repr(layer)))


_EXERCISE_06_2 = Exercise(
    "06.2",
    N_("Write grad_cam_two_hooks(model, layer_name, x, targets) from one forward hook and one tensor hook."),
    expect_callable(_two_hooks_test, N_("a function grad_cam_two_hooks(model, layer_name, x, targets)")),
    hints=(
        N_("Inside the forward hook you hold the layer's output: keep it, and register a tensor hook on it that keeps "
           "its gradient."),
        N_("An in-place ReLU right after the layer rewrites the very tensor your hook saw, after the hook ran: keep a "
           "detached copy. Remove the forward hook in a finally block."),
    ),
    kind="write",
    praise=N_("Two hooks, one copy, one handle removed: the whole of Grad-CAM's plumbing."),
    observe_only=True,
)


# -- 06.3 (stretch): one map per call of a shared module ---------------------------------------------------------------
class _SharedBlockNet(nn.Module):
    """The same conv block applied twice (shared weights), each call followed by an in-place ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 5, 3, padding=1)
        self.block = nn.Conv2d(5, 5, 3, padding=1)
        self.head = nn.Linear(5, 6)
        generator = torch.Generator().manual_seed(63)
        with torch.no_grad():
            for parameter in self.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu_(self.stem(x))
        h = torch.relu_(self.block(h))
        h = torch.relu_(self.block(h))
        return self.head(h.mean(dim=(2, 3)))

    def truth(self, x: torch.Tensor, targets: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(activation, gradient) of each call of ``block``, computed without hooks."""
        with torch.no_grad():
            h = torch.relu(self.stem(x))
        first = self.block(h)
        second = self.block(torch.relu(first))
        logits = self.head(torch.relu(second).mean(dim=(2, 3)))
        score = logits.gather(1, torch.tensor(targets)[:, None]).sum()
        gradients = torch.autograd.grad(score, [first, second])
        return [(first.detach(), gradients[0]), (second.detach(), gradients[1])]


def _per_call_test(cam_per_call: Callable[..., Any]) -> Verdict:
    model = _SharedBlockNet().eval()
    x = torch.randn(2, 3, 6, 5, generator=torch.Generator().manual_seed(64))
    x_before = x.clone()
    targets = [4, 1]
    truth = model.truth(x, targets)
    result = cam_per_call(model, model.block, x, list(targets))
    if not isinstance(result, (list, tuple)) or len(result) != 2:
        got = len(result) if isinstance(result, (list, tuple)) else type(result).__name__
        return Verdict(False, _("The block runs twice in one forward: return a list of 2 maps, one per call "
                                "(got {got}).").format(got=got))
    untidy = _left_untidy(model, x, x_before)
    if untidy is not None:
        return untidy
    maps = []
    for position, item in enumerate(result):
        checked = _as_tensor(item, (2, 6, 5), _("map {position}").format(position=position))
        if isinstance(checked, Verdict):
            return checked
        maps.append(checked)
    expected = [_cam(a, g) for a, g in truth]
    if all(torch.allclose(m, e, atol=1e-5) for m, e in zip(maps, expected)):
        return Verdict(True)
    swapped = [_cam(truth[0][0], truth[1][1]), _cam(truth[1][0], truth[0][1])]
    if all(torch.allclose(m, e, atol=1e-5) for m, e in zip(maps, swapped)):
        return Verdict(False, _("Activations and gradients are paired the wrong way round: the backward reaches the "
                                "second call first. Pair each gradient with its own call."))
    if all(torch.allclose(m, e, atol=1e-5) for m, e in zip(maps, reversed(expected))):
        return Verdict(False, _("The maps are in reverse order: return them in the order of the calls."))
    rectified = [_cam(a.clamp(min=0), g) for a, g in truth]
    if any(torch.allclose(m, r, atol=1e-5) and not torch.allclose(m, e, atol=1e-5)
           for m, r, e in zip(maps, rectified, expected)):
        return Verdict(False, _("An in-place ReLU follows each call: the activation you kept was rectified after your "
                                "hook ran. Keep a copy."))
    return Verdict(False, _("Not the Grad-CAM map of each call: each call's own activation, and the gradient at that "
                            "call's output."))


_EXERCISE_06_3 = Exercise(
    "06.3",
    N_("Write cam_per_call(model, module, x, targets): one raw Grad-CAM map per call of a module used twice in "
       "forward."),
    expect_callable(_per_call_test, N_("a function cam_per_call(model, module, x, targets)")),
    hints=(
        N_("A forward hook fires once per call, and each call's output is a different tensor with its own tensor "
           "hook."),
        N_("The tensor hooks fire during the backward, last call first: give each one the position of its call (a "
           "closure or a default argument), so that it stores its gradient in the right place."),
    ),
    kind="write",
    stretch=True,
    praise=N_("A forward hook per call and a tensor hook per output: shared modules need no special case."),
    observe_only=True,
)

EXERCISES = (_EXERCISE_06_1, _EXERCISE_06_2, _EXERCISE_06_3)
