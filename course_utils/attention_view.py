"""Pictures of a transformer's attention (notebook 12): :func:`draw_pattern` draws one head's pattern (queries down,
keys across), :func:`pattern_figure` one layer's, head's and sequence's with a colour bar, and
:func:`attention_explorer` is a :class:`course_utils.widgets.FigureExplorer` over the three. This module only draws.

Usage::

    draw_pattern(ax, patterns[1][0, head], "layer 1: induction", repeat_start=20)
    attention_explorer(patterns, lengths, alt="Layer {layer}, head {head}, sequence {sequence}: ... {start} ...")
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from course_utils.machinery.messages import _
from course_utils.widgets import FigureExplorer

__all__ = ["attention_explorer", "draw_pattern", "pattern_figure"]


def draw_pattern(ax: Any, pattern: torch.Tensor, title: str, repeat_start: int | None = None) -> Any:
    """One head's pattern ``(queries, keys)`` as an image on ``ax``; a dashed line marks where the repeat starts.
    Returns the image (for a colour bar). Usage: ``draw_pattern(ax, patterns[0][0, 3], "layer 0, head 3", 20)``"""
    image = ax.imshow(pattern.detach().numpy(), cmap="viridis", vmin=0, vmax=1)
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(_("key position (attended to)"), fontsize=8)
    ax.set_ylabel(_("query position"), fontsize=8)
    if repeat_start is not None:
        for line in (ax.axhline, ax.axvline):
            line(repeat_start - 0.5, color="white", linestyle="--", linewidth=0.8)
    return image


def pattern_figure(patterns: Mapping[int, torch.Tensor], lengths: torch.Tensor, layer: int, head: int,
                   sequence: int) -> tuple[Any, dict[str, int]]:
    """The pattern of ``head`` in ``layer`` on ``sequence`` (``patterns[layer]`` is ``(batch, heads, queries,
    keys)``, ``lengths[sequence]`` the length of its repeat), and the alt text's numbers: ``size`` (positions),
    ``repeat`` (repeated tokens) and ``start`` (the repeat's first position).

    Usage: ``fig, values = pattern_figure(patterns, lengths, layer=1, head=0, sequence=3)``
    """
    from matplotlib.figure import Figure

    size = patterns[layer].shape[-1]
    repeat = int(lengths[sequence])
    fig = Figure(figsize=(3.8, 3.6), layout="constrained")
    ax = fig.subplots()
    title = _("layer {layer}, head {head}, sequence {sequence}").format(layer=layer, head=head, sequence=sequence)
    image = draw_pattern(ax, patterns[layer][sequence, head], title,
                         repeat_start=size - repeat)
    fig.colorbar(image, ax=ax, shrink=0.8, label=_("attention weight"))
    return fig, {"size": size, "repeat": repeat, "start": size - repeat}


def attention_explorer(patterns: Mapping[int, torch.Tensor], lengths: torch.Tensor, *, alt: str,
                       value: Mapping[str, int] | None = None) -> FigureExplorer:
    """A :class:`~course_utils.widgets.FigureExplorer` of :func:`pattern_figure`: controls for ``layer`` (the keys of
    ``patterns``), ``head`` and ``sequence`` (every one cached). ``alt`` may name ``{layer}``, ``{head}``,
    ``{sequence}``, ``{size}``, ``{repeat}`` and ``{start}``; ``value`` is the first choice. The controls are labelled
    in the course's language.

    Usage: ``attention_explorer(patterns, lengths, alt="...", value={"layer": 1, "head": 0, "sequence": 3})``
    """
    if not patterns:
        raise ValueError("Give the cached patterns: {layer: tensor (batch, heads, queries, keys)}.")
    batch, heads = next(iter(patterns.values())).shape[:2]
    if len(lengths) != batch:
        raise ValueError(f"Give one repeat length per sequence: the patterns hold {batch} sequences, lengths has "
                         f"{len(lengths)}.")
    cached = dict(patterns)
    return FigureExplorer(
        lambda layer, head, sequence: pattern_figure(cached, lengths, layer, head, sequence), alt=alt,
        controls={"layer": sorted(cached), "head": list(range(heads)), "sequence": list(range(batch))}, value=value,
        labels={"layer": _("layer"), "head": _("head"), "sequence": _("sequence")})
