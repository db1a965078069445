"""Every docstring's usage line in course_utils and tools is true: a ``python -m`` line names a module that exists (a
tool has a ``main``), a ``make`` line a target; Python parses, what it imports exists, and each name it uses is the
module's own, imported, a builtin or a placeholder of the examples (``model``, ``x``, ...). The lines that need nothing
else run, all in one fresh Python, from the repository, recording progress in a temporary file.

Names are looked up in the modules' sources (nothing heavy is imported to check them); only the lines of
``course_utils`` run. A line that starts worker processes, writes files (a workspace, an edition) or inspects the
whole environment is not run (``NOT_RUN``).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_structure import modules

# make check runs these tests when one of these files changes: a docstring, or a module removed with its notebook
# (another's docstring may still name it)
pytestmark = pytest.mark.reads("Makefile", "course_utils/*.py", "tools/*.py")

ROOT = Path(__file__).resolve().parent.parent
# What the examples stand for, never defined by the module they document.
EXAMPLES = {
    "model", "x", "z", "w", "mlp", "loss", "answer", "validator", "train", "hook", "handle", "rec", "ddp", "group",
    "count", "optimizer", "other_optimizer", "clamp_hook", "photo224", "ax", "fig", "plt", "logits", "message",
    "text", "attempts", "fp16_compress_hook", "captum_grad_cam", "grad_cam", "guided_backprop",
    "DistributedDataParallel",
    "STUB_MESSAGE", "output", "timer", "seen", "Version", "SpecifierSet", "torch", "nn", "os", "Path", "hooks",
    "log", "map_random", "map_trained", "timeline", "categories", "photo", "photos", "layers", "kc", "missed", "job",
    "notebook", "patterns", "lengths", "head", "features", "truth", "names", "sizes", "cell", "cell_source",
    "draw_peaks",
}
NOT_RUN = {"run_workers", "prepare_workspace", "doctor", "time_notebook", "build_learner", "build_slides"}


def _usage(doc: str) -> list[str]:
    """The code of a docstring's usage: the indented block after ``Usage::``, or the ``code spans`` of the paragraph
    that starts with ``Usage:``."""
    found = []
    for match in re.finditer(r"Usage[^\n:]*::\n\n((?:[ \t]+.*\n?|\n)+)", doc):
        found.append(textwrap.dedent(match[1]).strip())
    for match in re.finditer(r"Usage[^\n:]*: (.+?)(?:\n\n|\Z)", doc, re.DOTALL):
        found += [span for span in re.findall(r"``(.+?)``", match[1].replace("\n", " "))
                  if re.search(r"[(=]|^(python|make|sudo|with|from|import) ", span)]  # code, not a path or a flag
    return found


def _snippets() -> list[tuple[str, str]]:
    found = []
    for name, path in sorted(MODULES.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in [tree, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef)))]:
            doc = ast.get_docstring(node)
            if doc and "Usage" in doc:
                found += [(name, code) for code in _usage(doc)]
    return found


def _bound_at_top(tree: ast.Module) -> set[str]:
    """The names a module defines at its top level (functions, classes, assignments, imports)."""
    names = set()
    for statement in tree.body:
        if isinstance(statement, ast.If):  # TYPE_CHECKING or a fallback import
            names |= _bound_at_top(ast.Module(body=statement.body + statement.orelse, type_ignores=[]))
        elif isinstance(statement, ast.Try):
            names |= _bound_at_top(ast.Module(body=statement.body + [s for h in statement.handlers for s in h.body],
                                              type_ignores=[]))
        elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
        elif isinstance(statement, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in statement.names}
        elif isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            names |= {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}
    return names


MODULES = modules(skip=("exercises", "hub"))
DEFINED = {name: _bound_at_top(ast.parse(path.read_text(encoding="utf-8"))) for name, path in MODULES.items()}
PUBLIC = {name for names in DEFINED.values() for name in names if not name.startswith("_")}  # the course's names
SNIPPETS = _snippets()


def _shell_problem(line: str) -> str | None:
    words = line.split()
    if words[0] in ("make", "sudo") and "make" in words:
        target = words[words.index("make") + 1]
        makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
        defined = re.search(rf"^([\w-]+ )*{re.escape(target)}( [\w-]+)*:", makefile, re.MULTILINE)
        return None if defined else f"no make {target}"
    if words[:2] == ["python", "-m"]:
        if importlib.util.find_spec(words[2]) is None:
            return f"no module {words[2]}"
        runs = {*DEFINED.get(words[2], ()), *DEFINED.get(f"{words[2]}.__main__", ())}  # a package runs its __main__
        if words[2].startswith("tools.") and "main" not in runs:
            return f"{words[2]} has no main()"
        return None
    script = next((word for word in words if word.endswith(".py")), None)
    return None if script is None or (ROOT / script).is_file() else f"no file {script}"


def _bound(node: ast.AST) -> set[str]:
    """Names ``node`` binds: assignment targets, imports, loop, ``as`` and comprehension variables, arguments, defs."""
    bound = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bound.add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in sub.names}
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
            bound.add(sub.name)
    return bound


def _free_names(tree: ast.Module) -> set[str]:
    """Names the code reads before it defines them (statement by statement: ``answer = plain(answer)`` reads one)."""
    defined, free = set(), set()
    for statement in tree.body:
        inside = _bound(statement.value) if isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign)) \
            and statement.value is not None else _bound(statement)
        loaded = {node.id for node in ast.walk(statement) if isinstance(node, ast.Name) and isinstance(node.ctx,
                                                                                                       ast.Load)}
        free |= loaded - defined - inside
        defined |= _bound(statement)
    return free - set(dir(builtins))


def _problem(module_name: str, code: str) -> tuple[str | None, bool]:
    """(what is wrong with the usage ``code`` of ``module_name``, or None; whether it can run)."""
    if re.match(r"(python|make|sudo|\.venv/bin/python)\b", code):
        lines = [line.split("#")[0].strip() for line in code.replace(".venv/bin/python", "python").splitlines()]
        return next(filter(None, map(_shell_problem, filter(None, lines))), None), False
    if code.startswith("pip "):
        return None, False
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return (f"does not parse: {code!r}" if "(" in code or "=" in code else None), False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in MODULES:
            missing = [alias.name for alias in node.names
                       if alias.name not in DEFINED[node.module] and f"{node.module}.{alias.name}" not in MODULES]
            if missing:
                return f"imports {missing} from {node.module}, which has none", False
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for module in [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]:
                if module and importlib.util.find_spec(module.split(".")[0]) is None:
                    return f"imports {module}, which is not installed", False
    unknown = _free_names(tree) - DEFINED[module_name]
    strangers = unknown - EXAMPLES - PUBLIC
    if strangers:
        return f"uses {sorted(strangers)}: not {module_name}'s, nor imported, nor the course's, nor an example", False
    calls = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    return None, module_name.startswith("course_utils") and not unknown and not (calls & NOT_RUN)


def test_usage_lines_are_found() -> None:
    names = {name for name, _code in SNIPPETS}
    assert len(SNIPPETS) > 100 and {"course_utils.hooks", "tools.build_editions"} <= names


def test_every_usage_line_names_what_exists_and_those_that_can_run_do(tmp_path: Path) -> None:
    problems, runnable = [], []
    for module_name, code in SNIPPETS:
        problem, can_run = _problem(module_name, code)
        if problem:
            problems.append(f"{module_name}: {problem}\n    {code}")
        elif can_run:
            runnable.append((module_name, code))
    assert not problems, "\n".join(problems)
    assert len(runnable) > 30
    runner = textwrap.dedent("""
        import contextlib, importlib, io, json, sys
        failures = []
        for module_name, code in json.loads(sys.stdin.read()):
            namespace = dict(vars(importlib.import_module(module_name)))
            try:
                with contextlib.redirect_stdout(io.StringIO()):
                    exec(compile(code, f"<usage of {module_name}>", "exec"), namespace)
            except BaseException as error:
                failures.append(f"{module_name}: {code}\\n    {type(error).__name__}: {error}")
        print(json.dumps(failures))
    """)
    env = {**os.environ, "COURSE_PROGRESS": str(tmp_path / "progress.jsonl"), "COURSE_LANG": "en",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", runner], input=json.dumps(runnable), cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("line", ["from course_utils.hooks import train_with_hook",
                                  "count_hooks(train_with_hook)"])
def test_a_usage_line_naming_what_does_not_exist_is_caught(line: str) -> None:
    problem, _can_run = _problem("course_utils.hooks", line)
    assert problem is not None and "train_with_hook" in problem
