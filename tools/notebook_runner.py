"""The course's one notebook runner (nbclient), and the verbs that run notebooks: ``refresh`` and ``timings``.

``make refresh``, ``make timings``, the learner-edition tests and ``make test-compat`` run notebooks through
:func:`run_notebook` (nbval stays the strict comparer of stored outputs). Every run starts a fresh kernel of *this*
Python (as nbval's ``--nbval-current-env``) in the notebook's folder with CI's settings (:data:`KERNEL_ENV`), and
always shuts it down; fails a cell past ``cell_timeout`` and a notebook past ``notebook_timeout``, naming the cell;
starts a kernel that dies before its first message again, up to :data:`KERNEL_STARTS` times (two kernels started at
once can lose the race for a port: jupyter_client#154); and leaves no nbclient clean-up registered at exit.

One patch of upstream behaviour stays, here only: the kernel client polls in slices of :data:`POLL_SLICE` seconds
(:class:`SlicedPollChannel`). nbclient waits for a cell's ``execute_reply`` with one poll for the whole cell timeout,
and an asyncio poll on a zmq socket can miss the wake-up of a message that arrived while the socket sent (the
Output-widget comm messages of notebook 06): the reply then sits unread until the timeout. Open upstream as
jupyter/nbclient#312; seen at notebook 06, 6 of 11 runs with one poll, 0 of 10 with slices.
``tests/test_notebook_runner.py`` pins it.

This module imports no course code at its top: ``tools/compat/execute.py`` loads it by path in another environment.

Usage: ``run = run_notebook(Path("notebooks/01_tensor_hooks.ipynb"))`` (``run.problem`` is None when every cell ran);
``python -m tools refresh notebooks/01_tensor_hooks.ipynb``; ``python -m tools timings``
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty
from typing import Any

import ipykernel.kernelspec
import nbformat
from jupyter_client import AsyncKernelManager
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError
from traitlets import Type, default

__all__ = ["CELL_TIMEOUT", "KERNEL_ENV", "KERNEL_STARTS", "NotebookFailed", "NotebookRun", "execute", "run_notebook"]

CELL_TIMEOUT = 300  # seconds one cell may run (nbval's --nbval-cell-timeout in make test is the same)
KERNEL_STARTS = 3  # tries to start a kernel that dies before it answers
POLL_SLICE = 1.0  # seconds: the longest the client waits on a kernel socket before it looks again
# CI's settings (the Makefile exports the same for nbval), so that stored outputs are what CI computes; a notebook
# re-executed by the course never writes a progress record, and chooses its language itself (setup_notebook).
KERNEL_ENV = {"PYTHONHASHSEED": "0", "JUPYTER_PLATFORM_DIRS": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1",
              "COURSE_PROGRESS": "off"}
_DIED_AT_START = "Kernel died before replying to kernel_info"
_ERROR_LINE = re.compile(r"\w(Error|Exception)\b")  # a line of a dead kernel's stderr that says why


class NotebookFailed(RuntimeError):
    """A notebook run that stopped before its end; the message names the notebook and the cell."""


@dataclass
class NotebookRun:
    """What :func:`run_notebook` did: the executed ``notebook``, why it stopped (``problem``, None when it ran to the
    end), ``notes`` (kernel starts tried again, kernel messages found late) and ``seconds``, kernel start included."""

    notebook: nbformat.NotebookNode
    problem: str | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


_BaseChannel: Any = AsyncKernelClient.shell_channel_class.default_value  # jupyter_client 7 and 8 name it differently


class SlicedPollChannel(_BaseChannel):
    """A kernel client's channel whose ``get_msg`` waits at most :data:`POLL_SLICE` at a time (see the docstring of
    this module); ``late`` counts the messages found only when a slice ran out."""

    late = 0  # on the instance once one is late

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = POLL_SLICE if deadline is None else max(0.0, min(POLL_SLICE, deadline - time.monotonic()))
            started = time.monotonic()
            try:
                message: dict[str, Any] = await super().get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise
                continue
            if left > 0 and time.monotonic() - started >= left:
                self.late += 1
            return message


class _KernelClient(AsyncKernelClient):
    shell_channel_class = Type(SlicedPollChannel)
    iopub_channel_class = Type(SlicedPollChannel)


class _CurrentEnvKernels(KernelSpecManager):
    """Every kernel name resolves to this very Python, as nbval's ``--nbval-current-env`` does (a ``python3``
    kernelspec installed elsewhere may point to another Python)."""

    def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
        return self.kernel_spec_class(resource_dir=ipykernel.kernelspec.RESOURCES,
                                      **ipykernel.kernelspec.get_kernel_dict())


class _KernelManager(AsyncKernelManager):
    @default("kernel_spec_manager")
    def _current_env(self) -> KernelSpecManager:
        return _CurrentEnvKernels(data_dir=self.data_dir)

    @default("client_factory")
    def _sliced_polls(self) -> type:
        return _KernelClient


class _Client(NotebookClient):
    """nbclient's client, noting the cell it runs (so that a timeout can name it) and its channels' late messages."""

    running: int | None = None
    timed_out = False
    channels: tuple[SlicedPollChannel, ...] = ()

    async def async_start_new_kernel_client(self) -> Any:
        client = await super().async_start_new_kernel_client()
        self.channels = (client.shell_channel, client.iopub_channel)
        return client

    async def async_execute_cell(self, cell: nbformat.NotebookNode, cell_index: int, *args: Any, **kwargs: Any) -> Any:
        self.running = cell_index
        return await super().async_execute_cell(cell, cell_index, *args, **kwargs)

    async def run(self, notebook_timeout: float | None, **kernel_options: Any) -> None:
        """Execute the notebook; past ``notebook_timeout`` seconds, stop (the kernel is shut down either way)."""
        task = asyncio.current_task()

        def stop() -> None:
            self.timed_out = True
            if task is not None:
                task.cancel()

        timer = asyncio.get_running_loop().call_later(notebook_timeout, stop) if notebook_timeout else None
        try:
            await self.async_execute(**kernel_options)
        finally:
            if timer is not None:
                timer.cancel()
            atexit.unregister(self._cleanup_kernel)  # left registered when the kernel died at start
            if self.km is not None and self.km.has_kernel:
                await self._async_cleanup_kernel()


def _cell(notebook: nbformat.NotebookNode, index: int | None) -> str:
    if index is None:
        return "before its first cell"
    lines = notebook.cells[index].source.strip().splitlines()
    return f"cell {index} ({lines[0] if lines else ''!r})"


def _last_error_line(path: Path) -> str:
    """The last line a dead kernel wrote to its stderr that names an error (else its last line), shortened."""
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [line for line in lines if line]
    return ([line for line in lines if _ERROR_LINE.search(line)] or lines or [""])[-1][:300]


def _why(error: BaseException, client: _Client, cell_timeout: float, notebook_timeout: float | None,
         said: str) -> str:
    """Why a run stopped, naming the cell (``said``: the last error line of the kernel's stderr)."""
    where = _cell(client.nb, client.running)
    if client.timed_out:
        return f"still running after {notebook_timeout:g} s, at {where}: stopped, with its kernel"
    if isinstance(error, CellTimeoutError):
        return f"{where} ran past the cell timeout of {cell_timeout:g} s"
    if isinstance(error, CellExecutionError):
        return f"{where} raised {error.ename}: {error.evalue}"
    died = f" (the kernel's stderr ended: {said})" if said and "died" in str(error) else ""
    return f"the run stopped at {where}: {type(error).__name__}: {str(error)[:400]}{died}"


def run_notebook(notebook: nbformat.NotebookNode | Path, cwd: Path | None = None, *, name: str = "the notebook",
                 cell_timeout: float = CELL_TIMEOUT,
                 notebook_timeout: float | None = None, allow_errors: bool = False, kernel_starts: int = KERNEL_STARTS,
                 extra_arguments: list[str] | None = None, **client_options: Any) -> NotebookRun:
    """Run ``notebook`` (a notebook or its path) top to bottom in a fresh kernel of this Python, in ``cwd`` (default:
    the notebook's folder), and shut the kernel down. Cells tagged ``raises-exception`` may always raise; with
    ``allow_errors`` any cell may. ``client_options`` go to nbclient's ``NotebookClient`` (``record_timing``, ...).

    Usage: ``run = run_notebook(Path("notebooks/00_start_here.ipynb"), cell_timeout=60)``; ``run.problem``"""
    if isinstance(notebook, Path):
        name, cwd = notebook.name, cwd or notebook.parent
        notebook = nbformat.read(notebook, as_version=4)
    assert isinstance(notebook, nbformat.NotebookNode)
    started, notes, problem = time.monotonic(), [], None
    env = {key: value for key, value in os.environ.items() if key != "COURSE_LANG"} | KERNEL_ENV
    with tempfile.TemporaryDirectory(prefix="course-kernel-") as tmp:
        # a kernel that died at start ran no cell: the notebook is as it was
        for attempt in range(1, kernel_starts + 1):
            client = _Client(notebook, kernel_manager_class=_KernelManager, timeout=int(cell_timeout) or None,
                             allow_errors=allow_errors, resources={"metadata": {"path": str(cwd or Path.cwd())}},
                             extra_arguments=list(extra_arguments or []), **client_options)
            stderr_path = Path(tmp, f"kernel-stderr-{attempt}.txt")
            try:
                with open(stderr_path, "wb") as stderr:
                    asyncio.run(client.run(notebook_timeout, env=env, stderr=stderr))
            except (Exception, asyncio.CancelledError) as error:
                said = _last_error_line(stderr_path)
                if client.running is None and _DIED_AT_START in str(error):
                    notes.append(f"kernel start {attempt} of {kernel_starts} died before its first cell"
                                 + (f"; its stderr ended: {said}" if said else ""))
                    if attempt < kernel_starts:
                        continue
                problem = f"{name}: {_why(error, client, cell_timeout, notebook_timeout, said)}"
            break
    late = sum(channel.late for channel in client.channels)
    if late:
        notes.append(f"{late} kernel message(s) found only when a {POLL_SLICE:g} s poll ran out (jupyter/nbclient#312)")
    return NotebookRun(notebook, problem, notes, time.monotonic() - started)


def execute(notebook: nbformat.NotebookNode | Path, cwd: Path | None = None, **options: Any) -> nbformat.NotebookNode:
    """:func:`run_notebook`, raising :class:`NotebookFailed` (naming the notebook and the cell) when the run stopped.

    Usage: ``executed = execute(Path("notebooks/01_tensor_hooks.ipynb"))``"""
    run = run_notebook(notebook, cwd, **options)
    if run.problem is not None:
        raise NotebookFailed(run.problem)
    return run.notebook


# -- the verbs: python -m tools refresh | timings ---------------------------------------------------------------------
def coalesce_streams(notebook: nbformat.NotebookNode) -> None:
    """Merge each cell's consecutive chunks of one stream and keep only the last state of a line redrawn with ``\\r``
    (a finished progress bar), with nbconvert's CoalesceStreamsPreprocessor: the kernel flushes at moments that depend
    on timing, so coalesced the stored file is the same on every run (nbval coalesces so before it compares)."""
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    CoalesceStreamsPreprocessor().preprocess(notebook, {})


def failed_checks(notebook: nbformat.NotebookNode) -> list[str]:
    """The solution cells whose stored output is not check()'s ✓: one line each, with what the cell printed."""
    found = []
    for cell in notebook.cells:
        if cell.cell_type != "code" or "solution" not in cell.metadata.get("tags", []):
            continue
        text = "".join(output.get("text", "") for output in cell.get("outputs", []) if output.get("name") == "stdout")
        if not text.lstrip().startswith("✓"):
            found.append(f"cell {cell.get('id')}: printed {text.strip()[:160]!r}")
    return found


def refresh(paths: list[Path], timeout: float) -> int:
    """Re-execute each notebook and store its outputs (no cell timings: an unchanged notebook stays byte-identical);
    stop, that notebook not written, when a cell not tagged ``raises-exception`` raises or times out."""
    failed: list[str] = []
    for path in paths:
        print(f"refreshing {path}", flush=True)
        try:
            notebook = execute(path, cell_timeout=timeout, record_timing=False)
        except NotebookFailed as failure:
            print(f"make refresh stopped, {path} not written: {failure}", file=sys.stderr)
            return 1
        # Widget state (model ids, captured figures) changes every run and is not needed to read the course: dropped,
        # and with it the stored widget views (a random model id that shows nothing without the state).
        notebook.metadata.pop("widgets", None)
        for cell in notebook.cells:
            for output in cell.get("outputs", []):
                output.get("data", {}).pop("application/vnd.jupyter.widget-view+json", None)
        coalesce_streams(notebook)
        notebook.metadata.setdefault("kernelspec", {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                                    "language": "python"})
        nbformat.write(notebook, path)
        failed += [f"  {path} {line}" for line in failed_checks(notebook)]
    if failed:
        print("stored, but a solution cell's output must be its ✓ (CONTRIBUTING.md, \"Exercise rules\"): fix the "
              "solution or its check (make sync lists an exercise no module defines), then make refresh again:\n"
              + "\n".join(failed), file=sys.stderr)
        return 1
    return 0


def timings(paths: list[Path] | None = None) -> int:
    """Run each course notebook (``paths``) top to bottom, kernel start included; print the seconds, store them in
    ``tools/notebook_timings.json`` and regenerate the guide's tables. A notebook that stops early has no meaningful
    time: the run stops, naming the cell, and writes nothing."""
    from tools import instructor_guide
    from tools.build_editions import course_notebooks, read_opening

    total, measured = 0.0, {}
    print(f"{'notebook':32} {'run (s)':>8} {'estimated (min)':>16}")
    for path in course_notebooks() if paths is None else paths:
        run = run_notebook(path, cell_timeout=600)
        if run.problem is not None:
            raise SystemExit(f"make timings stopped, nothing written: {run.problem}. Fix the notebook (or tag a cell "
                             "that is meant to raise with raises-exception) before timing it.")
        total += run.seconds
        measured[path.stem] = max(1, round(run.seconds))
        print(f"{path.name:32} {run.seconds:8.1f} {read_opening(path).minutes:16d}", flush=True)
    print(f"{'total':32} {total:8.1f}")
    file = instructor_guide.TIMINGS
    record = json.loads(file.read_text(encoding="utf-8")) if file.exists() else {}
    record.setdefault("measured", "make timings: each notebook top to bottom in a fresh kernel, kernel start included")
    record["seconds"] = measured
    file.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    instructor_guide.main([])
    return 0


def _notebook_file(text: str) -> Path:
    if not text.endswith(".ipynb") or not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"not a notebook file: {text}")
    return Path(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools", description=__doc__.splitlines()[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    refreshing = verbs.add_parser("refresh", help="re-execute notebooks in place and store their outputs")
    refreshing.add_argument("notebooks", nargs="+", type=_notebook_file)
    refreshing.add_argument("--timeout", type=float, default=CELL_TIMEOUT,
                            help="seconds per cell (as nbval's --nbval-cell-timeout)")
    verbs.add_parser("timings", help="measure each notebook's run time; write the timings file and the guide's tables")
    args = parser.parse_args(argv)
    return refresh(args.notebooks, args.timeout) if args.verb == "refresh" else timings()


if __name__ == "__main__":
    sys.exit(main())
