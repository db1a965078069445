"""Build the workshop editions of the course from the teaching notebooks (nothing here is committed).

- ``learner``: every ``### BEGIN SOLUTION`` … ``### END SOLUTION`` block becomes ``# YOUR CODE HERE`` and a
  ``raise NotImplementedError`` (``course_utils.machinery.learner_edition``); outputs are cleared. ``make lab`` gives
  self-learners the same edition in their own workspace.
- ``slides``: one reveal.js deck per notebook (slides from each cell's ``slideshow`` metadata, else one per ``##``
  heading) and the hook cheat-sheet as ``hooks_cheatsheet.html``, with reveal.js, require.js, jQuery and KaTeX copied
  from ``vendor/`` beside them: nothing is fetched when a deck is opened (nbconvert's reveal template, with KaTeX
  instead of MathJax from a CDN: ``tools/nbconvert_templates/``). The website (``make site``) links them.

An :class:`Edition` is a language (``notebooks/zh/`` for ``--lang zh``, written under ``build/zh/``) and which
notebooks: all, those of an agenda of the instructor guide (``--agenda half-day``, into ``build/agenda-half-day/``)
or some by number (``--notebooks 03 06``, into ``build/notebooks-03-06/``).

Usage: ``python -m tools learner|slides [--out build] [--lang zh] [--agenda KEY | --notebooks NN ...]``  (``make
learner``, ``make slides``)
"""

from __future__ import annotations

import argparse
import html
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from course_utils.machinery.course import read_opening
from course_utils.machinery.layout import NOTEBOOK_GLOB
from course_utils.machinery.learner_edition import learner_notebook
from course_utils.machinery.messages import LANGUAGES

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
VENDOR = ROOT / "vendor"  # reveal.js, require.js, jQuery and KaTeX, for offline decks
PAGE_STYLE = (
    "body{font-family:sans-serif;max-width:60em;margin:2em auto;padding:0 1em;line-height:1.5}"
    "table{border-collapse:collapse;font-size:0.85em;margin:1em 0}th,td{border:1px solid #ccc;padding:0.3em 0.5em;"
    "vertical-align:top;text-align:left}code{font-size:0.95em;background:#f4f4f4}a.anchor-link{display:none}"
)
TEMPLATES = Path(__file__).resolve().parent / "nbconvert_templates"


@dataclass(frozen=True)
class Edition:
    """One language's edition. Usage: ``build_slides(Path("build"), Edition("zh"))`` (``notebooks/zh/`` ->
    ``build/zh/slides/``)"""

    lang: str = "en"
    only: tuple[str, ...] = ()  # notebook numbers ("03", "06"); empty: every notebook

    @property
    def notebooks_dir(self) -> Path:
        return NOTEBOOKS if self.lang == "en" else NOTEBOOKS / self.lang

    def notebooks(self) -> list[Path]:
        """The edition's teaching notebooks (``only`` those), in order."""
        found = sorted(self.notebooks_dir.glob(NOTEBOOK_GLOB))
        unknown = sorted(set(self.only) - {path.name[:2] for path in found})
        if not found or unknown:
            raise SystemExit(f"No course notebook {', '.join(unknown)} in {self.notebooks_dir}." if unknown
                             else f"No course notebooks in {self.notebooks_dir}.")
        return [path for path in found if not self.only or path.name[:2] in self.only]

    def folder(self, out: Path, name: str) -> Path:
        """``out/name`` (``out/<lang>/name`` for a translation), emptied and made anew."""
        target = (out if self.lang == "en" else out / self.lang) / name
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        return target


def course_notebooks(lang: str = "en") -> list[Path]:
    """The teaching notebooks of ``lang``'s edition, in order. Usage: ``course_notebooks()[0].name``"""
    return Edition(lang).notebooks()


# -- learner edition ------------------------------------------------------------------------------------------
def write_learner(notebooks: list[Path], folder: Path) -> list[Path]:
    """The learner edition of each of ``notebooks``, written into ``folder`` (``make learner``, the website)."""
    for path in notebooks:
        nbformat.write(learner_notebook(nbformat.read(path, as_version=4)), folder / path.name)
    return [folder / path.name for path in notebooks]


def build_learner(out: Path, edition: Edition = Edition()) -> list[Path]:
    return write_learner(edition.notebooks(), edition.folder(out, "learner"))


def slides_exporter() -> Any:
    """nbconvert's reveal template with vendored reveal.js and KaTeX (``tools/nbconvert_templates/course_reveal``)."""
    from nbconvert import SlidesExporter

    return SlidesExporter(template_name="course_reveal", extra_template_basedirs=[str(TEMPLATES)],
                          extra_template_paths=[str(TEMPLATES)], reveal_url_prefix="reveal.js", reveal_theme="white",
                          reveal_scroll=True, require_js_url="requirejs/require.js",
                          jquery_url="jquery/jquery.min.js")


def simple_page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f"<style>{PAGE_STYLE}</style></head><body>\n{body}\n</body></html>\n"
    )


def write_cheatsheet(target: Path, edition: Edition = Edition()) -> Path:
    """``hooks_cheatsheet.md`` as ``hooks_cheatsheet.html`` beside the decks; links to ``NN_topic.ipynb#section``
    become ``NN_topic.slides.html`` (a deck has no section anchors)."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    cheatsheet = edition.notebooks_dir / "hooks_cheatsheet.md"
    if not cheatsheet.exists():
        raise SystemExit(f"The hook cheat-sheet is missing: {cheatsheet}.")
    body = markdown2html_mistune(cheatsheet.read_text(encoding="utf-8"))
    body = re.sub(r'href="(\d\d_\w+)\.ipynb(#[^"]*)?"', r'href="\1.slides.html"', body)
    page = target / "hooks_cheatsheet.html"
    page.write_text(simple_page("PyTorch hooks — cheat-sheet", body), encoding="utf-8")
    return page


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


def build_slides(out: Path, edition: Edition = Edition()) -> list[Path]:
    """The decks, with reveal.js, require.js, jQuery and KaTeX beside them (the templates load them)."""
    missing = [name for name in ("reveal.js/dist/reveal.js", "katex/katex.min.js") if not (VENDOR / name).exists()]
    if missing:
        raise SystemExit(f"{', '.join(missing)} missing from {VENDOR}: it ships with the repository.")
    target = edition.folder(out, "slides")
    for name in ("reveal.js", "requirejs", "jquery", "katex"):
        shutil.copytree(VENDOR / name, target / name)
    exporter = slides_exporter()
    written, rows = [], []
    for path in edition.notebooks():
        deck = with_slide_boundaries(nbformat.read(path, as_version=4))  # the tab shows the notebook's title
        body, _ = exporter.from_notebook_node(deck, resources={"metadata": {"name": read_opening(path).title}})
        page = target / f"{path.stem}.slides.html"
        page.write_text(body, encoding="utf-8")
        written.append(page)
        rows.append(f'<li><a href="{page.name}">{html.escape(read_opening(path).title)}</a></li>')
    written.append(write_cheatsheet(target, edition))
    index = target / "index.html"
    index.write_text(simple_page(
        "PyTorch Hooks, hands-on — slides",
        "<h1>PyTorch Hooks, hands-on — slides</h1><ol>" + "\n".join(rows) + "</ol>"
        '<p>Reference: <a href="hooks_cheatsheet.html">hook cheat-sheet</a> (every hook API on one page).</p>',
    ), encoding="utf-8")
    written.insert(0, index)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools", description=__doc__.splitlines()[0])
    parser.add_argument("edition", choices=["learner", "slides"])
    parser.add_argument("--out", type=Path, help="default: build/, and build/agenda-KEY/ or build/notebooks-NN-NN/ "
                        "for a part, so that make sync's full learner edition does not replace it")
    parser.add_argument("--lang", choices=LANGUAGES, default="en", help="zh: the Chinese edition (notebooks/zh/)")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--agenda", help="only the notebooks of this agenda of the instructor guide (half-day, ...)")
    choice.add_argument("--notebooks", nargs="+", default=(), metavar="NN", help="only these notebooks, by number")
    args = parser.parse_args(argv)
    only = tuple(number.zfill(2) for number in args.notebooks)
    if args.agenda:
        from tools.instructor_guide import agenda_notebooks

        try:
            only = tuple(agenda_notebooks(args.agenda))
        except ValueError as error:
            parser.error(str(error))
    part = f"agenda-{args.agenda}" if args.agenda else "-".join(["notebooks", *only]) if only else ""
    out = args.out or ROOT / "build" / part
    written = {"learner": build_learner, "slides": build_slides}[args.edition](out, Edition(args.lang, only))
    print(f"{args.edition}: wrote {len(written)} files under {written[0].parent}")


if __name__ == "__main__":
    main()
