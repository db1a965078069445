"""The course's file names, written once: the teaching notebooks' pattern, the files a learner's workspace holds, and
the exercise ids' syntax.

Imports nothing, so anything may read it (the tools, the hub, a compat run's fresh environment). The Makefile cannot
import it: its ``NOTEBOOK_GLOB`` mirrors this one, and tests/test_structure.py fails when the two differ.

Usage: ``sorted(Path("notebooks").glob(NOTEBOOK_GLOB))``
"""

__all__ = ["CHECK_CALL", "COMPLETE", "EXERCISE_ID", "MANIFEST", "NOTEBOOK_GLOB", "RECORD_NAME"]

NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
"""The teaching notebooks, ``NN_topic.ipynb`` (in ``notebooks/``, ``notebooks/zh/``, a workspace, an edition)."""

EXERCISE_ID = r"(\d\d)\.(\d{1,2})"
"""An exercise id, ``NN.k`` (the notebook's number, then the exercise's, one or two digits), as a regular expression
whose groups are the two numbers: ``re.fullmatch(EXERCISE_ID, "06.1")``. Every module that reads ids uses this one."""

CHECK_CALL = r"""\bcheck\(\s*["']""" + EXERCISE_ID + r"""["']"""
"""A notebook cell's ``check("NN.k", ...)``, as a regular expression (groups: the two numbers of the id)."""

MANIFEST = ".course-manifest.json"
"""In a learner's workspace: what ``make lab`` (or the hub) delivered; marks the folder as a workspace."""

COMPLETE = "complete"
"""In a learner's workspace: the folder of the complete notebooks (every solution)."""

RECORD_NAME = ".course-progress.jsonl"
"""In a learner's workspace: the progress record, one line per ``check()``."""
