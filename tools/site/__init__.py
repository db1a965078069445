"""The course as a website (``python -m tools.site``, ``make site``): every notebook, the cheat-sheet, the instructor
guide, the glossary and a landing page, in English and Chinese, rendered by myst-nb and the Sphinx book theme from the
stored outputs, with each notebook's learner edition beside it.

``build.py`` stages the sources and runs Sphinx (and the slides) for both languages; ``conf.py`` configures Sphinx;
``extension.py`` is what the course adds to it; ``search.js``, ``templates/`` and ``static/`` change the theme;
``landing.md`` is the landing page (translated in ``translations/zh/landing.po``). Tests: tests/test_website.py,
tests/browser/test_site.py; benchmarks/bench_site_weight.py prints what each page weighs.
"""
