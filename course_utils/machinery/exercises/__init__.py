"""The exercise catalogue: each ``nbNN`` module exports ``EXERCISES``, whose texts and settings are the tables of the
``nbNN.toml`` beside it; :func:`catalogue` collects them.

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
from importlib import resources
from types import MappingProxyType

from course_utils.machinery.exercise_kit import Exercise, exercise_tables

__all__ = ["MODULES", "catalogue", "collect"]


def modules_of(package: str) -> tuple[str, ...]:
    """One module per notebook, in teaching order: every ``nbNN`` module of ``package``."""
    return tuple(sorted(info.name for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
                        if re.fullmatch(r"nb\d\d", info.name)))


MODULES = modules_of(__name__)


@lru_cache(maxsize=1)
def catalogue() -> Mapping[str, Exercise]:
    """Every exercise by id (read-only); a duplicate id or an exercise filed in the wrong module is an error."""
    return MappingProxyType(collect(__name__))


def collect(package: str) -> dict[str, Exercise]:
    """The exercises of ``package``'s ``nbNN`` modules by id; a ``ValueError`` that says what to do where an id is
    declared twice or in the wrong module, or a table of an ``nbNN.toml`` is no exercise of its module."""
    found: dict[str, Exercise] = {}
    modules = modules_of(package)
    for name in modules:
        module = importlib.import_module(f"{package}.{name}")
        for item in module.EXERCISES:
            if item.id in found:
                raise ValueError(f"Exercise id {item.id!r} is defined twice (again in {name}).")
            if f"nb{item.notebook}" != name:
                raise ValueError(f"Exercise {item.id} belongs in exercises/nb{item.notebook}.py, not {name}.py.")
            found[item.id] = item
        if extra := sorted(set(exercise_tables(package, name[2:])) - {item.id for item in module.EXERCISES}):
            raise ValueError(f"exercises/{name}.toml has a table for {', '.join(extra)}, which no exercise of the "
                             f'EXERCISES of {name}.py declares: add its check there, with @exercise("{extra[0]}") '
                             "above it, or delete the table")
    strays = sorted(path.name for path in resources.files(package).iterdir()
                    if re.fullmatch(r"nb\d\d\.toml", path.name) and path.name[:-5] not in modules)
    if strays:
        raise ValueError(f"exercises/{strays[0]} has no module {strays[0][:-5]}.py beside it: rename it after the "
                         "module whose exercises it declares, or delete it")
    return found
