"""Answers for the checks of notebooks/04_backward_hooks.ipynb."""

from __future__ import annotations

import torch
import torch.nn as nn

from course_utils.hooks import HookRegistry
from tests.exercise_cases import Cases


# -- 04.2 ---------------------------------------------------------------------------------------------------
def clip_with_minimum_maximum(module, grad_input, grad_output):  # noqa: ANN001, ANN201
    out = []
    for g in grad_input:
        out.append(g if g is None else torch.minimum(torch.maximum(g, -torch.ones_like(g)), torch.ones_like(g)))
    return tuple(out)


def clip_returns_nothing(module, grad_input, grad_output):  # noqa: ANN001, ANN201 -- computes, never returns
    _ = tuple(None if g is None else g.clamp(-1, 1) for g in grad_input)


def clip_ignores_none(module, grad_input, grad_output):  # noqa: ANN001, ANN201
    return tuple(g.clamp(-1, 1) for g in grad_input)


def clip_to_unit_interval(module, grad_input, grad_output):  # noqa: ANN001, ANN201 -- [0, 1] instead of [-1, 1]
    return tuple(None if g is None else g.clamp(0, 1) for g in grad_input)


def clip_by_norm(module, grad_input, grad_output):  # noqa: ANN001, ANN201 -- rescales instead of clamping entries
    return tuple(None if g is None else g / g.norm().clamp(min=1) for g in grad_input)


def clip_grad_output_returned(module, grad_input, grad_output):  # noqa: ANN001, ANN201 -- clamps the wrong one
    return tuple(None if g is None else g.clamp(-1, 1) for g in grad_output)


def record_late_binding(model, names, store):  # noqa: ANN001, ANN201 -- every gradient stored under the last name
    handles = []
    for name in names:
        def hook(module, args, output):  # noqa: ANN001, ANN202
            if output.requires_grad:
                output.register_hook(lambda grad: store.__setitem__(name, grad))

        handles.append(model.get_submodule(name).register_forward_hook(hook))
    return handles


# -- 04.3 ---------------------------------------------------------------------------------------------------
def cap_with_loop(module, grad_output):  # noqa: ANN001, ANN201 -- one sample at a time
    grad = grad_output[0]
    rows = []
    for sample in grad:
        norm = torch.linalg.vector_norm(sample)
        rows.append(sample / norm if norm > 1 else sample)
    return (torch.stack(rows),) + tuple(grad_output[1:])


def cap_by_clamping_entries(module, grad_output):  # noqa: ANN001, ANN201
    return (grad_output[0].clamp(-1, 1),)


def cap_to_exactly_one(module, grad_output):  # noqa: ANN001, ANN201 -- also scales small ones up (0 -> NaN)
    g = grad_output[0]
    return (g / g.flatten(1).norm(dim=1).reshape(-1, *([1] * (g.dim() - 1))),)


def cap_whole_batch(module, grad_output):  # noqa: ANN001, ANN201 -- one norm for the whole batch
    g = grad_output[0]
    return (g / g.norm().clamp(min=1),)


def cap_last_dim_only(module, grad_output):  # noqa: ANN001, ANN201 -- right for 2-D, wrong for conv outputs
    g = grad_output[0]
    return (g / g.norm(dim=-1, keepdim=True).clamp(min=1),)


def cap_forgets_return(module, grad_output):  # noqa: ANN001, ANN201
    g = grad_output[0]
    _ = g / g.flatten(1).norm(dim=1).clamp(min=1).reshape(-1, *([1] * (g.dim() - 1)))


# -- 04.4 ---------------------------------------------------------------------------------------------------
def record_with_registry(model, names, store):  # noqa: ANN001, ANN201 -- a HookRegistry is the returned handle
    registry = HookRegistry(model)
    try:
        for name in names:
            def watch(module, args, output, name=name):  # noqa: ANN001, ANN202
                if torch.is_grad_enabled() and output.requires_grad:
                    registry.tensor(output, lambda grad: store.update({name: grad.detach()}))
            registry.forward(name, watch)
    except BaseException:
        registry.remove()
        raise
    return registry


def record_with_full_hooks(model, names, store):  # noqa: ANN001, ANN201 -- breaks on the in-place ReLU after it
    return [model.get_submodule(name).register_full_backward_hook(
        lambda m, gi, go, name=name: store.__setitem__(name, go[0])) for name in names]


def record_first_backward_only(model, names, store):  # noqa: ANN001, ANN201
    handles = []
    try:
        for name in names:
            def watch(module, args, output, name=name):  # noqa: ANN001, ANN202
                def keep_first(grad):  # noqa: ANN001, ANN202
                    store.setdefault(name, grad)

                if output.requires_grad:
                    output.register_hook(keep_first)
            handles.append(model.get_submodule(name).register_forward_hook(watch))
    except Exception:
        for handle in handles:
            handle.remove()
        raise
    return handles


def record_without_cleanup(model, names, store):  # noqa: ANN001, ANN201 -- a bad name leaves the first hook
    handles = []
    for name in names:
        def watch(module, args, output, name=name):  # noqa: ANN001, ANN202
            if output.requires_grad:
                output.register_hook(lambda grad: store.__setitem__(name, grad))
        handles.append(model.get_submodule(name).register_forward_hook(watch))
    return handles


def record_without_no_grad_guard(model, names, store):  # noqa: ANN001, ANN201
    handles = []
    try:
        for name in names:
            def watch(module, args, output, name=name):  # noqa: ANN001, ANN202
                output.register_hook(lambda grad: store.__setitem__(name, grad))
            handles.append(model.get_submodule(name).register_forward_hook(watch))
    except Exception:
        for handle in handles:
            handle.remove()
        raise
    return handles



def clip_in_place(module, grad_input, grad_output):  # noqa: ANN001, ANN201 -- what the hint forbids, returns None
    for g in grad_input:
        if g is not None:
            g.clamp_(-1, 1)


def clip_bare_tensor(module, grad_input, grad_output):  # noqa: ANN001, ANN201 -- one tensor, not a tuple
    return grad_input[0].clamp(-1, 1)


def cap_in_place(module, grad_output):  # noqa: ANN001, ANN201 -- divides grad_output itself, returns None
    g = grad_output[0]
    norms = g.flatten(1).norm(dim=1).clamp(min=1.0)
    g.div_(norms.reshape(-1, *([1] * (g.dim() - 1))))


def record_returning_the_handle(model, names, store):  # noqa: ANN001, ANN201 -- the lambda returns a handle
    handles = []
    try:
        for name in names:
            handles.append(model.get_submodule(name).register_forward_hook(
                lambda m, a, out, name=name: out.register_hook(lambda grad: store.__setitem__(name, grad))
                if out.requires_grad else None))
    except BaseException:
        for handle in handles:
            handle.remove()
        raise
    return handles


CASES = {
    "04.1": Cases(
        right=[[[3, 5], [5, 2]], (torch.Size([3, 5]), torch.Size([5, 2]))],
        wrong=[
            (((2,), (3, 5), (5, 2)), "how many inputs"),
            (((3, 5), (2, 5)), "orientation"),
            (((3, 5),), "full backward hook"),
            ("(3, 5), (5, 2)", "tuple of shapes"),
        ],
    ),
    "04.2": Cases(
        right=[clip_with_minimum_maximum],
        wrong=[
            (clip_returns_nothing, "unchanged"),
            (clip_ignores_none, "None"),
            (clip_to_unit_interval, "clamped to [-1, 1]"),
            (clip_by_norm, "entry by entry"),
            (clip_in_place, "in place"),
            (clip_grad_output_returned, "Which of the hook's arguments"),
            (clip_bare_tensor, "return a tuple"),
        ],
    ),
    "04.3": Cases(
        right=[cap_with_loop],
        wrong=[
            (cap_by_clamping_entries, "rescale"),
            (cap_to_exactly_one, "NaN"),
            (cap_whole_batch, "max(1, its L2 norm)"),
            (cap_last_dim_only, "Conv2d"),
            (cap_forgets_return, "unchanged"),
            (cap_in_place, "in place"),
        ],
    ),
    "04.4": Cases(
        right=[record_with_registry],
        wrong=[
            (record_with_full_hooks, "in-place ReLU"),
            (record_late_binding, "loop variable"),
            (record_first_backward_only, "every backward"),
            (record_without_cleanup, "bad layer name"),
            (record_without_no_grad_guard, "no_grad"),
            (record_returning_the_handle, "RemovableHandle, not a tensor"),
        ],
    ),
}
