"""``make test-compat``: ``python -m tools.compat.run`` (see its docstring); ``execute.py`` is the script it runs in
the compat environment."""
