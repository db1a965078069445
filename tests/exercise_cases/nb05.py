"""Answers for the checks of notebooks/05_guided_backprop.ipynb."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from course_utils.hooks import HookRegistry
from course_utils.saliency import _GuideFunctionalRelus
from tests.exercise_cases import Cases


# -- 05.1 ---------------------------------------------------------------------------------------------------------
def relu6_guide_with_tensor_hooks(model):  # noqa: ANN001, ANN201 -- another hook kind, same behaviour
    handles = []

    def on_output(module, args, output):  # noqa: ANN001, ANN202
        output.register_hook(lambda grad: torch.where(grad > 0, grad, torch.zeros_like(grad)))

    for module in model.modules():
        if type(module) is nn.ReLU6:
            handles.append(module.register_forward_hook(on_output))
    return handles


def relu6_guide_with_registry(model):  # noqa: ANN001, ANN201 -- a tuple of one registry is fine too
    registry = HookRegistry(model)
    for module in model.modules():
        if isinstance(module, nn.ReLU6):
            registry.full_backward(module, lambda m, grad_in, grad_out: tuple(F.relu(g) for g in grad_in))
    return (registry,)


def relu6_guide_deconvnet(model):  # noqa: ANN001, ANN201 -- clamps grad_output: the mask is lost
    return [m.register_full_backward_hook(lambda mod, gi, go: (go[0].clamp(min=0),))
            for m in model.modules() if isinstance(m, nn.ReLU6)]


def relu6_guide_relu_only(model):  # noqa: ANN001, ANN201 -- looks for nn.ReLU: finds nothing here
    return [m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))
            for m in model.modules() if isinstance(m, nn.ReLU)]


def relu6_guide_children_only(model):  # noqa: ANN001, ANN201 -- misses the ReLU6 inside the nested block
    return [m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))
            for m in model.children() if isinstance(m, nn.ReLU6)]


def relu6_guide_no_handles(model):  # noqa: ANN001, ANN201
    for m in model.modules():
        if isinstance(m, nn.ReLU6):
            m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))


def relu6_guide_keeps_one_handle(model):  # noqa: ANN001, ANN201 -- overwrites the handle in the loop
    handle = None
    for m in model.modules():
        if isinstance(m, nn.ReLU6):
            handle = m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))
    return [handle]



class _GuidedReLU6(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # noqa: ANN001, ANN205
        ctx.save_for_backward(x)
        return x.clamp(0, 6)

    @staticmethod
    def backward(ctx, grad):  # noqa: ANN001, ANN205
        (x,) = ctx.saved_tensors
        return grad.clamp(min=0) * ((x > 0) & (x < 6))


def relu6_guide_by_replacing_forward(model):  # noqa: ANN001, ANN201 -- the right gradient, but no hook at all
    for module in model.modules():
        if isinstance(module, nn.ReLU6):
            module.forward = _GuidedReLU6.apply
    return []


# -- 05.3 ---------------------------------------------------------------------------------------------------------
class GuideByName(TorchFunctionMode):
    """Matches the function by name and guides with torch.maximum."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        result = func(*args, **dict(kwargs or {}))
        if getattr(func, "__name__", "") == "relu" and getattr(result, "requires_grad", False):
            result.register_hook(lambda grad: torch.maximum(grad, torch.zeros_like(grad)))
        return result


class GuideEverything(TorchFunctionMode):
    """Guides every result that requires grad, convolutions and linears included."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor) and result.requires_grad:
            result.register_hook(lambda grad: grad.clamp(min=0))
        return result


class GuideEvenWithoutGrad(TorchFunctionMode):
    """Forgets that a result under torch.no_grad() cannot take a tensor hook."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        result = func(*args, **(kwargs or {}))
        if func in (F.relu, torch.relu):
            result.register_hook(lambda grad: grad.clamp(min=0))
        return result


class GuideReturnsNothing(TorchFunctionMode):
    """Registers the guide but forgets to return the result."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        result = func(*args, **(kwargs or {}))
        if func in (F.relu, torch.relu) and result.requires_grad:
            result.register_hook(lambda grad: grad.clamp(min=0))


class GuideFunctionalOnly(TorchFunctionMode):
    """Catches F.relu but not torch.relu."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        result = func(*args, **(kwargs or {}))
        if func is F.relu and result.requires_grad:
            result.register_hook(lambda grad: grad.clamp(min=0))
        return result


class GuideThroughTheCourseMode(_GuideFunctionalRelus):
    """Reuses the mode inside guided_backprop(..., functional=True) instead of writing one."""

    def __init__(self):  # noqa: ANN204
        super().__init__(HookRegistry(), [0])


class BorrowsTheCourseFunction(TorchFunctionMode):
    """Borrows the course mode's __torch_function__ and fills in the attributes it uses."""

    __torch_function__ = _GuideFunctionalRelus.__torch_function__

    def __init__(self):  # noqa: ANN204
        super().__init__()
        self.hooks, self.counter = HookRegistry(), [0]


class ForgetsSuperExit(GuideByName):
    """Overrides __exit__ without calling super().__exit__: the mode stays on the stack (the check takes it off)."""

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        return None


def not_a_mode(model):  # noqa: ANN001, ANN201
    return model



def relu6_guide_in_place(model):  # noqa: ANN001, ANN201 -- clamps grad_input in place and returns None
    def guide(module, grad_input, grad_output):  # noqa: ANN001, ANN202
        for grad in grad_input:
            if grad is not None:
                grad.clamp_(min=0)

    return [m.register_full_backward_hook(guide) for m in model.modules() if isinstance(m, nn.ReLU6)]


def relu6_guide_deprecated_hook(model):  # noqa: ANN001, ANN201 -- the deprecated register_backward_hook
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [module.register_backward_hook(lambda m, gi, go: (gi[0].clamp(min=0),))
                for module in model.modules() if isinstance(module, nn.ReLU6)]


class GuideKwargsNone(TorchFunctionMode):
    """`**kwargs` with kwargs=None, the default PyTorch uses for a call without keyword arguments."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **kwargs)
        if func in (F.relu, torch.relu) and out.requires_grad:
            out.register_hook(lambda grad: grad.clamp(min=0))
        return out


CASES = {
    "05.1": Cases(
        right=[relu6_guide_with_registry],
        wrong=[
            (relu6_guide_deconvnet, "forward mask is lost"),
            (relu6_guide_relu_only, "Nothing was guided"),
            (relu6_guide_children_only, "nested block"),
            (relu6_guide_no_handles, "Return the list of handles"),
            (relu6_guide_keeps_one_handle, "return every handle"),
            (relu6_guide_by_replacing_forward, "You replaced a ReLU6's forward"),
            (relu6_guide_in_place, "in place"),
            (relu6_guide_with_tensor_hooks, "full backward hook"),
            (relu6_guide_deprecated_hook, "deprecated register_backward_hook"),
        ],
    ),
    "05.2": Cases(
        right=["b", "(b)", " B "],
        wrong=[("a", "only partly"), ("c", "learned nothing"), ("d", "plain gradient changed the most"),
               ("the map mostly shows the image", "one letter")],
    ),
    "05.3": Cases(
        right=[GuideByName],
        wrong=[
            (GuideEverything, "Not the guided map"),
            (GuideEvenWithoutGrad, "torch.no_grad()"),
            (GuideReturnsNothing, "return what"),
            (GuideFunctionalOnly, "Not the guided map"),
            (not_a_mode, "TorchFunctionMode"),
            (GuideThroughTheCourseMode, "asks for your own"),
            (BorrowsTheCourseFunction, "asks for your own"),
            (ForgetsSuperExit, "super().__exit__"),
            (GuideKwargsNone, "kwargs=None"),
        ],
    ),
}
