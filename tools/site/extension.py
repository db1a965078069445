"""What the course's website adds to myst-nb and the book theme (a Sphinx extension; ``tools/site/conf.py`` loads it).

- the landing page's course map and links (MyST substitutions) in the page's language;
- on every page, a switch to the same page in the other language (``zh/`` below the English site), and
  ``<link rel="alternate" hreflang>`` to it; the guides' own "中文版 / English" lines are left out (the switch does it);
- on each notebook page, launch buttons for Colab, Kaggle and Binder, in the theme's header, with the URLs
  ``course_utils.machinery.cloud`` makes (the same as the notebook's own "Open in" line);
- maths typeset in the browser by the vendored KaTeX (``vendor/katex``): nothing is fetched;
- a figure's alt text from wherever its stored output carries it: the course's figures carry it in their
  ``text/html``'s ``<img alt>`` (``course_utils.figures``), which myst-nb prefers and copies as it is; for an output
  with only an image, myst-nb reads the cell's ``mystnb: image: alt`` metadata itself, and this adds the output's own
  metadata (``{"image/png": {"alt": ...}}``, what ``IPython.display.Image(..., alt=...)`` stores and nbconvert reads)
  and the cell's ``alt`` (nbconvert's);
- Chinese search: Sphinx's splitter (jieba) with the course's glossary as its user dictionary, so that 前向钩子 or
  梯度裁剪 are words of the index and not only their pieces.

Usage: ``extensions = ["myst_nb", "tools.site.extension"]`` in conf.py (``python -m tools.site`` builds the site).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import nbformat
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.ext import mathjax
from sphinx.search.zh import SearchChinese

from course_utils.machinery import cloud
from course_utils.machinery.course import course_map

ROOT = Path(__file__).resolve().parents[2]
KATEX = ROOT / "vendor" / "katex"
GLOSSARY = ROOT / "translations" / "zh" / "GLOSSARY.md"
NOTEBOOK = re.compile(r"\d\d_\w+")

# The few words the theme does not translate itself, by edition (the prose comes from tools/site/landing.md and
# its translation, translations/zh/landing.po).
WORDS = {
    "en": {
        "twin": "中文", "twin_lang": "zh-CN", "twin_title": "本页的中文版 (this page in Chinese)", "home": "Course home",
        "launch": "Run this notebook: Colab, Kaggle or Binder", "open_on": "Open this notebook on {}",
        "notebook": "notebook", "learn": "what you learn", "minutes": "minutes", "total": "total",
    },
    "zh": {
        "twin": "English", "twin_lang": "en", "twin_title": "This page in English（本页的英文版）", "home": "课程首页",
        "launch": "运行这个笔记本：Colab、Kaggle 或 Binder", "open_on": "在 {} 上打开这个笔记本",
        "notebook": "笔记本", "learn": "你将学到", "minutes": "分钟", "total": "合计",
    },
}


def edition(config: Config) -> str:
    """``"en"`` or ``"zh"`` from Sphinx's ``language`` (``zh_CN``)."""
    return "zh" if str(config.language).startswith("zh") else "en"


def jupyterlab_anchor(title: str) -> str:
    """A heading's anchor as JupyterLab makes it (its text, spaces as ``-``): myst's ``heading_slug_func``.

    Usage: ``jupyterlab_anchor("3 · Hooks that only look")`` -> ``"3-·-Hooks-that-only-look"``
    """
    return title.strip().replace(" ", "-")


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


def glossary_terms() -> list[str]:
    """The Chinese terms of ``translations/zh/GLOSSARY.md`` (its second column), one word each."""
    terms: list[str] = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not re.search(r"[\u4e00-\u9fff]", cells[1]):
            continue
        text = re.sub(r"[（(][^）)]*[）)]", " ", cells[1])
        for part in re.split(r"[/／，,、；;\s]+", text):
            if re.fullmatch(r"[\u4e00-\u9fff]{2,}", part) and part not in terms:
                terms.append(part)
    return terms


def chinese_search() -> type[SearchChinese] | None:
    """Sphinx 9.0's Chinese search loads the English stemmer's JavaScript but names ``ChineseStemmer``, which does not
    exist, so every search fails in the browser (sphinx-doc/sphinx#14229; fixed upstream in Sphinx 9.1, which needs
    Python 3.12). Where that is so, the same search with the stemmer named right; None where Sphinx has the fix."""
    import sphinx.search

    scripts = Path(sphinx.search.__file__).parent / "minified-js"
    stemmer = (scripts / SearchChinese.js_stemmer_rawcode).read_text(encoding="utf-8")
    name = re.search(r"var\s+(\w+Stemmer)\s*=\s*function", stemmer)
    if name is None or name[1] == f"{SearchChinese.language_name}Stemmer":
        return None

    class ChineseSearch(SearchChinese):
        js_stemmer_rawcode = ""
        js_stemmer_code = "\n".join([(scripts / "base-stemmer.js").read_text(encoding="utf-8"), stemmer,
                                      f"window.Stemmer = {name[1]};"])

    return ChineseSearch


def drop_language_lines(app: Sphinx, docname: str, source: list[str]) -> None:
    """A guide's own "**中文版：** ..." or "**English:** ..." paragraph: the site's language switch replaces it."""
    if Path(app.env.doc2path(docname)).suffix != ".md":
        return
    source[0] = re.sub(r"(?m)^\*\*(?:中文版：|English:)\*\* \[[^\]]*\]\([^)]*\)\s*$\n?", "", source[0])


# -- figures: alt text -------------------------------------------------------------------------------------------
def output_alt(output: Any, mime_type: str, cell_metadata: dict[str, Any]) -> str | None:
    """The alt text an image output carries: its metadata for the MIME type, the output's own ``alt``, the cell's."""
    metadata = output.get("metadata", {})
    for found in ((metadata.get(mime_type) or {}).get("alt"), metadata.get("alt"), cell_metadata.get("alt")):
        if isinstance(found, str) and found.strip():
            return found.strip()
    return None


def alt_text_from_outputs(app: Sphinx, doctree: nodes.document) -> None:
    """Give each notebook image the alt text its stored output carries (myst-nb reads only the cell's ``mystnb``)."""
    path = Path(app.env.doc2path(app.env.docname))
    if path.suffix != ".ipynb":
        return
    cells = nbformat.read(path, as_version=4).cells
    for cell_node in doctree.findall(lambda n: isinstance(n, nodes.container) and n.get("nb_element") == "cell_code"):
        cell = cells[cell_node["cell_index"]]
        displays = iter([o for o in cell.get("outputs", []) if o.get("output_type") in ("display_data", "execute_result")])
        bundles = cell_node.findall(lambda n: isinstance(n, nodes.container) and n.get("nb_element") == "mime_bundle")
        for bundle in bundles:
            mime_types = [child.get("mime_type") for child in bundle.children]
            output = next((o for o in displays if set(mime_types) <= set(o.get("data", {}))), None)
            if output is None:  # not the outputs myst-nb rendered: leave the images as they are
                break
            for container in bundle.children:
                for image in container.findall(nodes.image):
                    alt = output_alt(output, container["mime_type"], cell.metadata)
                    if alt and not image.get("alt"):
                        image["alt"] = alt


# -- page furniture: language switch, launch buttons, KaTeX ------------------------------------------------------
def twin_url(pagename: str, lang: str) -> str:
    """The same page in the other edition, relative to this page (English at the root, Chinese in ``zh/``)."""
    up = "../" * pagename.count("/")
    return f"{up}zh/{pagename}.html" if lang == "en" else f"../{up}{pagename}.html"


def language_switch(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """The switch to the twin page (``templates/language-switch.html``), its ``hreflang`` link, and ``<html lang>``
    as BCP 47 writes it (``zh-CN``; Sphinx's ``language`` is ``zh_CN``)."""
    lang = edition(app.config)
    words = WORDS[lang]
    context["language"] = str(app.config.language).replace("_", "-")
    context["default_mode"] = "auto"  # the reader's light or dark preference (the theme logs an error without it)
    context["course_twin_url"] = twin_url(pagename, lang)
    context["course_twin_label"] = words["twin"]
    context["course_twin_lang"] = words["twin_lang"]
    context["course_twin_title"] = words["twin_title"]
    context["course_home_label"] = words["home"]
    context["metatags"] = context.get("metatags", "") + (
        f'\n<link rel="alternate" hreflang="{words["twin_lang"]}" href="{context["course_twin_url"]}">')


def launch_buttons(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """On a notebook page, the theme's launch menu with Colab, Kaggle and Binder (URLs from course_utils' cloud)."""
    if not (NOTEBOOK.fullmatch(pagename) and context.get("page_source_suffix") == ".ipynb"):
        return
    lang = edition(app.config)
    words = WORDS[lang]
    notebook = f"{pagename}.ipynb" if lang == "en" else f"{lang}/{pagename}.ipynb"
    launch = [("Colab", cloud.colab_url(notebook), "_static/images/logo_colab.png"),
              ("Kaggle", cloud.kaggle_url(notebook), "fab fa-kaggle"),
              ("Binder", cloud.binder_url(notebook), "_static/images/logo_binder.svg")]
    context.setdefault("header_buttons", []).insert(0, {
        "type": "group", "tooltip": words["launch"], "icon": "fas fa-rocket", "label": "launch-buttons",
        "buttons": [{"type": "link", "text": name, "url": url, "icon": icon, "label": f"launch-{name.lower()}",
                     "tooltip": words["open_on"].format(name)} for name, url, icon in launch],
    })


def katex(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """KaTeX's files on the pages that have formulas (``static/course-katex.js`` typesets them)."""
    if app.builder.math_renderer_name == "katex" and doctree is not None and (
            app.env.get_domain("math").has_equations(pagename)):
        app.add_css_file("katex/katex.min.css")
        app.add_js_file("katex/katex.min.js", loading_method="defer")
        app.add_js_file("katex/contrib/auto-render.min.js", loading_method="defer")
        app.add_js_file("course-katex.js", loading_method="defer")


def copy_katex(app: Sphinx, exception: Exception | None) -> None:
    if exception is None and app.builder.format == "html":
        shutil.copytree(KATEX, Path(app.outdir) / "_static" / "katex", dirs_exist_ok=True)
        if edition(app.config) == "en":  # the site's root
            (Path(app.outdir) / ".nojekyll").touch()  # GitHub Pages: serve _static/ and _images/ as they are


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_html_math_renderer("katex", inline_renderers=(mathjax.html_visit_math, None),
                               block_renderers=(mathjax.html_visit_displaymath, None))
    app.connect("config-inited", configure)
    if (fixed := chinese_search()) is not None:
        app.add_search_language(fixed)
    app.connect("source-read", drop_language_lines)
    app.connect("doctree-read", alt_text_from_outputs)
    # before the theme drops the header templates that render empty (500); after it fills its header buttons (501)
    app.connect("html-page-context", language_switch, priority=450)
    app.connect("html-page-context", launch_buttons, priority=600)
    app.connect("html-page-context", katex)
    app.connect("build-finished", copy_katex)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}


__all__ = ["alt_text_from_outputs", "course_map_table", "glossary_terms", "jupyterlab_anchor", "output_alt", "setup",
           "twin_url"]
