"""Run the course's notebooks in this Python's environment, from a folder outside the checkout, and judge each run.

Run by tools/compat/run.py with the compat environment's Python (it imports the *installed* course_utils, and
nbclient/nbformat from that environment). It prepares a learner workspace in ``--folder`` with
``python -m course_utils.machinery.workspace``, then executes every teaching notebook (``complete/``) and every learner
edition there, ``--workers`` at a time, and writes ``{"NN_x (teaching)": [problems], ...}`` to ``--report``.

Each notebook runs in a process of its own (this file with ``--job``, started fresh, not forked), so a stuck one can
be stopped with its kernel and none inherits another's client state. Nothing can hang the run:

- a cell running longer than ``--cell-timeout`` seconds fails the notebook, naming the cell (nbclient's timeout);
- a notebook still running after ``--notebook-timeout`` seconds, whatever it waits on, is stopped (its process and
  its kernel killed) and fails, naming the cell it was in;
- the client waits for the kernel's messages in slices of :data:`POLL_SLICE` seconds. The client's asyncio poll on
  a zmq socket can miss the wake-up of a message that has arrived: the message then sits unread until the poll
  times out, when pyzmq looks at the socket once more -- with nbclient's single poll per cell, the whole cell
  timeout. Seen at notebook 06's widget cell (SaliencyExplorer, whose Output widget makes the client send comm
  messages on the shell socket during the cell): the kernel idle, its execute_reply waiting in the client's socket,
  found 300 s later. On the lock (nbclient 0.11, jupyter_client 8.10, pyzmq 27.3), 6 of 11 runs of 06 with one long
  poll stalled so, 0 of 10 with slices (with Colab's set, one wake-up was counted as missed and recovered). A
  slice's timeout re-checks the socket, so a missed wake-up costs at most one slice; each is counted and noted in
  the log.

A kernel that dies before it answers its first message (``Kernel died before replying to kernel_info``) has run no
cell of the notebook: its start failed, for a reason outside the notebook (two kernels started at once can lose the
race for a port that jupyter_client chose and closed). Such a start is tried again, up to :data:`KERNEL_STARTS`
times in all; each retry is noted in the log with the last line the dead kernel wrote to its stderr, and a kernel
that never starts fails the notebook with that line.

Usage (what ``tools.compat.run`` runs, by path, in the compat environment): ``python tools/compat/execute.py --folder /tmp/x --learner-run tests/learner_run.py --report /tmp/x/r.json``
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from queue import Empty
from typing import Any

import nbformat
from nbclient import NotebookClient

from course_utils.machinery.layout import COMPLETE, NOTEBOOK_GLOB  # the installed course's (imports nothing)

CELL_TIMEOUT = 300  # seconds one cell may run (nbclient's timeout)
NOTEBOOK_TIMEOUT = 900  # seconds one notebook may take, kernel start to shutdown, whatever it waits on
POLL_SLICE = 1.0  # seconds: the longest the client waits on a kernel socket before it looks again
KERNEL_STARTS = 3  # tries to start a notebook's kernel when one dies before it answers (see above)
ERROR_LINE = re.compile(r"\w(Error|Exception)\b")  # a line of a dead kernel's stderr that says why
RESTART_NOTE = "kernel start "  # how a retried start is noted among a run's warnings
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


Job = tuple[str, str, str, str, str, bool]  # label, notebook, its teaching notebook, kind, learner_run.py, strict
Result = tuple[str, list[str], list[str], float, int]  # label, problems, warnings not counted, seconds, missed wake-ups


def get_msg_in_slices(get_msg: Callable[..., Awaitable[dict[str, Any]]], missed: list[float],
                      slice_s: float = POLL_SLICE) -> Callable[..., Awaitable[dict[str, Any]]]:
    """``get_msg`` of a kernel client's channel, waiting at most ``slice_s`` at a time until ``timeout`` (None: for
    ever). A message returned only when a slice ran out was there, unseen by the event loop: it is counted in
    ``missed``.

    Usage: ``kc.shell_channel.get_msg = get_msg_in_slices(kc.shell_channel.get_msg, missed)``
    """
    async def sliced(timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_s if deadline is None else max(0.0, min(slice_s, deadline - time.monotonic()))
            started = time.monotonic()
            try:
                message = await get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                continue
            if left > 0 and time.monotonic() - started >= left:
                missed.append(left)
            return message
    return sliced


def run_one(job: Job, cell_timeout: float = CELL_TIMEOUT, progress: Path | None = None) -> Result:
    """Execute one notebook in a fresh kernel and judge it. ``progress`` (a file) is kept up to date with the kernel's
    process group and the cell being run, for :func:`run_job` to name the cell and stop the kernel on a timeout.
    A kernel that dies before its first cell is started again (see this file's docstring)."""
    label, path, teaching_path, kind, learner_run, strict_warnings = job
    started = time.monotonic()
    restarts: list[str] = []
    # the kernel's stderr files go beside the progress file, in run_job's folder, removed even if this is killed
    with tempfile.TemporaryDirectory(prefix="course-compat-kernel-",
                                     dir=progress.parent if progress is not None else None) as tmp:
        for attempt in range(1, KERNEL_STARTS + 1):
            kernel_stderr = Path(tmp, f"kernel-stderr-{attempt}.txt")
            notebook, missed, state, error = _execute(path, cell_timeout, progress, kernel_stderr)
            if error is None:
                break
            where = f" at cell {state['cell']}" if state["cell"] is not None else ""
            said = _last_line(kernel_stderr)
            if state["cell"] is None and "Kernel died before replying to kernel_info" in str(error):
                restarts.append(f"{RESTART_NOTE}{attempt} of {KERNEL_STARTS} died before its first cell"
                                + (f"; its stderr ended: {said}" if said else ""))
                if attempt < KERNEL_STARTS:
                    continue
            problem = f"the run stopped{where}: {type(error).__name__}: {str(error)[:400]}"
            if said and ("died" in str(error) or "dead" in str(error)):
                problem += f" (the kernel's stderr ended: {said})"
            return label, [problem], restarts, time.monotonic() - started, len(missed)
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
        return label, problems, restarts + other, time.monotonic() - started, len(missed)
    return label, problems, restarts + debt + other, time.monotonic() - started, len(missed)


def _execute(path: str, cell_timeout: float, progress: Path | None,
             kernel_stderr: Path) -> tuple[nbformat.NotebookNode, list[float], dict[str, Any], Exception | None]:
    """Run the notebook at ``path`` once in a fresh kernel whose own stderr goes to ``kernel_stderr``:
    (the executed notebook, missed wake-ups, last progress state, the exception that stopped the run or None)."""
    notebook = nbformat.read(path, as_version=4)
    missed: list[float] = []
    state: dict[str, Any] = {"cell": None, "kernel_pgid": None}

    def note(**update: Any) -> None:
        state.update(update)
        if progress is not None:
            progress.write_text(json.dumps(state), encoding="utf-8")

    def on_notebook_start(notebook: nbformat.NotebookNode) -> None:
        kc = client.kc
        kc.shell_channel.get_msg = get_msg_in_slices(kc.shell_channel.get_msg, missed)
        kc.iopub_channel.get_msg = get_msg_in_slices(kc.iopub_channel.get_msg, missed)
        provisioner = getattr(client.km, "provisioner", None)
        note(kernel_pgid=getattr(provisioner, "pgid", None) or getattr(provisioner, "pid", None))

    def on_cell_start(cell: nbformat.NotebookNode, cell_index: int) -> None:
        note(cell=cell_index)

    note(cell=None, kernel_pgid=None)
    client = NotebookClient(notebook, timeout=int(cell_timeout) or None, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(Path(path).parent)}},
                            on_notebook_start=on_notebook_start, on_cell_start=on_cell_start,
                            extra_arguments=[f"--IPKernelApp.exec_lines=import warnings; {KERNEL_WARNING_FILTERS}"])
    try:
        # the kernel process's own stderr (its start-up chatter, under PYTHONWARNINGS=always) stays out of the log,
        # in a file read only when the kernel dies; what a cell writes to stderr reaches the notebook through the
        # kernel's messages, as in JupyterLab
        with open(kernel_stderr, "wb") as stderr:
            client.execute(stderr=stderr)
    except Exception as error:  # a dead kernel or a cell timeout: the caller reports it, naming the cell
        # nbclient leaves its at-exit clean-up registered when the kernel dies at start (it has already cleaned up,
        # and the registered call would fail on the missing kernel manager when this process exits)
        atexit.unregister(client._cleanup_kernel)
        return notebook, missed, state, error
    return notebook, missed, state, None


def _last_line(path: Path) -> str:
    """What a dead kernel's stderr (at ``path``) says last about its death, shortened: its last line that names an
    error or exception (a traceback ends with one), else its last line; '' if it wrote nothing."""
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    errors = [line for line in lines if ERROR_LINE.search(line)]
    return (errors or lines or [""])[-1][:300]


def _kill_group(pgid: int | None) -> None:
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run_job(job: Job, cell_timeout: float = CELL_TIMEOUT, notebook_timeout: float = NOTEBOOK_TIMEOUT) -> Result:
    """Run one notebook in a process of its own (this file with ``--job``) and judge it; past ``notebook_timeout``
    seconds the process and its kernel are killed and the run fails, naming the cell it was in.

    Usage: ``label, problems, warnings, seconds, missed = run_job(job, notebook_timeout=600)``
    """
    label = job[0]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="course-compat-job-") as tmp:
        result, progress = Path(tmp, "result.json"), Path(tmp, "progress.json")
        command = [sys.executable, str(Path(__file__).resolve()), "--job", json.dumps(job), "--result", str(result),
                   "--progress", str(progress), "--cell-timeout", str(cell_timeout)]
        process = subprocess.Popen(command, start_new_session=True)  # its own process group: killed as one
        try:
            process.wait(timeout=notebook_timeout)
        except subprocess.TimeoutExpired:
            state = json.loads(progress.read_text(encoding="utf-8")) if progress.is_file() else {}
            _kill_group(process.pid)
            _kill_group(state.get("kernel_pgid"))  # the kernel runs in a session of its own (jupyter_client)
            process.wait()
            where = f"at cell {state['cell']}" if state.get("cell") is not None else "before its first cell"
            return (label, [f"timed out: still running after {notebook_timeout:g} s, {where}; its process and "
                            f"kernel were stopped"], [], time.monotonic() - started, 0)
        if not result.is_file():
            return (label, [f"the notebook's runner process exited ({process.returncode}) without a verdict"], [],
                    time.monotonic() - started, 0)
        _, problems, seen, seconds, missed = json.loads(result.read_text(encoding="utf-8"))
        return label, problems, seen, seconds, missed


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--learner-run")
    parser.add_argument("--report", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--notebooks", nargs="*")
    parser.add_argument("--strict-warnings", action="store_true",
                        help="a DeprecationWarning/FutureWarning from torch, torchvision or the course fails the run")
    parser.add_argument("--cell-timeout", type=float, default=CELL_TIMEOUT, help="seconds one cell may run (0: none)")
    parser.add_argument("--notebook-timeout", type=float, default=NOTEBOOK_TIMEOUT,
                        help="seconds one notebook may take in all, whatever it waits on")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # one notebook, in a process of its own (run_job)
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--progress", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.job:
        outcome = run_one(tuple(json.loads(args.job)), args.cell_timeout, args.progress)  # type: ignore[arg-type]
        args.result.write_text(json.dumps(outcome), encoding="utf-8")
        return 0
    if not (args.folder and args.learner_run and args.report):
        parser.error("--folder, --learner-run and --report are required")

    workspace = args.folder / "workspace"
    subprocess.run([sys.executable, "-m", "course_utils.machinery.workspace", str(workspace)], check=True,
                   cwd=args.folder, timeout=600)
    jobs = []
    for teaching in sorted((workspace / COMPLETE).glob(NOTEBOOK_GLOB)):
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
    missed: dict[str, int] = {}

    def run(job: Job) -> Result:
        return run_job(job, args.cell_timeout, args.notebook_timeout)

    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        for label, problems, seen, seconds, missed_wakeups in pool.map(run, jobs):
            report[label] = problems
            if seen:
                warnings[label] = seen
            if missed_wakeups:
                missed[label] = missed_wakeups
            print(f"  {'ok  ' if not problems else 'FAIL'} {label} ({seconds:.0f} s)"
                  + "".join(f"\n       - {p}" for p in problems), flush=True)
    for label, count in sorted(missed.items()):
        print(f"  note: {label}: {count} kernel message(s) found only when a {POLL_SLICE:g} s poll ran out "
              f"(a missed wake-up; see this file's docstring)")
    for label, seen in sorted(warnings.items()):
        for restart in [line for line in seen if line.startswith(RESTART_NOTE)]:
            print(f"  note: {label}: {restart}")
        seen = [line for line in seen if not line.startswith(RESTART_NOTE)]
        if seen:
            print(f"  note: {label}: {len(seen)} deprecation/future warning(s) not counted as the course's: {seen[0]}")
    args.report.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
