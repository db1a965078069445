"""What an exercise is, and validators to build its check from: ``Exercise``, ``Verdict``, ``expect_*``.

An exercise module (``course_utils/machinery/exercises/nbNN.py``) exports ``EXERCISES``, a tuple of :class:`Exercise`;
``course_utils.machinery.exercises.catalogue()`` collects them and ``course_utils.machinery.checks.check`` runs them. This module
imports neither, so there is no import cycle and nothing is registered at import time.

Usage::

    from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable

    def _test_clamp(hook) -> Verdict:
        ...  # run the learner's hook on fresh cases, return Verdict(True) or Verdict(False, "a hint")

    EXERCISES = (Exercise("01.2", "Write a clamping tensor hook.", expect_callable(_test_clamp, "a hook(grad)"),
                          hints=("A hook that returns a tensor replaces the gradient.",), kind="write"),)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from course_utils.machinery.messages import _
from course_utils.machinery.sandbox import is_learner_frame

__all__ = [
    "Exercise",
    "ExerciseKind",
    "ReferenceRefused",
    "Verdict",
    "as_whole_number",
    "plain",
    "plain_tensor",
    "only_inside_a_check",
    "expect_callable",
    "expect_choice",
    "expect_live_order",
    "expect_live_value",
    "expect_tensor",
]

ExerciseKind = Literal["write", "predict", "choice"]
_KINDS = ("write", "predict", "choice")
_ID = re.compile(r"\d\d\.\d+")


@dataclass(frozen=True)
class Verdict:
    """The outcome of a validator: passed or not, and what to tell the learner."""

    ok: bool
    message: str = ""

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
    - ``blocked``: dotted names of course helpers that would do the exercise for the learner
      (``"course_utils.saliency.grad_cam"``): ``check()`` switches them off while the answer runs;
    - ``time_limit_s``: how long ``check()`` lets the answer run before it stops it (an endless loop).
    """

    id: str
    task: str
    validate: Callable[[Any], Verdict]
    hints: tuple[str, ...] = field(default=())
    kind: ExerciseKind = "write"
    stretch: bool = False
    praise: str = ""
    blocked: tuple[str, ...] = ()
    time_limit_s: float = 60.0

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


# -- the course's own answers: for check() only ----------------------------------------------------------------
class ReferenceRefused(RuntimeError):
    """The learner's code called a function that computes an exercise's ground truth."""


def only_inside_a_check(exercise_id: str) -> None:
    """Refuse to go on when learner code called the caller (a function that computes the ground truth of
    ``exercise_id``): directly, from a notebook cell, or from inside an answer that check() is running. The course
    calls it from the check itself (and from its own processes), where no learner frame lies in between.

    Usage: first line of a ground-truth function, ``only_inside_a_check("02.2")``."""
    frame = sys._getframe(2)  # whoever called the ground-truth function
    name = sys._getframe(1).f_code.co_name
    while frame is not None:
        if frame.f_globals.get("__name__") == "course_utils.machinery.checks":
            return  # reached check() with no learner frame in between: the check itself asked
        if is_learner_frame(frame):
            raise ReferenceRefused(
                _("{name} computes the course's own answer to exercise {id}, so only check() may run it: "
                  "write (or predict) the answer yourself.").format(name=name, id=exercise_id))
        frame = frame.f_back


# -- answers as plain Python and torch values -----------------------------------------------------------------
def plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """A plain ``torch.Tensor`` holding ``value``'s numbers: a subclass (one whose ``__torch_function__`` could
    answer ``allclose`` with True) loses its behaviour; a plain tensor or Parameter comes back as it is. Raises
    ``TypeError`` when no plain tensor can be made (a wrapper subclass that keeps its type)."""
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return value
    with torch._C.DisableTorchFunctionSubclass():
        copy = value.detach().clone()
    if type(copy) is not torch.Tensor:
        raise TypeError(_("a {type} (a torch.Tensor subclass) cannot be compared: pass a plain tensor").format(
            type=type(value).__name__))
    return copy


def plain(value: Any, _depth: int = 0) -> Any:
    """``value`` with every str, number, list, tuple, dict and tensor replaced by its plain type (a ``str``
    subclass whose ``__eq__`` always says True becomes a ``str``; numpy scalars become Python numbers); anything else
    (functions, classes, modules) is returned unchanged.

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
