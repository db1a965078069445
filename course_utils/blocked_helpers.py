"""Switch course helpers off while an exercise is checked, so that an answer cannot pass by calling the very helper
whose hooks the exercise asks the learner to write (``return grad_cam(...)`` for "write Grad-CAM from two hooks").

A blocked function keeps its identity -- the learner's ``from course_utils.saliency import grad_cam`` still names the
same object -- but, until the ``with`` block ends, calling it raises :class:`HelperBlocked`. (Its code object is
swapped for a stub and put back in ``finally``; a class is blocked through its ``__init__``.)

Usage::

    with blocked(("course_utils.saliency.grad_cam",)):
        exercise.validate(answer)      # an answer that calls grad_cam raises HelperBlocked
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import CodeType, FunctionType
from typing import Any

__all__ = ["HelperBlocked", "blocked", "resolve_helper"]


class HelperBlocked(RuntimeError):
    """The learner's answer called a course helper that the exercise asks them to write themselves."""

    why = ("this exercise asks you to write those hooks yourself (register_forward_hook, register_hook, ...), so "
           "the course's finished helper is switched off while your answer is checked.")

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is switched off: {self.why}")
        self.name = name


def _stub(*args: Any, **kwargs: Any) -> Any:
    # Runs with the blocked function's globals, so it names nothing but builtins; the blocked name is the code
    # object's qualified name, set in _stub_code.
    sys = __import__("sys")
    raise __import__("course_utils.blocked_helpers", fromlist=["HelperBlocked"]).HelperBlocked(
        sys._getframe().f_code.co_qualname)


def _stub_code(name: str) -> CodeType:
    return _stub.__code__.replace(co_name=name.rsplit(".", 1)[-1], co_qualname=name)


def resolve_helper(name: str) -> FunctionType:
    """The function behind a dotted name (``"course_utils.saliency.grad_cam"``; a class gives its ``__init__``).

    Usage: ``resolve_helper("course_utils.recorder.ActivationRecorder")``
    """
    module_name, _, attribute = name.rpartition(".")
    if not module_name.startswith("course_utils"):
        raise ValueError(f"Only course_utils helpers can be blocked, not {name!r}.")
    try:
        target: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"Cannot block {name!r}: {error}. Name a function or class of course_utils.") from error
    if isinstance(target, type):
        target = target.__dict__.get("__init__")
    if not isinstance(target, FunctionType):
        raise ValueError(f"Cannot block {name!r}: it is not a Python function or a class with its own __init__.")
    if target.__closure__:
        raise ValueError(f"Cannot block {name!r}: it is a closure; block the module-level function that makes it.")
    return target


@contextmanager
def blocked(names: Sequence[str]) -> Iterator[None]:
    """While the block runs, calling any of the named course helpers raises :class:`HelperBlocked`."""
    functions: list[tuple[FunctionType, CodeType]] = []
    try:
        for name in names:
            function = resolve_helper(name)
            functions.append((function, function.__code__))
            function.__code__ = _stub_code(name)
        yield
    finally:
        for function, code in reversed(functions):
            function.__code__ = code


def is_blocked(function: Callable[..., Any]) -> bool:
    """True while ``function`` is switched off by :func:`blocked` (for tests)."""
    code = getattr(function, "__code__", None)
    return code is not None and code.co_code == _stub.__code__.co_code and code.co_consts == _stub.__code__.co_consts
