"""The compat run's verdicts (tools/compat/execute.py) fire on what they are meant to, and Colab's snapshot says where
it came from and how to update it (its runs' timeouts and kernel restarts are the runner's: test_notebook_runner.py).
The run itself is `make test-compat`, which .ci/run runs after `make test` and `make nbval-portable`."""

from __future__ import annotations

import dataclasses
import json
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tools.compat import execute, run

ROOT = Path(__file__).resolve().parent.parent

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("tools/compat/*.json", "tools/compat/*.txt")


def test_deprecations_from_torch_or_course_code_are_debt_and_others_are_not() -> None:
    lines = (
        "/x/site-packages/torch/nn/modules/module.py:12: FutureWarning: `foo` is deprecated\n  foo()\n"
        "/tmp/ipykernel_123/456.py:3: DeprecationWarning: the notebook calls a deprecated torch API\n"
        "/x/site-packages/course_utils/saliency.py:9: DeprecationWarning: course code\n"
        "/x/site-packages/jupyter_client/session.py:203: DeprecationWarning: datetime.utcnow() is deprecated\n"
        "/x/site-packages/torch/foo.py:1: UserWarning: not a deprecation\n"
    )
    stderr = new_output("stream", name="stderr", text=lines)
    debt, other = execute.warnings_seen(new_notebook(cells=[new_code_cell("x", outputs=[stderr])]))
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
    problems = execute.teaching_problems(new_notebook(cells=cells))
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


def test_the_runner_loads_once_when_the_workers_ask_for_it_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """``make test-compat`` runs its jobs in threads, and each asks for the runner: the first asks race (CI failed
    with "'NoneType' object has no attribute '__dict__'" in the runner's @dataclass when two executed it at once)."""
    path = ROOT / "tools" / "notebook_runner.py"
    monkeypatch.delitem(sys.modules, f"course_checkout_{path.stem}", raising=False)
    start = threading.Barrier(6)

    def load() -> ModuleType:
        start.wait()
        return execute.load(path)

    with ThreadPoolExecutor(6) as pool:
        modules = list(pool.map(lambda _: load(), range(6)))
    assert all(module is modules[0] for module in modules)
    assert dataclasses.is_dataclass(modules[0].NotebookRun)


def test_a_job_runs_through_the_course_runner_and_judge_loaded_by_path(tmp_path: Path) -> None:
    """As in the compat environment, where the checkout is not importable: both modules are loaded by path."""
    path = tmp_path / "nb.ipynb"
    nbformat.write(new_notebook(cells=[new_code_cell("print('✗ Exercise 01.2: not yet.')")]), path)
    judge = execute.load(ROOT / "tests" / "learner_run.py")
    label, problems, notes, warnings, _ = execute.run_job(("nb (teaching)", str(path), str(path), "teaching"), judge,
                                                          cell_timeout=60, notebook_timeout=120)
    assert (label, problems, notes, warnings) == ("nb (teaching)",
                                                  ["cell 0: a check failed: ✗ Exercise 01.2: not yet."],
                                                  [], [])
