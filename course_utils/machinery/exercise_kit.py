"""What an exercise is, and the kit its check is written with (CONTRIBUTING.md, "Add or change an exercise").

A module ``exercises/nbNN.py`` starts ``from course_utils.machinery.exercise_kit import *`` (the kit's ``__all__``:
the words checks are written in) and exports ``EXERCISES``. A check runs the learner's answer on scenarios the
notebook never showed, stops at the first thing wrong with :func:`fail` / :func:`require`, and returns
``Verdict(True)``; :func:`exercise` declares it with its table in the ``exercises/nbNN.toml`` beside the module: the
exercise's texts and settings (``task``, ``what``, ``hints``, ``praise``, ...), such as::

    ["01.1"]
    task = "Write a tensor hook clamp_hook(grad) that limits the gradient to [-1, 1]."
    what = "a hook function clamp_hook(grad)"
    hints = [
      "A tensor hook that returns a tensor replaces the gradient; one that returns None changes nothing.",
    ]

Usage (in ``exercises/nb01.py``)::

    @exercise("01.1")
    def clamping(hook) -> Verdict:
        grad = randn(1, 3, 5) * 3
        require(torch.equal(hook(grad), grad.clamp(-1, 1)), N_("Values outside [-1, 1] must become -1 or 1."))
        return Verdict(True)

    EXERCISES = (clamping,)
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import inspect
import os
import re
import reprlib
import tomllib
from collections.abc import Callable, Iterable, Iterator, MutableSequence, MutableSet, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal, NoReturn, TypeVar, get_args

import numpy as np
import torch
import torch.nn as nn

from course_utils.hooks import count_hooks, hook_report
from course_utils.machinery.layout import EXERCISE_ID
from course_utils.machinery.messages import N_, Text, _

__all__ = [
    "ATOL", "Exercise", "FailedOnPurpose", "FailsOnPurpose", "N_", "Net", "Refusal", "Status", "Text", "Verdict",
    "as_float_tensor", "as_whole_number", "count_hooks", "exercise", "expect_choice", "expect_live_value",
    "expect_tensor", "fail", "generator", "hook_report", "hooks_left", "is_handle", "name_the_mistake", "plain",
    "randn", "removing", "require", "require_handle", "require_no_hooks", "require_untouched", "same", "seeded",
    "tensor_result", "the_error_gets_out", "type_name", "watch_hooks",
]

ExerciseKind = Literal["write", "predict", "choice"]
_KINDS = get_args(ExerciseKind)
ATOL = 1e-5  # the closeness of a learner's numbers to the check's own, unless an exercise names another
EXERCISE_PACKAGE = "course_utils.machinery.exercises"  # its nbNN.toml hold the texts and settings of its exercises
TEXT_FIELDS = ("task", "what", "hints", "praise")  # what an exercise shows the learner: messages to translate


class Status(enum.Enum):
    """What a check decided, where it decided it."""

    PASSED = "passed"
    FAILED = "failed"  # the answer is wrong (the message says how)
    STUB = "still the stub"  # the learner has not written the answer yet: nothing to record
    COURSE_BUG = "course bug"  # the check itself failed
    TIMED_OUT = "timed out"  # the answer ran past the exercise's time limit


@dataclass(frozen=True, init=False)
class Verdict:
    """Passed or not, and what to tell the learner (a str, or a :class:`Text` translated when read or printed).

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
    """Raised by :func:`fail`; :meth:`Exercise.judge` turns it into ``Verdict(False, text)``."""

    def __init__(self, text: Text | str) -> None:
        super().__init__(str(text))
        self.text = text


def fail(message: str, **fields: Any) -> NoReturn:
    """Stop the check with a ✗: ``message`` (marked with ``N_()``) with ``fields``, translated when shown.

    Usage: ``fail(N_("Expected {count} hooks, found {found}."), count=2, found=hooks_left(model))``"""
    raise Refusal(Text(message, **fields))


def require(condition: Any, message: str, **fields: Any) -> None:
    """:func:`fail` with ``message`` unless ``condition`` holds.

    Usage: ``require(handle is not None, N_("Return the handle."))``"""
    if not condition:
        fail(message, **fields)


@dataclass(frozen=True)
class Exercise:
    """One exercise: ``id`` (:data:`~course_utils.machinery.layout.EXERCISE_ID`), a one-line ``task``, ``validate``
    (``answer -> Verdict``), ``what`` (for a function or class answer: anything else gets "Expected {what}, got
    {type}."), ``hints`` (shown one by one by ``hint(id)``), ``kind``, ``stretch`` (the notebook's harder, optional
    one), ``praise`` (what the ✓ line adds), ``time_limit_s``, ``watch_hooks`` (``check()`` watches what the answer's
    hooks return; off where ``torch.compile`` traces them) and ``observe_only`` (the module hooks only record: a
    value a forward hook or pre-hook returns is a ✗). :func:`exercise` reads all but ``id`` and ``validate`` from the
    exercise's table in ``exercises/nbNN.toml``; the texts (:data:`TEXT_FIELDS`) are messages, shown translated."""

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
        _require_id(self.id)
        if self.kind not in _KINDS:
            raise ValueError(f"Exercise {self.id}: kind must be one of {_KINDS}, got {self.kind!r}.")
        if not self.task.strip():
            raise ValueError(f'Exercise {self.id}: write a one-line task (task = "..." in its table of '
                             f"exercises/nb{self.notebook}.toml).")
        if isinstance(self.hints, str):
            raise TypeError(f"Exercise {self.id}: hints is a tuple of strings, e.g. hints=('first', 'second').")

    @property
    def notebook(self) -> str:
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


def _require_id(exercise_id: Any) -> None:
    if not isinstance(exercise_id, str) or not re.fullmatch(EXERCISE_ID, exercise_id):
        raise ValueError(f"Exercise ids look like '01.2' (notebook, then number); got {exercise_id!r}.")


def exercise(id: str) -> Callable[[Callable[[Any], Verdict]], Exercise]:
    """Declare the check below it as :class:`Exercise` ``id``, with the fields of its table in
    ``exercises/nbNN.toml`` (:func:`declared`); a decorator. Usage: ``clamping = exercise("01.1")(validator)``"""
    return lambda validate: Exercise(id=id, validate=validate, **declared(id))


def declared(exercise_id: str) -> dict[str, Any]:
    """The fields of exercise ``exercise_id`` but its id and check: its table in ``exercises/nbNN.toml``."""
    _require_id(exercise_id)
    notebook = exercise_id.split(".")[0]
    table = exercise_tables(EXERCISE_PACKAGE, notebook).get(exercise_id)
    if table is None:
        raise LookupError(f'exercises/nb{notebook}.toml has no table ["{exercise_id}"] for the @exercise("'
                          f'{exercise_id}") of nb{notebook}.py: add one with its task, what, hints and praise '
                          '(CONTRIBUTING.md, "Add or change an exercise")')
    return {"task": "", **{name: tuple(value) if name == "hints" else value for name, value in table.items()}}


@functools.cache
def exercise_tables(package: str, notebook: str) -> dict[str, dict[str, Any]]:
    """The tables of ``nb{notebook}.toml`` in ``package`` by exercise id (none when there is no such file); a table
    that is not an exercise's is a ``ValueError`` that says what to fix."""
    where = f"exercises/nb{notebook}.toml"
    try:
        tables = tomllib.loads((resources.files(package) / f"nb{notebook}.toml").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as error:
        raise ValueError(f"{where} is not valid TOML: {error}") from None
    defaults = {item.name: item.default for item in dataclasses.fields(Exercise) if item.name not in ("id", "validate")}
    for exercise_id, table in tables.items():
        if not isinstance(table, dict):
            raise ValueError(f'{where}: {exercise_id} is not an exercise\'s table: write ["{exercise_id}"] on a line '
                             "of its own above the exercise's fields")
        if unknown := sorted(set(table) - set(defaults)):
            raise ValueError(f'{where}, ["{exercise_id}"]: an exercise has no field {", ".join(unknown)} (a typo?); '
                             f"its fields are {', '.join(defaults)}")
        for name, value in table.items():
            expected = str if defaults[name] in (None, dataclasses.MISSING) else type(defaults[name])
            if not _fits(value, expected):
                raise ValueError(f'{where}, ["{exercise_id}"]: {name} = {value!r} is not {_IN_TOML[expected]}')
    return tables


_IN_TOML = {str: 'a string ("...")', bool: "true or false", float: "a number",
            tuple: 'a list of strings (["first", "second"])'}


def _fits(value: Any, expected: type) -> bool:
    """Whether a TOML value can be a field whose default has the type ``expected`` (a tuple: a list of strings)."""
    if expected is tuple:
        return isinstance(value, list) and all(isinstance(text, str) for text in value)
    if expected is float:
        return type(value) in (int, float)
    return isinstance(value, expected)


# -- answers as plain Python and torch values -----------------------------------------------------------------
def type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def plain_tensor(value: torch.Tensor) -> torch.Tensor:
    """``value`` as a plain tensor (a subclass's numbers copied); ``TypeError`` when it holds none of its own."""
    if type(value) in (torch.Tensor, torch.nn.Parameter):
        return value
    try:
        return value.as_subclass(torch.Tensor).detach().clone()
    except (RuntimeError, TypeError) as error:
        raise TypeError(_("a {type} (a torch.Tensor subclass) cannot be compared: pass a plain tensor").format(
            type=type(value).__name__)) from error


def plain(value: Any, _depth: int = 0) -> Any:
    """``value`` with every str, number, list, tuple, dict and tensor (nested) made its plain type, so that a subclass
    cannot cheat a comparison; anything else comes back unchanged. Usage: ``answer = plain(answer)``"""
    if _depth > 20:
        raise TypeError(_("the answer is nested too deeply"))
    if isinstance(value, bool) or value is None:  # bool cannot be subclassed
        return value
    if isinstance(value, np.generic):
        return value.item()
    # the base type's own method, never one a subclass overrides
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
    """``value`` as an int when it is a whole number (``3``, ``3.0``, ``np.int64(3)``), else None (``True`` too)."""
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


def as_float_tensor(answer: Any, *, form: str = "") -> torch.Tensor:
    """A learner's numbers (tensor, number, list, numpy array) as a float32 CPU tensor; :func:`fail` otherwise: with
    ``form`` where given (marked with ``N_()``: what form a prediction's answer takes, never the answer itself;
    ``{answer}`` filled with the learner's), else with the kit's message about the answer's type."""
    if form:
        try:
            return as_float_tensor(answer)
        except Refusal:
            fail(form, answer=reprlib.repr(answer))
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
def expect_tensor(expected: Sequence[float] | float | torch.Tensor, hint: str, *, atol: float = 1e-4,
                  form: str = "") -> Callable[[Any], Verdict]:
    """Validator: numbers equal to ``expected`` within ``atol``; else the ✗ ``hint`` (marked with ``N_()``)."""
    return expect_live_value(lambda: torch.as_tensor(expected, dtype=torch.float32), hint, atol=atol, form=form)


def expect_live_value(compute: Callable[[], torch.Tensor], hint: str, *, atol: float = 1e-4, form: str = ""
                      ) -> Callable[[Any], Verdict]:
    """Validator: numbers equal (within ``atol``) to what ``compute()`` gets from a live run. An answer that is not
    numbers (None, a string) gets the ✗ ``form`` (see :func:`as_float_tensor`), or without one the kit's message
    about its type."""

    def validate(answer: Any) -> Verdict:
        try:
            value = as_float_tensor(answer, form=form)
        except Refusal as refusal:
            if answer is None and not form:
                return Verdict(False, f"{refusal.text} {_(hint)}".strip())
            return Verdict(False, refusal.text)
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


# -- scenarios: seeded models and inputs, a model that fails on purpose ------------------------------------------
def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def randn(seed: int | torch.Generator, *shape: int) -> torch.Tensor:
    """Normal numbers of ``shape`` from ``seed`` (or a :func:`generator`, which moves on). Usage: ``randn(3, 4, 5)``"""
    return torch.randn(*shape, generator=generator(seed) if isinstance(seed, int) else seed)


ModuleT = TypeVar("ModuleT", bound=nn.Module)


def seeded(module: ModuleT, seed: int, scale: float = 0.5, *, matrices_only: bool = False) -> ModuleT:
    """``module`` in eval mode, its parameters (``matrices_only``: those of 2+ dimensions, divided by the root of
    their last dimension) drawn from ``seed`` times ``scale``: larger than the default init, so every part matters.

    Usage: ``model = seeded(nn.Sequential(nn.Linear(3, 4), nn.ReLU()), 61)``"""
    draw = generator(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            if matrices_only and parameter.dim() < 2:
                continue
            values = torch.randn(parameter.shape, generator=draw) * scale
            parameter.copy_(values / parameter.shape[-1] ** 0.5 if matrices_only else values)
    return module.eval()


class Net(nn.Module):
    """A tiny model from its named layers and its forward, a function of (the model, its inputs and options).

    Usage: ``Net(lambda m, x: m.fc(x) + x, fc=nn.Linear(4, 4))``"""

    def __init__(self, forward: Callable[..., Any], **layers: nn.Module) -> None:
        super().__init__()
        self._run = forward
        for name, layer in layers.items():
            self.add_module(name, layer)

    def forward(self, *inputs: Any, **options: Any) -> Any:
        return self._run(self, *inputs, **options)


class FailedOnPurpose(ValueError, RuntimeError):
    """What :class:`FailsOnPurpose` raises: a ValueError and a RuntimeError, whichever an answer re-raises."""


class FailsOnPurpose(nn.Module):
    """A layer whose forward raises (the unhappy path). Usage: ``nn.Sequential(nn.Linear(3, 3), FailsOnPurpose())``"""

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        raise FailedOnPurpose("this layer fails on purpose")


_SWALLOWED = N_("When the model raises, your function must let the error through (not swallow it).")


def the_error_gets_out(run: Callable[[], Any], message: str = _SWALLOWED, error: type[BaseException] = FailedOnPurpose,
                       **fields: Any) -> None:
    """:func:`fail` with ``message`` unless ``run()`` (the answer on a model that fails) lets ``error`` out.

    Usage: ``the_error_gets_out(lambda: answer(nn.Sequential(FailsOnPurpose()), x))``"""
    try:
        run()
    except error:
        return
    fail(message, **fields)


# -- what the answer left behind ----------------------------------------------------------------------------------
def hooks_left(target: nn.Module | torch.Tensor) -> list[str]:
    """Where hooks are on ``target`` and its children (``["2._forward_hooks"]``), sorted."""
    return sorted(hook_report(target))


_LEFT_BEHIND = N_("A hook is left behind ({where}): remove it with its handle, in a finally block or a with block.")


def require_no_hooks(target: nn.Module | torch.Tensor, message: str = _LEFT_BEHIND, *, prefix: str = "",
                     **fields: Any) -> None:
    """:func:`fail` with ``message`` (fields ``{where}``: the first hook left, after ``prefix``; ``{count}``) when
    ``target`` has one."""
    left = hooks_left(target)
    require(not left, message, where=prefix + left[0] if left else "", count=count_hooks(target), **fields)


def require_untouched(tensor: torch.Tensor, before: torch.Tensor, message: str) -> None:
    """:func:`fail` with ``message`` when ``tensor``'s values (``before``: a clone), ``requires_grad`` or ``.grad``
    changed."""
    require(torch.equal(tensor, before) and not tensor.requires_grad and tensor.grad is None, message)


def is_handle(value: Any) -> bool:
    """True for what has a ``remove()`` of its own: a hook handle (a list or a set of them is not one)."""
    return not isinstance(value, (MutableSequence, MutableSet)) and callable(getattr(value, "remove", None))


def require_handle(value: Any, message: str, **fields: Any) -> None:
    """:func:`fail` with ``message`` (field ``{type}``: what came back, ``None`` for None) unless ``value`` is a
    handle. Usage: ``require_handle(handle, N_("Return the handle, not {type}."))``"""
    require(is_handle(value), message, type=type_name(value), **fields)


@contextlib.contextmanager
def removing(*returned: Any) -> Iterator[None]:
    """Remove every handle among ``returned`` (handles or lists of them) on the way out, also on a ✗ or an error.

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
    """True when ``value`` is a tensor of ``expected``'s shape and close to it within ``atol`` (never raises)."""
    return (isinstance(value, torch.Tensor) and value.shape == expected.shape
            and bool(torch.allclose(value.detach().float(), expected.detach().float(), atol=atol)))


def tensor_result(result: Any, shape: tuple[int, ...], what: str | Text, *, floating: bool = True) -> torch.Tensor:
    """``result`` as a plain (``floating``: float32) tensor of ``shape``; :func:`fail` naming ``what`` otherwise."""
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
    """:func:`fail` with the message of the first of ``mistakes`` whose value (or ``value()``, computed in its turn)
    ``result`` matches by ``compare``; ``fields`` fill in every message.

    Usage: ``name_the_mistake(answer, [(truth * 2, N_("Your values are twice too large."))])``"""
    for value, message in mistakes:
        if compare(result, value() if callable(value) else value):
            fail(message, **fields)


# -- the hooks a module carries while it runs --------------------------------------------------------------------
_COURSE_DIR = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # course_utils/


@dataclass
class HooksSeen:
    """What :func:`watch_hooks` saw: per run, where hooks were (``runs``); at the first run, the module's own hook
    dictionaries (``kinds``: name -> count) and which hooks are the course's own functions (``from_the_course``)."""

    runs: list[list[str]] = field(default_factory=list)
    kinds: dict[str, int] = field(default_factory=dict)
    from_the_course: list[str] = field(default_factory=list)


@contextlib.contextmanager
def watch_hooks(module: nn.Module) -> Iterator[HooksSeen]:
    """Note which hooks ``module`` carries each time it runs inside the block (a probe pre-hook, gone after it).

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

