"""``make check``: the tests of what a change touched, read from git, in the time of that change.

The change is every file that differs from the last commit (staged, not staged, or new and not ignored); with
``--base main`` (``make check BASE=main``), every file that differs from where the branch left ``main``. What runs
(:func:`plan`; ``--dry-run`` prints it):

- **a notebook** -- ``notebooks/NN_x.ipynb``, its Chinese edition, its translation ``translations/zh/NN_x.po``, its
  exercise module ``course_utils/machinery/exercises/nbNN.py``: strict nbval of the notebook in both languages, and
  that notebook's share of the per-notebook tests (hygiene, translation status and the Chinese build, exercise
  checks and cases, the learner edition, alt text, cloud links), with those files' course-wide tests that build
  nothing (the exercise rules, the course map, the agendas). Its cases ``tests/exercise_cases/nbNN.py``: its
  exercise tests.
- **a Python module** of ``course_utils``, ``tools`` or ``tests``: every test file that imports it, directly or
  through other modules, and nbval of the notebooks whose code imports it so.
- **the course map** (a notebook added or removed, an opening changed: the README's table differs): nbval of
  00_start_here, which shows the map too.
- **a guide, the README, the Makefile, a translation file, a catalogue of messages, the lock**: the tests that read
  them (:data:`FILE_RULES`).

Whatever else changed is named as not covered here. ``make test`` (what CI runs) still runs everything; this is
the quick loop before it.

Usage: ``python -m tools.check_change`` (``make check``; ``make check BASE=main``; ``--dry-run`` prints the plan)
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path

from course_utils.machinery.layout import EXERCISE_ID, NOTEBOOK_GLOB

ROOT = Path(__file__).resolve().parent.parent
PLAN_ENV = "COURSE_CHECK_PLAN"  # the plan, as JSON, for the pytest plugin below (inherited by xdist's workers)

# The test files that hold one test per notebook (or per exercise, or per guide): a change runs only its share.
PER_NOTEBOOK = ("tests/test_notebook_hygiene.py", "tests/test_zh_edition.py", "tests/test_exercises.py",
                "tests/test_editions.py", "tests/test_figure_alt.py", "tests/test_cloud_badges.py")
# Course-wide and cheap: whenever a notebook changes (its opening feeds the course map and the agendas).
WITH_ANY_NOTEBOOK = ("tests/test_readme.py", "tests/test_instructor_guide.py")
# Fixtures that build the whole course (every slide deck, the website): a narrow check leaves their tests to make test.
HEAVY_FIXTURES = frozenset({"course_editions", "course_site"})
MESSAGES_TEST = "tests/test_messages.py::test_every_message_has_a_chinese_entry_and_course_mo_is_compiled"
# The notebook that shows the course map: a new notebook or a changed opening changes its stored output.
COURSE_MAP_NOTEBOOK = "00_start_here"
_COURSE_MAP = re.compile(r"<!-- course-map:start.*?<!-- course-map:end -->", re.DOTALL)

# Files that are not notebooks or Python modules: (pattern, tests run whole, keys for the per-notebook files).
FILE_RULES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("README.md", ("tests/test_readme.py",), ("README.md",)),
    ("README.zh.md", ("tests/test_readme.py",), ("README.md",)),
    ("translations/zh/README.po", ("tests/test_readme.py",), ("README.md",)),
    ("notebooks/instructor_guide.md", ("tests/test_instructor_guide.py",), ("notebooks/instructor_guide.md",)),
    ("notebooks/zh/instructor_guide.md", ("tests/test_instructor_guide.py",), ("notebooks/instructor_guide.md",)),
    ("translations/zh/instructor_guide.po", ("tests/test_instructor_guide.py",), ("notebooks/instructor_guide.md",)),
    ("notebooks/hooks_cheatsheet.md", ("tests/test_cheatsheet.py",), ("notebooks/hooks_cheatsheet.md",)),
    ("notebooks/zh/hooks_cheatsheet.md", ("tests/test_cheatsheet.py",), ("notebooks/hooks_cheatsheet.md",)),
    ("translations/zh/hooks_cheatsheet.po", ("tests/test_cheatsheet.py",), ("notebooks/hooks_cheatsheet.md",)),
    ("tools/site/landing*.md", ("tests/test_website.py",), ("tools/site/landing.md",)),
    ("translations/zh/landing.po", ("tests/test_website.py",), ("tools/site/landing.md",)),
    ("translations/zh/GLOSSARY.md", ("tests/test_website.py::test_the_glossary_gives_the_chinese_splitter_whole_words",), ()),
    ("translations/settings.toml", ("tests/test_zh_edition.py",), ()),
    ("CONTRIBUTING.md", ("tests/test_contributing.py",), ()),
    ("Makefile", ("tests/test_structure.py", "tests/test_readme.py", "tests/test_usage_lines.py",
                  "tests/test_contributing.py"), ()),
    ("requirements.txt", ("tests/test_pins.py", "tests/test_deploy_configs.py", "tests/test_python_support.py"), ()),
    ("pyproject.toml", ("tests/test_pins.py", "tests/test_install.py", "tests/test_python_support.py"), ()),
    ("environment.yml", ("tests/test_pins.py", "tests/test_deploy_configs.py"), ()),
    ("binder/*", ("tests/test_deploy_configs.py",), ()),
    ("deploy/*", ("tests/test_deploy_configs.py",), ()),
    ("tools/hub/*", ("tests/test_course_auth.py", "tests/test_dashboard.py", "tests/test_deploy_configs.py"), ()),
    ("tools/compat/*.json", ("tests/test_cloud_badges.py", "tests/test_compat.py"), ()),
    ("tools/compat/*.txt", ("tests/test_compat.py",), ()),
    ("tools/notebook_timings.json", ("tests/test_instructor_guide.py",), ()),
    ("tools/nbconvert_templates/*", ("tests/test_editions.py",), ()),
    ("vendor/*", ("tests/test_editions.py",), ()),
    (".github/workflows/site.yml", ("tests/test_website.py::test_the_workflow_publishes_the_site_on_pushes_to_main_and_the_readme_links_it",), ()),
    ("course_utils/machinery/locale/zh/generated.po", ("tests/test_zh_edition.py", "tests/test_instructor_guide.py",
                                                        MESSAGES_TEST), ()),
    ("course_utils/machinery/locale/zh/tools.po", ("tests/test_zh_edition.py", "tests/test_cloud_badges.py",
                                                    MESSAGES_TEST), ()),
    ("course_utils/machinery/locale/zh/machinery.po", ("tests/test_messages.py",), ()),
    ("course_utils/machinery/locale/zh/LC_MESSAGES/course.mo", (MESSAGES_TEST,), ()),
)
NOT_NARROW = {
    "tests/conftest.py": "every test depends on it",
    "tests/browser/*": "the browser suite: make test-browser",
    "package.json": "the browser suite's tools: make test-browser",
    "package-lock.json": "the browser suite's tools: make test-browser",
    ".ci/run": "CI's entry point",
}

_NOTEBOOK = re.compile(r"notebooks/(?:zh/)?(\d\d_\w+)\.ipynb")
_TRANSLATION = re.compile(r"translations/zh/(\d\d_\w+)\.po")
_EXERCISES = re.compile(r"course_utils/machinery/exercises/nb(\d\d)\.py")
_CASES = re.compile(r"tests/exercise_cases/nb(\d\d)\.py")
_MESSAGES = re.compile(r"course_utils/machinery/locale/zh/nb(\d\d)\.po")


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {done.stderr.strip()} (make check reads the change from git)")
    return done.stdout


def changed_files(base: str | None = None) -> list[str]:
    """The files of the change: differing from HEAD (or from where the branch left ``base``), and new ones."""
    since = _git("merge-base", base, "HEAD").strip() if base else "HEAD"
    names = set(_git("diff", "--name-only", "--no-renames", since).splitlines())
    names |= set(_git("ls-files", "--others", "--exclude-standard").splitlines())
    return sorted(name for name in names if name)


def course_map_changed(base: str | None = None) -> bool:
    """Whether the README's course map (the table 00_start_here shows too) differs from the last commit's."""
    since = _git("merge-base", base, "HEAD").strip() if base else "HEAD"
    before = subprocess.run(["git", "show", f"{since}:README.md"], cwd=ROOT, capture_output=True, text=True,
                            timeout=60).stdout
    now = (ROOT / "README.md").read_text(encoding="utf-8") if (ROOT / "README.md").is_file() else ""
    return [m[0] for m in _COURSE_MAP.finditer(before)] != [m[0] for m in _COURSE_MAP.finditer(now)]


# -- which module imports which ------------------------------------------------------------------------------------
def _python_files() -> list[Path]:
    found = [*(ROOT / "course_utils").rglob("*.py"), *(ROOT / "tools").rglob("*.py"), *(ROOT / "tests").glob("*.py"),
             *(ROOT / "tests" / "exercise_cases").glob("*.py")]
    return sorted(path for path in found if "__pycache__" not in path.parts)


def module_name(relative: str) -> str:
    """``course_utils/machinery/checks.py`` -> ``course_utils.machinery.checks`` (a package: its ``__init__``)."""
    parts = list(Path(relative).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass
class ImportGraph:
    """Which of the course's modules each module (and each notebook) imports."""

    imports: dict[str, set[str]] = field(default_factory=dict)
    notebooks: dict[str, set[str]] = field(default_factory=dict)  # notebook stem -> modules its code imports

    def importers(self, changed: Iterable[str]) -> set[str]:
        """``changed`` and every module that imports one of them, directly or through others."""
        affected = set(changed)
        while True:
            more = {name for name, deps in self.imports.items() if name not in affected and deps & affected}
            if not more:
                return affected
            affected |= more


def _targets(node: ast.AST, package: str, known: set[str], reexports: dict[tuple[str, str], str],
             aliases: dict[str, str]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [aliases.get(alias.name, alias.name) for alias in node.names]
        return {name for name in names if name in known}
    if not isinstance(node, ast.ImportFrom):
        return set()
    base = node.module or ""
    if node.level:
        up = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join(up + ([base] if base else []))
    base = aliases.get(base, base)
    found = set()
    for alias in node.names:
        if f"{base}.{alias.name}" in known:
            found.add(f"{base}.{alias.name}")
        elif (base, alias.name) in reexports:
            found.add(reexports[(base, alias.name)])
        elif base in known:
            found.add(base)
    return found


def import_graph() -> ImportGraph:
    files = _python_files()
    known = {module_name(str(path.relative_to(ROOT))) for path in files}
    # tests/ is on sys.path: its helpers are imported as top-level modules (``from notebook_hygiene import ...``)
    aliases = {name.split(".", 1)[1]: name for name in known if name.startswith("tests.") and name.count(".") == 1}
    trees = {module_name(str(path.relative_to(ROOT))): (path, ast.parse(path.read_text(encoding="utf-8")))
             for path in files}
    reexports = {}  # (package, name) -> the module that defines it (course_utils' lazy names, TYPE_CHECKING block)
    for name, (path, tree) in trees.items():
        if path.name == "__init__.py":
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.module in known:
                    reexports.update({(name, alias.asname or alias.name): node.module for alias in node.names})
    graph = ImportGraph()
    for name, (path, tree) in trees.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(tree):
            deps |= _targets(node, package, known, reexports, aliases)
        graph.imports[name] = deps - {name}
    for notebook in sorted((ROOT / "notebooks").glob(NOTEBOOK_GLOB)):
        deps = set()
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
            try:
                tree = ast.parse(code)
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                deps |= _targets(node, "", known, reexports, aliases)
        graph.notebooks[notebook.stem] = deps
    return graph


# -- the plan --------------------------------------------------------------------------------------------------------
@dataclass
class Plan:
    """What a change runs: nbval of notebooks, whole test files (or tests), and shares of the per-notebook files."""

    nbval: set[str] = field(default_factory=set)  # notebook stems, run in both languages
    whole: set[str] = field(default_factory=set)  # test files or node ids
    keys: set[str] = field(default_factory=set)  # notebook stems, "NN." exercise prefixes, guides: the shares
    uncovered: dict[str, str] = field(default_factory=dict)  # changed file -> why no narrow test covers it

    def notebook_paths(self) -> list[str]:
        paths = [f"notebooks/{stem}.ipynb" for stem in sorted(self.nbval)]
        paths += [f"notebooks/zh/{stem}.ipynb" for stem in sorted(self.nbval)]
        return [path for path in paths if (ROOT / path).is_file()]

    def test_files(self) -> list[str]:
        """The test files to collect: the whole ones and, when there are keys, the per-notebook ones."""
        files = set(self.whole) | (set(PER_NOTEBOOK) if self.keys else set())
        whole_files = {w for w in files if "::" not in w}
        return sorted(w for w in files if "::" not in w or w.split("::")[0] not in whole_files)

    def __bool__(self) -> bool:
        return bool(self.nbval or self.whole or self.keys)


def _stem_of(number: str) -> str | None:
    found = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    return found[0].stem if found else None


def plan(changed: Iterable[str], graph: ImportGraph | None = None, course_map: bool = False) -> Plan:
    """What to run for the changed files (paths relative to the repository's root); ``course_map``: the change
    changed the course map (a notebook added or removed, an opening changed), so 00_start_here's output too."""
    result = Plan()
    if course_map:
        result.nbval.add(COURSE_MAP_NOTEBOOK)
    modules = []
    for name in changed:
        if match := (_NOTEBOOK.fullmatch(name) or _TRANSLATION.fullmatch(name)):
            stem = match[1]
            result.nbval.add(stem)
            result.keys |= {stem, f"{stem[:2]}."}
            result.whole |= set(WITH_ANY_NOTEBOOK)
        elif match := _EXERCISES.fullmatch(name):
            stem = _stem_of(match[1])
            if stem:
                result.nbval.add(stem)
                result.keys |= {stem, f"{match[1]}."}
            result.whole.add(MESSAGES_TEST)
        elif match := _CASES.fullmatch(name):
            result.keys.add(f"{match[1]}.")
            result.whole.add("tests/test_exercises.py::test_every_exercise_has_cases_and_no_cases_are_orphans")
        elif match := _MESSAGES.fullmatch(name):
            stem = _stem_of(match[1])
            if stem:
                result.nbval.add(stem)
            result.whole.add(MESSAGES_TEST)
        elif rule := next((r for r in FILE_RULES if fnmatch(name, r[0])), None):
            result.whole |= set(rule[1])
            result.keys |= set(rule[2])
        elif name.endswith(".py") and name.split("/")[0] in ("course_utils", "tools", "tests") \
                and not name.startswith("tests/browser/") and name != "tests/conftest.py":
            modules.append(module_name(name))
        elif reason := next((why for pattern, why in NOT_NARROW.items() if fnmatch(name, pattern)), None):
            result.uncovered[name] = reason
        else:
            result.uncovered[name] = "no test reads it"
    if modules:
        graph = graph or import_graph()
        for name in modules:
            if name not in graph.imports:
                result.uncovered[name.replace(".", "/") + ".py"] = "deleted, or not a module of the course"
        affected = graph.importers(name for name in modules if name in graph.imports)
        tests = {name for name in affected if re.fullmatch(r"tests\.test_\w+", name)}
        result.whole |= {f"tests/{name.split('.', 1)[1]}.py" for name in tests}
        result.nbval |= {stem for stem, deps in graph.notebooks.items() if deps & affected}
    return result


def mentions(params: dict[str, object], keys: set[str]) -> bool:
    """Whether a test's parameters name one of ``keys``: a notebook stem, an exercise of notebook "NN.", a guide."""
    for value in params.values():
        text = str(value)
        for key in keys:
            if key.endswith(".") and re.fullmatch(EXERCISE_ID, text) and text.startswith(key):
                return True
            if not key.endswith(".") and (text == key or key in text.replace("\\", "/")):
                return True
    return False


# -- the pytest plugin: keeps each per-notebook file's share -------------------------------------------------------
def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001 -- pytest's types
    raw = os.environ.get(PLAN_ENV)
    if not raw:
        return
    wanted = json.loads(raw)
    whole, keys = set(wanted["whole"]), set(wanted["keys"])
    kept, dropped = [], []
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        if file not in PER_NOTEBOOK or file in whole or any(item.nodeid.startswith(w) for w in whole if "::" in w):
            kept.append(item)
            continue
        callspec = getattr(item, "callspec", None)
        if callspec is not None:
            keep = mentions(callspec.params, keys)
        else:
            keep = not (HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())))
        (kept if keep else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def command_args(the_plan: Plan, workers: int, cell_timeout: int) -> list[str]:
    args = [*the_plan.test_files(), *the_plan.notebook_paths()]
    if the_plan.nbval:
        args += ["--nbval", "--nbval-current-env", f"--nbval-cell-timeout={cell_timeout}"]
    if workers > 1:
        args += ["-n", str(workers)]
    return ["-p", "tools.check_change", *args, "--timeout=600", "--timeout-method=signal"]


def describe(changed: list[str], the_plan: Plan) -> str:
    lines = [f"make check: {len(changed)} changed file(s)"]
    if the_plan.nbval:
        lines.append("  nbval, English and Chinese: " + ", ".join(sorted(the_plan.nbval)))
    if the_plan.keys:
        lines.append("  per-notebook tests of: " + ", ".join(sorted(the_plan.keys)))
    if the_plan.whole:
        lines.append("  test files: " + ", ".join(sorted(the_plan.whole)))
    for name, why in sorted(the_plan.uncovered.items()):
        lines.append(f"  not covered here ({why}): {name} -- make test runs everything")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", help="a branch or commit: check everything that differs from where HEAD left it")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and the pytest command; run nothing")
    parser.add_argument("--workers", type=int, help="pytest-xdist workers (default: one process for a change to one "
                        "notebook or a few test files, where starting workers costs more than it saves; else 2)")
    parser.add_argument("--cell-timeout", type=int, default=300)
    args = parser.parse_args(argv)
    changed = changed_files(args.base)
    the_plan = plan(changed, course_map="README.md" in changed and course_map_changed(args.base))
    print(describe(changed, the_plan))
    if not the_plan:
        print("nothing to run" + ("" if changed else f": no change since {args.base or 'the last commit'}"
                                  " (make check BASE=main checks a branch)"))
        return 0
    workers = args.workers or (1 if len(the_plan.nbval) <= 1 and len(the_plan.test_files()) <= 10 else 2)
    command = [sys.executable, "-m", "pytest", *command_args(the_plan, workers, args.cell_timeout)]
    print("  " + " ".join(command[1:]), flush=True)
    if args.dry_run:
        return 0
    env = {**os.environ, PLAN_ENV: json.dumps({"whole": sorted(the_plan.whole), "keys": sorted(the_plan.keys)})}
    start = time.perf_counter()
    code = subprocess.run(command, cwd=ROOT, env=env).returncode
    print(f"make check: {'passed' if code == 0 else 'FAILED'} in {time.perf_counter() - start:.0f} s "
          "(make test runs everything)")
    return code


if __name__ == "__main__":
    sys.exit(main())
