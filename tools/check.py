"""``make check``: the tests of what a change touched, picked by pytest from the tests themselves.

The change is every file that differs from the last commit, new files included (``--base main``: from where the branch
left main), from :func:`tools.repo.changes`. It runs strict nbval, every language, of each notebook the change touches
(the notebook, its translation, exercise module or texts, cases or messages: :data:`NOTEBOOK_FILES`), of those whose
code imports a changed module, and of ``00_start_here`` when the course map changed; and the tests (``-m "not browser
and not hub"``) this plugin keeps: every test of a test file that is changed, imports a changed module (directly or
through others: :func:`importers`) or names a removed notebook or changed exercise; a test whose
``@pytest.mark.reads("glob", ...)`` matches a changed file; and, in a per-notebook test file, the tests of the touched
notebooks with its unparametrized tests that build nothing of the whole course. ``make test`` still runs everything.

Usage: ``python -m tools check`` (``make check``; ``make check BASE=main``; ``--dry-run`` prints the plan)
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from course_utils.machinery.layout import EXERCISE_ID, NOTEBOOK_GLOB, SETTINGS
from tools.repo import ROOT, changes, committed, notebook_text, region

PLAN_ENV = "COURSE_CHECK_PLAN"  # the plan, as JSON, for the plugin below (inherited by xdist's workers)
COURSE_MAP_NOTEBOOK = "00"  # its stored output shows the course map
HEAVY_FIXTURES = frozenset({"course_editions", "course_site"})  # tests/conftest.py's: they build the whole course
# The files of notebook NN that hold its exercises, and (with them) every file of notebook NN: its notebook in each
# language and its translation.
_EXERCISES = (r"course_utils/machinery/exercises/nb(\d\d)\.(?:py|toml)|tests/exercise_cases/nb(\d\d)\.py|"
              r"course_utils/machinery/locale/\w+/nb(\d\d)\.po")
EXERCISE_FILES = re.compile(_EXERCISES)
NOTEBOOK_FILES = re.compile(rf"notebooks/(?:\w+/)?(\d\d)_\w+\.ipynb|translations/\w+/(\d\d)_\w+\.po|{_EXERCISES}")
_FROM_IMPORT = re.compile(r"^\s*from\s+([\w.]+)\s+import\s+(\([^)]*\)|[^\n]*)", re.MULTILINE)
_NAMES_NOTEBOOK = re.compile(rf"(?<![\w.])(?:(\d\d)_[a-z]\w*|{EXERCISE_ID}\b)")  # groups: NN of NN_x, NN of NN.k
_QUOTED_ID = re.compile(rf"[\"']{EXERCISE_ID}[\"']")


# -- which Python code imports which ----------------------------------------------------------------------------------
def python_modules() -> dict[str, Path]:
    """The course's Python modules by the names they are imported by (``tests/`` helpers also by their bare name,
    ``tests/`` being on pytest's path)."""
    found = {}
    for path in sorted(p for folder in ("course_utils", "tools", "tests") for p in ROOT.glob(f"{folder}/**/*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
        if parts[0] == "tests" and len(parts) == 2:
            found[parts[1]] = path
    return found


def _exports(modules: dict[str, Path]) -> dict[tuple[str, str], set[str]]:
    """(package, module) -> the names the package's ``__init__`` imports from the module (``course_utils.check``)."""
    found: dict[tuple[str, str], set[str]] = {}
    for name, path in modules.items():
        if path.name == "__init__.py":
            for match in _FROM_IMPORT.finditer(path.read_text(encoding="utf-8")):
                found.setdefault((name, match[1]), set()).update(re.findall(r"\w+", match[2]))
    return found


def imports(code: str, module: str, exports: dict[tuple[str, str], set[str]]) -> bool:
    """Whether ``code`` names ``module``: dotted (``tools.sync``, ``-m tools.sync`` too), ``from package import
    module``, or a name its package re-exports (``from course_utils import check``)."""
    dotted = rf"(?<![\w.]){re.escape(module)}(?!\w)" if "." in module else rf"^\s*import\s+{module}\b"
    if module in code and re.search(dotted, code, re.MULTILINE):
        return True
    package, _, leaf = module.rpartition(".")
    for source, listed in _from_imports(code):
        if source == module or (source == package and leaf in listed) or listed & exports.get((source, module), set()):
            return True
    return False


@functools.cache
def _from_imports(code: str) -> tuple[tuple[str, frozenset[str]], ...]:
    return tuple((match[1], frozenset(re.findall(r"\w+", match[2]))) for match in _FROM_IMPORT.finditer(code))


def _below(name: str, module: str) -> bool:
    """Whether ``name`` is the installed package and ``module`` a tool: course_utils never imports tools (the wheel
    has none, tests/test_install.py), so a docstring of course_utils naming a tool is no import."""
    return name.startswith("course_utils") and module.startswith("tools")


def importers(changed: set[str], sources: dict[str, str], exports: dict[tuple[str, str], set[str]],
              packages: frozenset[str] = frozenset()) -> set[str]:
    """The changed modules and every source (module, test or notebook, by name) that imports one of them, directly
    or through others. A package's ``__init__`` passes a change on only by the names it re-exports (its own imports
    are lazy), so ``packages`` are not counted as importers here."""
    affected, new = set(changed), set(changed)
    while new := {name for name, code in sources.items() if name not in affected and name not in packages
                  and any(imports(code, module, exports) for module in new if not _below(name, module))}:
        affected |= new
    return affected


# -- the plan ---------------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    """What a change runs: nbval of notebooks (by number), whole test files, and what the plugin matches against."""

    changed: list[str]
    nbval: set[str] = field(default_factory=set)
    whole: set[str] = field(default_factory=set)
    touched: set[str] = field(default_factory=set)  # notebook numbers and the English sources (guides) changed

    def notebook_paths(self) -> list[str]:
        folders = ["notebooks", *(f"notebooks/{lang}" for lang in SETTINGS.languages[1:])]
        return [str(path.relative_to(ROOT)) for folder in folders for number in sorted(self.nbval)
                for path in sorted((ROOT / folder).glob(f"{number}_*.ipynb"))]


def english_source(path: str) -> str | None:
    """The English guide a translation or a translated guide belongs to (``translations/zh/README.po`` ->
    ``README.md``), or None."""
    for guide, pattern in SETTINGS.guides.items():
        if path == guide or any(path in (pattern.format(lang=lang), f"translations/{lang}/{Path(guide).stem}.po")
                                for lang in SETTINGS.languages[1:]):
            return guide
    return None


def plan(changed: dict[str, str], base: str | None = None) -> Plan:
    """The plan for ``changed`` (path -> git status, as :func:`tools.repo.changes` gives)."""
    result = Plan(sorted(changed))
    for path in changed:
        if match := NOTEBOOK_FILES.fullmatch(path):
            result.touched.add(next(group for group in match.groups() if group))
        elif source := english_source(path):
            result.touched.add(source)
    result.nbval |= {number for number in result.touched if number.isdigit()}
    course_map = region("course-map")
    if "README.md" in changed and course_map.findall(committed("README.md", base or "HEAD") or "") != \
            course_map.findall((ROOT / "README.md").read_text(encoding="utf-8")):
        result.nbval.add(COURSE_MAP_NOTEBOOK)
    modules = python_modules()
    sources = {name: path.read_text(encoding="utf-8") for name, path in modules.items()}
    notebooks = {path.stem: notebook_text(path, "code") for path in sorted((ROOT / "notebooks").glob(NOTEBOOK_GLOB))}
    by_path = {str(path.relative_to(ROOT)): name for name, path in modules.items()}
    changed_modules = {by_path.get(path) or ".".join(Path(path).with_suffix("").parts) for path in changed
                       if path in by_path or (path.endswith(".py") and path.startswith(("course_utils/", "tools/")))}
    exports = _exports(modules)
    packages = frozenset(name for name, path in modules.items() if path.name == "__init__.py")
    affected = importers(changed_modules, sources, exports, packages)
    result.nbval |= {stem[:2] for stem, code in notebooks.items()
                     if any(imports(code, module, exports) for module in affected)}
    result.whole |= {str(modules[name].relative_to(ROOT)) for name in affected
                     if name in modules and modules[name].name.startswith("test_")
                     and modules[name].is_relative_to(ROOT / "tests")}
    # the tests that name a removed notebook, or one whose exercises changed, or one of those exercises
    numbers = [number for path, status in changed.items() if (match := EXERCISE_FILES.fullmatch(path))
               or (status == "D" and (match := NOTEBOOK_FILES.fullmatch(path)))
               for number in match.groups() if number]
    if numbers:
        files = re.compile("|".join([rf"\b{n}_[a-z]\w*\.ipynb" for n in numbers]))
        result.whole |= {str(path.relative_to(ROOT)) for path in ROOT.glob("tests/**/test_*.py")
                         if files.search(text := path.read_text(encoding="utf-8"))
                         or any(match[1] in numbers for match in _QUOTED_ID.finditer(text))}
    return result


# -- the pytest plugin (-p tools.check) -------------------------------------------------------------------------------
def names_touched(params: dict[str, Any], touched: set[str]) -> bool | None:
    """Whether a test's parameters name a touched notebook (``02_x.ipynb``, ``"02.3"``) or source (``README.md``);
    None when they name no notebook or source at all (not a per-notebook test)."""
    named = False
    for value in map(str, params.values()):
        value = value.replace("\\", "/")
        numbers = {match[1] or match[2] for match in _NAMES_NOTEBOOK.finditer(value)}
        sources = {source for source in SETTINGS.guides if value == source or value.endswith("/" + source)}
        if numbers & touched or sources & touched:
            return True
        named = named or bool(numbers or sources)
    return False if named else None


def keep(item: Any, wanted: dict[str, Any], per_notebook_files: set[str]) -> bool:
    file = item.nodeid.split("::", 1)[0]
    if file in wanted["whole"]:
        return True
    globs = [glob for marker in item.iter_markers("reads") for glob in marker.args]
    if any(fnmatch(path, glob) for path in wanted["changed"] for glob in globs):
        return True
    if file not in per_notebook_files or not wanted["touched"]:
        return False
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return not HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))
    return bool(names_touched(callspec.params, set(wanted["touched"])))


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    raw = os.environ.get(PLAN_ENV)
    if not raw:
        return
    wanted = json.loads(raw)
    per_notebook_files = {item.nodeid.split("::", 1)[0] for item in items if getattr(item, "callspec", None)
                          and names_touched(item.callspec.params, set()) is not None}
    kept = [item for item in items if keep(item, wanted, per_notebook_files)]
    dropped = [item for item in items if item not in kept]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# -- make check -------------------------------------------------------------------------------------------------------
def command_args(the_plan: Plan, workers: int | None, cell_timeout: int) -> list[str]:
    notebooks = the_plan.notebook_paths()
    args = ["-p", "tools.check", "tests", "--ignore=tests/browser", "-m", "not browser and not hub", *notebooks]
    if notebooks:
        args += ["--nbval", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout}"]
    workers = workers or (2 if len(notebooks) > 1 else 1)
    return [*args, *(["-n", str(workers)] if workers > 1 else []), "--timeout=600", "--timeout-method=signal"]


def describe(the_plan: Plan) -> str:
    lines = [f"make check: {len(the_plan.changed)} changed file(s)"]
    if the_plan.nbval:
        lines.append("  nbval, every language: " + ", ".join(Path(p).stem for p in the_plan.notebook_paths()
                                                             if p.count("/") == 1))
    if the_plan.touched:
        lines.append("  the per-notebook tests of: " + ", ".join(sorted(the_plan.touched)))
    if the_plan.whole:
        lines.append("  test files, whole: " + ", ".join(sorted(p for p in the_plan.whole if "/browser/" not in p)))
    lines.append("  and the tests marked reads(...) that name a changed file (browser and hub tests: make "
                 "test-browser, make test-hub)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a branch or commit: check everything that differs from where HEAD left it")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the pytest command; run nothing")
    parser.add_argument("--workers", type=int, help="pytest-xdist workers (default: 2 for two notebooks or more)")
    parser.add_argument("--cell-timeout", type=int, default=300)
    args = parser.parse_args(argv)
    changed = changes(args.base)
    if not changed:
        print(f"make check: no change since {args.base or 'the last commit'} (make check BASE=main checks a branch)")
        return 0
    the_plan = plan(changed, args.base)
    print(describe(the_plan))
    command = [sys.executable, "-m", "pytest", *command_args(the_plan, args.workers, args.cell_timeout)]
    print("  " + shlex.join(command[1:]), flush=True)
    if args.dry_run:
        return 0
    wanted = {"whole": sorted(the_plan.whole | set(the_plan.notebook_paths())), "changed": the_plan.changed,
              "touched": sorted(the_plan.touched)}
    start = time.perf_counter()
    code = subprocess.run(command, cwd=ROOT, env={**os.environ, PLAN_ENV: json.dumps(wanted)}).returncode
    code = 0 if code == 5 else code  # pytest's "no tests ran": nothing here reads the change
    print(f"make check: {'passed' if code == 0 else 'FAILED'} in {time.perf_counter() - start:.0f} s "
          "(make test runs everything)")
    return code


if __name__ == "__main__":
    sys.exit(main())
