"""Figures with alt text: every figure the course draws is shown by :func:`show_figure`, with a description of what it
shows and what to read from it, written where the figure is made.

The alt text is the literal keyword argument ``alt="..."`` of :func:`show_figure` or of a widget
(:mod:`course_utils.widgets`), with ``str.format`` fields for computed numbers; never an f-string, so that
:func:`alt_literals` finds it and ``tools/i18n/editions.py`` translates it (keyed by cell id and ``/alt1``, ...).
Numbers in it are compared by nbval like any printed number: print bounds.

A figure's output is one ``display_data`` with the image stored once: ``text/html`` (an ``<img>`` with a ``data:``
PNG, or a JPEG where that is less than half the size, and its ``alt``), read by JupyterLab, Colab, VS Code,
nbconvert and the site (myst-nb); and ``text/plain``, the alt text, which nbval compares (the image itself is masked
by ``tests/nbval_sanitize.cfg``). No ``image/png`` beside it: that stored each figure twice (the notebooks went from
4.2 to 8.9 MB), and JupyterLab's image renderer (``@jupyterlab/rendermime`` 4.6) writes no ``alt`` at all. Widgets
add the live controls' view (``application/vnd.jupyter.widget-view+json``) to the same bundle.

Usage::

    fig, ax = plt.subplots()
    ax.bar(names, sizes)
    show_figure(fig, alt="Bars of the bytes each layer keeps for backward: {top} keeps the most.", top=names[0])
"""

from __future__ import annotations

import ast
import base64
import html
import io
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["AltLiteral", "alt_literals", "alt_of", "check_alt", "figure_output", "image_bytes", "show_figure"]

ALT_KEYWORD = "alt"
"""The keyword argument that carries a figure's alt text, in :func:`show_figure` and in every widget."""

_FILE_NAME = re.compile(r"^\S+\.(?:png|jpe?g|svg|gif|pdf)$", re.IGNORECASE)
_CJK = re.compile(r"[\u3400-\u9fff]")
MIN_WORDS, MIN_CJK = 8, 15


def check_alt(text: str) -> str:
    """``text`` stripped, if it can serve as alt text; else ``ValueError`` saying what alt text should be.

    Usage: ``check_alt("Bars of the bytes each layer keeps: the first ReLU keeps the most.")``
    """
    if not isinstance(text, str):
        raise ValueError(f"alt text must be a string, got {type(text).__name__}.")
    text = " ".join(text.split())
    long_enough = len(text.split()) >= MIN_WORDS or len(_CJK.findall(text)) >= MIN_CJK
    if not text or _FILE_NAME.match(text) or text.startswith("<Figure") or not long_enough:
        raise ValueError(
            f"alt text {text!r} says too little: write what the figure shows and what to read from it, in a sentence "
            f"or two (at least {MIN_WORDS} words), e.g. 'Bars of the bytes each layer keeps for backward: the first "
            "ReLU keeps the most.'")
    return text


def image_bytes(figure: Any) -> tuple[str, bytes]:
    """``(MIME type, bytes)`` of the figure as the inline backend draws it: a PNG, or a JPEG (quality 90) where that
    is less than half the PNG -- a photograph or a saliency map (notebook 05's: 598 kB as PNG, 106 kB as JPEG).

    Usage: ``mime, data = image_bytes(fig)``
    """
    drawn = {}
    for kind, options in (("png", {}), ("jpeg", {"pil_kwargs": {"quality": 90}})):
        buffer = io.BytesIO()
        figure.savefig(buffer, format=kind, bbox_inches="tight", **options)
        drawn[f"image/{kind}"] = buffer.getvalue()
    small = len(drawn["image/jpeg"]) * 2 < len(drawn["image/png"])
    return ("image/jpeg", drawn["image/jpeg"]) if small else ("image/png", drawn["image/png"])


def figure_output(figure: Any, alt: str, **values: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(data, metadata)`` of the figure's display output with its alt text (``alt`` formatted with ``values``): the
    image once, in an ``<img>`` with its alt text (``text/html``), and the alt text as ``text/plain``.

    Usage: ``data, metadata = figure_output(fig, alt="... {n} ...", n=3)``
    """
    text = check_alt(alt.format(**values) if values else alt)
    mime, image = image_bytes(figure)
    encoded = base64.b64encode(image).decode("ascii")
    data = {
        "text/html": f'<img src="data:{mime};base64,{encoded}" alt="{html.escape(text, quote=True)}"/>',
        "text/plain": text,
    }
    return data, {}


def show_figure(figure: Any, *, alt: str, **values: Any) -> None:
    """Display ``figure`` with its alt text, then close it (so the inline backend does not show it a second time).

    ``alt`` says what the figure shows and what to read from it; ``values`` fill its ``{fields}``.
    Usage: ``show_figure(fig, alt="Peak memory per number of segments: lowest at {best} segments.", best=4)``
    """
    import matplotlib.pyplot as plt
    from IPython.display import display

    try:
        data, metadata = figure_output(figure, alt, **values)
    finally:
        plt.close(figure)
    display(data, metadata=metadata, raw=True)


_IMG = re.compile(r'^<img src="data:image/[\w+.-]+;base64,[A-Za-z0-9+/=]+" alt="([^"]*)"/>$')


def alt_of(output: dict[str, Any]) -> str | None:
    """The alt text of a stored notebook output: its figure's ``<img alt>`` (:func:`figure_output`), else None.

    Usage: ``[alt_of(o) for o in cell["outputs"]]``
    """
    found = _IMG.match("".join((output.get("data") or {}).get("text/html", "")))
    return html.unescape(found[1]) if found else None


@dataclass(frozen=True)
class AltLiteral:
    """An ``alt="..."`` string literal in a cell's source: its text and where it is (character offsets)."""

    text: str
    start: int
    end: int


def alt_literals(source: str) -> list[AltLiteral]:
    """Every ``alt=`` keyword argument's string literal in ``source``, in order; an f-string or another expression
    as ``alt=`` raises ``ValueError`` (it could not be translated).

    Usage: ``[a.text for a in alt_literals(cell_source)]``
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(line: int, column: int) -> int:  # ast columns count UTF-8 bytes
        text = source[starts[line - 1]:starts[line]] if line < len(starts) else ""
        return starts[line - 1] + len(text.encode("utf-8")[:column].decode("utf-8"))

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        for keyword in node.keywords:
            if keyword.arg != ALT_KEYWORD:
                continue
            value = keyword.value
            if not (isinstance(value, ast.Constant) and isinstance(value.value, str)):
                raise ValueError(f"alt= must be a plain string literal (with {{fields}} for numbers), not "
                                 f"{ast.unparse(value)[:60]!r}: the translation pipeline replaces the literal")
            start = offset(value.lineno, value.col_offset)
            end = offset(value.end_lineno or value.lineno, value.end_col_offset or 0)
            found.append(AltLiteral(value.value, start, end))
    return sorted(found, key=lambda literal: literal.start)
