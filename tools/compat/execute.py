"""Run the course's notebooks in this Python's environment, from a folder outside the checkout, and judge each run.

Run by tools/compat/run.py with the compat environment's Python (it imports the *installed* course_utils, and
nbclient/nbformat from that environment). It prepares a learner workspace in ``--folder`` with
``python -m course_utils.machinery.workspace``, then executes every teaching notebook (``complete/``) and every learner
edition there, ``--workers`` at a time, and writes ``{"NN_x (teaching)": [problems], ...}`` to ``--report``.

Usage: ``python tools/compat/execute.py --folder /tmp/x --learner-run tests/learner_run.py --report /tmp/x/r.json``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
from nbclient import NotebookClient

CELL_TIMEOUT = 300
# Each kernel starts with these filters: every DeprecationWarning and FutureWarning attributed to torch,
# torchvision, course_utils or the notebook's own code (__main__) is shown each time, so none hides behind Python's
# default filters. Other libraries' warnings keep Python's defaults (jupyter_client's would flood every cell).
_SHOW = r"(torch|torchvision|course_utils)(\..*)?$|__main__$"
KERNEL_WARNING_FILTERS = "; ".join(
    f"warnings.filterwarnings('always', category={category}, module={_SHOW!r})"
    for category in ("DeprecationWarning", "FutureWarning")
)
EXPECTED_ERROR = "raises-exception"
WARNING_LINE = re.compile(r"^(?P<path>\S+?):(?P<line>\d+): (?P<category>DeprecationWarning|FutureWarning): (?P<message>.*)$")
# Where a warning is the course's debt: raised in torch or torchvision, or attributed (stacklevel) to the course's
# own code -- a notebook cell (ipykernel_...) or course_utils -- that calls a deprecated torch API.
COURSE_DEBT = re.compile(r"/(torch|torchvision|course_utils)/|ipykernel_\d+")


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
    debt, other = [], []
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


def run_one(job: tuple[str, str, str, str, str, bool]) -> tuple[str, list[str], list[str], float]:
    label, path, teaching_path, kind, learner_run, strict_warnings = job
    started = time.monotonic()
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(Path(path).parent)}},
                            extra_arguments=[f"--IPKernelApp.exec_lines=import warnings; {KERNEL_WARNING_FILTERS}"])
    try:
        # the kernel process's own stderr (its start-up chatter, under PYTHONWARNINGS=always) stays out of the log;
        # what a cell writes to stderr reaches the notebook through the kernel's messages, as in JupyterLab
        client.execute(stderr=subprocess.DEVNULL)
    except Exception as error:  # a dead kernel or a timeout: report it as this run's problem
        return label, [f"the run stopped: {type(error).__name__}: {str(error)[:400]}"], [], time.monotonic() - started
    if kind == "teaching":
        problems = teaching_problems(notebook)
    else:
        spec = importlib.util.spec_from_file_location("learner_run", learner_run)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        problems = module.learner_run_problems(notebook, nbformat.read(teaching_path, as_version=4))
    debt, other = warnings_seen(notebook)
    if strict_warnings:
        problems += [f"deprecation debt: {line}" for line in debt]
        return label, problems, other, time.monotonic() - started
    return label, problems, debt + other, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", type=Path, required=True)
    parser.add_argument("--learner-run", required=True)
    parser.add_argument("--report", type=Path, required=True)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--notebooks", nargs="*")
    parser.add_argument("--strict-warnings", action="store_true",
                        help="a DeprecationWarning/FutureWarning from torch, torchvision or the course fails the run")
    args = parser.parse_args()

    workspace = args.folder / "workspace"
    subprocess.run([sys.executable, "-m", "course_utils.machinery.workspace", str(workspace)], check=True, cwd=args.folder)
    jobs = []
    for teaching in sorted((workspace / "complete").glob("[0-9][0-9]_*.ipynb")):
        if args.notebooks and teaching.name[:2] not in args.notebooks:
            continue
        name = teaching.stem
        jobs.append((f"{name} (teaching)", str(teaching), str(teaching), "teaching", args.learner_run,
                     args.strict_warnings))
        jobs.append((f"{name} (learner)", str(workspace / teaching.name), str(teaching), "learner", args.learner_run,
                     args.strict_warnings))
    # longest first (05 and 06 load a model and draw), so the workers finish together
    jobs.sort(key=lambda job: (job[0][:2] not in ("05", "06", "07"), job[0]))
    report: dict[str, list[str]] = {}
    warnings: dict[str, list[str]] = {}
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        for label, problems, seen, seconds in pool.map(run_one, jobs):
            report[label] = problems
            if seen:
                warnings[label] = seen
            print(f"  {'ok  ' if not problems else 'FAIL'} {label} ({seconds:.0f} s)"
                  + "".join(f"\n       - {p}" for p in problems), flush=True)
    for label, seen in sorted(warnings.items()):
        print(f"  note: {label}: {len(seen)} deprecation/future warning(s) not counted as the course's: {seen[0]}")
    args.report.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
