"""Answers for the checks of notebooks/07_hooks_in_training.ipynb."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.hooks import HookRegistry
from course_utils.regularize import clip_grad_value_hooks, dropout2d
from tests.exercise_cases import Cases


def dropout_with_module(model, layer_name, p):  # noqa: ANN001, ANN201 -- nn.Dropout2d, returns a bare tensor
    drop = nn.Dropout2d(p)
    layer = dict(model.named_modules())[layer_name]

    def hook(module, args):  # noqa: ANN001, ANN202
        return drop(args[0]) if module.training else args  # a bare tensor or the tuple: both replace the input

    return layer.register_forward_pre_hook(hook)


def dropout_with_kwargs(model, layer_name, p):  # noqa: ANN001, ANN201 -- the with_kwargs form of the pre-hook
    def hook(module, args, kwargs):  # noqa: ANN001, ANN202
        if not module.training:
            return None
        return (F.dropout2d(args[0], p, True),) + tuple(args[1:]), kwargs

    return model.get_submodule(layer_name).register_forward_pre_hook(hook, with_kwargs=True)


def dropout_on_output(model, layer_name, p):  # noqa: ANN001, ANN201 -- notebook 07's forward hook, copied
    return model.get_submodule(layer_name).register_forward_hook(
        lambda m, a, out: F.dropout2d(out, p=p, training=True) if m.training else None)


def dropout_before_previous_layer(model, layer_name, p):  # noqa: ANN001, ANN201 -- the output of the layer before
    names = [name for name, _ in model.named_children()]
    previous = model.get_submodule(names[names.index(layer_name) - 1])
    return previous.register_forward_hook(lambda m, a, out: F.dropout2d(out, p=p, training=True) if m.training else None)


def dropout_in_place(model, layer_name, p):  # noqa: ANN001, ANN201 -- changes the previous layer's output in place
    def hook(module, args):  # noqa: ANN001, ANN202
        if module.training:
            F.dropout2d(args[0], p=p, training=True, inplace=True)

    return model.get_submodule(layer_name).register_forward_pre_hook(hook)


def dropout_always(model, layer_name, p):  # noqa: ANN001, ANN201
    return model.get_submodule(layer_name).register_forward_pre_hook(
        lambda m, args: (F.dropout2d(args[0], p=p, training=True),))


def dropout_fixed_p(model, layer_name, p):  # noqa: ANN001, ANN201
    return model.get_submodule(layer_name).register_forward_pre_hook(
        lambda m, args: (F.dropout2d(args[0], p=0.5, training=True),) if m.training else None)


def dropout_no_handle(model, layer_name, p):  # noqa: ANN001, ANN201
    model.get_submodule(layer_name).register_forward_pre_hook(
        lambda m, args: (F.dropout2d(args[0], p=p, training=True),) if m.training else None)


def dropout_forgets_return(model, layer_name, p):  # noqa: ANN001, ANN201 -- computes the new input, drops it
    def hook(module, args):  # noqa: ANN001, ANN202
        if module.training:
            F.dropout2d(args[0], p=p, training=True)

    return model.get_submodule(layer_name).register_forward_pre_hook(hook)


def dropout_wrong_layer(model, layer_name, p):  # noqa: ANN001, ANN201
    return model[0].register_forward_pre_hook(
        lambda m, args: (F.dropout2d(args[0], p=p, training=True),) if m.training else None)


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


def norm_lambda_returns_norm(model, max_norm):  # noqa: ANN001, ANN201 -- the lambda returns clip_grad_norm_'s norm
    return [p.register_post_accumulate_grad_hook(lambda q: torch.nn.utils.clip_grad_norm_([q], max_norm))
            for p in model.parameters()]


class CounterWithRegistry:
    """A different design: a HookRegistry owns the hooks; per ReLU it keeps the units never seen non-zero."""

    def __init__(self, model):  # noqa: ANN001
        self.model, self.fractions, self.silent = model, {}, {}

    def _hook(self, name):  # noqa: ANN001, ANN202
        def hook(module, args, out):  # noqa: ANN001, ANN202
            silent_here = ~(out != 0).any(dim=0)
            self.silent[name] = silent_here & self.silent.get(name, silent_here)
            self.fractions[name] = self.silent[name].double().mean().item()
        return hook

    def __enter__(self):  # noqa: ANN204
        self.registry = HookRegistry(self.model).__enter__()
        for name, module in self.model.named_modules():
            if isinstance(module, nn.ReLU):
                self.registry.forward(module, self._hook(name))
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        self.registry.__exit__(*exc)


class CounterCountsActivity(CounterWithRegistry):
    """Another design: counts, per unit, the samples that made it non-zero; dead = count still 0."""

    def _hook(self, name):  # noqa: ANN001, ANN202
        def hook(module, args, out):  # noqa: ANN001, ANN202
            active = (out > 0).sum(dim=0)
            self.silent[name] = active + self.silent.get(name, torch.zeros_like(active))
            self.fractions[name] = (self.silent[name] == 0).sum().item() / self.silent[name].numel()
        return hook


class CounterLastBatchOnly(CounterWithRegistry):
    """The section's monitor copied: one batch at a time, earlier batches forgotten."""

    def _hook(self, name):  # noqa: ANN001, ANN202
        def hook(module, args, out):  # noqa: ANN001, ANN202
            self.fractions[name] = (out == 0).all(dim=0).float().mean().item()
        return hook


class CounterAveragesBatches(CounterWithRegistry):
    """Averages the per-batch fractions."""

    def _hook(self, name):  # noqa: ANN001, ANN202
        def hook(module, args, out):  # noqa: ANN001, ANN202
            self.silent.setdefault(name, []).append((out == 0).all(dim=0).float().mean().item())
            self.fractions[name] = sum(self.silent[name]) / len(self.silent[name])
        return hook


class CounterDeadInAnyBatch(CounterWithRegistry):
    """Marks a unit dead as soon as one batch had it zero for every sample."""

    def _hook(self, name):  # noqa: ANN001, ANN202
        def hook(module, args, out):  # noqa: ANN001, ANN202
            dead_here = (out == 0).all(dim=0)
            self.silent[name] = dead_here | self.silent.get(name, dead_here)
            self.fractions[name] = self.silent[name].float().mean().item()
        return hook


class CounterNeverRemoves(CounterWithRegistry):
    def __enter__(self):  # noqa: ANN204
        for name, module in self.model.named_modules():
            if isinstance(module, nn.ReLU):
                module.register_forward_hook(self._hook(name))
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        return False


class CounterOfInputs(CounterWithRegistry):
    """Measures the ReLU's input: wrong for a ReLU that is not in-place."""

    def _hook(self, name):  # noqa: ANN001, ANN202
        def hook(module, args, out):  # noqa: ANN001, ANN202
            silent_here = (args[0] == 0).all(dim=0)
            self.silent[name] = silent_here & self.silent.get(name, silent_here)
            self.fractions[name] = self.silent[name].float().mean().item()
        return hook


class CounterSwallowsErrors(CounterWithRegistry):
    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        super().__exit__(*exc)
        return True


class CounterEnterReturnsNone(CounterWithRegistry):
    """__enter__ sets up the hooks but returns None: `as counter` is None."""

    def __enter__(self):  # noqa: ANN204
        super().__enter__()


def norm_late_binding(model, max_norm):  # noqa: ANN001, ANN201 -- every lambda clips the loop's last parameter
    def clip(param):  # noqa: ANN001, ANN202
        norm = param.grad.norm()
        if norm > max_norm:
            param.grad.mul_(max_norm / norm)

    handles = []
    for p in model.parameters():
        handles.append(p.register_post_accumulate_grad_hook(lambda _: clip(p)))
    return handles


CASES = {
    "07.1": Cases(
        right=[dropout_with_module, dropout_with_kwargs],
        wrong=[
            (lambda model, name, p: dropout2d(model, name, p), "forward pre-hook"),  # the course's plug-in: on the output
            (dropout_on_output, "forward pre-hook"),
            (dropout_before_previous_layer, "on layer '2' only"),
            (dropout_in_place, "change nothing in place"),
            (dropout_always, "eval mode"),
            (dropout_fixed_p, "with the p the caller passed"),
            (dropout_no_handle, "Return the handle"),
            (dropout_forgets_return, "return the new input"),
            (dropout_wrong_layer, "on layer '2' only"),
        ],
    ),
    "07.2": Cases(
        right=[norm_with_clip_grad_norm],
        wrong=[
            (norm_by_clamping, "instead of clamping entries"),
            (norm_always_rescaled, "scale only when the norm is above"),
            (lambda model, max_norm: [], "unchanged"),
            (norm_returns_tensor, "returned a value"),
            (norm_lambda_returns_norm, "returned a value"),
            (norm_late_binding, "loop variable"),
        ],
    ),
    "07.3": Cases(
        right=[CounterWithRegistry, CounterCountsActivity],
        wrong=[
            (CounterLastBatchOnly, "only the last batch"),
            (CounterAveragesBatches, "average over batches"),
            (CounterDeadInAnyBatch, "it is dead only if every batch did"),
            (CounterNeverRemoves, "remove them in __exit__"),
            (CounterOfInputs, "output"),
            (CounterSwallowsErrors, "must not swallow"),
            (CounterEnterReturnsNone, "returned None"),
        ],
    ),
}
