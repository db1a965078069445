"""CONTRIBUTING.md, the author's guide, stays true: each notebook rule is stated once in its "Notebook rules" section,
the sections the tests' messages point to exist, and every command, tool, test file and test it names exists (that
the README and the instructor guide link it: test_readme.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from notebook_hygiene import GUIDE_SECTION, RULES

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("CONTRIBUTING.md", "Makefile")

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "CONTRIBUTING.md"
RECIPES = ("Change prose", "Add or change an exercise", "Add a notebook", "Remove a notebook",
           "Add a figure with alt text", "Update a translation", "A fork whose translation lags")


def text() -> str:
    return GUIDE.read_text(encoding="utf-8")


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


def section(title: str) -> str:
    return re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ )", text(), re.MULTILINE | re.DOTALL)[1]


def test_it_has_the_recipes_and_the_sections_the_tests_point_to() -> None:
    headings = re.findall(r"^#+ (.+)$", text(), re.MULTILINE)
    for title in ("The loop", "How the course is built", *RECIPES, "Notebook rules", "Exercise rules",
                  "Translation rules", "How the course is checked"):
        assert title in headings, f"CONTRIBUTING.md lacks the section {title!r}"
    anchors = {anchor(heading) for heading in headings}
    for target in re.findall(r"\]\(#([\w-]+)\)", text()) + re.findall(r"\(#([\w-]+)\)", GUIDE_SECTION):
        assert target in anchors, f"CONTRIBUTING.md links #{target}, a section it does not have"


def test_each_notebook_rule_is_stated_once_in_its_section() -> None:
    rules = section("Notebook rules")
    for rule in RULES:
        assert rules.count(f"- **{rule}**:") == 1, f"the notebook rule {rule!r} is not stated (once) in CONTRIBUTING.md"


def test_every_command_tool_test_file_and_test_it_names_exists() -> None:
    guide = text()
    for module in set(re.findall(r"python -m ((?:tools|course_utils)[\w.]*)", guide)) - {"tools.X"}:
        assert importlib.util.find_spec(module) is not None, f"CONTRIBUTING.md runs python -m {module}: no such module"
    for path in set(re.findall(r"`((?:tests|tools|course_utils|notebooks|translations)/[\w./-]+?)(?:::(\w+))?`",
                               guide)):
        name, test = path
        if "NN" in name or "*" in name:
            continue
        assert (ROOT / name).exists(), f"CONTRIBUTING.md names {name}, which does not exist"
        if test:
            assert re.search(rf"^def {test}\(", (ROOT / name).read_text(encoding="utf-8"), re.MULTILINE), (
                f"CONTRIBUTING.md names {name}::{test}, which does not exist")


def test_the_website_links_it_on_the_repository() -> None:
    """The guide's relative link works on GitHub; on the website (which has no CONTRIBUTING.md page) it points to the
    repository's copy, and links to pages of the site stay as they are."""
    from tools.site.build import repository_links

    for guide in (ROOT / "notebooks" / "instructor_guide.md", ROOT / "notebooks" / "zh" / "instructor_guide.md"):
        staged = repository_links(guide.read_text(encoding="utf-8"), guide)
        assert "CONTRIBUTING.md)" in staged and "](../CONTRIBUTING.md)" not in staged
        assert re.search(r"\]\(https://github\.com/[\w.-]+/[\w.-]+/blob/\w+/CONTRIBUTING\.md\)", staged), guide.name
    zh = ROOT / "notebooks" / "zh" / "instructor_guide.md"
    assert "](../instructor_guide.md)" in repository_links(zh.read_text(encoding="utf-8"), zh)  # the twin: a page
