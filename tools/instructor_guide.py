"""The instructor guide's generated tables: notebook timings and the workshop agendas, computed, never typed.

The notebooks, their order and minutes come from the course map (``course_utils.machinery.course``), the run times
from ``tools/notebook_timings.json`` (``make timings``), the agendas from the blocks below. A notebook row names the
exercises done in the room: those posed in the sections it covers but the stretch one, unless the block lists its own.
A course-map notebook in no agenda lands in the optional advanced block. ``make learner slides AGENDA=half-day``
builds an agenda's notebooks only (:func:`agenda_notebooks`). The tables' words are messages (``N_``/``_``), so the
Chinese guide gets the same tables in Chinese (``lang="zh"``) with no new translation.

Usage: ``python -m tools.instructor_guide`` (``make sync`` runs it) rewrites the tables between the guide's
``<!-- timings:start ... -->`` / ``<!-- agendas:start ... -->`` markers.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from course_utils.machinery.course import NOTEBOOKS_DIR, NotebookInfo, course_map
from course_utils.machinery.layout import EXERCISE_ID
from course_utils.machinery.messages import N_, _, in_language
from tools.repo import ROOT, notebook_text, with_region

GUIDE = ROOT / "notebooks" / "instructor_guide.md"
TIMINGS = Path(__file__).resolve().parent / "notebook_timings.json"


# -- agenda data --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """One row of an agenda: a notebook (``notebook="03"``: its estimated minutes unless ``minutes`` says otherwise;
    only ``sections``, if given, the rest as homework) or anything else (a break, questions)."""

    text: str = ""
    minutes: int | None = None
    notebook: str | None = None
    sections: tuple[int, ...] = ()
    self_study: bool = False  # "point to <the notebooks this agenda leaves out> for self-study"
    # done in the room (None: those posed in its sections, but the stretch one; () for none)
    exercises: tuple[str, ...] | None = None


HALF_DAY = (
    Block(N_("together: how self-checks and the then-vs-now boxes work"), notebook="00"),
    Block(notebook="01"),
    Block(notebook="02", sections=(1, 2, 3), minutes=20),
    Block(N_("break"), 15),
    Block(notebook="03"),
    Block(notebook="04", sections=(1, 2, 5), minutes=30),
    Block(N_("break"), 10),
    Block(N_("as a guided demo"), notebook="06", sections=(1, 2, 5), minutes=35, exercises=()),
    Block(N_("questions"), 15, self_study=True),
)
FULL_DAY = (
    Block(notebook="00"),
    Block(notebook="01"),
    Block(notebook="02"),
    Block(N_("break"), 15),
    Block(notebook="03"),
    Block(notebook="04"),
    Block(N_("lunch"), 60),
    Block(notebook="05"),
    Block(N_("break"), 10),
    Block(N_("including the explorer widget"), notebook="06"),
    Block(notebook="07"),
    Block(N_("open questions, wrap-up"), 20),
)
AGENDAS = {  # key (make learner AGENDA=key): name, purpose, blocks
    "half-day": (N_("Half day"), N_("the hook system, then one application."), HALF_DAY),
    "full-day": (N_("Full day"), N_("notebooks 00–07, in order."), FULL_DAY),
}
ADVANCED = "advanced"  # the key of the optional advanced block
ADVANCED_STRETCH = 90  # the advanced block's longest stretch without a break, in minutes (a notebook longer: alone)
# The section of each exercise posed after a notebook's numbered sections (under its "## Exercises"), for a block
# that covers only some sections: the section whose material it exercises. One such block whose notebook poses an
# exercise not listed here stops the generator (a row must name the exercises to do in the room).
EXERCISE_SECTIONS = {"02.1": 1, "02.2": 3, "02.3": 4, "04.1": 1, "04.2": 4, "04.3": 4, "04.4": 5}


# -- rendering ----------------------------------------------------------------------------------------------
def _stem(info: NotebookInfo) -> str:
    return info.file.removesuffix(".ipynb")


def duration(minutes: int) -> str:
    """``210`` -> ``"3 h 30 min"``; ``45`` -> ``"45 min"`` (in the language of the messages now)."""
    hours, rest = divmod(minutes, 60)
    if hours and rest:
        return _("{hours} h {minutes} min").format(hours=hours, minutes=rest)
    return _("{hours} h").format(hours=hours) if hours else _("{minutes} min").format(minutes=rest)


def clock(minutes: int) -> str:
    return f"{minutes // 60}:{minutes % 60:02d}"


def _ranges(numbers: Sequence[int]) -> str:
    """``(1, 2, 3)`` -> ``"1–3"``, ``(1, 2, 5)`` -> ``"1, 2 and 5"``, ``(4, 5)`` -> ``"4 and 5"``."""
    runs: list[list[int]] = []
    for n in sorted(numbers):
        if runs and runs[-1][-1] == n - 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    words = [w for run in runs for w in ([f"{run[0]}–{run[-1]}"] if len(run) >= 3 else [str(n) for n in run])]
    return _and(words)


def _and(words: Sequence[str]) -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"`` (in the language of the messages now)."""
    if len(words) == 1:
        return words[0]
    listed = words[0]
    for word in words[1:-1]:
        listed = _("{a}, {b}").format(a=listed, b=word)
    return _("{a} and {b}").format(a=listed, b=words[-1])


def _sections(numbers: Sequence[int]) -> str:
    return (_("sections {numbers}") if len(numbers) > 1 else _("section {numbers}")).format(numbers=_ranges(numbers))


def notebook_sections(path: Path) -> list[int]:
    """The numbers of a notebook's ``## N · Title`` sections."""
    return [int(n) for n in re.findall(r"^##\s+(\d+)\s+·", notebook_text(path, "markdown"), re.MULTILINE)]


def posed_exercises(path: Path) -> list[tuple[int | None, str, bool]]:
    """(section, exercise id, stretch) of each exercise a notebook poses (``**Exercise 02.3 (stretch)**``, in any of
    the course's languages), in order; section 0 before the first ``## N ·`` heading; after the numbered sections
    (under ``## Exercises``), the one :data:`EXERCISE_SECTIONS` gives, else None."""
    found: list[tuple[int | None, str, bool]] = []
    section: int | None = 0
    for line in notebook_text(path, "markdown").splitlines():
        if heading := re.match(r"##\s+(\d+)\s+·", line):
            section = int(heading[1])
        elif line.startswith("## ") and section:
            section = None  # the summary, the exercises: after the numbered sections
        for match in re.finditer(rf"\*\*[^*\d]+?(?P<id>{EXERCISE_ID})(?P<rest>[^*]*)\*\*", line):
            if match["id"].startswith(path.name[:2] + "."):
                where = EXERCISE_SECTIONS.get(match["id"]) if section is None else section
                found.append((where, match["id"], bool(match["rest"].strip())))
    return found


def _with_minutes(text: str, minutes: int) -> str:
    return _("{text} ({minutes} min)").format(text=text, minutes=minutes)


def _block_row(block: Block, notebooks: dict[str, NotebookInfo], left_out: list[str], folder: Path) -> tuple[str, int]:
    if block.notebook is None:
        text = _(block.text)
        if block.self_study and left_out:
            text = _("{text}; point to {notebooks} for self-study").format(text=text, notebooks=_and(left_out))
        if block.minutes is None:
            raise ValueError(f"Agenda block {block.text!r} needs minutes.")
        return _with_minutes(text, block.minutes), block.minutes
    if block.notebook not in notebooks:
        raise ValueError(f"An agenda names notebook {block.notebook}, which is not in the course map.")
    info = notebooks[block.notebook]
    row = f"`{_stem(info)}`"
    if block.text:
        row = _("{row}, {part}").format(row=row, part=_(block.text))
    if block.sections:
        available = notebook_sections(folder / info.file)
        missing = sorted(set(block.sections) - set(available))
        if missing:
            raise ValueError(f"{info.file} has no section(s) {missing}; its sections are {available}.")
        rest = [n for n in available if n not in block.sections]
        covered = _sections(block.sections)
        if rest:
            covered = _("{covered}; {rest} as homework").format(covered=covered, rest=_sections(rest))
        row = _("{row}, {part}").format(row=row, part=covered)
    exercises = block.exercises
    if exercises is None:
        posed = [(section, exercise) for section, exercise, stretch in posed_exercises(folder / info.file)
                 if not stretch]
        if block.sections and (unplaced := [exercise for section, exercise in posed if section is None]):
            raise ValueError(f"{info.file} poses {', '.join(unplaced)} after its numbered sections: give each its "
                             "section in EXERCISE_SECTIONS (tools/instructor_guide.py), or the block its exercises.")
        exercises = tuple(exercise for section, exercise in posed if not block.sections or section in block.sections)
    if exercises:
        listed = (_("exercises {ids}") if len(exercises) > 1 else _("exercise {ids}")).format(ids=_and(exercises))
        row = _("{row}; in the room: {exercises}").format(row=row, exercises=listed)
    minutes = info.minutes if block.minutes is None else block.minutes
    return _with_minutes(row, minutes), minutes


def agenda_table(blocks: Sequence[Block], notebooks: Sequence[NotebookInfo], folder: Path) -> tuple[list[str], int]:
    """Markdown rows (time, block) with start times computed from the durations; and the total minutes."""
    by_number = {info.file[:2]: info for info in notebooks}
    named = {b.notebook for b in blocks}
    left_out = [f"`{_stem(info)}`" for number, info in by_number.items() if number not in named]
    lines = [_("| time | block |"), "|---|---|"]
    start = 0
    for block in blocks:
        text, minutes = _block_row(block, by_number, left_out, folder)
        lines.append(f"| {clock(start)} | {text} |")
        start += minutes
    return lines, start


def advanced_blocks(notebooks: Sequence[NotebookInfo]) -> list[Block]:
    """Every course-map notebook that the full day leaves out, with a 10-minute break wherever the next notebook
    would make the stretch since the last break longer than :data:`ADVANCED_STRETCH` minutes."""
    in_full_day = {b.notebook for b in AGENDAS["full-day"][2] if b.notebook}
    blocks: list[Block] = []
    since_break = 0
    for info in (info for info in notebooks if info.file[:2] not in in_full_day):
        if since_break and since_break + info.minutes > ADVANCED_STRETCH:
            blocks.append(Block(N_("break"), 10))
            since_break = 0
        blocks.append(Block(notebook=info.file[:2]))
        since_break += info.minutes
    return blocks


def _agenda_title(name: str, total: int, purpose: str, breaks: bool) -> str:
    title = _("**{name} ({duration} with breaks)** — {purpose}") if breaks else _("**{name} ({duration})** — {purpose}")
    return title.format(name=name, duration=duration(total), purpose=purpose)


def agenda_notebooks(key: str, notebooks_dir: Path | None = None) -> list[str]:
    """The notebook numbers an agenda covers, in its order (``make learner AGENDA=key``); a ValueError naming the
    agendas there are for an unknown key. Usage: ``agenda_notebooks("half-day")`` -> ``["00", "01", ...]``"""
    if key == ADVANCED:
        blocks = advanced_blocks(course_map(notebooks_dir))
    elif key in AGENDAS:
        blocks = list(AGENDAS[key][2])
    else:
        raise ValueError(f"no agenda {key!r}: the instructor guide's agendas are {', '.join([*AGENDAS, ADVANCED])} "
                         "(tools/instructor_guide.py)")
    return list(dict.fromkeys(block.notebook for block in blocks if block.notebook))


def agendas_markdown(notebooks_dir: Path | None = None, lang: str = "en") -> str:
    """The guide's agendas: half day, full day, and (when the course has notebooks beyond the full day) the
    optional advanced block; ``lang="zh"``: in Chinese, from the Chinese notebooks' sections."""
    folder = NOTEBOOKS_DIR if notebooks_dir is None else Path(notebooks_dir)
    notebooks = course_map(folder)
    out: list[str] = []
    with in_language(lang):
        for key, (name, purpose, blocks) in AGENDAS.items():
            rows, total = agenda_table(blocks, notebooks, folder)
            out += [f"{_agenda_title(_(name), total, _(purpose), breaks=True)} `AGENDA={key}`", "", *rows, ""]
        extra = advanced_blocks(notebooks)
        if extra:
            rows, total = agenda_table(extra, notebooks, folder)
            breaks = any(block.notebook is None for block in extra)
            title = _agenda_title(_("Optional advanced block"), total,
                                  _("after the full day, or as a second half day; times from its own start."), breaks)
            out += [f"{title} `AGENDA={ADVANCED}`", "", *rows, ""]
    return "\n".join(out).rstrip()


def read_timings(path: Path = TIMINGS) -> dict[str, int]:
    """Measured run time in whole seconds by notebook stem (``{"00_start_here": 5, ...}``)."""
    if not path.exists():
        return {}
    return {name: int(seconds) for name, seconds in json.loads(path.read_text(encoding="utf-8"))["seconds"].items()}


def timings_markdown(notebooks_dir: Path | None = None, timings: dict[str, int] | None = None, lang: str = "en") -> str:
    """Run time (measured) and estimate (opening cell) per notebook; the totals are sums of the shown values."""
    notebooks = course_map(notebooks_dir)
    seconds = read_timings() if timings is None else timings
    with in_language(lang):
        lines = [_("| notebook | runs in | estimate |"), "|---|---|---|"]
        for info in notebooks:
            measured = seconds.get(_stem(info))
            run = _("not measured") if measured is None else _("{seconds} s").format(seconds=measured)
            lines.append(f"| `{_stem(info)}` | {run} | {_('{minutes} min').format(minutes=info.minutes)} |")
        measured_total = sum(seconds[_stem(i)] for i in notebooks if _stem(i) in seconds)
        unmeasured = sum(_stem(i) not in seconds for i in notebooks)
        run_total = f"**{_('{seconds} s').format(seconds=measured_total)}**"
        if unmeasured:
            run_total += _(" + {count} not measured (`make timings`)").format(count=unmeasured)
        total_minutes = _("{minutes} min").format(minutes=sum(i.minutes for i in notebooks))
        lines.append(_("| **total** | {run} | **{minutes}** |").format(run=run_total, minutes=total_minutes))
    return "\n".join(lines)


# -- the guide ----------------------------------------------------------------------------------------------
GENERATED: dict[str, Callable[..., str]] = {"timings": timings_markdown, "agendas": agendas_markdown}


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    text = new = GUIDE.read_text(encoding="utf-8")
    for name, generate in GENERATED.items():
        new = with_region(new, name, generate(), GUIDE.name)
    if new != text:
        GUIDE.write_text(new, encoding="utf-8")
    print(f"{GUIDE.relative_to(ROOT)}: timings and agendas {'updated' if new != text else 'already current'}")


if __name__ == "__main__":
    main()
