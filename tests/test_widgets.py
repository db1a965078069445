"""SaliencyExplorer: its selection logic and caching, tested without a browser."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import torch
import torch.nn as nn

from course_utils.hooks import UnknownLayerError, assert_no_hooks
from course_utils.saliency import grad_cam
from course_utils.widgets import METHODS, SaliencyExplorer


def explorer() -> SaliencyExplorer:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 6),
    ).eval()
    rng = np.random.default_rng(0)
    photos = {name: rng.integers(0, 255, size=(20, 24, 3), dtype=np.uint8) for name in ("a", "b")}
    return SaliencyExplorer(model, photos, ["0", "2"], [f"class {i}" for i in range(6)], top_k=3)


def test_initial_state_and_class_options() -> None:
    ex = explorer()
    options = ex.class_options("a")
    assert len(options) == 3 and ex.state["target"] == options[0][1]
    probabilities = [float(label.rsplit("(", 1)[1].rstrip(")")) for label, _ in options]
    assert probabilities == sorted(probabilities, reverse=True)
    assert ex.state == {"photo": "a", "target": options[0][1], "layer": "2", "method": "Grad-CAM"}


def test_a_new_photo_resets_the_class_unless_given() -> None:
    ex = explorer()
    ex.select(target=5)
    assert ex.select(photo="b")["target"] == ex.class_options("b")[0][1]
    assert ex.select(photo="a", target=4)["target"] == 4


def test_saliency_follows_the_selection_and_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    ex = explorer()
    ex.select(layer="0", target=2)
    expected = grad_cam(ex.model, "0", ex.inputs["a"], 2)[0]
    assert torch.equal(ex.saliency(), expected)
    calls = []
    monkeypatch.setattr("course_utils.widgets.grad_cam", lambda *a, **k: calls.append(a) or expected[None])
    ex.saliency()
    assert calls == []  # cached
    ex.select(layer="2")
    ex.saliency()
    assert len(calls) == 1
    for method in METHODS:
        ex.select(method=method)
        result = ex.saliency()
        assert result.shape == ((3, 224, 224) if method != "Grad-CAM" else (224, 224))  # photos are cropped to 224
    assert not ex.select(method="vanilla gradient") or not ex.uses_layer()
    assert_no_hooks(ex.model)


def test_bad_selections_say_what_is_allowed() -> None:
    ex = explorer()
    with pytest.raises(ValueError, match="choose one of"):
        ex.select(method="LIME")
    with pytest.raises(ValueError, match="Unknown setting"):
        ex.select(colour="red")
    with pytest.raises(ValueError, match="class index"):
        ex.select(target=6)
    with pytest.raises(UnknownLayerError, match="Closest names"):
        SaliencyExplorer(ex.model, ex.photos, ["22"], ex.categories)


def test_widget_builds_and_reacts_without_a_browser() -> None:
    ex = explorer()
    box = ex.widget()
    photo, target = box.children[0].children
    layer, method = box.children[1].children
    method.value = "Guided Backprop"
    assert ex.state["method"] == "Guided Backprop" and layer.disabled
    photo.value = "b"
    assert ex.state["photo"] == "b" and target.value == ex.class_options("b")[0][1]
    assert_no_hooks(ex.model)
