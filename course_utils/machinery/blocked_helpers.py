"""Switch course helpers off while an exercise is checked, so that an answer cannot pass by calling the very helper
whose hooks the exercise asks the learner to write (``return grad_cam(...)`` for "write Grad-CAM from two hooks").

A blocked function keeps its identity -- the learner's ``from course_utils.saliency import grad_cam`` still names the
same object -- but, until the ``with`` block ends, calling it raises :class:`HelperBlocked`. (Its code object is
swapped for a stub and put back in ``finally``; a class is blocked through its ``__init__``; ``module.Class.method``
names one method.) While a block is active, an audit hook (``sys.addaudithook``, installed on first use, inert
otherwise) refuses any other assignment to a blocked function's ``__code__``: an answer cannot switch the helper
back on. A helper whose code no longer comes from its module's file (replaced before the check) is refused too.

Usage::

    with blocked(("course_utils.saliency.grad_cam",)):
        exercise.validate(answer)      # an answer that calls grad_cam raises HelperBlocked
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import CodeType, FunctionType
from typing import Any

from course_utils.machinery.messages import N_, _

__all__ = ["HelperBlocked", "blocked", "resolve_helper"]


class HelperBlocked(RuntimeError):
    """The learner's answer called a course helper that the exercise asks them to write themselves.

    ``why`` is the English text (marked with ``N_()``); ``str(error)`` and ``check()`` show it in the learner's
    language."""

    why = N_("this exercise asks you to write those hooks yourself (register_forward_hook, register_hook, ...), so "
           "the course's finished helper is switched off while your answer is checked.")

    def __init__(self, name: str, why: str | None = None) -> None:
        if why is not None:
            self.why = why
        super().__init__(_("{name} is switched off: {why}").format(name=name, why=_(self.why)))
        self.name = name


def _stub(*args: Any, **kwargs: Any) -> Any:
    # Runs with the blocked function's globals, so it names nothing but builtins; the blocked name is the code
    # object's qualified name, set in _stub_code.
    sys = __import__("sys")
    raise __import__("course_utils.machinery.blocked_helpers", fromlist=["HelperBlocked"]).HelperBlocked(
        sys._getframe().f_code.co_qualname)


def _stub_code(name: str) -> CodeType:
    return _stub.__code__.replace(co_name=name.rsplit(".", 1)[-1], co_qualname=name)


def _lookup(name: str) -> Any:
    """``module.attribute`` or ``module.Class.attribute``."""
    module_name, _dot, attribute = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except ImportError:
        owner_module, _dot, owner = module_name.rpartition(".")
        return vars(getattr(importlib.import_module(owner_module), owner))[attribute]


def resolve_helper(name: str) -> FunctionType:
    """The function behind a dotted name (``"course_utils.saliency.grad_cam"``; a class gives its ``__init__``;
    ``"course_utils.saliency._GuideFunctionalRelus.__torch_function__"`` a method).

    Usage: ``resolve_helper("course_utils.recorder.ActivationRecorder")``
    """
    if not name.startswith("course_utils."):
        raise ValueError(f"Only course_utils helpers can be blocked, not {name!r}.")
    try:
        target: Any = _lookup(name)
    except (ImportError, AttributeError, KeyError) as error:
        raise ValueError(f"Cannot block {name!r}: {error}. Name a function or class of course_utils.") from error
    if isinstance(target, type):
        target = target.__dict__.get("__init__")
    if not isinstance(target, FunctionType):
        raise ValueError(f"Cannot block {name!r}: it is not a Python function or a class with its own __init__.")
    if target.__closure__:
        raise ValueError(f"Cannot block {name!r}: it is a closure; block the module-level function that makes it.")
    return target


class _Guard:
    """What the audit hook reads: the blocked functions (by id) and whether blocked() itself is swapping code."""

    protected: dict[int, str] = {}
    swapping = False
    installed = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if (event == "object.__setattr__" and _Guard.protected and not _Guard.swapping and len(args) >= 2
            and args[1] == "__code__" and id(args[0]) in _Guard.protected):
        raise HelperBlocked(_Guard.protected[id(args[0])])


def _install_audit_hook() -> None:
    if not _Guard.installed:
        sys.addaudithook(_audit)  # permanent by design (an answer cannot remove it); inert outside blocked()
        _Guard.installed = True


def _check_untouched(name: str, function: FunctionType) -> None:
    """Refuse a helper whose code was replaced in this session (it must come from its own module's file)."""
    module = sys.modules.get(function.__module__)
    expected = getattr(module, "__file__", None)
    if expected is None or function.__code__.co_filename != expected:
        raise HelperBlocked(name, why=_("its code was replaced in this session (it no longer comes from "
                                        "{module}): restart the kernel and run your cells again.").format(
                                            module=function.__module__))


@contextmanager
def blocked(names: Sequence[str]) -> Iterator[None]:
    """While the block runs, calling any of the named course helpers raises :class:`HelperBlocked`, and so does
    setting their ``__code__``."""
    functions: list[tuple[FunctionType, CodeType]] = []
    if names:
        _install_audit_hook()
    try:
        for name in names:
            function = resolve_helper(name)
            _check_untouched(name, function)
            functions.append((function, function.__code__))
            _Guard.swapping = True
            try:
                function.__code__ = _stub_code(name)
            finally:
                _Guard.swapping = False
            _Guard.protected[id(function)] = name
        with _watching_copies({code: name for (_function, code), name in zip(functions, names)}) as copies_called:
            yield
        for function, _code in functions:
            if not is_blocked(function):  # cannot happen through Python code while the audit hook guards it
                raise HelperBlocked(_Guard.protected.get(id(function), function.__qualname__),
                                    why=N_("it was switched back on while your answer ran."))
        if copies_called:
            raise HelperBlocked(copies_called[0], why=N_("your code ran a copy of its code while it was switched off."))
    finally:
        for function, code in reversed(functions):
            _Guard.protected.pop(id(function), None)
            _Guard.swapping = True
            try:
                function.__code__ = code
            finally:
                _Guard.swapping = False


@contextmanager
def _watching_copies(originals: dict[CodeType, str]) -> Iterator[list[str]]:
    """While the block runs, any start of a blocked helper's original code -- through a function the learner made
    from it before the check -- is noted and stopped with :class:`HelperBlocked`. Python 3.12+: ``sys.monitoring``
    events on those code objects only (no cost elsewhere); 3.11: a profile function (``sys.setprofile``), which
    steps aside for a profiler or debugger already in force."""
    called: list[str] = []
    if not originals:
        yield called
        return

    def refuse(name: str) -> None:
        called.append(name)
        raise HelperBlocked(name, why=N_("your code ran a copy of its code while it was switched off."))

    monitoring = getattr(sys, "monitoring", None)
    if monitoring is not None:
        tool = next((t for t in range(2, 6) if monitoring.get_tool(t) is None), None)
        if tool is None:
            yield called
            return
        monitoring.use_tool_id(tool, "course_utils check")
        try:
            monitoring.register_callback(tool, monitoring.events.PY_START,
                                         lambda code, offset: refuse(originals[code]) if code in originals else None)
            for code in originals:
                monitoring.set_local_events(tool, code, monitoring.events.PY_START)
            yield called
        finally:
            for code in originals:
                monitoring.set_local_events(tool, code, 0)
            monitoring.register_callback(tool, monitoring.events.PY_START, None)
            monitoring.free_tool_id(tool)
        return
    if sys.getprofile() is not None:
        yield called
        return
    files = {code.co_filename for code in originals}
    where = {(code.co_filename, code.co_firstlineno, code.co_name): name for code, name in originals.items()}

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_filename in files:
            code = frame.f_code
            name = where.get((code.co_filename, code.co_firstlineno, code.co_name))
            if name is not None:
                refuse(name)

    sys.setprofile(profile)
    try:
        yield called
    finally:
        if sys.getprofile() is profile:
            sys.setprofile(None)


def is_blocked(function: Callable[..., Any]) -> bool:
    """True while ``function`` is switched off by :func:`blocked` (for tests)."""
    code = getattr(function, "__code__", None)
    return code is not None and code.co_code == _stub.__code__.co_code and code.co_consts == _stub.__code__.co_consts
