"""The guard ``check()`` runs a learner's answer in: a time limit, a bounded output, and every global the answer
could change either put back or named.

Three pieces, each a context manager that ``course_utils.machinery.checks.check`` nests:

- :func:`time_limit` -- an answer that does not finish in time is stopped with :class:`TimeLimitExceeded` (a
  ``BaseException``, so ``except Exception`` in the answer does not swallow it). In the main thread on POSIX it is a
  ``SIGALRM`` timer; elsewhere a watchdog thread raises it asynchronously in the checking thread. It is raised only
  while the learner's own code runs (never half-way through the course's clean-up), unless the check itself is stuck
  long past the limit. The caller's own ``SIGALRM`` handler and timer (pytest-timeout, say) are put back.
- :func:`limited_output` -- what the answer prints passes through up to a budget; the rest is counted, not shown.
- :class:`SessionGuard` -- a snapshot of the learner's session (random states, grad/anomaly/determinism modes,
  default dtype and device, torch function and dispatch modes, saved-tensor hooks, global module and optimizer
  hooks, matmul precision, backend flags, numpy error and print settings, recursion limit, working directory,
  ``sys.stdout``, trace/profile functions, and PyTorch's and numpy's namespaces) whose :meth:`SessionGuard.restore`
  puts each back in its own ``try`` and reports what the answer had changed.

Usage::

    guard = SessionGuard()
    try:
        with time_limit(60, is_learner_frame) as timer, limited_output() as output:
            validator(answer)
    finally:
        changes = guard.restore()    # e.g. ["changed the recursion limit (put back)"]
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import random
import signal
import sys
import sysconfig
import threading
import time
import types
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.modules.module as _module_globals

from course_utils.machinery.messages import N_, _

__all__ = ["TimeLimitExceeded", "SessionGuard", "Change", "Timer", "OutputBudget", "is_learner_file",
           "is_learner_frame",
           "is_learner_value", "limited_output", "quiet_warnings", "time_limit"]

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


def is_learner_frame(frame: types.FrameType) -> bool:
    """True when ``frame`` runs the learner's code."""
    return is_learner_file(frame.f_code.co_filename)


def is_learner_value(value: Any) -> bool:
    """True for a function, method, partial or class the learner wrote (in a notebook, a script, ``exec``)."""
    kind = type(value)  # type(), not isinstance: some objects in torch's namespace warn when asked for __class__
    for _ in range(3):
        if issubclass(kind, functools.partial):
            value = value.func
        elif kind in (types.MethodType, staticmethod, classmethod):
            value = value.__func__
        else:
            break
        kind = type(value)
    if kind is types.FunctionType:
        return is_learner_file(value.__code__.co_filename)
    if issubclass(kind, type):
        module_name = getattr(value, "__module__", "") or ""
        if module_name == "__main__":
            return True
        file = getattr(sys.modules.get(module_name), "__file__", None)
        return isinstance(file, str) and is_learner_file(file)
    return False


class TimeLimitExceeded(BaseException):
    """Raised inside the learner's code when a check runs past its time limit."""


# -- the time limit ----------------------------------------------------------------------------------------------
class Timer:
    """What :func:`time_limit` saw: ``fired`` once the limit passed (the verdict must then say so)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.fired = False
        self.raised = 0


_RETRY_S = 0.05  # when the limit passes in course or library code, try again this soon
_AGAIN_S = 1.0  # an answer that swallowed the exception is interrupted again this much later
_FORCE_AFTER_S = 60.0  # ... and raise wherever the check is after this much longer (a course check that hangs;
# not sooner: a slow laptop's first torch.compile runs in library code and must not be cut short)
_MAX_FORCED = 2  # raised outside the learner's code at most this often


@contextlib.contextmanager
def time_limit(seconds: float, is_learner: Callable[[types.FrameType], bool] = is_learner_frame) -> Iterator[Timer]:
    """Stop the block with :class:`TimeLimitExceeded` once ``seconds`` have passed, raised in a frame for which
    ``is_learner`` is true (the learner's endless loop), or anywhere ``_FORCE_AFTER_S`` later. An answer that
    catches the exception (``except BaseException: pass`` in a loop) is interrupted again, in its ``except`` clause
    too (a trace function raises at its next line)."""
    timer = Timer(seconds)
    start = time.monotonic()
    forced = [0]
    owner = sys._getframe(2)  # the frame whose `with` statement started the limit: tracing stops there

    def due(frame: types.FrameType | None) -> bool:
        """Called once the limit passed: True when the exception should be raised now, in ``frame``."""
        timer.fired = True
        if frame is not None and is_learner(frame):
            timer.raised += 1
            return True
        if time.monotonic() - start > seconds + _FORCE_AFTER_S and forced[0] < _MAX_FORCED:
            forced[0] += 1
            timer.raised += 1
            return True
        return False

    use_signal = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread())
    if use_signal:
        with _alarm(seconds, due, is_learner, owner):
            yield timer
    else:
        with _watchdog(seconds, due):
            yield timer


def _raise_at_next_learner_line(frame: types.FrameType, is_learner: Callable[[types.FrameType], bool],
                                message: str, traced_frames: list[tuple[types.FrameType, Any]],
                                owner: types.FrameType) -> None:
    """Trace the learner's frames on the stack (up to the code that started the time limit) and new ones, so that
    their next line raises the time limit; ``traced_frames`` keeps what to put back."""
    def local(traced: types.FrameType, event: str, arg: Any) -> Any:
        if event == "line" and is_learner(traced):
            raise TimeLimitExceeded(message)
        return local

    def start(traced: types.FrameType, event: str, arg: Any) -> Any:
        return local if is_learner(traced) else None

    sys.settrace(start)
    current: types.FrameType | None = frame
    while current is not None and current is not owner:
        if is_learner(current):
            traced_frames.append((current, current.f_trace))
            current.f_trace = local
        current = current.f_back


@contextlib.contextmanager
def _alarm(seconds: float, due: Callable[[types.FrameType | None], bool],
           is_learner: Callable[[types.FrameType], bool], owner: types.FrameType) -> Iterator[None]:
    previous_handler = signal.getsignal(signal.SIGALRM)
    previous_timer = signal.setitimer(signal.ITIMER_REAL, 0)
    previous_trace = sys.gettrace()
    traced_frames: list[tuple[types.FrameType, Any]] = []
    started = time.monotonic()
    message = f"the check's time limit of {seconds:g} s passed"

    def on_alarm(signum: int, frame: types.FrameType | None) -> None:
        if due(frame):
            signal.setitimer(signal.ITIMER_REAL, _AGAIN_S)  # again later, should the answer swallow this one
            if frame is not None and is_learner(frame):
                _raise_at_next_learner_line(frame, is_learner, message, traced_frames, owner)
            raise TimeLimitExceeded(message)
        signal.setitimer(signal.ITIMER_REAL, _RETRY_S)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if sys.gettrace() is not previous_trace:
            sys.settrace(previous_trace)
        for traced, trace in reversed(traced_frames):
            traced.f_trace = trace
        remaining, interval = previous_timer
        if remaining > 0:  # the caller's own timer goes on where it was (or fires at once if it is overdue)
            signal.setitimer(signal.ITIMER_REAL, max(remaining - (time.monotonic() - started), 1e-3), interval)


@contextlib.contextmanager
def _watchdog(seconds: float, due: Callable[[types.FrameType | None], bool]) -> Iterator[None]:
    """The same limit off the main thread (or on Windows): a thread that raises in the checking thread."""
    target = threading.get_ident()
    stop = threading.Event()

    def watch() -> None:
        if stop.wait(seconds):
            return
        while not stop.is_set():
            frame = sys._current_frames().get(target)
            if due(frame):
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(target), ctypes.py_object(TimeLimitExceeded))
                if stop.wait(1.0):
                    return
            elif stop.wait(_RETRY_S):
                return

    thread = threading.Thread(target=watch, name="check-time-limit", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


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
        newlines = shown.count("\n")
        if self.lines + newlines > self.max_lines:
            cut = -1
            for _ in range(self.max_lines - self.lines):
                cut = shown.index("\n", cut + 1)
            shown = shown[: cut + 1]
        self.lines += shown.count("\n")
        self.chars += len(shown)
        self._hide(text[len(shown):])
        return shown

    def _hide(self, text: str) -> None:
        if text:
            self.hidden_chars += len(text)
            self.hidden_lines += text.count("\n") or 1

    def note(self) -> str:
        """A sentence for the ✓/✗ line, or "" when everything was shown."""
        if not self.hidden_chars:
            return ""
        return _("(check() did not show the rest of what your code printed: about {lines} more line(s), {chars} "
                 "characters.)").format(lines=f"{self.hidden_lines:,}", chars=f"{self.hidden_chars:,}")


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


# -- the session's globals ----------------------------------------------------------------------------------------
_NAMESPACES: dict[bool, list[tuple[str, Any]]] = {}


def _watched_namespaces() -> list[tuple[str, Any]]:
    """Where a patch would fool a check or outlive it: PyTorch's and numpy's public namespaces and module classes."""
    key = "torch.distributed" in sys.modules
    if key not in _NAMESPACES:
        _NAMESPACES[key] = _find_namespaces()
    return _NAMESPACES[key]


def _fingerprint(namespace: dict[str, Any]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Names and value identities of a namespace, compared at C speed (a numpy array's == would not do)."""
    return tuple(namespace), tuple(map(id, namespace.values()))


_KNOWN_CLEAN: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}  # namespaces already scanned, by label


def _find_namespaces() -> list[tuple[str, Any]]:
    import torch.nn.functional as F  # noqa: N812

    spaces: list[tuple[str, Any]] = [
        ("torch", torch), ("torch.nn.functional", F), ("torch.autograd", torch.autograd), ("torch.nn.init", nn.init),
        ("torch.Tensor", torch.Tensor), ("torch.nn.Module", nn.Module), ("torch.nn.Parameter", nn.Parameter),
        ("torch.optim.Optimizer", torch.optim.Optimizer), ("torch.utils.hooks", torch.utils.hooks),
        ("torch.autograd.graph", torch.autograd.graph), ("numpy", np),
    ]
    for name, value in vars(nn).items():
        if isinstance(value, type) and issubclass(value, nn.Module) and value is not nn.Module:
            spaces.append((f"torch.nn.{name}", value))
    distributed = sys.modules.get("torch.distributed")
    if distributed is not None:
        spaces.append(("torch.distributed", distributed))
    return spaces


def _global_hook_dicts() -> dict[str, dict[Any, Any]]:
    found = {f"torch.nn.modules.module.{name}": value for name, value in vars(_module_globals).items()
             if name.startswith("_global_") and "hook" in name and isinstance(value, dict)}
    optimizer = sys.modules.get("torch.optim.optimizer")
    if optimizer is not None:
        found.update({f"torch.optim.optimizer.{name}": value for name, value in vars(optimizer).items()
                      if name.startswith("_global_") and "hook" in name and isinstance(value, dict)})
    return found


_HOOK_WORDS = {
    "_global_forward_hooks": N_("global forward hook"), "_global_forward_pre_hooks": N_("global forward pre-hook"),
    "_global_backward_hooks": N_("global backward hook"),
    "_global_backward_pre_hooks": N_("global backward pre-hook"),
    "_global_buffer_registration_hooks": N_("global buffer registration hook"),
    "_global_module_registration_hooks": N_("global module registration hook"),
    "_global_parameter_registration_hooks": N_("global parameter registration hook"),
    "_global_optimizer_pre_hooks": N_("global optimizer step pre-hook"),
    "_global_optimizer_post_hooks": N_("global optimizer step post-hook"),
}
_HOOK_WORDS_PLURAL = {
    "_global_forward_hooks": N_("global forward hooks"), "_global_forward_pre_hooks": N_("global forward pre-hooks"),
    "_global_backward_hooks": N_("global backward hooks"),
    "_global_backward_pre_hooks": N_("global backward pre-hooks"),
    "_global_buffer_registration_hooks": N_("global buffer registration hooks"),
    "_global_module_registration_hooks": N_("global module registration hooks"),
    "_global_parameter_registration_hooks": N_("global parameter registration hooks"),
    "_global_optimizer_pre_hooks": N_("global optimizer step pre-hooks"),
    "_global_optimizer_post_hooks": N_("global optimizer step post-hooks"),
}

# What restore() names when putting a part of the session back failed (the step's function name -> words).
_STEP_WORDS = {
    "_function_modes": N_("function modes"), "_dispatch_modes": N_("dispatch modes"),
    "_default_device": N_("default device"), "_saved_tensor_hooks": N_("saved tensor hooks"),
    "_grad_mode": N_("grad mode"), "_random_states": N_("random states"), "_print_options": N_("print options"),
    "_numpy_errors": N_("numpy errors"), "_torch_settings": N_("torch settings"),
    "_matmul_precision": N_("matmul precision"), "_backend_switches": N_("backend switches"),
    "_global_hooks": N_("global hooks"), "_patched_namespaces": N_("patched namespaces"),
    "_interpreter": N_("interpreter"), "_working_directory": N_("working directory"),
}


class Change(str):
    """One thing an answer changed, as a phrase that follows "your code" in the learner's language; ``fatal`` when
    it makes the answer wrong (a hook left registered, PyTorch patched), not only put back."""

    fatal: bool

    def __new__(cls, phrase: str, fatal: bool = False) -> "Change":
        change = super().__new__(cls, phrase)
        change.fatal = fatal
        return change


def _backend_flags() -> dict[str, tuple[Any, str]]:
    """Backend switches a learner might flip: (object, attribute) by a readable name."""
    flags: dict[str, tuple[Any, str]] = {}
    for label, owner, names in (
        ("torch.backends.cudnn", torch.backends.cudnn, ("enabled", "benchmark", "deterministic", "allow_tf32")),
        ("torch.backends.mkldnn", torch.backends.mkldnn, ("enabled",)),
        ("torch.backends.cuda.matmul", torch.backends.cuda.matmul, ("allow_tf32",)),
    ):
        for name in names:
            flags[f"{label}.{name}"] = (owner, name)
    return flags


class SessionGuard:
    """A snapshot of the learner's session; :meth:`restore` puts it back and says what had changed.

    ``is_learner(value)`` tells a function or class the learner wrote (those replacing PyTorch's or numpy's own are
    taken out again and named); the snapshot itself changes nothing.

    Usage: ``guard = SessionGuard(); ...; changes = guard.restore()``"""

    def __init__(self, is_learner: Callable[[Any], bool] = is_learner_value) -> None:
        self._is_learner_value = is_learner
        self._python_random = random.getstate()
        self._numpy_random = np.random.get_state()
        self._torch_random = torch.random.get_rng_state()
        self._numpy_print = np.get_printoptions()
        self._numpy_errors = np.geterr()
        self._torch_print = {name: getattr(torch._tensor_str.PRINT_OPTS, name)
                             for name in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}
        self._grad = torch.is_grad_enabled()
        self._inference = torch.is_inference_mode_enabled()
        self._anomaly = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
        self._deterministic = (torch.are_deterministic_algorithms_enabled(),
                               torch.is_deterministic_algorithms_warn_only_enabled())
        self._dtype = torch.get_default_dtype()
        self._threads = torch.get_num_threads()
        self._matmul = torch.get_float32_matmul_precision()
        self._flags = {name: getattr(owner, attribute) for name, (owner, attribute) in _backend_flags().items()}
        self._function_modes = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
        self._dispatch_modes = [torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack())]
        import torch.utils._device as device_module

        self._device_module = device_module
        self._device_context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
        self._current_device = device_module.CURRENT_DEVICE
        self._saved_tensor_hooks = torch._C._autograd._top_saved_tensors_default_hooks(False)
        self._global_hooks = {name: dict(hooks) for name, hooks in _global_hook_dicts().items()}
        self._recursion = sys.getrecursionlimit()
        try:
            self._cwd: str | None = os.getcwd()
        except OSError:
            self._cwd = None
        self._streams = (sys.stdout, sys.stderr)
        self._trace, self._profile = sys.gettrace(), sys.getprofile()
        self._namespaces = []
        for label, owner in _watched_namespaces():
            namespace = dict(vars(owner))
            self._namespaces.append((label, owner, namespace, _fingerprint(namespace)))

    # What was changed before the check started: a learner's function sitting in PyTorch's namespace.
    def patched_before(self) -> list[str]:
        """Names in PyTorch's or numpy's namespaces that hold a function the learner wrote (patched before check)."""
        found = []
        for label, _owner, before, fingerprint in self._namespaces:
            if _KNOWN_CLEAN.get(label) == fingerprint:
                continue  # scanned before, unchanged since
            patched = [f"{label}.{name}" for name, value in before.items() if self._is_learner_value(value)]
            if patched:
                found += patched
            else:
                _KNOWN_CLEAN[label] = fingerprint
        return found

    def restore(self) -> list[str]:
        """Put everything back, each in its own ``try``; return what the answer had changed, one :class:`Change`
        each (``"changed the default device with torch.set_default_device (put back)"``, in the learner's language).
        A restore that fails is named too."""
        changes: list[Change] = []

        def attempt(step: Callable[[], None]) -> None:
            try:
                step()
            except Exception as error:  # noqa: BLE001 -- one failed restore must not stop the others
                what = _STEP_WORDS.get(step.__name__, step.__name__.strip("_").replace("_", " "))
                changes.append(Change(_("could not put back {what} ({error}); restart the kernel to be sure").format(
                    what=_(what), error=f"{type(error).__name__}: {error}"), fatal=True))

        # modes first: a mode left active would see (and could break) every restore below
        def _function_modes() -> None:
            now = [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]
            if len(now) == len(self._function_modes) and all(a is b for a, b in zip(now, self._function_modes)):
                return
            for _ in range(torch._C._len_torch_function_stack()):
                torch._C._pop_torch_function_stack()
            for mode in self._function_modes:
                torch._C._push_on_torch_function_stack(mode)
            extra = [type(mode).__name__ for mode in now if all(mode is not m for m in self._function_modes)
                     and type(mode).__name__ != "DeviceContext"]
            if extra:
                changes.append(Change(_("left a TorchFunctionMode active ({modes}; taken off): if your class "
                                        "overrides __exit__, call super().__exit__(...) in it").format(
                                            modes=", ".join(extra)), fatal=True))

        def _dispatch_modes() -> None:
            now = [torch._C._get_dispatch_stack_at(i) for i in range(torch._C._len_torch_dispatch_stack())]
            if len(now) == len(self._dispatch_modes) and all(a is b for a, b in zip(now, self._dispatch_modes)):
                return
            for _ in range(torch._C._len_torch_dispatch_stack()):
                torch._C._pop_torch_dispatch_stack()
            for mode in self._dispatch_modes:
                torch._C._push_on_torch_dispatch_stack(mode)
            changes.append(Change(_("left a TorchDispatchMode active (taken off)"), fatal=True))

        def _default_device() -> None:
            context = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)
            if context is self._device_context and self._device_module.CURRENT_DEVICE == self._current_device:
                return
            torch._GLOBAL_DEVICE_CONTEXT.device_context = self._device_context
            self._device_module.CURRENT_DEVICE = self._current_device
            changes.append(Change(_("changed the default device with torch.set_default_device (put back)")))

        def _saved_tensor_hooks() -> None:
            for _ in range(1000):  # bounded: a stack deeper than this is not a learner's answer
                top = torch._C._autograd._top_saved_tensors_default_hooks(False)
                expected = self._saved_tensor_hooks
                if top is None or (expected is not None and all(a is b for a, b in zip(top, expected))):
                    return
                torch._C._autograd._pop_saved_tensors_default_hooks()
            raise RuntimeError("more than 1000 saved_tensors_hooks contexts were left open")

        def _grad_mode() -> None:
            torch.set_grad_enabled(self._grad)
            if torch.is_inference_mode_enabled() != self._inference:
                changes.append(Change(_("left torch.inference_mode switched on: restart the kernel (it cannot be "
                                        "undone from outside)"), fatal=True))

        def _random_states() -> None:
            random.setstate(self._python_random)
            np.random.set_state(self._numpy_random)
            torch.random.set_rng_state(self._torch_random)

        def _print_options() -> None:
            np.set_printoptions(**self._numpy_print)
            torch.set_printoptions(**self._torch_print)

        def _numpy_errors() -> None:
            if np.geterr() != self._numpy_errors:
                np.seterr(**self._numpy_errors)
                changes.append(Change(_("changed numpy's error handling with np.seterr (put back)")))

        def _torch_settings() -> None:
            if (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()) != self._anomaly:
                torch.set_anomaly_enabled(*self._anomaly)
            if (torch.are_deterministic_algorithms_enabled(),
                    torch.is_deterministic_algorithms_warn_only_enabled()) != self._deterministic:
                torch.use_deterministic_algorithms(self._deterministic[0], warn_only=self._deterministic[1])
            torch.set_default_dtype(self._dtype)
            if torch.get_num_threads() != self._threads:
                torch.set_num_threads(self._threads)

        def _matmul_precision() -> None:
            if torch.get_float32_matmul_precision() != self._matmul:
                torch.set_float32_matmul_precision(self._matmul)
                changes.append(Change(_("changed torch.set_float32_matmul_precision (put back)")))

        def _backend_switches() -> None:
            for name, (owner, attribute) in _backend_flags().items():
                if getattr(owner, attribute) != self._flags[name]:
                    setattr(owner, attribute, self._flags[name])
                    changes.append(Change(_("changed {name} (put back)").format(name=name)))

        def _global_hooks() -> None:
            for name, hooks in _global_hook_dicts().items():
                before = self._global_hooks.get(name, {})
                added = [key for key in hooks if key not in before]
                for key in added:
                    del hooks[key]
                for key, hook in before.items():
                    hooks.setdefault(key, hook)
                if added:
                    words = _HOOK_WORDS_PLURAL if len(added) > 1 else _HOOK_WORDS
                    what = words.get(name.rsplit(".", 1)[-1])
                    what = _(what) if what else name + ("s" if len(added) > 1 else "")
                    changes.append(Change(_("left {count} {what} registered ({name}; removed): remove every hook you "
                                            "register, with its handle").format(count=len(added), what=what,
                                                                                 name=name), fatal=True))

        def _patched_namespaces() -> None:
            for label, owner, before, fingerprint in self._namespaces:
                now = vars(owner)
                if _fingerprint(now) == fingerprint:
                    continue
                for name in set(now) | set(before):
                    old, new = before.get(name, _MISSING), now.get(name, _MISSING)
                    if old is new or not (self._is_learner_value(new) or
                                          (new is _MISSING and old is not _MISSING and callable(old))):
                        continue
                    if old is _MISSING:
                        delattr(owner, name)
                    else:
                        setattr(owner, name, old)
                    changes.append(Change(_("replaced {name} (put back): a check cannot trust a patched PyTorch -- "
                                            "write the hook the exercise asks for instead").format(
                                                name=f"{label}.{name}"), fatal=True))

        def _interpreter() -> None:
            if sys.getrecursionlimit() != self._recursion:
                sys.setrecursionlimit(self._recursion)
                changes.append(Change(_("changed the recursion limit (put back)")))
            if (sys.stdout, sys.stderr) != self._streams:
                sys.stdout, sys.stderr = self._streams
                changes.append(Change(_("replaced sys.stdout or sys.stderr (put back)")))
            if sys.gettrace() is not self._trace:
                sys.settrace(self._trace)
                changes.append(Change(_("changed sys.settrace (put back)")))
            if sys.getprofile() is not self._profile:
                sys.setprofile(self._profile)
                changes.append(Change(_("changed sys.setprofile (put back)")))

        def _working_directory() -> None:
            if self._cwd is not None and os.getcwd() != self._cwd:
                os.chdir(self._cwd)
                changes.append(Change(_("changed the working directory with os.chdir (put back)")))

        for step in (_function_modes, _dispatch_modes, _default_device, _saved_tensor_hooks, _grad_mode,
                     _random_states, _print_options, _numpy_errors, _torch_settings, _matmul_precision,
                     _backend_switches, _global_hooks, _patched_namespaces, _interpreter, _working_directory):
            attempt(step)
        return changes


_MISSING = object()


@contextlib.contextmanager
def quiet_warnings() -> Iterator[None]:
    """A validator's (or the answer's) warnings are not the learner's output; the filters come back afterwards."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
