"""Every figure the course draws carries alt text, in every notebook of both languages (course_utils/figures.py).

- every figure of every stored notebook (English and Chinese) is stored once, as the ``<img>`` of its ``text/html``,
  with its alt text in the two places the front ends read it -- that ``<img alt>`` and its ``text/plain`` -- and the
  alt text says something (not a file name, not ``<Figure size ...>``); the Chinese notebooks' is Chinese;
- the cell that drew it wrote that text itself, as an ``alt="..."`` literal (which the translation pipeline carries
  into translations/zh), and no notebook shows a figure any other way (``plt.show()``, a figure left for the inline
  backend);
- the check catches a figure without alt text, as ``plt.show()`` stores it;
- the pieces: ``figure_output``/``show_figure``, ``alt_literals``, the Chinese build's replacement of the literals,
  nbconvert's HTML, nbval's masking of the embedded image and the hygiene rules' view of it.
"""

from __future__ import annotations

import ast
import base64
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_utils.figures import alt_literals, alt_of, check_alt, figure_output, image_bytes, show_figure
from tools.i18n import editions, units

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted(
    (ROOT / "notebooks" / "zh").glob("[0-9][0-9]_*.ipynb"))
IMAGE_TYPES = ("image/png", "image/jpeg", "image/svg+xml")
_IMG_ALT = re.compile(r'<img\b[^>]*\balt="([^"]*)"')
_EMBEDDED = re.compile(r'<img\b[^>]*\bsrc="data:image/')


def is_figure(output: dict) -> bool:
    """An image output, or an HTML one that embeds an image (what ``show_figure`` stores)."""
    data = output.get("data", {})
    return any(t in data for t in IMAGE_TYPES) or bool(_EMBEDDED.search("".join(data.get("text/html", ""))))


_CJK = re.compile(r"[\u4e00-\u9fff]")


def figure_problems(nb: Any, chinese: bool = False) -> list[str]:
    """What is wrong with the figures of a notebook: each figure stored twice or without alt text in both places,
    alt text that says too little, a drawing cell without its own ``alt=`` literal, a ``plt.show()``."""
    problems = []
    code_number = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        code_number += 1
        source = "".join(cell["source"])
        where = f"code cell {code_number}"
        if re.search(r"\bplt\.show\(\)", source):
            problems.append(f"{where}: plt.show() shows a figure without alt text; use show_figure(fig, alt=...)")
        images = [o for o in cell.get("outputs", []) if is_figure(o)]
        if images and not alt_literals(source):
            problems.append(f"{where}: draws a figure but writes no alt=\"...\" text of its own")
        for output in images:
            alt = alt_of(output)
            data = output["data"]
            if not alt:
                problems.append(f"{where}: a figure without alt text: show it with show_figure(fig, alt=...)")
                continue
            if stored := [t for t in IMAGE_TYPES if t in data]:
                problems.append(f"{where}: the figure is stored twice, as {stored[0]} beside its <img>")
            try:
                check_alt(alt)
            except ValueError as error:
                problems.append(f"{where}: {error}")
            in_html = _IMG_ALT.findall("".join(data.get("text/html", "")))
            if [html.unescape(a) for a in in_html] != [alt]:
                problems.append(f"{where}: its text/html has no <img alt> with the alt text (found {in_html})")
            if "".join(data.get("text/plain", "")) != alt:
                problems.append(f"{where}: its text/plain is not the alt text")
            if chinese and not _CJK.search(alt):
                problems.append(f"{where}: the Chinese notebook's alt text is not Chinese: {alt[:60]!r}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.relative_to(ROOT / "notebooks").as_posix() for p in NOTEBOOKS])
def test_every_figure_of_every_notebook_has_alt_text(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert figure_problems(nb, chinese=path.parent.name == "zh") == []


def test_the_course_draws_a_figure_in_every_notebook_from_01() -> None:
    for path in NOTEBOOKS:
        if path.name.startswith("00_"):
            continue
        outputs = [o for c in json.loads(path.read_text(encoding="utf-8"))["cells"] for o in c.get("outputs", [])]
        assert any(alt_of(o) for o in outputs), f"{path.name} draws no figure"


def figure_notebook(source: str, data: dict, metadata: dict) -> Any:
    """A notebook of one code cell, ``source``, that displayed one output."""
    nb = new_notebook()
    nb.cells = [new_code_cell(source, execution_count=1,
                              outputs=[new_output("display_data", data=data, metadata=metadata)])]
    return nb


def plt_show_notebook() -> Any:
    """A figure as ``plt.show()`` stores it: a PNG and ``<Figure size ...>``, no alt text anywhere."""
    fig, ax = plt.subplots()
    ax.plot([1, 2, 3])
    png = io.BytesIO()
    fig.savefig(png, format="png")
    plt.close(fig)
    nb = figure_notebook("fig, ax = plt.subplots()\nax.plot([1, 2, 3])\nplt.show()", {
        "image/png": base64.b64encode(png.getvalue()).decode(), "text/plain": "<Figure size 640x480 with 1 Axes>"}, {})
    nb.cells.insert(0, new_markdown_cell("# A lesson"))
    return nb


def test_the_check_catches_each_missing_place_and_a_poor_alt_text() -> None:
    problems = figure_problems(plt_show_notebook())
    assert any("plt.show()" in p for p in problems) and any("no alt=" in p for p in problems)
    assert any("without alt text" in p for p in problems)
    fig, ax = plt.subplots()
    ax.bar(["a", "b"], [1, 2])
    text = "Two bars, a and b, the second twice as tall as the first one."
    data, metadata = figure_output(fig, alt=text)
    plt.close(fig)
    source = 'show_figure(fig, alt="Two bars, a and b, the second twice as tall as the first one.")'

    def notebook(data: dict, metadata: dict) -> Any:
        return figure_notebook(source, data, metadata)
    assert figure_problems(notebook(data, metadata)) == []
    assert figure_problems(notebook(data, metadata), chinese=True)  # English alt text in a Chinese notebook
    unlabelled = data["text/html"].replace(html.escape(text, quote=True), "")
    assert any("without alt text" in p for p in figure_problems(notebook({**data, "text/html": unlabelled}, {})))
    assert any("text/plain" in p for p in figure_problems(notebook({**data, "text/plain": "<Figure>"}, metadata)))
    poor = data["text/html"].replace(html.escape(text, quote=True), "figure.png")
    assert any("says too little" in p
               for p in figure_problems(notebook({"text/html": poor, "text/plain": "figure.png"}, {})))
    twice = {**data, "image/png": "iVBORw0KGgo="}
    assert any("stored twice" in p for p in figure_problems(notebook(twice, metadata)))


# -- the pieces -------------------------------------------------------------------------------------------
def test_figure_output_stores_the_image_once_with_its_alt_text_escaped_and_nbconvert_shows_it() -> None:
    from nbconvert import HTMLExporter

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    data, metadata = figure_output(fig, alt='A line from "a" to <b>: {count} points & a slope of {slope:.1f}.',
                                   count=2, slope=1.0)
    plt.close(fig)
    alt = 'A line from "a" to <b>: 2 points & a slope of 1.0.'
    assert set(data) == {"text/html", "text/plain"} and metadata == {} and data["text/plain"] == alt
    assert data["text/html"].startswith('<img src="data:image/png;base64,iVBORw0KGgo')  # a chart: a PNG
    assert data["text/html"].endswith(f' alt="{html.escape(alt, quote=True)}"/>')
    assert alt_of({"data": data, "metadata": metadata}) == alt
    nb = figure_notebook("show_figure(...)", data, metadata)
    for template in ("lab", "classic"):
        page, _ = HTMLExporter(template_name=template).from_notebook_node(nb)
        found = re.search(r"<img [^>]*alt=(['\"])(.*?)\1", page)  # nbconvert re-quotes the attribute its own way
        assert found and html.unescape(found[2]) == alt, template


def test_a_photograph_is_a_jpeg_and_a_chart_a_png() -> None:
    noise = np.random.default_rng(0).random((300, 400, 3))  # what a saliency map looks like to a PNG encoder
    fig, ax = plt.subplots()
    ax.imshow(noise)
    mime, image = image_bytes(fig)
    assert mime == "image/jpeg" and image.startswith(b"\xff\xd8"), mime
    png = io.BytesIO()
    fig.savefig(png, format="png", bbox_inches="tight")
    assert len(image) * 2 < len(png.getvalue())
    plt.close(fig)
    fig, ax = plt.subplots()
    ax.bar(["a", "b", "c"], [3, 1, 2])
    assert image_bytes(fig)[0] == "image/png"
    plt.close(fig)


def test_show_figure_displays_one_output_and_closes_the_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *args, **kwargs: shown.append((args, kwargs)))
    fig, ax = plt.subplots()
    ax.plot([1, 2])
    show_figure(fig, alt="A line rising from one to two, the only thing drawn in this figure.")
    assert not plt.fignum_exists(fig.number)
    (data,), kwargs = shown[0]
    assert kwargs["raw"] and alt_of({"data": data}) == data["text/plain"]
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="says too little"):
        show_figure(fig, alt="plot.png")
    assert not plt.fignum_exists(fig.number) and len(shown) == 1  # closed, and nothing shown


@pytest.mark.parametrize("text", ["", "   ", "chart.png", "<Figure size 640x480 with 1 Axes>", "A plot.", 42])
def test_check_alt_refuses_text_that_says_too_little(text: Any) -> None:
    with pytest.raises(ValueError):
        check_alt(text)


def test_check_alt_accepts_chinese() -> None:
    assert check_alt("三条横条：只保存梯度范数的钩子几乎不占内存，保存整个梯度的钩子和 retain_grad 一样多。")


def test_alt_literals_finds_each_literal_where_it_is() -> None:
    source = ('x = 1\nshow_figure(fig, alt="first {n} one, "\n                 "continued", n=x)\n'
              'FigureExplorer(draw, controls={}, alt="中文的 second")\n')
    found = alt_literals(source)
    assert [a.text for a in found] == ["first {n} one, continued", "中文的 second"]
    for literal in found:
        assert ast.literal_eval("(" + source[literal.start:literal.end] + ")") == literal.text
    with pytest.raises(ValueError, match="plain string literal"):
        alt_literals('show_figure(fig, alt=f"{n} bars")')
    with pytest.raises(ValueError, match="plain string literal"):
        alt_literals("show_figure(fig, alt=text)")
    assert alt_literals("not python (") == []


def test_the_chinese_build_writes_the_translated_alt_text_into_the_code() -> None:
    from babel.messages.catalog import Catalog

    source = ('show_figure(fig, alt="Two bars: {a} and {b}, "\n'
              '                     "the second the taller one by far, as the text says.", a=1, b=2)\n')
    catalog = Catalog(locale="zh")
    english = "Two bars: {a} and {b}, the second the taller one by far, as the text says."
    catalog.add(english, "两根柱子：{a} 和 {b}，第二根高得多，正如正文所说。"
                "这是一段足够长的中文说明文字，用来测试换行，占位符 {a_long_field_name} 绝不能被切开。", context="c1")
    built = editions.translated_code(source, "c1", "zh", catalog)
    assert alt_literals(built)[0].text.startswith("两根柱子：{a} 和 {b}")
    assert ast.parse(built) and built.endswith(", a=1, b=2)\n") and built.count("\n") == 2, built
    for line in built.splitlines():  # issue 43: no {field} cut over two literals ({st" "art})
        assert line.count("{") == line.count("}"), line
    assert editions.translated_code(source, "c2", "zh", catalog) == source  # no translation: the English stays


def test_the_chinese_strings_keep_the_english_fields() -> None:
    """A translated alt text or printed string with other {fields} than the English would fail at run time, or say
    other numbers."""
    for english in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        catalog = editions.read_catalog(editions.po_path("zh", str(english.relative_to(ROOT))))
        for unit in editions.notebook_units(english):
            message = catalog.get(unit.english, context=unit.context)
            if unit.kind == "string" and message is not None and message.string:
                fstring = unit.fstring
                assert sorted(units.fields(message.string, fstring)) == sorted(units.fields(unit.english, fstring)), \
                    unit.where


def test_nbval_masks_the_embedded_image_and_compares_the_rest() -> None:
    from nbval.plugin import get_sanitize_patterns

    patterns = get_sanitize_patterns((ROOT / "tests" / "nbval_sanitize.cfg").read_text(encoding="utf-8"))
    assert patterns, "tests/nbval_sanitize.cfg has no pattern nbval can read"
    assert "--nbval-sanitize-with=tests/nbval_sanitize.cfg" in (ROOT / "pyproject.toml").read_text(encoding="utf-8")

    def sanitized(text: str) -> str:
        for regex, replace in patterns:
            text = re.sub(regex, replace, text)
        return text

    one = '<img src="data:image/png;base64,iVBORw0KGgoAAA+/=" alt="A line."/>'
    other = '<img src="data:image/jpeg;base64,/9j/4AAQBBB/+=" alt="A line."/>'  # the same figure, drawn elsewhere
    assert sanitized(one) == sanitized(other)
    assert sanitized(one) != sanitized(other.replace("A line.", "Another line."))


def test_hygiene_reads_no_path_or_address_in_an_embedded_image() -> None:
    from notebook_hygiene import problems

    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    noisy = "iVBORw0KGgo+/usr/lib/x/0x7f3a2b1c4d60+/a/b/c"   # a path and an address, inside the image data only
    nb.cells = [new_markdown_cell("# A lesson\n\nObjectives: learn.\n\nEstimated time: 10 min. Binder: binder/"),
                new_code_cell("print(setup_notebook())", execution_count=1),
                new_code_cell("assert_no_hooks(model)", execution_count=2, outputs=[new_output(
                    "display_data", data={"text/html": f'<img src="data:image/png;base64,{noisy}" alt="x"/>',
                                          "text/plain": "x"})])]
    assert not [p for p in problems(nb) if p.startswith("unstable")]
    nb.cells[2].outputs[0].data["text/plain"] = "saved to /home/alice/course/out.png"
    assert [p for p in problems(nb) if p.startswith("unstable")]
