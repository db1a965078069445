"""Exercises of notebooks/07_hooks_in_training.ipynb: a dropout plug-in, per-parameter clipping after
accumulation, and a dead-unit monitor -- each a hook the learner writes, run on models they have not seen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.exercise_kit import Exercise, Verdict, expect_callable
from course_utils.hooks import count_hooks, hook_report


def _conv_model() -> nn.Sequential:
    torch.manual_seed(11)
    return nn.Sequential(nn.Conv2d(2, 5, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(5, 6, 3, padding=1), nn.ReLU())


def _by_hand(model: nn.Sequential, x: torch.Tensor, p: float | None) -> torch.Tensor:
    """The model's forward written out with F.conv2d, dropout2d on layer '2''s output when p is given."""
    first, second = model[0], model[2]
    hidden = F.relu(F.conv2d(x, first.weight, first.bias, padding=1))
    out = F.conv2d(hidden, second.weight, second.bias, padding=1)
    if p is not None:
        out = F.dropout2d(out, p=p, training=True)
    return F.relu(out)


def _dropout_test(attach: Callable[[nn.Module, str, float], Any]) -> Verdict:
    model = _conv_model()
    x = torch.randn(8, 2, 6, 6, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        model.eval()
        before = model(x)  # computed before anything is attached: the eval-mode reference
        model.train()
    handle = attach(model, "2", 0.3)
    if not callable(getattr(handle, "remove", None)):
        return Verdict(False, "Return the handle that register_forward_hook gave you, so the caller can remove it.")
    try:
        hooked = sorted(key for key, n in hook_report(model).items() if "forward" in key)
        if hooked != ["2._forward_hooks"]:
            return Verdict(False, f"Expected one forward hook, on layer '2' only; found {hooked or 'none'}.")
        with torch.no_grad():
            model.eval()
            if not torch.equal(model(x), before):
                return Verdict(False, "In eval mode the output changed: the hook must act only when module.training.")
            model.train()
            torch.manual_seed(5)
            got = model(x)
            torch.manual_seed(5)
            expected = _by_hand(model, x, 0.3)
        if torch.equal(got, _by_hand(model, x, None)):
            return Verdict(False, "In training mode nothing was dropped: does your hook return the new output?")
        if not torch.equal(got, expected):
            return Verdict(False, "In training mode the output is not F.dropout2d(output, p) of layer '2' "
                                  "(with the p the caller passed).")
    finally:
        handle.remove()
    if count_hooks(model):
        return Verdict(False, "Removing the handle left hooks behind.")
    return Verdict(True)


def _accumulate(model: nn.Module, batches: list[torch.Tensor], after_each: Callable[[], None] | None) -> list[torch.Tensor]:
    for batch in batches:
        model(batch).pow(2).sum().backward()
        if after_each is not None:
            after_each()
    return [p.grad.clone() for p in model.parameters()]


def _per_parameter_norm_test(attach: Callable[[nn.Module, float], Any]) -> Verdict:
    torch.manual_seed(21)
    reference_model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    model.load_state_dict(reference_model.state_dict())
    generator = torch.Generator().manual_seed(4)
    batches = [torch.randn(5, 3, generator=generator) * 3 for _ in range(3)]
    max_norm = 2.0  # some gradients start below it (left alone), others above (rescaled)

    def clip_each() -> None:
        for param in reference_model.parameters():
            torch.nn.utils.clip_grad_norm_([param], max_norm)

    expected = _accumulate(reference_model, batches, clip_each)
    plain = _accumulate(_copy(model), batches, None)
    handles = attach(model, max_norm)
    if not isinstance(handles, (list, tuple)) or not all(callable(getattr(h, "remove", None)) for h in handles):
        return Verdict(False, "Return the list of handles (one per parameter).")
    try:
        got = _accumulate(model, batches, None)
    finally:
        for handle in handles:
            handle.remove()
    if any(n for n in (count_hooks(p) for p in model.parameters())):
        return Verdict(False, "Removing the handles left hooks on the parameters.")
    if all(torch.allclose(g, p) for g, p in zip(got, plain)):
        return Verdict(False, "The gradients are unchanged: does every parameter get a hook that changes .grad in place?")
    if all(torch.allclose(g, e, atol=1e-6) for g, e in zip(got, expected)):
        return Verdict(True)
    if any(float(g.norm()) > max_norm + 1e-5 for g in got):
        if all(float(g.abs().max()) <= max_norm + 1e-6 for g in got):
            return Verdict(False, "Each entry is within the limit but the norms are not: rescale the whole gradient "
                                  "(multiply by max_norm / norm) instead of clamping entries.")
        return Verdict(False, "After several backwards some parameter's gradient norm is still above max_norm: "
                              "does the hook run after every accumulation, on every parameter?")
    return Verdict(False, "The norms are within the limit but the gradients differ from clip_grad_norm_ applied to "
                          "each parameter after every backward: scale only when the norm is above max_norm.")
    return Verdict(True)


def _copy(model: nn.Sequential) -> nn.Sequential:
    clone = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    clone.load_state_dict(model.state_dict())
    return clone


class _Explodes(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this layer fails on purpose")


def _dead_fractions(layers: list[nn.Module], x: torch.Tensor) -> dict[str, float]:
    """Run the layers one by one (no hooks) and measure each ReLU's dead fraction by hand."""
    found = {}
    with torch.no_grad():
        for index, layer in enumerate(layers):
            x = F.relu(x) if isinstance(layer, nn.ReLU) else layer(x)
            if isinstance(layer, nn.ReLU):
                found[str(index)] = float((x == 0).all(dim=0).float().mean())
    return found


def _counter_test(counter_class: Callable[[nn.Module], Any]) -> Verdict:
    torch.manual_seed(2)
    layers = [nn.Linear(4, 12), nn.ReLU(inplace=True), nn.Linear(12, 9), nn.ReLU(), nn.Linear(9, 3)]
    with torch.no_grad():
        layers[2].bias.sub_(0.6)  # some units of the second ReLU are dead for every sample
    model = nn.Sequential(*layers)
    x = torch.randn(16, 4, generator=torch.Generator().manual_seed(8))
    truth = _dead_fractions(layers, x)
    counter = counter_class(model)
    if not hasattr(counter, "__enter__") or not hasattr(counter, "__exit__"):
        return Verdict(False, "DeadUnitCounter must be a context manager (define __enter__ and __exit__).")
    with counter as inside:
        if count_hooks(model) != 2:
            return Verdict(False, f"Inside the with-block expected one hook per ReLU (2), found {count_hooks(model)}.")
        with torch.no_grad():
            model(x)
    fractions = getattr(inside if inside is not None else counter, "fractions", None)
    if count_hooks(model):
        return Verdict(False, "Hooks are still on the model after the with-block: remove them in __exit__.")
    if not isinstance(fractions, dict) or set(fractions) != set(truth):
        return Verdict(False, f"fractions should have one entry per ReLU, keyed by name {sorted(truth)}; got {fractions!r}.")
    if any(abs(float(fractions[name]) - truth[name]) > 1e-6 for name in truth):
        return Verdict(False, "Wrong fractions: count the units of the ReLU's *output* that are zero for every sample "
                              f"of the batch (expected {truth}, got {fractions}).")
    failing = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), _Explodes(), nn.ReLU())
    try:
        with counter_class(failing):
            failing(x)
    except RuntimeError:
        pass
    if count_hooks(failing):
        return Verdict(False, "When the forward raises inside the with-block, the hooks stay: __exit__ runs then "
                              "too, so remove them there (and do not swallow the error).")
    try:
        with counter_class(failing):
            failing(x)
    except RuntimeError:
        return Verdict(True)
    return Verdict(False, "The error raised inside the with-block disappeared: __exit__ must not swallow it.")


EXERCISES = (
    Exercise(
        "07.1",
        "Write attach_dropout2d(model, layer_name, p): a forward hook that applies F.dropout2d to one layer's "
        "output in training mode only, returning the handle.",
        expect_callable(_dropout_test, "a function attach_dropout2d(model, layer_name, p)"),
        hints=(
            "model.get_submodule(layer_name) finds the layer; a forward hook that returns a tensor replaces the output.",
            "Inside the hook, module.training tells you the mode. In training, return the output passed through "
            "torch.nn.functional's channel dropout with your p (tell it that it is training); in eval, return "
            "nothing, so the output stays as it is.",
        ),
        kind="write",
        praise="A plug-in regulariser: the model's code never changed, and the handle takes it away again.",
        blocked=("course_utils.regularize.dropout2d", "course_utils.regularize.drop_block"),
    ),
    Exercise(
        "07.2",
        "Write clip_norm_per_parameter(model, max_norm): post-accumulate-grad hooks that rescale each parameter's "
        "accumulated gradient to norm <= max_norm; return the handles.",
        expect_callable(_per_parameter_norm_test, "a function clip_norm_per_parameter(model, max_norm)"),
        hints=(
            "register_post_accumulate_grad_hook(hook) calls hook(param) after .grad was accumulated; change "
            "param.grad in place and return None.",
            "Compute norm = param.grad.norm(); only when it exceeds max_norm, multiply .grad by max_norm / norm.",
        ),
        kind="write",
        praise="Per-parameter clipping that a hook can do -- a global norm needs every gradient first.",
    ),
    Exercise(
        "07.3",
        "Write DeadUnitCounter(model), a context manager that hooks every nn.ReLU, records the fraction of dead "
        "units per ReLU, and removes its hooks on exit, also when forward raises.",
        expect_callable(_counter_test, "a class DeadUnitCounter(model)"),
        hints=(
            "In __enter__ loop over model.named_modules() and keep each handle; __exit__ runs even when the "
            "with-block raises.",
            "A forward hook gets the ReLU's output: (output == 0).all(dim=0) marks units dead for every sample; "
            "return False (or None) from __exit__ so errors propagate.",
        ),
        kind="write",
        stretch=True,
        praise="A monitor that cleans up after itself, whatever happens inside the with-block.",
    ),
)
