"""Fixtures for the browser suite: a throw-away JupyterLab server and Debian's Chromium driven by Playwright."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from labserver import CHROMIUM, CHROMIUM_FLAGS, ROOT, Lab, free_port


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    if not CHROMIUM.exists():
        message = f"Chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install chromium)."
        if os.environ.get("COURSE_REQUIRE_BROWSER"):
            pytest.fail(message)  # make test-browser asked for the browser: do not pass silently
        pytest.skip(message)
    base = tmp_path_factory.mktemp("lab")
    root = base / "course"
    shutil.copytree(ROOT / "notebooks", root)  # Lab saves what it runs: never touch the stored notebooks
    settings = base / "app-settings"
    settings.mkdir()
    (settings / "overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
    }))
    config = base / "config"
    config.mkdir()
    lab_config = {"LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}}
    for name in ("jupyter_lab_config.json", "jupyter_server_config.json"):
        (config / name).write_text(json.dumps(lab_config))
    env = dict(os.environ)
    env.update({
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "user-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # the kernel is this venv's Python
    })
    port, token = free_port(), secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", f"--LabApp.app_settings_dir={settings}",
        "--LabApp.expose_app_in_browser=True",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    log = open(base / "lab.log", "w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    lab = Lab(f"http://127.0.0.1:{port}", token, root)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                lab.api("/api/status")
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"JupyterLab did not start; see {base / 'lab.log'}") from None
                time.sleep(0.5)
        yield lab
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the server and the kernels it started
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


@pytest.fixture(scope="session")
def browser(lab: Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
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
            context.close()
