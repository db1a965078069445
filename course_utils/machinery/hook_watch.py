"""What a learner's hook returned while a check ran it: a value that cannot stand for the layer's output (or the
gradient) it replaces.

Inside :func:`watching_hooks`, every hook the learner's code registers is registered wrapped; a return value that
cannot stand for what it replaces (a forward hook's string, shape or handle; a backward hook's bare tensor or
wrongly shaped entry) stops the check at once with :class:`HookMistake`, before PyTorch fails further on with a
message about something else. With ``observe_only``, any forward (pre-)hook value that differs from what it
replaces is one. A gradient changed in place is not watched: the checks' graphs show it in the numbers. Hooks of
the course's own code, and every hook once the block has ended, run unwrapped.

**The one patch of PyTorch in the course's checks** (:data:`PATCHED`): PyTorch uses what a hook returns without
looking at it (a forward hook that returns a string makes the *next* layer fail) and offers no way to see that value
first: nothing is called when a hook is registered, and global module hooks run before a module's own, so they never
see what those returned. ``tests/test_hook_watch.py`` pins both: when PyTorch changes either, this patch can go.

Usage::

    with watching_hooks() as watch:
        validator(answer)           # may raise HookMistake
    if watch.mistakes: ...          # Text messages, in the order they happened
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn

from course_utils.machinery.guard import written_by_learner
from course_utils.machinery.messages import N_, Text

__all__ = ["PATCHED", "HookMistake", "HookWatch", "watching_hooks", "REPLACED_OUTPUT"]


class HookMistake(BaseException):
    """Raised by a wrapped hook whose return value PyTorch cannot use as what it replaces. A ``BaseException``:
    neither the answer's nor the check's ``except Exception`` hides it; ``check()`` reports its ``message``."""

    def __init__(self, message: Text) -> None:
        super().__init__(str(message))
        self.message = message


@dataclass
class HookWatch:
    """What the learner's hooks returned inside :func:`watching_hooks` (``mistakes``: one message per mistake)."""

    observe_only: bool = False
    active: bool = True
    mistakes: list[Text] = field(default_factory=list)

    def fail(self, message: Text) -> HookMistake:
        """Record a mistake and return the exception that stops the check there (also if the answer swallows it)."""
        self.mistakes.append(message)
        return HookMistake(message)


# The one ✗ for a hook whose return value replaced a layer's output (or input): every exercise gets it through check()
REPLACED_OUTPUT = N_("Your {kind} {hook} on a {module} returned {what}, and PyTorch used it in place of the layer's "
                     "{replaced}: what a module hook returns replaces that (None leaves it alone). {why}")
_WHY_VALUE = N_("What does the hook's last expression evaluate to? A lambda returns it -- a handle from "
                "register_hook, a shape, what dict.setdefault stored -- so a hook that only records is a `def` with no "
                "`return`.")
_WHY_OBSERVE = N_("A hook that only records must return None.")
_KINDS = {
    "tensor": N_("tensor hook"),
    "forward": N_("forward hook"),
    "forward_pre": N_("forward pre-hook"),
    "backward": N_("full backward hook"),
    "backward_pre": N_("backward pre-hook"),
}


def _hook_name(hook: Callable[..., Any]) -> str | Text:
    name = getattr(hook, "__name__", None) or type(hook).__name__
    return Text(N_("(a lambda)")) if name == "<lambda>" else f"`{name}`"


def _type_name(value: Any) -> str:
    """``str``, ``torch.Size``, ``torch.utils.hooks.RemovableHandle``: a builtin by its name, the rest in full."""
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def _what(value: Any) -> Text:
    if isinstance(value, torch.Tensor):  # where the layer returns a tuple
        return Text(N_("a tensor, not a tuple"))
    return Text(N_("a {type}, not a tensor"), type=_type_name(value))


def _same_values(now: torch.Tensor, before: torch.Tensor) -> bool:
    now, before = now.detach(), before.detach()
    if now.shape != before.shape or now.dtype != before.dtype:
        return False
    return bool(((now == before) | (now.isnan() & before.isnan()) if now.is_floating_point() else now == before).all())


def _different(original: Any, replacement: Any) -> Text | None:
    """How ``replacement`` differs from the ``original`` output (or inputs) it replaced, in what a hook that only
    records must not change: the values, the shape, the graph. None when it would pass for the original (a clone)."""
    in_parts = isinstance(original, tuple) and isinstance(replacement, (tuple, list))
    if in_parts and len(original) != len(replacement):
        return Text(N_("{count} values in place of {expected}"), count=len(replacement), expected=len(original))
    for before, after in zip(original, replacement) if in_parts else [(original, replacement)]:
        if not isinstance(before, torch.Tensor):
            continue
        if not isinstance(after, torch.Tensor):
            return _what(after)
        if after.shape != before.shape:
            return Text(N_("a tensor of shape {shape} (the original has {expected})"), shape=tuple(after.shape),
                        expected=tuple(before.shape))
        if before.requires_grad and not after.requires_grad:
            return Text(N_("a tensor detached from the graph (no gradient flows back through it)"))
        if not _same_values(after, before):
            return Text(N_("a tensor with other values"))
    return None


def _gradient_mistake(kind: str, hook: Callable[..., Any], args: tuple[Any, ...], result: Any) -> Text | None:
    """What is wrong with the value a tensor hook (``hook(grad)``), full backward hook (``hook(module, grad_input,
    grad_output)``) or backward pre-hook (``hook(module, grad_output)``) returned, or None."""
    if kind == "tensor":
        if isinstance(result, torch.Tensor):
            return None
        return Text(N_("Your tensor hook {hook} returned {what}: a tensor hook returns None (the gradient passes on "
                       "unchanged) or a new tensor shaped like `grad`, which replaces it."),
                    hook=_hook_name(hook), what=_what(result))
    module, replaced = type(args[0]).__name__, args[1]
    name = "grad_input" if kind == "backward" else "grad_output"
    expected = len(replaced) if isinstance(replaced, tuple) else 1
    said = {"kind": Text(_KINDS[kind]), "hook": _hook_name(hook), "module": module, "name": name}
    if isinstance(result, torch.Tensor):
        return Text(N_("Your {kind} {hook} on a {module} returned a bare tensor: it replaces `{name}`, which is a "
                       "tuple, so return a tuple with one entry per entry of `{name}` ({count} here; None where an "
                       "entry is None)."), count=expected, **said)
    if not isinstance(result, (tuple, list)):
        return Text(N_("Your {kind} {hook} on a {module} returned {what}: it must return None or a tuple that "
                       "replaces `{name}`, one entry per entry ({count} here)."),
                    what=_what(result), count=expected, **said)
    if len(result) != expected:
        return Text(N_("Your {kind} {hook} on a {module} returned {got} entries, and `{name}` has {count}: return "
                       "one entry per entry of `{name}` (None where an entry is None)."),
                    got=len(result), count=expected, **said)
    for index, (new, old) in enumerate(zip(result, replaced)):
        if isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor) and new.shape != old.shape:
            return Text(N_("Your {kind} {hook} on a {module} returned a tensor of shape {shape} for `{name}[{index}]`, "
                           "which has shape {expected}: what it returns replaces `{name}` entry by entry, each of its "
                           "own shape. Which of the hook's arguments did you start from?"),
                        shape=tuple(new.shape), index=index, expected=tuple(old.shape), **said)
    return None


def _forward_mistake(kind: str, hook: Callable[..., Any], args: tuple[Any, ...], result: Any, observe_only: bool,
                     with_kwargs: bool) -> Text | None:
    """What is wrong with the value a forward hook or forward pre-hook returned in place of the output (the input)."""

    def replaced(what: Text, why: Text) -> Text:
        return Text(REPLACED_OUTPUT, kind=Text(_KINDS[kind]), hook=_hook_name(hook), what=what,
                    module=type(args[0]).__name__, why=why,
                    replaced=Text(N_("output") if kind == "forward" else N_("input")))

    if kind == "forward":
        output = args[-1]
        if result is output or output is None:
            return None
        if isinstance(output, torch.Tensor) and not isinstance(result, torch.Tensor) or \
                isinstance(output, tuple) and not isinstance(result, (tuple, list)):
            return replaced(_what(result), Text(_WHY_VALUE))
        different = _different(output, result) if observe_only else None
    elif with_kwargs or result is args[1]:  # (args, kwargs) or None: PyTorch says clearly what it wants
        return None
    elif not isinstance(result, (tuple, torch.Tensor)) or isinstance(result, torch.Size):
        return replaced(_what(result), Text(N_("A pre-hook returns None, or the new positional inputs: a tuple (or "
                                               "one tensor).")))
    else:
        different = _different(args[1], result if isinstance(result, tuple) else (result,)) if observe_only else None
    return None if different is None else replaced(different, Text(_WHY_OBSERVE))


def _watched(watch: HookWatch, kind: str, hook: Callable[..., Any], with_kwargs: bool) -> Callable[..., Any]:
    """``hook`` wrapped: what it returns is looked at, and a value that cannot stand for what it replaces stops the
    check (:meth:`HookWatch.fail`)."""

    @functools.wraps(hook)
    def watched(*args: Any) -> Any:
        result = hook(*args)
        if watch.active and result is not None:
            mistake = (_forward_mistake(kind, hook, args, result, watch.observe_only, with_kwargs)
                       if kind in ("forward", "forward_pre") else _gradient_mistake(kind, hook, args, result))
            if mistake is not None:
                raise watch.fail(mistake)
        return result

    return watched


PATCHED: tuple[tuple[type, str, str], ...] = (  # (owner, registration method, the kind of hook it registers)
    (torch.Tensor, "register_hook", "tensor"),
    (nn.Module, "register_forward_hook", "forward"),
    (nn.Module, "register_forward_pre_hook", "forward_pre"),
    (nn.Module, "register_full_backward_hook", "backward"),
    (nn.Module, "register_full_backward_pre_hook", "backward_pre"),
)


@contextlib.contextmanager
def watching_hooks(enabled: bool = True, observe_only: bool = False) -> Iterator[HookWatch]:
    """Wrap every hook the learner's code registers inside the block (see the module's docstring); ``enabled=False``
    watches nothing (an exercise whose hooks ``torch.compile`` traces: a wrapper would be traced too).

    Usage: ``with watching_hooks(observe_only=True) as watch: validator(answer)``"""
    watch = HookWatch(observe_only=observe_only, active=enabled)
    if not enabled:
        yield watch
        return

    def registering(original: Callable[..., Any], kind: str) -> Callable[..., Any]:
        @functools.wraps(original)
        def register(self: Any, hook: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
            if written_by_learner(hook):
                hook = _watched(watch, kind, hook, bool(kwargs.get("with_kwargs")))
            return original(self, hook, *args, **kwargs)

        return register

    originals = [(owner, name, vars(owner)[name]) for owner, name, _kind in PATCHED]
    try:
        for (owner, name, original), (_owner, _name, kind) in zip(originals, PATCHED):
            setattr(owner, name, registering(original, kind))
        yield watch
    finally:
        watch.active = False
        for owner, name, original in originals:
            setattr(owner, name, original)
