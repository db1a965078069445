"""What an exercise is, and the kit its check is written with: ``Exercise``, ``Verdict``, scenarios and mistakes.

An exercise module (``course_utils/machinery/exercises/nbNN.py``) exports ``EXERCISES``, a tuple of :class:`Exercise`;
``course_utils.machinery.exercises.catalogue()`` collects them and ``course_utils.machinery.checks.check`` runs them.
A check runs the learner's answer on scenarios the notebook never showed and says what is wrong, never the answer:
it calls :func:`fail` (or :func:`require`) with a message, and returns ``Verdict(True)`` when every scenario held.
The kit owns what many checks share: seeded tiny models and inputs (:func:`seeded`, :func:`randn`), a model that fails
on purpose (:class:`FailsOnPurpose`) and the error that must get out (:func:`the_error_gets_out`), "no hook left"
(:func:`require_no_hooks`), handles (:func:`removing`), closeness with a named tolerance (:func:`same`), a result's
type and shape (:func:`tensor_result`), the usual mistakes recomputed and named (:func:`name_the_mistake`), and the
hooks a module carries while it runs (:func:`watch_hooks`).

This module imports nothing of the course but its messages and ``course_utils.hooks``: no import cycle, nothing
registered at import time.

Usage::

    from course_utils.machinery.exercise_kit import Exercise, N_, Verdict, fail, randn, require

    def _clamping(hook) -> Verdict:
        grad = randn(1, 3, 5) * 3
        require(torch.equal(hook(grad), grad.clamp(-1, 1)), N_("Values outside [-1, 1] must become -1 or 1."))
        return Verdict(True)

    EXERCISES = (Exercise("01.9", N_("Write a clamping tensor hook."), _clamping, what=N_("a hook(grad)"),
                          hints=(N_("A hook that returns a tensor replaces the gradient."),)),)
"""

from __future__ import annotations

import contextlib
import enum
import inspect
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn

import numpy as np
import torch
import torch.nn as nn

from course_utils.hooks import count_hooks, hook_report
from course_utils.machinery.layout import EXERCISE_ID
from course_utils.machinery.messages import N_, Text, _

__all__ = [
    "ATOL", "Exercise", "ExerciseKind", "FailedOnPurpose", "FailsOnPurpose", "HooksSeen", "N_", "Refusal", "Status", "Text",
    "Verdict", "as_float_tensor", "as_whole_number", "expect_choice", "expect_live_order", "expect_live_value",
    "expect_tensor", "fail", "generator", "hooks_left", "is_handle", "name_the_mistake", "plain", "plain_tensor",
    "randn", "removing", "require", "require_no_hooks", "require_untouched", "same", "seeded", "tensor_result",
    "the_error_gets_out", "type_name", "watch_hooks",
]

ExerciseKind = Literal["write", "predict", "choice"]
_KINDS = ("write", "predict", "choice")
ATOL = 1e-5  # the closeness of a learner's numbers to the check's own, unless an exercise names another


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


class Refusal(Exception):
    """Raised by :func:`fail` in a check; :meth:`Exercise.judge` turns it into ``Verdict(False, text)``."""

    def __init__(self, text: Text | str) -> None:
        super().__init__(str(text))
        self.text = text


def fail(message: str, **fields: Any) -> NoReturn:
    """Stop the check with a ✗: ``message`` (marked with ``N_()``) with ``fields``, in the learner's language when shown.

    Usage: ``fail(N_("Expected {count} hooks, found {found}."), count=2, found=hooks_left(model))``"""
    raise Refusal(Text(message, **fields))


def require(condition: Any, message: str, **fields: Any) -> None:
    """:func:`fail` with ``message`` unless ``condition`` holds.

    Usage: ``require(handle is not None, N_("Return the handle."))``"""
    if not condition:
        fail(message, **fields)


@dataclass(frozen=True)
class Exercise:
    """One exercise.

    - ``id``: ``"NN.k"`` (:data:`~course_utils.machinery.layout.EXERCISE_ID`: the notebook's number, then the
      exercise's);
    - ``task``: one line saying what to write or answer (``task``, ``what``, ``hints`` and ``praise`` are marked with
      ``N_()`` and shown in the learner's language by ``check()`` and ``hint()``);
    - ``validate``: ``answer -> Verdict``; it runs the learner's code on scenarios the learner did not see, and may
      stop with :func:`fail` / :func:`require`;
    - ``what``: for an answer that is a function or class, what was expected (``N_("a function f(model, x)")``): any
      other answer gets "Expected {what}, got {type}." before ``validate`` runs;
    - ``hints``: shown one by one by ``hint(id)``, from a nudge to the idea (never the code);
    - ``kind``: ``"write"`` (the learner writes code that registers, implements or removes a hook),
      ``"predict"`` (predict, then the validator runs the case live) or ``"choice"``;
    - ``stretch``: the notebook's harder, optional exercise;
    - ``praise``: what the ✓ line adds;
    - ``time_limit_s``: how long ``check()`` lets the answer run before it stops it (an endless loop);
    - ``watch_hooks``: ``check()`` watches what the hooks the answer registers return
      (:mod:`course_utils.machinery.hook_watch`); off where ``torch.compile`` traces the learner's hooks;
    - ``observe_only``: the exercise's module hooks only record, so any value a forward hook or pre-hook returns is
      a ✗ (it replaced the layer's output or input).
    """

    id: str
    task: str
    validate: Callable[[Any], Verdict]
    what: str | None = None
    hints: tuple[str, ...] = field(default=())
    kind: ExerciseKind = "write"
    stretch: bool = False
    praise: str = ""
    time_limit_s: float = 60.0
    watch_hooks: bool = True
    observe_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not re.fullmatch(EXERCISE_ID, self.id):
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

    def judge(self, answer: Any) -> Verdict:
        """Run the check on ``answer``: its verdict, or the ✗ of the :func:`fail` that stopped it."""
        if self.what is not None and not callable(answer):
            return Verdict(False, Text(N_("Expected {what}, got {type}."), what=Text(self.what),
                                       type=type_name(answer)))
        try:
            return self.validate(answer)
        except Refusal as refusal:
            return Verdict(False, refusal.text)


# -- answers as plain Python and torch values -----------------------------------------------------------------
def type_name(value: Any) -> str:
    """``"None"`` or the name of ``value``'s type, as messages show it."""
    return "None" if value is None else type(value).__name__


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
    for kind, cast in ((int, int.__int__), (float, float.__float__), (str, str.__str__)):
        if isinstance(value, kind):
            return cast(value)
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


def as_float_tensor(answer: Any) -> torch.Tensor:
    """A learner's numbers (a tensor, a number, a list, a numpy array) as a float32 CPU tensor; :func:`fail` when
    they are none of these.

    Usage: ``value = as_float_tensor(answer)``"""
    if answer is None:
        fail(N_("You passed None: is that .grad still empty, or did the hook not run?"))
    if isinstance(answer, np.ndarray):
        require(answer.dtype.kind in "biuf", N_("Expected numbers; got a numpy array of {dtype}."), dtype=answer.dtype)
        answer = torch.from_numpy(np.array(answer, dtype=np.float32))
    try:
        answer = plain(answer)
    except TypeError as error:
        fail(N_("Expected plain numbers or a plain tensor: {error}."), error=error)
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return torch.tensor(float(answer))
    if isinstance(answer, (list, tuple)):
        try:
            return torch.tensor(answer, dtype=torch.float32)
        except (TypeError, ValueError, RuntimeError):
            fail(N_("Expected numbers (a tensor, a number or a list of numbers)."))
    require(isinstance(answer, torch.Tensor), N_("Expected a torch.Tensor (or a number or list), got {type}."),
            type=type_name(answer))
    require(not answer.is_complex(), N_("Expected real numbers, got a tensor of {dtype}."), dtype=answer.dtype)
    return answer.detach().to(torch.float32).cpu()


# -- validators of predictions and choices ---------------------------------------------------------------------
def expect_tensor(expected: Sequence[float] | float | torch.Tensor, hint: str, *, atol: float = 1e-4
                  ) -> Callable[[Any], Verdict]:
    """Validator: a tensor (or number/list) equal to ``expected`` within ``atol``. ``hint`` (marked with ``N_()``) is
    shown in the learner's language."""
    return expect_live_value(lambda: torch.as_tensor(expected, dtype=torch.float32), hint, atol=atol)


def expect_live_value(compute: Callable[[], torch.Tensor], hint: str, *, atol: float = 1e-4
                      ) -> Callable[[Any], Verdict]:
    """Validator for a prediction: numbers equal (within ``atol``) to what ``compute()`` gets from a live run."""

    def validate(answer: Any) -> Verdict:
        try:
            value = as_float_tensor(answer)
        except Refusal as refusal:
            return Verdict(False, f"{refusal.text} {_(hint)}".strip() if answer is None else refusal.text)
        target = torch.as_tensor(compute(), dtype=torch.float32).detach()
        if value.shape != target.shape:
            if value.numel() != target.numel():
                return Verdict(False, _("Expected shape {expected}, got {got}. {hint}").format(
                    expected=tuple(target.shape), got=tuple(value.shape), hint=_(hint)))
            value = value.reshape(target.shape)
        return Verdict(True) if torch.allclose(value, target, atol=atol, rtol=0) else Verdict(False, _(hint))

    return validate


def expect_choice(expected: str, options: Sequence[str], hint: str) -> Callable[[Any], Verdict]:
    """Validator: one of ``options`` (case- and space-insensitive), equal to ``expected``."""
    normalised = {" ".join(o.lower().split()): o for o in options}
    if expected not in options:
        raise ValueError(f"The expected answer {expected!r} is not among the options {list(options)}.")

    def validate(answer: Any) -> Verdict:
        if not isinstance(answer, str):
            return Verdict(False, _("Answer with one of the strings {options}, got {type}.").format(
                options=list(options), type=type_name(answer)))
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
            return Verdict(False, _("Answer with a list of strings, got {type}.").format(type=type_name(answer)))
        answer, truth = plain(answer), record()
        if sorted(answer) != sorted(truth):
            return Verdict(False, _("Use exactly these {count} entries, each once: {entries}.").format(
                count=len(truth), entries=sorted(truth)))
        if list(answer) == truth:
            return Verdict(True)
        return Verdict(False, _("Not the order PyTorch uses. {hint}").format(hint=_(hint)))

    return validate


# -- scenarios: seeded models and inputs, a model that fails on purpose ------------------------------------------
def generator(seed: int) -> torch.Generator:
    """A CPU random generator seeded with ``seed``: a check's numbers never depend on the learner's random state."""
    return torch.Generator().manual_seed(seed)


def randn(seed: int | torch.Generator, *shape: int) -> torch.Tensor:
    """Normal random numbers of ``shape`` from ``seed`` (or from a :func:`generator`, which moves on).

    Usage: ``x = randn(3, 4, 5)``"""
    return torch.randn(*shape, generator=generator(seed) if isinstance(seed, int) else seed)


def seeded(module: nn.Module, seed: int, scale: float = 0.5, *, matrices_only: bool = False) -> nn.Module:
    """``module`` with every parameter (``matrices_only``: every one with two or more dimensions) drawn from
    ``seed``, times ``scale`` (divided by the square root of its last dimension when ``matrices_only``), in eval
    mode: a tiny model larger than PyTorch's default initialisation, so that every part of it matters.

    Usage: ``model = seeded(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), 61)``"""
    draw = generator(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            if matrices_only and parameter.dim() < 2:
                continue
            values = torch.randn(parameter.shape, generator=draw) * scale
            parameter.copy_(values / parameter.shape[-1] ** 0.5 if matrices_only else values)
    return module.eval()


class FailedOnPurpose(ValueError, RuntimeError):
    """What :class:`FailsOnPurpose` raises: a ValueError and a RuntimeError, so that an answer that passes the
    model's error on, whatever it catches and re-raises, lets it through."""


class FailsOnPurpose(nn.Module):
    """A layer whose forward always raises :class:`FailedOnPurpose`: put it in a model to try an answer's unhappy
    path (its hooks must go, the error must get out).

    Usage: ``failing = nn.Sequential(nn.Linear(3, 3), FailsOnPurpose())``"""

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise FailedOnPurpose("this layer fails on purpose")


_SWALLOWED = N_("When the model raises, your function must let the error through (not swallow it).")


def the_error_gets_out(run: Callable[[], Any], message: str = _SWALLOWED, error: type[BaseException] = FailedOnPurpose,
                       **fields: Any) -> None:
    """The unhappy path: ``run`` calls the learner's code on a model that fails; :func:`fail` with ``message`` unless
    ``error`` came out of it. What must hold afterwards (no hook left, say) each exercise checks in its own words.

    Usage: ``the_error_gets_out(lambda: answer(nn.Sequential(FailsOnPurpose()), x))``"""
    try:
        run()
    except error:
        return
    fail(message, **fields)


# -- what the answer left behind ----------------------------------------------------------------------------------
def hooks_left(target: nn.Module | torch.Tensor) -> list[str]:
    """Where hooks are registered on ``target`` and its children (``["2._forward_hooks"]``), sorted."""
    return sorted(hook_report(target))


def require_no_hooks(target: nn.Module | torch.Tensor, message: str, **fields: Any) -> None:
    """:func:`fail` with ``message`` (which may name ``{where}``, the first hook left, and ``{count}``) when a hook is
    left on ``target``."""
    left = hooks_left(target)
    require(not left, message, where=left[0] if left else "", count=count_hooks(target), **fields)


def require_untouched(tensor: torch.Tensor, before: torch.Tensor, message: str) -> None:
    """:func:`fail` with ``message`` when the caller's ``tensor`` changed: its values, ``requires_grad`` or ``.grad``
    (``before``: a clone taken before the answer ran)."""
    require(torch.equal(tensor, before) and not tensor.requires_grad and tensor.grad is None, message)


def is_handle(value: Any) -> bool:
    """True for what a ``register_*`` method returns (anything with a ``remove()``)."""
    return callable(getattr(value, "remove", None))


@contextlib.contextmanager
def removing(*returned: Any) -> Iterator[None]:
    """Remove, on the way out of the block (also on a ✗ or an error), every handle among ``returned`` (handles or
    lists of handles an answer returned; anything else is passed over).

    Usage: ``with removing(handle): model(x)``"""
    try:
        yield
    finally:
        for value in returned:
            for handle in value if isinstance(value, (list, tuple)) else [value]:
                if is_handle(handle):
                    handle.remove()


# -- results and mistakes -----------------------------------------------------------------------------------------
def same(value: Any, expected: torch.Tensor, atol: float = ATOL) -> bool:
    """True when ``value`` is a tensor of ``expected``'s shape whose numbers are close to it (``torch.allclose`` with
    ``atol``; never raises: a wrong type or shape is just not the same)."""
    return (isinstance(value, torch.Tensor) and value.shape == expected.shape
            and bool(torch.allclose(value.detach().float(), expected.detach().float(), atol=atol)))


def tensor_result(result: Any, shape: tuple[int, ...], what: str | Text, *, floating: bool = True) -> torch.Tensor:
    """The answer's ``result`` as a plain tensor of ``shape`` (``floating``: of float32 numbers); :func:`fail` naming
    ``what`` when it is not a tensor, has another shape or holds integers where numbers are asked."""
    require(isinstance(result, torch.Tensor), N_("Return {what} as a tensor of shape {shape}, got {type}."),
            what=what, shape=shape, type=type_name(result))
    require(tuple(result.shape) == shape, N_("Expected {what} of shape {shape}, got {got}."), what=what, shape=shape,
            got=tuple(result.shape))
    require(not floating or result.is_floating_point(),
            N_("Expected {what} as floating-point numbers, got a tensor of {dtype}: did an integer tensor (or .long(), "
               ".int(), a comparison) slip into your computation?"), what=what, dtype=result.dtype)
    try:
        return plain_tensor(result).detach().float() if floating else plain_tensor(result).detach()
    except TypeError as error:
        fail(N_("Return {what} as a plain tensor: {error}."), what=what, error=error)


Mistake = tuple[Any, str]  # (the value the mistake gives, or a function computing it; the message that names it)


def name_the_mistake(result: Any, mistakes: Iterable[Mistake], compare: Callable[[Any, Any], bool] = same,
                     **fields: Any) -> None:
    """:func:`fail` with the message of the first of ``mistakes`` whose value ``result`` matches (``compare``); a
    value given as a function is computed only when its turn comes. ``fields`` fill in every message.

    Usage: ``name_the_mistake(answer, [(truth * 2, N_("Your values are twice too large."))])``"""
    for value, message in mistakes:
        if compare(result, value() if callable(value) else value):
            fail(message, **fields)


# -- the hooks a module carries while it runs --------------------------------------------------------------------
_COURSE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # course_utils/


@dataclass
class HooksSeen:
    """What :func:`watch_hooks` saw: ``runs``, one list per run of the module of where hooks were registered on it
    and its children (``"2._forward_hooks"``); ``kinds``, the module's own hook dictionaries at its first run (name
    -> how many); ``from_the_course``, which of those are the course's own functions (an answer that called a
    finished helper of the course where the exercise asks for the hooks)."""

    runs: list[list[str]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    from_the_course: list[str] = field(default_factory=list)


@contextlib.contextmanager
def watch_hooks(module: nn.Module) -> Iterator[HooksSeen]:
    """Note which hooks ``module`` carries each time it runs inside the block -- the learner's, registered by the
    answer the block calls. The probe (a forward pre-hook, run first) is gone after the block.

    Usage: ``with watch_hooks(model[2]) as seen: answer(model, "2", x)`` then ``seen.kinds``, ``seen.runs``"""
    seen = HooksSeen()

    def probe(observed: nn.Module, args: Any) -> None:
        seen.runs.append(sorted(name for name, count in hook_report(observed).items()
                                if count > (name == "_forward_pre_hooks")))
        if len(seen.runs) > 1:
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

