"""course_utils.saliency: exact against captum and pytorch-grad-cam where they are right, right where they are not,
and nothing of the caller's changed -- also after a bad target or a raising model."""

from __future__ import annotations

import copy
import functools
import gc
import warnings
from collections.abc import Iterator

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from captum.attr import GuidedBackprop

from course_utils.hooks import assert_no_hooks
from course_utils.libraries import captum_grad_cam as captum_cam
from course_utils.libraries import pytorch_grad_cam as library_cam
from course_utils.machinery.messages import in_language
from course_utils.saliency import (
    element_wise_cam,
    grad_cam,
    guided_backprop,
    guided_grad_cam,
    rank_correlation,
    resolve_targets,
    vanilla_gradient,
)


@functools.cache
def _built(name: str) -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return getattr(torchvision.models, name)(weights=None).eval(), torch.get_rng_state()


def tv_model(name: str) -> nn.Module:
    """torchvision's ``name`` with seed 0's weights and the random state after them: a copy of one built once (vgg11's
    initialisation alone takes 2 CPU-s)."""
    model, state = _built(name)
    torch.set_rng_state(state)
    return copy.deepcopy(model)


@pytest.fixture(scope="module", autouse=True)
def _free_the_models() -> Iterator[None]:
    yield
    _built.cache_clear()  # 0.8 GB that the worker's next tests need not carry


# -- Guided Backprop ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["alexnet", "vgg11", "resnet18"])
@pytest.mark.parametrize("batch", [1, 4])
def test_guided_backprop_equals_captum_on_relu_models(name: str, batch: int) -> None:
    model = tv_model(name)
    x = torch.randn(batch, 3, 64, 64, generator=torch.Generator().manual_seed(batch))
    targets = [3, 17, 250, 999][:batch]
    ours = guided_backprop(model, x, targets)
    with warnings.catch_warnings(action="ignore"):  # captum's note that it sets hooks
        reference = GuidedBackprop(model).attribute(x, target=targets)
    assert (ours - reference).abs().max() <= 1e-6 * reference.abs().max()
    assert not torch.allclose(ours, vanilla_gradient(model, x, targets))
    assert_no_hooks(model)


class GuidedReLU6(torch.autograd.Function):
    """Independent reference: ReLU6 whose backward is the guided rule written out by hand."""

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(0, 6)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad.clamp(min=0) * ((x > 0) & (x < 6)).to(grad.dtype)


class SmallReLU6Net(nn.Module):
    """Conv net whose single ReLU6 module is reused three times, like EfficientNet-Lite's blocks."""

    def __init__(self, reference: bool = False) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.act = nn.ReLU6()
        self.fc = nn.Linear(8, 5)
        self.reference = reference

    def activate(self, x: torch.Tensor) -> torch.Tensor:
        return GuidedReLU6.apply(x) if self.reference else self.act(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.activate(self.conv1(x) * 3)
        x = self.activate(self.conv2(x) * 3)
        return self.fc(self.activate(x.mean(dim=(2, 3)) * 3))


def test_guided_backprop_on_a_reused_relu6_equals_an_independent_reference() -> None:
    torch.manual_seed(2)
    model = SmallReLU6Net()
    reference = SmallReLU6Net(reference=True)
    reference.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 8, 8)
    ours = guided_backprop(model, x, [1, 3])
    expected = vanilla_gradient(reference, x, [1, 3])
    assert torch.allclose(ours, expected, atol=1e-6)
    assert not torch.allclose(ours, vanilla_gradient(model, x, [1, 3]), atol=1e-4)
    with warnings.catch_warnings(action="ignore"):
        captum = GuidedBackprop(model).attribute(x, target=[1, 3])
    assert torch.allclose(captum, vanilla_gradient(model, x, [1, 3]))  # captum guides nn.ReLU only


class FunctionalNet(nn.Module):
    def __init__(self, in_place: bool = False) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3)
        self.fc = nn.Linear(6, 4)
        self.in_place = in_place

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv(x)
        h = h.relu_() if self.in_place else F.relu(h)
        return self.fc(h.mean(dim=(2, 3)))


@pytest.mark.parametrize("in_place", [False, True])
def test_functional_relus_warn_and_can_be_caught(in_place: bool) -> None:
    torch.manual_seed(3)
    model = FunctionalNet(in_place)
    x = torch.randn(1, 3, 6, 6)
    with pytest.warns(UserWarning, match="guided no activation.*functional=True"):
        plain = guided_backprop(model, x, 1)
    assert torch.equal(plain, vanilla_gradient(model, x, 1))
    with in_language("zh"), pytest.warns(UserWarning, match="^guided_backprop 没有对任何激活函数做导向：FunctionalNet "
                                                             "没有运行任何 ReLU/ReLU6 模块.*请传入 functional=True。$"):
        guided_backprop(model, x, 1)  # notebook 05 prints it in the Chinese edition

    class WithModule(nn.Module):  # the same network, written with an nn.ReLU module
        def __init__(self) -> None:
            super().__init__()
            self.conv, self.act, self.fc = model.conv, nn.ReLU(), model.fc

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.act(self.conv(x)).mean(dim=(2, 3)))

    with warnings.catch_warnings(action="error"):
        caught = guided_backprop(model, x, 1, functional=True)
    assert torch.allclose(caught, guided_backprop(WithModule(), x, 1), atol=1e-7)
    assert not torch.allclose(caught, plain)


# -- Grad-CAM --------------------------------------------------------------------------------------------------
# targets chosen so that no map is flat: with random weights a class's map is often all negative (then all 0)
@pytest.mark.parametrize(
    ("name", "layer", "size", "targets"), [("resnet18", "layer4", 96, [7, 400]), ("vgg11", "features.20", 160, [7, 2])]
)
def test_grad_cam_agrees_with_captum_and_pytorch_grad_cam(name: str, layer: str, size: int, targets: list[int]) -> None:
    model = tv_model(name)
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(5))
    ours = grad_cam(model, layer, x, targets)
    assert ours.shape == (2, size, size)
    assert (ours - captum_cam(model, layer, x, targets)).abs().max() <= 1e-5
    assert (ours - library_cam(model, layer, x, targets)).abs().max() <= 1e-5
    assert torch.allclose(ours.flatten(1).amin(1), torch.zeros(2))
    assert torch.allclose(ours.flatten(1).amax(1), torch.ones(2))
    assert_no_hooks(model)


def test_grad_cam_is_right_where_an_in_place_relu_follows_the_layer() -> None:
    model = tv_model("vgg11")
    x = torch.randn(1, 3, 128, 128, generator=torch.Generator().manual_seed(6))
    assert model.features[19].inplace  # features.18 is a conv followed by ReLU(inplace=True)
    ours = grad_cam(model, "features.18", x, 11)
    model.features[19].inplace = False
    truth = captum_cam(model, "features.18", x, [11])
    model.features[19].inplace = True
    assert (ours - truth).abs().max() <= 1e-5
    assert (library_cam(model, "features.18", x, [11]) - truth).abs().max() > 0.1  # stores an alias on CPU


def test_element_wise_cam_equals_grad_cam_only_before_global_pooling() -> None:
    model = tv_model("resnet18")
    x = torch.randn(1, 3, 96, 96, generator=torch.Generator().manual_seed(7))
    assert torch.allclose(element_wise_cam(model, "layer4", x, 5), grad_cam(model, "layer4", x, 5), atol=1e-6)
    assert rank_correlation(element_wise_cam(model, "layer2", x, 5), grad_cam(model, "layer2", x, 5)) < 0.99


def test_grad_cam_stops_at_the_layer_needs_no_input_grad_and_guided_grad_cam_is_the_product() -> None:
    model = tv_model("resnet18")
    model.requires_grad_(False)  # frozen model, input without requires_grad: still works
    x = torch.randn(1, 3, 64, 64)
    assert grad_cam(model, "layer3", x).shape == (1, 64, 64)
    model.requires_grad_(True)
    seen: list[str] = []
    with model.layer2.register_full_backward_hook(lambda m, gi, go: seen.append("layer2")):
        grad_cam(model, "layer3", x)
    assert seen == []  # nothing below layer3 was differentiated
    assert all(p.grad is None for p in model.parameters())
    cam = grad_cam(model, "layer4", x, 3, normalize=False)  # Guided Grad-CAM is the product
    assert torch.allclose(guided_grad_cam(model, "layer4", x, 3), guided_backprop(model, x, 3) * cam[:, None])


# -- the caller's things stay as they were --------------------------------------------------------------------
class Boom(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("boom")


def small_cnn(raising: bool = False) -> nn.Sequential:
    torch.manual_seed(8)
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU6(),
        Boom() if raising else nn.Identity(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.5), nn.Linear(4, 3),
    )


CALLS = {
    "vanilla_gradient": lambda m, x, t: vanilla_gradient(m, x, t),
    "guided_backprop": lambda m, x, t: guided_backprop(m, x, t),
    "guided_backprop(functional)": lambda m, x, t: guided_backprop(m, x, t, functional=True),
    "grad_cam": lambda m, x, t: grad_cam(m, "2", x, t),
    "element_wise_cam": lambda m, x, t: element_wise_cam(m, "2", x, t),
    "guided_grad_cam": lambda m, x, t: guided_grad_cam(m, "2", x, t),
}


@pytest.mark.parametrize("case", ["normal", "bad target", "raising module"])
@pytest.mark.parametrize("call", list(CALLS))
@pytest.mark.parametrize("training", [False, True])
def test_nothing_of_the_caller_changes(call: str, case: str, training: bool) -> None:
    model = small_cnn(raising=case == "raising module").train(training)
    parameter_grads = [torch.full_like(p, 0.5) for p in model.parameters()]
    for p, g in zip(model.parameters(), parameter_grads):
        p.grad = g.clone()
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    x.grad = torch.full_like(x, 7.0)
    x_before, flags_before = x.detach().clone(), [(type(m).__name__, dict(vars(m))) for m in model.modules()]
    target = [0, 5] if case == "bad target" else [0, 2]
    expected_error = {"bad target": (ValueError, "out of range"), "raising module": (RuntimeError, "boom")}.get(case)
    if expected_error:
        with pytest.raises(expected_error[0], match=expected_error[1]):
            CALLS[call](model, x, target)
    else:
        result = CALLS[call](model, x, target)
        assert result.device == x.device and result.shape[0] == 2
    assert_no_hooks(model)
    assert model.training is training and all(m.training is training for m in model.modules())
    assert torch.equal(x.detach(), x_before) and torch.equal(x.grad, torch.full_like(x, 7.0))
    assert all(torch.equal(p.grad, g) for p, g in zip(model.parameters(), parameter_grads))
    flags_after = [(type(m).__name__, dict(vars(m))) for m in model.modules()]
    assert [(n, {k: v for k, v in f.items() if not k.startswith("_")}) for n, f in flags_before] == [
        (n, {k: v for k, v in f.items() if not k.startswith("_")}) for n, f in flags_after
    ]
    assert not torch.overrides._get_current_function_mode_stack()


def test_targets_are_resolved_or_rejected_clearly() -> None:
    logits = torch.tensor([[0.0, 2.0, 1.0], [3.0, 0.0, 1.0]])
    assert resolve_targets(None, logits).tolist() == [1, 0]
    assert resolve_targets(2, logits).tolist() == [2, 2]
    assert resolve_targets(torch.tensor([2, 1]), logits).tolist() == [2, 1]
    for bad, message in [
        (3, "out of range"), (-1, "out of range"), ([1], "2 targets|1 targets for a batch of 2"), (1.5, "must be None"),
        (True, "not a bool"), (torch.tensor([0.0, 1.0]), "integer"), (["a", "b"], "contain ints"),
    ]:
        with pytest.raises(ValueError, match=message):
            resolve_targets(bad, logits)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"\(N, classes\)"):
        resolve_targets(0, torch.zeros(2, 3, 4))


def test_bad_inputs_get_clear_errors() -> None:
    model = small_cnn()
    with pytest.raises(ValueError, match="unsqueeze"):
        vanilla_gradient(model, torch.zeros(3))
    with pytest.raises(TypeError, match=r"x.float\(\)"):
        guided_backprop(model, torch.zeros(1, 3, 8, 8, dtype=torch.long))
    with pytest.raises(ValueError, match="exactly one layer"):
        grad_cam(model, nn.Conv2d, torch.zeros(1, 3, 8, 8))
    with pytest.raises(ValueError, match="runs once"):
        shared = nn.ReLU()
        grad_cam(nn.Sequential(nn.Conv2d(3, 3, 1), shared, shared, nn.AdaptiveAvgPool2d(1), nn.Flatten()), shared,
                 torch.zeros(1, 3, 4, 4))
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        grad_cam(model, "8", torch.zeros(1, 3, 8, 8))
    assert_no_hooks(model)


def test_rank_correlation_is_spearman_with_average_ranks_on_ties() -> None:
    a = torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0])
    assert rank_correlation(a, a**3) == pytest.approx(1.0)
    assert rank_correlation(a, -a) == pytest.approx(-1.0)
    assert rank_correlation(a, torch.tensor([2.0, 1.0, 4.0, 3.0, 5.0])) == pytest.approx(0.8)  # 1 - 6*4/(5*24)
    with pytest.raises(ValueError, match="same number"):
        rank_correlation(a, a[:3])
    # Independent reference: scipy's spearmanr gives tied values their average rank.
    scipy_stats = pytest.importorskip("scipy.stats")
    # By hand: ranks (1.5, 1.5, 3, 4) and (1, 2.5, 2.5, 4), centred (-1, -1, .5, 1.5) and (-1.5, 0, 0, 1.5):
    # rho = 3.75 / sqrt(4.5 * 4.5) = 5/6. Ties broken by position would rank both (1, 2, 3, 4) and give 1.0.
    tied = rank_correlation(torch.tensor([0.0, 0.0, 1.0, 2.0]), torch.tensor([0.0, 1.0, 1.0, 2.0]))
    assert tied == pytest.approx(5 / 6)
    generator = torch.Generator().manual_seed(0)
    for trial in range(20):
        # Grad-CAM-like maps: many exact zeros (after the ReLU) and a few repeated values.
        a = torch.relu(torch.randn(14, 14, generator=generator)).mul(4).round()
        b = torch.relu(torch.randn(14, 14, generator=generator) + 0.3 * a).mul(4).round()
        expected = scipy_stats.spearmanr(a.flatten().numpy(), b.flatten().numpy()).statistic
        assert rank_correlation(a, b) == pytest.approx(float(expected), abs=1e-12), trial
    # The answer no longer depends on where the tied pixels sit: permuting both maps alike changes nothing.
    permutation = torch.randperm(a.numel(), generator=generator)
    assert rank_correlation(a.flatten()[permutation], b.flatten()[permutation]) == pytest.approx(rank_correlation(a, b))
    with pytest.raises(ValueError, match="constant"):
        rank_correlation(torch.zeros(3, 3), torch.randn(3, 3))
    with pytest.raises(ValueError, match="NaN"):
        rank_correlation(torch.tensor([0.0, float("nan"), 1.0]), torch.tensor([0.0, 1.0, 2.0]))


def test_100_calls_leave_no_growth() -> None:
    model = small_cnn().eval()
    x = torch.randn(1, 3, 8, 8)

    def live_tensors() -> int:
        return sum(issubclass(type(obj), torch.Tensor) for obj in gc.get_objects())

    for fn in (lambda: guided_backprop(model, x, functional=True), lambda: grad_cam(model, "2", x)):
        fn()
        gc.collect()
        before = live_tensors()
        for _ in range(100):
            fn()
        gc.collect()
        assert live_tensors() == before
    assert_no_hooks(model)
