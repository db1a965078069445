"""Answers the exercise checks are tried on: ``CASES`` in ``nbNN.py``, one module per notebook.

``Cases.right`` holds correct answers written differently from the notebook's solution (the check must accept
behaviour, not form); ``Cases.wrong`` holds typical wrong answers, each with a substring the ✗ message must
contain (the check must say something useful). ``tests/test_exercises.py`` runs them all.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Cases:
    """Answers to try on one exercise's check."""

    right: list[Any] = field(default_factory=list)
    wrong: list[tuple[Any, str]] = field(default_factory=list)


def all_cases() -> dict[str, Cases]:
    """Every exercise's cases, by exercise id, from every ``nbNN`` module of this package."""
    found: dict[str, Cases] = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not module_info.name.startswith("nb"):
            continue
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        for exercise_id, cases in module.CASES.items():
            if exercise_id in found:
                raise ValueError(f"Cases for {exercise_id} are defined twice.")
            found[exercise_id] = cases
    return found
