"""Formulas render offline in the slides (``make slides``; the website's pages: tests/browser/test_site.py).

Each deck is built by ``tools.build_editions`` into a temporary folder (once per run, shared with
tests/test_editions.py) and opened from ``file://`` in Debian's Chromium (Playwright, never ``playwright install``).
It must typeset its formulas with the vendored KaTeX (``.katex`` elements), leave no ``$...$`` or TeX command as raw
text outside code, show no KaTeX parse error, raise no script error, and request nothing but local files: no CDN.

Run with ``make test-browser`` (or ``pytest tests/browser/test_static_maths.py``).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from tools import build_editions

ROOT = Path(__file__).resolve().parents[2]

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")
NOTEBOOKS = build_editions.course_notebooks()

# Text nodes outside code, scripts and rendered maths; the page must hold no formula source among them.
RAW_TEXT = """() => {
  const skip = "PRE, CODE, SCRIPT, STYLE, TEXTAREA, .katex, .katex-display";
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.parentElement.closest(skip)) texts.push(node.textContent);
  }
  return texts.join("\\n");
}"""
RAW_MATH = re.compile(r"\$[^$\s][^$\n]*\$|\\\(|\\\[|\\(?:partial|sum|frac|alpha|cdot|max)\b")


@pytest.fixture(scope="module")
def site(course_editions: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the course's slides (built once for the run, tests/conftest.py), plus the fixture notebook rendered
    by the same exporter."""
    out = tmp_path_factory.mktemp("static")
    shutil.copytree(course_editions / "slides", out / "slides", symlinks=True)
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# 99 · Maths\n\nInline $\\partial y / \\partial A_c$ and $x = [1,1,1]$; a variable `$HOME` "
                          "stays code.\n\nDisplay:\n\n$$\\sum_c \\alpha_c A_c$$"),
        new_code_cell("print('costs $5 and $6')", execution_count=1,
                      outputs=[new_output("stream", name="stdout", text="costs $5 and $6\n")]),
        new_markdown_cell("## Second slide\n\n| rule | gradient |\n|---|---|\n"
                          "| guided | $\\max(g, 0) \\cdot [x > 0]$ |"),
    ]
    body, _ = build_editions.slides_exporter().from_notebook_node(build_editions.with_slide_boundaries(nb))
    (out / "slides" / "fixture.slides.html").write_text(body, encoding="utf-8")
    return out


def visit(chromium: Any, page_path: Path, *, slides: bool = False) -> int:
    """Open ``page_path``; assert it stayed offline and clean (no failed request, script error, KaTeX parse error or
    formula source left as text); return how many formulas KaTeX typeset."""
    name = page_path.name
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    outside: list[str] = []
    failed: list[str] = []
    script_errors: list[str] = []
    page.on("request", lambda r: None if r.url.startswith(LOCAL_SCHEMES) else outside.append(r.url))
    page.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})"))
    page.on("pageerror", lambda e: script_errors.append(str(e)))
    try:
        page.goto(page_path.as_uri(), wait_until="load")
        page.wait_for_function("() => document.readyState === 'complete'")
        if slides:
            # reveal.js (loaded through require.js) marks its root .ready once initialised
            page.wait_for_selector(".reveal.ready", state="attached", timeout=15_000)
            page.keyboard.press("ArrowRight")  # a slide change runs the template's handlers
            page.wait_for_timeout(300)
        maths = page.locator(".katex").count()
        errors = page.locator(".katex-error").count()
        raw = RAW_MATH.findall(page.evaluate(RAW_TEXT))
    finally:
        context.close()
    assert not outside, f"{name} contacted the network: {outside[:5]}"
    assert not failed, f"{name}: requests failed (a missing local file?): {failed[:5]}"
    assert not script_errors, f"{name}: script errors: {script_errors[:3]}"
    assert errors == 0, f"{name}: {errors} formula(s) KaTeX could not parse (class katex-error)"
    assert not raw, f"{name}: formula source left as text: {raw[:5]}"
    return maths


def test_the_fixture_formulas_are_typeset_and_code_keeps_its_dollars(site: Path, chromium: Any) -> None:
    page = site / "slides/fixture.slides.html"
    text = page.read_text(encoding="utf-8")
    assert "mathjax" not in text.lower(), "the page still refers to MathJax"
    assert not re.findall(r'<script[^>]+src="https?:', text), "a script is loaded from the web"
    maths = visit(chromium, page, slides=True)
    assert maths == 4, f"{maths} typeset formulas"  # two inline, one display, one in the table


def _has_maths(path: Path) -> bool:
    nb = nbformat.read(path, as_version=4)
    return any(c.cell_type == "markdown" and re.search(r"\$[^$\s][^$]*\$", c.source) for c in nb.cells)


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_course_decks_render_their_formulas_offline(site: Path, chromium: Any, notebook: Path) -> None:
    page = site / "slides" / f"{notebook.stem}.slides.html"
    maths = visit(chromium, page, slides=True)
    if _has_maths(notebook):
        assert maths > 0, f"{page.name}: no typeset formula"


def test_katex_is_vendored_with_its_licence() -> None:
    katex = ROOT / "vendor" / "katex"
    for name in ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js", "LICENSE"):
        assert (katex / name).is_file(), name
    css = (katex / "katex.min.css").read_text(encoding="utf-8")
    woff2 = set(re.findall(r"url\(fonts/([\w-]+\.woff2)\)", css))
    assert woff2 and all((katex / "fonts" / f).is_file() for f in woff2), \
        "a WOFF2 font named by katex.min.css is missing"


def test_the_cheatsheet_deck_page_is_listed_offline_and_links_the_decks(site: Path, chromium: Any) -> None:
    index = (site / "slides" / "index.html").read_text(encoding="utf-8")
    assert 'href="hooks_cheatsheet.html"' in index
    visit(chromium, site / "slides" / "index.html")
    visit(chromium, site / "slides" / "hooks_cheatsheet.html")
    slides = (site / "slides" / "hooks_cheatsheet.html").read_text(encoding="utf-8")
    assert ".ipynb" not in slides and len(re.findall(r'href="\d\d_\w+\.slides\.html"', slides)) >= 20
    assert all((site / "slides" / name).exists() for name in re.findall(r'href="(\d\d_\w+\.slides\.html)"', slides))
