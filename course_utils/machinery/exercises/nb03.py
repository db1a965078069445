"""Exercises of notebooks/03_forward_hooks.ipynb: a pre-hook, a feature extractor, a call tracer (on unseen models)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.machinery.exercise_kit import *

_HOOKS_STAY = N_("{count} hook(s) are still on the model: remove every hook before returning.")


def _standardised(x: torch.Tensor) -> torch.Tensor:
    """The hand formula: each row minus its mean, divided by its population standard deviation."""
    centred = x - x.mean(dim=1, keepdim=True)
    return centred / centred.pow(2).mean(dim=1, keepdim=True).sqrt()


@exercise("03.1")
def _standardise_test(hook: Callable[..., Any]) -> Verdict:
    draw = generator(31)
    layer = nn.Linear(5, 3)
    x = torch.randn(4, 5, generator=draw) * torch.tensor([[1.0], [4.0], [0.5], [9.0]]) + 7.0
    original = x.clone()
    with torch.no_grad():  # by hand, before anything is attached
        expected, raw = layer(_standardised(x)), layer(x)
        by_feature = layer((x - x.mean(0)) / x.std(0, unbiased=False))
        unbiased = layer((x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True))
    graph_leaf = original.clone().requires_grad_()
    expected_grad = torch.autograd.grad(layer(_standardised(graph_leaf)).sum(), graph_leaf)[0]
    with layer.register_forward_pre_hook(hook):
        with torch.no_grad():
            got = layer(x)
        require(torch.equal(x, original), N_("Your hook changed the caller's tensor in place: compute a new tensor and "
                                             "return it."))
        require(not torch.allclose(got, raw, atol=1e-5), N_("The layer received the raw input: a pre-hook changes the "
                                                             "input only by returning the new positional inputs."))
        require(not torch.allclose(got, by_feature, atol=1e-4), N_("You standardised each feature over the batch (dim "
                                                                    "0); standardise each sample (row, dim 1) on its "
                                                                    "own."))
        require(not torch.allclose(got, unbiased, atol=1e-4), N_("Close: use the population standard deviation "
                                                                  "(unbiased=False)."))
        require(torch.allclose(got, expected, atol=1e-4), N_("The layer did not receive each row with mean 0 and "
                                                             "standard deviation 1."))
        leaf = original.clone().requires_grad_()
        layer(leaf).sum().backward()
        require(leaf.grad is not None and torch.allclose(leaf.grad, expected_grad, atol=1e-4),
                N_("The gradient does not flow back to the caller's tensor: build the new input with tensor operations "
                   "(no .data, .detach() or torch.no_grad())."))
    pair = Net(lambda m, x, shift: m.fc(x) + shift, fc=nn.Linear(5, 3))  # two positional inputs
    a, shift = randn(draw, 3, 5) * 3.0 - 1.0, randn(draw, 3, 3)
    expected = (pair.fc(_standardised(a)) + shift).detach()
    with pair.register_forward_pre_hook(hook), torch.no_grad():
        try:
            got = pair(a, shift)
        except TypeError:
            fail(N_("With a second positional input the layer's forward failed: return a tuple with every positional "
                    "input, only the first one replaced."))
    require(torch.allclose(got, expected, atol=1e-4), N_("With two positional inputs, replace only the first and pass "
                                                         "the others on unchanged."))
    return Verdict(True)


@exercise("03.2")
def _extract_test(extract: Callable[[nn.Module, torch.Tensor, list[str]], Any]) -> Verdict:
    draw = generator(32)
    torch.manual_seed(32)
    convs = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.Conv2d(4, 3, 3),
                          nn.ReLU(inplace=True)).eval()
    x = torch.randn(3, 2, 8, 8, generator=draw)
    with torch.no_grad():  # by hand, each module called directly, ReLU out of place: the ground truth
        conv0 = convs[0](x)
        norm1 = convs[1](conv0)
        truth = {"0": conv0, "1": norm1, "3": convs[3](F.relu(norm1))}
    with watch_hooks(convs[0]) as seen:
        got = extract(convs, x, ["0", "1", "3"])
    require_no_hooks(convs, _HOOKS_STAY)
    require(not (isinstance(got, dict) and list(got) == ["3"]),
            N_("Only {key!r} is in the dict, the last name asked for: every hook stored under it. Which value of the "
               "loop variable does a hook defined in the loop see when it runs?"), key="3")
    require(isinstance(got, dict) and sorted(got) == ["0", "1", "3"],
            N_("Return a dict with one entry per requested name (['0', '1', '3']); got {keys}."),
            keys=sorted(got) if isinstance(got, dict) else type(got).__name__)
    require(all(isinstance(value, torch.Tensor) for value in got.values()),
            N_("Each entry should be the tensor that layer returned."))
    require(not any(value.requires_grad for value in got.values()),
            N_("Store detached tensors: a stored tensor that requires grad keeps the whole graph alive."))
    require(torch.equal(got["0"], truth["0"]), N_("Layer '0' holds the wrong values: hook the named layer and keep "
                                                  "what it returned."))
    if not torch.equal(got["1"], truth["1"]) or not torch.equal(got["3"], truth["3"]):
        require(not (torch.equal(got["1"], F.relu(truth["1"])) or torch.equal(got["3"], F.relu(truth["3"]))),
                N_("A layer followed by ReLU(inplace=True) came back rectified: the ReLU wrote into the memory your "
                   "entry shares. Keep a copy, taken when the layer returns."))
        fail(N_("Some entries do not hold what their layer returned."))
    # both in-place writes, `+= x` and the ReLU, hit fc's output
    residual = Net(lambda m, x: m.act(m.fc(x).add_(x)), fc=nn.Linear(4, 4), act=nn.ReLU(inplace=True))
    x = torch.randn(5, 4, generator=draw)
    fc_out = residual.fc(x).detach()
    got = extract(residual, x, ["fc"])
    require(not count_hooks(residual) and isinstance(got, dict) and "fc" in got,
            N_("On a second model the result was not a dict with the requested name, or hooks stayed."))
    require(torch.equal(got["fc"], fc_out), N_("On a residual block (`out += x` after the layer) the stored output "
                                               "changed afterwards: keep a copy taken when the layer returns."))
    nested = nn.Sequential(OrderedDict(stem=nn.Linear(3, 4), block=nn.Sequential(nn.Linear(4, 4),
                                                                                  nn.ReLU(inplace=True))))
    x = torch.randn(2, 3, generator=draw)
    with torch.no_grad():
        stem_out = nested.stem(x)
        inner_out = nested.block[0](stem_out)
    try:
        got = extract(nested, x, ["block.0", "stem"])
    except (AttributeError, KeyError, IndexError) as error:
        fail(N_("With the dotted name 'block.0' (layer 0 inside the model's `block`) your function raised {error}: "
                "find a layer by its dotted name (model.get_submodule, or the names of model.named_modules())."),
             error=f"{type(error).__name__}: {error}")
    require_no_hooks(nested, _HOOKS_STAY)
    require(isinstance(got, dict) and sorted(got) == ["block.0", "stem"],
            N_("With the dotted names ['block.0', 'stem'] the result was not a dict with those two keys."))
    require(torch.equal(got["block.0"], inner_out) and torch.equal(got["stem"], stem_out),
            N_("With the dotted name 'block.0' (layer 0 inside the model's `block`, followed by an in-place ReLU) the "
               "entries do not hold what those layers returned."))
    failing = nn.Sequential(nn.Linear(3, 3), FailsOnPurpose())
    the_error_gets_out(lambda: extract(failing, torch.ones(2, 3), ["0"]),
                       N_("The model's forward raised ValueError, but your function did not: let the error propagate "
                          "(clean up, then re-raise)."))
    require_no_hooks(failing, N_("When the forward raised, your hook stayed on the model: remove hooks in a `finally` "
                                 "block (or with a `with` statement)."))
    require(not seen.from_the_course, N_("The right outputs, but the hook on layer '0' is the course's own ({hook}), "
                                         "not yours: write extract with your own forward hooks."),
            hook=seen.from_the_course[0] if seen.from_the_course else "")
    return Verdict(True)


def _as_calls(calls: Any) -> list[tuple[Any, Any]] | None:
    """The tracer's calls as plain (name, shape tuple or None) pairs; None when they are not such pairs."""
    try:
        calls = plain(calls)  # a torch.Size becomes a tuple
    except TypeError:
        return None
    if not isinstance(calls, (list, tuple)) or not all(isinstance(c, (list, tuple)) and len(c) == 2 for c in calls):
        return None
    if not all(shape is None or isinstance(shape, tuple) and all(isinstance(d, int) and not isinstance(d, bool)
                                                                for d in shape) for _name, shape in calls):
        return None  # an int, a tensor or a string instead of a shape
    return [(name, shape) for name, shape in calls]


@exercise("03.3")
def _tracer_test(tracer_class: Callable[[nn.Module], Any]) -> Verdict:
    model = Net(lambda m, x: m.head(m.act(m.act(m.mid(m.act(x))))),  # act's 2nd and 3rd calls: the same shape
                act=nn.Tanh(), mid=nn.Linear(3, 4), head=nn.Sequential(nn.Linear(4, 2), nn.ReLU(inplace=True)))
    expected = [("act", (2, 3)), ("mid", (2, 4)), ("act", (2, 4)), ("act", (2, 4)), ("head.0", (2, 2)),
                ("head.1", (2, 2))]
    with tracer_class(model) as tracer:
        model(torch.ones(2, 3))
    require(tracer is not None, N_("`with CallTracer(model) as tracer:` binds tracer to what __enter__ returns, and "
                                   "yours returned None: what must __enter__ return so that tracer.calls is your "
                                   "list?"))
    found = getattr(tracer, "calls", None)
    calls = _as_calls(found)
    require(calls is not None, N_("tracer.calls should be a list of (name, shape) pairs, each shape a tuple of ints "
                                  "(tuple(output.shape)) or None; got {kind} {found!r:.80}."),
            kind=type(found).__name__, found=found)
    require_no_hooks(model, N_("{count} hook(s) are still on the model after the with block: remove them in __exit__."))
    require([name for name, _shape in calls].count("act") != 1,
            N_("A module called twice must appear twice: append one entry per call."))
    require(calls == expected or calls != list(dict.fromkeys(expected)),
            N_("A module called twice with inputs of the same shape must appear twice: append one entry per call, "
               "also when it equals an entry already in the list."))
    if calls != expected:
        containers = {name or "''" for name, module in model.named_modules() if list(module.children())}
        listed = [name or "''" for name, _shape in calls if (name or "''") in containers]
        require(not listed, N_("Your list has an entry for {name}, a module with children: list only the calls of leaf "
                               "modules (those without children)."), name=repr(listed[0]) if listed else "")
        first = next(i for i in range(max(len(calls), len(expected)))
                     if i >= len(calls) or i >= len(expected) or calls[i] != expected[i])
        fail(N_("Expected one (dotted name, output shape) per leaf-module call, in call order ({count} calls here); "
                "your list differs from entry {index} on: expected {expected}, got {got}."), count=len(expected),
             index=first, expected=expected[first] if first < len(expected) else Text(N_("nothing")),
             got=calls[first] if first < len(calls) else Text(N_("nothing")))
    model(torch.ones(2, 3))
    require(len(tracer.calls) == len(expected), N_("After the with block the tracer still recorded calls: remove the "
                                                   "hooks on exit."))
    failing, kept = nn.Sequential(nn.Linear(3, 4), FailsOnPurpose(), nn.Linear(4, 2)), list[Any]()
    the_error_gets_out(lambda: _trace(tracer_class, failing, kept),
                       N_("The forward raised ValueError inside the with block, but the error disappeared: __exit__ "
                          "must not swallow it (return False or None)."))
    require_no_hooks(failing, N_("When the forward raised, hooks stayed on the model: __exit__ runs then too — remove "
                                 "them there."))
    calls = _as_calls(getattr(kept[0], "calls", None))
    require(calls != [("0", (5, 4))], N_("The layer whose forward raised is missing: an ordinary forward hook does not "
                                         "run then. Which registration option makes it run anyway?"))
    require(calls == [("0", (5, 4)), ("1", None)], N_("For a forward that raised in layer '1' expected [('0', (5, 4)), "
                                                      "('1', None)]; got {calls}."), calls=calls)
    return Verdict(True)


def _trace(tracer_class: Callable[[nn.Module], Any], model: nn.Module, kept: list) -> None:
    with tracer_class(model) as tracer:
        kept.append(tracer)
        model(torch.ones(5, 3))


EXERCISES = (_standardise_test, _extract_test, _tracer_test)
