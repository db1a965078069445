"""Exercises of notebooks/03_forward_hooks.ipynb: a pre-hook that replaces the input, a feature extractor that
stays right with in-place layers, and a call tracer that also sees a forward that raised -- each run on models
the learner has not seen, against outputs computed by hand (no hook involved)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.machinery.messages import _, N_
from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable, plain, hooks_while_running
from course_utils.hooks import count_hooks


# -- 03.1: a forward pre-hook that standardises each sample ------------------------------------------------
def _standardised(x: torch.Tensor) -> torch.Tensor:
    """The hand formula: each row minus its mean, divided by its population standard deviation."""
    centred = x - x.mean(dim=1, keepdim=True)
    return centred / centred.pow(2).mean(dim=1, keepdim=True).sqrt()


class _Affine(nn.Module):
    """Two positional inputs: ``forward(x, shift) = fc(x) + shift``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(5, 3)

    def forward(self, x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        return self.fc(x) + shift


def _standardise_test(hook: Callable[..., Any]) -> Verdict:
    generator = torch.Generator().manual_seed(31)
    layer = nn.Linear(5, 3)
    x = torch.randn(4, 5, generator=generator) * torch.tensor([[1.0], [4.0], [0.5], [9.0]]) + 7.0
    original = x.clone()
    with torch.no_grad():  # by hand, before anything is attached
        expected = layer(_standardised(x))
        by_feature = layer((x - x.mean(0)) / x.std(0, unbiased=False))
        unbiased = layer((x - x.mean(1, keepdim=True)) / x.std(1, keepdim=True))
        raw = layer(x)
    graph_leaf = original.clone().requires_grad_()
    expected_grad = torch.autograd.grad(layer(_standardised(graph_leaf)).sum(), graph_leaf)[0]
    handle = layer.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            got = layer(x)
        if not torch.equal(x, original):
            return Verdict(False, _("Your hook changed the caller's tensor in place: compute a new tensor and return it."))
        if torch.allclose(got, raw, atol=1e-5):
            return Verdict(False, _("The layer received the raw input: a pre-hook changes the input only by "
                                    "returning the new positional inputs."))
        if torch.allclose(got, by_feature, atol=1e-4):
            return Verdict(False, _("You standardised each feature over the batch (dim 0); standardise each sample "
                                    "(row, dim 1) on its own."))
        if torch.allclose(got, unbiased, atol=1e-4):
            return Verdict(False, _("Close: use the population standard deviation (unbiased=False)."))
        if not torch.allclose(got, expected, atol=1e-4):
            return Verdict(False, _("The layer did not receive each row with mean 0 and standard deviation 1."))
        leaf = original.clone().requires_grad_()
        layer(leaf).sum().backward()
        if leaf.grad is None or not torch.allclose(leaf.grad, expected_grad, atol=1e-4):
            return Verdict(False, _("The gradient does not flow back to the caller's tensor: build the new input "
                                    "with tensor operations (no .data, .detach() or torch.no_grad())."))
    finally:
        handle.remove()

    pair = _Affine()
    a = torch.randn(3, 5, generator=generator) * 3.0 - 1.0
    shift = torch.randn(3, 3, generator=generator)
    with torch.no_grad():
        expected = pair.fc(_standardised(a)) + shift
    handle = pair.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            got = pair(a, shift)
    except TypeError:
        return Verdict(False, _("With a second positional input the layer's forward failed: return a tuple with "
                                "every positional input, only the first one replaced."))
    finally:
        handle.remove()
    if not torch.allclose(got, expected, atol=1e-4):
        return Verdict(False, _("With two positional inputs, replace only the first and pass the others on unchanged."))
    return Verdict(True)


_EXERCISE_03_1 = Exercise(
    "03.1",
    N_("Write a forward pre-hook that standardises each sample of the first input (mean 0, std 1 per row)."),
    expect_callable(_standardise_test, N_("a pre-hook standardise(module, args)")),
    hints=(
        N_("A forward pre-hook changes what forward receives only through what it returns."),
        N_("Return a tuple: the new first input (built from args[0] with out-of-place tensor operations, per row: "
           "keepdim=True keeps the shapes broadcastable), followed by the remaining entries of args."),
    ),
    kind="write",
    praise=N_("A pre-hook's return value replaces the positional inputs; the caller's tensor and its gradient are intact."),
)


# -- 03.2: a feature extractor that stays right with in-place layers ----------------------------------------
class _ResidualInPlace(nn.Module):
    """``out = fc(x); out += x; relu_(out)``: both in-place writes hit fc's output."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.fc(x)
        out += x
        return self.act(out)


class _Boom(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise ValueError("this layer always fails")


def _extract_test(extract: Callable[[nn.Module, torch.Tensor, list[str]], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(32)
    torch.manual_seed(32)
    convs = nn.Sequential(nn.Conv2d(2, 4, 3), nn.BatchNorm2d(4), nn.ReLU(inplace=True), nn.Conv2d(4, 3, 3),
                          nn.ReLU(inplace=True)).eval()
    x = torch.randn(3, 2, 8, 8, generator=generator)
    with torch.no_grad():  # by hand, each module called directly, ReLU out of place: the ground truth
        conv0 = convs[0](x)
        norm1 = convs[1](conv0)
        conv3 = convs[3](F.relu(norm1))
    truth = {"0": conv0, "1": norm1, "3": conv3}
    with hooks_while_running(convs[0]) as seen:
        got = extract(convs, x, ["0", "1", "3"])
    if count_hooks(convs):
        return Verdict(False, _("{count} hook(s) are still on the model: remove every hook before returning.").format(
            count=count_hooks(convs)))
    if isinstance(got, dict) and list(got) == ["3"]:
        return Verdict(False, _("Only {key!r} is in the dict, the last name asked for: every hook stored under it. "
                                "Which value of the loop variable does a hook defined in the loop see when it "
                                "runs?").format(key="3"))
    if not isinstance(got, dict) or sorted(got) != ["0", "1", "3"]:
        keys = sorted(got) if isinstance(got, dict) else type(got).__name__
        return Verdict(False, _("Return a dict with one entry per requested name (['0', '1', '3']); got {keys}.").format(keys=keys))
    if any(not isinstance(value, torch.Tensor) for value in got.values()):
        return Verdict(False, _("Each entry should be the tensor that layer returned."))
    if any(value.requires_grad for value in got.values()):
        return Verdict(False, _("Store detached tensors: a stored tensor that requires grad keeps the whole graph alive."))
    if not torch.equal(got["0"], truth["0"]):
        return Verdict(False, _("Layer '0' holds the wrong values: hook the named layer and keep what it returned."))
    if not torch.equal(got["1"], truth["1"]) or not torch.equal(got["3"], truth["3"]):
        rectified = torch.equal(got["1"], F.relu(truth["1"])) or torch.equal(got["3"], F.relu(truth["3"]))
        if rectified:
            return Verdict(False, _("A layer followed by ReLU(inplace=True) came back rectified: the ReLU wrote into "
                                    "the memory your entry shares. Keep a copy, taken when the layer returns."))
        return Verdict(False, _("Some entries do not hold what their layer returned."))

    residual = _ResidualInPlace()
    x = torch.randn(5, 4, generator=generator)
    with torch.no_grad():
        fc_out = residual.fc(x)
    got = extract(residual, x, ["fc"])
    if count_hooks(residual) or not isinstance(got, dict) or "fc" not in got:
        return Verdict(False, _("On a second model the result was not a dict with the requested name, or hooks stayed."))
    if not torch.equal(got["fc"], fc_out):
        return Verdict(False, _("On a residual block (`out += x` after the layer) the stored output changed "
                                "afterwards: keep a copy taken when the layer returns."))

    nested = nn.Sequential(OrderedDict(stem=nn.Linear(3, 4), block=nn.Sequential(nn.Linear(4, 4),
                                                                                  nn.ReLU(inplace=True))))
    x = torch.randn(2, 3, generator=generator)
    with torch.no_grad():
        stem_out = nested.stem(x)
        inner_out = nested.block[0](stem_out)
    try:
        got = extract(nested, x, ["block.0", "stem"])
    except (AttributeError, KeyError, IndexError) as error:
        return Verdict(False, _("With the dotted name 'block.0' (layer 0 inside the model's `block`) your function "
                                "raised {error}: find a layer by its dotted name (model.get_submodule, or the names "
                                "of model.named_modules()).").format(error=f"{type(error).__name__}: {error}"))
    if count_hooks(nested):
        return Verdict(False, _("{count} hook(s) are still on the model: remove every hook before returning.").format(
            count=count_hooks(nested)))
    if not isinstance(got, dict) or sorted(got) != ["block.0", "stem"]:
        return Verdict(False, _("With the dotted names ['block.0', 'stem'] the result was not a dict with those two "
                                "keys."))
    if not (torch.equal(got["block.0"], inner_out) and torch.equal(got["stem"], stem_out)):
        return Verdict(False, _("With the dotted name 'block.0' (layer 0 inside the model's `block`, followed by an "
                                "in-place ReLU) the entries do not hold what those layers returned."))

    failing = nn.Sequential(nn.Linear(3, 3), _Boom())
    try:
        extract(failing, torch.ones(2, 3), ["0"])
    except ValueError:
        pass
    else:
        return Verdict(False, _("The model's forward raised ValueError, but your function did not: let the error "
                                "propagate (clean up, then re-raise)."))
    if count_hooks(failing):
        return Verdict(False, _("When the forward raised, your hook stayed on the model: remove hooks in a `finally` "
                                "block (or with a `with` statement)."))
    if seen.from_the_course:
        return Verdict(False, _("The right outputs, but the hook on layer '0' is the course's own ({hook}), not yours: "
                                "write extract with your own forward hooks.").format(hook=seen.from_the_course[0]))
    return Verdict(True)


_EXERCISE_03_2 = Exercise(
    "03.2",
    N_("Write extract(model, x, names): the named layers' outputs, right even with in-place layers after them, "
       "and no hook left behind (also when forward raises)."),
    expect_callable(_extract_test, N_("a function extract(model, x, names)")),
    hints=(
        N_("A tensor stored by reference changes when a later in-place layer writes into its memory. When is the "
           "value still right, and what makes your entry independent of that memory?"),
        N_("The hook runs at the one moment the output is certainly right: keep something there that no later write "
           "can reach and that holds no graph. For the clean-up: which part of a try statement runs even when "
           "model(x) raises?"),
    ),
    kind="write",
    praise=N_("A copy taken the moment the layer returns cannot be overwritten; `finally` cleans up whatever happens."),
    observe_only=True,
)


# -- 03.3 (stretch): a call tracer that also sees a forward that raised --------------------------------------
class _Reuse(nn.Module):
    """``act`` is called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.act = nn.Tanh()
        self.mid = nn.Linear(3, 4)
        self.head = nn.Sequential(nn.Linear(4, 2), nn.ReLU(inplace=True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.act(self.act(self.mid(self.act(x)))))  # the second and third calls: the same shape


def _as_calls(calls: Any) -> list[tuple[Any, Any]] | None:
    """The tracer's calls as plain (name, shape tuple or None) pairs; None when they are not such pairs."""
    try:
        calls = plain(calls)
    except TypeError:
        return None
    if not isinstance(calls, (list, tuple)) or not all(isinstance(c, (list, tuple)) and len(c) == 2 for c in calls):
        return None
    pairs = []
    for name, shape in calls:
        if isinstance(shape, torch.Size):
            shape = tuple(shape)
        if shape is not None and not (isinstance(shape, tuple) and
                                      all(isinstance(d, int) and not isinstance(d, bool) for d in shape)):
            return None  # an int, a tensor or a string instead of a shape
        pairs.append((name, None if shape is None else tuple(shape)))
    return pairs


def _tracer_test(tracer_class: Callable[[nn.Module], Any]) -> Verdict:
    model = _Reuse()
    expected = [("act", (2, 3)), ("mid", (2, 4)), ("act", (2, 4)), ("act", (2, 4)), ("head.0", (2, 2)),
                ("head.1", (2, 2))]
    with tracer_class(model) as tracer:
        model(torch.ones(2, 3))
    if tracer is None:
        return Verdict(False, _("`with CallTracer(model) as tracer:` binds tracer to what __enter__ returns, and yours "
                                "returned None: what must __enter__ return so that tracer.calls is your list?"))
    calls = _as_calls(getattr(tracer, "calls", None))
    if calls is None:
        found = getattr(tracer, "calls", None)
        return Verdict(False, _("tracer.calls should be a list of (name, shape) pairs, each shape a tuple of ints "
                                "(tuple(output.shape)) or None; got {kind} {found!r:.80}.").format(
                                    kind=type(found).__name__, found=found))
    if count_hooks(model):
        return Verdict(False, _("{count} hook(s) are still on the model after the with block: remove "
                                "them in __exit__.").format(count=count_hooks(model)))
    if [name for name, _shape in calls].count("act") == 1:
        return Verdict(False, _("A module called twice must appear twice: append one entry per call."))
    if calls != expected and calls == list(dict.fromkeys(expected)):
        return Verdict(False, _("A module called twice with inputs of the same shape must appear twice: append one "
                                "entry per call, also when it equals an entry already in the list."))
    if calls != expected:
        containers = {name or "''" for name, module in model.named_modules() if list(module.children())}
        listed = [name or "''" for name, _shape in calls if (name or "''") in containers]
        if listed:
            return Verdict(False, _("Your list has an entry for {name}, a module with children: list only the calls "
                                    "of leaf modules (those without children).").format(name=repr(listed[0])))
        first = next(i for i in range(max(len(calls), len(expected)))
                     if i >= len(calls) or i >= len(expected) or calls[i] != expected[i])
        return Verdict(False, _("Expected one (dotted name, output shape) per leaf-module call, in call order ({count} "
                                "calls here); your list differs from entry {index} on: expected {expected}, got "
                                "{got}.").format(count=len(expected), index=first,
                                                 expected=expected[first] if first < len(expected) else _("nothing"),
                                                 got=calls[first] if first < len(calls) else _("nothing")))
    model(torch.ones(2, 3))
    if len(tracer.calls) != len(expected):
        return Verdict(False, _("After the with block the tracer still recorded calls: remove the hooks on exit."))

    failing = nn.Sequential(nn.Linear(3, 4), _Boom(), nn.Linear(4, 2))
    try:
        with tracer_class(failing) as tracer:
            failing(torch.ones(5, 3))
    except ValueError:
        pass
    else:
        return Verdict(False, _("The forward raised ValueError inside the with block, but the error disappeared: "
                                "__exit__ must not swallow it (return False or None)."))
    if count_hooks(failing):
        return Verdict(False, _("When the forward raised, hooks stayed on the model: __exit__ runs then too — "
                                "remove them there."))
    calls = _as_calls(getattr(tracer, "calls", None))
    if calls == [("0", (5, 4))]:
        return Verdict(False, _("The layer whose forward raised is missing: an ordinary forward hook does not run "
                                "then. Which registration option makes it run anyway?"))
    if calls != [("0", (5, 4)), ("1", None)]:
        return Verdict(False, _("For a forward that raised in layer '1' expected [('0', (5, 4)), ('1', None)]; "
                                "got {calls}.").format(calls=calls))
    return Verdict(True)


_EXERCISE_03_3 = Exercise(
    "03.3",
    N_("Write a context manager CallTracer(model) that lists (name, output shape or None) for every leaf-module call, "
       "also a call whose forward raised, and removes its hooks on exit."),
    expect_callable(_tracer_test, N_("a class CallTracer(model) used as `with CallTracer(model) as tracer:`")),
    hints=(
        N_("Leaf modules have no children. A reused module fires its hooks once per call, so append, never overwrite. "
           "One forward-hook option makes the hook run even when forward raises; what is `output` then?"),
        N_("A context manager has one method that runs on entry and one that runs on every exit, with or without an "
           "error: the handles must be kept where both can reach them. What the exit method returns decides whether "
           "an error goes on."),
    ),
    kind="write",
    stretch=True,
    praise=N_("always_call=True reports the failing layer; __exit__ cleans up and lets the error through."),
    observe_only=True,
)

EXERCISES = (_EXERCISE_03_1, _EXERCISE_03_2, _EXERCISE_03_3)
