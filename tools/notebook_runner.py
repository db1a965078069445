"""The course's one notebook runner: nbclient, configured for every tool that runs a notebook top to bottom.

``make refresh``, ``make timings``, the learner-edition tests and ``make test-compat`` run notebooks through
:func:`run_notebook` (nbval stays the strict comparer of stored outputs). Every run:

- starts a fresh kernel of *this* Python (as nbval's ``--nbval-current-env``), in the notebook's folder, with CI's
  settings (:data:`KERNEL_ENV`), and always shuts it down, also when a cell fails or the run times out;
- fails a cell past ``cell_timeout`` and a notebook past ``notebook_timeout`` (then its kernel is stopped), naming the
  notebook and the cell;
- starts the kernel again, up to :data:`KERNEL_STARTS` times in all, when it dies before it answers its first message
  (it ran no cell; two kernels started at once can lose the race for a port jupyter_client chose and closed:
  jupyter_client#154), noting each retry with the last error line the dead kernel wrote to its stderr;
- leaves no at-exit clean-up of nbclient registered (after a failed start it would fail, noisily, at exit).

One patch of upstream behaviour stays, here only: the kernel client waits for the kernel's messages in slices of
:data:`POLL_SLICE` seconds (:class:`SlicedPollChannel`). nbclient waits for a cell's ``execute_reply`` with one poll of
the shell socket for the whole cell timeout, and an asyncio poll on a zmq socket can miss the wake-up of a message
that has arrived while the same socket sends (nbclient's Output-widget comm messages during the cell): the reply then
sits unread until the poll times out. Open upstream as jupyter/nbclient#312 (nbclient 0.11.0 and jupyter_client 8.10
wait the same way); seen here at notebook 06's widget cell, 6 of 11 runs with one long poll, 0 of 10 with slices.
``tests/test_notebook_runner.py`` pins it.

Usage: ``run = run_notebook(Path("notebooks/01_tensor_hooks.ipynb"))``; ``run.problem`` is None when every cell ran
(``allow_errors=True``: cells may raise, as a learner's stubs do); :func:`execute` raises :class:`NotebookFailed`.

This module imports no course code: ``tools/compat/execute.py`` loads it by path in another environment.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import re
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
