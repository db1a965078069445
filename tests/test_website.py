"""The course's website (``make site``), read from the files it writes: every page in both languages, its language,
its switch to its twin, no broken link or anchor, the launch buttons, downloads and "Open in" lines leading to the
learner edition first, figures as lazy image files with their alt text, the glossary, the search index in both
languages (and the synonyms readers type), the publishing workflow. The site is built once per run (``course_site``,
tests/conftest.py) and shared with tests/browser/test_site.py; a small fixture site checks figures and broken links.
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest
import yaml
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_utils.figures import alt_of, figure_output
from course_utils.machinery import cloud
from course_utils.machinery.course import course_map
from course_utils.machinery.learner_edition import BEGIN, STUB_TAG
from course_utils.machinery.report_problem import notebook_problem_url
from tools.site import extension
from tools.site.__main__ import main as site_main
from tools.site.build import UNWATCHED, Edition, slides_are_current, slides_command, sphinx_command, tree_digest

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("tools/site/landing*.md", "translations/*/landing.po")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LANGS = {"en": "", "zh": "zh/"}
GUIDE_PAGES = ("index", "hooks_cheatsheet", "instructor_guide", "glossary")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


def page(site: Path, lang: str, name: str) -> str:
    return (site / f"{LANGS[lang]}{name}.html").read_text(encoding="utf-8")


def main_part(text: str) -> str:
    """The article of a page, without the theme's header, sidebars and footer."""
    match = re.search(r'<article class="bd-article">(.*?)</article>', text, re.DOTALL)
    assert match, "no <article class=\"bd-article\"> in the page"
    return match[1]


def figures(text: str) -> list[tuple[str, str | None]]:
    """(src, alt) of each image of a page's article that a notebook output made (myst-nb and tools/site write each
    to _images/), and of any ``<img src="data:...">`` left in it (there should be none: a figure is a file)."""
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
            assert not re.search(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', text), \
                f"{lang}/{name}: remote file"
            footer = text.partition('<footer class="bd-footer-content">')[2]
            assert ("本课程的作者们" in footer) == (lang == "zh"), name
            assert ("course's authors" in footer) == (lang == "en"), name
    assert (site / ".nojekyll").is_file(), "GitHub Pages would hide _static/ and _images/"


def test_the_sidebar_lists_every_notebook_in_order_then_the_guides(site: Path) -> None:
    for lang in LANGS:
        sidebar = re.search(r'<nav class="bd-links bd-docs-nav"[^>]*>(.*?)</nav>', page(site, lang, "06_grad_cam"),
                            re.DOTALL)
        assert sidebar, lang
        links = [href.removesuffix(".html") if href != "#" else "06_grad_cam"
                 for href in re.findall(r'<a class="[^"]*reference internal[^"]*" href="([^"]+)"', sidebar[1])]
        assert links == [*(p.stem for p in NOTEBOOKS), "hooks_cheatsheet", "instructor_guide", "glossary"], links


def test_the_landing_page_has_the_course_map_and_how_to_run_it(site: Path) -> None:
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
    assert cloud.binder_url("zh/03_forward_hooks.ipynb").endswith(
        "urlpath=lab/tree/workspace-zh/03_forward_hooks.ipynb")


def is_learner_edition(notebook: nbformat.NotebookNode, lang: str) -> bool:
    """Stubs where the teaching notebook has solutions, in the edition's language, and no solution anywhere."""
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    stubs = [cell for cell in code if STUB_TAG in cell.metadata.get("tags", [])]
    return (bool(stubs) and all("raise NotImplementedError" in cell.source for cell in stubs)
            and not any(BEGIN in cell.source for cell in code)
            and notebook.metadata.get("language_edition", {}).get("lang", "en") == lang)


def test_every_launch_and_download_route_gives_the_exercises_first_and_the_complete_notebook_second(site: Path) -> None:
    """The launch menu (Colab, Kaggle: the branch the workflow publishes from the site's notebooks/; Binder: the
    workspace binder/postBuild prepares), the download menu, and the notebook's own "Open in" line."""
    learner_path = re.compile(rf"/{re.escape(cloud.REPOSITORY)}/blob/{cloud.LEARNER_BRANCH}/(notebooks/[\w/]+\.ipynb)$")
    complete_path = re.compile(rf"/{re.escape(cloud.REPOSITORY)}/blob/{cloud.BRANCH}/(notebooks/[\w/]+\.ipynb)$")
    postbuild = (ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    for lang, prefix in LANGS.items():
        assert f'workspace "${{HOME}}/{"workspace" if lang == "en" else "workspace-zh"}" --lang {lang}' in postbuild
        for path in NOTEBOOKS:
            notebook = f"{prefix}{path.name}"
            for complete, pattern in ((False, learner_path), (True, complete_path)):
                for url in (cloud.colab_url(notebook, complete=complete),
                            cloud.kaggle_url(notebook, complete=complete)):
                    found = pattern.search(url)
                    assert found, url
                    # the learner branch holds the site's notebooks/ folder as it is (.github/workflows/site.yml)
                    target = nbformat.read((site if not complete else ROOT) / found[1], as_version=4)
                    assert is_learner_edition(target, lang) != complete, (url, complete)
                binder = cloud.binder_url(notebook, complete=complete)
                assert binder.endswith(("complete/" if complete else "") + path.name), binder
            text = page(site, lang, path.stem)
            menu = re.search(r'dropdown-download-buttons.*?</ul>', text, re.DOTALL)[0]
            exercises, complete_file = re.findall(r'<a href="([^"]+\.ipynb)"', menu)
            assert is_learner_edition(nbformat.read((site / prefix / exercises).resolve(), as_version=4), lang)
            assert not is_learner_edition(nbformat.read(site / prefix / complete_file, as_version=4), lang)
            assert complete_file == f"_sources/{path.name}"
            opening = nbformat.read(ROOT / "notebooks" / notebook, as_version=4).cells[0].source
            links = re.findall(r"\[(?:Colab|Kaggle)\]\(([^)]+)\)", opening)
            assert links == [cloud.colab_url(notebook), cloud.kaggle_url(notebook),
                             cloud.colab_url(notebook, complete=True), cloud.kaggle_url(notebook, complete=True)], links


def test_every_site_figure_is_a_lazily_loaded_file_with_the_alt_text_its_output_carries(site: Path) -> None:
    """Each page shows every figure of its stored notebook as a file of _images/, with its size and
    ``loading="lazy"``, and with the alt text its output carries; no page embeds an image (``data:``)."""
    problems = []
    for lang, folder in (("en", ROOT / "notebooks"), ("zh", ROOT / "notebooks" / "zh")):
        for path in NOTEBOOKS:
            stored = [alt for cell in nbformat.read(folder / path.name, as_version=4).cells
                      for output in cell.get("outputs", []) if (alt := alt_of(output)) is not None]
            text = page(site, lang, path.stem)
            shown = figures(text)
            if len(shown) != len(stored):
                problems.append(f"{lang}/{path.stem}: {len(shown)} figures on the page, {len(stored)} in the notebook")
            for number, ((src, alt), carried) in enumerate(zip(shown, stored), start=1):
                tag = next(tag for tag in re.findall(r"<img\b[^>]*>", text) if f'src="{src}"' in tag)
                if alt != carried:
                    problems.append(f"{lang}/{path.stem}, figure {number}: alt {alt!r}, its output carries {carried!r}")
                elif not is_description(alt, src):
                    problems.append(f"{lang}/{path.stem}, figure {number}: alt text that says nothing ({alt!r})")
                if not (src.startswith("_images/") and (site / LANGS[lang] / src).is_file()):
                    problems.append(f"{lang}/{path.stem}, figure {number}: not an image file ({src[:40]})")
                if not all(attribute in tag for attribute in ('loading="lazy"', "width=", "height=")):
                    problems.append(f"{lang}/{path.stem}, figure {number}: not lazily loaded with its size: {tag[:80]}")
            if "data:image/" in text:
                problems.append(f"{lang}/{path.stem}: an image embedded in the page")
    assert not problems, ("; ".join(problems) + ". Give each figure alt text where it is made: "
                          "show_figure(fig, alt=...) (course_utils/figures.py).")


def search_index(site: Path, lang: str) -> dict:
    text = (site / LANGS[lang] / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


def pages_with(data: dict, term: str) -> set[str]:
    """The pages whose text or titles hold ``term`` (a page is listed under one of the two, as Sphinx stores it)."""
    found = set()
    for kind in ("terms", "titleterms"):
        hits = data[kind].get(term, [])
        found |= {data["docnames"][i] for i in ([hits] if isinstance(hits, int) else hits)}
    return found


def test_search_indexes_find_the_course_words_in_both_languages(site: Path) -> None:
    for lang in LANGS:
        assert {"04_backward_hooks", "11_hook_clinic"} <= pages_with(search_index(site, lang),
                                                                     "register_full_backward_hook"), lang
    chinese = search_index(site, "zh")
    assert len(pages_with(chinese, "钩子")) >= len(NOTEBOOKS)  # every notebook is about hooks
    for term in ("前向钩子", "反向钩子", "梯度裁剪"):  # glossary words, whole (the splitter's user dictionary)
        assert pages_with(chinese, term), term


@pytest.mark.reads("translations/*/GLOSSARY.md")
def test_the_glossary_gives_the_chinese_splitter_whole_words() -> None:
    terms = extension.glossary_terms()
    assert {"钩子", "前向钩子", "完整反向钩子", "梯度裁剪", "激活检查点"} <= set(terms)
    assert all(re.fullmatch(r"[\u4e00-\u9fff]{2,}", term) for term in terms)


def test_the_words_readers_type_find_the_pages_of_the_glossary_term(site: Path) -> None:
    synonyms = extension.search_synonyms()
    assert "显存" in synonyms["内存"] and len(synonyms) >= 5
    data = search_index(site, "zh")
    for term, typed in synonyms.items():
        for word in typed:  # found wherever the term is (and where it is written)
            assert pages_with(data, term) <= pages_with(data, word), (term, word)
    assert pages_with(data, "显存"), "no page has 内存?"


def test_the_glossary_page_lists_every_term_in_both_languages(site: Path) -> None:
    rows = extension.glossary_rows()
    assert len(rows) > 50
    for lang in LANGS:
        article = main_part(page(site, lang, "glossary"))
        text = html.unescape(re.sub(r"<[^>]+>", "", article))
        assert ("术语表" if lang == "zh" else "Glossary") in text and len(re.findall("<tr", article)) == len(rows) + 1
        assert all(chinese.replace("“", "").replace("”", "")[:6] in text.replace("“", "").replace("”", "")
                   for _english, chinese in rows), lang
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not [name for name in tracked if name.endswith("/glossary.md")], "made from GLOSSARY.md, not written twice"


def test_every_page_has_the_favicon_and_links_only_to_what_is_there(site: Path) -> None:
    """No link or source in any page (both languages) points at a file that is not in the site, or at an anchor its
    page does not have; every page has the favicon; twin pages have the same sections (the language switch)."""
    ids: dict[Path, set[str]] = {}

    def anchors(path: Path) -> set[str]:
        if path not in ids:
            ids[path] = set(re.findall(r'\bid="([^"]+)"', path.read_text(encoding="utf-8")))
        return ids[path]

    broken, checked = [], 0
    for lang in LANGS:
        for path in sorted((site / LANGS[lang]).glob("*.html")):
            text = path.read_text(encoding="utf-8")
            icon = re.search(r'<link rel="icon" href="([^"]+)"', text)
            assert icon and (path.parent / icon[1]).resolve().is_file(), f"{path.name}: no favicon"
            for link in re.findall(r'(?:href|src)="([^"]+)"', text):
                link = html.unescape(link)
                if re.match(r"[a-z][\w+.-]*:", link) or link.startswith(("//", "slides/")):
                    continue  # another site, mailto:, javascript:, data:, or the slides (left out here: make site)
                target, _, anchor = link.partition("#")
                file = (path.parent / target.split("?")[0]).resolve() if target else path
                checked += 1
                if not file.exists():
                    broken.append(f"{path.relative_to(site)} -> {link}")
                elif anchor and file.suffix == ".html" and unquote(anchor) not in anchors(file):
                    broken.append(f"{path.relative_to(site)} -> {link} (no such anchor)")
    assert checked > 2000 and not broken, f"{len(broken)} broken links of {checked}: {broken[:5]}"
    for name in [p.stem for p in NOTEBOOKS] + list(GUIDE_PAGES):
        counts = [len(re.findall(r"<section\b", main_part(page(site, lang, name)))) for lang in LANGS]
        assert counts[0] == counts[1], f"{name}: {counts} sections in English and Chinese"


def test_twin_urls_and_anchors() -> None:
    assert extension.twin_url("04_backward_hooks", "en") == "zh/04_backward_hooks.html"
    assert extension.twin_url("04_backward_hooks", "zh") == "../04_backward_hooks.html"
    assert extension.twin_url("index", "zh") == "../index.html"
    assert extension.jupyterlab_anchor("3 · Hooks that only look") == "3-·-Hooks-that-only-look"


def test_chinese_search_names_the_stemmer_it_loads(site: Path) -> None:
    data = (site / "zh" / "_static" / "language_data.js").read_text(encoding="utf-8")
    assigned = re.findall(r"window\.Stemmer = (\w+);", data)
    assert assigned and all(re.search(rf"var\s+{name}\s*=", data) for name in assigned), assigned


# -- a fixture site: a figure as a file, a broken section link ------------------------------------------------------
def fixture_notebook() -> nbformat.NotebookNode:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    data, metadata = figure_output(fig, alt="A line rising from zero to one: the figure's alt text, as it is stored.")
    plt.close(fig)
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# 01 · Fixture\n\n**You will learn** alt text.\n\n**Estimated time:** 1 min\n\n"
                          "Inline $\\partial y / \\partial x = 2$.\n\n## 1 · A figure"),
        new_code_cell("show_figure(fig, alt=...)", execution_count=1,
                      outputs=[new_output("display_data", data=data, metadata=metadata)]),
        new_code_cell("plt.show()", execution_count=2, outputs=[new_output(
            "display_data", data={"image/png": PNG, "text/plain": "<Figure size 640x480 with 1 Axes>"})]),
        new_markdown_cell("See [the first section](#1-·-A-figure), not [a section that is gone](#2-·-Gone)."),
    ]
    return nb


def test_the_site_writes_a_figure_as_a_lazy_file_with_its_alt_text_and_fails_on_a_broken_section_link(
        tmp_path: Path) -> None:
    edition = Edition("en", tmp_path / "site", tmp_path / "cache")
    edition.src.mkdir(parents=True)
    nbformat.write(fixture_notebook(), edition.src / "01_fixture.ipynb")
    (edition.src / "index.md").write_text("# Fixture\n\n{{ course_map }}\n\n```{toctree}\n:hidden:\n01_fixture\n```\n")
    result = subprocess.run(sphinx_command(edition), cwd=ROOT, capture_output=True, text=True, timeout=300)
    warnings = [line for line in (result.stdout + result.stderr).splitlines() if "WARNING" in line]
    assert result.returncode != 0, "a link to a section that is gone must fail the build"
    assert len(warnings) == 1 and "01_fixture.ipynb" in warnings[0] and "2-·-Gone" in warnings[0], warnings
    text = (edition.html / "01_fixture.html").read_text(encoding="utf-8")
    (src, alt), (_plain, none) = figures(text)
    assert alt == "A line rising from zero to one: the figure's alt text, as it is stored."
    assert src.startswith("_images/") and (edition.html / src).is_file() and "data:image" not in text
    assert re.search(rf'<img alt="[^"]*"[^>]* height="\d+" loading="lazy" src="{src}" width="\d+"', text), text
    assert not is_description(none, "_images/x.png"), "a figure without alt text must be found by the site's test"
    assert extension.formula_lines("a = b_{i=1} = c") == ["a ", "= b_{i=1} ", "= c"]
    assert text.count("<math") == 2 and "<wbr>" in text  # one formula, which a line may break after its "="


def test_make_site_puts_the_slides_beside_the_pages_of_each_language(tmp_path: Path) -> None:
    for lang in LANGS:
        edition = Edition(lang, tmp_path / "site", tmp_path / "cache")
        command = slides_command(edition)
        assert command[1:4] == ["-m", "tools.build_editions", "slides"], command
        assert command[command.index("--out") + 1] == str(edition.out) and command[command.index("--lang") + 1] == lang
        # tools/build_editions.py writes OUT/slides for English and OUT/<lang>/slides for another language
        assert edition.pages == (edition.out if lang == "en" else edition.out / lang)


def test_slides_are_rebuilt_only_when_a_source_is_newer(tmp_path: Path) -> None:
    edition = Edition("zh", tmp_path / "site", tmp_path / "cache")
    assert not slides_are_current(edition)  # none yet
    index = edition.pages / "slides" / "index.html"
    index.parent.mkdir(parents=True)
    index.write_text("<html></html>")
    os.utime(index, (4e9, 4e9))  # built after everything
    assert slides_are_current(edition)
    os.utime(index, (0, 0))  # built before the notebooks last changed
    assert not slides_are_current(edition)


def test_the_site_cache_is_stale_when_the_pages_or_what_sphinx_does_not_watch_change() -> None:
    assert tree_digest(UNWATCHED, salt="01_a") != tree_digest(UNWATCHED, salt="01_b") != tree_digest(UNWATCHED[1:])
    assert {"tools/site", "translations/zh/GLOSSARY.md", "requirements.txt"} <= set(UNWATCHED)


def test_make_html_builds_the_site() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^html: site$", makefile, re.MULTILINE), "make html is make site"
    assert re.search(r"^site: venv\n\t\$\(PY\) -m tools[ .]site", makefile, re.MULTILINE)
    assert not (ROOT / "tools" / "nbconvert_templates" / "course_lab").exists()


@pytest.mark.reads(".github/workflows/site.yml")
def test_the_workflow_publishes_the_site_on_pushes_to_main_and_the_readme_links_it() -> None:
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
    # the learner editions the build writes to build/site/notebooks/, pushed as the branch Colab and Kaggle open
    learner = workflow["jobs"]["learner-branch"]
    assert learner["permissions"] == {"contents": "write"} and "publish == 'true'" in learner["if"]
    assert any(step.get("with", {}).get("path") == "build/site/notebooks/"
               for step in workflow["jobs"]["build"]["steps"])
    pushed = " ".join(step.get("run", "") for step in learner["steps"])
    assert "push --force" in pushed and pushed.rstrip().endswith(cloud.LEARNER_BRANCH)
    assert Edition("zh", Path("s"), Path("c")).out / "notebooks" == Path("s/notebooks")  # zh in notebooks/zh/
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first_screen = "\n".join(readme.splitlines()[:15])
    assert cloud.site_url() in first_screen, "the README's first screen links the website"
    assert cloud.site_url() + "zh/" in "\n".join((ROOT / "README.zh.md").read_text(encoding="utf-8").splitlines()[:15])


def test_python_m_tools_site_says_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        site_main(["--help"])  # what python -m tools.site runs (its usage line: tests/test_usage_lines.py)
    assert done.value.code == 0 and "--no-slides" in capsys.readouterr().out
