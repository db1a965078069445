"""Record which hooks fire, in which order, during a forward and backward pass -- and draw it.

A :class:`HookTimeline` registers *observer* hooks (they record and return ``None``) on tensors, autograd nodes,
leaves, modules and the global module hooks; your own hooks can log into it through :meth:`HookTimeline.wrap`.
torch cannot undo ``tensor.retain_grad()`` (pytorch/pytorch#135229), so the timeline never calls it: a "retain_grad"
event marks where ``retain_grad`` stores a gradient (after the tensor's hooks, before its ``grad_fn``'s pre-hooks),
seen by a pre-hook on ``grad_fn``. Every observer hook is removed when the ``with`` block ends.

Usage::

    with HookTimeline() as timeline:
        timeline.watch_tensor(z, "z")
        timeline.watch_node(z, "z")
        loss.backward()
    print(timeline.table())
    timeline.plot()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
import torch.nn.modules.module as module_globals

from course_utils.hooks import HookRegistry, LayerSpec, resolve_layers
from course_utils.machinery.messages import N_, _, ljust, width

__all__ = ["HookEvent", "HookTimeline", "KIND_ORDER"]

# Lanes of the figure, top to bottom.
KIND_ORDER = (
    N_("global forward pre-hook"),
    N_("forward pre-hook"),
    N_("forward hook"),
    N_("global forward hook"),
    N_("global backward pre-hook"),
    N_("backward pre-hook"),
    N_("tensor hook"),
    "retain_grad",
    N_("grad_fn pre-hook"),
    N_("grad_fn hook"),
    N_("full backward hook"),
    N_("global backward hook"),
    N_("post-accumulate hook"),
    N_("your hook"),
)
# The figure's words for the passes and their colours (the events keep the English: code compares them).
_FIGURE_WORDS = (N_("forward"), N_("backward"), N_("blue"), N_("red"))


@dataclass(frozen=True)
class HookEvent:
    """One hook firing: its position, the pass it belongs to, the hook kind and what it is attached to."""

    step: int
    phase: str
    kind: str
    target: str

    @property
    def kind_label(self) -> str:
        """The hook kind in the course's language, as the table and the figure show it (``kind`` stays English: code
        compares it). Usage: ``HookEvent(1, "backward", "tensor hook", "z").kind_label  # in Chinese "张量钩子"``"""
        return _(self.kind)


@dataclass
class _NodeWatch:
    """What the timeline's one pre-hook on an autograd node logs: the retain_grad points of the node's outputs
    (output index, tensor name), then the node's own pre-hook event when the node itself is watched."""

    node: Any
    retained: list[tuple[int, str]] = field(default_factory=list)
    label: str | None = None


class HookTimeline:
    """Observer hooks that log every firing; a context manager that removes them on exit.

    Usage: ``with HookTimeline() as t: t.watch_module(model); model(x).sum().backward()``
    """

    def __init__(self) -> None:
        self.events: list[HookEvent] = []
        self._hooks = HookRegistry()
        self._nodes: dict[int, _NodeWatch] = {}  # by id(node); the record keeps the node alive
        self._phase = "forward"

    # -- logging -------------------------------------------------------------------------------------
    def log(self, kind: str, target: str, phase: str | None = None) -> None:
        """Record one event (observer hooks call this; so can you)."""
        if phase is not None:
            self._phase = phase
        self.events.append(HookEvent(len(self.events) + 1, self._phase, kind, target))

    def wrap(self, hook: Callable[..., Any], target: str, kind: str = "your hook") -> Callable[..., Any]:
        """Return ``hook`` wrapped so that each call is logged first; register the wrapper instead of ``hook``."""
        phase = "forward" if "forward" in kind else "backward"

        def logged(*args: Any, **kwargs: Any) -> Any:
            self.log(kind, target, phase)
            return hook(*args, **kwargs)

        logged.__name__ = getattr(hook, "__name__", "hook")
        return logged

    # -- tensors and autograd nodes ---------------------------------------------------------------------
    def watch_tensor(self, tensor: torch.Tensor, name: str) -> None:
        """Log when ``tensor``'s gradient reaches its tensor hooks (``tensor.register_hook``)."""
        self._hooks.tensor(tensor, lambda grad: self.log("tensor hook", name, "backward"))

    def watch_retain_grad(self, tensor: torch.Tensor, name: str) -> None:
        """Log a "retain_grad" event where ``tensor.retain_grad()`` stores the gradient: after the tensor's hooks,
        before its ``grad_fn``'s pre-hooks. The tensor is left as it was (``retain_grad()`` is never called). Watch
        after its last in-place change (which gives it a new ``grad_fn``). Usage: ``timeline.watch_retain_grad(z, "z")``
        """
        if tensor.is_leaf:
            raise ValueError(f"{name} is a leaf: its .grad is kept anyway; watch_leaf shows when it is accumulated.")
        self._node_watch(tensor.grad_fn).retained.append((tensor.output_nr, name))

    def watch_node(self, tensor: torch.Tensor, name: str) -> None:
        """Log the pre-hook and hook of the autograd node that produced ``tensor`` (``tensor.grad_fn``)."""
        if tensor.grad_fn is None:
            raise ValueError(f"{name} has no grad_fn (a leaf, or computed without grad): nothing to watch.")
        node = tensor.grad_fn
        label = f"{name}.grad_fn ({type(node).__name__})"
        self._node_watch(node).label = label
        self._hooks.node(node, lambda grad_inputs, grad_outputs: self.log("grad_fn hook", label, "backward"))

    def _node_watch(self, node: Any) -> _NodeWatch:
        """The record of ``node``; on first use, registers the one observer pre-hook that logs it."""
        watch = self._nodes.get(id(node))
        if watch is None:
            watch = self._nodes[id(node)] = _NodeWatch(node)

            def observe(grad_outputs: tuple[torch.Tensor | None, ...]) -> None:
                # Tensor hooks and retain_grad have run: grad_outputs hold the gradients retain_grad stores.
                for index, name in watch.retained:
                    if grad_outputs[index] is not None:
                        self.log("retain_grad", name, "backward")
                if watch.label is not None:
                    self.log("grad_fn pre-hook", watch.label, "backward")

            self._hooks.node(node, observe, before=True)
        return watch

    def watch_leaf(self, tensor: torch.Tensor, name: str) -> None:
        """Log when ``.grad`` of a leaf tensor has been accumulated (post-accumulate-grad hook)."""
        self._hooks.post_accumulate(tensor, lambda leaf: self.log("post-accumulate hook", name, "backward"))

    # -- modules --------------------------------------------------------------------------------------
    def watch_module(
        self,
        model: nn.Module,
        layers: LayerSpec | Iterable[LayerSpec] | None = None,
        *,
        backward: bool = True,
    ) -> None:
        """Log forward pre/forward hooks (and, with ``backward=True``, backward pre/full backward hooks) of the
        given layers of ``model`` (default: every module, the model itself included, named ``"(model)"``)."""
        named = list(model.named_modules()) if layers is None else resolve_layers(model, layers)
        for name, module in named:
            label = name or "(model)"
            self._hooks.adopt(module.register_forward_pre_hook(self._observer("forward pre-hook", label)))
            self._hooks.adopt(module.register_forward_hook(self._observer("forward hook", label)))
            if backward:
                self._hooks.adopt(module.register_full_backward_pre_hook(self._observer("backward pre-hook", label)))
                self._hooks.adopt(module.register_full_backward_hook(self._observer("full backward hook", label)))

    def watch_global(self, *, backward: bool = True) -> None:
        """Log the global module hooks, which fire for every module of every model while registered
        (each event is labelled with the module's type)."""
        self._hooks.adopt(module_globals.register_module_forward_pre_hook(self._observer("global forward pre-hook")))
        self._hooks.adopt(module_globals.register_module_forward_hook(self._observer("global forward hook")))
        if backward:
            self._hooks.adopt(
                module_globals.register_module_full_backward_pre_hook(self._observer("global backward pre-hook")))
            self._hooks.adopt(module_globals.register_module_full_backward_hook(self._observer("global backward hook")))

    def _observer(self, kind: str, label: str | None = None) -> Callable[..., None]:
        """A module hook that logs ``kind`` on ``label`` (default: the calling module's type) and returns None."""
        phase = "forward" if "forward" in kind else "backward"

        def observe(module: nn.Module, *args: Any) -> None:
            self.log(kind, label or type(module).__name__, phase)

        return observe

    # -- results --------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Remove every observer hook (``with`` does this for you)."""
        try:
            self._hooks.remove()
        finally:
            self._nodes.clear()

    def __enter__(self) -> HookTimeline:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()

    def order(self) -> list[str]:
        """The events as ``"kind: target"`` strings, in firing order."""
        return [f"{event.kind}: {event.target}" for event in self.events]

    def table(self) -> str:
        """A plain-text table of the events (stable: no ids, no timings)."""
        if not self.events:
            return _("(no hook fired)")
        # Laid out by display width: in Chinese the passes and the hook kinds are translated (the events keep the
        # English, which code compares), and a Chinese character takes two columns. The column heads are one-word
        # messages with no context: the course uses "pass", "hook" and "on" nowhere else, so their one entry is this
        # table's (tests/test_messages.py lists the short messages that more than one module shares).
        kinds = {e.kind: e.kind_label for e in self.events}
        head = (_("pass"), _("hook"))
        passes = max(width(text) for text in (head[0], _("forward"), _("backward")))
        hooks = max(width(text) for text in (head[1], *(kinds[e.kind] for e in self.events)))
        lines = [f"{'#':>3}  {ljust(head[0], passes)}  {ljust(head[1], hooks)}  " + _("on")]
        lines += [f"{e.step:>3}  {ljust(_(e.phase), passes)}  {ljust(kinds[e.kind], hooks)}  {e.target}"
                  for e in self.events]
        return "\n".join(lines)

    def _xlabel(self, colours: dict[str, str]) -> str:
        """The x-axis label, naming the colour of each pass that has events (only those)."""
        passes = [phase for phase in colours if any(e.phase == phase for e in self.events)]
        key = _(", ").join(
            _("{colour}: {phase} pass").format(colour=_(colours[phase].removeprefix("tab:")), phase=_(phase))
            for phase in passes)
        return _("firing order ({key})").format(key=key) if key else _("firing order")

    def plot(self, ax: Any = None, title: str = "Which hook fires when", upto: int | None = None) -> Any:
        """Draw the events: x = firing order, one lane per hook kind, each dot labelled with its target.

        ``upto=k`` draws the first ``k`` events as they are, ringing the ``k``-th, and the later ones faded: one step
        of a replay (``course_utils.widgets.FigureExplorer`` steps through it)."""
        import matplotlib.pyplot as plt

        if not self.events:
            raise ValueError("Nothing to draw: no hook fired while the timeline was recording.")
        kinds = [kind for kind in KIND_ORDER if any(e.kind == kind for e in self.events)]
        kinds += sorted({e.kind for e in self.events} - set(kinds))
        lane = {kind: index for index, kind in enumerate(kinds)}
        if ax is None:
            width = max(6.0, 0.7 * len(self.events) + 3.0)
            _figure, ax = plt.subplots(figsize=(width, 0.6 * len(kinds) + 1.4))
        colours = {"forward": "tab:blue", "backward": "tab:red"}
        if upto is not None and not 1 <= upto <= len(self.events):
            raise ValueError(f"upto must be a step from 1 to {len(self.events)}, got {upto}.")
        for event in self.events:
            y = lane[event.kind]
            later = upto is not None and event.step > upto
            ax.scatter(event.step, y, s=60, color="lightgray" if later else colours.get(event.phase, "tab:gray"),
                       zorder=3)
            if event.step == upto:
                ax.scatter(event.step, y, s=260, facecolors="none", edgecolors="black", linewidths=1.5, zorder=4)
            ax.annotate(event.target.replace(" (", "\n("), (event.step, y), textcoords="offset points",
                        xytext=(0, 10 if event.step == upto else 6), ha="center", va="bottom", fontsize=9,
                        color="darkgray" if later else "black")
        backward_steps = [e.step for e in self.events if e.phase == "backward"]
        if backward_steps:
            ax.axvspan(min(backward_steps) - 0.5, max(backward_steps) + 0.5, color="tab:red", alpha=0.06)
        ax.set_yticks(range(len(kinds)), [_(kind) for kind in kinds])
        ax.set_ylim(len(kinds) - 0.4, -0.8)
        ax.set_xticks(range(1, len(self.events) + 1))
        ax.set_xlabel(self._xlabel(colours))
        ax.set_title(title)
        ax.grid(axis="x", alpha=0.3)
        ax.figure.tight_layout()
        return ax.figure
