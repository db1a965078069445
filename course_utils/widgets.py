"""Widgets where changing a value teaches: a figure redrawn from controls, built with ipywidgets (7 and 8).

:class:`FigureExplorer` shows controls above the figure ``draw(**choice)`` makes, with its alt text;
:class:`SaliencyExplorer` is notebook 06's photo x class x layer x method explorer. Their logic lives in plain methods
(``select``, ``figure_output``) that tests call without a browser; ``widget()`` only wires the controls to them.
Displayed, an explorer is one output holding the controls' view *and* its current figure: a front end with ipywidgets
shows the controls, anything else (a static page, the stored notebook, nbval) the figure. Redraws go straight into the
``Output`` widget's ``outputs``, so nbval and ``make refresh`` see the same outputs.

Usage::

    explorer = FigureExplorer(draw_peaks, alt="Peak memory for {blocks} blocks: lowest at {best} segments.",
                              controls={"blocks": [4, 9, 16, 25, 36]}, value={"blocks": 16})
    explorer            # the last line of a cell
    explorer.select(blocks=25); explorer.figure_output()   # the same logic, without a browser
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn as nn

from course_utils.figures import figure_output
from course_utils.hooks import resolve_layers
from course_utils.images import Style, crop_photo, saliency_to_image, show_heatmap, to_input
from course_utils.machinery.messages import N_, _
from course_utils.saliency import grad_cam, guided_backprop, guided_grad_cam, vanilla_gradient

__all__ = ["METHODS", "FigureExplorer", "SaliencyExplorer", "control_for"]

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
FigureOutput = tuple[dict[str, Any], dict[str, Any]]
"""A figure's ``(data, metadata)``, as :func:`course_utils.figures.figure_output` makes it."""


def _as_output(data: dict[str, Any], metadata: dict[str, Any]) -> dict[str, Any]:
    """A figure's output, as an ``Output`` widget keeps it in its ``outputs``."""
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def _bundle(box: Any, figure: FigureOutput) -> FigureOutput:
    """The live controls' view (the same in ipywidgets 7 and 8: protocol version 2) and the figure of their current
    choice, in one display output."""
    data, metadata = figure
    return {WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": box.model_id}, **data}, metadata


def control_for(name: str, options: Sequence[Any], value: Any, label: str | None = None) -> Any:
    """The ipywidgets control for choosing ``name`` among ``options`` (values, or ``(label, value)`` pairs): a slider
    for numbers, toggle buttons for up to four short choices, a dropdown for others."""
    import ipywidgets as widgets

    pairs = [tuple(option) if isinstance(option, tuple) else (str(option), option) for option in options]
    description = label if label is not None else name
    common = {"options": pairs, "value": value, "description": description,
              "style": {"description_width": "initial"}}
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for _, v in pairs):
        return widgets.SelectionSlider(continuous_update=False, layout=widgets.Layout(width="420px"), **common)
    if len(pairs) <= 4 and all(len(label) <= 16 for label, _ in pairs):
        return widgets.ToggleButtons(**common)
    return widgets.Dropdown(**common)


class FigureExplorer:
    """A figure the learner redraws by choosing values: one control per name of ``controls``, and the figure that
    ``draw(**choice)`` makes for the current choice, with its alt text. ``draw`` returns a matplotlib figure, or
    ``(figure, values)``: numbers the alt text names (with the choice, they fill the ``{fields}`` of ``alt``).
    Each drawing is kept, so going back to an earlier choice is instant.

    Usage: ``FigureExplorer(lambda step: timeline.plot(upto=step), alt="... {step} ...", controls={"step": [1, 2, 3]})``
    """

    def __init__(
        self,
        draw: Any,
        *,
        alt: str,
        controls: Mapping[str, Sequence[Any]],
        value: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        if not controls:
            raise ValueError("Give at least one control, e.g. controls={'segments': [1, 2, 4]}.")
        self.draw = draw
        self.alt = alt
        self.options = {name: [o[1] if isinstance(o, tuple) else o for o in options]
                        for name, options in controls.items()}
        self.controls = {name: list(options) for name, options in controls.items()}
        for name, options in self.options.items():
            if not options:
                raise ValueError(f"Control {name!r} has no options.")
        self.labels = dict(labels or {})
        self.state: dict[str, Any] = {name: options[0] for name, options in self.options.items()}
        self._drawn: dict[tuple[Any, ...], FigureOutput] = {}
        self._box: Any = None
        self._output: Any = None
        if value:
            self.select(**value)

    def select(self, **changes: Any) -> dict[str, Any]:
        """Change part of the choice; returns the new one. Unknown names or values raise ``ValueError``."""
        unknown = set(changes) - set(self.state)
        if unknown:
            raise ValueError(f"Unknown control(s) {sorted(unknown)}; the controls are {sorted(self.state)}.")
        for name, chosen in changes.items():
            if chosen not in self.options[name]:
                raise ValueError(f"{chosen!r} is not a choice of {name!r}; choose one of {self.options[name]}.")
        self.state.update(changes)
        return dict(self.state)

    def figure_output(self) -> FigureOutput:
        """``(data, metadata)`` of the current choice's figure, with its alt text (drawn once per choice)."""
        key = tuple(self.state[name] for name in self.options)
        if key not in self._drawn:
            drawn = self.draw(**self.state)
            figure, values = drawn if isinstance(drawn, tuple) else (drawn, {})
            try:
                self._drawn[key] = figure_output(figure, self.alt, **{**self.state, **values})
            finally:
                import matplotlib.pyplot as plt

                plt.close(figure)
        return self._drawn[key]

    def alt_text(self) -> str:
        """The alt text of the current choice's figure."""
        return self.figure_output()[0]["text/plain"]

    def widget(self) -> Any:
        """The controls above an ``Output`` that shows the current figure (needs a Jupyter front end to be seen)."""
        import ipywidgets as widgets

        if self._box is not None:
            return self._box
        self._output = widgets.Output()
        controls = {name: control_for(name, self.controls[name], self.state[name], self.labels.get(name))
                    for name in self.options}

        def on_change(change: dict[str, Any]) -> None:
            name = next(n for n, control in controls.items() if control is change["owner"])
            self.select(**{name: change["new"]})
            self._show()

        for control in controls.values():
            control.observe(on_change, names="value")
        self._controls = controls
        self._show()
        self._box = widgets.VBox([widgets.HBox(list(controls.values())), self._output])
        return self._box

    def _show(self) -> None:
        self._output.outputs = (_as_output(*self.figure_output()),)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> FigureOutput:
        return _bundle(self.widget(), self.figure_output())


METHODS = ("Grad-CAM", "Guided Backprop", "Guided Grad-CAM", "vanilla gradient")
"""The methods the explorer offers (layer-free methods ignore the layer choice)."""

_METHOD_NAMES = {"Guided Backprop": N_("Guided Backprop"), "Guided Grad-CAM": N_("Guided Grad-CAM"),
                 "vanilla gradient": N_("vanilla gradient")}
"""The methods whose names the course translates (Grad-CAM keeps its name in every language)."""


def _method_name(method: str) -> str:
    """``method`` (one of :data:`METHODS`) as the dropdown, the title and the alt text show it, in the course's
    language; the state and the code keep the English value."""
    return _(_METHOD_NAMES[method]) if method in _METHOD_NAMES else method


class SaliencyExplorer:
    """Explore saliency maps of one model: choose the photo, the class (from the photo's top-k), the layer and
    the method; results are cached, so going back to an earlier choice is instant. ``alt`` is the alt text of every
    map drawn, with the fields ``{method}``, ``{label}`` (the class), ``{layer}`` (``-`` for a method without one)
    and ``{photo}``.

    Usage: ``SaliencyExplorer(model, photos, layers, categories, alt="{method} map of '{label}' ...")`` as a cell's
    last line
    """

    def __init__(
        self,
        model: nn.Module,
        photos: Mapping[str, np.ndarray],
        layers: Sequence[str],
        categories: Sequence[str],
        *,
        alt: str,
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
        self.alt = alt
        self.style = style
        self.top_k = top_k
        self._box: Any = None
        self._figures: dict[tuple[str, int, str, str], FigureOutput] = {}
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

    def _key(self) -> tuple[str, int, str, str]:
        s = self.state
        return s["photo"], s["target"], s["layer"] if self.uses_layer() else "", s["method"]

    def saliency(self) -> torch.Tensor:
        """The map for the current selection: ``(H, W)`` for Grad-CAM, ``(3, H, W)`` for gradient methods."""
        s, key = self.state, self._key()
        layer = key[2]
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
        name = _method_name(s["method"])
        title = f"{name} · {self.categories[s['target']]}" + (f" · {s['layer']}" if self.uses_layer() else "")
        result = self.saliency()
        if result.dim() == 2:
            show_heatmap(ax, crop_photo(self.photos[s["photo"]]), result, title)
        else:
            ax.imshow(saliency_to_image(result))
            ax.set_title(title, fontsize=9)
            ax.axis("off")

    def figure_output(self) -> FigureOutput:
        """``(data, metadata)`` of the current map's figure, with its alt text."""
        from matplotlib.figure import Figure

        s, key = self.state, self._key()
        if key not in self._figures:
            figure = Figure(figsize=(4, 4))
            self.draw(figure.subplots())
            self._figures[key] = figure_output(figure, self.alt, method=_method_name(s["method"]),
                                               label=self.categories[s["target"]], layer=key[2] or "-",
                                               photo=s["photo"])
        return self._figures[key]

    # -- the widget -----------------------------------------------------------------------------------------------
    def widget(self) -> Any:
        """Dropdowns for photo, class, layer and method above the drawn map (needs a Jupyter front end)."""
        import ipywidgets as widgets

        if self._box is not None:
            return self._box
        photo = widgets.Dropdown(options=list(self.photos), value=self.state["photo"], description=_("photo"))
        target = widgets.Dropdown(options=self.class_options(self.state["photo"]), value=self.state["target"],
                                  description=_("class"))
        layer = widgets.Dropdown(options=self.layers, value=self.state["layer"], description=_("layer"))
        method = widgets.Dropdown(options=[(_method_name(m), m) for m in METHODS], value=self.state["method"],
                                  description=_("method"))
        output = widgets.Output()

        def redraw() -> None:
            layer.disabled = not self.uses_layer()
            output.outputs = (_as_output(*self.figure_output()),)

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
        self._box = widgets.VBox([widgets.HBox([photo, target]), widgets.HBox([layer, method]), output])
        return self._box

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> FigureOutput:
        return _bundle(self.widget(), self.figure_output())
