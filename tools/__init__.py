"""The course's maintenance tools, one module per job, run from the repository root as ``python -m tools VERB``
(``tools/__main__.py`` lists the verbs; the Makefile calls them), with the settings of ``course_utils/course.toml``.

``compat/execute.py`` is a script run by path in the compat run's own environment, against the *installed* course
(it loads ``notebook_runner.py`` by path); JupyterHub loads ``hub/jupyterhub_config.py`` by path.
"""
