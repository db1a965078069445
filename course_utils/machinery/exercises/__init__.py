"""The exercise catalogue: each ``nbNN`` module exports ``EXERCISES``; :func:`catalogue` collects them.

A new notebook's module joins by existing: ``MODULES`` lists every ``nbNN`` module of this package, so adding one
touches no other file (and ``make check`` stays the check of that notebook, not of the whole course).

Usage: ``catalogue()["06.1"].task``
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from course_utils.machinery.exercise_kit import Exercise

__all__ = ["MODULES", "catalogue"]

# One module per notebook, in teaching order: every nbNN module of this package.
MODULES: tuple[str, ...] = tuple(sorted(info.name for info in pkgutil.iter_modules(__path__)
                                        if re.fullmatch(r"nb\d\d", info.name)))


@lru_cache(maxsize=1)
def catalogue() -> Mapping[str, Exercise]:
    """Every exercise by id (read-only); a duplicate id or an exercise filed in the wrong module is an error."""
    found: dict[str, Exercise] = {}
    for name in MODULES:
        module = importlib.import_module(f"{__name__}.{name}")
        for item in module.EXERCISES:
            if item.id in found:
                raise ValueError(f"Exercise id {item.id!r} is defined twice (again in {name}).")
            if f"nb{item.notebook}" != name:
                raise ValueError(f"Exercise {item.id} belongs in exercises/nb{item.notebook}.py, not {name}.py.")
            found[item.id] = item
    return MappingProxyType(found)
