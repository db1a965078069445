"""Fixtures for the browser suite: a throw-away JupyterLab server and Debian's Chromium driven by Playwright, one
of each per test module (module scope, not session: Playwright's sync API cannot run twice at once in a thread, so
a browser kept for the whole session would break the next module's own ``sync_playwright()``). Both are stopped at
the module's end, also when a test fails or times out (pytest-timeout's signal method raises in the test, so these
teardowns still run)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
from labserver import CHROMIUM, CHROMIUM_FLAGS, Lab, LabPage, jupyterlab, require_browser, serve_workspace


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """JupyterLab on 127.0.0.1 serving a learner's workspace (the learner edition, no outputs), as ``make lab`` does."""
    require_browser()
    base = tmp_path_factory.mktemp("lab")

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # A SIGTERM (timeout(1), CI cancelling) ends the run like Ctrl-C: pytest still tears the fixtures down.
    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        with jupyterlab(base, serve_workspace(base / "workspace")) as running:
            yield running
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="module")
def browser(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
            viewport={"width": 1400, "height": 900},
        )
        try:
            yield context
        finally:
            try:
                context.close()
            except PlaywrightError:  # the browser is gone already (its driver got the same SIGTERM)
                pass


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Chromium launched by Playwright, for pages that need no JupyterLab (the hub, the website, the slides)."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture(scope="module")
def lab_page(lab: Lab, browser: Any) -> Iterator[LabPage]:
    """One JupyterLab page shared by the notebook tests (a fresh one after a failure)."""
    shared = LabPage(browser, lab)
    try:
        yield shared
    finally:
        shared.discard()
