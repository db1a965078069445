"""The course in a real browser: every learner notebook run in JupyterLab (Debian's Chromium, Playwright).

JupyterLab serves a learner's workspace as ``make lab`` makes it (learner edition: stubs, no outputs). Each notebook
is opened and, once its kernel is connected and idle, run with Run All as a learner who catches up does: a cell that
fails, other than a stub or a cell tagged ``raises-exception`` (tests/learner_run.py), or a Run All that stops early,
fails the test at once, naming the cell. The saved notebook must hold this run's outputs, its last cell printing what
the stored one's does; a screenshot goes to build/browser/. The saliency explorer (06) and the replay stepper (02)
must react to the keyboard, on the same runs; no page may contact anything but 127.0.0.1, websockets included.
The solutions run under strict nbval; ``make test-browser`` runs this suite.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import pytest
from labserver import ROOT, SCREENSHOTS, Lab, LabPage, NotebookFailed, Traffic, evaluate, run_all, wait_for
from learner_run import EXPECTED_ERROR_TAG, STUB_TAG, learner_run_problems
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from tools.build_editions import course_notebooks

NOTEBOOKS = [path.name for path in course_notebooks()]
GRAD_CAM = "06_grad_cam.ipynb"  # its saliency explorer is tested on the same run
LIFECYCLE = "02_hook_lifecycle.ipynb"  # its replay stepper (a FigureExplorer) is driven on the same run
# Last resort: a test that hangs anyway is interrupted (signal method: the fixtures still stop server and browser).
pytestmark = pytest.mark.timeout(480)


@dataclass
class Opened:
    """A notebook open in a page, the page's traffic (from where this notebook's part of it starts), its cells."""

    page: Any
    traffic: Traffic
    path: str
    cells: list[dict[str, Any]] = field(default_factory=list)
    outside_before: int = 0
    websockets_before: int = 0

    def assert_stayed_local(self) -> None:
        new = self.traffic.local_websockets[self.websockets_before:]
        kernel_channels = [url for url in new if "/api/kernels/" in url]
        assert kernel_channels, "no kernel websocket to 127.0.0.1 seen for this notebook: websockets were not watched"
        outside = self.traffic.outside[self.outside_before:]
        assert not outside, f"requests or websockets left the machine: {outside[:5]}"


@contextmanager
def opened(lab_page: LabPage, path: str) -> Iterator[Opened]:
    """``path`` open in ``lab_page`` with its kernel ready; closed afterwards, its kernel ended."""
    failed = True
    try:
        page = lab_page.open(path)
        traffic = lab_page.traffic
        assert traffic is not None
        notebook = Opened(page, traffic, path, outside_before=lab_page.marks[0], websockets_before=lab_page.marks[1])
        yield notebook
        failed = False
    finally:
        lab_page.close(path, failed)


@pytest.fixture(scope="module")
def grad_cam(lab: Lab, browser: Any) -> Iterator[Opened]:
    """06 run once, in a page of its own, for its notebook test and the explorer test (the slowest notebook)."""
    own = LabPage(browser, lab, workspace="grad-cam")
    try:
        with opened(own, GRAD_CAM) as notebook:
            notebook.cells = run_all(notebook.page, GRAD_CAM)
            yield notebook
    finally:
        own.discard()


def check_saved_run(lab: Lab, notebook: Opened) -> None:
    """Save, then check the file on disk: every code cell ran here (the served workspace had no outputs), only the
    stubs and tagged cells failed, the last cell printed what the stored notebook's does; screenshot."""
    name, page = notebook.path, notebook.page
    evaluate(page, """(path) => {
      const panel = [...window.jupyterapp.shell.widgets('main')].find(w => w.context && w.context.path === path);
      panel.context.save().catch(error => console.error('save:', error));
    }""", name)
    saved = lab.root / name

    def saved_run() -> nbformat.NotebookNode | None:
        try:
            nb = nbformat.read(saved, 4)
        except (OSError, ValueError):  # half written
            return None
        return nb if all(c.execution_count for c in nb.cells if c.cell_type == "code" and c.source.strip()) else None

    ran = wait_for(saved_run, 30, f"{name} to be saved with its outputs")
    problems = learner_run_problems(ran, nbformat.read(ROOT / "notebooks" / name, 4))
    assert not problems, f"{name}, learner edition in JupyterLab:\n" + "\n".join(problems)
    page.keyboard.press("Control+End")
    page.screenshot(path=str(SCREENSHOTS / f"{Path(name).stem}.png"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_learner_notebook_runs_in_jupyterlab_with_only_its_stubs_failing(
        lab: Lab, lab_page: LabPage, request: pytest.FixtureRequest, name: str) -> None:
    if name == GRAD_CAM:
        notebook = request.getfixturevalue("grad_cam")
        check_saved_run(lab, notebook)
    else:
        with opened(lab_page, name) as notebook:
            notebook.cells = run_all(notebook.page, name)
            check_saved_run(lab, notebook)
            if name == LIFECYCLE:
                drive_the_replay_stepper(notebook)
    notebook.assert_stayed_local()


def drive_the_replay_stepper(notebook: Opened) -> None:
    """Notebook 02's replay (course_utils.widgets.FigureExplorer): the figure is in the page with its alt text, and
    an arrow key on the slider's handle, as a learner presses it, shows the step before (no mouse)."""
    page = notebook.page
    stepper = page.locator(".widget-vbox").filter(has=page.locator(".widget-hslider")).last
    stepper.scroll_into_view_if_needed()
    image = stepper.locator(".jp-OutputArea-output img").last
    image.wait_for(timeout=60_000)
    first = image.get_attribute("alt") or ""
    assert first.startswith("Step 9 of 9 of one backward pass"), f"the replay's figure has no alt text: {first!r}"
    stepper.locator(".noUi-handle, .ui-slider-handle").first.focus()
    page.keyboard.press("ArrowLeft")
    wait_for(lambda: (image.get_attribute("alt") or "").startswith("Step 8 of 9"), 60,
             "the replay to step back to step 8 (its alt text to say so)")
    assert "the ringed dot fires now: post-accumulate hook on x" in image.get_attribute("alt")
    stepper.screenshot(path=str(SCREENSHOTS / "02_replay.png"))


def test_saliency_explorer_reacts_to_the_keyboard(grad_cam: Opened) -> None:
    page = grad_cam.page
    explorer = page.locator(".widget-vbox").filter(has=page.locator("select")).last
    explorer.scroll_into_view_if_needed()
    image = explorer.locator(".jp-OutputArea-output img").last
    image.wait_for(timeout=60_000)
    before_image, before_title = image.get_attribute("src"), explorer.locator("select").nth(3).input_value()
    method = explorer.locator("select").nth(3)  # photo, class, layer, method
    method.click()  # as a person would: open the dropdown, arrow down, Enter (Grad-CAM -> Guided Backprop)
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    wait_for(lambda: image.get_attribute("src") != before_image, 60, "the explorer to redraw")
    assert method.input_value() != before_title
    layer = explorer.locator("select").nth(2)
    assert layer.is_disabled()  # Guided Backprop has no layer to choose
    photo = explorer.locator("select").nth(0)
    shown_before = image.get_attribute("src")
    photo.click()
    photo.select_option(index=1)  # a click on the dropdown, then a choice
    wait_for(lambda: image.get_attribute("src") != shown_before, 60, "the explorer to show the new photo")
    explorer.screenshot(path=str(SCREENSHOTS / "06_explorer.png"))
    grad_cam.assert_stayed_local()


def broken_notebook() -> nbformat.NotebookNode:
    """Cell 1 raises but is tagged, cell 2 is an exercise stub that raises (the run must go on past both), cell 4
    raises for real, cell 5 must never run."""
    nb = new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nb.cells = [
        new_markdown_cell("# Broken on purpose"),
        new_code_cell("raise KeyError('expected here')", metadata={"tags": [EXPECTED_ERROR_TAG]}),
        new_code_cell("raise NotImplementedError('Exercise 99.1: your code goes here')",
                      metadata={"tags": [STUB_TAG, EXPECTED_ERROR_TAG]}),  # as the learner edition tags a stub
        new_code_cell("print('cell 3 ran')"),
        new_code_cell("raise ValueError('deliberate failure in cell 4')"),
        new_code_cell("print('cell 5 must never run')"),
    ]
    return nb


@pytest.mark.timeout(180)
def test_a_cell_that_raises_fails_the_run_within_a_minute_naming_it(lab: Lab, lab_page: LabPage) -> None:
    path = "fixtures/broken_in_cell_4.ipynb"  # inside the served temporary workspace, never in notebooks/
    (lab.root / "fixtures").mkdir(exist_ok=True)
    nbformat.write(broken_notebook(), lab.root / path)
    with opened(lab_page, path) as notebook:
        start = time.monotonic()
        with pytest.raises(NotebookFailed) as failure:
            run_all(notebook.page, path)
        seconds = time.monotonic() - start
    message = str(failure.value)
    print(f"fail-fast: {seconds:.1f} s after Run All: {message}")
    assert seconds < 60, f"the failure took {seconds:.0f} s"
    assert message.startswith(f"{path}, cell 4 ")
    assert "ValueError: deliberate failure in cell 4" in message
    cells = {cell["index"]: cell for cell in failure.value.cells}
    assert cells[1]["errors"] and cells[1]["errors"][0]["ename"] == "KeyError"  # the tagged cell raised ...
    assert cells[2]["errors"] and cells[2]["errors"][0]["ename"] == "NotImplementedError"  # ... and the stub ...
    assert cells[3]["count"] is not None  # ... and the run went on past both
    assert cells[5]["count"] is None and not cells[5]["stdout_tail"]  # nothing ran after the failure


@pytest.mark.timeout(180)
def test_a_run_all_that_stops_early_fails_naming_the_first_cell_not_run(lab: Lab, lab_page: LabPage) -> None:
    # A stub without the raises-exception tag (as the learner edition had before it tagged them): its error is an
    # allowed one, but Run All stops there, and the cells after it must not pass for "still running".
    path = "fixtures/untagged_stub.ipynb"
    (lab.root / "fixtures").mkdir(exist_ok=True)
    nb = broken_notebook()
    nb.cells = [nb.cells[0], new_code_cell("raise NotImplementedError('Exercise 99.1: your code goes here')",
                                           metadata={"tags": [STUB_TAG]}), new_code_cell("print('never')")]
    nbformat.write(nb, lab.root / path)
    with opened(lab_page, path) as notebook:
        start = time.monotonic()
        with pytest.raises(NotebookFailed, match=r"Run All stopped after .*cell 1 .*: .*cell 2 .*never ran"):
            run_all(notebook.page, path)
        assert time.monotonic() - start < 60
