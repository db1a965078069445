"""Every exercise's check accepts correct answers written differently from the solution and rejects typical
wrong ones with a useful message; the course has the shape issue 12 asks for (hands-on, hints, stretch)."""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from pathlib import Path

import pytest
import torch

from course_utils.machinery import checks
from course_utils.machinery.checks import _reset_hints, all_exercises, check
from course_utils.machinery.course import course_map, read_opening
from course_utils.machinery.exercise_kit import Status
from tests.exercise_cases import all_cases
from tests.session_state import same_session, session_state

ROOT = Path(__file__).resolve().parent.parent
CATALOGUE = all_exercises()
CASES = all_cases()
# Where an author reads these rules (CONTRIBUTING.md, one line per rule).
RULES = "CONTRIBUTING.md, section \"Exercise rules\" (#exercise-rules)"
# A notebook without exercises says why in its notebook metadata (a short notebook an instructor adds, say).
NO_EXERCISES = "no_exercises"


def test_every_exercise_has_cases_and_no_cases_are_orphans() -> None:
    problems = []
    for exercise_id in CATALOGUE:
        cases = CASES.get(exercise_id)
        if cases is None:
            problems.append(f"{exercise_id}: no entry in tests/exercise_cases/nb{exercise_id[:2]}.py")
            continue
        if len(cases.right) < 1:
            problems.append(f"{exercise_id}: needs >= 1 correct answer written differently from the solution")
        if len(cases.wrong) < 2:
            problems.append(f"{exercise_id}: needs >= 2 typical wrong answers")
    problems += [f"{orphan}: cases for an exercise that does not exist (define it in the EXERCISES of "
                 f"course_utils/machinery/exercises/nb{orphan[:2]}.py)"
                 for orphan in sorted(set(CASES) - set(CATALOGUE))]
    assert not problems, f"rule 'cases' ({RULES}):\n" + "\n".join(problems)


def _cases(kind: str) -> list[tuple[str, int]]:
    """(exercise id, index) of every case of ``kind`` ("right", "wrong" or "endless")."""
    return [(eid, i) for eid, cases in sorted(CASES.items()) if eid in CATALOGUE
            for i in range(len(getattr(cases, kind)))]


@pytest.mark.parametrize(("exercise_id", "index"), _cases("right"), ids=lambda v: str(v))
def test_check_accepts_a_correct_answer_written_differently(exercise_id: str, index: int,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    before = session_state()
    verdict = check(exercise_id, CASES[exercise_id].right[index])
    out = capsys.readouterr().out
    assert verdict, out
    assert same_session(before, session_state()), f"check({exercise_id!r}, ...) changed the learner's session"
    assert out.startswith(f"✓ Exercise {exercise_id}: correct.")


@pytest.mark.parametrize(("exercise_id", "index"), _cases("wrong"), ids=lambda v: str(v))
def test_check_rejects_a_typical_wrong_answer_with_a_useful_message(exercise_id: str, index: int,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    answer, expected_words = CASES[exercise_id].wrong[index]
    before = session_state()
    verdict = check(exercise_id, answer)
    out = capsys.readouterr().out
    assert not verdict, f"{exercise_id} accepted a wrong answer: {out}"
    assert same_session(before, session_state()), f"check({exercise_id!r}, ...) changed the learner's session"
    assert out.startswith(f"✗ Exercise {exercise_id}: not yet.")
    assert expected_words in out, f"{exercise_id}: expected {expected_words!r} in {out!r}"
    assert "bug in the course" not in out, out


@pytest.mark.timeout(180)
@pytest.mark.parametrize(("exercise_id", "index"), _cases("endless"), ids=lambda v: str(v))
def test_check_stops_an_answer_that_never_ends(exercise_id: str, index: int, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """At the time limit (6 s here, for the test's sake) the answer is stopped, and the session goes on."""
    shorter = dataclasses.replace(CATALOGUE[exercise_id], time_limit_s=6.0)
    monkeypatch.setattr(checks, "catalogue", lambda: {**CATALOGUE, exercise_id: shorter})
    before, started = session_state(), time.monotonic()
    verdict = check(exercise_id, CASES[exercise_id].endless[index])
    assert verdict.status is Status.TIMED_OUT and "did not finish in 6 s" in capsys.readouterr().out
    assert time.monotonic() - started < 90 and same_session(before, session_state())
    assert not torch.distributed.is_initialized()


def hands_on_problems(exercises: dict[str, list], reasons: dict[str, str | None]) -> list[str]:
    """What breaks the hands-on rule: per notebook number, its exercises and the reason it gives for having none."""
    problems = []
    for number, reason in reasons.items():
        items = exercises.get(number, [])
        if number == "00":
            continue
        if reason is not None:
            if not (isinstance(reason, str) and reason.strip()):
                problems.append(f"notebook {number}: its metadata {NO_EXERCISES!r} must say why, as a string")
            elif items:
                problems.append(f"notebook {number}: says {NO_EXERCISES!r} but has exercises {[i.id for i in items]}")
            continue
        if len(items) < 3:
            problems.append(f"notebook {number}: {len(items)} exercises (at least 3, or {NO_EXERCISES!r} with the "
                            "reason in the notebook's metadata; they are counted from the EXERCISES of "
                            f"course_utils/machinery/exercises/nb{number}.py)")
        stretches = [item.id for item in items if item.stretch]
        if len(stretches) != 1:
            problems.append(f"notebook {number}: stretch exercises {stretches} (exactly one, marked stretch = true in "
                            f"its table of course_utils/machinery/exercises/nb{number}.toml and \"(stretch)\" in its "
                            "statement)")
    return problems


def test_the_course_is_hands_on() -> None:
    """Issue 12: >= 3 exercises in every notebook 01+, one stretch each, >= 2/3 of all make the learner write hooks;
    a notebook with none says why in its metadata."""
    per_notebook: dict[str, list] = {}
    for item in CATALOGUE.values():
        per_notebook.setdefault(item.notebook, []).append(item)
    reasons = {path.name[:2]: json.loads(path.read_text(encoding="utf-8"))["metadata"].get(NO_EXERCISES)
               for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}
    problems = hands_on_problems(per_notebook, reasons)
    kinds = Counter(item.kind for item in CATALOGUE.values())
    assert 3 * kinds["write"] >= 2 * len(CATALOGUE), (
        f"rule 'hands-on' ({RULES}): only {kinds['write']} of {len(CATALOGUE)} write hooks: {kinds}")
    assert not problems, f"rule 'hands-on' ({RULES}):\n" + "\n".join(problems)


def test_the_hands_on_rule_names_what_is_missing_and_takes_a_reason() -> None:
    class Item:
        def __init__(self, exercise_id: str, stretch: bool = False) -> None:
            self.id, self.stretch = exercise_id, stretch

    full = [Item("13.1"), Item("13.2"), Item("13.3", stretch=True)]
    assert hands_on_problems({"13": full}, {"13": None}) == []
    assert hands_on_problems({}, {"13": "a four-cell case study: read it, then do 12.5"}) == []
    assert "at least 3" in hands_on_problems({"13": full[:1]}, {"13": None})[0]
    assert "exactly one" in hands_on_problems({"13": full[:2] + [Item("13.4")]}, {"13": None})[0]
    assert "must say why" in hands_on_problems({}, {"13": ""})[0]
    assert "but has exercises" in hands_on_problems({"13": full}, {"13": "none"})[0]


def test_every_exercise_has_hints_that_come_one_by_one(capsys: pytest.CaptureFixture[str]) -> None:
    from course_utils.machinery.checks import hint

    _reset_hints()
    try:
        for exercise_id, item in CATALOGUE.items():
            assert len(item.hints) >= 1, f"{exercise_id} has no hint"
            for number, text in enumerate(item.hints, start=1):
                hint(exercise_id)
                out = capsys.readouterr().out
                assert out.startswith(f"Hint {number}/{len(item.hints)} for exercise {exercise_id}: {text}")
            hint(exercise_id)
            assert "complete notebook" in capsys.readouterr().out
    finally:
        _reset_hints()


def _notebook_sources() -> dict[str, list[dict]]:
    return {path.name: json.loads(path.read_text(encoding="utf-8"))["cells"]
            for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))}


def test_every_exercise_is_posed_and_checked_in_its_own_notebook() -> None:
    notebooks = _notebook_sources()
    by_number = {name[:2]: cells for name, cells in notebooks.items()}
    for exercise_id, item in CATALOGUE.items():
        cells = by_number.get(item.notebook)
        assert cells is not None, f"{exercise_id}: no notebook {item.notebook}_*.ipynb"
        text = ["".join(cell["source"]) for cell in cells]
        heading = f"**Exercise {exercise_id}" + (" (stretch)**" if item.stretch else "**")
        where = f"rule 'posed and checked' ({RULES})"
        assert any(heading in t for t in text), f"{exercise_id}: no markdown heading {heading!r}; {where}"
        checked = [c for c, t in zip(cells, text) if f'check("{exercise_id}"' in t]
        assert len(checked) == 1, (f"{exercise_id} is checked in {len(checked)} cells (exactly one, its solution "
                                   f"cell); {where}")
        assert "solution" in checked[0]["metadata"].get("tags", []), (
            f"{exercise_id}: the check cell is not a solution cell (### BEGIN SOLUTION markers, then make sync); "
            f"{where}")


def test_course_map_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="No course notebooks"):
        course_map(tmp_path)
    bad = tmp_path / "01_x.ipynb"
    bad.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": "# Title only"}]}))
    with pytest.raises(ValueError, match="lacks learn, minutes"):
        read_opening(bad)
