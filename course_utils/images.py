"""Photos that ship with scikit-image (``"cat"``, ``"coffee"`` and their 224x224 composite ``"cat|coffee"``), turned
into model inputs (:func:`to_input`: resize, centre-crop, normalise for ``"imagenet"`` or ``"efficientnet-lite"``)
and back into pictures (:func:`crop_photo`, :func:`saliency_to_image`, :func:`show_heatmap`) -- no downloads.

Usage: ``x = to_input(load_photo("cat"), style="imagenet")``
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["PHOTOS", "load_photo", "crop_photo", "to_input", "saliency_to_image", "show_heatmap", "IMAGENET_MEAN",
           "IMAGENET_STD"]

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
PHOTOS = ("cat", "coffee", "cat|coffee")
Style = Literal["imagenet", "efficientnet-lite"]


def crop_photo(image: np.ndarray, size: int = 224) -> np.ndarray:
    """Resize the shorter side to ``size`` and centre-crop to ``size`` x ``size`` (uint8 RGB in and out): exactly
    the pixels :func:`to_input` feeds the model.

    Usage: ``plt.imshow(crop_photo(load_photo("cat")))``
    """
    tensor = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1).float()[None]
    height, width = tensor.shape[-2:]
    scale = size / min(height, width)
    new_size = (max(size, round(height * scale)), max(size, round(width * scale)))
    tensor = F.interpolate(tensor, size=new_size, mode="bilinear", align_corners=False, antialias=True)
    top, left = (new_size[0] - size) // 2, (new_size[1] - size) // 2
    tensor = tensor[..., top : top + size, left : left + size]
    return tensor[0].permute(1, 2, 0).round().clamp(0, 255).to(torch.uint8).numpy()


def load_photo(name: str) -> np.ndarray:
    """An RGB photo as a uint8 array ``(H, W, 3)``: ``"cat"``, ``"coffee"`` or the composite ``"cat|coffee"``.

    Usage: ``photo = load_photo("cat")``
    """
    from skimage import data

    if name == "cat":
        return data.chelsea()
    if name == "coffee":
        return data.coffee()
    if name == "cat|coffee":
        left = crop_photo(data.chelsea(), 224)[:, 56:168]  # the middle half of each square photo
        right = crop_photo(data.coffee(), 224)[:, 56:168]
        return np.concatenate([left, right], axis=1)
    raise ValueError(f"Unknown photo {name!r}: choose one of {', '.join(repr(p) for p in PHOTOS)}.")


def to_input(image: np.ndarray, *, size: int = 224, style: Style = "imagenet") -> torch.Tensor:
    """A uint8 RGB photo as a normalised ``(1, 3, size, size)`` float tensor.

    Usage: ``x = to_input(load_photo("coffee"), style="efficientnet-lite")``
    """
    if not isinstance(image, np.ndarray) or image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
        raise ValueError("to_input expects a uint8 RGB array of shape (H, W, 3), e.g. load_photo('cat').")
    pixels = torch.from_numpy(crop_photo(image, size)).permute(2, 0, 1).float()
    if style == "imagenet":
        mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
        std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
        tensor = (pixels / 255 - mean) / std
    elif style == "efficientnet-lite":
        tensor = (pixels - 127.0) / 128.0
    else:
        raise ValueError(f"style must be 'imagenet' or 'efficientnet-lite', got {style!r}.")
    return tensor[None].contiguous()


def saliency_to_image(saliency: torch.Tensor) -> np.ndarray:
    """A ``(3, H, W)`` (or ``(1, 3, H, W)``) gradient map as an RGB image in [0, 1] for ``plt.imshow``:
    standardised, scaled to a standard deviation of 0.1 around 0.5, clipped (the usual way to show GBP).

    Usage: ``plt.imshow(saliency_to_image(guided_backprop(model, x)))``
    """
    if saliency.dim() == 4:
        if saliency.shape[0] != 1:
            raise ValueError("Pass one sample: saliency[i], not a whole batch.")
        saliency = saliency[0]
    if saliency.dim() != 3:
        raise ValueError(f"Expected a (3, H, W) map, got shape {tuple(saliency.shape)}.")
    values = saliency.detach().float().cpu()
    values = (values - values.mean()) / values.std().clamp_min(1e-12)
    return (values * 0.1 + 0.5).clamp(0, 1).permute(1, 2, 0).numpy()


def show_heatmap(ax: Any, photo: np.ndarray, heatmap: torch.Tensor, title: str = "", alpha: float = 0.5) -> Any:
    """Draw ``heatmap`` (``(H, W)``, values in [0, 1]) over ``photo`` on a matplotlib axis; return the heatmap's
    image, for a colour bar.

    Usage: ``image = show_heatmap(ax, photo224, grad_cam(model, "layer4", x)[0]); fig.colorbar(image, ax=ax)``
    """
    values = heatmap.detach().float().cpu()
    if values.dim() != 2:
        raise ValueError(f"Expected a (H, W) heatmap, got shape {tuple(values.shape)}: pass one sample, e.g. maps[0].")
    ax.imshow(photo)
    image = ax.imshow(values.numpy(), cmap="jet", alpha=alpha, extent=(0, photo.shape[1], photo.shape[0], 0),
                      vmin=0.0, vmax=1.0)
    ax.set_title(title, fontsize=9)
    ax.axis("off")
    return image
