"""Pictures of a transformer's attention (notebook 12): a figure shown with its alt text, and a layer/head explorer.

- :func:`show_figure` -- the one place where notebook 12 hands a matplotlib figure to Jupyter: a PNG whose alt text
  travels with it (``metadata["image/png"]["alt"]``, and as the ``text/plain`` a text-only view shows);
- :func:`draw_pattern` -- one head's attention pattern (queries down, keys across) on a matplotlib axis;
- :class:`AttentionExplorer` -- choose a layer, a head and a sequence; ``widget()`` redraws with ipywidgets and,
  where widgets do not render (a static page, a viewer without a kernel), the figure it stored first stays visible.

Usage::

    show_figure(fig, "Layer x head grid of the loss increase when each head is zeroed ...")
    AttentionExplorer(patterns, tokens).show()
"""

from __future__ import annotations

import base64
import io
from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["show_figure", "draw_pattern", "AttentionExplorer"]


def show_figure(fig: Any, alt: str) -> None:
    """Display ``fig`` as a PNG with ``alt`` as its alt text, then close it (so the inline backend does not show it
    a second time). Usage: ``show_figure(fig, "what the figure shows")``"""
    import matplotlib.pyplot as plt
    from IPython.display import display

    if not alt.strip():
        raise ValueError("Give the figure an alt text that says what it shows.")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight")
    plt.close(fig)
    png = base64.b64encode(buffer.getvalue()).decode("ascii")
    display({"image/png": png, "text/plain": f"[figure] {alt}"}, metadata={"image/png": {"alt": alt}}, raw=True)


def draw_pattern(ax: Any, pattern: torch.Tensor, title: str, repeat_start: int | None = None) -> Any:
    """One head's pattern ``(queries, keys)`` as an image on ``ax``; a dashed line marks where the repeat starts."""
    image = ax.imshow(pattern.detach().numpy(), cmap="viridis", vmin=0, vmax=1)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("key position (attended to)", fontsize=8)
    ax.set_ylabel("query position", fontsize=8)
    if repeat_start is not None:
        for line in (ax.axhline, ax.axvline):
            line(repeat_start - 0.5, color="white", linestyle="--", linewidth=0.8)
    return image


class AttentionExplorer:
    """Explore cached attention patterns: ``patterns[layer]`` is ``(batch, heads, queries, keys)``.

    ``select(layer=, head=, sequence=)`` changes the choice (checked); ``figure()`` draws it; ``show()`` displays
    the current figure with its alt text and, below it, the ipywidgets controls that redraw it.
    """

    def __init__(self, patterns: Mapping[int, torch.Tensor], lengths: torch.Tensor) -> None:
        if not patterns:
            raise ValueError("Give the cached patterns: {layer: tensor (batch, heads, queries, keys)}.")
        self.patterns = dict(patterns)
        self.lengths = lengths
        first = next(iter(self.patterns.values()))
        self.heads, self.batch, self.length = first.shape[1], first.shape[0], first.shape[-1]
        self.state = {"layer": min(self.patterns), "head": 0, "sequence": 0}

    def select(self, **changes: int) -> dict[str, int]:
        """Change layer, head or sequence; an index out of range is refused with the valid range."""
        limits = {"layer": sorted(self.patterns), "head": range(self.heads), "sequence": range(self.batch)}
        for name, value in changes.items():
            if name not in limits:
                raise ValueError(f"Choose layer, head or sequence, not {name!r}.")
            if value not in limits[name]:
                raise ValueError(f"{name} must be one of {list(limits[name])}, got {value!r}.")
            self.state[name] = value
        return dict(self.state)

    def alt_text(self) -> str:
        s = self.state
        start = self.length - int(self.lengths[s["sequence"]])
        return (f"Attention pattern of layer {s['layer']}, head {s['head']}, on sequence {s['sequence']}: a "
                f"{self.length} by {self.length} grid, query positions down, key positions across, brighter where "
                f"the head attends more; dashed lines mark where the repeat starts, at position {start}.")

    def figure(self) -> Any:
        import matplotlib.pyplot as plt

        s = self.state
        fig, ax = plt.subplots(figsize=(3.8, 3.6), layout="constrained")
        image = draw_pattern(ax, self.patterns[s["layer"]][s["sequence"], s["head"]],
                             f"layer {s['layer']}, head {s['head']}, sequence {s['sequence']}",
                             repeat_start=self.length - int(self.lengths[s["sequence"]]))
        fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
        return fig

    def show(self) -> None:
        """The current figure (it stays where widgets do not render), then dropdowns that redraw it."""
        from IPython.display import display

        show_figure(self.figure(), self.alt_text())
        try:
            import ipywidgets as widgets
        except ImportError:
            return
        controls = {
            "layer": widgets.Dropdown(options=sorted(self.patterns), value=self.state["layer"], description="layer"),
            "head": widgets.Dropdown(options=list(range(self.heads)), value=self.state["head"], description="head"),
            "sequence": widgets.IntSlider(value=self.state["sequence"], min=0, max=self.batch - 1,
                                          description="sequence"),
        }
        output = widgets.Output()

        def redraw(change: dict[str, Any]) -> None:
            name = next(key for key, control in controls.items() if control is change["owner"])
            self.select(**{name: change["new"]})
            with output:
                output.clear_output(wait=True)
                show_figure(self.figure(), self.alt_text())

        for control in controls.values():
            control.observe(redraw, names="value")
        display(widgets.VBox([widgets.HBox(list(controls.values())), output]))
