"""Saliency maps built on hooks: vanilla gradient, Guided Backpropagation, Grad-CAM, Guided Grad-CAM.

Every function is called as ``(model, [layer,] x, target=None, ...)``: ``target`` ``None`` explains each sample's
top class, an ``int`` one class for all, a sequence or 1-D tensor one class per sample (a bad one raises
``ValueError``). Nothing of the caller's changes: the input and its ``.grad`` (a detached copy is used), parameter
``.grad`` (``torch.autograd.grad`` fills none), ``model.training`` (call ``model.eval()`` yourself); every hook is
removed in ``finally``. Results are on the input's device.

Guided Backprop guides every ReLU-family *module* (``nn.ReLU``, ``nn.ReLU6``) through a tensor hook on each call's
output, so reused and in-place activations work; ``functional=True`` also catches ``F.relu``, ``torch.relu`` and
their in-place and method forms. When nothing was guided a warning says so (captum's ``GuidedBackprop`` silently
returns the plain gradient then, and on ReLU6 models). Grad-CAM keeps the layer's activation in a forward hook,
hands the model a clone (later in-place operations cannot corrupt it) and differentiates for that activation only.

Usage::

    saliency = guided_backprop(model, x)              # (N, C, H, W)
    heatmap = grad_cam(model, "layer4", x, target=281)  # (N, H, W), each map scaled to [0, 1]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from course_utils.hooks import HookRegistry, LayerSpec, resolve_layers
from course_utils.machinery.messages import _

__all__ = [
    "Target",
    "GUIDED_ACTIVATIONS",
    "vanilla_gradient",
    "guided_backprop",
    "grad_cam",
    "guided_grad_cam",
    "element_wise_cam",
    "layer_activation_and_gradient",
    "rank_correlation",
    "resolve_targets",
]

Target = int | Sequence[int] | torch.Tensor | None
GUIDED_ACTIVATIONS: tuple[type[nn.Module], ...] = (nn.ReLU, nn.ReLU6)
"""Activation modules that Guided Backprop guides by default."""

_FUNCTIONAL_RELUS: tuple[Callable[..., Any], ...] = (
    torch.relu,
    torch.relu_,
    torch.Tensor.relu,
    torch.Tensor.relu_,
    F.relu,
    F.relu_,
    F.relu6,
)


# -- shared checks ---------------------------------------------------------------------------------------
def _check_model_and_input(model: Any, x: Any) -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}.")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor batch, got {type(x).__name__}.")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got {x.dtype}: convert it with x.float().")
    if x.dim() < 2:
        raise ValueError(f"x needs a batch dimension first, got shape {tuple(x.shape)}: use x.unsqueeze(0).")


def resolve_targets(target: Target, logits: torch.Tensor) -> torch.Tensor:
    """Turn ``target`` into a ``(N,)`` long tensor of class indices for ``logits`` of shape ``(N, classes)``.

    Usage: ``resolve_targets(None, logits)`` (each sample's argmax), ``resolve_targets(281, logits)``.
    """
    if logits.dim() != 2:
        raise ValueError(
            f"The model must return class scores of shape (N, classes); it returned shape {tuple(logits.shape)}."
        )
    n, classes = logits.shape
    if target is None:
        return logits.detach().argmax(dim=1)
    if isinstance(target, bool):
        raise ValueError("target must be None, a class index, or one class index per sample -- not a bool.")
    if isinstance(target, int):
        indices = torch.full((n,), target, dtype=torch.long)
    elif isinstance(target, torch.Tensor):
        if target.dim() != 1 or target.is_floating_point() or target.dtype == torch.bool:
            raise ValueError("A target tensor must be 1-D with integer class indices, "
                             f"got {target.dtype} {tuple(target.shape)}.")
        indices = target.detach().to("cpu", torch.long)
    elif isinstance(target, Sequence) and not isinstance(target, str):
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in target):
            raise ValueError("A target sequence must contain ints (one class index per sample).")
        indices = torch.tensor(list(target), dtype=torch.long)
    else:
        raise ValueError(f"target must be None, an int, or a sequence/1-D tensor of ints; got {type(target).__name__}.")
    if indices.numel() != n:
        raise ValueError(
            f"Got {indices.numel()} targets for a batch of {n}: give one class per sample, or one int for all.")
    if indices.numel() and (indices.min() < 0 or indices.max() >= classes):
        bad = indices[(indices < 0) | (indices >= classes)][0].item()
        raise ValueError(f"Target class {bad} is out of range: this model has {classes} classes (0..{classes - 1}).")
    return indices.to(logits.device)


def _score(logits: torch.Tensor, target: Target) -> torch.Tensor:
    """Sum over the batch of each sample's target logit (samples do not interact in eval mode)."""
    indices = resolve_targets(target, logits)
    return logits.gather(1, indices[:, None]).sum()


def _input_copy(x: torch.Tensor) -> torch.Tensor:
    return x.detach().clone().requires_grad_(True)


# -- vanilla gradient and Guided Backprop ----------------------------------------------------------------------
def vanilla_gradient(model: nn.Module, x: torch.Tensor, target: Target = None) -> torch.Tensor:
    """The gradient of the target logit with respect to the input, same shape as ``x``.

    Usage: ``saliency = vanilla_gradient(model, x, target=281)``
    """
    _check_model_and_input(model, x)
    inputs = _input_copy(x)
    with torch.enable_grad():
        score = _score(model(inputs), target)
        (gradient,) = torch.autograd.grad(score, inputs)
    return gradient.to(x.device)


def _guide(grad: torch.Tensor) -> torch.Tensor:
    """The guided rule at an activation's output: only positive gradients pass (the activation's own backward
    then keeps them only where the forward output was positive)."""
    return grad.clamp(min=0)


class _GuideFunctionalRelus(TorchFunctionMode):
    """While active, guides the outputs of functional ReLUs (``F.relu``, ``torch.relu``, ``x.relu_()``, ...)."""

    def __init__(self, hooks: HookRegistry, counter: list[int]) -> None:
        super().__init__()
        self.hooks, self.counter = hooks, counter

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        result = func(*args, **(kwargs or {}))
        if func in _FUNCTIONAL_RELUS and isinstance(result, torch.Tensor) and result.requires_grad:
            self.hooks.tensor(result, _guide)
            self.counter[0] += 1
        return result


def guided_backprop(
    model: nn.Module,
    x: torch.Tensor,
    target: Target = None,
    *,
    activations: Iterable[type[nn.Module]] = GUIDED_ACTIVATIONS,
    functional: bool = False,
) -> torch.Tensor:
    """Guided Backpropagation (Springenberg et al., 2015): the input gradient with every activation's backward
    passing only positive gradients. Same shape as ``x``.

    Usage: ``saliency = guided_backprop(model, x)``; ``functional=True`` also guides ``F.relu`` calls.
    """
    _check_model_and_input(model, x)
    kinds = tuple(activations)
    if not kinds or not all(isinstance(k, type) and issubclass(k, nn.Module) for k in kinds):
        raise TypeError("activations must be nn.Module subclasses, e.g. (nn.ReLU, nn.ReLU6).")
    guided = [0]
    inputs = _input_copy(x)
    hooks = HookRegistry(model)
    gradient_hooks = HookRegistry()

    def guide_output(module: nn.Module, args: tuple, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.requires_grad:
            gradient_hooks.tensor(output, _guide)
            guided[0] += 1

    try:
        for module in model.modules():
            if isinstance(module, kinds):
                hooks.forward(module, guide_output)
        with torch.enable_grad():
            if functional:
                with _GuideFunctionalRelus(gradient_hooks, guided):
                    logits = model(inputs)
            else:
                logits = model(inputs)
            score = _score(logits, target)
            (gradient,) = torch.autograd.grad(score, inputs)
    finally:
        try:
            gradient_hooks.remove()
        finally:
            hooks.remove()
    if guided[0] == 0:
        warning = _("guided_backprop guided no activation: {model} ran no {kinds} module, so the result is the plain "
                    "(vanilla) gradient.").format(model=type(model).__name__, kinds="/".join(k.__name__ for k in kinds))
        if not functional:
            warning = _("{warning} If forward() uses F.relu/torch.relu, pass functional=True.").format(warning=warning)
        warnings.warn(warning, UserWarning, stacklevel=2)
    return gradient.to(x.device)


# -- Grad-CAM ---------------------------------------------------------------------------------------------
def _one_layer(model: nn.Module, layer: LayerSpec) -> tuple[str, nn.Module]:
    found = resolve_layers(model, layer)
    if len(found) != 1:
        names = ", ".join(repr(n) for n, _ in found[:5])
        raise ValueError(f"Grad-CAM needs exactly one layer; {layer!r} matches {len(found)}: {names}...")
    return found[0]


def layer_activation_and_gradient(
    model: nn.Module, layer: LayerSpec, x: torch.Tensor, target: Target = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The activation ``A`` of ``layer`` and the gradient of the target logit with respect to it (both detached,
    shape of the layer's output). The backward stops at the layer: no parameter gradient is computed.

    Usage: ``A, dA = layer_activation_and_gradient(model, "layer4", x)``
    """
    _check_model_and_input(model, x)
    name, module = _one_layer(model, layer)
    kept: list[torch.Tensor] = []

    def keep_and_clone(mod: nn.Module, args: tuple, output: Any) -> torch.Tensor:
        if not isinstance(output, torch.Tensor):
            raise TypeError(f"Layer {name!r} returns a {type(output).__name__}; Grad-CAM needs a tensor output.")
        if output.dim() != 4:
            raise ValueError(f"Grad-CAM needs a (N, C, H, W) activation; layer {name!r} gives {tuple(output.shape)}.")
        activation = output if output.requires_grad else output.detach().requires_grad_(True)
        kept.append(activation)
        return activation.clone()  # the model continues with a copy: in-place ops downstream cannot touch `kept`

    with HookRegistry(model) as hooks:
        hooks.forward(module, keep_and_clone)
        with torch.enable_grad():
            logits = model(x.detach())
            if len(kept) != 1:
                raise ValueError(
                    f"Layer {name!r} ran {len(kept)} times in one forward; Grad-CAM needs a layer that runs once "
                    f"(hook a block's output, or a conv, rather than a shared activation module)."
                )
            score = _score(logits, target)
            (gradient,) = torch.autograd.grad(score, kept[0])
    return kept[0].detach(), gradient.detach()


def _finish(cam: torch.Tensor, x: torch.Tensor, relu: bool, upsample: bool, normalize: bool) -> torch.Tensor:
    """(N, h, w) raw map -> ReLU -> bilinear upsampling to x's size -> per-sample min-max to [0, 1].

    Upsampling before scaling makes every normalised map span exactly [0, 1]; since bilinear interpolation
    commutes with affine maps, this equals scaling, upsampling and scaling again (pytorch-grad-cam's order)."""
    if relu:
        cam = cam.clamp(min=0)
    if upsample:
        cam = F.interpolate(cam[:, None], size=tuple(x.shape[-2:]), mode="bilinear", align_corners=False)[:, 0]
    if normalize:
        flat = cam.flatten(1)
        low = flat.min(dim=1).values[:, None, None]
        span = flat.max(dim=1).values[:, None, None] - low
        scaled = (cam - low) / span.clamp_min(torch.finfo(cam.dtype).tiny)
        cam = torch.where(span > 0, scaled, torch.zeros_like(cam))  # a flat map carries no information: all 0
    return cam.to(x.device)


def grad_cam(model: nn.Module, layer: LayerSpec, x: torch.Tensor, target: Target = None, *, relu: bool = True,
             upsample: bool = True, normalize: bool = True) -> torch.Tensor:
    """Grad-CAM (Selvaraju et al., 2017): channel weights = spatial mean of the gradient, map = ReLU(Σ weight ×
    activation). Returns ``(N, H, W)``: bilinearly upsampled to the input's size (``upsample``), then each map
    min-max scaled to [0, 1] (``normalize``).

    Usage: ``heatmap = grad_cam(model, "layer4", x, target=281)``
    """
    activation, gradient = layer_activation_and_gradient(model, layer, x, target)
    weights = gradient.mean(dim=(2, 3), keepdim=True)
    return _finish((weights * activation).sum(dim=1), x, relu, upsample, normalize)


def element_wise_cam(model: nn.Module, layer: LayerSpec, x: torch.Tensor, target: Target = None, *,
                     relu: bool = True, upsample: bool = True, normalize: bool = True) -> torch.Tensor:
    """The variant article 003 describes: ReLU(Σ_channels activation × gradient), element by element. It equals
    Grad-CAM only where the gradient is spatially constant (the last layer before global average pooling).

    Usage: ``element_wise_cam(model, "features.3", x)``
    """
    activation, gradient = layer_activation_and_gradient(model, layer, x, target)
    return _finish((activation * gradient).sum(dim=1), x, relu, upsample, normalize)


def guided_grad_cam(
    model: nn.Module,
    layer: LayerSpec,
    x: torch.Tensor,
    target: Target = None,
    *,
    activations: Iterable[type[nn.Module]] = GUIDED_ACTIVATIONS,
    functional: bool = False,
) -> torch.Tensor:
    """Guided Grad-CAM: Guided Backprop × the (ReLU-ed, upsampled, not normalised) Grad-CAM map, as in the
    Grad-CAM paper and captum's ``GuidedGradCam``. Same shape as ``x``.

    Usage: ``guided_grad_cam(model, "layer4", x, target=281)``
    """
    cam = grad_cam(model, layer, x, target, relu=True, upsample=True, normalize=False)
    guided = guided_backprop(model, x, target, activations=activations, functional=functional)
    return guided * cam[:, None]


# -- comparing maps ------------------------------------------------------------------------------------------
def rank_correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Spearman's rank correlation (rho) of two maps of the same size, in [-1, 1]; tied values share their average
    rank (as in ``scipy.stats.spearmanr``), so a map with many exact zeros -- a Grad-CAM map after its ReLU -- gives
    the same answer whatever the order of its pixels. A constant map or NaNs raise ``ValueError``.

    Usage: ``rank_correlation(map_trained.abs(), map_random.abs())``
    """
    if a.numel() != b.numel():
        raise ValueError(f"Maps must have the same number of values, got {a.numel()} and {b.numel()}.")
    if a.numel() < 2:
        raise ValueError("Need at least two values to correlate.")

    def average_ranks(t: torch.Tensor) -> torch.Tensor:
        flat = t.detach().flatten().double().cpu()
        if torch.isnan(flat).any():
            raise ValueError("The map contains NaN values; rank correlation needs real numbers.")
        values, order = flat.sort(stable=True)
        _, group, counts = torch.unique_consecutive(values, return_inverse=True, return_counts=True)
        ends = counts.cumsum(0).double()  # 1-based rank of the last value of each group of equal values
        mean_rank = ends - (counts.double() - 1) / 2  # mean of the ranks end - count + 1 ... end
        result = torch.empty_like(flat)
        result[order] = mean_rank[group]
        return result

    ra, rb = average_ranks(a), average_ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    norm = ra.norm() * rb.norm()
    if norm == 0:
        raise ValueError("A map is constant (all values tied), so it has no ranking to correlate; check the map.")
    return float((ra * rb).sum() / norm)
