"""Self-checks for the exercises: ``check("01.2", answer)`` prints ✓ or a hint, never the solution.

The expected answers live in ``course_utils.exercises`` (one module per notebook). Each exercise has a
validator that first checks the answer's type (a wrong type gets a message naming what is expected) and
then its value. An unknown exercise id raises ``KeyError`` with the closest valid ids.

Usage::

    from course_utils.checks import check
    check("01.1", x.grad)      # ✓ Exercise 01.1: correct ...   or   ✗ Exercise 01.1: not yet. Hint: ...
"""

from __future__ import annotations

import difflib
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

__all__ = ["Exercise", "Verdict", "check", "exercise", "register", "all_exercises", "expect_live_order"]


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
    """An exercise: id (``"NN.k"``), a one-line task, and a validator ``answer -> Verdict``."""

    id: str
    task: str
    validate: Callable[[Any], Verdict]
    praise: str = ""


_EXERCISES: dict[str, Exercise] = {}


def register(item: Exercise) -> Exercise:
    """Add an exercise to the catalogue (ids are unique)."""
    if item.id in _EXERCISES:
        raise ValueError(f"Exercise id {item.id!r} is registered twice.")
    _EXERCISES[item.id] = item
    return item


def all_exercises() -> dict[str, Exercise]:
    """Every registered exercise by id."""
    _load_catalogue()
    return dict(_EXERCISES)


def exercise(exercise_id: str) -> Exercise:
    """Look an exercise up by id; an unknown id raises ``KeyError`` naming the closest ids."""
    if not isinstance(exercise_id, str):
        raise TypeError(f"Exercise ids are strings like '01.2'; got {type(exercise_id).__name__}.")
    catalogue = all_exercises()
    if exercise_id not in catalogue:
        close = difflib.get_close_matches(exercise_id, list(catalogue), n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise KeyError(
            f"There is no exercise {exercise_id!r}.{hint} The id is printed above each exercise (e.g. '01.2')."
        )
    return catalogue[exercise_id]


def check(exercise_id: str, answer: Any) -> Verdict:
    """Check ``answer`` for an exercise, print ✓ or a hint, and return the verdict (truthy when it passed).

    Usage: ``check("01.1", x.grad)``
    """
    item = exercise(exercise_id)
    try:
        verdict = item.validate(answer)
    except Exception as error:  # the learner's code (e.g. a hook) failed inside the check: report it
        frames = traceback.extract_tb(error.__traceback__)
        where = f" (line {frames[-1].lineno} of {frames[-1].name})" if frames else ""
        verdict = Verdict(False, f"your code raised {type(error).__name__}: {error}{where}")
    if verdict.ok:
        print(f"✓ Exercise {item.id}: correct. {verdict.message or item.praise}".rstrip())
    else:
        print(f"✗ Exercise {item.id}: not yet. {verdict.message}".rstrip())
    return verdict


def _load_catalogue() -> None:
    from course_utils import exercises  # noqa: F401  (importing registers every exercise)


# -- validators, composable ----------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def expect_tensor(expected: Sequence[float] | float | torch.Tensor, hint: str, *, atol: float = 1e-4) -> Callable[[Any], Verdict]:
    """Validator: a tensor (or number/list) equal to ``expected`` within ``atol``."""
    target = torch.as_tensor(expected, dtype=torch.float32)

    def validate(answer: Any) -> Verdict:
        if answer is None:
            return Verdict(False, "You passed None: is that .grad still empty, or did the hook not run? " + hint)
        if isinstance(answer, (int, float)) and not isinstance(answer, bool):
            answer = torch.tensor(float(answer))
        elif isinstance(answer, (list, tuple)):
            try:
                answer = torch.tensor(answer, dtype=torch.float32)
            except (TypeError, ValueError):
                return Verdict(False, "Expected numbers (a tensor, a number or a list of numbers).")
        if not isinstance(answer, torch.Tensor):
            return Verdict(False, f"Expected a torch.Tensor (or a number or list), got {_type_name(answer)}.")
        value = answer.detach().to(torch.float32).cpu()
        if value.shape != target.shape:
            if value.numel() == target.numel():
                value = value.reshape(target.shape)
            else:
                return Verdict(False, f"Expected shape {tuple(target.shape)}, got {tuple(value.shape)}. {hint}")
        if torch.allclose(value, target, atol=atol, rtol=0):
            return Verdict(True)
        return Verdict(False, hint)

    return validate


def expect_choice(expected: str, options: Sequence[str], hint: str) -> Callable[[Any], Verdict]:
    """Validator: one of ``options`` (case- and space-insensitive), equal to ``expected``."""
    normalised = {" ".join(o.lower().split()): o for o in options}

    def validate(answer: Any) -> Verdict:
        if not isinstance(answer, str):
            return Verdict(False, f"Answer with one of the strings {list(options)}, got {_type_name(answer)}.")
        key = " ".join(answer.lower().split())
        if key not in normalised:
            return Verdict(False, f"{answer!r} is not one of the options {list(options)}.")
        return Verdict(normalised[key] == expected, "" if normalised[key] == expected else hint)

    return validate


def expect_live_order(record: Callable[[], list[str]], hint: str) -> Callable[[Any], Verdict]:
    """Validator: a list of strings in exactly the order ``record()`` observes in a live run (e.g. hook firings)."""

    def validate(answer: Any) -> Verdict:
        if not isinstance(answer, (list, tuple)) or not all(isinstance(item, str) for item in answer):
            return Verdict(False, f"Answer with a list of strings, got {_type_name(answer)}.")
        truth = record()
        if sorted(answer) != sorted(truth):
            return Verdict(False, f"Use exactly these {len(truth)} entries, each once: {sorted(truth)}.")
        if list(answer) == truth:
            return Verdict(True)
        return Verdict(False, f"Not the order PyTorch uses. {hint}")

    return validate


def expect_callable(test: Callable[[Callable[..., Any]], Verdict], what: str) -> Callable[[Any], Verdict]:
    """Validator: a function, which ``test`` exercises on fresh inputs and judges."""

    def validate(answer: Any) -> Verdict:
        if not callable(answer):
            return Verdict(False, f"Expected {what} (a function), got {_type_name(answer)}.")
        return test(answer)

    return validate
