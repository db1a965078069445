"""Exercise checking: ``check("06.1", answer)`` prints ✓ or a hint (never the solution); ``hint("06.1")``.

``check`` runs the exercise's validator on cases the learner has not seen, inside the guard of
:mod:`course_utils.machinery.guard` (time limit, output budget, the session put back) while
:mod:`course_utils.machinery.hook_watch` watches what the answer's hooks return. Every exception the answer raises
(``SystemExit`` and ``KeyboardInterrupt`` too) is a ✗ naming the learner's line; an error inside the course's
validator is reported as a course bug. The verdict's :class:`~course_utils.machinery.exercise_kit.Status` is
decided where it happens, never read back from a message. Under a ✗, a link reports a problem with the check.

Usage::

    from course_utils.machinery.checks import check, hint
    check("01.1", clamp_hook)   # ✓ Exercise 01.1: correct ...   or   ✗ Exercise 01.1: not yet. <hint>
    hint("01.1")                # the next hint for 01.1; hint() for the exercise you last worked on
"""

from __future__ import annotations

import ast
import difflib
import linecache
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

from course_utils.machinery.exercise_kit import Exercise, Status, Verdict, plain
from course_utils.machinery.exercises import catalogue
from course_utils.machinery.guard import (
    COURSE_DIR,
    Change,
    OutputBudget,
    SessionGuard,
    TimeLimitExceeded,
    Timer,
    is_learner_file,
    limited_output,
    time_limit,
    written_by_learner,
)
from course_utils.machinery.hook_watch import HookMistake, watching_hooks
from course_utils.machinery.messages import N_, Text, _
from course_utils.machinery.progress_record import record as record_attempt
from course_utils.machinery.report_problem import ProblemLink

__all__ = ["check", "exercise", "hint", "all_exercises", "COURSE_BUG_REPORT", "STILL_THE_STUB"]

_PACKAGE_DIR = Path(COURSE_DIR)
COURSE_BUG_REPORT = N_(
    "This is a bug in the course's check, not in your answer. Please report it to the course's maintainers "
    "(the issue tracker of the repository you got the course from) with the exercise id and this message; "
    "meanwhile compare your code with the complete notebook."
)
# check()'s verdict on an exercise the learner has not written (Status.STUB), shown in the learner's language
STILL_THE_STUB = N_("Your answer is still the stub")
_hints_shown: dict[str, int] = {}
_worked_on: list[str] = []  # the last exercise id given to check() or hint(), for hint() without an id
_no_time_limit_said: list[bool] = []


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


# -- whose error is it? -------------------------------------------------------------------------------------------
def _called_learner_code(error: BaseException) -> bool:
    """True when ``error`` was raised by the call itself of a function or class the learner wrote (its parameters do
    not fit the arguments): read from where the innermost frame stopped, the call expression it was evaluating."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    frame = tb.tb_frame
    try:
        line, end_line, column, end_column = list(frame.f_code.co_positions())[tb.tb_lasti // 2]
        if line is None or end_line is None:  # no position recorded for this instruction
            return False
        lines = [text.encode() for text in linecache.getlines(frame.f_code.co_filename)[line - 1:end_line]]
        segment = (lines[0][column:end_column] if len(lines) == 1
                   else lines[0][column:] + b"".join(lines[1:-1]) + lines[-1][:end_column])
        call = ast.parse(segment.decode(), mode="eval").body
        if not isinstance(call, ast.Call) or not all(isinstance(node, (ast.Name, ast.Attribute, ast.Load))
                                                     for node in ast.walk(call.func)):
            return False
        callee = eval(compile(ast.Expression(call.func), "<call>", "eval"), frame.f_globals, dict(frame.f_locals))
    except Exception:
        return False
    return written_by_learner(callee)


def _explain_error(error: BaseException) -> Verdict:
    """Whose error is it? The learner's if it passed through the learner's code (their innermost line is shown),
    if PyTorch raised it while running their answer (e.g. a hook that returned the wrong thing), or if calling
    their function failed; the course's if it started in the course's own check."""
    frames = traceback.extract_tb(error.__traceback__)
    learner = [frame for frame in frames if is_learner_file(frame.filename)]
    summary = f"{type(error).__name__}: {error}"
    if isinstance(error, KeyboardInterrupt):
        return Verdict(False, Text(N_("The check was interrupted (KeyboardInterrupt: your code raised it, or the "
                                      "kernel was interrupted) before it could judge your answer: run it again.")))
    if isinstance(error, SystemExit):
        exit_at = (Text(N_(" (in {function}, line {line})"), function=learner[-1].name, line=learner[-1].lineno)
                 if learner else "")
        return Verdict(False, Text(N_("Your code called sys.exit() or raised SystemExit{where}: a hook or answer must "
                                      "return (or raise an ordinary exception), never end the interpreter."),
                                   where=exit_at))
    if isinstance(error, NotImplementedError) and frames and is_learner_file(frames[-1].filename):
        return Verdict(False, Text(N_("{stub}: replace `# YOUR CODE HERE` and the `raise` line below it with your "
                                      "code, then run the cell again."), stub=Text(STILL_THE_STUB)),
                       status=Status.STUB)
    if isinstance(error, TypeError) and not learner and _called_learner_code(error):
        return Verdict(False, Text(N_("Your function was called the way the exercise describes, and its parameters "
                                      "do not fit: {error}. Compare its `def` line with the task."), error=error))
    if learner:
        frame = learner[-1]
        return Verdict(False, Text(N_("Your code raised {error} (in {function}, line {line}{code})."), error=summary,
                                   function=frame.name, line=frame.lineno,
                                   code=f": `{frame.line.strip()}`" if frame.line else ""))
    where: Text | str = ""
    if frames:  # raised in the course's own code, or in a library it called
        innermost = Path(frames[-1].filename).resolve()
        if not innermost.is_relative_to(_PACKAGE_DIR):
            return Verdict(False, Text(N_("PyTorch raised {error} while the check ran your code."), error=summary))
        where = Text(N_(" (at {file}, line {line})"), file=innermost.relative_to(_PACKAGE_DIR.parent).as_posix(),
                     line=frames[-1].lineno)
    return Verdict(False, Text(N_("The check failed with {error}{where}. {report}"), error=summary, where=where,
                               report=Text(COURSE_BUG_REPORT)), status=Status.COURSE_BUG)


def _time_verdict(timer: Timer) -> Verdict:
    return Verdict(False, Text(N_("Your code did not finish in {seconds} s -- an endless loop (a `while` whose "
                                  "condition never changes, a hook that calls itself)? The check stopped it; your "
                                  "session is usable."), seconds=f"{timer.seconds:g}"), status=Status.TIMED_OUT)


# -- check() ------------------------------------------------------------------------------------------------------
def check(exercise_id: str, answer: Any) -> Verdict:
    """Check ``answer`` for an exercise, print ✓ or a hint, and return the verdict (truthy when it passed).

    The validator runs the answer on its own cases, within the exercise's time limit; the learner's random states
    and settings are untouched, and a global hook the answer left registered is removed and named.

    Usage: ``check("01.1", clamp_hook)``
    """
    try:
        item = exercise(exercise_id)
    except (KeyError, TypeError) as error:
        message = error.args[0] if error.args else str(error)
        print(f"✗ {message}")
        return Verdict(False, message)
    _worked_on[:] = [item.id]
    verdict, changes, budget = _run(item, answer)
    verdict = _say(item, verdict, changes, budget)
    if verdict.status is Status.STUB:  # not written yet (Run All past an exercise): no attempt, nothing to report
        return verdict
    if not verdict.ok:
        _show(ProblemLink(item.id))
    note = record_attempt(item.id, verdict.ok)  # the learner's progress record; never breaks the check
    if note:
        print(note)
    return verdict


def _run(item: Exercise, answer: Any) -> tuple[Verdict, list[Change], OutputBudget | None]:
    """Run the validator in the guard; return its verdict, what the answer changed, and the output budget."""
    guard = SessionGuard()
    budget, timer = None, Timer(item.time_limit_s)
    verdict: Any = None
    try:  # only the answer and its validator run under the time limit, not the clean-up around them
        # a validator's (or the answer's) warnings are not the learner's output; the filters come back afterwards
        with warnings.catch_warnings(action="ignore"), limited_output() as budget, \
                time_limit(item.time_limit_s) as timer:
            if not timer.available and not _no_time_limit_said:
                _no_time_limit_said.append(True)
                print(_("(Here check() cannot stop an endless loop: if a check runs on and on, interrupt the kernel; "
                        "your session stays usable.)"))
            with watching_hooks(item.watch_hooks, item.observe_only) as watch:
                try:
                    verdict = item.judge(_as_plain(answer))
                except TimeLimitExceeded:
                    raise
                except HookMistake as mistake:  # a hook returned what cannot replace what it replaces
                    verdict = Verdict(False, mistake.message)
                except BaseException as error:
                    verdict = _explain_error(error)
            if watch.mistakes and verdict.status in (Status.PASSED, Status.FAILED, Status.COURSE_BUG):
                verdict = Verdict(False, watch.mistakes[0])  # the cause, whatever the validator made of it
    except TimeLimitExceeded:
        pass  # timer.fired: the verdict says so below
    except BaseException as error:
        verdict = _explain_error(error)
    finally:
        changes = guard.restore()
    if timer.fired:  # also when the answer caught the exception, or it came as the check ended
        verdict = _time_verdict(timer)
    elif not isinstance(verdict, Verdict):
        verdict = Verdict(False, Text(N_("The check returned {type}, not a Verdict. {report}"),
                                      type=type(verdict).__name__, report=Text(COURSE_BUG_REPORT)),
                          status=Status.COURSE_BUG)
    return verdict, changes, budget


def _say(item: Exercise, verdict: Verdict, changes: list[Change], budget: OutputBudget | None) -> Verdict:
    """Print the ✓ or ✗ line of ``verdict``; return the verdict as it stands with what the answer left behind."""
    fatal = [change for change in changes if change.fatal]
    notes = [change for change in changes if not change.fatal]
    output = budget.note() if budget is not None else None
    tail = f" {output}" if output else ""
    if verdict.ok and not fatal:
        praise = verdict.message or _(item.praise)
        print(_("✓ Exercise {id}: correct. {praise}").format(id=item.id, praise=praise).rstrip()
              + "".join(_(" Note: your code {change}.").format(change=change) for change in notes) + tail)
        return verdict
    if verdict.ok:
        verdict = Verdict(False, Text(N_("The answer gives the right result, but your code {changes}."),
                                      changes=_("; and ").join(map(str, fatal))))
        fatal = []
    message = verdict.message
    also = "".join(_(" Also, your code {change}.").format(change=change) for change in fatal + notes)
    print(_("✗ Exercise {id}: not yet. {message}").format(id=item.id, message=message).rstrip() + also + tail
          + _hint_offer(item))
    return Verdict(False, message + also, status=verdict.status)


def _show(link: Any) -> None:
    """Display ``link`` where a notebook renders HTML (a word that links, not a ~500-character address), print its
    plain text everywhere else."""
    shell = sys.modules.get("IPython") and sys.modules["IPython"].get_ipython()
    if shell is not None and getattr(shell, "kernel", None) is not None:
        from IPython.display import display

        display(link)
    else:
        print(link)


def _hint_offer(item: Exercise) -> str:
    """How to ask for a hint: the last words of every ✗ line."""
    shown = _hints_shown.get(item.id, 0)
    if item.hints and shown == 0:
        return _(' Stuck? hint("{id}") gives a hint.').format(id=item.id)
    if shown < len(item.hints):
        return _(' hint("{id}") gives the next hint.').format(id=item.id)
    return _(' hint("{id}") says where the solution is.').format(id=item.id)


def _as_plain(answer: Any) -> Any:
    """The answer with str, number, list, tuple, dict and tensor values made plain (functions unchanged)."""
    try:
        return plain(answer)
    except TypeError:
        return answer  # the validator names the type it expected


# -- hint() -------------------------------------------------------------------------------------------------------
def hint(exercise_id: str | None = None) -> None:
    """Print the next hint for an exercise (a nudge first, then closer ones); the last call says where the
    solution is. Without an id: the exercise last given to ``check()`` or ``hint()``.

    Usage: ``hint("06.1")``, then ``hint()`` for the next one
    """
    if exercise_id is None and not _worked_on:
        print(_('hint() needs an exercise id, e.g. hint("01.2"): no exercise has been checked in this session yet.'))
        return
    try:
        item = exercise(_worked_on[0] if exercise_id is None else exercise_id)
    except (KeyError, TypeError) as error:
        print(error.args[0] if error.args else error)
        return
    _worked_on[:] = [item.id]
    shown = _hints_shown.get(item.id, 0)
    if shown < len(item.hints):
        _hints_shown[item.id] = shown + 1
        more = _(" Call hint() again for the next one.") if shown + 1 < len(item.hints) else ""
        label = item.id if exercise_id is not None else _("{id} (the last one you worked on)").format(id=item.id)
        print(_("Hint {number}/{total} for exercise {id}: {hint}{more}").format(
            number=shown + 1, total=len(item.hints), id=label, hint=_(item.hints[shown]), more=more))
        return
    print(_("No more hints for exercise {id}. The solution is in the complete notebook: in your workspace open "
            "complete/ (or notebooks/ in the course repository) and find 'Exercise {id}'.").format(id=item.id))


def _reset_hints() -> None:
    """Forget which hints were shown and which exercise was worked on last (tests)."""
    _hints_shown.clear()
    _worked_on.clear()
