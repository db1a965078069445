"""Exercise checking: ``check("06.1", answer)`` prints ✓ or a hint (never the solution); ``hint("06.1")``.

``check`` runs the exercise's validator on cases the learner has not seen, inside a sandbox that leaves the
learner's session as it found it: the random states of torch, numpy and ``random``, grad mode, anomaly mode,
deterministic-algorithm mode, default dtype, thread count, print options and warning filters are restored.
An error raised in the learner's own code is reported with the learner's line; an error inside the course's
validator is reported as a course bug, with what to send the maintainers.

Usage::

    from course_utils.checks import check, hint
    check("01.1", clamp_hook)   # ✓ Exercise 01.1: correct ...   or   ✗ Exercise 01.1: not yet. <hint>
    hint("01.1")                # the next hint for 01.1
"""

from __future__ import annotations

import contextlib
import difflib
import random
import sysconfig
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from course_utils.blocked_helpers import HelperBlocked, blocked
from course_utils.exercise_kit import Exercise, Verdict
from course_utils.exercises import catalogue

__all__ = ["check", "exercise", "hint", "all_exercises", "preserved_session", "COURSE_BUG_REPORT", "STILL_THE_STUB"]

_PACKAGE_DIR = Path(__file__).resolve().parent
_LIBRARY_DIRS = tuple(
    str(Path(p).resolve()) for p in {sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["purelib"],
                                     sysconfig.get_paths()["platlib"]}
)
COURSE_BUG_REPORT = (
    "This is a bug in the course's check, not in your answer. Please report it to the course's maintainers "
    "(the issue tracker of the repository you got the course from) with the exercise id and this message; "
    "meanwhile compare your code with the complete notebook."
)
STILL_THE_STUB = "your answer is still the stub"  # check()'s verdict on an exercise the learner has not written
_hints_shown: dict[str, int] = {}


def all_exercises() -> dict[str, Exercise]:
    """Every exercise by id."""
    return dict(catalogue())


def exercise(exercise_id: str) -> Exercise:
    """Look an exercise up by id; an unknown id raises ``KeyError`` naming the closest ids."""
    if not isinstance(exercise_id, str):
        raise TypeError(f"Exercise ids are strings like '01.2'; got {type(exercise_id).__name__}.")
    known = catalogue()
    if exercise_id not in known:
        close = difflib.get_close_matches(exercise_id, list(known), n=3, cutoff=0.3)
        suggestion = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise KeyError(
            f"There is no exercise {exercise_id!r}.{suggestion} The id is printed above each exercise (e.g. '01.2')."
        )
    return known[exercise_id]


@contextlib.contextmanager
def preserved_session() -> Iterator[None]:
    """Run a block without changing the caller's global state (random states, modes, threads, print options).

    Usage: ``with preserved_session(): validator(answer)``
    """
    python_state = random.getstate()
    numpy_state = np.random.get_state()
    numpy_print = np.get_printoptions()
    torch_print = {name: getattr(torch._tensor_str.PRINT_OPTS, name)
                   for name in ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")}
    grad_enabled = torch.is_grad_enabled()
    anomaly = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
    deterministic = (torch.are_deterministic_algorithms_enabled(),
                     torch.is_deterministic_algorithms_warn_only_enabled())
    default_dtype = torch.get_default_dtype()
    threads = torch.get_num_threads()
    saved_tensor_hooks = _top_saved_tensor_hooks()
    try:
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a validator's (or the answer's) warnings are not the learner's output
            yield
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
        np.set_printoptions(**numpy_print)
        torch.set_printoptions(**torch_print)
        torch.set_grad_enabled(grad_enabled)
        torch.set_anomaly_enabled(*anomaly)
        torch.use_deterministic_algorithms(deterministic[0], warn_only=deterministic[1])
        torch.set_default_dtype(default_dtype)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        _pop_saved_tensor_hooks_down_to(saved_tensor_hooks)


def _top_saved_tensor_hooks() -> tuple[Any, Any] | None:
    """The innermost ``saved_tensors_hooks`` pair in force in this thread (None when there is none)."""
    return torch._C._autograd._top_saved_tensors_default_hooks(False)


def _pop_saved_tensor_hooks_down_to(expected: tuple[Any, Any] | None) -> None:
    """Undo ``saved_tensors_hooks`` contexts an answer entered and never left (e.g. its forward raised inside a
    bare ``__enter__``): they would keep packing every later forward of the learner's session. PyTorch has no public
    way to leave another code's context, so this pops autograd's default-hooks stack (the call
    ``saved_tensors_hooks.__exit__`` makes) until the caller's own innermost pair is on top again."""
    for _ in range(1000):  # bounded: a stack deeper than this is not a learner's answer
        top = _top_saved_tensor_hooks()
        if top is None or (expected is not None and all(a is b for a, b in zip(top, expected))):
            return
        torch._C._autograd._pop_saved_tensors_default_hooks()
    raise RuntimeError("more than 1000 saved_tensors_hooks contexts were left open; restart the kernel")


def _is_course_or_library(filename: str) -> bool:
    path = str(Path(filename).resolve()) if filename and not filename.startswith("<") else filename
    return path.startswith(str(_PACKAGE_DIR)) or path.startswith(_LIBRARY_DIRS)


def _explain_error(error: BaseException) -> Verdict:
    """Whose error is it? The learner's if it passed through the learner's code (their innermost line is shown),
    or if PyTorch raised it while running their answer (e.g. a hook that returned the wrong thing); the course's
    if it started in the course's own check."""
    frames = traceback.extract_tb(error.__traceback__)
    summary = f"{type(error).__name__}: {error}"
    if isinstance(error, HelperBlocked):
        return Verdict(False, f"your code called {error.name}: {error.why}")
    if isinstance(error, NotImplementedError) and "your code goes here" in str(error):
        return Verdict(False, f"{STILL_THE_STUB}: replace `# YOUR CODE HERE` and the `raise` line below it with your "
                              "code, then run the cell again.")
    learner = [frame for frame in frames if not _is_course_or_library(frame.filename)]
    if learner:
        frame = learner[-1]
        line = f": `{frame.line.strip()}`" if frame.line else ""
        return Verdict(False, f"your code raised {summary} (in {frame.name}, line {frame.lineno}{line}).")
    innermost = Path(frames[-1].filename).resolve() if frames else None
    if innermost is not None and not str(innermost).startswith(str(_PACKAGE_DIR)):
        return Verdict(False, f"PyTorch raised {summary} while the check ran your code.")
    course = [frame for frame in frames if str(Path(frame.filename).resolve()).startswith(str(_PACKAGE_DIR))]
    where = ""
    if course:
        frame = course[-1]
        relative = Path(frame.filename).resolve().relative_to(_PACKAGE_DIR.parent)
        where = f" (at {relative.as_posix()}, line {frame.lineno})"
    return Verdict(False, f"the check failed with {summary}{where}. {COURSE_BUG_REPORT}")


def check(exercise_id: str, answer: Any) -> Verdict:
    """Check ``answer`` for an exercise, print ✓ or a hint, and return the verdict (truthy when it passed).

    The validator runs the answer on its own cases; the learner's random states and settings are untouched.

    Usage: ``check("01.1", clamp_hook)``
    """
    item = exercise(exercise_id)
    with preserved_session():
        try:
            with blocked(item.blocked):  # helpers that would do the exercise for the learner are off meanwhile
                verdict = item.validate(answer)
        except Exception as error:  # reported, never hidden: the learner's bug or the course's
            verdict = _explain_error(error)
        if not isinstance(verdict, Verdict):
            verdict = Verdict(False, f"the check returned {type(verdict).__name__}, not a Verdict. {COURSE_BUG_REPORT}")
    if verdict.ok:
        print(f"✓ Exercise {item.id}: correct. {verdict.message or item.praise}".rstrip())
    else:
        more = " Stuck? hint(\"%s\") gives a hint." % item.id if item.hints and _hints_shown.get(item.id, 0) == 0 else ""
        print(f"✗ Exercise {item.id}: not yet. {verdict.message}{more}".rstrip())
    return verdict


def hint(exercise_id: str) -> None:
    """Print the next hint for an exercise (a nudge first, then closer ones); the last call says where the
    solution is.

    Usage: ``hint("06.1")``
    """
    item = exercise(exercise_id)
    shown = _hints_shown.get(item.id, 0)
    if shown < len(item.hints):
        _hints_shown[item.id] = shown + 1
        more = " Call hint() again for the next one." if shown + 1 < len(item.hints) else ""
        print(f"Hint {shown + 1}/{len(item.hints)} for exercise {item.id}: {item.hints[shown]}{more}")
        return
    print(
        f"No more hints for exercise {item.id}. The solution is in the complete notebook: in your workspace open "
        f"complete/ (or notebooks/ in the course repository) and find 'Exercise {item.id}'."
    )


def _reset_hints() -> None:
    """Forget which hints were shown (tests)."""
    _hints_shown.clear()


