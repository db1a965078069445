"""The learner's progress record: one JSON line per ``check()`` -- never the learner's code -- in
``.course-progress.jsonl`` (``progress()``, in :mod:`course_utils.machinery.progress`, sums it up)::

    {"exercise": "06.1", "verdict": "pass", "attempt": 3, "time": "2026-11-25T04:01:02Z"}

It lives in the learner's workspace: the nearest folder at or above the working directory with the workspace's
``.course-manifest.json`` (``make lab``, Binder, ``make hub``), else the working directory where the course is
installed as a package (Colab, Kaggle, a TLJH home), never in the course's checkout. ``COURSE_PROGRESS=FILE``
records there instead; ``COURSE_PROGRESS=off`` records nothing. Recording never breaks ``check()`` (a read-only
folder, a full disk, a corrupt file give a one-line note); kernels that check at once take turns (``fcntl`` lock).

Usage::

    note = record("06.1", passed=True)      # what check() does; None, or why nothing was recorded
    attempts, unreadable = read_record()
"""

from __future__ import annotations

import datetime
import json
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

try:  # POSIX; on Windows each line is still one append
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

from course_utils.machinery.layout import EXERCISE_ID, MANIFEST, RECORD_NAME
from course_utils.machinery.messages import _
from course_utils.machinery.pins import REQUIREMENTS_FILE, in_checkout

__all__ = ["ENV", "RECORD_NAME", "Attempt", "parse_line", "parse_lines", "read_record", "record", "record_path",
           "recording_off", "reset_record", "summarise"]

ENV = "COURSE_PROGRESS"
_ID = re.compile(EXERCISE_ID)
_VERDICTS = ("pass", "fail")
_MAX_LINE = 512  # a line of ours is ~90 bytes; anything longer is not ours


@dataclass(frozen=True)
class Attempt:
    """One line of the record."""

    exercise: str
    verdict: str
    attempt: int
    time: str


def _setting() -> str:
    return os.environ.get(ENV, "").strip()


def recording_off() -> bool:
    """Whether the learner turned recording off (``COURSE_PROGRESS=off``)."""
    return _setting().lower() in ("off", "0", "no", "false")


def record_path(cwd: Path | None = None) -> Path | None:
    """Where ``check()`` records: the file ``COURSE_PROGRESS`` names, else the workspace's record, else the working
    directory's; None when recording is off or the working directory is in the course's checkout.

    Usage: ``record_path()`` -> ``Path("/home/ada/workspace/.course-progress.jsonl")``
    """
    setting = _setting()
    if recording_off():
        return None
    if setting and setting.lower() not in ("on", "1", "yes", "true"):
        return Path(setting).expanduser()
    here = Path.cwd() if cwd is None else Path(cwd)
    for folder in (here, *here.parents):
        if (folder / MANIFEST).is_file():
            return folder / RECORD_NAME
    if in_checkout() and here.resolve().is_relative_to(REQUIREMENTS_FILE.parent):
        return None
    return here / RECORD_NAME


def parse_line(line: str) -> Attempt | None:
    """One record line as an :class:`Attempt`, or None when it is not a well-formed line of ours.

    Usage: ``parse_line('{"exercise": "01.1", "verdict": "pass", "attempt": 1, "time": "..."}')``
    """
    if len(line) > _MAX_LINE:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    exercise, verdict, attempt, when = (data.get(k) for k in ("exercise", "verdict", "attempt", "time"))
    if not (isinstance(exercise, str) and _ID.fullmatch(exercise) and verdict in _VERDICTS
            and isinstance(attempt, int) and not isinstance(attempt, bool) and attempt >= 1
            and isinstance(when, str) and len(when) <= 40):
        return None
    return Attempt(exercise, verdict, attempt, when)


def parse_lines(lines: Iterable[str]) -> tuple[list[Attempt], int]:
    """The well-formed attempts among ``lines``, and how many lines were not (a corrupt or foreign line)."""
    parsed = [parse_line(line) for line in lines if line.strip()]
    found = [attempt for attempt in parsed if attempt is not None]
    return found, len(parsed) - len(found)


def read_record(path: Path | None = None) -> tuple[list[Attempt], int]:
    """Every attempt in the record (``record_path()`` by default) and the number of unreadable lines.

    Usage: ``attempts, unreadable = read_record()``
    """
    path = record_path() if path is None else path
    if path is None or not path.exists():
        return [], 0
    with open(path, encoding="utf-8", errors="replace") as handle:
        return parse_lines(handle)


def record(exercise_id: str, passed: bool, *, path: Path | None = None) -> str | None:
    """Append one attempt; return None, or a one-line note saying why nothing was recorded.

    Usage: ``note = record("06.1", True)``
    """
    try:
        target = record_path() if path is None else path
        if target is None:
            return None
        fd = os.open(target, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(_("{path} is not a regular file").format(path=target))
            if fcntl is not None:  # released when fd is closed
                fcntl.flock(fd, fcntl.LOCK_EX)
            with open(os.dup(fd), encoding="utf-8", errors="replace") as reader:
                earlier, _unreadable = parse_lines(reader)
            attempt = 1 + sum(1 for item in earlier if item.exercise == exercise_id)
            when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            line = json.dumps({"exercise": exercise_id, "verdict": "pass" if passed else "fail",
                               "attempt": attempt, "time": when}) + "\n"
            data = line.encode("utf-8")
            if os.write(fd, data) != len(data):
                raise OSError(_("the line was written only in part (is the disk full?)"))
        finally:
            os.close(fd)
    except (OSError, ValueError) as error:
        return _("(Your progress was not recorded: {error}. Your answer was checked as usual. Set {setting} to stop "
                 "recording.)").format(error=f"{type(error).__name__}: {error}", setting=f"{ENV}=off")
    return None


def summarise(attempts: Iterable[Attempt], exercise_ids: Iterable[str]) -> dict[str, dict[str, list[str]]]:
    """Per notebook number: which exercises are ``done`` (passed once), ``tried`` (never passed) or ``not started``.

    Usage: ``summarise(read_record()[0], catalogue())["06"]["done"]``
    """
    passed = {a.exercise for a in attempts if a.verdict == "pass"}
    tried = {a.exercise for a in attempts} - passed
    table: dict[str, dict[str, list[str]]] = {}
    for exercise_id in sorted(exercise_ids):
        row = table.setdefault(exercise_id.split(".")[0], {"done": [], "tried": [], "not started": []})
        state = "done" if exercise_id in passed else "tried" if exercise_id in tried else "not started"
        row[state].append(exercise_id)
    return table


def reset_record(path: Path) -> Path | None:
    """Start a fresh record at ``path``: the old one is renamed ``.course-progress.<time>.jsonl`` beside it; returns
    that name, or None when there was no record.

    Usage: ``kept = reset_record(record_path())``
    """
    if not path.exists():
        return None
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    kept = path.with_name(f"{path.stem}.{stamp}{path.suffix}")
    path.rename(kept)
    return kept
