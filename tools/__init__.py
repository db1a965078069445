"""The course's maintenance tools, one module per job, all run through one command from the repository root,
``python -m tools VERB`` (``tools/__main__.py``: ``python -m tools`` lists the verbs; the Makefile calls it), or as
``python -m tools.NAME``: ``sync``, ``check``, ``build_editions``, ``cloud_badges``, ``instructor_guide``,
``refresh_notebooks``, ``time_notebooks`` (both through ``notebook_runner``, the course's one notebook runner),
``test_profile`` (a pytest plugin), ``i18n.editions``, ``i18n.messages``, ``compat.run``; ``repo`` reads the checkout's
changes from git. Their settings are ``course_utils/course.toml``.

One is a script run by path, not a module: ``compat/execute.py`` runs in the compat run's own environment, against
the *installed* course (the checkout must not be on its ``sys.path``; it loads ``notebook_runner.py`` by
path). ``hub/`` is the classroom server (``python -m tools.hub.serve``); JupyterHub loads its ``jupyterhub_config.py``
by path.
"""
