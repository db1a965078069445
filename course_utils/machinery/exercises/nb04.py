"""Exercises of notebooks/04_backward_hooks.ipynb: the deprecated hook, clipping, capping, a gradient recorder."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.machinery.exercise_kit import *


def _deprecated_shapes() -> tuple[tuple[int, ...], ...]:
    layer, shapes = nn.Linear(5, 2, bias=False), []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with layer.register_backward_hook(lambda m, gi, go: shapes.append(tuple(tuple(g.shape) for g in gi))):
            layer(torch.ones(3, 5, requires_grad=True)).sum().backward()
    return shapes[0]


@exercise("04.1")
def _shapes_test(answer: Any) -> Verdict:
    answer = plain(answer)
    require(isinstance(answer, (list, tuple)) and all(isinstance(s, (list, tuple, torch.Size)) for s in answer),
            N_("Answer with a tuple of shapes, e.g. ((1,), (2, 2)): one shape per grad_input entry."))
    given = tuple(tuple(as_whole_number(d) for d in s) for s in answer)
    require(all(d is not None and d >= 0 for s in given for d in s),
            N_("Each shape is a tuple of whole numbers, e.g. (3, 5); got {answer!r}."), answer=answer)
    truth = _deprecated_shapes()
    if given == truth:
        return Verdict(True)
    require(len(given) != 1, N_("One entry is what a full backward hook reports. The deprecated hook reports every "
                                "input of the autograd node that produced the output."))
    require(len(given) == len(truth), N_("Without a bias, Linear is computed by a plain matrix product: how many "
                                         "inputs does that node have?"))
    fail(N_("Right number of entries; check the order and the weight's orientation (the node multiplies the input by "
            "the transposed weight)."))


def _backward_with(register: Callable[..., Any], hook: Callable[..., Any], run: Callable[[], torch.Tensor]) -> None:
    with register(hook):
        run().backward()


@exercise("04.2")
def _clip_test(hook: Callable[..., Any]) -> Verdict:
    draw = generator(42)
    torch.manual_seed(42)
    model = nn.Sequential(nn.Linear(4, 6), nn.ReLU(inplace=True), nn.Linear(6, 3))
    x, weights = randn(draw, 5, 4), randn(draw, 5, 3) * 4.0  # weights large enough that some entries exceed 1
    # Ground truth by plain autograd, no hook: the gradient at the hooked layer's input, clamped, sent further back.
    leaf = x.clone().requires_grad_()
    hidden = F.relu(model[0](leaf))
    loss = (model[2](hidden) * weights).sum()
    at_input = torch.autograd.grad(loss, hidden, retain_graph=True)[0]
    last_params = torch.autograd.grad(loss, [model[2].weight, model[2].bias], retain_graph=True)
    first = torch.autograd.grad(hidden, [leaf, model[0].weight], grad_outputs=at_input.clamp(-1.0, 1.0))
    leaf = x.clone().requires_grad_()
    _backward_with(model[2].register_full_backward_hook, hook, lambda: (model(leaf) * weights).sum())
    require_no_hooks(model, N_("Something registered another hook on the model."))
    unchanged = torch.autograd.grad((model[2](F.relu(model[0](x.clone().requires_grad_()))) * weights).sum(),
                                    model[0].weight)[0]
    require(model[0].weight.grad is not None and leaf.grad is not None,
            N_("No gradient reached the layers further back: return a tuple of gradients (or None)."))
    require(not torch.allclose(model[0].weight.grad, unchanged),
            N_("The gradient flowing back is unchanged: return the clamped gradients as a tuple, one entry per "
               "grad_input entry."))
    require(same(leaf.grad, first[0]) and same(model[0].weight.grad, first[1]),
            N_("What reaches the layers further back is not grad_input clamped to [-1, 1] entry by entry (batch of "
               "5)."))
    require(all(torch.allclose(p.grad, g, atol=1e-5) for p, g in zip([model[2].weight, model[2].bias], last_params)),
            N_("The hooked layer's own parameter gradients changed: a full backward hook only replaces grad_input."))
    conv = nn.Conv2d(2, 3, 3)
    images, scale = (randn(draw, 2, 2, 5, 5) * 3.0).requires_grad_(), randn(draw, 2, 3, 3, 3) * 5.0
    expected = torch.autograd.grad((conv(images) * scale).sum(), images)[0].clamp(-1.0, 1.0)
    with conv.register_full_backward_hook(hook):
        (conv(images) * scale).sum().backward()
        require(torch.allclose(images.grad, expected, atol=1e-5),
                N_("On a Conv2d with a batch of 2 the input gradient is not clamped to [-1, 1]."))
        try:
            (conv(images.detach()) * scale).sum().backward()  # no input requires grad: grad_input == (None,)
        except (AttributeError, TypeError) as error:
            fail(N_("When the input does not require grad, grad_input is (None,) and your hook failed ({error}): pass "
                    "None entries through unchanged."), error=type(error).__name__)
    # A Flatten in a residual: its grad_input is a view of grad_output, which the sum `flat + h` also hands to the
    # skip path -- the very same tensor. Only the Flatten's path is clamped.
    flatten, hidden = nn.Flatten(0, -1), (torch.randn(4, 6, generator=draw) * 3.0).requires_grad_()
    weights = torch.randn(24, generator=draw) * 4.0
    _backward_with(flatten.register_full_backward_hook, hook,
                   lambda: ((flatten(hidden) + hidden.flatten()) * weights).sum())
    require(torch.allclose(hidden.grad, weights.clamp(-1.0, 1.0).view(4, 6) + weights.view(4, 6), atol=1e-5),
            N_("On a Flatten in a residual (`flatten(h) + h.flatten()`) the skip path's gradient changed too: only the "
               "gradient through the hooked module may be clamped. Does your hook change a tensor PyTorch handed it "
               "in place? Return new tensors instead."))
    return Verdict(True)


def _capped(grad: torch.Tensor) -> torch.Tensor:
    norms = grad.flatten(1).norm(dim=1).clamp(min=1.0)
    return grad / norms.reshape(-1, *([1] * (grad.dim() - 1)))


@exercise("04.3")
def _cap_test(hook: Callable[..., Any]) -> Verdict:
    draw = generator(43)
    torch.manual_seed(43)
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    # d(loss)/d(output) is `weights` itself: per-sample norms 5, 0.5, 0 and 2.5.
    x, weights = randn(draw, 4, 3), torch.tensor([[3.0, 4.0], [0.3, -0.4], [0.0, 0.0], [-1.5, 2.0]])
    params, leaf = list(model.parameters()), x.clone().requires_grad_()
    expected = torch.autograd.grad(model(leaf), [leaf, *params], grad_outputs=_capped(weights))  # no hook
    leaf = x.clone().requires_grad_()
    _backward_with(model[2].register_full_backward_pre_hook, hook, lambda: (model(leaf) * weights).sum())
    got = [leaf.grad] + [p.grad for p in params]
    require(all(g is not None for g in got), N_("Some gradients are missing: return a tuple holding the new "
                                                "grad_output."))
    require(all(torch.isfinite(g).all() for g in got), N_("NaN or inf appeared: a sample whose gradient is all zeros "
                                                          "must stay zero (never divide by a zero norm)."))
    plain_grad = torch.autograd.grad((model(x.clone().requires_grad_()) * weights).sum(), params[0])[0]
    require(not torch.allclose(params[0].grad, plain_grad),
            N_("The gradients are unchanged: a backward pre-hook changes grad_output only by returning the new tuple."))
    clamped = torch.autograd.grad(model(x), params[0], grad_outputs=weights.clamp(-1.0, 1.0))[0]
    require(not torch.allclose(params[0].grad, clamped, atol=1e-5),
            N_("You clamped single entries; rescale each sample's whole gradient instead, so its direction is kept."))
    require(all(torch.allclose(g, e, atol=1e-5) for g, e in zip(got, expected)),
            N_("Each sample's gradient should be divided by max(1, its L2 norm): large ones shrink to norm 1, small "
               "ones (norm 0.5 here) stay as they are."))
    conv, images = nn.Conv2d(1, 2, 3), torch.randn(3, 1, 5, 5, generator=draw)
    scale = torch.randn(3, 2, 3, 3, generator=draw) * torch.tensor([4.0, 0.05, 1.0]).view(3, 1, 1, 1)
    on_conv = torch.autograd.grad(conv(images), conv.weight, grad_outputs=_capped(scale))[0]
    _backward_with(conv.register_full_backward_pre_hook, hook, lambda: (conv(images) * scale).sum())
    require(torch.allclose(conv.weight.grad, on_conv, atol=1e-5),
            N_("On a Conv2d (4-D gradient) each sample's norm is taken over all its other entries (channels and "
               "positions together)."))
    # A residual `layer(x) + x`: the sum hands the very same gradient tensor to the layer and to the skip path. Only
    # the layer's grad_output is capped; the skip path keeps the raw gradient.
    layer, inputs = nn.Linear(4, 4), torch.randn(3, 4, generator=draw).requires_grad_()
    weights = torch.randn(3, 4, generator=draw) * 3.0
    residual = torch.autograd.grad(layer(inputs), inputs, grad_outputs=_capped(weights))[0] + weights
    _backward_with(layer.register_full_backward_pre_hook, hook, lambda: ((layer(inputs) + inputs) * weights).sum())
    require(torch.allclose(inputs.grad, residual, atol=1e-5),
            N_("In a residual block (`layer(x) + x`) the skip path's gradient changed too: only the hooked layer's "
               "grad_output may be rescaled. Does your hook change a tensor PyTorch handed it in place? Return new "
               "tensors instead."))
    return Verdict(True)


def _convnet() -> nn.Sequential:
    torch.manual_seed(44)
    return nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(inplace=True), nn.Conv2d(3, 2, 3), nn.ReLU(inplace=True),
                         nn.Flatten(), nn.Linear(18, 2))


def _true_output_grads(model: nn.Sequential, x: torch.Tensor, weights: torch.Tensor) -> list[torch.Tensor]:
    """d(loss)/d(output of '0' and '2'), each module called by hand with an out-of-place ReLU."""
    first = model[0](x)
    second = model[2](F.relu(first))
    return list(torch.autograd.grad((model[5](F.relu(second).flatten(1)) * weights).sum(), [first, second]))


@exercise("04.4")
def _recorder_test(attach: Callable[[nn.Module, list[str], dict], Any]) -> Verdict:
    draw = generator(44)
    model = _convnet()
    batches = [torch.randn(4, 1, 7, 7, generator=draw) for _step in range(2)]
    weights = [torch.randn(4, 2, generator=draw) for _step in range(2)]
    truth = [_true_output_grads(model, x, w) for x, w in zip(batches, weights)]
    store: dict[str, torch.Tensor] = {}
    returned = attach(model, ["0", "2"], store)
    require(all(map(is_handle, returned)) if isinstance(returned, (list, tuple)) else is_handle(returned),
            N_("Return the handles (a list) or one object with .remove(), so the caller can remove the hooks."))
    with removing(returned):
        for step, (x, w) in enumerate(zip(batches, weights)):
            try:
                (model(x) * w).sum().backward()
            except RuntimeError as error:
                require("inplace" not in str(error).replace("-", "").replace(" ", ""),
                        N_("The forward failed because an in-place ReLU follows a layer with a full backward hook "
                           "(pytorch#61519). Catch the gradient another way."))
                raise
            require(list(store) != ["2"], N_("Only {key!r} is in the dict, the last name asked for: every hook stored "
                                             "under it. Which value of the loop variable does a hook defined in the "
                                             "loop see when it runs?"), key="2")
            require(sorted(store) == ["0", "2"], N_("After a backward, store should have the keys ['0', '2']; got "
                                                    "{keys}."), keys=sorted(store))
            matches = [all(torch.allclose(store[n], g, atol=1e-6) for n, g in zip(["0", "2"], grads))
                       for grads in truth]
            require(matches[step] or step == 0 or not matches[0],
                    N_("The second backward did not replace the first one's gradients: store the gradient at every "
                       "backward."))
            require(matches[step], N_("store[name] is not the gradient of the loss w.r.t. that layer's output (before "
                                      "the in-place ReLU after it)."))
        try:
            with torch.no_grad():
                model(batches[0])  # a forward without autograd must work too
        except RuntimeError as error:
            fail(N_("A forward under torch.no_grad() failed ({error}): its outputs do not require grad, so there is "
                    "nothing to hook -- skip them."), error=error)
    require_no_hooks(model, N_("After removing what you returned, {count} hook(s) remain on the model."))
    fresh = _convnet()
    try:
        attach(fresh, ["0", "no.such.layer"], {})
    except Exception:
        require_no_hooks(fresh, N_("A bad layer name raised, but the hook on layer '0' stayed: remove what you already "
                                   "attached before re-raising."))
        return Verdict(True)
    fail(N_("A layer name that does not exist should raise an error (get_submodule does)."))


EXERCISES = (_shapes_test, _clip_test, _cap_test, _recorder_test)
