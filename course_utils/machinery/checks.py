"""Exercise checking: ``check("06.1", answer)`` prints ✓ or a hint (never the solution); ``hint("06.1")``.

``check`` runs the exercise's validator on cases the learner has not seen, inside a guard
(:mod:`course_utils.machinery.sandbox`) that leaves the learner's session as it found it and survives whatever the answer does:

- it stops an answer that runs past the exercise's time limit (an endless loop) with a ✗ that says so;
- every exception the answer raises, ``SystemExit`` and ``KeyboardInterrupt`` included, becomes a ✗ naming the
  learner's line; an error inside the course's validator is reported as a course bug, with what to send;
- random states, grad/anomaly/determinism modes, default dtype and device, print options, warning filters, torch
  function/dispatch modes and saved-tensor hooks left active are put back; global module/optimizer hooks left
  registered, PyTorch functions replaced by the learner's and the like are taken out and named in the ✗ line;
  settings that are only restored (np.seterr, the working directory, ...) are named in the ✓ line;
- what the answer prints is shown up to a budget; the helpers an exercise asks the learner to write are switched
  off, and so are the course's own ground truths (``only_inside_a_check``);
- answers are compared as plain values: a ``str``/``int``/tensor subclass cannot redefine equality.

Usage::

    from course_utils.machinery.checks import check, hint
    check("01.1", clamp_hook)   # ✓ Exercise 01.1: correct ...   or   ✗ Exercise 01.1: not yet. <hint>
    hint("01.1")                # the next hint for 01.1
"""

from __future__ import annotations

import contextlib
import difflib
import re
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from course_utils.machinery.blocked_helpers import HelperBlocked, blocked
from course_utils.machinery.exercise_kit import Exercise, ReferenceRefused, Verdict, plain
from course_utils.machinery.learner_edition import STUB_MESSAGE
from course_utils.machinery.exercises import catalogue
from course_utils.machinery.messages import N_, _, in_every_language
from course_utils.machinery.progress_record import record as record_attempt
from course_utils.machinery.report_problem import problem_url
from course_utils.machinery.sandbox import (
    COURSE_DIR,
    SessionGuard,
    TimeLimitExceeded,
    Timer,
    is_learner_file,
    is_learner_value,
    limited_output,
    quiet_warnings,
    time_limit,
)

__all__ = ["check", "exercise", "hint", "all_exercises", "preserved_session", "COURSE_BUG_REPORT", "STILL_THE_STUB"]

_PACKAGE_DIR = Path(COURSE_DIR)
COURSE_BUG_REPORT = N_(
    "This is a bug in the course's check, not in your answer. Please report it to the course's maintainers "
    "(the issue tracker of the repository you got the course from) with the exercise id and this message; "
    "meanwhile compare your code with the complete notebook."
)
# check()'s verdict on an exercise the learner has not written (shown as _(STILL_THE_STUB), in the learner's language)
STILL_THE_STUB = N_("your answer is still the stub")
_hints_shown: dict[str, int] = {}


def all_exercises() -> dict[str, Exercise]:
    """Every exercise by id."""
    return dict(catalogue())


def exercise(exercise_id: str) -> Exercise:
    """Look an exercise up by id; an unknown id raises ``KeyError`` naming the closest ids."""
    if not isinstance(exercise_id, str):
        raise TypeError(_("Exercise ids are strings like '01.2'; got {type}.").format(type=type(exercise_id).__name__))
    known = catalogue()
    if exercise_id not in known:
        close = difflib.get_close_matches(exercise_id, list(known), n=3, cutoff=0.3)
        suggestion = _(" Did you mean {ids}?").format(ids=", ".join(repr(c) for c in close)) if close else ""
        raise KeyError(
            _("There is no exercise {id}.{suggestion} The id is printed above each exercise (e.g. '01.2').").format(
                id=repr(exercise_id), suggestion=suggestion)
        )
    return known[exercise_id]


@contextlib.contextmanager
def preserved_session() -> Iterator[None]:
    """Run a block without changing the caller's global state (random states, modes, threads, print options,
    default dtype and device, torch modes and saved-tensor hooks left active, global hooks, ...).

    Usage: ``with preserved_session(): validator(answer)``
    """
    guard = SessionGuard(is_learner_value)
    try:
        with quiet_warnings():
            yield
    finally:
        guard.restore()


def _is_course_or_library(filename: str) -> bool:
    return not is_learner_file(filename)


def _time_verdict(timer: Timer) -> Verdict:
    return Verdict(False, _("your code did not finish in {seconds} s -- an endless loop (a `while` whose "
                            "condition never changes, a hook that calls itself)? The check stopped it; your session "
                            "is usable.").format(seconds=f"{timer.seconds:g}"))


# What Python says when a function is called with arguments its `def` line does not take.
_SIGNATURE_MISMATCH = re.compile(r"(missing \d+ required (positional|keyword-only) argument|takes \d+ positional "
                                 r"arguments? but \d+ (was|were) given|got an unexpected keyword argument|takes no "
                                 r"arguments|takes from \d+ to \d+ positional arguments)")


def _explain_error(error: BaseException) -> Verdict:
    """Whose error is it? The learner's if it passed through the learner's code (their innermost line is shown),
    or if PyTorch raised it while running their answer (e.g. a hook that returned the wrong thing); the course's
    if it started in the course's own check."""
    frames = traceback.extract_tb(error.__traceback__)
    summary = f"{type(error).__name__}: {error}"
    if isinstance(error, HelperBlocked):
        return Verdict(False, _("your code called (or switched back on) {name}: {why}").format(
            name=error.name, why=_(error.why)))
    if isinstance(error, ReferenceRefused):
        return Verdict(False, _("your code called the course's reference: {error}").format(error=error))
    if isinstance(error, KeyboardInterrupt):
        return Verdict(False, _("the check was interrupted (KeyboardInterrupt: your code raised it, or the kernel was "
                                "interrupted) before it could judge your answer: run it again."))
    if isinstance(error, SystemExit):
        learner = [frame for frame in frames if not _is_course_or_library(frame.filename)]
        where = (_(" (in {function}, line {line})").format(function=learner[-1].name, line=learner[-1].lineno)
                 if learner else "")
        return Verdict(False, _("your code called sys.exit() or raised SystemExit{where}: a hook or answer must "
                                "return (or raise an ordinary exception), never end the interpreter.").format(
                                    where=where))
    if isinstance(error, NotImplementedError) and is_stub_error(error):
        return Verdict(False, _("{stub}: replace `# YOUR CODE HERE` and the `raise` line below it with your "
                                "code, then run the cell again.").format(stub=_(STILL_THE_STUB)))
    learner = [frame for frame in frames if not _is_course_or_library(frame.filename)]
    if isinstance(error, TypeError) and not learner and _SIGNATURE_MISMATCH.search(str(error)):
        return Verdict(False, _("your function was called the way the exercise describes, and its parameters do "
                                "not fit: {error}. Compare its `def` line with the task.").format(error=error))
    if learner:
        frame = learner[-1]
        line = f": `{frame.line.strip()}`" if frame.line else ""
        return Verdict(False, _("your code raised {error} (in {function}, line {line}{code}).").format(
            error=summary, function=frame.name, line=frame.lineno, code=line))
    innermost = Path(frames[-1].filename).resolve() if frames else None
    if innermost is not None and not str(innermost).startswith(str(_PACKAGE_DIR)):
        return Verdict(False, _("PyTorch raised {error} while the check ran your code.").format(error=summary))
    course = [frame for frame in frames if str(Path(frame.filename).resolve()).startswith(str(_PACKAGE_DIR))]
    where = ""
    if course:
        frame = course[-1]
        relative = Path(frame.filename).resolve().relative_to(_PACKAGE_DIR.parent)
        where = _(" (at {file}, line {line})").format(file=relative.as_posix(), line=frame.lineno)
    return Verdict(False, _("the check failed with {error}{where}. {report}").format(
        error=summary, where=where, report=_(COURSE_BUG_REPORT)))


def check(exercise_id: str, answer: Any) -> Verdict:
    """Check ``answer`` for an exercise, print ✓ or a hint, and return the verdict (truthy when it passed).

    The validator runs the answer on its own cases, within the exercise's time limit; the learner's random states
    and settings are untouched, and whatever else the answer changed is put back and named.

    Usage: ``check("01.1", clamp_hook)``
    """
    try:
        item = exercise(exercise_id)
    except (KeyError, TypeError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"✗ {message}")
        return Verdict(False, message)
    verdict = _check_and_say(item, answer)
    # not written yet (Run All past an exercise): no attempt, nothing to report
    if _(STILL_THE_STUB) in verdict.message:
        return verdict
    if not verdict.ok:
        print(_("Think the check itself is wrong? {url}").format(url=problem_url(exercise=item.id)))
    note = record_attempt(item.id, verdict.ok)  # the learner's progress record; never breaks the check
    if note:
        print(note)
    return verdict


def _check_and_say(item: Exercise, answer: Any) -> Verdict:
    """Run the check of ``item`` on ``answer`` and print its ✓ or ✗ line."""
    verdict, changes, budget = _run(item, answer)
    if verdict.ok and not [phrase for phrase, fatal in changes if fatal]:
        notes = "".join(_(" Note: your code {change}.").format(change=phrase) for phrase, _fatal in changes)
        praise = verdict.message or _(item.praise)
        print(_("✓ Exercise {id}: correct. {praise}").format(id=item.id, praise=praise).rstrip() + notes
              + _spaced(budget))
        return verdict
    if verdict.ok:
        verdict = Verdict(False, _("the answer gives the right result, but your code {changes}.").format(
            changes=_("; and ").join(phrase for phrase, fatal in changes if fatal)))
        changes = [(phrase, fatal) for phrase, fatal in changes if not fatal]
    extra = "".join(_(" Also, your code {change}.").format(change=phrase)
                    for phrase, _fatal in changes if phrase not in verdict.message)
    print(_("✗ Exercise {id}: not yet. {message}").format(id=item.id, message=verdict.message).rstrip() + extra
          + _spaced(budget) + _hint_offer(item))
    return Verdict(False, verdict.message + extra)


def _spaced(budget: Any) -> str:
    note = budget.note() if budget is not None else ""
    return f" {note}" if note else ""


def _hint_offer(item: Exercise) -> str:
    """How to ask for a hint: the last words of every ✗ line."""
    shown = _hints_shown.get(item.id, 0)
    if item.hints and shown == 0:
        return _(' Stuck? hint("{id}") gives a hint.').format(id=item.id)
    if shown < len(item.hints):
        return _(' hint("{id}") gives the next hint.').format(id=item.id)
    return _(' hint("{id}") says where the solution is.').format(id=item.id)


def is_stub_error(error: BaseException) -> bool:
    """True for the ``NotImplementedError`` of a learner-edition stub, whatever language the stub was written in."""
    return any(phrase in str(error) for phrase in in_every_language(STUB_MESSAGE))


def _run(item: Exercise, answer: Any) -> tuple[Verdict, list[tuple[str, bool]], Any]:
    """Run the validator in the guard; return (verdict, [(what the answer changed, makes it wrong)], output)."""
    guard = SessionGuard(is_learner_value)
    budget = None
    verdict: Any = None
    try:
        patched = guard.patched_before()
        if patched:
            verdict = Verdict(False, _("{name} holds a function defined in your notebook, so PyTorch cannot be "
                                       "trusted to check your answer: restart the kernel and run your cells again, "
                                       "without replacing PyTorch's own functions.").format(name=patched[0]))
        else:
            with limited_output() as budget, time_limit(item.time_limit_s) as timer, quiet_warnings():
                try:
                    with blocked(item.blocked):  # helpers that would do the exercise for the learner are off
                        verdict = item.validate(_as_plain(answer))
                except BaseException as error:  # noqa: BLE001 -- every kind is reported, never hidden
                    verdict = _explain_error(error)
                if timer.fired:
                    verdict = _time_verdict(timer)
    except TimeLimitExceeded:  # raised past the validator (a check stuck in its own clean-up): still a verdict
        verdict = _time_verdict(Timer(item.time_limit_s))
    except BaseException as error:  # noqa: BLE001 -- the guard itself failed: report, never hide
        verdict = _explain_error(error)
    finally:
        changes = guard.restore()
    if not isinstance(verdict, Verdict):
        verdict = Verdict(False, _("the check returned {type}, not a Verdict. {report}").format(
            type=type(verdict).__name__, report=_(COURSE_BUG_REPORT)))
    # what the answer left behind that makes it wrong (the rest is only put back, and named in the ✓ line)
    return verdict, [(str(change), change.fatal) for change in changes], budget


def _as_plain(answer: Any) -> Any:
    """The answer with str, number, list, tuple, dict and tensor values made plain (functions unchanged)."""
    try:
        return plain(answer)
    except TypeError:
        return answer  # the validator names the type it expected


def hint(exercise_id: str) -> None:
    """Print the next hint for an exercise (a nudge first, then closer ones); the last call says where the
    solution is.

    Usage: ``hint("06.1")``
    """
    try:
        item = exercise(exercise_id)
    except (KeyError, TypeError) as error:
        print(error.args[0] if error.args else error)
        return
    shown = _hints_shown.get(item.id, 0)
    if shown < len(item.hints):
        _hints_shown[item.id] = shown + 1
        more = _(" Call hint() again for the next one.") if shown + 1 < len(item.hints) else ""
        print(_("Hint {number}/{total} for exercise {id}: {hint}{more}").format(
            number=shown + 1, total=len(item.hints), id=item.id, hint=_(item.hints[shown]), more=more))
        return
    print(_("No more hints for exercise {id}. The solution is in the complete notebook: in your workspace open "
            "complete/ (or notebooks/ in the course repository) and find 'Exercise {id}'.").format(id=item.id))


def _reset_hints() -> None:
    """Forget which hints were shown (tests)."""
    _hints_shown.clear()


