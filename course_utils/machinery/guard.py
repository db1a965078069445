"""What ``check()`` runs a learner's answer in: a time limit, a bounded output, and a session put back as it was.

A self-check, not a sandbox: it protects the learner from their own mistakes (an endless loop, a flood of prints,
a hook or torch mode left behind, a changed default), not the check from a learner who sets out to fool it.

Usage::

    guard = SessionGuard()
    try:
        with time_limit(60) as timer, limited_output() as output:
            validator(answer)
    finally:
        changes = guard.restore()    # [Change(what=..., fatal=True)] for a global hook left registered
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import signal
import sys
import sysconfig
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from course_utils._torch_internals import (
    default_device_set,
    dispatch_modes,
    function_modes,
    global_hook_dicts,
    print_options,
    put_back_modes,
)
from course_utils.machinery.messages import N_, Text

__all__ = ["Change", "OutputBudget", "SessionGuard", "TimeLimitExceeded", "Timer", "is_learner_file", "limited_output",
           "time_limit", "written_by_learner"]

COURSE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # course_utils/
# The standard library, this environment's packages, and wherever torch and numpy themselves live (a user site or a
# distribution's dist-packages on Colab, Kaggle, conda); any folder called site-packages or dist-packages counts too.
_LIBRARY_DIRS = tuple(sorted({os.path.realpath(path) for path in (
    *(sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")),
    os.path.dirname(os.path.dirname(torch.__file__)), os.path.dirname(os.path.dirname(np.__file__)),
)}))
_PACKAGE_FOLDERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


@functools.lru_cache(maxsize=4096)
def is_learner_file(filename: str) -> bool:
    """True for code the learner wrote: a notebook cell, a script, ``exec``'d text -- anything outside the course
    package, the standard library and the installed packages (``<frozen ...>`` modules count as the library)."""
    if not filename or filename.startswith("<frozen"):
        return False
    if filename.startswith("<"):
        return True
    path = os.path.realpath(filename)
    return not (path.startswith(COURSE_DIR + os.sep) or path.startswith(_LIBRARY_DIRS)
                or any(folder in path for folder in _PACKAGE_FOLDERS))


def written_by_learner(value: Any) -> bool:
    """True for a function, method, partial, class or callable object defined in the learner's code."""
    while isinstance(value, functools.partial):
        value = value.func
    value = getattr(value, "__func__", value)  # a bound method
    if isinstance(value, type):
        module = sys.modules.get(value.__module__)
        return value.__module__ == "__main__" or is_learner_file(getattr(module, "__file__", None) or "")
    code = getattr(value, "__code__", None) or getattr(getattr(type(value), "__call__", None), "__code__", None)  # noqa: B004
    return code is not None and is_learner_file(code.co_filename)


# -- the time limit ----------------------------------------------------------------------------------------------
class TimeLimitExceeded(BaseException):
    """Raised in the answer when a check runs past its time limit."""


@dataclass
class Timer:
    """What :func:`time_limit` did: ``fired`` once the limit passed; ``available`` False where it cannot stop code."""

    seconds: float
    available: bool = True
    fired: bool = False


_AGAIN_S = 0.05  # after the limit: how often to look again for the learner's code on the stack
_FORCE_AFTER_S = 60.0  # ... and raise wherever the check is this much later (a course check stuck on its own; not
# sooner: a slow laptop's first torch.compile runs in the check's own code)


def _learner_on_stack(frame: types.FrameType | None, owner: types.FrameType) -> bool:
    """True when the learner's code runs in ``frame`` or a frame below it, up to ``owner`` (where the limit began:
    the notebook cell that called check() is the learner's too, and does not count)."""
    while frame is not None and frame is not owner:
        if is_learner_file(frame.f_code.co_filename):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[Timer]:
    """Stop the block with :class:`TimeLimitExceeded` once ``seconds`` have passed (main thread, POSIX).

    It is raised while the learner's code is on the stack (their loop, or a library call it made), never half-way
    through the course's own set-up or clean-up -- unless the check itself is stuck ``_FORCE_AFTER_S`` longer. An
    answer that caught it and runs on gets it again (every ``_AGAIN_S``)."""
    timer = Timer(seconds)
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        timer.available = False
        yield timer
        return

    ended: list[bool] = []
    started = time.monotonic()
    owner = sys._getframe(2)  # the frame of the `with` statement (past this generator and contextlib's __enter__)

    def on_alarm(signum: int, frame: types.FrameType | None) -> None:
        overdue = time.monotonic() - started > seconds + _FORCE_AFTER_S
        if not ended and (_learner_on_stack(frame, owner) or overdue):
            timer.fired = True
            raise TimeLimitExceeded(f"the check's time limit of {seconds:g} s passed")

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, seconds, _AGAIN_S)
    try:
        yield timer
    finally:
        ended.append(True)  # first: an alarm from here on raises nothing
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        remaining, interval = previous_timer
        if remaining > 0:  # the caller's own timer goes on where it was (or fires at once if it is overdue)
            signal.setitimer(signal.ITIMER_REAL, max(remaining - (time.monotonic() - started), 1e-3), interval)


# -- the output budget --------------------------------------------------------------------------------------------
class OutputBudget:
    """How much of the answer's output was shown and how much was held back."""

    def __init__(self, max_lines: int, max_chars: int) -> None:
        self.max_lines, self.max_chars = max_lines, max_chars
        self.lines = self.chars = 0
        self.hidden_lines = self.hidden_chars = 0

    def take(self, text: str) -> str:
        """The part of ``text`` still within the budget (the rest is counted as hidden)."""
        if self.hidden_chars or self.lines >= self.max_lines or self.chars >= self.max_chars:
            self._hide(text)
            return ""
        shown = text[: self.max_chars - self.chars]
        if self.lines + shown.count("\n") > self.max_lines:  # the lines still allowed, each with its newline
            shown = "\n".join(shown.split("\n")[: self.max_lines - self.lines]) + "\n"
        self.lines += shown.count("\n")
        self.chars += len(shown)
        self._hide(text[len(shown):])
        return shown

    def _hide(self, text: str) -> None:
        if text:
            self.hidden_chars += len(text)
            self.hidden_lines += text.count("\n") or 1

    def note(self) -> Text | None:
        """A sentence for the ✓/✗ line, or None when everything was shown."""
        if not self.hidden_chars:
            return None
        return Text(N_("(check() did not show the rest of what your code printed: about {lines} more line(s), "
                       "{chars} characters.)"), lines=f"{self.hidden_lines:,}", chars=f"{self.hidden_chars:,}")


class _LimitedStream:
    """A stand-in for sys.stdout / sys.stderr that writes through the shared budget."""

    def __init__(self, stream: Any, budget: OutputBudget) -> None:
        self._stream, self._budget = stream, budget

    def write(self, text: Any) -> int:
        shown = self._budget.take(text if isinstance(text, str) else str(text))
        if shown:
            self._stream.write(shown)
        return len(text) if isinstance(text, str) else 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


@contextlib.contextmanager
def limited_output(max_lines: int = 200, max_chars: int = 20_000) -> Iterator[OutputBudget]:
    """Let the block print up to ``max_lines`` lines / ``max_chars`` characters (stdout and stderr together)."""
    budget = OutputBudget(max_lines, max_chars)
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _LimitedStream(out, budget), _LimitedStream(err, budget)
    try:
        yield budget
    finally:
        sys.stdout, sys.stderr = out, err


# -- the session ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Change:
    """One thing an answer changed: ``what`` follows "your code" (``str(change)``: in the learner's language now);
    ``fatal`` when it makes the answer wrong (a hook left registered), not only put back."""

    what: Text
    fatal: bool = False

    def __str__(self) -> str:
        return str(self.what)


_HOOK_WORDS = {  # the last part of a global hook dictionary's name -> (one, several)
    "_global_forward_hooks": (N_("global forward hook"), N_("global forward hooks")),
    "_global_forward_pre_hooks": (N_("global forward pre-hook"), N_("global forward pre-hooks")),
    "_global_backward_hooks": (N_("global backward hook"), N_("global backward hooks")),
    "_global_backward_pre_hooks": (N_("global backward pre-hook"), N_("global backward pre-hooks")),
    "_global_buffer_registration_hooks": (N_("global buffer registration hook"),
                                          N_("global buffer registration hooks")),
    "_global_module_registration_hooks": (N_("global module registration hook"),
                                          N_("global module registration hooks")),
    "_global_parameter_registration_hooks": (N_("global parameter registration hook"),
                                             N_("global parameter registration hooks")),
    "_global_optimizer_pre_hooks": (N_("global optimizer step pre-hook"), N_("global optimizer step pre-hooks")),
    "_global_optimizer_post_hooks": (N_("global optimizer step post-hook"), N_("global optimizer step post-hooks")),
}


class SessionGuard:
    """A snapshot of the learner's session; :meth:`restore` puts it back and says what had changed.

    Usage: ``guard = SessionGuard(); ...; changes = guard.restore()``"""

    def __init__(self) -> None:
        self._random = (random.getstate(), np.random.get_state(), torch.random.get_rng_state())
        self._modes = (torch.is_grad_enabled(), torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled(),
                       torch.are_deterministic_algorithms_enabled(),
                       torch.is_deterministic_algorithms_warn_only_enabled())
        self._threads = torch.get_num_threads()
        self._dtype, self._device = torch.get_default_dtype(), (torch.get_default_device(), default_device_set())
        self._print = (np.get_printoptions(), print_options())
        self._hooks = {name: dict(hooks) for name, hooks in global_hook_dicts().items()}
        self._stacks = (function_modes(), dispatch_modes())

    def restore(self) -> list[Change]:
        """Put everything back, each part on its own (one that fails does not stop the others, and is named);
        return what the answer had changed."""
        changes: list[Change] = []
        for what, step in ((N_("torch modes"), self._mode_stacks), (N_("random states"), self._random_states),
                           (N_("grad mode"), self._grad_modes),
                           (N_("default device"), self._defaults), (N_("print options"), self._print_options),
                           (N_("global hooks"), self._global_hooks)):
            try:
                changes += step()
            except Exception as error:
                changes.append(Change(Text(N_("could not put back {what} ({error}); restart the kernel to be sure"),
                                           what=Text(what), error=f"{type(error).__name__}: {error}"), fatal=True))
        return changes

    def _mode_stacks(self) -> list[Change]:
        taken = put_back_modes(*self._stacks)
        if not taken:
            return []
        names = ", ".join(dict.fromkeys(type(mode).__name__ for mode in taken))
        return [Change(Text(N_("left {count} torch mode(s) active ({names}; taken off): enter a mode with a `with` "
                               "block, which leaves it also when the code raises"), count=len(taken), names=names),
                       fatal=True)]

    def _random_states(self) -> list[Change]:
        python, numpy, torch_state = self._random
        random.setstate(python)
        np.random.set_state(numpy)
        torch.random.set_rng_state(torch_state)
        return []

    def _grad_modes(self) -> list[Change]:
        grad, anomaly, check_nan, deterministic, warn_only = self._modes
        torch.set_grad_enabled(grad)
        if (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()) != (anomaly, check_nan):
            torch.set_anomaly_enabled(anomaly, check_nan)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != (deterministic, warn_only):
            torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
        return []

    def _defaults(self) -> list[Change]:
        torch.set_default_dtype(self._dtype)
        if torch.get_num_threads() != self._threads:
            torch.set_num_threads(self._threads)
        device, was_set = self._device
        if (torch.get_default_device(), default_device_set()) == self._device:
            return []
        torch.set_default_device(device if was_set else None)
        return [Change(Text(N_("changed the default device with torch.set_default_device (put back)")))]

    def _print_options(self) -> list[Change]:
        np.set_printoptions(**self._print[0])
        torch.set_printoptions(**self._print[1])
        return []

    def _global_hooks(self) -> list[Change]:
        changes = []
        for name, hooks in global_hook_dicts().items():
            before = self._hooks.get(name, {})
            added = [key for key in hooks if key not in before]
            for key in added:
                del hooks[key]
            for key, hook in before.items():
                hooks.setdefault(key, hook)
            if added:
                one, several = _HOOK_WORDS.get(name.rsplit(".", 1)[-1], (name, name + "s"))
                changes.append(Change(Text(N_("left {count} {what} registered ({name}; removed): remove every hook "
                                              "you register, with its handle"), count=len(added),
                                           what=Text(several if len(added) > 1 else one), name=name), fatal=True))
        return changes
