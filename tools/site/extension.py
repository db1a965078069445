"""What the course's website adds to myst-nb and the book theme (a Sphinx extension, loaded by conf.py):

- the landing page's course map and links, and the glossary page (from ``translations/zh/GLOSSARY.md``);
- on every page, a switch to its twin in the other language (``zh/`` below the English site) with its ``hreflang``;
- on each notebook page, Colab, Kaggle and Binder buttons that open the learner edition (``cloud``'s URLs), and a
  download menu with that edition first and the complete notebook second;
- every solution folded ("Show the solution"); each figure an image file of ``_images/`` with its alt text, its
  size and ``loading="lazy"``; formulas as MathML, typeset by the browser;
- Chinese search: jieba with the glossary as its user dictionary (前向钩子 is one word), and the words readers type
  for a term (显存 for 内存) indexed wherever the term is.

Usage: ``extensions = ["myst_nb", "tools.site.extension"]`` in conf.py.
"""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import imagesize
from docutils import nodes
from docutils.utils.math.latex2mathml import tex2mathml
from myst_nb.sphinx_ import HideCodeCellNode, depart_HideCellInput, visit_HideCellInput
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.search.zh import SearchChinese
from sphinx.transforms.post_transforms.images import DataURIExtractor

from course_utils.machinery import cloud
from course_utils.machinery.course import course_map
from course_utils.machinery.learner_edition import BEGIN

ROOT = Path(__file__).resolve().parents[2]
GLOSSARY = ROOT / "translations" / "zh" / "GLOSSARY.md"
NOTEBOOK = re.compile(r"\d\d_\w+")
FIGURE = re.compile(r'<img src="(data:image/(?:png|jpeg);base64,[A-Za-z0-9+/=]+)" alt="([^"]*)"/>')

# The few words the theme does not translate itself, as (English, Chinese) (the prose comes from
# tools/site/landing.md and its translation, translations/zh/landing.po).
_EN_ZH = {
    "twin": ("中文", "English"), "twin_lang": ("zh-CN", "en"),
    "twin_title": ("本页的中文版 (this page in Chinese)", "This page in English（本页的英文版）"),
    "home": ("Course home", "课程首页"), "author": ("the course's authors", "本课程的作者们"),
    "copyright": ("the course's authors, MIT licence", "本课程的作者们，MIT 许可证"),
    "launch": ("Run this notebook's exercises: Colab, Kaggle or Binder",
               "运行这个笔记本的练习：Colab、Kaggle 或 Binder"),
    "open_on": ("Open the exercises on {}", "在 {} 上打开练习"),
    "notebook": ("notebook", "笔记本"), "learn": ("what you learn", "你将学到"), "minutes": ("minutes", "分钟"),
    "total": ("total", "合计"),
    "show_solution": ("Show the solution", "显示参考答案"), "hide_solution": ("Hide the solution", "隐藏参考答案"),
    "exercises": ("Exercises .ipynb", "学员版 .ipynb"),
    "exercises_tip": ("The notebook with the exercises for you to write", "练习留给你来写的学员版笔记本"),
    "complete": ("Complete .ipynb", "完整版 .ipynb"),
    "complete_tip": ("The complete notebook, with every solution", "含全部参考答案的完整版笔记本"),
    "glossary": ("Glossary", "术语表"),
    "glossary_intro": ("The course's terms and their Chinese, one translation each, as the Chinese edition uses them "
                       "(from `translations/zh/GLOSSARY.md`).",
                       "课程中文版的术语和它们的英文原文，每个术语只用一种译法"
                       "（来自 `translations/zh/GLOSSARY.md`）。"),
}
WORDS = {lang: {key: pair[i] for key, pair in _EN_ZH.items()} for i, lang in enumerate(("en", "zh"))}


def edition(config: Config) -> str:
    """``"en"`` or ``"zh"`` from Sphinx's ``language`` (``zh_CN``)."""
    return "zh" if str(config.language).startswith("zh") else "en"


def jupyterlab_anchor(title: str) -> str:
    """A heading's anchor as JupyterLab makes it (its text, spaces as ``-``): myst's ``heading_slug_func``.

    Usage: ``jupyterlab_anchor("3 · Hooks that only look")`` -> ``"3-·-Hooks-that-only-look"``
    """
    return title.strip().replace(" ", "-")


# -- the glossary: the Chinese splitter's words, the readers' synonyms, the glossary page -----------------------------
def glossary_tables() -> list[tuple[tuple[str, str], list[tuple[str, str]]]]:
    """Each two-column table of ``translations/zh/GLOSSARY.md``: its header and its rows, in the file's order."""
    tables: list[tuple[tuple[str, str], list[tuple[str, str]]]] = []
    in_table = False
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) != 2 or set("".join(cells)) <= set("-:"):
            in_table = bool(cells)
            continue
        if not in_table:
            tables.append(((cells[0], cells[1]), []))
            in_table = True
        else:
            tables[-1][1].append((cells[0], cells[1]))
    return tables


def glossary_rows(header: tuple[str, str] = ("English", "中文")) -> list[tuple[str, str]]:
    """The rows of the first table of GLOSSARY.md with that header (the terms: English, Chinese)."""
    return next((rows for found, rows in glossary_tables() if found == header), [])


def glossary_terms() -> list[str]:
    """The Chinese terms of ``translations/zh/GLOSSARY.md`` (its second column), one word each."""
    terms: list[str] = []
    for _english, chinese in (row for _header, rows in glossary_tables() for row in rows):
        text = re.sub(r"[（(][^）)]*[）)]", " ", chinese)
        for part in re.split(r"[/／，,、；;\s]+", text):
            if re.fullmatch(r"[\u4e00-\u9fff]{2,}", part) and part not in terms:
                terms.append(part)
    return terms


def search_synonyms() -> dict[str, list[str]]:
    """The glossary's "a reader searches for" table, by the course's word: ``{"内存": ["显存"]}``."""
    synonyms: dict[str, list[str]] = {}
    for typed, term in glossary_rows(("a reader searches for", "the course's word")):
        synonyms.setdefault(term, []).append(typed)
    return synonyms


def glossary_page(lang: str) -> str:
    """The glossary page (``glossary.md``) of an edition: the terms table, the edition's language first."""
    words = WORDS[lang]
    rows = [(chinese, english) if lang == "zh" else (english, chinese) for english, chinese in glossary_rows()]
    header = ("中文", "English") if lang == "zh" else ("English", "中文")
    lines = [f"# {words['glossary']}", "", words["glossary_intro"], "", "| {} | {} |".format(*header), "|---|---|"]
    return "\n".join(lines + ["| {} | {} |".format(*row) for row in rows]) + "\n"


def chinese_search(synonyms: dict[str, list[str]]) -> type[SearchChinese]:
    """Sphinx's Chinese search, which also indexes a reader's word for a term wherever the term is (``synonyms``).

    Sphinx 9.0's loads the English stemmer's JavaScript but names ``ChineseStemmer``, which does not exist, so every
    search fails in the browser (sphinx-doc/sphinx#14229; fixed in Sphinx 9.1, which needs Python 3.12): where that
    is so, the stemmer is named right."""
    import sphinx.search

    class ChineseSearch(SearchChinese):
        def split(self, input: str) -> list[str]:
            words = super().split(input)
            return words + [typed for word in words for typed in synonyms.get(word, ())]

    scripts = Path(sphinx.search.__file__).parent / "minified-js"
    stemmer = (scripts / SearchChinese.js_stemmer_rawcode).read_text(encoding="utf-8")
    name = re.search(r"var\s+(\w+Stemmer)\s*=\s*function", stemmer)
    if name is not None and name[1] != f"{SearchChinese.language_name}Stemmer":
        ChineseSearch.js_stemmer_rawcode = ""
        ChineseSearch.js_stemmer_code = "\n".join([(scripts / "base-stemmer.js").read_text(encoding="utf-8"), stemmer,
                                                   f"window.Stemmer = {name[1]};"])
    return ChineseSearch


# -- the landing page ------------------------------------------------------------------------------------------------
def course_map_table(lang: str, folder: Path) -> str:
    """The course map as a Markdown table whose titles link to the notebooks' pages."""
    words = WORDS[lang]
    rows = course_map(folder)
    lines = [f"| {words['notebook']} | {words['learn']} | {words['minutes']} |", "|---|---|---|"]
    lines += [f"| [{row.title}]({row.file}) | {row.learn} | {row.minutes} |" for row in rows]
    lines.append(f"| **{words['total']}** | | **{sum(row.minutes for row in rows)}** |")
    return "\n".join(lines)


def configure(app: Sphinx, config: Config) -> None:
    """What depends on the edition: the landing page's substitutions and the Chinese search's dictionary."""
    lang = edition(config)
    landing = Path(app.srcdir) / "index.md"
    title = re.search(r"^# (.+)$", landing.read_text(encoding="utf-8"), re.MULTILINE) if landing.exists() else None
    if title:  # the landing page's title, in the edition's language, names the site (sidebar, browser tab)
        config.html_title = config.project = title[1].strip()
    config.author, config.copyright = WORDS[lang]["author"], WORDS[lang]["copyright"]  # the footer, in its language
    repository = f"https://github.com/{cloud.REPOSITORY}"
    config.myst_substitutions = {
        **config.myst_substitutions,
        "course_map": course_map_table(lang, Path(app.srcdir)),
        "repository_link": f"[{cloud.REPOSITORY}]({repository})",
        "pip_install": f'`pip install "{cloud.install_requirement()}"`',
    }
    config.html_context = {**config.html_context, "course_lang": lang, "course_repository": repository}
    if lang == "zh":
        userdict = Path(app.doctreedir) / "glossary-userdict.txt"
        userdict.parent.mkdir(parents=True, exist_ok=True)
        userdict.write_text("\n".join(glossary_terms()) + "\n", encoding="utf-8")
        config.html_search_options = {**config.html_search_options, "dict": str(userdict)}


def page_source(app: Sphinx, docname: str, source: list[str]) -> None:
    """What the site shows differently from the file: a guide without its own "**中文版：** ..." or "**English:** ..."
    line (the language switch replaces it); a notebook with each exercise's solution cell folded, input and output
    (the check's ✓ can name the answer), behind "Show the solution". The files themselves, which the download menu
    offers (``_sources/``), stay as they are."""
    suffix = Path(app.env.doc2path(docname)).suffix
    if suffix == ".md":
        source[0] = re.sub(r"(?m)^\*\*(?:中文版：|English:)\*\* \[[^\]]*\]\([^)]*\)\s*$\n?", "", source[0])
    elif suffix == ".ipynb":
        words = WORDS[edition(app.config)]
        notebook = json.loads(source[0])
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code" and BEGIN in "".join(cell["source"]):
                cell["metadata"]["tags"] = [*cell["metadata"].get("tags", []), "hide-cell"]
                cell["metadata"]["mystnb"] = {"code_prompt_show": words["show_solution"],
                                              "code_prompt_hide": words["hide_solution"]}
        source[0] = json.dumps(notebook)


def folded_cell(self: Any, node: HideCodeCellNode) -> None:
    """myst-nb's folded cell, its ``<summary>`` named by the prompt it shows ("Show the solution"): myst-nb names
    each one "Toggle hidden content", which axe-core reports (label-content-name-mismatch, WCAG 2.5.3)."""
    start = len(self.body)
    visit_HideCellInput(self, node)
    self.body[start:] = [part.replace(' aria-label="Toggle hidden content"', "") for part in self.body[start:]]


# -- figures: image files with their alt text ------------------------------------------------------------------
def figure_image(html_text: str) -> nodes.image | None:
    """An image node for a figure's ``<img src="data:..." alt="...">`` (its size read from the image), or None."""
    found = FIGURE.fullmatch(html_text.strip())
    if found is None:
        return None
    width, height = imagesize.get(io.BytesIO(base64.b64decode(found[1].partition(",")[2])))
    return nodes.image(uri=found[1], alt=html.unescape(found[2]), width=str(width), height=str(height),
                       loading="lazy", candidates={"?": found[1]})


def notebook_figures(app: Sphinx, doctree: nodes.document) -> None:
    """Each figure of a notebook page as an image node, lazily loaded (``FigureFiles`` writes it to a file)."""
    if Path(app.env.doc2path(app.env.docname)).suffix == ".ipynb":
        for raw in list(doctree.findall(nodes.raw)):
            if raw.get("format") == "html" and (image := figure_image(raw.astext())) is not None:
                raw.replace_self(image)


class FigureFiles(DataURIExtractor):
    """Sphinx's own extractor of ``data:`` images, for the HTML builder too: each figure becomes a file of
    ``_images/``, which a browser caches and loads when it is about to be seen, instead of bytes inside the page."""

    def match(self, node: nodes.image) -> bool:
        return node["uri"].startswith("data:")


# -- page furniture: language switch, launch and download menus, formulas ----------------------------------------
def twin_url(pagename: str, lang: str) -> str:
    """The same page in the other edition, relative to this page (English at the root, Chinese in ``zh/``)."""
    up = "../" * pagename.count("/")
    return f"{up}zh/{pagename}.html" if lang == "en" else f"../{up}{pagename}.html"


def language_switch(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """The switch to the twin page (``templates/language-switch.html``), its ``hreflang`` link, and ``<html lang>``
    as BCP 47 writes it (``zh-CN``; Sphinx's ``language`` is ``zh_CN``)."""
    lang = edition(app.config)
    words = WORDS[lang]
    context["default_mode"] = "auto"  # the reader's light or dark preference (the theme logs an error without it)
    context.update(language=str(app.config.language).replace("_", "-"), course_twin_url=twin_url(pagename, lang),
                   course_twin_label=words["twin"], course_twin_lang=words["twin_lang"],
                   course_twin_title=words["twin_title"], course_home_label=words["home"])
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{words["twin_lang"]}" href="{context["course_twin_url"]}">')


def without_search_term_highlighting(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                                      doctree: Any) -> None:
    """Sphinx's sphinx_highlight.js marks the words of a ``?highlight=`` link; the course's search (search.js) makes
    no such link, so no page but the search page loads it (5 kB each)."""
    if pagename == "search":  # Sphinx's search results page uses it
        return
    context["script_files"] = [script for script in context.get("script_files", [])
                               if not getattr(script, "filename", str(script)).endswith("sphinx_highlight.js")]


def notebook_buttons(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """On a notebook page: the theme's launch menu with Colab, Kaggle and Binder, and its download menu with the
    learner edition first (``make site`` writes it to the site's ``notebooks/``), the complete notebook second (the
    file of ``_sources/``), then the print view."""
    if not (NOTEBOOK.fullmatch(pagename) and context.get("page_source_suffix") == ".ipynb"):
        return
    lang = edition(app.config)
    words = WORDS[lang]
    notebook = f"{pagename}.ipynb" if lang == "en" else f"{lang}/{pagename}.ipynb"
    launch = [("Colab", cloud.colab_url(notebook), "fab fa-google"),
              ("Kaggle", cloud.kaggle_url(notebook), "fab fa-kaggle"),
              ("Binder", cloud.binder_url(notebook), "fas fa-cloud")]
    buttons = context.setdefault("header_buttons", [])
    buttons.insert(0, {
        "type": "group", "tooltip": words["launch"], "icon": "fas fa-rocket", "label": "launch-buttons",
        "buttons": [{"type": "link", "text": name, "url": url, "icon": icon, "label": f"launch-{name.lower()}",
                     "tooltip": words["open_on"].format(name)} for name, url, icon in launch],
    })
    for group in buttons:
        if group.get("label") == "download-buttons":  # the theme's: the page's source file, then the print view
            source, pdf = ({b["label"]: b for b in group["buttons"]}[label]
                           for label in ("download-source-button", "download-pdf-button"))
            group["buttons"] = [
                {**source, "url": ("" if lang == "en" else "../") + f"notebooks/{notebook}", "text": words["exercises"],
                 "tooltip": words["exercises_tip"], "label": "download-learner-button"},
                {**source, "text": words["complete"], "tooltip": words["complete_tip"]}, pdf]


def formula_lines(tex: str) -> list[str]:
    """An inline formula cut before each ``=`` outside braces and environments, where a line may break (as KaTeX
    breaks a long formula): a browser does not break a MathML formula, which would widen a phone's page.

    Usage: ``formula_lines("a = b_{i=1} = c")`` -> ``["a ", "= b_{i=1} ", "= c"]``
    """
    parts, depth, start = [], 0, 0
    for token in re.finditer(r"\\(begin|end)\{\w+\*?\}|[{}=]", tex):
        depth += {"{": 1, "}": -1, "=": 0}.get(token[0], 1 if token[1] == "begin" else -1)
        if token[0] == "=" and depth == 0 and tex[start:token.start()].strip():
            parts.append(tex[start:token.start()])
            start = token.start()
    return [*parts, tex[start:]]


def mathml(self: Any, node: nodes.Element) -> None:
    """A formula as MathML (docutils' LaTeX converter), which every current browser typesets itself: no script, no
    font to fetch, and a screen reader reads it."""
    if isinstance(node, nodes.math_block):
        self.body.append(tex2mathml(node.astext(), as_block=True))
    else:
        self.body.append("<wbr>".join(tex2mathml(part) for part in formula_lines(node.astext())))
    raise nodes.SkipNode


def nojekyll(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html" and edition(app.config) == "en":  # the site's root
        (Path(app.outdir) / ".nojekyll").touch()  # GitHub Pages: serve _static/ and _images/ as they are


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_html_math_renderer("mathml", inline_renderers=(mathml, None), block_renderers=(mathml, None))
    app.connect("config-inited", configure)
    app.add_search_language(chinese_search(search_synonyms()))
    app.connect("source-read", page_source)
    app.add_node(HideCodeCellNode, override=True, html=(folded_cell, depart_HideCellInput))
    app.connect("doctree-read", notebook_figures)
    app.add_post_transform(FigureFiles)
    # before the theme drops the header templates that render empty (500); after it fills its header buttons (501)
    app.connect("html-page-context", language_switch, priority=450)
    app.connect("html-page-context", notebook_buttons, priority=600)
    app.connect("html-page-context", without_search_term_highlighting)
    app.connect("build-finished", nojekyll)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}

