"""course_utils.regularize: DropBlock/Dropout2d through hooks, and gradient clipping by value through hooks."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch
import torch.nn as nn
from torchvision.ops import DropBlock2d

from course_utils.hooks import UnknownLayerError, assert_no_hooks
from course_utils.regularize import clip_grad_value_hooks, drop_block, dropout2d, expected_drop_fraction


def cnn() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.Flatten(),
                         nn.Linear(4 * 14 * 14, 3))


@pytest.mark.parametrize(("p", "block"), [(0.1, 1), (0.2, 3), (0.5, 7)])
def test_drop_block_is_bit_identical_to_wrapping_with_torchvision(p: float, block: int) -> None:
    model = cnn()
    x = torch.randn(8, 1, 14, 14)
    torch.manual_seed(3)
    wrapped = model[2](DropBlock2d(p, block)(model[1](model[0](x))))
    with drop_block(model, "1", p, block):
        torch.manual_seed(3)
        hooked = model[2](model[1](model[0](x)))
    assert torch.equal(wrapped, hooked)
    assert_no_hooks(model)


@pytest.mark.parametrize(("p", "block"), [(0.1, 3), (0.3, 5), (0.5, 7)])
def test_realised_drop_fraction_matches_the_closed_form_and_is_below_p(p: float, block: int) -> None:
    layer = nn.Identity()
    torch.manual_seed(4)
    with drop_block(layer, layer, p, block):
        dropped = (layer(torch.ones(256, 16, 14, 14)) == 0).double().mean().item()
    expected = expected_drop_fraction(p, block, 14, 14)
    assert dropped == pytest.approx(expected, abs=0.005)
    assert expected < p
    assert expected_drop_fraction(p, 1, 14, 14) == pytest.approx(p)


def test_identity_in_eval_and_hooks_removed_on_exit_and_on_error() -> None:
    model = cnn().eval()
    x = torch.randn(2, 1, 14, 14)
    with drop_block(model, ["0", "2"], 0.5, 3), dropout2d(model, "1", 0.5):
        assert torch.equal(model(x), cnn().eval()(x))
    assert_no_hooks(model)
    model.train()
    with pytest.raises(ValueError, match="4-D"):
        with drop_block(model, "4", 0.1, 3):
            model(x)
    assert_no_hooks(model)
    registry = dropout2d(model, "0", 0.3)
    registry.remove()
    assert_no_hooks(model)


def test_dropout2d_drops_whole_channels() -> None:
    layer = nn.Identity()
    torch.manual_seed(5)
    with dropout2d(layer, layer, 0.5):
        out = layer(torch.ones(32, 8, 5, 5))
    per_channel = out.flatten(2)
    assert torch.all((per_channel == 0).all(dim=2) | (per_channel == 2.0).all(dim=2))


def test_arguments_are_validated_clearly() -> None:
    model = cnn()
    for p in (-0.1, 1.0, "0.1", True):
        with pytest.raises(ValueError, match=r"p must be a number in \[0, 1\)"):
            drop_block(model, "0", p, 3)  # type: ignore[arg-type]
    for block in (0, 2, 4, 3.0):
        with pytest.raises(ValueError, match="odd positive int"):
            drop_block(model, "0", 0.1, block)  # type: ignore[arg-type]
    with pytest.raises(UnknownLayerError, match="No layer named 'conv1'"):
        drop_block(model, "conv1", 0.1, 3)

    class Pair(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x, x

    pair = nn.Sequential(Pair())
    with pytest.raises(TypeError, match="layer '0'.*returns a tuple"):
        with dropout2d(pair, "0", 0.1):
            pair(torch.ones(1, 1, 2, 2))
    assert_no_hooks(model, pair)
    with pytest.raises(ValueError, match="clip_value"):
        clip_grad_value_hooks(model, 0)
    with pytest.raises(ValueError, match="mode"):
        clip_grad_value_hooks(model, 1.0, mode="norm")  # type: ignore[arg-type]


def gradients_after(model: nn.Module, batches: list[torch.Tensor], clip: str,
                    limit: float = 0.05) -> list[torch.Tensor]:
    """Clipped by the hooks of mode ``clip``, or (``"each"``) by ``clip_grad_value_`` after each batch's backward."""
    model.zero_grad(set_to_none=True)
    hooks = nullcontext() if clip == "each" else clip_grad_value_hooks(model, limit, mode=clip)  # type: ignore[arg-type]
    with hooks:
        for batch in batches:
            model(batch).square().sum().backward()
            if clip == "each":
                torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    return [p.grad.clone() for p in model.parameters()]


def test_clipping_hooks_equal_clip_grad_value_for_one_backward_under_accumulation_only_post_accumulate() -> None:
    model = cnn()
    batch = [torch.randn(4, 1, 14, 14)]
    reference = gradients_after(model, batch, "each")
    for mode in ("post_accumulate", "tensor"):
        assert all(torch.equal(a, b) for a, b in zip(gradients_after(model, batch, mode), reference))
    batches = [torch.randn(4, 1, 14, 14, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    limit = 0.05
    post = gradients_after(model, batches, "post_accumulate", limit)
    tensor = gradients_after(model, batches, "tensor", limit)
    # the post-accumulate hook equals clip_grad_value_ called after every backward of the accumulation
    every_step = gradients_after(model, batches, "each", limit)
    assert all(torch.equal(a, b) for a, b in zip(post, every_step))
    assert all(g.abs().max() <= limit for g in post)
    assert max((a - b).abs().max().item() for a, b in zip(tensor, every_step)) > 0
    assert max(g.abs().max().item() for g in tensor) <= len(batches) * limit + 1e-7  # only each contribution is bounded
    assert max(g.abs().max().item() for g in tensor) > limit
    assert_no_hooks(model)
