"""The course in a real browser: JupyterLab in Debian's Chromium, driven by Playwright.

Each notebook is opened, run with Run All once its kernel is really connected and idle, saved, and checked for
error output; a screenshot goes to build/browser/. The saliency explorer must react to the keyboard, and the page
must never contact anything but 127.0.0.1.

Run with ``make test-browser``.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest

from labserver import ROOT, SCREENSHOTS, Lab

NOTEBOOKS = sorted(path.name for path in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


@pytest.fixture()
def outside_requests() -> list[str]:
    """URLs of requests the page made to anything but the loopback address (filled by open_notebook)."""
    return []


def wait_for(condition, timeout: float, what: str, interval: float = 0.25):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise TimeoutError(f"Timed out after {timeout:.0f} s waiting for {what}.")


def kernel_ready(lab: Lab, name: str) -> bool:
    """The notebook's kernel exists, has a browser connection and is idle (the status bar alone is not enough:
    a Run All sent before the websocket is connected is dropped)."""
    sessions = [s for s in lab.api("/api/sessions") if s["path"].endswith(name)]  # type: ignore[union-attr]
    if not sessions:
        return False
    kernel = lab.api(f"/api/kernels/{sessions[0]['kernel']['id']}")
    return kernel["execution_state"] == "idle" and kernel.get("connections", 0) >= 1  # type: ignore[index]


def shut_down_kernels(lab: Lab) -> None:
    """End every session (and its kernel) so that kernels do not pile up over the suite."""
    for session in lab.api("/api/sessions"):  # type: ignore[union-attr]
        lab.api(f"/api/sessions/{session['id']}", method="DELETE")


def run_all_and_wait(page, timeout: float) -> None:  # type: ignore[no-untyped-def]
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
    # Every code cell's prompt shows a number once it ran; '*' while queued or running.
    wait_for(lambda: page.evaluate("""() => {
        const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')];
        return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
    }"""), timeout, "Run All to finish")


def open_notebook(page, lab: Lab, name: str, outside: list[str]):  # type: ignore[no-untyped-def]
    page.on("request", lambda request: outside.append(request.url)
            if urlparse(request.url).hostname not in LOOPBACK and urlparse(request.url).scheme in ("http", "https", "ws", "wss")
            else None)
    # ?reset: start from an empty workspace, or Lab reopens every notebook of the previous tests
    page.goto(f"{lab.url}/lab/tree/{name}?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    wait_for(lambda: kernel_ready(lab, name), 60, f"the kernel of {name}")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_to_the_end_in_jupyterlab(lab: Lab, browser, name: str, outside_requests: list[str]) -> None:  # type: ignore[no-untyped-def]
    page = browser.new_page()
    try:
        open_notebook(page, lab, name, outside_requests)
        run_all_and_wait(page, timeout=240)
        page.evaluate("window.jupyterapp.commands.execute('docmanager:save')")
        saved = lab.root / name
        wait_for(lambda: all(c.get("execution_count") for c in nbformat.read(saved, 4).cells if c.cell_type == "code"),
                 30, f"{name} to be saved")
        notebook = nbformat.read(saved, 4)
        failures = [
            f"cell {i}: {o.ename}: {o.evalue}"
            for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"
            for o in cell.outputs if o.output_type == "error" and "raises-exception" not in cell.metadata.get("tags", [])
        ]
        assert not failures, f"{name} failed in JupyterLab: {failures}"
        last = [c for c in notebook.cells if c.cell_type == "code"][-1]
        assert "No hook left" in "".join(o.get("text", "") for o in last.outputs), f"{name} did not reach its last cell"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.keyboard.press("Control+End")
        page.screenshot(path=str(SCREENSHOTS / f"{Path(name).stem}.png"))
    finally:
        page.close()
        shut_down_kernels(lab)
    assert not outside_requests, f"requests left the machine: {outside_requests[:5]}"


def test_saliency_explorer_reacts_to_the_keyboard(lab: Lab, browser, outside_requests: list[str]) -> None:  # type: ignore[no-untyped-def]
    name = "06_grad_cam.ipynb"
    page = browser.new_page()
    try:
        open_notebook(page, lab, name, outside_requests)
        run_all_and_wait(page, timeout=240)
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
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        explorer.screenshot(path=str(SCREENSHOTS / "06_explorer.png"))
    finally:
        page.close()
        shut_down_kernels(lab)
    assert not outside_requests, f"requests left the machine: {outside_requests[:5]}"
