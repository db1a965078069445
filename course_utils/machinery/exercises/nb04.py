"""Exercises of notebooks/04_backward_hooks.ipynb: what the deprecated hook reports, a full backward hook that
clips grad_input, a backward pre-hook that caps each sample's grad_output, and a gradient recorder that survives
in-place layers -- checked against plain autograd (no hook involved) on models the learner has not seen."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.machinery.messages import _, N_
from course_utils.machinery.exercise_kit import Exercise, Verdict, as_whole_number, expect_callable, plain
from course_utils.hooks import count_hooks


# -- 04.1 (predict): the deprecated hook on a Linear without bias ---------------------------------------------
def _deprecated_shapes() -> tuple[tuple[int, ...], ...]:
    """A live run: the shapes in the deprecated hook's grad_input for nn.Linear(5, 2, bias=False), batch 3."""
    layer = nn.Linear(5, 2, bias=False)
    shapes: list[tuple[tuple[int, ...], ...]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        handle = layer.register_backward_hook(lambda m, gi, go: shapes.append(tuple(tuple(g.shape) for g in gi)))
        try:
            layer(torch.ones(3, 5, requires_grad=True)).sum().backward()
        finally:
            handle.remove()
    return shapes[0]


def _shapes_test(answer: Any) -> Verdict:
    answer = plain(answer)
    if not isinstance(answer, (list, tuple)) or not all(isinstance(s, (list, tuple, torch.Size)) for s in answer):
        return Verdict(False, _("Answer with a tuple of shapes, e.g. ((1,), (2, 2)): one shape per grad_input entry."))
    sizes = [[as_whole_number(d) for d in s] for s in answer]
    if any(d is None or d < 0 for s in sizes for d in s):
        return Verdict(False, _("Each shape is a tuple of whole numbers, e.g. (3, 5); got {answer!r}.").format(answer=answer))
    truth = _deprecated_shapes()
    given = tuple(tuple(s) for s in sizes)
    if given == truth:
        return Verdict(True)
    if len(given) == 1:
        return Verdict(False, _("One entry is what a full backward hook reports. The deprecated hook reports every "
                                "input of the autograd node that produced the output."))
    if len(given) != len(truth):
        return Verdict(False, _("Without a bias, Linear is computed by a plain matrix product: how many inputs does "
                                "that node have?"))
    return Verdict(False, _("Right number of entries; check the order and the weight's orientation (the node "
                            "multiplies the input by the transposed weight)."))


_EXERCISE_04_1 = Exercise(
    "04.1",
    N_("Predict the shapes in grad_input of a deprecated backward hook on nn.Linear(5, 2, bias=False), batch of 3."),
    _shapes_test,
    hints=(
        N_("The deprecated hook forwards the raw gradients of the last autograd node of the module. Which operation "
           "computes a Linear layer that has no bias?"),
        N_("Example M2's fc1 shows the pattern with a bias: one gradient per operand of that node, in the order the "
           "operation takes them, each shaped like its operand rather than like the module's parameter. Without a "
           "bias, which operands are left?"),
    ),
    kind="predict",
    praise=N_("(input (3, 5), weightᵀ (5, 2)): the operands of the mm node -- the module's own view is lost."),
)


# -- 04.2: a full backward hook that clamps grad_input -----------------------------------------------------
def _grads(tensors: list[torch.Tensor]) -> list[torch.Tensor | None]:
    return [None if t.grad is None else t.grad.clone() for t in tensors]


def _clip_test(hook: Callable[..., Any]) -> Verdict:
    generator = torch.Generator().manual_seed(42)
    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(inplace=True), nn.Linear(6, 3))
    x = torch.randn(5, 4, generator=generator)
    weights = torch.randn(5, 3, generator=generator) * 4.0  # large enough that some entries exceed 1

    # Ground truth by plain autograd, no hook: the gradient at the hooked layer's input, clamped, sent further back.
    leaf = x.clone().requires_grad_()
    hidden = F.relu(model[0](leaf))
    loss = (model[2](hidden) * weights).sum()
    at_input = torch.autograd.grad(loss, hidden, retain_graph=True)[0]
    last_params = torch.autograd.grad(loss, [model[2].weight, model[2].bias], retain_graph=True)
    clipped = at_input.clamp(-1.0, 1.0)
    first = torch.autograd.grad(hidden, [leaf, model[0].weight], grad_outputs=clipped)
    if torch.equal(clipped, at_input):
        raise AssertionError("the check's case must need clipping")

    leaf = x.clone().requires_grad_()
    handle = model[2].register_full_backward_hook(hook)
    try:
        (model(leaf) * weights).sum().backward()
    finally:
        handle.remove()
    if count_hooks(model):
        return Verdict(False, _("Something registered another hook on the model."))
    unchanged = torch.autograd.grad((model[2](F.relu(model[0](x.clone().requires_grad_()))) * weights).sum(),
                                    model[0].weight)[0]
    if model[0].weight.grad is None or leaf.grad is None:
        return Verdict(False, _("No gradient reached the layers further back: return a tuple of gradients (or None)."))
    if torch.allclose(model[0].weight.grad, unchanged):
        return Verdict(False, _("The gradient flowing back is unchanged: return the clamped gradients as a tuple, "
                                "one entry per grad_input entry."))
    if not (torch.allclose(leaf.grad, first[0], atol=1e-5) and torch.allclose(model[0].weight.grad, first[1], atol=1e-5)):
        return Verdict(False, _("What reaches the layers further back is not grad_input clamped to [-1, 1] "
                                "entry by entry (batch of 5)."))
    if not all(torch.allclose(p.grad, g, atol=1e-5) for p, g in zip([model[2].weight, model[2].bias], last_params)):
        return Verdict(False, _("The hooked layer's own parameter gradients changed: a full backward hook only "
                                "replaces grad_input."))

    conv = nn.Conv2d(2, 3, 3)
    images = (torch.randn(2, 2, 5, 5, generator=generator) * 3.0).requires_grad_()
    scale = torch.randn(2, 3, 3, 3, generator=generator) * 5.0
    expected = torch.autograd.grad((conv(images) * scale).sum(), images)[0].clamp(-1.0, 1.0)
    handle = conv.register_full_backward_hook(hook)
    try:
        (conv(images) * scale).sum().backward()
        if not torch.allclose(images.grad, expected, atol=1e-5):
            return Verdict(False, _("On a Conv2d with a batch of 2 the input gradient is not clamped to [-1, 1]."))
        try:
            (conv(images.detach()) * scale).sum().backward()  # no input requires grad: grad_input == (None,)
        except (AttributeError, TypeError) as error:
            return Verdict(False, _("When the input does not require grad, grad_input is (None,) and your hook "
                                    "failed ({error}): pass None entries through unchanged.").format(
                                        error=type(error).__name__))
    finally:
        handle.remove()

    # A Flatten in a residual: its grad_input is a view of grad_output, which the sum `flat + h` also hands to the
    # skip path -- the very same tensor. Only the Flatten's path is clamped.
    flatten = nn.Flatten(0, -1)
    hidden = (torch.randn(4, 6, generator=generator) * 3.0).requires_grad_()
    weights = torch.randn(24, generator=generator) * 4.0
    expected = weights.clamp(-1.0, 1.0).view(4, 6) + weights.view(4, 6)
    handle = flatten.register_full_backward_hook(hook)
    try:
        ((flatten(hidden) + hidden.flatten()) * weights).sum().backward()
    finally:
        handle.remove()
    if not torch.allclose(hidden.grad, expected, atol=1e-5):
        return Verdict(False, _("On a Flatten in a residual (`flatten(h) + h.flatten()`) the skip path's gradient "
                                "changed too: only the gradient through the hooked module may be clamped. Does your "
                                "hook change a tensor PyTorch handed it in place? Return new tensors instead."))
    return Verdict(True)


_EXERCISE_04_2 = Exercise(
    "04.2",
    N_("Write a full backward hook that clamps the gradient w.r.t. the module's input to [-1, 1]."),
    expect_callable(_clip_test, N_("a hook clip(module, grad_input, grad_output)")),
    hints=(
        N_("A full backward hook replaces grad_input by returning a new tuple of the same length; it must not change "
           "its arguments in place. Some entries can be None."),
        N_("Build a tuple with one entry per grad_input entry: the clamped tensor, or None where the entry is None."),
    ),
    kind="write",
    praise=N_("Returning a tuple replaces grad_input: everything further back sees the clamped gradient, this layer's "
              "parameters do not."),
)


# -- 04.3: a backward pre-hook that caps each sample's grad_output -----------------------------------------
def _capped(grad: torch.Tensor) -> torch.Tensor:
    """The hand formula: each sample's gradient divided by max(1, its L2 norm)."""
    norms = grad.flatten(1).norm(dim=1).clamp(min=1.0)
    return grad / norms.reshape(-1, *([1] * (grad.dim() - 1)))


def _cap_test(hook: Callable[..., Any]) -> Verdict:
    generator = torch.Generator().manual_seed(43)
    torch.manual_seed(43)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    x = torch.randn(4, 3, generator=generator)
    # d(loss)/d(output) is `weights` itself: per-sample norms 5, 0.5, 0 and 2.5.
    weights = torch.tensor([[3.0, 4.0], [0.3, -0.4], [0.0, 0.0], [-1.5, 2.0]])
    params = list(model.parameters())

    leaf = x.clone().requires_grad_()
    output = model(leaf)  # ground truth by plain autograd: backward from the capped gradient, no hook
    expected = torch.autograd.grad(output, [leaf, *params], grad_outputs=_capped(weights))

    leaf = x.clone().requires_grad_()
    handle = model[2].register_full_backward_pre_hook(hook)
    try:
        (model(leaf) * weights).sum().backward()
    finally:
        handle.remove()
    got = [leaf.grad] + [p.grad for p in params]
    if any(g is None for g in got):
        return Verdict(False, _("Some gradients are missing: return a tuple holding the new grad_output."))
    if any(not torch.isfinite(g).all() for g in got):
        return Verdict(False, _("NaN or inf appeared: a sample whose gradient is all zeros must stay zero "
                                "(never divide by a zero norm)."))
    plain = torch.autograd.grad((model(x.clone().requires_grad_()) * weights).sum(), params[0])[0]
    if torch.allclose(params[0].grad, plain):
        return Verdict(False, _("The gradients are unchanged: a backward pre-hook changes grad_output only by "
                                "returning the new tuple."))
    clamped = torch.autograd.grad(model(x), params[0], grad_outputs=weights.clamp(-1.0, 1.0))[0]
    if torch.allclose(params[0].grad, clamped, atol=1e-5):
        return Verdict(False, _("You clamped single entries; rescale each sample's whole gradient instead, so its "
                                "direction is kept."))
    if not all(torch.allclose(g, e, atol=1e-5) for g, e in zip(got, expected)):
        return Verdict(False, _("Each sample's gradient should be divided by max(1, its L2 norm): large ones shrink "
                                "to norm 1, small ones (norm 0.5 here) stay as they are."))

    conv = nn.Conv2d(1, 2, 3)
    images = torch.randn(3, 1, 5, 5, generator=generator)
    scale = torch.randn(3, 2, 3, 3, generator=generator) * torch.tensor([4.0, 0.05, 1.0]).view(3, 1, 1, 1)
    expected = torch.autograd.grad(conv(images), conv.weight, grad_outputs=_capped(scale))[0]
    handle = conv.register_full_backward_pre_hook(hook)
    try:
        (conv(images) * scale).sum().backward()
    finally:
        handle.remove()
    if not torch.allclose(conv.weight.grad, expected, atol=1e-5):
        return Verdict(False, _("On a Conv2d (4-D gradient) each sample's norm is taken over all its other "
                                "entries (channels and positions together)."))

    # A residual `layer(x) + x`: the sum hands the very same gradient tensor to the layer and to the skip path. Only
    # the layer's grad_output is capped; the skip path keeps the raw gradient.
    layer = nn.Linear(4, 4)
    inputs = torch.randn(3, 4, generator=generator).requires_grad_()
    weights = torch.randn(3, 4, generator=generator) * 3.0
    expected = torch.autograd.grad(layer(inputs), inputs, grad_outputs=_capped(weights))[0] + weights
    handle = layer.register_full_backward_pre_hook(hook)
    try:
        ((layer(inputs) + inputs) * weights).sum().backward()
    finally:
        handle.remove()
    if not torch.allclose(inputs.grad, expected, atol=1e-5):
        return Verdict(False, _("In a residual block (`layer(x) + x`) the skip path's gradient changed too: only the "
                                "hooked layer's grad_output may be rescaled. Does your hook change a tensor PyTorch "
                                "handed it in place? Return new tensors instead."))
    return Verdict(True)


_EXERCISE_04_3 = Exercise(
    "04.3",
    N_("Write a backward pre-hook that rescales each sample's gradient w.r.t. the output to L2 norm at most 1."),
    expect_callable(_cap_test, N_("a hook cap(module, grad_output)")),
    hints=(
        N_("grad_output is a tuple; its first entry has the batch in dimension 0. A pre-hook replaces it by returning "
           "a new tuple. Samples already small must not change, and a zero gradient must not become NaN."),
        N_("Work out one divisor per sample -- its norm where that exceeds 1, else 1 -- with tensor operations (no "
           "Python loop or if), so that a zero norm never reaches a denominator; the divisors then need a shape that "
           "broadcasts over each sample's other dimensions."),
    ),
    kind="write",
    praise=N_("A pre-hook changes grad_output before the layer uses it: its parameters and everything further back see "
              "it."),
)


# -- 04.4 (stretch): output gradients that survive in-place layers -----------------------------------------
def _convnet() -> nn.Sequential:
    torch.manual_seed(44)
    return nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(inplace=True), nn.Conv2d(3, 2, 3), nn.ReLU(inplace=True),
                         nn.Flatten(), nn.Linear(18, 2))


def _true_output_grads(model: nn.Sequential, x: torch.Tensor, weights: torch.Tensor) -> list[torch.Tensor]:
    """Plain autograd, each module called by hand with an out-of-place ReLU: d(loss)/d(output of '0' and '2')."""
    first = model[0](x)
    second = model[2](F.relu(first))
    loss = (model[5](F.relu(second).flatten(1)) * weights).sum()
    return list(torch.autograd.grad(loss, [first, second]))


def _is_removable(returned: Any) -> bool:
    if isinstance(returned, (list, tuple)):
        return all(callable(getattr(handle, "remove", None)) for handle in returned)
    return callable(getattr(returned, "remove", None))


def _remove_all(returned: Any) -> None:
    for handle in returned if isinstance(returned, (list, tuple)) else [returned]:
        handle.remove()


def _recorder_test(attach: Callable[[nn.Module, list[str], dict], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(44)
    model = _convnet()
    batches = [torch.randn(4, 1, 7, 7, generator=generator) for _step in range(2)]
    weights = [torch.randn(4, 2, generator=generator) for _step in range(2)]
    truth = [_true_output_grads(model, x, w) for x, w in zip(batches, weights)]

    store: dict[str, torch.Tensor] = {}
    returned = attach(model, ["0", "2"], store)
    if not _is_removable(returned):
        _remove_all_quietly(model)
        return Verdict(False, _("Return the handles (a list) or one object with .remove(), so the caller can remove "
                                "the hooks."))
    try:
        for step, (x, w) in enumerate(zip(batches, weights)):
            try:
                (model(x) * w).sum().backward()
            except RuntimeError as error:
                if "inplace" in str(error).replace("-", "").replace(" ", ""):
                    return Verdict(False, _("The forward failed because an in-place ReLU follows a layer with a full "
                                            "backward hook (pytorch#61519). Catch the gradient another way."))
                raise
            if list(store) == ["2"]:
                return Verdict(False, _("Only {key!r} is in the dict, the last name asked for: every hook stored under "
                                        "it. Which value of the loop variable does a hook defined in the loop see "
                                        "when it runs?").format(key="2"))
            if sorted(store) != ["0", "2"]:
                return Verdict(False, _("After a backward, store should have the keys ['0', '2']; got {keys}.").format(
                    keys=sorted(store)))
            if not all(torch.allclose(store[name], g, atol=1e-6) for name, g in zip(["0", "2"], truth[step])):
                if step == 1 and all(torch.allclose(store[n], g, atol=1e-6) for n, g in zip(["0", "2"], truth[0])):
                    return Verdict(False, _("The second backward did not replace the first one's gradients: store "
                                            "the gradient at every backward."))
                return Verdict(False, _("store[name] is not the gradient of the loss w.r.t. that layer's output "
                                        "(before the in-place ReLU after it)."))
        try:
            with torch.no_grad():
                model(batches[0])  # a forward without autograd must work too
        except RuntimeError as error:
            return Verdict(False, _("A forward under torch.no_grad() failed ({error}): its outputs do not require "
                                    "grad, so there is nothing to hook -- skip them.").format(error=error))
    finally:
        _remove_all(returned)
    if count_hooks(model):
        return Verdict(False, _("After removing what you returned, {count} hook(s) remain on the model.").format(
            count=count_hooks(model)))

    fresh = _convnet()
    try:
        attach(fresh, ["0", "no.such.layer"], {})
    except Exception:  # noqa: BLE001 -- any error is right here; what matters is what is left behind
        if count_hooks(fresh):
            return Verdict(False, _("A bad layer name raised, but the hook on layer '0' stayed: remove what you "
                                    "already attached before re-raising."))
        return Verdict(True)
    _remove_all_quietly(fresh)
    return Verdict(False, _("A layer name that does not exist should raise an error (get_submodule does)."))


def _remove_all_quietly(model: nn.Module) -> None:
    """Clear hooks a wrong answer left on the check's own model (never the learner's)."""
    for module in model.modules():
        module._forward_hooks.clear()
        module._forward_pre_hooks.clear()
        module._backward_hooks.clear()
        module._backward_pre_hooks.clear()


_EXERCISE_04_4 = Exercise(
    "04.4",
    N_("Write record_output_grads(model, names, store): hooks that put d(loss)/d(output) of each named layer in "
       "store at every backward, also with ReLU(inplace=True) after the layer; return the handles."),
    expect_callable(_recorder_test, N_("a function record_output_grads(model, names, store)")),
    hints=(
        N_("A full backward hook wraps the layer's output, and the in-place ReLU after it then fails at forward time. "
           "A hook on the output tensor itself does not wrap anything -- but the tensor exists only during forward."),
        N_("A forward hook runs at every forward and sees the output while it exists: from there you can reach the "
           "output's gradient without wrapping anything. Under no_grad there is no gradient to wait for. For a bad "
           "name: which hooks are already attached when the error happens?"),
    ),
    kind="write",
    stretch=True,
    praise=N_("A tensor hook registered from a forward hook: no wrapping, so in-place layers are fine."),
    observe_only=True,
)

EXERCISES = (_EXERCISE_04_1, _EXERCISE_04_2, _EXERCISE_04_3, _EXERCISE_04_4)
