"""The course's file names, written once: the teaching notebooks' pattern and the files a learner's workspace holds.

Imports nothing, so anything may read it (the tools, the hub, a compat run's fresh environment). The Makefile cannot
import it: its ``NOTEBOOK_GLOB`` mirrors this one, and tests/test_structure.py fails when the two differ.

Usage: ``sorted(Path("notebooks").glob(NOTEBOOK_GLOB))``
"""

__all__ = ["COMPLETE", "MANIFEST", "NOTEBOOK_GLOB", "RECORD_NAME"]

NOTEBOOK_GLOB = "[0-9][0-9]_*.ipynb"
"""The teaching notebooks, ``NN_topic.ipynb`` (in ``notebooks/``, ``notebooks/zh/``, a workspace, an edition)."""

MANIFEST = ".course-manifest.json"
"""In a learner's workspace: what ``make lab`` (or the hub) delivered; marks the folder as a workspace."""

COMPLETE = "complete"
"""In a learner's workspace: the folder of the complete notebooks (every solution)."""

RECORD_NAME = ".course-progress.jsonl"
"""In a learner's workspace: the progress record, one line per ``check()``."""
