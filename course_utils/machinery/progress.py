"""``progress()``: the learner's progress record (:mod:`course_utils.machinery.progress_record`) as a table, per
notebook: the exercises done (passed once), tried (never passed) and not started.

Usage::

    from course_utils import progress
    progress()              # prints the table; as a cell's last line, nothing more is shown
    progress(reset=True)    # start afresh (the old record is kept beside it, renamed)
"""

from __future__ import annotations

from collections.abc import Mapping

from course_utils.machinery.course import course_map
from course_utils.machinery.exercises import catalogue
from course_utils.machinery.messages import _, ljust, rjust
from course_utils.machinery.progress_record import ENV, read_record, record_path, recording_off, reset_record, summarise

__all__ = ["Progress", "progress"]


class Progress(dict):
    """What :func:`progress` returns: per notebook number, ``{"done": [...], "tried": [...], "not started": [...]}``.
    A dict that a notebook does not show again (``progress()`` printed it as a table already)."""

    def _ipython_display_(self) -> None:
        """progress() already printed the table."""


def table(summary: Mapping[str, Mapping[str, list[str]]], titles: Mapping[str, str]) -> str:
    """The table :func:`progress` prints: one row per notebook (its title from ``titles``, by number), then the total.

    Usage: ``print(table(summarise(attempts, catalogue()), {"01": "01_tensor_hooks"}))``
    """
    header = (ljust(_("notebook"), 32), rjust(_("done"), 5), rjust(_("tried"), 6), rjust(_("not started"), 12),
              _("still open"))
    lines = [" ".join(header[:4]) + "   " + header[4]]
    for number, row in summary.items():
        title = titles.get(number, number)[:32]
        still_open = ", ".join(row["tried"] + row["not started"]) or "-"
        counts = f"{len(row['done']):>5} {len(row['tried']):>6} {len(row['not started']):>12}"
        lines.append(f"{title:32} {counts}   {still_open}")
    done = sum(len(row["done"]) for row in summary.values())
    total = sum(len(ids) for row in summary.values() for ids in row.values())
    lines.append(ljust(_("all"), 32) + f" {done:>5} " + _("of {total} exercises done").format(total=total))
    return "\n".join(lines)


def _titles() -> dict[str, str]:
    try:
        return {row.file[:2]: row.file.removesuffix(".ipynb") for row in course_map()}
    except (OSError, ValueError):
        return {}


def progress(reset: bool = False) -> Progress:
    """Print, per notebook, the exercises done, tried and not started; return the same as a :class:`Progress` dict.

    ``reset=True`` starts a fresh record; the old one is kept beside it as ``.course-progress.<time>.jsonl``.

    Usage: ``from course_utils import progress; progress()``
    """
    path = record_path()
    if path is None:
        print(_("Progress is not recorded: {setting} is set.").format(setting=f"{ENV}=off") if recording_off() else
              _("Progress is recorded in your own workspace ({make_lab}, or {command}), not in the course's own "
                "folder. To record here too: {setting}.").format(make_lab="make lab",
                                                      command="python -m course_utils.machinery.workspace DIR",
                                                      setting=f"{ENV}=/path/to/progress.jsonl"))
        return Progress()
    if reset:
        kept = reset_record(path)
        print(_("Progress reset. The old record is kept as {name}.").format(name=kept.name) if kept
              else _("Progress reset: there was no record yet."))
    attempts, unreadable = read_record(path)
    summary = Progress(summarise(attempts, catalogue()))
    print(table(summary, _titles()))
    if unreadable:
        print(_("({count} line(s) of {name} could not be read and were skipped.)").format(count=unreadable,
                                                                                      name=path.name))
    return summary
