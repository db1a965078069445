"""Charts an explorer redraws (:class:`course_utils.widgets.FigureExplorer`): each function draws one chart from
numbers a notebook computed and returns ``(figure, values)``, the values being what the chart's alt text names
(numbers and names only: the alt text's words are written in the notebook, where they are translated).

Usage::

    FigureExplorer(lambda layer: feature_histograms(features, layer), controls={"layer": list(truth)},
                   alt="Histograms of {layer}'s {count} values ...")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from course_utils.machinery.messages import _

__all__ = ["checkpoint_bars", "feature_histograms", "graphs_per_call"]

NOTHING = "—"
"""What a list of names in alt text says when it is empty."""


def _figure(width: float, height: float, columns: int = 1) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots(1, columns)


def feature_histograms(features: Mapping[str, Mapping[str, torch.Tensor]], layer: str,
                       bins: int = 40) -> tuple[Any, dict[str, Any]]:
    """One histogram per way of recording ``layer``'s output (``features``: way -> {layer: tensor}; the first way
    is the truth), on shared bins. Values: ``count`` (numbers in the output), ``wrong`` (the ways that differ from
    the first, comma-separated), ``below`` (each way's share of values below zero)."""
    ways = list(features)
    tensors = [features[way][layer].detach().float().flatten() for way in ways]
    low = min(float(t.min()) for t in tensors)
    high = max(float(t.max()) for t in tensors)
    edges = torch.linspace(low, high if high > low else low + 1.0, bins + 1)
    figure, axes = _figure(3.0 * len(ways), 2.6, len(ways))
    truth = tensors[0]
    wrong = [way for way, tensor in zip(ways[1:], tensors[1:]) if not torch.equal(tensor, truth)]
    for ax, way, tensor in zip(axes, ways, tensors):
        counts, _edges = torch.histogram(tensor, bins=edges)
        differs = way in wrong
        ax.stairs(counts.numpy(), edges.numpy(), fill=True, color="tab:red" if differs else "tab:blue", alpha=0.7)
        ax.axvline(0.0, color="black", lw=0.8, ls=":")
        ax.set_title((_("{way}\ndiffers from {first}") if differs else _("{way}\nsame as {first}")).format(
                     way=way, first=ways[0]) if way != ways[0] else way,
                     fontsize=9)
        ax.set_xlabel(_("value"))
    axes[0].set_ylabel(_("how many"))
    figure.suptitle(_("{layer}: the values of its output").format(layer=layer), fontsize=10)
    below = [float((tensor < 0).float().mean()) for tensor in tensors]
    return figure, {"count": truth.numel(), "wrong": ", ".join(wrong) or NOTHING, "below": below}


def checkpoint_bars(memory: Mapping[int, tuple[int, int]], forwards: Mapping[int, int] | None = None,
                    title: str = "") -> tuple[Any, dict[str, Any]]:
    """Stacked bars per number of checkpoint segments (``memory``: segments -> (bytes kept until backward, bytes
    held while backward recomputes one segment); 0 = no checkpointing), the lowest peaks marked. Values: ``best``
    (the segment counts with the lowest peak, comma-separated), ``best_mb``, ``plain_mb`` (the peak without
    checkpointing, if given), ``worst_mb`` (the highest checkpointed peak), ``settings``."""
    settings = list(memory)
    kept = [memory[s][0] / 2**20 for s in settings]
    extra = [memory[s][1] / 2**20 for s in settings]
    peaks = {s: sum(memory[s]) for s in settings}
    checkpointed = {s: p for s, p in peaks.items() if s}
    lowest = min(checkpointed.values())
    best = [s for s, p in checkpointed.items() if p == lowest]
    figure, ax = _figure(max(4.5, 0.75 * len(settings) + 2.0), 3.4)
    labels = [_("none") if s == 0 else str(s) for s in settings]
    ax.bar(labels, kept, color="tab:blue", label=_("kept from forward until backward"))
    ax.bar(labels, extra, bottom=kept, color="tab:orange", label=_("held while backward recomputes one segment"))
    for index, s in enumerate(settings):
        note = ((_("{count} fwd").format(count=forwards[s]) if forwards else "")
                + ("\n" + _("lowest") if s in best else ""))
        if note:
            ax.annotate(note.strip(), (index, kept[index] + extra[index]), ha="center", va="bottom", fontsize=8,
                        xytext=(0, 2), textcoords="offset points")
    ax.set_xlabel(_("checkpoint segments"))
    ax.set_ylabel(_("activation memory (MB)"))
    ax.set_ylim(0, max(k + e for k, e in zip(kept, extra)) * 1.3)
    ax.legend(fontsize=8, loc="upper center")
    if title:
        ax.set_title(title, fontsize=10)
    return figure, {"best": ", ".join(map(str, best)), "best_mb": lowest / 2**20,
                    "plain_mb": peaks[0] / 2**20 if 0 in peaks else float("nan"),
                    "worst_mb": max(checkpointed.values()) / 2**20, "settings": len(checkpointed)}


def graphs_per_call(counts: Mapping[str, Sequence[int]], chosen: str, title: str = "") -> tuple[Any, dict[str, Any]]:
    """Graphs dynamo has built after each call, one line per pattern (``counts``: pattern -> totals after call 1,
    2, ...), the chosen pattern drawn bold. Values: ``calls``, ``graphs`` (the chosen pattern's total after the last
    call), ``per_call`` (its totals, comma-separated), ``pattern`` (the chosen pattern's name in the course's language,
    as the legend shows it)."""
    from matplotlib.ticker import MaxNLocator

    figure, ax = _figure(6.0, 3.2)
    for pattern, totals in counts.items():
        calls = range(1, len(totals) + 1)
        bold = pattern == chosen
        ax.plot(calls, totals, marker="o", lw=2.5 if bold else 1.0, alpha=1.0 if bold else 0.35, label=_(pattern))
    ax.set_xlabel(_("call"))
    ax.set_ylabel(_("graphs built so far"))
    ax.set_xticks(range(1, max(len(t) for t in counts.values()) + 1))
    ax.set_ylim(0, max(max(t) for t in counts.values()) + 1)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # it counts graphs: no 0.5 tick
    ax.legend(fontsize=8, loc="upper left")
    if title:
        ax.set_title(title, fontsize=10)
    totals = list(counts[chosen])
    return figure, {"calls": len(totals), "graphs": totals[-1], "per_call": ", ".join(map(str, totals)),
                    "pattern": _(chosen)}
