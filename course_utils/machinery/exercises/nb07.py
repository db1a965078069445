"""Exercises of notebooks/07_hooks_in_training.ipynb: dropout on a layer's input, per-parameter clipping, dead units."""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.machinery.exercise_kit import *


def _by_hand(model: nn.Sequential, x: torch.Tensor, p: float | None, where: str = "input") -> torch.Tensor:
    """The model's forward written out with F.conv2d; with p given, F.dropout2d on layer '2''s input (or output)."""
    first, second = model[0], model[2]
    hidden = F.relu(F.conv2d(x, first.weight, first.bias, padding=1))
    if p is not None and where == "input":
        hidden = F.dropout2d(hidden, p=p, training=True)
    out = F.conv2d(hidden, second.weight, second.bias, padding=1)
    return F.relu(F.dropout2d(out, p=p, training=True) if p is not None and where == "output" else out)


@exercise("07.1")
def _dropout_test(attach: Callable[[nn.Module, str, float], Any]) -> Verdict:
    torch.manual_seed(11)
    model = nn.Sequential(nn.Conv2d(2, 5, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(5, 6, 3, padding=1),
                          nn.ReLU())
    x = torch.randn(8, 2, 6, 6, generator=generator(3))
    with torch.no_grad():
        before = model.eval()(x)  # computed before anything is attached: the eval-mode reference
    model.train()
    handle = attach(model, "2", 0.3)
    require_handle(handle, N_("Return the handle that register_forward_pre_hook gave you, so the caller can remove "
                              "it."))
    with removing(handle):
        hooked = sorted(key for key in hook_report(model) if "forward" in key
                        and not key.endswith(("_with_kwargs", "_always_called")))
        require(hooked != ["2._forward_hooks"], N_("That is a forward hook: it runs after layer '2' and sees its "
                                                   "output. Dropout before the layer needs a forward pre-hook, which "
                                                   "sees (and may replace) the input."))
        require(hooked == ["2._forward_pre_hooks"], N_("Expected one forward pre-hook, on layer '2' only; found "
                                                       "{found}."), found=hooked or Text(N_("none")))
        with torch.no_grad():
            require(torch.equal(model.eval()(x), before), N_("In eval mode the output changed: the hook must act only "
                                                             "when module.training."))
            model.train()
            torch.manual_seed(5)
            expected = _by_hand(model, x, 0.3)
            torch.manual_seed(5)
            output_dropped = _by_hand(model, x, 0.3, where="output")
        torch.manual_seed(5)
        got = model(x)  # with autograd on: the backward below must work too
        require(not torch.equal(got.detach(), _by_hand(model, x, None).detach()),
                N_("In training mode nothing was dropped: does your hook return the new input?"))
        require(not torch.equal(got.detach(), output_dropped),
                N_("Your hook dropped channels of layer '2''s output; drop them in its input."))
        require(torch.equal(got.detach(), expected), N_("In training mode the result is not layer '2' applied to "
                                                        "F.dropout2d(input, p) (with the p the caller passed)."))
        try:
            got.sum().backward()
        except RuntimeError as error:
            fail(N_("The forward worked but the backward failed ({error}): the input belongs to the previous layer, "
                    "which may need it for its backward. Build a new tensor and return it; change nothing in "
                    "place."), error=str(error).split(":")[0])
    require_no_hooks(model, N_("Removing the handle left hooks behind."))
    return Verdict(True)


def _accumulate(model: nn.Module, batches: list[torch.Tensor], after_each: Callable[[], None] | None = None
                ) -> list[torch.Tensor]:
    for batch in batches:
        model(batch).pow(2).sum().backward()
        if after_each is not None:
            after_each()
    return [p.grad.clone() for p in model.parameters()]


@exercise("07.2")
def _per_parameter_norm_test(attach: Callable[[nn.Module, float], Any]) -> Verdict:
    torch.manual_seed(21)
    reference_model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    model, plain_model = copy.deepcopy(reference_model), copy.deepcopy(reference_model)
    draw = generator(4)
    batches = [torch.randn(5, 3, generator=draw) * 3 for _batch in range(3)]
    max_norm = 2.0  # some gradients start below it (left alone), others above (rescaled)
    expected = _accumulate(reference_model, batches, lambda: [torch.nn.utils.clip_grad_norm_([param], max_norm)
                                                              for param in reference_model.parameters()])
    plain = _accumulate(plain_model, batches)
    handles = attach(model, max_norm)
    require(isinstance(handles, (list, tuple)) and all(map(is_handle, handles)),
            N_("Return the list of handles (one per parameter)."))
    with removing(handles):
        # the first parameter's hooks, called on their own while every gradient is large: only that .grad may change
        params = list(model.parameters())
        for p in params:
            p.grad = torch.full_like(p, 10.0)
        for hook in list((getattr(params[0], "_post_accumulate_grad_hooks", None) or {}).values()):
            with contextlib.suppress(Exception):  # an error shows again, and is reported, in the real backward
                hook(params[0])
        others = [p for p in params[1:] if not torch.equal(p.grad, torch.full_like(p, 10.0))]
        for p in params:
            p.grad = None
        require(not others, N_("The hook registered on the first parameter, called with that parameter, changed "
                               "another parameter's gradient: each hook must change the .grad of the parameter it is "
                               "called with. If you define the hook in a loop, which value of the loop variable does "
                               "it see when it runs?"))
        try:
            got = _accumulate(model, batches)
        except RuntimeError as error:
            # PyTorch words a post-accumulate-grad hook's return value as "should return None" or, for a tensor of
            # another shape or dtype, as "has changed the size/type of value": either way the hook returned something.
            require("should return None" not in str(error) and "has changed the" not in str(error),
                    N_("PyTorch stopped the backward: {error}. A post-accumulate-grad hook must change param.grad in "
                       "place and return None, and yours returned a value. What does your hook's last expression "
                       "evaluate to (a lambda returns it)?"), error=repr(str(error).strip()))
            raise
    require_no_hooks(model, N_("Removing the handles left hooks on the parameters."))
    require(not all(torch.allclose(g, p) for g, p in zip(got, plain)),
            N_("The gradients are unchanged: does every parameter get a hook that changes .grad in place?"))
    if all(torch.allclose(g, e, atol=1e-6) for g, e in zip(got, expected)):
        return Verdict(True)
    if any(float(g.norm()) > max_norm + 1e-5 for g in got):
        require(not all(float(g.abs().max()) <= max_norm + 1e-6 for g in got),
                N_("Each entry is within the limit but the norms are not: rescale the whole gradient (multiply by "
                   "max_norm / norm) instead of clamping entries."))
        fail(N_("After several backwards some parameter's gradient norm is still above max_norm: does the hook run "
                "after every accumulation, on every parameter?"))
    fail(N_("The norms are within the limit but the gradients differ from clip_grad_norm_ applied to each parameter "
            "after every backward: scale only when the norm is above max_norm."))


def _dead_masks(layers: list[nn.Module], x: torch.Tensor, *, of_inputs: bool = False) -> dict[str, torch.Tensor]:
    """Per ReLU, which units are zero for every sample of x (``of_inputs``: of its input, a typical mistake)."""
    found = {}
    with torch.no_grad():
        for index, layer in enumerate(layers):
            before, x = x, F.relu(x) if isinstance(layer, nn.ReLU) else layer(x)
            if isinstance(layer, nn.ReLU):
                found[str(index)] = ((before if of_inputs and not layer.inplace else x) == 0).all(dim=0)
    return found


def _fractions(masks: dict[str, torch.Tensor]) -> dict[str, float]:
    return {name: float(mask.float().mean()) for name, mask in masks.items()}


_ADVICE = {
    "last": N_("your fractions describe only the last batch. A unit is dead only if it was zero for every sample of "
               "every batch seen in the with-block: keep what earlier forwards showed."),
    "mean": N_("your fractions look like an average over batches. A unit that was non-zero once is alive for good, "
               "whatever the other batches say: keep a record per unit, not per batch."),
    "any": N_("you count a unit as dead when one batch had it zero for every sample; it is dead only if every batch "
              "did."),
    "input": N_("count the units of the ReLU's output, not of its input (which still holds negative values when the "
                "ReLU is not in-place)."),
}


def _wrong_fractions(layers: list[nn.Module], batches: list[torch.Tensor], got: dict[str, Any]) -> None:
    per_batch = [_dead_masks(layers, batch) for batch in batches]
    truth = _fractions(_dead_masks(layers, torch.cat(batches)))
    stacked = {name: torch.stack([masks[name] for masks in per_batch]) for name in truth}
    inputs = [_dead_masks(layers, batch, of_inputs=True) for batch in batches]
    guesses = {"last": _fractions(per_batch[-1]),
               "mean": {name: sum(_fractions(masks)[name] for masks in per_batch) / len(per_batch) for name in truth},
               "any": _fractions({name: masks.any(dim=0) for name, masks in stacked.items()}),
               "input": _fractions({name: torch.stack([m[name] for m in inputs]).all(dim=0) for name in truth})}
    rounded = {name: round(float(value), 3) if isinstance(value, (int, float, torch.Tensor)) else value
               for name, value in got.items()}
    shown = Text(N_("(expected {expected}, got {got})"), expected={n: round(v, 3) for n, v in truth.items()},
                 got=rounded)
    for label, values in guesses.items():
        require(values == truth or not all(abs(float(got[name]) - values[name]) <= 1e-6 for name in truth),
                N_("Wrong fractions: {advice} {shown}."), advice=Text(_ADVICE[label]), shown=shown)
    fail(N_("Wrong fractions after {count} forward(s): count the units of each ReLU's output that were zero for every "
            "sample of every batch so far {shown}."), count=len(batches), shown=shown)


@exercise("07.3")
def _counter_test(counter_class: Callable[[nn.Module], Any]) -> Verdict:
    torch.manual_seed(7)
    layers = [nn.Linear(4, 12), nn.ReLU(inplace=True), nn.Linear(12, 9), nn.ReLU(), nn.Linear(9, 3)]
    with torch.no_grad():
        layers[2].bias.sub_(0.2)  # more units of the second ReLU are silent
    model, draw = nn.Sequential(*layers), generator(8)
    # three batches of different sizes and spreads: some units are silent in one batch and active in another
    batches = [torch.randn(n, 4, generator=draw) * scale + shift
               for n, scale, shift in ((5, 1.0, 0.0), (3, 1.5, 0.5), (6, 0.7, -0.3))]
    counter = counter_class(model)
    require(hasattr(counter, "__enter__") and hasattr(counter, "__exit__"),
            N_("DeadUnitCounter must be a context manager (define __enter__ and __exit__)."))
    with counter as inside:
        require(inside is not None, N_("`with DeadUnitCounter(model) as counter:` binds counter to what __enter__ "
                                       "returns, and yours returned None: what must __enter__ return so that "
                                       "counter.fractions is your dict?"))
        require(count_hooks(model) == 2, N_("Inside the with-block expected one hook per ReLU (2), found {count}."),
                count=count_hooks(model))
        for seen in range(1, len(batches) + 1):
            with torch.no_grad():
                model(batches[seen - 1])
            fractions = getattr(inside, "fractions", None)
            truth = _fractions(_dead_masks(layers, torch.cat(batches[:seen])))
            require(isinstance(fractions, dict) and set(fractions) == set(truth),
                    N_("fractions should have one entry per ReLU, keyed by name {names}; got {got}."),
                    names=sorted(truth), got=repr(fractions))
            not_numbers = {name: type(value).__name__ for name, value in fractions.items()
                           if not (value.numel() == 1 if isinstance(value, torch.Tensor)
                                   else isinstance(value, (int, float)) and not isinstance(value, bool))}
            require(not not_numbers, N_("Each fraction should be one number (a float, e.g. from .item()); got "
                                        "{types}."), types=not_numbers)
            if any(abs(float(fractions[name]) - truth[name]) > 1e-6 for name in truth):
                _wrong_fractions(layers, batches[:seen], dict(fractions))
    require_no_hooks(model, N_("Hooks are still on the model after the with-block: remove them in __exit__."))
    failing = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), FailsOnPurpose(), nn.ReLU())
    with contextlib.suppress(RuntimeError):
        _count(counter_class, failing, batches[0])
    require_no_hooks(failing, N_("When the forward raises inside the with-block, the hooks stay: __exit__ runs then "
                                 "too, so remove them there (and do not swallow the error)."))
    the_error_gets_out(lambda: _count(counter_class, failing, batches[0]),
                       N_("The error raised inside the with-block disappeared: __exit__ must not swallow it."),
                       RuntimeError)
    return Verdict(True)


def _count(counter_class: Callable[[nn.Module], Any], model: nn.Module, batch: torch.Tensor) -> None:
    with counter_class(model):
        model(batch)


EXERCISES = (_dropout_test, _per_parameter_norm_test, _counter_test)
