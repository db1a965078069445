"""Hooks that change training: plug-and-play DropBlock / Dropout2d, and gradient clipping by value.

- :func:`drop_block` and :func:`dropout2d` regularise the *outputs* of named layers through forward hooks, in
  training mode only (an exact identity in eval mode). DropBlock is ``torchvision.ops.drop_block2d``: under one seed,
  bit-identical to wrapping the layer in ``torchvision.ops.DropBlock2d``.
- :func:`clip_grad_value_hooks` clamps every parameter gradient to ``[-clip, clip]`` from hooks (see its modes).
  Clipping by *norm* needs all gradients together, which no per-tensor hook sees: use ``clip_grad_norm_``.
- :func:`expected_drop_fraction` -- the fraction DropBlock drops on average, in closed form.

Each returns the :class:`~course_utils.hooks.HookRegistry` holding its hooks: a context manager, or ``remove()``.

Usage::

    with drop_block(model, ["layer2", "layer3"], p=0.1, block_size=3):
        train(model)          # regularised only inside the block (and only in training mode)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

import torch
import torch.nn as nn
import torch.nn.functional as F
from torchvision.ops import drop_block2d

from course_utils.hooks import HookRegistry, LayerSpec, resolve_layers

__all__ = ["drop_block", "dropout2d", "clip_grad_value_hooks", "expected_drop_fraction"]


def _check_p(p: Any) -> float:
    if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p < 1.0:
        raise ValueError(f"p must be a number in [0, 1): the probability of dropping a unit; got {p!r}.")
    return float(p)


def _check_block_size(block_size: Any) -> int:
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1 or block_size % 2 == 0:
        raise ValueError(f"block_size must be an odd positive int (1, 3, 5, ...), got {block_size!r}.")
    return block_size


def _all_or_none(hooks: HookRegistry, register: Callable[[HookRegistry], None]) -> HookRegistry:
    """``hooks`` after ``register(hooks)``; if that raises (a bad layer name, say), what it registered is removed."""
    try:
        register(hooks)
    except BaseException:
        hooks.remove()
        raise
    return hooks


def _on_feature_maps(model: nn.Module, layers: LayerSpec | Iterable[LayerSpec], what: str,
                     apply: Callable[[torch.Tensor], torch.Tensor]) -> HookRegistry:
    """Forward hooks that apply ``apply(output)`` to each layer's 4-D tensor output in training mode."""

    def hook_for(name: str) -> Callable[..., Any]:
        def hook(module: nn.Module, args: tuple, output: Any) -> Any:
            if not module.training:
                return None  # eval mode: the layer's output passes unchanged
            if not isinstance(output, torch.Tensor):
                raise TypeError(
                    f"{what} on layer {name!r}: the layer returns a {type(output).__name__}, not a tensor. "
                    f"Attach it to a layer that returns a feature map (N, C, H, W), e.g. a conv or a block."
                )
            if output.dim() != 4:
                raise ValueError(
                    f"{what} on layer {name!r} needs a 4-D (N, C, H, W) output, got shape {tuple(output.shape)}. "
                    f"Choose a convolutional layer, not a linear one."
                )
            return apply(output)

        return hook

    def register(hooks: HookRegistry) -> None:
        for name, module in resolve_layers(model, layers):
            hooks.forward(module, hook_for(name))

    return _all_or_none(HookRegistry(model), register)


def drop_block(
    model: nn.Module, layers: LayerSpec | Iterable[LayerSpec], p: float, block_size: int
) -> HookRegistry:
    """Apply DropBlock (Ghiasi et al., 2018) to the outputs of ``layers`` while they are in training mode.

    Usage: ``with drop_block(model, "layer3", p=0.1, block_size=3): train(model)``
    """
    p, block_size = _check_p(p), _check_block_size(block_size)
    return _on_feature_maps(model, layers, "DropBlock",
                            lambda out: drop_block2d(out, p, block_size, inplace=False, training=True))


def dropout2d(model: nn.Module, layers: LayerSpec | Iterable[LayerSpec], p: float) -> HookRegistry:
    """Apply channel dropout (``F.dropout2d``) to the outputs of ``layers`` while they are in training mode.

    Usage: ``with dropout2d(model, ["conv2"], p=0.2): train(model)``
    """
    p = _check_p(p)
    return _on_feature_maps(model, layers, "Dropout2d", lambda out: F.dropout2d(out, p, training=True))


def clip_grad_value_hooks(
    parameters: nn.Module | Iterable[torch.Tensor],
    clip_value: float,
    *,
    mode: Literal["post_accumulate", "tensor"] = "post_accumulate",
) -> HookRegistry:
    """Clamp the gradient of every parameter to ``[-clip_value, clip_value]`` from hooks.

    ``"post_accumulate"`` clamps ``.grad`` in place after it was accumulated (same as calling
    ``clip_grad_value_`` after every backward); ``"tensor"`` clamps each backward's contribution before it is
    added (same for a single backward, different when gradients accumulate over several).

    Usage: ``with clip_grad_value_hooks(model, 0.5): loss.backward()``
    """
    if isinstance(clip_value, bool) or not isinstance(clip_value, (int, float)) or clip_value <= 0:
        raise ValueError(f"clip_value must be a positive number, got {clip_value!r}.")
    if mode not in ("post_accumulate", "tensor"):
        raise ValueError(f"mode must be 'post_accumulate' or 'tensor', got {mode!r}.")
    params = list(parameters.parameters()) if isinstance(parameters, nn.Module) else list(parameters)
    trainable = [p for p in params if isinstance(p, torch.Tensor) and p.requires_grad]
    if not trainable:
        raise ValueError("No parameter requires grad: nothing to clip.")
    limit = float(clip_value)

    def clamp_accumulated(leaf: torch.Tensor) -> None:  # post-accumulate hooks must return None
        assert leaf.grad is not None  # the hook runs right after a gradient was accumulated into .grad
        leaf.grad.clamp_(-limit, limit)

    def clamp_contribution(grad: torch.Tensor) -> torch.Tensor:
        return grad.clamp(-limit, limit)

    def register(hooks: HookRegistry) -> None:
        for param in trainable:
            if mode == "post_accumulate":
                hooks.post_accumulate(param, clamp_accumulated)
            else:
                hooks.tensor(param, clamp_contribution)

    return _all_or_none(HookRegistry(), register)


def expected_drop_fraction(p: float, block_size: int, height: int, width: int) -> float:
    """The mean fraction of units that ``torchvision.ops.drop_block2d`` drops on an ``height`` x ``width`` map.

    Seeds fall with probability gamma on the positions where a whole block fits; a unit is dropped when at least
    one of the ``n`` seed positions whose block covers it fires: ``1 - (1 - gamma) ** n``. Near the borders fewer
    blocks cover a unit, and overlapping blocks drop some units twice, so the fraction is below ``p`` for blocks
    larger than 1.

    Usage: ``expected_drop_fraction(0.5, 7, 14, 14)``
    """
    p, block_size = _check_p(p), _check_block_size(block_size)
    block_size = min(block_size, height, width)
    if block_size % 2 == 0:
        raise ValueError(f"block_size {block_size} (clipped to the map size) must be odd.")
    gamma = (p * height * width) / (block_size**2 * (height - block_size + 1) * (width - block_size + 1))
    half = block_size // 2

    def covering(size: int) -> torch.Tensor:
        centres = torch.arange(half, size - half, dtype=torch.float64)  # where a block centre may fall
        positions = torch.arange(size, dtype=torch.float64)
        return ((positions[:, None] - centres[None, :]).abs() <= half).sum(dim=1).double()

    n = covering(height)[:, None] * covering(width)[None, :]
    return float((1 - (1 - min(gamma, 1.0)) ** n).mean())
