"""The instructor guide's timings and agendas are the generated ones, and the generator adds up correctly."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from course_utils.machinery.course import course_map
from course_utils.machinery.layout import EXERCISE_ID
from tools import instructor_guide
from tools.repo import region

ROOT = Path(__file__).resolve().parent.parent

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("notebooks/instructor_guide.md", "notebooks/*/instructor_guide.md",
                              "translations/*/instructor_guide.po", "tools/notebook_timings.json",
                              "course_utils/machinery/locale/*/generated.po", "notebooks/[0-9][0-9]_*.ipynb")

FIX = "run `.venv/bin/python -m tools.instructor_guide` (or `make timings` to measure again)"


def guide() -> str:
    return instructor_guide.GUIDE.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(instructor_guide.GENERATED))
def test_guide_tables_equal_the_generated_ones(name: str) -> None:
    held = region(name).search(guide())
    assert held is not None, f"instructor_guide.md lacks the <!-- {name}:start --> / <!-- {name}:end --> markers"
    assert held[2].strip() == instructor_guide.GENERATED[name]().strip(), f"the guide's {name} are stale: {FIX}"


def _minutes(text: str) -> int:
    match = re.fullmatch(r"(?:(\d+) h)?\s*(?:(\d+) min)?", text.strip())
    assert match and any(match.groups()), text
    return int(match.group(1) or 0) * 60 + int(match.group(2) or 0)


def test_agenda_times_add_up_when_read_back_from_the_text() -> None:
    """Read the rendered agendas as an instructor would: each start = previous start + its minutes; title = sum."""
    assert_times_add_up(instructor_guide.agendas_markdown())


def assert_times_add_up(text: str) -> None:
    agendas = re.findall(r"\*\*([^*(]+) \(([^)]+?)(?: with breaks)?\)\*\*.*?\n\n((?:\|.*\n?)+)", text)
    names = [name for name, _purpose, _blocks in instructor_guide.AGENDAS.values()]
    assert [a[0] for a in agendas][:len(names)] == names  # an instructor's own agenda too
    assert len(agendas) == len(names) + ("Optional advanced block" in text)
    for name, total, table in agendas:
        rows = re.findall(r"^\| (\d+):(\d\d) \| .*\((\d+) min\) \|$", table, re.MULTILINE)
        assert rows, name
        clock = 0
        for hours, minutes, length in rows:
            assert int(hours) * 60 + int(minutes) == clock, (name, hours, minutes)
            clock += int(length)
        assert clock == _minutes(total), (name, total, clock)


def test_the_opening_names_the_agendas_the_guide_holds() -> None:
    """The guide's first paragraph promises what the Agendas section really shows (half day, full day and, when the
    course has notebooks beyond the full day, the optional advanced block) -- no fixed count that can go stale."""
    opening = guide().split("\n## ", 1)[0].split("How to run", 1)[1].split("\n\n", 1)[0].lower()
    agendas = instructor_guide.agendas_markdown()
    assert not re.search(r"\b(two|three|four) agendas\b", opening), opening
    assert "half day" in opening and "full day" in opening
    assert ("advanced block" in opening) == ("**Optional advanced block" in agendas), opening


def test_full_day_and_advanced_block_cover_every_notebook_once_with_breaks() -> None:
    text = instructor_guide.agendas_markdown()
    full_day = text.split("**Full day")[1]
    named = re.findall(r"`(\d\d_\w+)`", full_day)
    assert sorted(named) == [row.file.removesuffix(".ipynb") for row in course_map()]
    assert_no_long_stretch(full_day.split("**Optional advanced block")[1])  # a break at least every 90 minutes


def test_timings_total_is_the_sum_of_the_shown_values() -> None:
    table = instructor_guide.timings_markdown()
    seconds = [int(s) for s in re.findall(r"^\| `\w+` \| (\d+) s \|", table, re.MULTILINE)]
    minutes = [int(m) for m in re.findall(r"^\| `\w+` \| .*? \| (\d+) min \|$", table, re.MULTILINE)]
    assert f"**{sum(seconds)} s**" in table and f"**{sum(minutes)} min**" in table
    assert len(minutes) == len(course_map())


def assert_no_long_stretch(agenda: str) -> None:
    """No more than ADVANCED_STRETCH minutes without a break, but for one notebook that long on its own."""
    stretch: list[int] = []
    for block, minutes in re.findall(r"^\| \d+:\d\d \| (.*?) \((\d+) min\) \|$", agenda, re.MULTILINE):
        stretch = [] if block == "break" else [*stretch, int(minutes)]
        assert len(stretch) == 1 or sum(stretch) <= instructor_guide.ADVANCED_STRETCH, (block, stretch)


def test_a_row_covering_some_sections_names_the_exercises_of_those_sections() -> None:
    """Exercises posed under a notebook's closing "## Exercises" belong to the section EXERCISE_SECTIONS gives: the
    half day's 02 row (sections 1–3) names 02.1 (handles, section 1) and 02.2 (a leaf's accumulation, section 3)."""
    half_day = instructor_guide.agendas_markdown().split("**Full day")[0]
    assert "`02_hook_lifecycle`, sections 1–3; sections 4 and 5 as homework; in the room: exercises 02.1 and 02.2" \
        in half_day
    assert "sections 3 and 4 as homework; in the room: exercise 04.1 (" in half_day
    path = next(instructor_guide.NOTEBOOKS_DIR.glob("03_*.ipynb"))  # its exercises: all under "## Exercises"
    assert {section for section, _id, _stretch in instructor_guide.posed_exercises(path)} == {None}


def test_new_notebooks_join_the_advanced_block_and_the_timings(tmp_path: Path) -> None:
    for path in sorted(instructor_guide.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb")):
        shutil.copy(path, tmp_path / path.name)
    template = json.loads((tmp_path / "00_start_here.ipynb").read_text(encoding="utf-8"))
    for number in ("91", "92", "93"):
        template["cells"][0]["source"] = f"# {number} · Extra\n**You will learn** more.\n**Estimated time:** 30 min\n"
        (tmp_path / f"{number}_extra.ipynb").write_text(json.dumps(template), encoding="utf-8")
    agendas = instructor_guide.agendas_markdown(tmp_path)
    advanced = agendas.split("**Optional advanced block")[1]
    assert_times_add_up(agendas)
    extra = len(course_map(tmp_path)) - len(instructor_guide.agenda_notebooks("full-day"))
    assert extra > 3 and advanced.count("| break (10 min) |") >= 1
    assert_no_long_stretch(advanced)
    assert all(f"`{n}_extra` (30 min)" in advanced for n in ("91", "92", "93"))
    assert "`91_extra`" in agendas.split("**Full day")[0]  # the half day points to it for self-study
    timings = instructor_guide.timings_markdown(tmp_path, timings={"00_start_here": 4})
    unmeasured = len(course_map(tmp_path)) - 1
    assert "| `91_extra` | not measured | 30 min |" in timings and f"**4 s** + {unmeasured} not measured" in timings


@pytest.mark.parametrize(("block", "error"), [
    (instructor_guide.Block(notebook="02", sections=(9,), minutes=5), "no section"),
    (instructor_guide.Block(notebook="77"), "not in the course map"),
    (instructor_guide.Block(notebook="03", sections=(1,), minutes=5),  # 03 poses its exercises after its sections
     "03.1, 03.2 after its numbered sections: give each its section"),
])
def test_a_block_the_generator_cannot_place_is_a_clear_error(block: instructor_guide.Block, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        instructor_guide.agenda_table([block], course_map(), instructor_guide.NOTEBOOKS_DIR)


def test_the_chinese_guide_gets_the_tables_generated_in_chinese_and_never_translates_them() -> None:
    """A changed number or a new notebook needs no new translation: the tables are generated in Chinese from the
    catalogue (tools/i18n/messages.py) when the Chinese guide is built, and are no entries of its PO file."""
    from tools.i18n import editions

    clock = re.compile(r"^\| (\d+:\d\d) \|", re.MULTILINE)
    for name in instructor_guide.GENERATED:
        english, chinese = instructor_guide.GENERATED[name](), instructor_guide.GENERATED[name](lang="zh")
        assert clock.findall(chinese) == clock.findall(english) and "分钟" in chinese and " min" not in chinese, name
        built = editions.built_guide("zh", "notebooks/instructor_guide.md")
        assert chinese in built, f"the Chinese guide's {name} are not the generated Chinese ones"
    units = "\n".join(unit.english for unit in editions.guide_units("notebooks/instructor_guide.md"))
    assert "| 0:00 |" not in units and "| `00_start_here` |" not in units


def test_each_agenda_names_the_exercises_in_the_room_and_builds_its_own_editions(tmp_path: Path) -> None:
    """The exercises of a row are those its notebook poses in the sections the row covers, but the stretch one; the
    agenda's key, shown in its title, builds the learner edition of its notebooks only."""
    from tools import build_editions

    text = instructor_guide.agendas_markdown()
    for key in (*instructor_guide.AGENDAS, instructor_guide.ADVANCED):
        assert f"`AGENDA={key}`" in text
    rows = re.findall(r"^\| \d+:\d\d \| `(\d\d)_\w+`(.*?)\((\d+) min\) \|$", text, re.MULTILINE)
    for number, row, _minutes in rows:
        path = next(instructor_guide.NOTEBOOKS_DIR.glob(f"{number}_*.ipynb"))
        posed = {exercise: (section, stretch) for section, exercise, stretch in instructor_guide.posed_exercises(path)}
        named = [m[0] for m in re.finditer(EXERCISE_ID, row.split("in the room:")[1])] if "in the room:" in row else []
        assert set(named) <= set(posed) and not any(posed[e][1] for e in named), row
        covered = [int(n) for n in re.findall(r"\d+",
                                              row.split("sections ")[1].split(";")[0])] if "sections" in row else []
        assert all(posed[e][0] in covered for e in named) if covered else True, row
    assert any("in the room: exercises" in row for _number, row, _minutes in rows)
    half_day = instructor_guide.agenda_notebooks("half-day")
    build_editions.main(["learner", "--agenda", "half-day", "--out", str(tmp_path)])
    assert sorted(p.name[:2] for p in (tmp_path / "learner").glob("*.ipynb")) == sorted(half_day)
    build_editions.main(["learner", "--notebooks", "1", "--lang", "zh", "--out", str(tmp_path)])
    assert [p.name[:2] for p in (tmp_path / "zh" / "learner").glob("*.ipynb")] == ["01"]
    with pytest.raises(ValueError, match="no agenda 'nope': the instructor guide's agendas are half-day"):
        instructor_guide.agenda_notebooks("nope")
