"""The course's website (``make site``: ``python -m tools.site``), read from the files it writes: every page in both
languages with the right ``<html lang>`` and a switch to its twin, the launch buttons and the "report a problem" and
"last verified" lines of every notebook page from ``course_utils.machinery.cloud``, figures with alt text, a search
index that finds the course's words in English and in Chinese, and a publishing workflow.

The site is built once per run (``course_site``, tests/conftest.py) and shared with tests/browser/test_site.py, which
opens every page in Chromium. A small fixture site checks that alt text is read from wherever an output carries it.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_utils.machinery import cloud
from course_utils.machinery.report_problem import notebook_problem_url
from tools.site import extension
from tools.site.build import Edition, sphinx_command

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("tools/site/landing*.md", "translations/*/landing.po")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LANGS = {"en": "", "zh": "zh/"}
GUIDE_PAGES = ("index", "hooks_cheatsheet", "instructor_guide")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="



def page(site: Path, lang: str, name: str) -> str:
    return (site / f"{LANGS[lang]}{name}.html").read_text(encoding="utf-8")


def main_part(text: str) -> str:
    """The article of a page, without the theme's header, sidebars and footer."""
    match = re.search(r'<article class="bd-article">(.*?)</article>', text, re.DOTALL)
    assert match, "no <article class=\"bd-article\"> in the page"
    return match[1]


def figures(text: str) -> list[tuple[str, str | None]]:
    """(src, alt) of each image of a page's article that a notebook output made: an ``image/png`` output myst-nb
    writes to _images/, or the ``<img src="data:...">`` of a ``text/html`` output, which myst-nb prefers and copies
    as it is (every figure ``course_utils.figures.show_figure`` shows)."""
    found = []
    for tag in re.findall(r"<img\b[^>]*>", main_part(text)):
        src = re.search(r'src="([^"]+)"', tag)
        alt = re.search(r'alt="([^"]*)"', tag)
        if src and ("_images/" in src[1] or src[1].startswith("data:image/")):
            found.append((src[1], html.unescape(alt[1]) if alt else None))
    return found


def is_description(alt: str | None, src: str) -> bool:
    """Alt text that says something: not empty, not the file's name (what Sphinx writes when there is none)."""
    return bool(alt and alt.strip()) and not re.search(r"\.(png|jpe?g|svg|gif)$", alt.strip()) and alt not in src


@pytest.fixture(scope="module")
def site(course_site: Path) -> Path:
    return course_site


def test_every_page_is_there_in_both_languages_with_its_language_and_a_switch_to_its_twin(site: Path) -> None:
    names = [path.stem for path in NOTEBOOKS] + list(GUIDE_PAGES)
    for lang, other in (("en", "zh"), ("zh", "en")):
        for name in names:
            text = page(site, lang, name)
            assert re.search(rf'<html lang="{"en" if lang == "en" else "zh-CN"}"', text), f"{lang}/{name}: <html lang>"
            twin = re.search(r'class="btn btn-sm course-language-switch" href="([^"]+)" hreflang="([^"]+)"', text)
            assert twin, f"{lang}/{name}: no language switch"
            target = (site / LANGS[lang] / twin[1]).resolve()
            assert target == (site / f"{LANGS[other]}{name}.html").resolve() and target.is_file(), twin[1]
            assert f'<link rel="alternate" hreflang="{twin[2]}" href="{twin[1]}">' in text
            assert not re.search(r'<script[^>]+src="[^"]*jquery', text, re.IGNORECASE), "vendor/README.md: no jQuery"
            assert not re.search(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', text), f"{lang}/{name}: remote file"
    assert (site / ".nojekyll").is_file(), "GitHub Pages would hide _static/ and _images/"


def test_the_sidebar_lists_every_notebook_in_order_then_the_guides(site: Path) -> None:
    for lang in LANGS:
        sidebar = re.search(r'<nav class="bd-links bd-docs-nav"[^>]*>(.*?)</nav>', page(site, lang, "06_grad_cam"), re.DOTALL)
        assert sidebar, lang
        links = [href.removesuffix(".html") if href != "#" else "06_grad_cam"
                 for href in re.findall(r'<a class="[^"]*reference internal[^"]*" href="([^"]+)"', sidebar[1])]
        assert links == [*(p.stem for p in NOTEBOOKS), "hooks_cheatsheet", "instructor_guide"], links


def test_the_landing_page_has_the_course_map_and_how_to_run_it(site: Path) -> None:
    from course_utils.machinery.course import course_map

    for lang, folder in (("en", ROOT / "notebooks"), ("zh", ROOT / "notebooks" / "zh")):
        text = main_part(page(site, lang, "index"))
        words = html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", text)))
        links = dict(re.findall(r'<a class="reference internal" href="(\d\d_\w+)\.html">(.*?)</a>', text, re.DOTALL))
        for row in course_map(folder):  # every notebook's title, linking its page
            shown = html.unescape(re.sub(r"<[^>]+>", "", links.get(row.file[:-6], ""))).replace("\u2019", "'")
            assert shown == row.title, (lang, row.file, shown)  # (Sphinx's smart quotes: ’ for ')
        assert "make lab" in words and f'pip install "{cloud.install_requirement()}"' in words, lang
        assert f'href="https://github.com/{cloud.REPOSITORY}"' in text
        assert 'href="slides/index.html"' in text  # where make site puts them: test_make_site_puts_the_slides_beside
        assert "中文版" not in text and "English:" not in text  # the guides' own language lines: the switch does it


def test_each_notebook_page_launches_its_own_notebook_and_carries_its_report_and_verified_lines(site: Path) -> None:
    for path in NOTEBOOKS:
        for lang, prefix in LANGS.items():
            text = page(site, lang, path.stem)
            header = text.split('<article class="bd-article">', 1)[0]
            notebook = f"{prefix}{path.name}"
            for url in (cloud.colab_url(notebook), cloud.kaggle_url(notebook), cloud.binder_url(notebook)):
                assert f'href="{html.escape(url)}"' in header, f"{lang}/{path.stem}: launch button {url}"
            article = main_part(text)
            assert f'href="{html.escape(notebook_problem_url(path.name))}"' in article, f"{lang}/{path.stem}: report"
            assert ("Last verified" if lang == "en" else "最近验证") in article, f"{lang}/{path.stem}: last verified"
    assert cloud.binder_url("zh/03_forward_hooks.ipynb").endswith("urlpath=lab/tree/workspace-zh/03_forward_hooks.ipynb")


def test_every_site_figure_has_alt_text_that_describes_it(site: Path) -> None:
    """Each page shows every figure of its stored notebook, each with the alt text its output carries."""
    from course_utils.figures import alt_of

    problems = []
    for lang, folder in (("en", ROOT / "notebooks"), ("zh", ROOT / "notebooks" / "zh")):
        for path in NOTEBOOKS:
            stored = [alt_of(output) for cell in nbformat.read(folder / path.name, as_version=4).cells
                      for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
            shown = figures(page(site, lang, path.stem))
            if len(shown) != len(stored):
                problems.append(f"{lang}/{path.stem}: {len(shown)} figures on the page, {len(stored)} in the notebook")
            for number, ((src, alt), carried) in enumerate(zip(shown, stored), start=1):
                if alt != carried:
                    problems.append(f"{lang}/{path.stem}, figure {number}: alt {alt!r}, its output carries {carried!r}")
                elif not is_description(alt, src):
                    problems.append(f"{lang}/{path.stem}, figure {number}: alt text that says nothing ({alt!r})")
    assert not problems, ("; ".join(problems) + ". Give each figure alt text where it is made: "
                          "show_figure(fig, alt=...) (course_utils/figures.py).")


def test_search_indexes_find_the_course_words_in_both_languages(site: Path) -> None:
    def index(lang: str) -> dict:
        text = (site / LANGS[lang] / "searchindex.js").read_text(encoding="utf-8")
        return json.loads(text[text.index("(") + 1:text.rindex(")")])

    def pages_with(data: dict, term: str) -> set[str]:
        """The pages whose text or titles hold ``term`` (a page is listed under one of the two, as Sphinx stores it)."""
        found = set()
        for kind in ("terms", "titleterms"):
            hits = data[kind].get(term, [])
            found |= {data["docnames"][i] for i in ([hits] if isinstance(hits, int) else hits)}
        return found

    english = index("en")
    assert {"04_backward_hooks", "11_hook_clinic"} <= pages_with(english, "register_full_backward_hook")
    chinese = index("zh")
    assert {"04_backward_hooks", "11_hook_clinic"} <= pages_with(chinese, "register_full_backward_hook")
    assert len(pages_with(chinese, "钩子")) >= len(NOTEBOOKS)  # every notebook is about hooks
    for term in ("前向钩子", "反向钩子", "梯度裁剪"):  # glossary words, whole (the splitter's user dictionary)
        assert pages_with(chinese, term), term


@pytest.mark.reads("translations/*/GLOSSARY.md")
def test_the_glossary_gives_the_chinese_splitter_whole_words() -> None:
    terms = extension.glossary_terms()
    assert {"钩子", "前向钩子", "完整反向钩子", "梯度裁剪", "激活检查点"} <= set(terms)
    assert all(re.fullmatch(r"[\u4e00-\u9fff]{2,}", term) for term in terms)


def test_twin_urls_and_anchors() -> None:
    assert extension.twin_url("04_backward_hooks", "en") == "zh/04_backward_hooks.html"
    assert extension.twin_url("04_backward_hooks", "zh") == "../04_backward_hooks.html"
    assert extension.twin_url("index", "zh") == "../index.html"
    assert extension.jupyterlab_anchor("3 · Hooks that only look") == "3-·-Hooks-that-only-look"


def test_chinese_search_names_the_stemmer_it_loads(site: Path) -> None:
    data = (site / "zh" / "_static" / "language_data.js").read_text(encoding="utf-8")
    assigned = re.findall(r"window\.Stemmer = (\w+);", data)
    assert assigned and all(re.search(rf"var\s+{name}\s*=", data) for name in assigned), assigned


# -- alt text from wherever an output carries it: a fixture site ----------------------------------------------------
def fixture_notebook() -> nbformat.NotebookNode:
    def image(metadata: dict | None = None) -> nbformat.NotebookNode:
        return new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"}, metadata=metadata or {})

    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# 01 · Fixture\n\n**You will learn** alt text.\n\n**Estimated time:** 1 min\n\n"
                          "Inline $\\partial y / \\partial x$.\n\n## 1 · Two figures"),
        new_code_cell("show()", execution_count=1, outputs=[
            image({"image/png": {"alt": "A bar chart: output metadata"}}), image({"alt": "Second: the output's own alt"})]),
        new_code_cell("show()", execution_count=2, outputs=[image()],
                      metadata={"mystnb": {"image": {"alt": "Third: myst-nb's cell metadata"}}}),
        new_code_cell("show()", execution_count=3, outputs=[image()], metadata={"alt": "Fourth: nbconvert's cell alt"}),
        new_code_cell("show_figure()", execution_count=4, outputs=[new_output(
            "display_data", data={"image/png": PNG, "text/plain": "Fifth: show_figure's <img alt>",
                                  "text/html": f'<img src="data:image/png;base64,{PNG}" alt="Fifth: show_figure&#x27;s '
                                               '&lt;img alt&gt;"/>'},
            metadata={"image/png": {"alt": "Fifth: show_figure's <img alt>"}})]),
        new_code_cell("show()", execution_count=5, outputs=[image()]),
        new_markdown_cell("See [the first section](#1-·-Two-figures), not [a section that is gone](#2-·-Gone)."),
    ]
    return nb


def test_the_site_renders_the_alt_text_an_output_carries_and_fails_on_a_broken_section_link(tmp_path: Path) -> None:
    edition = Edition("en", tmp_path / "site", tmp_path / "cache")
    edition.src.mkdir(parents=True)
    nbformat.write(fixture_notebook(), edition.src / "01_fixture.ipynb")
    (edition.src / "index.md").write_text("# Fixture\n\n{{ course_map }}\n\n```{toctree}\n:hidden:\n01_fixture\n```\n")
    result = subprocess.run(sphinx_command(edition), cwd=ROOT, capture_output=True, text=True, timeout=300)
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if "WARNING" in line]
    assert result.returncode != 0, "a link to a section that is gone must fail the build"
    assert len(warnings) == 1 and "01_fixture.ipynb" in warnings[0] and "2-·-Gone" in warnings[0], warnings
    found = [alt for _src, alt in figures((edition.html / "01_fixture.html").read_text(encoding="utf-8"))]
    assert found[:5] == ["A bar chart: output metadata", "Second: the output's own alt", "Third: myst-nb's cell metadata",
                         "Fourth: nbconvert's cell alt", "Fifth: show_figure's <img alt>"], found
    assert not is_description(found[5], "_images/x.png"), "a figure without alt text must be found by the test above"


def test_make_site_puts_the_slides_beside_the_pages_of_each_language(tmp_path: Path) -> None:
    from tools.site.build import slides_command

    for lang in LANGS:
        edition = Edition(lang, tmp_path / "site", tmp_path / "cache")
        command = slides_command(edition)
        assert command[1:4] == ["-m", "tools.build_editions", "slides"], command
        assert command[command.index("--out") + 1] == str(edition.out) and command[command.index("--lang") + 1] == lang
        # tools/build_editions.py writes OUT/slides for English and OUT/<lang>/slides for another language
        assert edition.pages == (edition.out if lang == "en" else edition.out / lang)


def test_slides_are_rebuilt_only_when_a_source_is_newer(tmp_path: Path) -> None:
    import os

    from tools.site.build import slides_are_current

    edition = Edition("zh", tmp_path / "site", tmp_path / "cache")
    assert not slides_are_current(edition)  # none yet
    index = edition.pages / "slides" / "index.html"
    index.parent.mkdir(parents=True)
    index.write_text("<html></html>")
    os.utime(index, (4e9, 4e9))  # built after everything
    assert slides_are_current(edition)
    os.utime(index, (0, 0))  # built before the notebooks last changed
    assert not slides_are_current(edition)


def test_make_html_builds_the_site() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^html: site$", makefile, re.MULTILINE), "make html is make site"
    assert re.search(r"^site: venv\n\t\$\(PY\) -m tools[ .]site", makefile, re.MULTILINE)
    assert not (ROOT / "tools" / "nbconvert_templates" / "course_lab").exists()


@pytest.mark.reads(".github/workflows/site.yml")
def test_the_workflow_publishes_the_site_on_pushes_to_main_and_the_readme_links_it() -> None:
    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "site.yml").read_text(encoding="utf-8"))
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"]
    assert workflow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    steps = [step for job in workflow["jobs"].values() for step in job["steps"]]
    runs = " ".join(step.get("run", "") for step in steps)
    uses = [step.get("uses", "").split("@")[0] for step in steps]
    assert "python -m tools.site" in runs  # what make site runs, without make venv's torch
    assert {"actions/upload-pages-artifact", "actions/deploy-pages"} <= set(uses)
    assert any(step.get("with", {}).get("path") == "build/site" for step in steps)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_screen = "\n".join(readme.splitlines()[:15])
    assert cloud.site_url() in first_screen, "the README's first screen links the website"
    assert cloud.site_url() + "zh/" in "\n".join((ROOT / "README.zh.md").read_text(encoding="utf-8").splitlines()[:15])


def test_python_m_tools_site_says_what_is_missing(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "tools.site", "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and "--no-slides" in result.stdout
