"""The instructor guide's generated tables: notebook timings and the workshop agendas.

Sums, start times and durations are computed here, never typed: the notebooks, their order and their minutes come
from the course map (each notebook's opening cell, ``course_utils.machinery.course``), the measured run times from
``tools/notebook_timings.json`` (written by ``make timings``), and the agendas from the blocks below. A notebook
that is in the course map but in no agenda block (notebooks 08 and later, say) lands in the optional advanced
block by itself. ``tests/test_instructor_guide.py`` keeps the guide equal to what this prints.

Usage: ``python -m tools.instructor_guide`` rewrites the tables between the ``<!-- timings:start ... -->`` /
``<!-- agendas:start ... -->`` markers of ``notebooks/instructor_guide.md``; ``--check`` only says whether they
are current.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from course_utils.machinery.course import NOTEBOOKS_DIR, NotebookInfo, course_map

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "notebooks" / "instructor_guide.md"
TIMINGS = Path(__file__).resolve().parent / "notebook_timings.json"


# -- agenda data --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Block:
    """One row of an agenda: a notebook (``notebook="03"``) or anything else (a break, questions).

    A notebook block lasts the notebook's estimated minutes unless ``minutes`` says otherwise (when only some
    ``sections`` are covered; the rest are named as homework).
    """

    text: str = ""
    minutes: int | None = None
    notebook: str | None = None
    sections: tuple[int, ...] = ()
    self_study: bool = False  # "point to <the notebooks this agenda leaves out> for self-study"


HALF_DAY = (
    Block("together: how self-checks and the then-vs-now boxes work", notebook="00"),
    Block(notebook="01"),
    Block(notebook="02", sections=(1, 2, 3), minutes=20),
    Block("break", 15),
    Block(notebook="03"),
    Block(notebook="04", sections=(1, 2, 5), minutes=30),
    Block("break", 10),
    Block("as a guided demo", notebook="06", sections=(1, 2, 5), minutes=35),
    Block("questions", 15, self_study=True),
)
FULL_DAY = (
    Block(notebook="00"),
    Block(notebook="01"),
    Block(notebook="02"),
    Block("break", 15),
    Block(notebook="03"),
    Block(notebook="04"),
    Block("lunch", 60),
    Block(notebook="05"),
    Block("break", 10),
    Block("including the explorer widget", notebook="06"),
    Block(notebook="07"),
    Block("open questions, wrap-up", 20),
)
AGENDAS = (
    ("Half day", "the hook system, then one application.", HALF_DAY),
    ("Full day", "notebooks 00–07, in order.", FULL_DAY),
)
ADVANCED_BREAK_EVERY = 2  # a 10-minute break after every second advanced notebook


# -- rendering ----------------------------------------------------------------------------------------------
def _stem(info: NotebookInfo) -> str:
    return info.file.removesuffix(".ipynb")


def _by_number(notebooks: Sequence[NotebookInfo]) -> dict[str, NotebookInfo]:
    return {info.file[:2]: info for info in notebooks}


def duration(minutes: int) -> str:
    """``210`` -> ``"3 h 30 min"``; ``45`` -> ``"45 min"``."""
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if hours and rest else f"{hours} h" if hours else f"{rest} min"


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
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def notebook_sections(path: Path) -> list[int]:
    """The numbers of a notebook's ``## N · Title`` sections."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                     for c in cells if c["cell_type"] == "markdown")
    return [int(n) for n in re.findall(r"^##\s+(\d+)\s+·", text, re.MULTILINE)]


def _block_row(block: Block, notebooks: dict[str, NotebookInfo], left_out: list[str], folder: Path) -> tuple[str, int]:
    if block.notebook is None:
        text = block.text
        if block.self_study:
            text += f"; point to {_and(left_out)} for self-study" if left_out else ""
        if block.minutes is None:
            raise ValueError(f"Agenda block {block.text!r} needs minutes.")
        return f"{text} ({block.minutes} min)", block.minutes
    if block.notebook not in notebooks:
        raise ValueError(f"An agenda names notebook {block.notebook}, which is not in the course map.")
    info = notebooks[block.notebook]
    parts = [f"`{_stem(info)}`"]
    if block.text:
        parts.append(block.text)
    if block.sections:
        available = notebook_sections(folder / info.file)
        missing = sorted(set(block.sections) - set(available))
        if missing:
            raise ValueError(f"{info.file} has no section(s) {missing}; its sections are {available}.")
        rest = [n for n in available if n not in block.sections]
        covered = f"section{'s' if len(block.sections) > 1 else ''} {_ranges(block.sections)}"
        if rest:
            covered += f"; section{'s' if len(rest) > 1 else ''} {_ranges(rest)} as homework"
        parts.append(covered)
    minutes = info.minutes if block.minutes is None else block.minutes
    return f"{', '.join(parts)} ({minutes} min)", minutes


def agenda_table(blocks: Sequence[Block], notebooks: Sequence[NotebookInfo], folder: Path) -> tuple[list[str], int]:
    """Markdown rows (time, block) with start times computed from the durations; and the total minutes."""
    by_number = _by_number(notebooks)
    named = {b.notebook for b in blocks}
    left_out = [f"`{_stem(info)}`" for number, info in by_number.items() if number not in named]
    lines = ["| time | block |", "|---|---|"]
    start = 0
    for block in blocks:
        text, minutes = _block_row(block, by_number, left_out, folder)
        lines.append(f"| {clock(start)} | {text} |")
        start += minutes
    return lines, start


def advanced_blocks(notebooks: Sequence[NotebookInfo]) -> list[Block]:
    """Every course-map notebook that the full day leaves out, a break after every second one."""
    in_full_day = {b.notebook for b in FULL_DAY if b.notebook}
    blocks: list[Block] = []
    extra = [info for info in notebooks if info.file[:2] not in in_full_day]
    for index, info in enumerate(extra, start=1):
        blocks.append(Block(notebook=info.file[:2]))
        if index % ADVANCED_BREAK_EVERY == 0 and index < len(extra):
            blocks.append(Block("break", 10))
    return blocks


def agendas_markdown(notebooks_dir: Path | None = None) -> str:
    """The guide's agendas: half day, full day, and (when the course has notebooks beyond the full day) the
    optional advanced block."""
    folder = NOTEBOOKS_DIR if notebooks_dir is None else Path(notebooks_dir)
    notebooks = course_map(folder)
    out: list[str] = []
    for name, purpose, blocks in AGENDAS:
        rows, total = agenda_table(blocks, notebooks, folder)
        out += [f"**{name} ({duration(total)} with breaks)** — {purpose}", "", *rows, ""]
    extra = advanced_blocks(notebooks)
    if extra:
        rows, total = agenda_table(extra, notebooks, folder)
        breaks = " with breaks" if any(block.notebook is None for block in extra) else ""
        out += [
            f"**Optional advanced block ({duration(total)}{breaks})** — after the full day, or as a second "
            "half day; times from its own start.",
            "",
            *rows,
            "",
        ]
    return "\n".join(out).rstrip()


def read_timings(path: Path = TIMINGS) -> dict[str, int]:
    """Measured run time in whole seconds by notebook stem (``{"00_start_here": 5, ...}``)."""
    if not path.exists():
        return {}
    return {name: int(seconds) for name, seconds in json.loads(path.read_text(encoding="utf-8"))["seconds"].items()}


def timings_markdown(notebooks_dir: Path | None = None, timings: dict[str, int] | None = None) -> str:
    """Run time (measured) and estimate (opening cell) per notebook; the totals are sums of the shown values."""
    notebooks = course_map(notebooks_dir)
    seconds = read_timings() if timings is None else timings
    lines = ["| notebook | runs in | estimate |", "|---|---|---|"]
    for info in notebooks:
        measured = seconds.get(_stem(info))
        lines.append(f"| `{_stem(info)}` | {'not measured' if measured is None else f'{measured} s'} | {info.minutes} min |")
    measured_total = sum(seconds[_stem(i)] for i in notebooks if _stem(i) in seconds)
    unmeasured = sum(_stem(i) not in seconds for i in notebooks)
    run_total = f"**{measured_total} s**" + (f" + {unmeasured} not measured (`make timings`)" if unmeasured else "")
    lines.append(f"| **total** | {run_total} | **{sum(i.minutes for i in notebooks)} min** |")
    return "\n".join(lines)


# -- the guide ----------------------------------------------------------------------------------------------
GENERATED = {"timings": timings_markdown, "agendas": agendas_markdown}


def _block(name: str) -> re.Pattern[str]:
    return re.compile(rf"(<!-- {name}:start[^\n]*-->)\n(.*?)\n?(<!-- {name}:end -->)", re.DOTALL)


def guide_block(name: str, text: str) -> str | None:
    """What the guide holds between a pair of markers (``None`` when the markers are missing)."""
    match = _block(name).search(text)
    return None if match is None else match.group(2)


def updated_guide(text: str) -> str:
    for name, generate in GENERATED.items():
        pattern = _block(name)
        if not pattern.search(text):
            raise SystemExit(f"{GUIDE.name} lacks the <!-- {name}:start ... --> / <!-- {name}:end --> markers.")
        text = pattern.sub(lambda m, body=generate(): f"{m.group(1)}\n{body}\n{m.group(3)}", text, count=1)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether the guide is current")
    args = parser.parse_args()
    text = GUIDE.read_text(encoding="utf-8")
    new = updated_guide(text)
    if args.check:
        raise SystemExit(0 if new == text else f"{GUIDE.relative_to(ROOT)} is stale: run python -m tools.instructor_guide")
    if new != text:
        GUIDE.write_text(new, encoding="utf-8")
    print(f"{GUIDE.relative_to(ROOT)}: timings and agendas {'updated' if new != text else 'already current'}")


if __name__ == "__main__":
    main()
