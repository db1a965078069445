"""The exercise catalogue: each ``nbNN`` module exports ``EXERCISES``; :func:`catalogue` collects them.

Usage: ``catalogue()["06.1"].task``
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import MappingProxyType
from collections.abc import Mapping

from course_utils.machinery.exercise_kit import Exercise

__all__ = ["MODULES", "catalogue"]

# One module per notebook, in teaching order.
MODULES: tuple[str, ...] = ("nb00", "nb01", "nb02", "nb03", "nb04", "nb05", "nb06", "nb07", "nb08", "nb09", "nb10", "nb11", "nb12")


@lru_cache(maxsize=1)
def catalogue() -> Mapping[str, Exercise]:
    """Every exercise by id (read-only); a duplicate id or an exercise filed in the wrong module is an error."""
    found: dict[str, Exercise] = {}
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        for item in getattr(module, "EXERCISES"):
            if item.id in found:
                raise ValueError(f"Exercise id {item.id!r} is defined twice (again in {name}).")
            if f"nb{item.notebook}" != name:
                raise ValueError(f"Exercise {item.id} belongs in exercises/nb{item.notebook}.py, not {name}.py.")
            found[item.id] = item
    return MappingProxyType(found)
