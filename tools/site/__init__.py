"""The course as a website: every notebook, the cheat-sheet, the instructor guide and a landing page, in English and
in Chinese, built with myst-nb and the Sphinx book theme from the notebooks' stored outputs (never re-executed).

- ``tools/site/__main__.py``: ``python -m tools.site`` (``make site``) stages the sources and runs Sphinx for each
  language into ``build/site/`` (English) and ``build/site/zh/`` (Chinese), with the slides beside them;
- ``tools/site/conf.py``: the Sphinx configuration; ``tools/site/extension.py``: what the course adds (language
  switch, launch buttons, KaTeX, alt text, the Chinese search's dictionary);
- ``tools/site/landing.md``: the landing page's text (translated like the guides: ``translations/zh/landing.po``).
"""
