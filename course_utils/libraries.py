"""The same Grad-CAM maps from captum and pytorch-grad-cam, scaled like ``course_utils.saliency.grad_cam``.

Used to compare against the libraries (notebook 06, ``tests/test_saliency.py``, ``benchmarks/``):

- :func:`captum_grad_cam` -- captum's ``LayerGradCam`` (ReLU on), bilinearly upsampled to the input's size with
  captum's own ``LayerAttribution.interpolate``, then min-max scaled per sample to [0, 1];
- :func:`pytorch_grad_cam` -- pytorch-grad-cam's ``GradCAM``, which returns finished [0, 1] maps.

Both return ``(N, H, W)`` CPU tensors. ``target`` is an int for all samples or one int per sample.

Usage: ``(grad_cam(model, "layer4", x, 3) - captum_grad_cam(model, "layer4", x, 3)).abs().max()``
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn as nn

from course_utils.saliency import _finish

__all__ = ["captum_grad_cam", "pytorch_grad_cam"]


def _per_sample(target: int | Sequence[int], n: int) -> list[int]:
    targets = [target] * n if isinstance(target, int) else list(target)
    if len(targets) != n:
        raise ValueError(f"Got {len(targets)} targets for a batch of {n}: give one int, or one per sample.")
    return targets


def captum_grad_cam(model: nn.Module, layer: str, x: torch.Tensor, target: int | Sequence[int]) -> torch.Tensor:
    """captum's ``LayerGradCam``, upsampled and scaled to [0, 1] per sample (a flat map becomes all 0)."""
    from captum.attr import LayerAttribution, LayerGradCam

    targets = _per_sample(target, x.shape[0])
    raw = LayerGradCam(model, model.get_submodule(layer)).attribute(x, target=targets, relu_attributions=True)
    cam = LayerAttribution.interpolate(raw, tuple(x.shape[-2:]), "bilinear")[:, 0].detach()
    return _finish(cam, cam, relu=False, upsample=False, normalize=True).cpu()


def pytorch_grad_cam(model: nn.Module, layer: str, x: torch.Tensor, target: int | Sequence[int]) -> torch.Tensor:
    """pytorch-grad-cam's ``GradCAM`` maps (its hooks are released by its context manager)."""
    from pytorch_grad_cam import GradCAM
    from pytorch_grad_cam.utils.model_targets import ClassifierOutputTarget

    targets = [ClassifierOutputTarget(t) for t in _per_sample(target, x.shape[0])]
    with GradCAM(model=model, target_layers=[model.get_submodule(layer)]) as cam:
        return torch.from_numpy(cam(input_tensor=x, targets=targets))
