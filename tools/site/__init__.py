"""The course as a website: every notebook, the cheat-sheet, the instructor guide, the glossary and a landing page, in
English and in Chinese, built with myst-nb and the Sphinx book theme from the notebooks' stored outputs (never
re-executed), with the learner edition of every notebook beside them.

- ``__main__.py``: ``python -m tools.site`` (``make site``, ``make html``), the command;
- ``build.py``: stages each language's sources and runs Sphinx for both (and ``tools/build_editions.py`` for their
  slides) at once: English in ``build/site/``, Chinese in ``build/site/zh/``, the learner editions in
  ``build/site/notebooks/``;
- ``conf.py``: the Sphinx configuration; ``extension.py``: what the course adds to it (language switch, launch and
  download menus from ``course_utils.machinery.cloud``, folded solutions, figures as image files, MathML, the
  glossary page, the Chinese search's dictionary and synonyms); ``search.js``: the search's scores and snippets;
  ``templates/`` and ``static/``: the few pieces of the theme it changes;
- ``landing.md``: the landing page's text (translated like the guides: ``translations/zh/landing.po``).

Tests: tests/test_website.py (the files) and tests/browser/test_site.py (every page in Chromium, with axe-core);
benchmarks/bench_site_weight.py prints what each page weighs.
"""
