"""How the code hangs together: no import cycle in course_utils and tools, the file names written once
(course_utils/machinery/layout.py, mirrored by the Makefile), the tools a package that edits no sys.path; the
hub benchmark finds the tests' hub it drives."""

from __future__ import annotations

import ast
import graphlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from course_utils.machinery import layout

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("Makefile", "course_utils/course.toml")

ROOT = Path(__file__).resolve().parent.parent
_HUB_CONFIG = ROOT / "tools" / "hub" / "jupyterhub_config.py"  # JupyterHub loads it by path: it may set the path


def modules(skip: tuple[str, ...] = ()) -> dict[str, Path]:
    """course_utils' and tools' modules by dotted name (the hub's JupyterHub config file aside, and those in a folder
    named in ``skip``)."""
    found = {}
    for path in [*(ROOT / "course_utils").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]:
        relative = path.relative_to(ROOT)
        if path == _HUB_CONFIG or set(skip) & set(relative.parts):
            continue
        parts = list(relative.with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``path`` imports anywhere (in a function too), ``TYPE_CHECKING`` blocks aside."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(node) for block in ast.walk(tree) if isinstance(block,
                                                                  ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
               for statement in block.body for node in ast.walk(statement)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found |= {target for target in targets if target in known and target != name}
    return found


def test_no_import_cycle() -> None:
    found = modules()
    graph = {name: _imports(name, path, set(found)) for name, path in found.items()}
    assert graph["course_utils.machinery.progress_record"].isdisjoint({"course_utils.machinery.checks"})
    try:
        graphlib.TopologicalSorter(graph).prepare()  # each module after those it imports
    except graphlib.CycleError as cycle:
        pytest.fail("import cycle: " + " -> ".join(reversed(cycle.args[1])))


def _string_constants(path: Path) -> list[tuple[int, str]]:
    """The string literals of ``path``'s code (docstrings aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_the_file_names_are_written_once() -> None:
    names = (layout.NOTEBOOK_GLOB, layout.MANIFEST, layout.RECORD_NAME)
    copies = [f"{path.relative_to(ROOT)}:{line}: {text!r}" for path in modules().values() if path.name != "layout.py"
              for line, text in _string_constants(path) if any(name in text for name in names)]
    assert not copies, "use course_utils.machinery.layout instead of a copy:\n" + "\n".join(copies)


def test_the_makefile_reads_the_notebook_pattern_from_the_settings() -> None:
    shown = subprocess.run(["make", "-s", "--no-print-directory", "--eval=shown: ; @echo '$(NOTEBOOK_GLOB)'", "shown"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    assert shown == layout.NOTEBOOK_GLOB == layout.SETTINGS.notebook_pattern
    notebooks = re.search(r"^NOTEBOOKS := (.+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)[1]
    assert notebooks == ("$(sort $(wildcard notebooks/$(NOTEBOOK_GLOB))) "
                         "$(sort $(wildcard notebooks/zh/$(NOTEBOOK_GLOB)))")


def test_the_settings_are_checked_and_say_what_is_wrong() -> None:
    text = (ROOT / "course_utils" / "course.toml").read_text(encoding="utf-8")
    assert layout.read_settings(text) == layout.SETTINGS and layout.SETTINGS.languages[0] == "en"
    for wrong, words in ((text.replace('branch = "main"', 'branch = 3'), "branch must be a str"),
                         (text.replace("repository =", "repo ="), "unknown setting 'repo'; repository is missing"),
                         (text.replace('"pytorch-hooks-course/', '"https://github.com/'), "owner/name"),
                         (text.replace('["en", "zh"]', '["zh", "en"]'), 'must start with "en"')):
        with pytest.raises(ValueError, match=re.escape(words)):
            layout.read_settings(wrong)


def test_the_tools_are_a_package_that_edits_no_sys_path() -> None:
    tools = [path for name, path in modules().items() if name.startswith("tools")]
    assert (ROOT / "tools" / "__init__.py") in tools and (ROOT / "tools" / "i18n" / "__init__.py") in tools
    edits = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in tools
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
             and node.value.id == "sys"]
    assert not edits, f"tools run with python -m tools.X from the repository root, no sys.path edits: {edits}"
    make_lines = [line.strip() for line in (ROOT / "Makefile").read_text(encoding="utf-8").splitlines()
                  if line.startswith("\t") and re.search(r"\$\(PY\) tools/", line)]
    assert not make_lines, f"the Makefile runs the tools as modules: {make_lines}"


@pytest.mark.reads("benchmarks/*.py", "tests/*.py", "tests/browser/hubserver.py")
def test_the_hub_benchmark_finds_what_it_imports() -> None:
    """bench_hub.py drives the tests' throw-away hub (tests/browser/hubserver.py); it once failed at import when
    hubserver began importing tests/hub_client.py, and nothing noticed."""
    run = subprocess.run([sys.executable, "benchmarks/bench_hub.py", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith("usage:"), run.stderr
