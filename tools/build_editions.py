"""Build the workshop editions of the course from the teaching notebooks (nothing here is committed).

- ``learner``: every ``### BEGIN SOLUTION`` … ``### END SOLUTION`` block becomes ``# YOUR CODE HERE`` and a
  ``raise NotImplementedError`` (``course_utils.learner_edition``); the rest of each cell (the ``def`` line,
  docstring, ``check(...)`` line) is kept. Outputs and execution counts are cleared. ``make lab`` gives
  self-learners the same edition in their own workspace (``course_utils.workspace``).
- ``slides``: one reveal.js deck per notebook (slide boundaries from each cell's ``slideshow`` metadata; a
  notebook without any starts a new slide at every ``##`` heading). reveal.js, require.js, jQuery and KaTeX are
  copied next to the decks from ``vendor/``, so the decks work offline, formulas included.
- ``html``: a static, readable rendering of the executed notebooks (images embedded) plus an ``index.html``.

Both use nbconvert's templates with one change (``tools/nbconvert_templates/``): formulas are typeset by the vendored
KaTeX instead of MathJax from a CDN, and the slides do not import mermaid from a CDN. Nothing is fetched from the
network when a page or deck is opened.

Usage: ``python tools/build_editions.py learner|slides|html [--out build]``  (``make learner``, ``make slides``,
``make html``)
"""

from __future__ import annotations

import argparse
import html
import shutil
import sys
from pathlib import Path
from typing import Any

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
REVEAL = ROOT / "vendor" / "reveal.js"
REQUIRE = ROOT / "vendor" / "requirejs"
JQUERY = ROOT / "vendor" / "jquery"
KATEX = ROOT / "vendor" / "katex"
TEMPLATES = Path(__file__).resolve().parent / "nbconvert_templates"
OFFLINE_SCRIPTS = {"require_js_url": "requirejs/require.js", "jquery_url": "jquery/jquery.min.js"}
sys.path.insert(0, str(ROOT))
from course_utils.course import read_opening  # noqa: E402
from course_utils.learner_edition import learner_notebook  # noqa: E402


def course_notebooks() -> list[Path]:
    found = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    if not found:
        raise SystemExit(f"No course notebooks in {NOTEBOOKS}.")
    return found


# -- learner edition ------------------------------------------------------------------------------------------
def build_learner(out: Path) -> list[Path]:
    target = out / "learner"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    written = []
    for path in course_notebooks():
        learner = learner_notebook(nbformat.read(path, as_version=4))
        nbformat.write(learner, target / path.name)
        written.append(target / path.name)
    return written


def copy_scripts(target: Path) -> None:
    """require.js, jQuery and KaTeX next to the pages (the templates load them; vendored for offline use)."""
    if not (KATEX / "katex.min.js").exists():
        raise SystemExit(f"KaTeX is missing from {KATEX}: it ships with the repository (vendor/).")
    shutil.copytree(REQUIRE, target / "requirejs")
    shutil.copytree(JQUERY, target / "jquery")
    shutil.copytree(KATEX, target / "katex")


def html_exporter() -> Any:
    """nbconvert's lab template with vendored KaTeX for formulas (``tools/nbconvert_templates/course_lab``)."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(template_name="course_lab", extra_template_basedirs=[str(TEMPLATES)],
                            extra_template_paths=[str(TEMPLATES)], embed_images=True, **OFFLINE_SCRIPTS)
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    return exporter


def page_resources(path: Path) -> dict[str, Any]:
    """The browser tab shows the notebook's title (nbconvert's default is "Notebook")."""
    return {"metadata": {"name": read_opening(path).title}}


def slides_exporter() -> Any:
    """nbconvert's reveal template with vendored reveal.js and KaTeX (``tools/nbconvert_templates/course_reveal``)."""
    from nbconvert import SlidesExporter

    return SlidesExporter(template_name="course_reveal", extra_template_basedirs=[str(TEMPLATES)],
                          extra_template_paths=[str(TEMPLATES)], reveal_url_prefix="reveal.js", reveal_theme="white",
                          reveal_scroll=True, **OFFLINE_SCRIPTS)


# -- slides -------------------------------------------------------------------------------------------------
def with_slide_boundaries(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Keep explicit slideshow metadata; otherwise start a slide at the title and at every ## heading."""
    deck = nbformat.from_dict(notebook)
    if any("slideshow" in cell.metadata for cell in deck.cells):
        return deck
    for index, cell in enumerate(deck.cells):
        starts = index == 0 or (cell.cell_type == "markdown" and cell.source.lstrip().startswith("## "))
        cell.metadata["slideshow"] = {"slide_type": "slide" if starts else "-"}
    return deck


def build_slides(out: Path) -> list[Path]:
    if not (REVEAL / "dist" / "reveal.js").exists():
        raise SystemExit(f"reveal.js is missing from {REVEAL}: it ships with the repository (vendor/).")
    target = out / "slides"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.copytree(REVEAL, target / "reveal.js")
    copy_scripts(target)
    exporter = slides_exporter()
    written = []
    for path in course_notebooks():
        deck = with_slide_boundaries(nbformat.read(path, as_version=4))
        body, _ = exporter.from_notebook_node(deck, resources=page_resources(path))
        page = target / f"{path.stem}.slides.html"
        page.write_text(body, encoding="utf-8")
        written.append(page)
    return written


# -- static HTML --------------------------------------------------------------------------------------------
def build_html(out: Path) -> list[Path]:
    target = out / "html"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    copy_scripts(target)
    exporter = html_exporter()
    rows = []
    written = []
    for path in course_notebooks():
        opening = read_opening(path)
        body, _ = exporter.from_notebook_node(nbformat.read(path, as_version=4), resources=page_resources(path))
        page = target / f"{path.stem}.html"
        page.write_text(body, encoding="utf-8")
        written.append(page)
        rows.append(
            f'<li><a href="{page.name}">{html.escape(opening.title)}</a> — {html.escape(opening.learn)} '
            f"<em>({opening.minutes} min)</em></li>"
        )
    index = target / "index.html"
    index.write_text(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>PyTorch Hooks, hands-on</title>"
        "<style>body{font-family:sans-serif;max-width:50em;margin:2em auto;line-height:1.5}</style></head><body>"
        "<h1>PyTorch Hooks, hands-on</h1><p>The executed course, readable without Jupyter. To run it, see the "
        "repository's README (<code>make lab</code>).</p><ol>" + "\n".join(rows) + "</ol></body></html>\n",
        encoding="utf-8",
    )
    return [index, *written]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edition", choices=["learner", "slides", "html"])
    parser.add_argument("--out", type=Path, default=ROOT / "build")
    args = parser.parse_args()
    builder = {"learner": build_learner, "slides": build_slides, "html": build_html}[args.edition]
    written = builder(args.out)
    print(f"{args.edition}: wrote {len(written)} files under {args.out / args.edition}")


if __name__ == "__main__":
    main()
