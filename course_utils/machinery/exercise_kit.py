"""What an exercise is, and validators to build its check from: ``Exercise``, ``Verdict``, ``expect_*``.

An exercise module (``course_utils/machinery/exercises/nbNN.py``) exports ``EXERCISES``, a tuple of :class:`Exercise`;
``course_utils.machinery.exercises.catalogue()`` collects them and ``course_utils.machinery.checks.check`` runs them.
This module imports neither (nor anything of the course but its messages): there is no import cycle and nothing is
registered at import time.

Usage::

    from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable

    def _test_clamp(hook) -> Verdict:
        ...  # run the learner's hook on fresh cases, return Verdict(True) or Verdict(False, "a hint")

    EXERCISES = (Exercise("01.2", "Write a clamping tensor hook.", expect_callable(_test_clamp, "a hook(grad)"),
                          hints=("A hook that returns a tensor replaces the gradient.",), kind="write"),)
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from course_utils.machinery.messages import Text, _

__all__ = [
    "Exercise",
    "ExerciseKind",
    "Status",
    "Verdict",
    "as_whole_number",
    "plain",
    "plain_tensor",
    "expect_callable",
    "expect_choice",
    "expect_live_order",
    "expect_live_value",
    "expect_tensor",
    "hooks_while_running",
]

ExerciseKind = Literal["write", "predict", "choice"]
_KINDS = ("write", "predict", "choice")
_ID = re.compile(r"\d\d\.\d+")


class Status(enum.Enum):
    """What a check decided, where it decided it."""

    PASSED = "passed"
    FAILED = "failed"  # the answer is wrong (the message says how)
    STUB = "still the stub"  # the learner has not written the answer yet: nothing to record
    COURSE_BUG = "course bug"  # the check itself failed
    TIMED_OUT = "timed out"  # the answer ran past the exercise's time limit


@dataclass(frozen=True, init=False)
class Verdict:
    """The outcome of a validator: passed or not, and what to tell the learner.

    ``Verdict(ok, message="", status=None)``: ``status`` defaults to ``Status.PASSED`` or ``Status.FAILED``;
    ``message`` is text in the learner's language or a :class:`~course_utils.machinery.messages.Text`, translated when
    it is read (``verdict.message``) or printed.

    Usage: ``Verdict(False, _("Expected a tensor."))``, ``Verdict(False, Text(N_("...")), status=Status.TIMED_OUT)``
    """

    ok: bool
    status: Status
    text: str | Text

    def __init__(self, ok: bool, message: str | Text = "", status: Status | None = None) -> None:
        status = status or (Status.PASSED if ok else Status.FAILED)
        if bool(ok) != (status is Status.PASSED):
            raise ValueError(f"A verdict with ok={ok!r} cannot have the status {status}.")
        object.__setattr__(self, "ok", bool(ok))
        object.__setattr__(self, "status", status)
        object.__setattr__(self, "text", message)

    @property
    def message(self) -> str:
        """What to tell the learner, in their language now."""
        return str(self.text)

    def __bool__(self) -> bool:
        return self.ok

    def _ipython_display_(self) -> None:
        """check() already printed the feedback: show nothing more in a notebook."""


@dataclass(frozen=True)
class Exercise:
    """One exercise.

    - ``id``: ``"NN.k"`` (notebook number, then the exercise's number in it);
    - ``task``: one line saying what to write or answer (``task``, ``hints`` and ``praise`` are marked with ``N_()``
      in the exercise modules and shown in the learner's language, through ``_()``, by ``check()`` and ``hint()``);
    - ``validate``: ``answer -> Verdict``; it runs the learner's code on cases the learner did not see;
    - ``hints``: shown one by one by ``hint(id)``, from a nudge to the idea (never the code);
    - ``kind``: ``"write"`` (the learner writes code that registers, implements or removes a hook),
      ``"predict"`` (predict, then the validator runs the case live) or ``"choice"``;
    - ``stretch``: the notebook's harder, optional exercise;
    - ``praise``: what the ✓ line adds;
    - ``time_limit_s``: how long ``check()`` lets the answer run before it stops it (an endless loop);
    - ``watch_hooks``: ``check()`` wraps the hooks the answer registers and fails it for a return value that cannot
      replace what it replaces (:mod:`course_utils.machinery.hook_watch`); off where
      ``torch.compile`` traces the learner's hooks (a wrapper would be traced too);
    - ``observe_only``: the exercise's module hooks only record, so any value a forward hook or pre-hook returns is
      a ✗ (it replaced the layer's output or input).
    """

    id: str
    task: str
    validate: Callable[[Any], Verdict]
    hints: tuple[str, ...] = field(default=())
    kind: ExerciseKind = "write"
    stretch: bool = False
    praise: str = ""
    time_limit_s: float = 60.0
    watch_hooks: bool = True
    observe_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"Exercise ids look like '01.2' (notebook, then number); got {self.id!r}.")
        if self.kind not in _KINDS:
            raise ValueError(f"Exercise {self.id}: kind must be one of {_KINDS}, got {self.kind!r}.")
        if not self.task.strip():
            raise ValueError(f"Exercise {self.id}: write a one-line task.")
        if isinstance(self.hints, str):
            raise TypeError(f"Exercise {self.id}: hints is a tuple of strings, e.g. hints=('first', 'second').")

    @property
    def notebook(self) -> str:
        """The two-digit notebook number, e.g. ``"06"``."""
        return self.id.split(".")[0]


# -- what the answer hooked ---------------------------------------------------------------------------------
_COURSE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # course_utils/


@dataclass
class HooksSeen:
    """The hooks a module carried when it first ran (see :func:`hooks_while_running`)."""

    kinds: dict[str, int] = field(default_factory=dict)  # hook dictionary name ("_forward_hooks") -> how many
    from_the_course: list[str] = field(default_factory=list)  # "_forward_hooks: record_output (recorder.py)"


@contextlib.contextmanager
def hooks_while_running(module: torch.nn.Module) -> Iterator[HooksSeen]:
    """What hooks ``module`` carries when it first runs inside the block -- the learner's, registered by the answer
    the block calls -- and which of them the course itself wrote (an answer that called a finished helper of the
    course, where the exercise asks for the hooks). The probe (a forward pre-hook) is gone after the block.

    Usage: ``with hooks_while_running(model[2]) as seen: answer(model, "2", x)`` then ``seen.kinds``"""
    seen = HooksSeen()

    def probe(observed: torch.nn.Module, args: Any) -> None:
        if seen.kinds:
            return
        for name, hooks in vars(observed).items():
            if "hook" not in name or not isinstance(hooks, dict) or name.endswith(("_with_kwargs", "_always_called")):
                continue
            functions = [hook for hook in hooks.values() if hook is not probe]
            if functions:
                seen.kinds[name] = len(functions)
            for hook in functions:
                hook = inspect.unwrap(hook)  # check() wraps the learner's hooks (hook_watch): look at theirs
                code = getattr(getattr(hook, "__func__", hook), "__code__", None)
                if code is not None and os.path.realpath(code.co_filename).startswith(_COURSE_DIR + os.sep):
                    seen.from_the_course.append(f"{name}: {code.co_name} ({os.path.basename(code.co_filename)})")

    handle = module.register_forward_pre_hook(probe, prepend=True)
    try:
        yield seen
    finally:
        handle.remove()


# -- answers as plain Python and torch values -----------------------------------------------------------------
def plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """A plain ``torch.Tensor`` holding ``value``'s numbers (a copy, detached), so that a tensor subclass from some
    library is compared by its numbers; a plain tensor or Parameter comes back as it is. Raises ``TypeError`` when no
    plain tensor can be made (a wrapper subclass without numbers of its own)."""
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return value
    try:
        return value.as_subclass(torch.Tensor).detach().clone()
    except (RuntimeError, TypeError) as error:
        raise TypeError(_("a {type} (a torch.Tensor subclass) cannot be compared: pass a plain tensor").format(
            type=type(value).__name__)) from error


def plain(value: Any, _depth: int = 0) -> Any:
    """``value`` with every str, number, list, tuple, dict and tensor replaced by its plain type (numpy scalars become
    Python numbers, a ``str`` subclass a ``str``); anything else (functions, classes, modules) is returned unchanged.

    Usage: ``answer = plain(answer)`` before comparing it with the truth."""
    if _depth > 20:
        raise TypeError(_("the answer is nested too deeply"))
    if isinstance(value, bool) or value is None:  # bool cannot be subclassed
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, torch.Tensor):
        return plain_tensor(value)
    if isinstance(value, list):
        return [plain(item, _depth + 1) for item in list.__iter__(value)]
    if isinstance(value, tuple):
        return tuple(plain(item, _depth + 1) for item in tuple.__iter__(value))
    if isinstance(value, dict):
        return {plain(key, _depth + 1): plain(item, _depth + 1) for key, item in dict.items(value)}
    return value


def as_whole_number(value: Any) -> int | None:
    """``value`` as an int when it is a whole number (``3``, ``3.0``, ``np.int64(3)``), else None (``3.7``,
    ``None``, ``"3"``, ``True``)."""
    try:
        value = plain(value)
    except TypeError:
        return None
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not value.is_integer():
        return None
    return int(value)


# -- validators, composable ----------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _as_float_tensor(answer: Any) -> torch.Tensor | Verdict:
    if answer is None:
        return Verdict(False, _("You passed None: is that .grad still empty, or did the hook not run?"))
    if isinstance(answer, np.ndarray):
        if answer.dtype.kind not in "biuf":
            return Verdict(False, _("Expected numbers; got a numpy array of {dtype}.").format(dtype=answer.dtype))
        answer = torch.from_numpy(np.array(answer, dtype=np.float32))
    try:
        answer = plain(answer)
    except TypeError as error:
        return Verdict(False, _("Expected plain numbers or a plain tensor: {error}.").format(error=error))
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return torch.tensor(float(answer))
    if isinstance(answer, (list, tuple)):
        try:
            return torch.tensor(answer, dtype=torch.float32)
        except (TypeError, ValueError, RuntimeError):
            return Verdict(False, _("Expected numbers (a tensor, a number or a list of numbers)."))
    if not isinstance(answer, torch.Tensor):
        return Verdict(False, _("Expected a torch.Tensor (or a number or list), got {type}.").format(
            type=_type_name(answer)))
    if answer.is_complex():
        return Verdict(False, _("Expected real numbers, got a tensor of {dtype}.").format(dtype=answer.dtype))
    return answer.detach().to(torch.float32).cpu()


def expect_tensor(expected: Sequence[float] | float | torch.Tensor, hint: str, *, atol: float = 1e-4) -> Callable[[Any], Verdict]:
    """Validator: a tensor (or number/list) equal to ``expected`` within ``atol``. ``hint`` (marked with ``N_()``) is
    shown in the learner's language."""
    return expect_live_value(lambda: torch.as_tensor(expected, dtype=torch.float32), hint, atol=atol)


def expect_live_value(compute: Callable[[], torch.Tensor], hint: str, *, atol: float = 1e-4) -> Callable[[Any], Verdict]:
    """Validator for a prediction: numbers equal (within ``atol``) to what ``compute()`` gets from a live run."""

    def validate(answer: Any) -> Verdict:
        value = _as_float_tensor(answer)
        if isinstance(value, Verdict):
            return Verdict(False, f"{value.message} {_(hint)}".strip()) if answer is None else value
        target = torch.as_tensor(compute(), dtype=torch.float32).detach()
        if value.shape != target.shape:
            if value.numel() != target.numel():
                return Verdict(False, _("Expected shape {expected}, got {got}. {hint}").format(
                    expected=tuple(target.shape), got=tuple(value.shape), hint=_(hint)))
            value = value.reshape(target.shape)
        if torch.allclose(value, target, atol=atol, rtol=0):
            return Verdict(True)
        return Verdict(False, _(hint))

    return validate


def expect_choice(expected: str, options: Sequence[str], hint: str) -> Callable[[Any], Verdict]:
    """Validator: one of ``options`` (case- and space-insensitive), equal to ``expected``."""
    normalised = {" ".join(o.lower().split()): o for o in options}
    if expected not in options:
        raise ValueError(f"The expected answer {expected!r} is not among the options {list(options)}.")

    def validate(answer: Any) -> Verdict:
        if not isinstance(answer, str):
            return Verdict(False, _("Answer with one of the strings {options}, got {type}.").format(
                options=list(options), type=_type_name(answer)))
        answer = str.__str__(answer)  # a str subclass whose __eq__ always says True is just its text here
        key = " ".join(answer.lower().split())
        if key not in normalised:
            return Verdict(False, _("{answer} is not one of the options {options}.").format(
                answer=repr(answer), options=list(options)))
        return Verdict(normalised[key] == expected, "" if normalised[key] == expected else _(hint))

    return validate


def expect_live_order(record: Callable[[], list[str]], hint: str) -> Callable[[Any], Verdict]:
    """Validator: a list of strings in exactly the order ``record()`` observes in a live run (e.g. hook firings)."""

    def validate(answer: Any) -> Verdict:
        if not isinstance(answer, (list, tuple)) or not all(isinstance(item, str) for item in answer):
            return Verdict(False, _("Answer with a list of strings, got {type}.").format(type=_type_name(answer)))
        answer = plain(answer)
        truth = record()
        if sorted(answer) != sorted(truth):
            return Verdict(False, _("Use exactly these {count} entries, each once: {entries}.").format(
                count=len(truth), entries=sorted(truth)))
        if list(answer) == truth:
            return Verdict(True)
        return Verdict(False, _("Not the order PyTorch uses. {hint}").format(hint=_(hint)))

    return validate


def expect_callable(test: Callable[[Callable[..., Any]], Verdict], what: str) -> Callable[[Any], Verdict]:
    """Validator: a function (or class), which ``test`` runs on fresh inputs and judges; ``what`` (``"a hook(grad)"``,
    marked with ``N_()`` where it is words) names what was expected."""

    def validate(answer: Any) -> Verdict:
        if not callable(answer):
            return Verdict(False, _("Expected {what}, got {type}.").format(what=_(what), type=_type_name(answer)))
        return test(answer)

    return validate


def lets_the_error_through(run: Callable[[], Any], error: type[BaseException]) -> Verdict | None:
    """The unhappy path of an answer that wraps a model: ``run`` calls the learner's function on a model whose forward
    raises ``error``. None when that error came out of it; else the ✗ that says it was swallowed (a Verdict is
    falsy when it refuses: compare with None). What must hold after the error, such as no hook left behind, each
    exercise checks in its own words.

    Usage: ``lets_the_error_through(lambda: int("x"), ValueError)`` (None: the error came out)
    """
    try:
        run()
    except error:
        return None
    return Verdict(False, _("When the model raises, your function must let the error through (not swallow it)."))
