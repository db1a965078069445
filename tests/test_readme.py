"""The README stays true: its course map is the one generated from the notebooks, its commands exist."""

from __future__ import annotations

import re
from pathlib import Path

from course_utils.machinery.course import course_map, course_map_markdown

ROOT = Path(__file__).resolve().parent.parent


def readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_course_map_matches_the_notebooks() -> None:
    block = re.search(r"<!-- course-map:start.*?-->\n(.*?)\n<!-- course-map:end -->", readme(), re.DOTALL)
    assert block, "README lacks the course-map markers"
    assert block.group(1).strip() == course_map_markdown().strip(), (
        "README course map is stale; paste the output of "
        "`.venv/bin/python -c 'from course_utils.machinery.course import course_map_markdown; print(course_map_markdown())'`"
    )


def test_every_notebook_has_a_complete_opening() -> None:
    rows = course_map()
    assert [row.file for row in rows] == sorted(row.file for row in rows)
    for row in rows:
        assert row.title and row.learn and 1 <= row.minutes <= 120, row


def test_readme_make_targets_exist() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in set(re.findall(r"\bmake ([a-z][a-z-]+)", readme())):
        rule = rf"^(?:[\w-]+ )*{target}(?: [\w-]+)*:"  # a rule may name several targets
        assert re.search(rule, makefile, re.MULTILINE), f"README mentions `make {target}`, Makefile lacks it"
