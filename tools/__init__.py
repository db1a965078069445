"""The course's maintenance tools, one module per job, run from the repository root as ``python -m tools.NAME``
(the Makefile does): ``build_editions``, ``cloud_badges``, ``instructor_guide``, ``refresh_notebooks``,
``time_notebooks`` (both through ``notebook_runner``, the course's one notebook runner), ``test_profile`` (a pytest plugin), ``i18n.editions``, ``i18n.messages``, ``compat.run``.

Two are scripts run by path, not as modules: ``compat/execute.py`` runs in the compat run's own environment, against
the *installed* course (the checkout must not be on its ``sys.path``; it loads ``notebook_runner.py`` by path), and ``hub/`` holds JupyterHub's files.
"""
