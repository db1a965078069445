"""Answers for the checks of notebooks/08_saved_tensor_hooks.ipynb."""

from __future__ import annotations

import torch
from torch.autograd.graph import saved_tensors_hooks

from course_utils.memory import SavedTensorLog
from tests.exercise_cases import Cases


class HalfWithClosure(saved_tensors_hooks):
    """Keeps the original dtype in a closure-free way: a small record object, non-floats passed through."""

    def __init__(self):  # noqa: ANN204
        def pack(t):  # noqa: ANN001, ANN202
            return {"dtype": t.dtype, "data": t.detach().half() if t.dtype.is_floating_point else t.detach()}

        super().__init__(pack, lambda record: record["data"].to(record["dtype"]))


class HalfEverything(saved_tensors_hooks):
    """Casts the integer indices too: float16 cannot hold indices above 2048."""

    def __init__(self):  # noqa: ANN204
        super().__init__(lambda t: (t.dtype, t.detach().half()), lambda p: p[1].to(p[0]))


class HalfNoRestore(saved_tensors_hooks):
    """Forgets to convert back in unpack."""

    def __init__(self):  # noqa: ANN204
        super().__init__(lambda t: t.detach().half() if t.is_floating_point() else t.detach(), lambda p: p)


class KeepsFloat32(saved_tensors_hooks):
    """Stores nothing smaller."""

    def __init__(self):  # noqa: ANN204
        super().__init__(lambda t: t.detach(), lambda p: p)


class BFloat16Instead(saved_tensors_hooks):
    def __init__(self):  # noqa: ANN204
        super().__init__(lambda t: (t.dtype, t.detach().to(torch.bfloat16) if t.is_floating_point() else t.detach()),
                         lambda p: p[1].to(p[0]))


def bytes_with_log(model, x):  # noqa: ANN001, ANN201 -- the course's helper
    with SavedTensorLog(model) as log:
        model(x)
    return log.by_layer()


def bytes_every_call(model, x):  # noqa: ANN001, ANN201 -- counts duplicates and parameter views
    totals, running, handles = {}, [], []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            handles.append(module.register_forward_pre_hook(lambda m, a, name=name: running.append(name)))
    try:
        def pack(t):  # noqa: ANN001, ANN202
            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()
            return t.detach()

        with saved_tensors_hooks(pack, lambda t: t):
            model(x)
    finally:
        for h in handles:
            h.remove()
    return totals


def bytes_no_dedupe(model, x):  # noqa: ANN001, ANN201 -- parameters skipped, but shared memory counted again
    with SavedTensorLog(model) as log:
        model(x)
    totals = {}
    for record in log.records:
        if not record.parameter:
            totals[record.layer] = totals.get(record.layer, 0) + record.nbytes
    return totals


def bytes_leaves_hooks(model, x):  # noqa: ANN001, ANN201 -- right numbers, but the hooks stay on the model
    with SavedTensorLog(model) as log:
        for module in model.modules():
            module.register_forward_hook(lambda m, a, out: None)
        model(x)
    return log.by_layer()


def bytes_not_on_error(model, x):  # noqa: ANN001, ANN201 -- right numbers, but no finally: an error leaves hooks
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    running, totals, seen = [], {}, {}
    handles = []
    for n, m in model.named_modules():
        if n and not list(m.children()):
            handles.append(m.register_forward_pre_hook(lambda mod, a, name=n: running.append(name)))

    def pack(t):  # noqa: ANN001, ANN202
        address = t.untyped_storage().data_ptr()
        if address not in params and address not in seen:
            seen[address] = t.detach()
            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()
        return t.detach()

    hooks = saved_tensors_hooks(pack, lambda t: t)
    hooks.__enter__()
    model(x)
    hooks.__exit__(None, None, None)
    for h in handles:
        h.remove()
    return totals


CASES = {
    "08.1": Cases(right=[[1, 2], (1.0, 2.0), torch.tensor([1, 2])],
                  wrong=[([2, 2], "Ask, for each operation"), ([1, 1], "Ask, for each operation"), ("1, 2", "Expected")]),
    "08.2": Cases(
        right=[HalfWithClosure],
        wrong=[
            (HalfEverything, "integer tensors"),
            (HalfNoRestore, "dtype it had when it was saved"),
            (KeepsFloat32, "as float16"),
            (BFloat16Instead, "as float16"),
        ],
    ),
    "08.3": Cases(
        right=[bytes_with_log],
        wrong=[
            (bytes_every_call, "leave them out"),
            (bytes_no_dedupe, "counted twice"),
            (bytes_leaves_hooks, "left hooks"),
            (bytes_not_on_error, "When the forward raises"),
        ],
    ),
}
