"""The course's settings and file names, written once: ``course_utils/course.toml`` (the repository, the languages,
the notebook pattern, the translated guides, whether translations may lag), read here, the files a learner's
workspace holds, and the exercise ids' syntax.

``course.toml`` is package data: the tools read it from the checkout, a learner's install (Colab, Kaggle, ``pip
install``) from the wheel. This module imports nothing of the course, so anything may read it (the tools, the hub,
a compat run's fresh environment); the Makefile reads ``notebook_pattern`` from the file itself.

Usage: ``sorted(Path("notebooks").glob(NOTEBOOK_GLOB))``; ``SETTINGS.repository``
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from typing import Any

__all__ = ["CHECK_CALL", "COMPLETE", "EXERCISE_ID", "MANIFEST", "NOTEBOOK_GLOB", "RECORD_NAME", "SETTINGS",
           "Settings", "read_settings"]


@dataclass(frozen=True)
class Settings:
    """The values of ``course.toml`` (its comments say what each one does)."""

    repository: str
    branch: str
    languages: tuple[str, ...]
    notebook_pattern: str
    translations_may_lag: bool
    guides: dict[str, str]


def read_settings(text: str, where: str = "course_utils/course.toml") -> Settings:
    """``course.toml``'s text as :class:`Settings`; a ValueError naming the file and the key when one is missing,
    unknown or of the wrong kind. Usage: ``read_settings(Path("course_utils/course.toml").read_text())``"""
    data = tomllib.loads(text)
    kinds = {"repository": str, "branch": str, "languages": list, "notebook_pattern": str,
             "translations_may_lag": bool, "guides": dict}
    problems = [f"unknown setting {key!r}" for key in data if key not in kinds]
    problems += [f"{key} is missing" for key in kinds if key not in data]
    problems += [f"{key} must be {'true or false' if kind is bool else 'a ' + kind.__name__}, not {data[key]!r}"
                 for key, kind in kinds.items() if key in data and not isinstance(data[key], kind)]
    if not problems and not re.fullmatch(r"[\w.-]+/[\w.-]+", data["repository"]):
        problems.append(f"repository must be GitHub's owner/name, not {data['repository']!r}")
    if not problems and (not data["languages"] or data["languages"][0] != "en"):
        problems.append("languages must start with \"en\", the language the others are translated from")
    if problems:
        raise ValueError(f"{where}: " + "; ".join(problems))
    values: dict[str, Any] = {f.name: tuple(data[f.name]) if f.name == "languages" else data[f.name]
                              for f in fields(Settings)}
    return Settings(**values)


SETTINGS = read_settings(resources.files("course_utils").joinpath("course.toml").read_text(encoding="utf-8"))
"""The course's settings (``course_utils/course.toml``)."""

NOTEBOOK_GLOB = SETTINGS.notebook_pattern
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
