"""The course map, read from the notebooks' own opening cells (so it can never drift from them)::

    # 01 · Tensor hooks
    **You will learn** how to read and change gradients with tensor hooks.
    **Estimated time:** 35 min

The notebooks are the checkout's ``notebooks/``, or where course_utils was installed without its checkout (Colab,
Kaggle), the copy the wheel ships as package data: :func:`notebooks_folder`.

Usage: ``print(course_map_markdown())`` or ``[row.title for row in course_map()]``
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from course_utils.machinery.layout import NOTEBOOK_GLOB
from course_utils.machinery.messages import LANGUAGES, N_, _, in_language, language

__all__ = ["NOTEBOOKS_DIR", "NotebookInfo", "course_map", "course_map_markdown", "notebooks_folder"]

NOTEBOOKS_DIR = Path(__file__).resolve().parents[2] / "notebooks"
"""The checkout's notebooks/ (absent where course_utils was installed without its checkout)."""


def notebooks_folder(lang: str = "en") -> Path:
    """The folder of the course notebooks in ``lang`` (``"en"``: ``notebooks/``; ``"zh"``: ``notebooks/zh/``): the
    checkout's, else the installed package's copy.

    Usage: ``sorted(notebooks_folder().glob(NOTEBOOK_GLOB))``
    """
    if lang not in LANGUAGES:
        raise ValueError(f"lang={lang!r} is not a language of the course: use one of {', '.join(LANGUAGES)}.")
    below = () if lang == "en" else (lang,)
    checkout = NOTEBOOKS_DIR.joinpath(*below)
    if any(checkout.glob(NOTEBOOK_GLOB)):
        return checkout
    packaged = resources.files("course_utils").joinpath("notebooks", *below)
    if isinstance(packaged, Path) and any(packaged.glob(NOTEBOOK_GLOB)):
        return packaged
    raise FileNotFoundError(
        "No course notebooks (NN_topic.ipynb): course_utils is neither in the course checkout nor installed with its "
        "notebooks. Install the course with `pip install` of its repository (the install cell at the top of each "
        "notebook does it on Colab and Kaggle), or run from the course folder (`make lab`)."
    )

_TITLE = re.compile(r"^#\s+(.+?)\s*$", re.MULTILINE)
# English, and the Chinese edition's "**你将学到** ..." and "**预计时间：** 35 分钟"
_LEARN = re.compile(r"\*\*(?:You will learn|你将学[到会][:：]?)\*\*[:：]?\s*(.+?)\s*$", re.MULTILINE)
_MINUTES = re.compile(r"\*\*(?:Estimated time:|预计时间[:：]?)\*\*[:：]?\s*(?:约\s*)?(\d+)\s*(?:min|分钟)",
                      re.IGNORECASE)


@dataclass(frozen=True)
class NotebookInfo:
    """One row of the course map."""

    file: str
    title: str
    learn: str
    minutes: int


def read_opening(path: Path) -> NotebookInfo:
    """Title, one-line summary and minutes from a notebook's opening cell; a clear error when one is missing."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    if not cells or cells[0].get("cell_type") != "markdown":
        raise ValueError(f"{path.name}: the first cell must be the markdown opening (title, objectives, time).")
    text = "".join(cells[0]["source"])  # a list of lines, or one string
    found = {"title": _TITLE.search(text), "learn": _LEARN.search(text), "minutes": _MINUTES.search(text)}
    missing = [name for name, match in found.items() if match is None]
    if missing:
        raise ValueError(
            f"{path.name}: the opening cell lacks {', '.join(missing)} "
            "(expected '# Title', '**You will learn** ...' and '**Estimated time:** N min')."
        )
    title, learn, minutes = (match.group(1) for match in found.values() if match)
    return NotebookInfo(path.name, title, learn, int(minutes))


def course_map(notebooks_dir: Path | None = None) -> list[NotebookInfo]:
    """Every ``NN_topic.ipynb`` in teaching order, with its title, summary and estimated minutes."""
    folder = notebooks_folder() if notebooks_dir is None else Path(notebooks_dir)
    paths = sorted(folder.glob(NOTEBOOK_GLOB))
    if not paths:
        raise FileNotFoundError(f"No course notebooks (NN_topic.ipynb) in {folder.name}/.")
    return [read_opening(path) for path in paths]


def course_map_markdown(notebooks_dir: Path | None = None, lang: str | None = None) -> str:
    """The course map as a markdown table (the README carries the same table) in ``lang`` (default: the language
    messages are shown in, so a Chinese notebook gets the Chinese notebooks' titles and headers).

    Usage: ``print(course_map_markdown(lang="zh"))``
    """
    lang = language() if lang is None else lang
    rows = course_map(notebooks_folder(lang) if notebooks_dir is None else notebooks_dir)
    with in_language(lang):
        lines = [_(N_("| notebook | what you learn | minutes |")), "|---|---|---|"]
        lines += [f"| `{row.file}` | {row.learn} | {row.minutes} |" for row in rows]
        lines.append(_(N_("| **total** | | **{minutes}** |")).format(minutes=sum(row.minutes for row in rows)))
    return "\n".join(lines)
