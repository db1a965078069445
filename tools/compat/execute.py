"""Run the course's notebooks in this Python's environment, from the current folder (outside the checkout), and judge
each run; ``make test-compat`` (tools/compat/run.py) runs it by path with the compat environment's Python.

It makes a learner workspace there (``python -m course_utils.machinery.workspace``, the *installed* course), runs every
teaching notebook (``complete/``) and learner edition through the course's runner (``tools/notebook_runner.py``,
loaded by path with ``tests/learner_run.py``, the learner editions' judge: the checkout is not on ``sys.path``), and
writes ``{"NN_x (teaching)": [problems], ...}`` to ``report.json``.

Usage: ``cd /tmp/x && python /path/to/tools/compat/execute.py --workers 2 --notebooks 04 10``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import nbformat

from course_utils.machinery.layout import COMPLETE, NOTEBOOK_GLOB  # the installed course's (imports nothing)

# Each kernel starts with these filters: every DeprecationWarning and FutureWarning attributed to torch,
# torchvision, course_utils or the notebook's own code (__main__) is shown each time, so none hides behind Python's
# default filters. Other libraries' warnings keep Python's defaults (jupyter_client's would flood every cell).
_SHOW = r"(torch|torchvision|course_utils)(\..*)?$|__main__$"
KERNEL_WARNING_FILTERS = "; ".join(
    f"warnings.filterwarnings('always', category={category}, module={_SHOW!r})"
    for category in ("DeprecationWarning", "FutureWarning")
)
EXPECTED_ERROR = "raises-exception"
WARNING_LINE = re.compile(r"^(?P<path>\S+?):(?P<line>\d+): "
                          r"(?P<category>DeprecationWarning|FutureWarning): (?P<message>.*)$")
# Where a warning is the course's debt: raised in torch or torchvision, or attributed (stacklevel) to the course's
# own code -- a notebook cell (ipykernel_...) or course_utils -- that calls a deprecated torch API.
COURSE_DEBT = re.compile(r"/(torch|torchvision|course_utils)/|ipykernel_\d+")
TOOLS = Path(__file__).resolve().parent.parent
_LOADING = threading.Lock()


def load(path: Path) -> ModuleType:
    """A module of the checkout, by its path (tools/notebook_runner.py, tests/learner_run.py), beside any module of
    that name here; executed once, whichever thread asks first, and kept in ``sys.modules`` (its dataclasses look
    their module up there while it executes)."""
    name = f"course_checkout_{path.stem}"
    with _LOADING:
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {path}")
            sys.modules[name] = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(sys.modules[name])
            except BaseException:
                del sys.modules[name]
                raise
        return sys.modules[name]


def _stream(cell: nbformat.NotebookNode, name: str) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", [])
                   if o.output_type == "stream" and o.get("name") == name)


def teaching_problems(executed: nbformat.NotebookNode) -> list[str]:
    """No error outside raises-exception cells, no failed check, every solution cell's check passes."""
    problems = []
    for index, cell in enumerate(executed.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        tags = cell.metadata.get("tags", [])
        errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
        printed = _stream(cell, "stdout")
        if errors and EXPECTED_ERROR not in tags:
            problems.append(f"cell {index} raised {errors[0][:400]}")
        if "✗ Exercise" in printed:
            problems.append(f"cell {index}: a check failed: {printed.strip()[-300:]}")
        if "solution" in tags and "✓ Exercise" not in printed:
            problems.append(f"cell {index}: the solution's check did not pass: {printed.strip()[-300:]!r}")
    return problems


def warnings_seen(executed: nbformat.NotebookNode) -> tuple[list[str], list[str]]:
    """(debt, other): DeprecationWarning/FutureWarning lines a cell wrote to stderr (the kernel starts with
    :data:`KERNEL_WARNING_FILTERS`), split into the course's debt (torch, torchvision, course code) and the rest.
    Lessons that teach a warning catch it with print_warnings(), which prints to stdout: not counted."""
    debt: list[str] = []
    other: list[str] = []
    for index, cell in enumerate(executed.cells):
        if cell.cell_type != "code":
            continue
        for line in _stream(cell, "stderr").splitlines():
            match = WARNING_LINE.match(line.strip())
            if match:
                where = debt if COURSE_DEBT.search(match.group("path")) else other
                where.append(f"cell {index}: {match.group('category')}: {match.group('message')[:240]} "
                             f"({Path(match.group('path')).name}:{match.group('line')})")
    return debt, other


Job = tuple[str, str, str, str]  # label, notebook, its teaching notebook, kind ("teaching" or "learner")
Result = tuple[str, list[str], list[str], list[str], float]  # label, problems, runner's notes, warnings, seconds


def run_job(job: Job, judge: ModuleType, *, cell_timeout: float, notebook_timeout: float,
            strict_warnings: bool = False) -> Result:
    """Run one notebook with the course's runner and judge it (``judge``: tests/learner_run.py); the warnings returned
    are those not counted as the course's.

    Usage: ``label, problems, notes, warnings, seconds = run_job(job, load(Path("tests/learner_run.py")), ...)``"""
    label, path, teaching_path, kind = job
    runner = load(TOOLS / "notebook_runner.py")
    run = runner.run_notebook(Path(path), cell_timeout=cell_timeout, notebook_timeout=notebook_timeout,
                              allow_errors=True, extra_arguments=[
                                  f"--IPKernelApp.exec_lines=import warnings; {KERNEL_WARNING_FILTERS}"])
    if run.problem is not None:
        return label, [run.problem], run.notes, [], run.seconds
    problems = (teaching_problems(run.notebook) if kind == "teaching"
                else judge.learner_run_problems(run.notebook, nbformat.read(teaching_path, as_version=4)))
    debt, other = warnings_seen(run.notebook)
    if strict_warnings:
        return label, problems + [f"deprecation debt: {line}" for line in debt], run.notes, other, run.seconds
    return label, problems, run.notes, debt + other, run.seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--notebooks", nargs="*")
    parser.add_argument("--strict-warnings", action="store_true",
                        help="a DeprecationWarning/FutureWarning from torch, torchvision or the course fails the run")
    parser.add_argument("--cell-timeout", type=float, default=300, help="seconds one cell may run (0: none)")
    parser.add_argument("--notebook-timeout", type=float, default=900, help="seconds one notebook may take in all")
    args = parser.parse_args()
    judge = load(TOOLS.parent / "tests" / "learner_run.py")
    workspace = Path.cwd() / "workspace"
    subprocess.run([sys.executable, "-m", "course_utils.machinery.workspace", str(workspace)], check=True, timeout=600)
    jobs = []
    for teaching in sorted((workspace / COMPLETE).glob(NOTEBOOK_GLOB)):
        if not args.notebooks or teaching.name[:2] in args.notebooks:
            jobs += [(f"{teaching.stem} (teaching)", str(teaching), str(teaching), "teaching"),
                     (f"{teaching.stem} (learner)", str(workspace / teaching.name), str(teaching), "learner")]
    # longest first (05 and 06 load a model and draw), so the workers finish together
    jobs.sort(key=lambda job: (job[0][:2] not in ("05", "06", "07"), job[0]))
    report: dict[str, list[str]] = {}

    def run(job: Job) -> Result:
        return run_job(job, judge, cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout,
                       strict_warnings=args.strict_warnings)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        for label, problems, notes, warnings, seconds in pool.map(run, jobs):
            report[label] = problems
            print(f"  {'ok  ' if not problems else 'FAIL'} {label} ({seconds:.0f} s)"
                  + "".join(f"\n       - {p}" for p in problems) + "".join(f"\n  note: {n}" for n in notes), flush=True)
            if warnings:
                print(f"  note: {label}: {len(warnings)} deprecation/future warning(s) not counted as the course's: "
                      f"{warnings[0]}")
    Path("report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
