"""The course's maintenance tools, one module per job, run from the repository root as ``python -m tools.NAME``
(the Makefile does): ``build_editions``, ``cloud_badges``, ``instructor_guide``, ``refresh_notebooks``,
``time_notebooks``, ``test_profile`` (a pytest plugin), ``i18n.editions``, ``i18n.messages``, ``compat.run``.

One is a script run by path, not a module: ``compat/execute.py`` runs in the compat run's own environment, against
the *installed* course (the checkout must not be on its ``sys.path``). ``hub/`` is the classroom server
(``python -m tools.hub.serve``); JupyterHub loads its ``jupyterhub_config.py`` by path.
"""
