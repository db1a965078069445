"""Sphinx configuration of the course's website (``python -m tools.site`` runs Sphinx with ``-c tools/site``).

One configuration for both languages: ``-D language=en`` or ``-D language=zh_CN`` chooses the edition, and
``tools.site.extension`` sets what depends on it (the course map, the language switch, the launch buttons).
Nothing is executed: myst-nb renders the outputs stored in the notebooks, which nbval checks.
"""

from __future__ import annotations

from pathlib import Path

project = "PyTorch Hooks, hands-on"
author = copyright = ""  # noqa: A001 (Sphinx's names): in the edition's language, from tools/site/extension.py
language = "en"

extensions = ["myst_nb", "sphinx_copybutton", "tools.site.extension"]
root_doc = "index"
exclude_patterns: list[str] = []

# -- notebooks: stored outputs only (nbval checks them), never re-executed ------------------------------------------
nb_execution_mode = "off"
nb_ipywidgets_js: dict[str, dict[str, str]] = {}  # widget state is never stored (make refresh drops it): no CDN script
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "substitution"]
# Anchors as JupyterLab makes them ("3-·-Hooks-that-only-look"), so that the notebooks' links to each other's
# sections, written for JupyterLab, land on the same headings here (and the anchors stay what they are in Lab).
myst_heading_anchors = 6
myst_heading_slug_func = "tools.site.extension.jupyterlab_anchor"

# -- the book theme --------------------------------------------------------------------------------------------------
html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["static"]
html_css_files = ["course.css"]
html_js_files = [("course.js", {"defer": "defer"})]
html_favicon = "static/favicon.svg"
templates_path = ["templates"]
html_copy_source = True  # _sources/NN.ipynb: the complete notebook, second in the download menu
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "home_page_in_toc": False,  # the course's title above the search field links the landing page
    "show_navbar_depth": 1,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "article_header_end": ["language-switch.html", "article-header-buttons.html"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "navbar_persistent": [],  # the search field is in the sidebar: no second one in a header bar
    # The cheat-sheet's tables, six columns of code, take the width of the page's contents column (readable at 1366 px)
    "secondary_sidebar_items": {"**": ["page-toc.html"], "hooks_cheatsheet": []},
}
# The book theme's sidebar, with the course's title inside a landmark (templates/course-home.html)
html_sidebars = {"**": ["course-home.html", "search-button-field.html", "sbt-sidebar-nav.html"]}
# The chapter whose title holds the query first, and snippets from the article (search.js)
html_search_scorer = str(Path(__file__).with_name("search.js"))
html_use_index = False  # no index entries: no empty genindex page
# A heading's permalink is named by its title ("Link to this heading"), not read out as "#"
html_permalinks_icon = '<span aria-hidden="true">#</span>'
# A copy button on each code cell, not on its outputs (sphinx-copybutton), leaving out the ">>> " of a pasted session
copybutton_selector = "div:not(.output) > div.highlight pre"
copybutton_prompt_text = ">>> "
# Formulas as MathML (tools/site/extension.py), typeset by the browser itself: no script or font on any page.
html_math_renderer = "mathml"
