"""The README stays true and short: a learner's first screen says what the course is and how to run it (the rest is
in CONTRIBUTING.md and the instructor guide), its course map is the generated one, its commands exist; the Chinese
README gives a Chinese reader the Chinese workspace first."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from course_utils.machinery import cloud
from course_utils.machinery.course import course_map, course_map_markdown

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("README.md", "README.*.md", "translations/*/README.po", "notebooks/[0-9][0-9]_*.ipynb",
                              "Makefile")

ROOT = Path(__file__).resolve().parent.parent
# The learner's part: everything above the course map. One screen of a laptop, about 2,500 characters of text.
FIRST_SCREEN_CHARACTERS = 2600
README_CHARACTERS = 9000


def readme(name: str = "README.md") -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def learner_part(text: str) -> str:
    return re.split(r"^## (?:Course map|课程地图)", text, flags=re.MULTILINE)[0]


def test_readme_course_map_matches_the_notebooks() -> None:
    block = re.search(r"<!-- course-map:start.*?-->\n(.*?)\n<!-- course-map:end -->", readme(), re.DOTALL)
    assert block, "README lacks the course-map markers"
    assert block.group(1).strip() == course_map_markdown(lang="en").strip(), "README course map is stale: run make sync"


def test_every_notebook_has_a_complete_opening() -> None:
    rows = course_map()
    assert [row.file for row in rows] == sorted(row.file for row in rows)
    for row in rows:
        assert row.title and row.learn and 1 <= row.minutes <= 120, row


def test_readme_make_targets_exist() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for name in ("README.md", "README.zh.md", "CONTRIBUTING.md"):
        for target in set(re.findall(r"\bmake ([a-z][a-z-]+)", readme(name))):
            rule = rf"^(?:[\w-]+ )*{target}(?: [\w-]+)*:"  # a rule may name several targets
            assert re.search(rule, makefile, re.MULTILINE), f"{name} mentions `make {target}`, Makefile lacks it"


def test_a_learner_reads_what_the_course_is_and_how_to_run_it_in_one_screen() -> None:
    text = readme()
    first = learner_part(text)
    assert len(first) <= FIRST_SCREEN_CHARACTERS, f"the README's learner part is {len(first)} characters"
    assert len(text) <= README_CHARACTERS, f"the README is {len(text)} characters: move detail to CONTRIBUTING.md"
    for needed in ("make lab", "make test", "Colab", "README.zh.md", "COURSE_LANG=zh", cloud.site_url(),
                   "00_start_here.ipynb", "check("):
        assert needed in first, f"the README's first screen does not say {needed!r}"
    assert "](CONTRIBUTING.md)" in text and "](notebooks/instructor_guide.md)" in text


def test_how_the_course_is_built_and_the_classroom_live_in_their_guides() -> None:
    text = readme()
    for moved in ("nbval-portable", "Why Sphinx", "make hub-remove-learner", "## Layout", "axe-core"):
        assert moved not in text, f"{moved!r} belongs in CONTRIBUTING.md or the instructor guide, not the README"
    contributing = readme("CONTRIBUTING.md")
    assert "make nbval-portable" in contributing and "Why Sphinx" in contributing
    guide = readme("notebooks/instructor_guide.md")
    assert "](../CONTRIBUTING.md)" in guide and "make hub" in guide and "make learner" in guide


def test_the_chinese_readme_opens_the_chinese_workspace_first_and_speaks_chinese() -> None:
    text = readme("README.zh.md")
    first = learner_part(text)
    commands = re.search(r"```bash\n(.*?)```", first, re.DOTALL)[1].splitlines()
    assert commands[0].startswith("make lab COURSE_LANG=zh"), commands
    assert "**在线打开：Colab · Kaggle**" in first and "Open in" not in first
    verified = re.search(r"<!-- verified:[^\n]*-->\n(.*?)<!-- /verified -->", text, re.DOTALL)[1]
    assert verified.startswith("| 笔记本 |") and "通过" in verified and "passed" not in verified
    assert "(Colab's packages of" not in verified
