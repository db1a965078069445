"""An interactive saliency explorer: photo × class × layer × method, built with ipywidgets.

The logic lives in plain methods (:meth:`SaliencyExplorer.select`, :meth:`SaliencyExplorer.class_options`,
:meth:`SaliencyExplorer.saliency`) so it can be tested without a browser; :meth:`SaliencyExplorer.widget` only
wires dropdowns to them and draws into an ``Output`` area.

Usage::

    explorer = SaliencyExplorer(model, {"cat": photo}, ["_blocks.10", "_conv_head"], categories, style="efficientnet-lite")
    explorer.widget()
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from course_utils.hooks import resolve_layers
from course_utils.images import Style, crop_photo, saliency_to_image, show_heatmap, to_input
from course_utils.saliency import grad_cam, guided_backprop, guided_grad_cam, vanilla_gradient

__all__ = ["METHODS", "SaliencyExplorer"]

METHODS = ("Grad-CAM", "Guided Backprop", "Guided Grad-CAM", "vanilla gradient")
"""The methods the explorer offers (layer-free methods ignore the layer choice)."""


class SaliencyExplorer:
    """Explore saliency maps of one model: choose the photo, the class (from the photo's top-k), the layer and
    the method; results are cached, so going back to an earlier choice is instant.

    Usage: ``SaliencyExplorer(model, photos, layers, categories).widget()``
    """

    def __init__(
        self,
        model: nn.Module,
        photos: Mapping[str, np.ndarray],
        layers: Sequence[str],
        categories: Sequence[str],
        *,
        style: Style = "imagenet",
        top_k: int = 5,
    ) -> None:
        if not photos:
            raise ValueError("Give at least one photo, e.g. {'cat': load_photo('cat')}.")
        if not layers:
            raise ValueError("Give at least one layer name for Grad-CAM, e.g. ['layer4'].")
        resolve_layers(model, list(layers))  # unknown names fail here, with the closest valid names
        if top_k < 1:
            raise ValueError("top_k must be at least 1.")
        self.model = model
        self.photos = dict(photos)
        self.layers = list(layers)
        self.categories = list(categories)
        self.style = style
        self.top_k = top_k
        self.inputs = {name: to_input(photo, style=style) for name, photo in self.photos.items()}
        self._cache: dict[tuple[str, int, str, str], torch.Tensor] = {}
        self._top: dict[str, list[tuple[int, float]]] = {}
        first = next(iter(self.photos))
        self.state: dict[str, Any] = {
            "photo": first,
            "target": self.class_options(first)[0][1],
            "layer": self.layers[-1],
            "method": METHODS[0],
        }

    # -- logic (tested without a browser) ---------------------------------------------------------------------
    def class_options(self, photo: str) -> list[tuple[str, int]]:
        """The photo's top-k classes as ``(label with probability, class index)`` pairs, best first."""
        if photo not in self.photos:
            raise KeyError(f"Unknown photo {photo!r}; choose one of {list(self.photos)}.")
        if photo not in self._top:
            with torch.no_grad():
                probabilities = self.model(self.inputs[photo]).softmax(dim=1)[0]
            top = probabilities.topk(min(self.top_k, probabilities.numel()))
            self._top[photo] = [(int(i), float(p)) for p, i in zip(top.values, top.indices)]
        return [(f"{self.categories[i]} ({p:.2f})", i) for i, p in self._top[photo]]

    def select(self, **changes: Any) -> dict[str, Any]:
        """Change part of the selection; a new photo resets the class to that photo's top class.
        Returns the new state. Unknown keys or values raise ``ValueError``."""
        unknown = set(changes) - set(self.state)
        if unknown:
            raise ValueError(f"Unknown setting(s) {sorted(unknown)}; settings are {sorted(self.state)}.")
        state = dict(self.state, **changes)
        if state["photo"] not in self.photos:
            raise ValueError(f"Unknown photo {state['photo']!r}; choose one of {list(self.photos)}.")
        if state["layer"] not in self.layers:
            raise ValueError(f"Unknown layer {state['layer']!r}; choose one of {self.layers}.")
        if state["method"] not in METHODS:
            raise ValueError(f"Unknown method {state['method']!r}; choose one of {list(METHODS)}.")
        if "photo" in changes and "target" not in changes and changes["photo"] != self.state["photo"]:
            state["target"] = self.class_options(state["photo"])[0][1]
        if not isinstance(state["target"], int) or not 0 <= state["target"] < len(self.categories):
            raise ValueError(f"target must be a class index in 0..{len(self.categories) - 1}.")
        self.state = state
        return dict(state)

    def uses_layer(self) -> bool:
        """Whether the current method depends on the layer choice."""
        return self.state["method"] in ("Grad-CAM", "Guided Grad-CAM")

    def saliency(self) -> torch.Tensor:
        """The map for the current selection: ``(H, W)`` for Grad-CAM, ``(3, H, W)`` for gradient methods."""
        s = self.state
        layer = s["layer"] if self.uses_layer() else ""
        key = (s["photo"], s["target"], layer, s["method"])
        if key not in self._cache:
            x = self.inputs[s["photo"]]
            if s["method"] == "Grad-CAM":
                result = grad_cam(self.model, layer, x, s["target"])[0]
            elif s["method"] == "Guided Grad-CAM":
                result = guided_grad_cam(self.model, layer, x, s["target"])[0]
            elif s["method"] == "Guided Backprop":
                result = guided_backprop(self.model, x, s["target"])[0]
            else:
                result = vanilla_gradient(self.model, x, s["target"])[0]
            self._cache[key] = result
        return self._cache[key]

    def draw(self, ax: Any) -> None:
        """Draw the current map on a matplotlib axis."""
        s = self.state
        title = f"{s['method']} · {self.categories[s['target']]}" + (f" · {s['layer']}" if self.uses_layer() else "")
        result = self.saliency()
        if result.dim() == 2:
            show_heatmap(ax, crop_photo(self.photos[s["photo"]]), result, title)
        else:
            ax.imshow(saliency_to_image(result))
            ax.set_title(title, fontsize=9)
            ax.axis("off")

    # -- the widget -----------------------------------------------------------------------------------------------
    def widget(self) -> Any:
        """Dropdowns for photo, class, layer and method above the drawn map (needs a Jupyter front end)."""
        import ipywidgets as widgets
        import matplotlib.pyplot as plt

        photo = widgets.Dropdown(options=list(self.photos), value=self.state["photo"], description="photo")
        target = widgets.Dropdown(options=self.class_options(self.state["photo"]), value=self.state["target"],
                                  description="class")
        layer = widgets.Dropdown(options=self.layers, value=self.state["layer"], description="layer")
        method = widgets.Dropdown(options=list(METHODS), value=self.state["method"], description="method")
        output = widgets.Output()

        def redraw() -> None:
            layer.disabled = not self.uses_layer()
            with output:
                output.clear_output(wait=True)
                fig, ax = plt.subplots(figsize=(4, 4))
                self.draw(ax)
                plt.show()

        def on_change(change: dict[str, Any]) -> None:
            name = {photo: "photo", target: "target", layer: "layer", method: "method"}[change["owner"]]
            if name == "target" and change["new"] is None:
                return
            self.select(**{name: change["new"]})
            if name == "photo":
                target.options = self.class_options(self.state["photo"])
                target.value = self.state["target"]
            redraw()

        for control in (photo, target, layer, method):
            control.observe(on_change, names="value")
        redraw()
        return widgets.VBox([widgets.HBox([photo, target]), widgets.HBox([layer, method]), output])
