"""Answers the exercise checks are tried on: ``CASES`` in ``nbNN.py``, one module per notebook.

``Cases.right`` holds correct answers written differently from the notebook's solution (the check must accept
behaviour, not form); ``Cases.wrong`` holds typical wrong answers, each with a substring the ✗ message must contain
(the check must say something useful); ``Cases.endless`` holds answers that never end, where stopping them takes
more than the time limit (a worker process to stop as well). ``tests/test_exercises.py`` runs them all.

An answer is written as a learner writes it, as code: :func:`answer` runs source text as a notebook cell does (its
own file name, its lines in tracebacks) and returns what it defines last; :func:`mutants` makes the usual wrong
answers from a right one, one ``(what the right answer says, what the wrong one says instead, words its ✗ must
contain)`` each.

Usage::

    CLAMP = "def clamp_hook(grad):\\n    return grad.clamp(-1, 1)\\n"
    CASES = {"01.1": Cases(right=[answer(CLAMP)], wrong=mutants(CLAMP, ("(-1, 1)", "(0, 1)", "-1")))}
"""

from __future__ import annotations

import ast
import importlib
import itertools
import linecache
import pkgutil
import textwrap
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.hooks import HookRegistry

_CELLS = itertools.count(1)
# What every answer's cell can use without importing it, as in the course's notebooks
PRELUDE = {"torch": torch, "nn": nn, "F": F, "HookRegistry": HookRegistry}


@dataclass
class Cases:
    """Answers to try on one exercise's check."""

    right: list[Any] = field(default_factory=list)
    wrong: list[tuple[Any, str]] = field(default_factory=list)
    endless: list[Any] = field(default_factory=list)  # answers that never end: the time limit must stop them


def answer(source: str, **names: Any) -> Any:
    """Run ``source`` (dedented) like a notebook cell, with :data:`PRELUDE` and ``names`` defined, and return the
    function or class it defines last.

    Usage: ``answer("def clamp_hook(grad):\\n    return grad.clamp(-1, 1)")``"""
    source = textwrap.dedent(source).strip("\n") + "\n"
    filename = f"<exercise case {next(_CELLS)}>"  # a notebook cell's kind of name: the learner's code, for check()
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"__name__": "__main__", **PRELUDE, **names}  # as in a notebook
    exec(compile(source, filename, "exec"), namespace)
    last = [node.name for node in ast.parse(source).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))][-1]
    return namespace[last]


def mutants(source: str, *changes: tuple[Any, Any, str], **names: Any) -> list[tuple[Any, str]]:
    """Wrong answers made from the right answer ``source``: for each ``(old, new, words)``, ``source`` with every
    ``old`` replaced by ``new`` (``old`` must be there; tuples of them for a change in several places), paired with
    the words its ✗ must contain.

    Usage: ``mutants(CLAMP, ("(-1, 1)", "(0, 1)", "-1"))``"""
    made = []
    for old, new, words in changes:
        changed = textwrap.dedent(source)
        for before, after in zip(*((old, new) if isinstance(old, tuple) else ((old,), (new,)))):
            if before not in changed:
                raise ValueError(f"{before!r} is not in the right answer the mutant is made from")
            changed = changed.replace(before, after)
        made.append((answer(changed, **names), words))
    return made


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
