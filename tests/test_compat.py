"""The compat run's verdicts (tools/compat/execute.py) fire on what they are meant to, a hanging notebook fails within
its timeout instead of hanging the run, and Colab's snapshot says where it came from and how to update it. The run
itself is `make test-compat`, which .ci/run runs after `make test` and `make nbval-portable`."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from queue import Empty

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parent.parent
from tools.compat import execute, run

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("tools/compat/*.json", "tools/compat/*.txt")


def notebook(*cells: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return new_notebook(cells=list(cells))


def stderr(text: str) -> nbformat.NotebookNode:
    return new_output("stream", name="stderr", text=text)


def test_deprecations_from_torch_or_course_code_are_debt_and_others_are_not() -> None:
    lines = (
        "/x/site-packages/torch/nn/modules/module.py:12: FutureWarning: `foo` is deprecated\n  foo()\n"
        "/tmp/ipykernel_123/456.py:3: DeprecationWarning: the notebook calls a deprecated torch API\n"
        "/x/site-packages/course_utils/saliency.py:9: DeprecationWarning: course code\n"
        "/x/site-packages/jupyter_client/session.py:203: DeprecationWarning: datetime.utcnow() is deprecated\n"
        "/x/site-packages/torch/foo.py:1: UserWarning: not a deprecation\n"
    )
    debt, other = execute.warnings_seen(notebook(new_code_cell("x", outputs=[stderr(lines)])))
    assert [line.split(": ", 2)[1] for line in debt] == ["FutureWarning", "DeprecationWarning", "DeprecationWarning"]
    assert "module.py:12" in debt[0] and "456.py:3" in debt[1] and "saliency.py:9" in debt[2]
    assert len(other) == 1 and "session.py:203" in other[0]


def test_a_teaching_run_fails_on_an_unexpected_error_a_failed_check_or_a_silent_solution() -> None:
    error = new_output("error", ename="AssertionError", evalue="", traceback=[])
    ok = new_output("stream", name="stdout", text="✓ Exercise 01.1: correct.\n")
    failed = new_output("stream", name="stdout", text="✗ Exercise 01.2: not yet.\n")
    cells = [
        new_code_cell("assert False", outputs=[error]),
        new_code_cell("raise ValueError", outputs=[error], metadata={"tags": ["raises-exception"]}),
        new_code_cell("check('01.1', f)", outputs=[ok], metadata={"tags": ["solution"]}),
        new_code_cell("check('01.2', g)", outputs=[failed], metadata={"tags": ["solution"]}),
        new_code_cell("check('01.3', h)", outputs=[], metadata={"tags": ["solution"]}),
    ]
    problems = execute.teaching_problems(notebook(*cells))
    assert problems[0].startswith("cell 0 raised AssertionError")
    assert not any(p.startswith(("cell 1 ", "cell 2")) for p in problems)
    assert any(p.startswith("cell 3: a check failed") for p in problems)
    assert any(p.startswith("cell 4: the solution's check did not pass") for p in problems)
    assert len(problems) == 4  # cell 3 both failed and did not pass


def test_the_snapshot_names_its_source_date_and_how_to_update_it() -> None:
    text = run.SNAPSHOT.read_text(encoding="utf-8")
    assert "https://github.com/googlecolab/backend-info" in text and run.COLAB_DATE in text
    assert "How to update" in text and f"Python {run.COLAB_PYTHON}" in text
    pins = run.snapshot_pins()
    assert pins["torch"] == "2.11.0" and pins["ipywidgets"].startswith("7.")


def test_only_notebooks_that_passed_both_runs_are_recorded(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(run, "VERIFIED", tmp_path / "verified.json")
    monkeypatch.setattr(run, "ROOT", tmp_path)
    report = {"01_a (teaching)": [], "01_a (learner)": [], "02_b (teaching)": [], "02_b (learner)": ["cell 3: x"]}
    run.record_verified("colab-2026-08-19", report, "2.11.0")
    data = json.loads((tmp_path / "verified.json").read_text())
    assert list(data) == ["01_a"] and data["01_a"]["colab-2026-08-19"]["torch"] == "2.11.0"


def hanging_job(folder: Path) -> tuple[str, str, str, str, str, bool]:
    """A teaching job whose second cell sleeps for 1000 s, the way a hang looks from outside."""
    path = folder / "hang.ipynb"
    cells = [new_code_cell("print('before')"), new_code_cell("import time\ntime.sleep(1000)"), new_code_cell("1")]
    nbformat.write(notebook(*cells), path)
    return "hang (teaching)", str(path), str(path), "teaching", str(ROOT / "tests" / "learner_run.py"), False


def processes_in(folder: Path) -> list[str]:
    """Processes whose working folder is ``folder`` (a kernel started for a notebook there)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if Path(proc, "cwd").resolve() == folder.resolve():
                found.append(proc.name)
        except OSError:
            continue
    return found


def test_a_cell_past_the_cell_timeout_fails_its_notebook_naming_the_cell(tmp_path: Path) -> None:
    started = time.monotonic()
    label, problems, _, _, _ = execute.run_job(hanging_job(tmp_path), cell_timeout=2, notebook_timeout=120)
    assert time.monotonic() - started < 120
    assert label == "hang (teaching)" and len(problems) == 1
    assert problems[0].startswith("the run stopped at cell 1: CellTimeoutError"), problems
    assert "time.sleep(1000)" in problems[0]


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="finds the kernel's process through /proc")
def test_a_notebook_hanging_past_its_timeout_is_stopped_with_its_kernel_and_fails(tmp_path: Path) -> None:
    # no cell timeout: only the notebook's own timeout can end this, as when the client waits on a lost message
    started = time.monotonic()
    # 12 s: the kernel (no torch in it) reaches cell 1 in about 2 s, 5 s at a load of 5; the rest is waiting
    label, problems, _, _, _ = execute.run_job(hanging_job(tmp_path), cell_timeout=0, notebook_timeout=12)
    assert time.monotonic() - started < 12 + 15
    assert problems == ["timed out: still running after 12 s, at cell 1; its process and kernel were stopped"]
    # at once: left alone, the kernel would notice its client's death itself, but only a second later
    assert processes_in(tmp_path) == [], "the kernel outlived its notebook's timeout"


def test_a_message_whose_wake_up_was_missed_is_read_within_one_poll_slice() -> None:
    """pyzmq's behaviour, simulated: the message is in the socket from the start, but the poll is not woken and only
    finds it when its own timeout runs out (then it checks the socket once more)."""
    calls: list[float] = []

    async def get_msg_woken_only_by_its_timeout(timeout: float | None = None) -> dict[str, str]:
        calls.append(timeout)  # type: ignore[arg-type]
        await asyncio.sleep(timeout)  # type: ignore[arg-type]
        return {"msg_type": "execute_reply"}

    missed: list[float] = []
    sliced = execute.get_msg_in_slices(get_msg_woken_only_by_its_timeout, missed, slice_s=0.05)
    started = time.monotonic()
    message = asyncio.run(sliced(timeout=300))  # nbclient's wait: the whole cell timeout
    assert message == {"msg_type": "execute_reply"} and time.monotonic() - started < 5
    assert calls == [0.05] and len(missed) == 1


def test_a_sliced_wait_still_ends_at_its_timeout() -> None:
    async def get_msg_never(timeout: float | None = None) -> dict[str, str]:
        await asyncio.sleep(timeout or 0)
        raise Empty

    sliced = execute.get_msg_in_slices(get_msg_never, [], slice_s=0.05)
    started = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(sliced(timeout=0.3))
    assert 0.29 < time.monotonic() - started < 5


def dying_start(marker: Path, deaths: int) -> str:
    """Kernel start-up code that writes a traceback's end to the kernel's stderr and exits before the kernel answers, the first
    ``deaths`` times it runs (counted in ``marker``): a start that lost the race for a port looks so from outside."""
    return (f"import os, sys, pathlib; m = pathlib.Path({str(marker)!r}); n = len(m.read_text()) if m.exists() else 0; "
            f"m.write_text('x' * (n + 1)); n < {deaths} and (os.write(2, b'Traceback ...\\nzmq.error.ZMQError: Address "
            f"already in use (start ' + str(n + 1).encode() + b')\\nsomething after\\n'), os._exit(1))")


def run_with_kernel_deaths(folder: Path, monkeypatch: pytest.MonkeyPatch, deaths: int) -> tuple[str, list, list]:
    """A one-cell teaching notebook run by run_one with two kernel starts at most, the first ``deaths`` of them dying
    (counted in ``folder/starts``): (label, problems, notes)."""
    monkeypatch.setattr(execute, "KERNEL_WARNING_FILTERS", dying_start(folder / "starts", deaths=deaths))
    monkeypatch.setattr(execute, "KERNEL_STARTS", 2)
    path = folder / "one-cell.ipynb"
    nbformat.write(notebook(new_code_cell("print('ran')")), path)
    label, problems, notes, _, _ = execute.run_one(("one-cell (teaching)", str(path), str(path), "teaching",
                                                    str(ROOT / "tests" / "learner_run.py"), False))
    return label, problems, notes


def test_a_kernel_that_dies_at_start_is_started_again_and_the_retry_is_noted(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "starts"
    _, problems, notes = run_with_kernel_deaths(tmp_path, monkeypatch, deaths=1)
    assert marker.read_text() == "xx", "the kernel was not started a second time"
    assert problems == [], problems
    assert notes == ["kernel start 1 of 2 died before its first cell; its stderr ended: "
                     "zmq.error.ZMQError: Address already in use (start 1)"]


def test_a_kernel_that_never_starts_fails_its_notebook_with_what_it_said(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "starts"
    _, problems, notes = run_with_kernel_deaths(tmp_path, monkeypatch, deaths=99)
    assert marker.read_text() == "xx", "tried more or fewer times than KERNEL_STARTS"
    assert len(problems) == 1 and "Kernel died before replying to kernel_info" in problems[0], problems
    assert problems[0].endswith("(the kernel's stderr ended: zmq.error.ZMQError: Address already in use (start 2))")
    assert len(notes) == 2
