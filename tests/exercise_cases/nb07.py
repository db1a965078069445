"""Answers for the checks of notebooks/07_hooks_in_training.ipynb."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.hooks import HookRegistry
from course_utils.regularize import clip_grad_value_hooks, dropout2d
from tests.exercise_cases import Cases


def dropout_with_module(model, layer_name, p):  # noqa: ANN001, ANN201 -- nn.Dropout2d inside the hook
    drop = nn.Dropout2d(p)
    layer = dict(model.named_modules())[layer_name]

    def hook(module, args, output):  # noqa: ANN001, ANN202
        return drop(output) if module.training else output

    return layer.register_forward_hook(hook)


def dropout_always(model, layer_name, p):  # noqa: ANN001, ANN201
    return model.get_submodule(layer_name).register_forward_hook(lambda m, a, out: F.dropout2d(out, p=p, training=True))


def dropout_fixed_p(model, layer_name, p):  # noqa: ANN001, ANN201
    return model.get_submodule(layer_name).register_forward_hook(
        lambda m, a, out: F.dropout2d(out, p=0.5, training=True) if m.training else None)


def dropout_no_handle(model, layer_name, p):  # noqa: ANN001, ANN201
    model.get_submodule(layer_name).register_forward_hook(
        lambda m, a, out: F.dropout2d(out, p=p, training=True) if m.training else None)


def dropout_wrong_layer(model, layer_name, p):  # noqa: ANN001, ANN201
    return model[0].register_forward_hook(lambda m, a, out: F.dropout2d(out, p=p, training=True) if m.training else None)


def norm_with_clip_grad_norm(model, max_norm):  # noqa: ANN001, ANN201 -- torch's own function inside the hook
    def hook(param):  # noqa: ANN001, ANN202
        torch.nn.utils.clip_grad_norm_([param], max_norm)  # returns the norm: the hook itself must return None

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def norm_by_clamping(model, max_norm):  # noqa: ANN001, ANN201 -- clamps entries: the typical mix-up
    registry = clip_grad_value_hooks(model, max_norm)
    return [registry]


def norm_always_rescaled(model, max_norm):  # noqa: ANN001, ANN201 -- also scales small gradients up
    def hook(param):  # noqa: ANN001, ANN202
        param.grad.mul_(max_norm / param.grad.norm())

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def norm_returns_tensor(model, max_norm):  # noqa: ANN001, ANN201 -- a post-accumulate hook must return None
    return [p.register_post_accumulate_grad_hook(lambda q: q.grad.mul_(0.5)) for p in model.parameters()]


class CounterWithRegistry:
    """A different design: a HookRegistry owns the hooks, names from a dict comprehension."""

    def __init__(self, model):  # noqa: ANN001
        self.model, self.fractions = model, {}

    def __enter__(self):  # noqa: ANN204
        self.registry = HookRegistry(self.model).__enter__()
        for name, module in self.model.named_modules():
            if isinstance(module, nn.ReLU):
                self.registry.forward(module, lambda m, a, out, name=name: self.fractions.__setitem__(
                    name, (out != 0).any(dim=0).logical_not().double().mean().item()))
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        self.registry.__exit__(*exc)


class CounterNeverRemoves:
    def __init__(self, model):  # noqa: ANN001
        self.model, self.fractions = model, {}

    def __enter__(self):  # noqa: ANN204
        for name, module in self.model.named_modules():
            if isinstance(module, nn.ReLU):
                module.register_forward_hook(lambda m, a, out, name=name: self.fractions.update(
                    {name: (out == 0).all(dim=0).float().mean().item()}))
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        return False


class CounterOfInputs(CounterWithRegistry):
    """Measures the ReLU's input: wrong for a ReLU that is not in-place."""

    def __enter__(self):  # noqa: ANN204
        self.registry = HookRegistry(self.model).__enter__()
        for name, module in self.model.named_modules():
            if isinstance(module, nn.ReLU):
                self.registry.forward(module, lambda m, a, out, name=name: self.fractions.__setitem__(
                    name, (a[0] == 0).all(dim=0).float().mean().item()))
        return self


class CounterSwallowsErrors(CounterWithRegistry):
    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        super().__exit__(*exc)
        return True


CASES = {
    "07.1": Cases(
        right=[dropout_with_module],
        wrong=[
            (lambda model, name, p: dropout2d(model, name, p), "switched off"),  # the course's finished plug-in
            (dropout_always, "eval mode"),
            (dropout_fixed_p, "with the p the caller passed"),
            (dropout_no_handle, "Return the handle"),
            (dropout_wrong_layer, "on layer '2' only"),
        ],
    ),
    "07.2": Cases(
        right=[norm_with_clip_grad_norm],
        wrong=[
            (norm_by_clamping, "instead of clamping entries"),
            (norm_always_rescaled, "scale only when the norm is above"),
            (lambda model, max_norm: [], "unchanged"),
            (norm_returns_tensor, "should return None"),
        ],
    ),
    "07.3": Cases(
        right=[CounterWithRegistry],
        wrong=[
            (CounterNeverRemoves, "remove them in __exit__"),
            (CounterOfInputs, "output"),
            (CounterSwallowsErrors, "must not swallow"),
        ],
    ),
}
