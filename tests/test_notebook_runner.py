"""The course's one notebook runner (tools/notebook_runner.py): its kernel never outlives a run, a cell or a notebook
past its timeout fails naming the cell, a kernel that dies at start is started again, and the one upstream behaviour
it works around (jupyter/nbclient#312: a message found only when a poll times out) is pinned."""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import sys
import time
from pathlib import Path
from queue import Empty
from typing import Any

import nbformat
import psutil
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_notebook

from tools import notebook_runner
from tools.notebook_runner import NotebookFailed, SlicedPollChannel, execute, run_notebook

ROOT = Path(__file__).resolve().parent.parent


def notebook(*sources: str) -> nbformat.NotebookNode:
    return new_notebook(cells=[new_code_cell(source) for source in sources])


def processes_in(folder: Path) -> list[psutil.Process]:
    """Processes whose working folder is ``folder`` (a kernel started for a notebook there)."""
    found = []
    for process in psutil.process_iter():
        try:
            if Path(process.cwd()).resolve() == folder.resolve():
                found.append(process)
        except (psutil.Error, OSError):
            continue
    return found


def test_a_run_leaves_no_kernel_behind_and_has_ci_settings(tmp_path: Path) -> None:
    """The kernel writes its pid; that process must be gone when the run returns (nbclient keeps a kernel running
    that it did not start itself: once, 25 such kernels filled the machine)."""
    ran = execute(notebook("import os\nprint(os.getpid(), os.environ['PYTHONHASHSEED'], os.getcwd())"), tmp_path)
    pid, seed, cwd = ran.cells[0].outputs[0]["text"].split()
    assert int(pid) != os.getpid() and seed == "0" and Path(cwd) == tmp_path
    try:
        psutil.Process(int(pid)).wait(timeout=10)
    except psutil.NoSuchProcess:
        pass
    except psutil.TimeoutExpired:
        psutil.Process(int(pid)).kill()
        pytest.fail(f"the notebook's kernel (pid {pid}) was still running after the run returned")


def test_a_cell_that_raises_or_runs_too_long_fails_naming_the_notebook_and_the_cell(tmp_path: Path) -> None:
    with pytest.raises(NotebookFailed,
                       match=r"^nb.ipynb: cell 1 \(.raise ValueError\(.no.\).\) raised ValueError: no$"):
        execute(notebook("x = 1", "raise ValueError('no')"), tmp_path, name="nb.ipynb")
    tagged = notebook("raise KeyError('shown')", "print('after')")
    tagged.cells[0].metadata["tags"] = ["raises-exception"]
    assert execute(tagged, tmp_path).cells[1].outputs[0]["text"] == "after\n"
    started = time.monotonic()
    run = run_notebook(notebook("print(1)", "import time; time.sleep(1000)"), tmp_path, name="hang.ipynb",
                       cell_timeout=2)
    assert time.monotonic() - started < 60
    assert run.problem == "hang.ipynb: cell 1 ('import time; time.sleep(1000)') ran past the cell timeout of 2 s"
    assert processes_in(tmp_path) == []


def test_make_timings_stops_at_a_cell_that_raises_and_writes_nothing(tmp_path: Path) -> None:
    """A notebook broken early has no meaningful time (a tagged cell may raise: the test above)."""
    path = tmp_path / "broken.ipynb"
    nbformat.write(notebook("x = 1", "raise ValueError('broken on purpose')", "import time; time.sleep(30)"), path)
    with pytest.raises(SystemExit, match=r"^make timings stopped, nothing written: broken.ipynb: cell 1 "
                                         r"\(\"raise ValueError\('broken on purpose'\)\"\) raised ValueError"):
        notebook_runner.timings([path])

def test_a_notebook_past_its_timeout_is_stopped_with_its_kernel(tmp_path: Path) -> None:
    # no cell timeout: only the notebook's own timeout can end this, as when the client waits on a lost message
    started = time.monotonic()
    run = run_notebook(notebook("print(1)", "import time; time.sleep(1000)"), tmp_path, name="hang.ipynb",
                       cell_timeout=0, notebook_timeout=12)
    assert time.monotonic() - started < 12 + 15
    assert run.problem == ("hang.ipynb: still running after 12 s, at cell 1 ('import time; time.sleep(1000)'): "
                           "stopped, with its kernel")
    assert processes_in(tmp_path) == [], "the kernel outlived its notebook's timeout"


def dying_start(marker: Path, deaths: int) -> list[str]:
    """Kernel start-up code that writes a traceback's end to the kernel's stderr and exits before the kernel answers,
    the first ``deaths`` times it runs (counted in ``marker``): a start that lost the race for a port looks so."""
    code = (f"import os, pathlib; m = pathlib.Path({str(marker)!r}); n = len(m.read_text()) if m.exists() else 0; "
            f"m.write_text('x' * (n + 1)); n < {deaths} and (os.write(2, b'Traceback ...\\nzmq.error.ZMQError: "
            f"Address already in use (start ' + str(n + 1).encode() + b')\\nsomething after\\n'), os._exit(1))")
    return [f"--IPKernelApp.exec_lines={code}"]


@pytest.mark.parametrize("deaths", [1, 99])
def test_a_kernel_that_dies_at_start_is_started_again_and_each_retry_is_noted(tmp_path: Path, deaths: int) -> None:
    marker = tmp_path / "starts"
    run = run_notebook(notebook("print('ran')"), tmp_path, name="one.ipynb", kernel_starts=2,
                       extra_arguments=dying_start(marker, deaths))
    assert marker.read_text() == "xx", "tried more or fewer times than kernel_starts"
    assert run.notes[0] == ("kernel start 1 of 2 died before its first cell; its stderr ended: "
                            "zmq.error.ZMQError: Address already in use (start 1)")
    if deaths == 1:
        assert run.problem is None and run.notebook.cells[0].outputs[0]["text"] == "ran\n"
    else:
        assert len(run.notes) == 2 and "Kernel died before replying to kernel_info" in run.problem
        assert run.problem.endswith("(the kernel's stderr ended: zmq.error.ZMQError: Address already in use (start 2))")


def test_a_kernel_that_never_starts_leaves_no_noise_at_exit(tmp_path: Path) -> None:
    """nbclient registers its clean-up for exit and leaves it there when the kernel dies at start; at exit it then
    fails on the missing kernel manager (an AssertionError in CI's log, once)."""
    code = (f"from pathlib import Path; from nbformat.v4 import new_code_cell, new_notebook; "
            f"from tools.notebook_runner import run_notebook; "
            f"run = run_notebook(new_notebook(cells=[new_code_cell('1')]),"
            f" Path({str(tmp_path)!r}), kernel_starts=1, extra_arguments={dying_start(tmp_path / 'starts', 99)!r}); "
            f"print(run.problem)")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "Kernel died before replying to kernel_info" in done.stdout, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "AssertionError" not in done.stderr, done.stderr


class _WokenOnlyByTimeouts:
    """pyzmq's behaviour in jupyter/nbclient#312, simulated: a message is in the socket from the start, but the poll
    is not woken and finds it only when its own timeout runs out (then it checks the socket once more)."""

    def __init__(self, message: dict[str, str] | None) -> None:
        self.message, self.waits = message, []

    async def get_msg(self, timeout: float | None = None) -> dict[str, Any]:
        self.waits.append(timeout)
        await asyncio.sleep(timeout or 0)
        if self.message is None:
            raise Empty
        return self.message


def test_a_message_whose_wake_up_was_missed_is_read_within_one_poll_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = _WokenOnlyByTimeouts({"msg_type": "execute_reply"})
    monkeypatch.setattr(notebook_runner, "POLL_SLICE", 0.05)
    monkeypatch.setattr(notebook_runner._BaseChannel, "get_msg", lambda self, timeout=None: upstream.get_msg(timeout))
    channel = SlicedPollChannel.__new__(SlicedPollChannel)
    started = time.monotonic()
    assert asyncio.run(channel.get_msg(timeout=300)) == {"msg_type": "execute_reply"}  # nbclient: the cell timeout
    assert time.monotonic() - started < 5 and upstream.waits == [0.05] and channel.late == 1
    never = _WokenOnlyByTimeouts(None)
    monkeypatch.setattr(notebook_runner._BaseChannel, "get_msg", lambda self, timeout=None: never.get_msg(timeout))
    started = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=0.3))
    assert 0.29 < time.monotonic() - started < 5


def test_nbclient_still_waits_for_a_reply_with_one_poll_for_the_whole_cell_timeout() -> None:
    """The upstream behaviour SlicedPollChannel works around (jupyter/nbclient#312, open): when this fails, nbclient
    changed how it waits for a cell's reply -- try the runner without the slices, and drop them if 06 never stalls."""
    source = inspect.getsource(NotebookClient._async_poll_for_reply)
    assert "shell_channel.get_msg(timeout=new_timeout)" in source
