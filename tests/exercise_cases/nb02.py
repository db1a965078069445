"""Answers for the checks of notebooks/02_hook_lifecycle.ipynb."""

from __future__ import annotations

import torch

from tests.exercise_cases import Cases


def measure_with_finally(w, x):  # noqa: ANN001, ANN201
    received = []
    handle = w.register_hook(received.append)
    try:
        ((w * x).sum() ** 2).backward()
    finally:
        handle.remove()
    return received[0]


def measure_leaky(w, x):  # noqa: ANN001, ANN201 -- the code the exercise gives
    received = []
    w.register_hook(lambda grad: received.append(grad))
    loss = (w * x).sum() ** 2
    loss.backward()
    return received[0]


def measure_removes_after(w, x):  # noqa: ANN001, ANN201 -- removed, but not when the forward raises
    received = []
    handle = w.register_hook(lambda grad: received.append(grad))
    loss = (w * x).sum() ** 2
    loss.backward()
    handle.remove()
    return received[0]


def measure_swallows(w, x):  # noqa: ANN001, ANN201 -- no leak, but the error disappears
    received = []
    with w.register_hook(lambda grad: received.append(grad)):
        try:
            ((w * x).sum() ** 2).backward()
        except RuntimeError:
            return None
    return received[0]


def measure_without_hook(w, x):  # noqa: ANN001, ANN201 -- torch.autograd.grad: also right, no hook needed
    return torch.autograd.grad((w * x).sum() ** 2, w)[0]


def once_with_list(tensor, fn):  # noqa: ANN001, ANN201
    box = []

    def hook(grad):  # noqa: ANN001, ANN202
        box[0].remove()
        fn(grad)

    box.append(tensor.register_hook(hook))
    return box[0]


class Once:
    """A different design: a callable object that holds its handle."""

    def __init__(self, tensor, fn):  # noqa: ANN001
        self.fn = fn
        self.handle = tensor.register_hook(self)

    def __call__(self, grad):  # noqa: ANN001, ANN204
        self.handle.remove()
        self.fn(grad)


def once_never_removed(tensor, fn):  # noqa: ANN001, ANN201
    def hook(grad):  # noqa: ANN001, ANN202
        fn(grad)

    return tensor.register_hook(hook)


def once_removed_too_early(tensor, fn):  # noqa: ANN001, ANN201
    handle = tensor.register_hook(lambda grad: fn(grad))
    handle.remove()
    return handle


def once_returns_fn_result(tensor, fn):  # noqa: ANN001, ANN201 -- a flag instead of removal, and returns grad * 0
    done = []

    def hook(grad):  # noqa: ANN001, ANN202
        if not done:
            done.append(True)
            fn(grad)
        return grad * 0

    return tensor.register_hook(hook)


def once_with_flag(tensor, fn):  # noqa: ANN001, ANN201 -- fires once, but the hook stays registered
    done = []

    def hook(grad):  # noqa: ANN001, ANN202
        if not done:
            done.append(True)
            fn(grad)

    return tensor.register_hook(hook)



def once_returns_fn_value(tensor, fn):  # noqa: ANN001, ANN201 -- removes itself, but passes fn's value on
    box = []

    def hook(grad):  # noqa: ANN001, ANN202
        box[0].remove()
        return fn(grad)

    box.append(tensor.register_hook(hook))
    return box[0]


def measure_returns_w_grad(w, x):  # noqa: ANN001, ANN201 -- .grad also holds earlier backward passes
    with w.register_hook(lambda grad: None):
        ((w * x).sum() ** 2).backward()
    return w.grad


def once_clears_every_hook(tensor, fn):  # noqa: ANN001, ANN201 -- also removes other code's hooks
    def hook(grad):  # noqa: ANN001, ANN202
        fn(grad)
        tensor._backward_hooks.clear()

    return tensor.register_hook(hook)


CASES = {
    "02.1": Cases(
        right=[measure_with_finally, measure_without_hook],
        wrong=[
            (measure_leaky, "still registered"),
            (measure_removes_after, "When the forward raises"),
            (measure_swallows, "propagate"),
            (measure_returns_w_grad, "already holds a gradient"),
        ],
    ),
    "02.2": Cases(
        right=[(11, 22), torch.tensor([11.0, 22.0])],
        wrong=[([11.0, 33.0], "only the new contribution"), ([10.0, 20.0], "first number is off"), (22, "two numbers")],
    ),
    "02.3": Cases(
        right=[once_with_list, lambda tensor, fn: Once(tensor, fn).handle],
        wrong=[
            (once_never_removed, "remove itself"),
            (once_removed_too_early, "expected one hook"),
            (once_returns_fn_result, "must return None"),
            (once_with_flag, "still registered"),
            (once_returns_fn_value, "whatever fn returns"),
            (once_clears_every_hook, "another hook"),
        ],
    ),
}
