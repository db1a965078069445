"""Shared pieces of the browser suite: where Chromium is, a throw-away JupyterLab server (``jupyterlab``) serving a
learner's workspace (``serve_workspace``), a Lab page reused notebook after notebook (``LabPage``), the traffic that
left the machine (``Traffic``), and Run All in a page that fails at once on a cell that must not fail (``run_all``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlparse

import nbformat
import psutil
import pytest
from chromium_path import CHROMIUM
from learner_run import cell_problem

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SCREENSHOTS = ROOT / "build" / "browser"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
log = logging.getLogger("labserver")  # pytest shows these lines under a failed test ("Captured log")
log.setLevel(logging.INFO)


def require_browser(*tools: tuple[Path, str]) -> None:
    """Skip, or fail when ``make test`` asked for the browser (``COURSE_REQUIRE_BROWSER``), if Chromium or one of
    ``tools`` ((path, how to install it)) is missing."""
    needed = [(CHROMIUM, "apt-get install chromium-headless-shell"), *tools]
    missing = [f"{path} ({install})" for path, install in needed if not path.exists()]
    if missing:
        message = "Missing for the browser tests: " + "; ".join(missing)
        if os.environ.get("COURSE_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)


def serve_workspace(dest: Path) -> Path:
    """A learner's workspace in ``dest`` as ``make lab`` makes it: the learner edition (stubs, no outputs, so nothing
    can pass on a stored output) and ``complete/``."""
    from course_utils.machinery.workspace import prepare_workspace

    prepare_workspace(dest)
    for path in dest.glob("[0-9][0-9]_*.ipynb"):
        notebook = nbformat.read(path, 4)
        stale = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
        assert not stale, f"{path.name} in the workspace holds outputs in cells {stale}: they would count as this run's"
    return dest


@dataclass
class Lab:
    """A running JupyterLab: its base URL, token, and the folder it serves."""

    url: str
    token: str
    root: Path
    _shutting_down: list[threading.Thread] = field(default_factory=list, repr=False)

    def api(self, path: str, method: str = "GET", timeout: float = 10) -> Any:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def sessions(self, path: str) -> list[dict[str, Any]]:
        """The sessions of the notebook at ``path`` (relative to the served folder)."""
        return [s for s in self.api("/api/sessions") if s["path"] == path]

    def shut_down_later(self, path: str) -> None:
        """End the sessions (and kernels) of the notebook at ``path`` so kernels do not pile up; in a thread: a kernel
        takes seconds to exit, the next notebook need not wait."""
        def shut_down() -> None:
            with contextlib.suppress(OSError):  # the server stops its remaining kernels anyway
                for session in self.sessions(path):
                    with contextlib.suppress(urllib.error.HTTPError):  # already gone
                        self.api(f"/api/sessions/{session['id']}", method="DELETE", timeout=30)

        thread = threading.Thread(target=shut_down, name=f"shut down {path}", daemon=True)
        thread.start()
        self._shutting_down.append(thread)

    def wait_shut_down(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        for thread in self._shutting_down:
            thread.join(max(0.0, deadline - time.monotonic()))


def _stop(server: subprocess.Popen[bytes]) -> None:
    """Stop a server started by ``jupyterlab()``, then any kernel of it that outlived it (kernels run in their own
    session, so the server's process group does not hold them)."""
    kernels = psutil.Process(server.pid).children() if server.poll() is None else []  # unreaped: its pid is its own
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGTERM)  # the server shuts its kernels down on SIGTERM
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
    _gone, alive = psutil.wait_procs(kernels, timeout=10)
    for kernel in alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(kernel.pid, signal.SIGKILL)  # a kernel is its session's leader: its own children go too


def _die_with_parent() -> None:
    """In the server's process, before it starts: Linux sends it SIGTERM when the test process dies, even by SIGKILL
    (PR_SET_PDEATHSIG), so no server outlives a killed test run."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


@contextlib.contextmanager
def jupyterlab(base: Path, root: Path, attempts: int = 3, start_timeout: float = 60) -> Iterator[Lab]:
    """Run JupyterLab on 127.0.0.1 serving ``root``, with its config, settings and runtime files under ``base``; stop
    it and its kernels on exit.

    ``--port=0`` lets the server pick a free port and ``port_retries=0`` keeps it there, so our URL is our server.
    It still closes its probe socket before it listens: a server that lost that race exits ("port ... is not
    available") and is started again, ``attempts`` times.
    """
    settings = base / "app-settings"
    settings.mkdir(parents=True, exist_ok=True)
    (settings / "overrides.json").write_text(json.dumps({
        "@jupyterlab/apputils-extension:notification": {"checkForUpdates": False, "fetchNews": "false"},
    }))
    runtime = base / "runtime"
    env = dict(os.environ)
    env.pop("JUPYTER_PORT", None)
    env.update({
        "JUPYTER_CONFIG_DIR": str(base / "config"),  # none of the user's Jupyter configuration
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTERLAB_SETTINGS_DIR": str(base / "user-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",  # the kernel is this venv's Python
    })
    token = secrets.token_hex(16)
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", "--port=0", "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", f"--LabApp.app_settings_dir={settings}",
        "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    for attempt in range(1, attempts + 1):
        log_path = base / f"lab-{attempt}.log"
        with open(log_path, "w") as log:
            server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                      preexec_fn=_die_with_parent)
        try:
            lab = _wait_until_serving(server, runtime / f"jpserver-{server.pid}.json", log_path, token, root,
                                      start_timeout)
            if lab is not None:
                try:
                    yield lab
                finally:
                    lab.wait_shut_down()
                return
        finally:
            _stop(server)
    raise RuntimeError(f"JupyterLab found no free port {attempts} times; see {log_path}")


def _wait_until_serving(server: subprocess.Popen[bytes], info: Path, log: Path, token: str, root: Path,
                        timeout: float) -> Lab | None:
    """The Lab once it answers; None if the server exited because its port was taken (start it again)."""
    deadline = time.monotonic() + timeout
    lab: Lab | None = None
    while time.monotonic() < deadline:
        if server.poll() is not None:
            if re.search(r"port \d+ is (not available|already in use)", log.read_text(errors="replace")):
                return None
            break
        if lab is None and info.exists():
            with contextlib.suppress(ValueError, OSError):  # the file may be half written
                port = json.loads(info.read_text())["port"]
                lab = Lab(f"http://127.0.0.1:{port}", token, root)
        if lab is not None:
            try:
                lab.api("/api/status", timeout=5)
                return lab
            except urllib.error.HTTPError:  # our URL answers with another server: impossible with port_retries=0
                break
            except OSError:
                pass
        time.sleep(0.25)
    raise RuntimeError(f"JupyterLab did not start within {timeout:.0f} s; see {log}")


# -- a notebook in the page ------------------------------------------------------------------------------------------

@dataclass
class Traffic:
    """Every request and websocket of ``page`` whose host is not the loopback address (``outside``), and the
    loopback websockets (``local_websockets``: proof that websockets are seen at all)."""

    page: Any
    outside: list[str] = field(default_factory=list)
    local_websockets: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.page.on("request", lambda request: self._seen(request.url))
        self.page.on("websocket", lambda websocket: self._seen(websocket.url, websocket=True))

    def _seen(self, url: str, websocket: bool = False) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https", "ws", "wss"):
            return  # data:, blob: and the like stay in the page
        if parsed.hostname not in LOOPBACK:
            self.outside.append(url)
        elif websocket:
            self.local_websockets.append(url)


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(interval)
    raise TimeoutError(f"Timed out after {timeout:.0f} s waiting for {what}.")


# The notebook panel of `path` and its cells, read from JupyterLab's models (not the DOM: a windowed notebook does
# not render every cell). One snapshot per poll; only what the checks need crosses over, and a cell before
# `detailFrom` that has finished sends only its index and state (its outputs were read once it finished: a long
# notebook is not serialised again on every poll). Only stream and error outputs are read, never images.
_SNAPSHOT = """([path, detailFrom]) => {
  const app = window.jupyterapp;
  if (!app) return null;  // the page is still loading JupyterLab
  const panel = [...app.shell.widgets('main')].find(w => w.context && w.context.path === path);
  if (!panel || !panel.content.model) return null;
  const session = panel.sessionContext.session;
  const kernel = session ? session.kernel : null;
  const cells = [];
  const list = panel.content.model.cells;
  const text = o => Array.isArray(o.text) ? o.text.join('') : o.text;
  for (let i = 0; i < list.length; i++) {
    const cell = list.get(i);
    if (cell.type !== 'code' || !cell.sharedModel.getSource().trim()) continue;  // Lab does not run empty cells
    const state = {index: i, count: cell.executionCount, running: cell.executionState === 'running'};
    cells.push(state);
    if (i < detailFrom && state.count != null && !state.running) continue;
    const outputs = [];
    for (let j = 0; j < cell.outputs.length; j++) {
      const output = cell.outputs.get(j);
      if (output.type === 'stream' || output.type === 'error') outputs.push(output.toJSON());
    }
    const stdout = outputs.filter(o => o.output_type === 'stream' && o.name === 'stdout').map(text).join('');
    Object.assign(state, {
      tags: cell.getMetadata('tags') || [],
      first_line: cell.sharedModel.getSource().split('\\n')[0].slice(0, 100),
      errors: outputs.filter(o => o.output_type === 'error').map(o => ({ename: o.ename, evalue: o.evalue,
        traceback: (o.traceback || []).join('\\n').replace(/\\u001b\\[[0-9;]*m/g, '').slice(-600)})),
      stderr: outputs.filter(o => o.output_type === 'stream' && o.name === 'stderr').map(text).join('').slice(0, 600),
      // what tests/learner_run.cell_problem reads of stdout: check()'s failed verdicts ("still the stub" is one)
      check_lines: stdout.split('\\n').filter(line => line.startsWith('✗ Exercise')),
      stdout_tail: stdout.slice(-300),
    });
  }
  return {kernel: kernel ? kernel.status : null, connection: kernel ? kernel.connectionStatus : null,
          cells: cells};
}"""


class NotebookFailed(AssertionError):
    """A notebook run in the browser failed; ``cells`` is the last snapshot of its code cells."""

    def __init__(self, message: str, cells: list[dict[str, Any]]) -> None:
        super().__init__(message)
        self.cells = cells


def _describe(path: str, cell: dict[str, Any]) -> str:
    return f"{path}, cell {cell['index']} (`{cell['first_line']}`)"


def evaluate(page: Any, script: str, arg: Any = None, timeout: float = 30) -> Any:
    """``page.evaluate(script, arg)`` within ``timeout`` s (Playwright's own waits forever on a stuck renderer;
    ``wait_for_function`` gives up). The result is serialised in the same turn as ``script`` ran, not later."""
    handle = page.wait_for_function(f"(arg) => [JSON.stringify(({script})(arg)) ?? null]", arg=arg,
                                    timeout=timeout * 1000, polling=100)
    try:
        text = handle.json_value()[0]
    finally:
        handle.dispose()
    return None if text is None else json.loads(text)


def snapshot(page: Any, path: str, detail_from: int = 0) -> dict[str, Any] | None:
    """The kernel's state and the code cells of ``path``: every cell's index, execution count and running flag,
    and the outputs the checks read for every cell from ``detail_from`` on and for any cell not finished."""
    return evaluate(page, _SNAPSHOT, [path, detail_from])


def kernel_ready(page: Any, lab: Lab, path: str) -> bool:
    """The notebook's kernel is idle and its websocket connected, as the page and the server both see it (a cell
    sent before the kernel's websocket is connected is dropped)."""
    state = snapshot(page, path)
    if not state or state["kernel"] != "idle" or state["connection"] != "connected":
        return False
    sessions = lab.sessions(path)
    if not sessions:
        return False
    kernel = lab.api(f"/api/kernels/{sessions[0]['kernel']['id']}")
    return kernel["execution_state"] == "idle" and kernel.get("connections", 0) >= 1


_OPEN = """(path) => { window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'})
                         .catch(error => console.error('open:', error)); }"""
_CLOSE = """(path) => {
  for (const w of [...window.jupyterapp.shell.widgets('main')]) {
    if (w.context && w.context.path === path) { w.context.model.dirty = false; w.dispose(); }
  }
}"""


class LabPage:
    """A Chromium page showing JupyterLab, reused notebook after notebook (a fresh one after a failure)."""

    def __init__(self, browser: Any, lab: Lab, workspace: str | None = None) -> None:
        self.browser, self.lab = browser, lab
        # Two pages on one workspace: Lab sends the second to a new workspace with a full reload. Name another.
        self.workspace = f"workspaces/{quote(workspace)}/" if workspace else ""
        self.page: Any = None
        self.traffic: Traffic | None = None
        self.marks = (0, 0)  # len(traffic.outside), len(traffic.local_websockets) before the last open()

    def open(self, path: str, timeout: float = 90) -> Any:
        """Open ``path`` and wait until its kernel is ready; returns the page."""
        if self.page is None or self.page.is_closed():
            self.page = self.browser.new_page()
            self.traffic = Traffic(self.page)
            self.marks = (0, 0)
            # ?reset: start from an empty workspace, or Lab reopens the notebooks of earlier runs
            log.info("loading JupyterLab in a new page for %s", path)
            self.page.goto(f"{self.lab.url}/lab/{self.workspace}tree/{quote(path)}?reset&token={self.lab.token}",
                           timeout=timeout * 1000)
        else:
            assert self.traffic is not None
            self.marks = (len(self.traffic.outside), len(self.traffic.local_websockets))
            log.info("opening %s in the page", path)
            evaluate(self.page, _OPEN, path)
        start = time.monotonic()
        wait_for(lambda: kernel_ready(self.page, self.lab, path), timeout,
                 f"the kernel of {path} to be idle and connected", interval=0.5)
        log.info("%s open, kernel ready after %.1f s", path, time.monotonic() - start)
        return self.page

    def close(self, path: str, failed: bool) -> None:
        """Close the notebook without saving (or the whole page after a failure); its kernel ends in the background."""
        try:
            if failed or self.page is None:
                self.discard()
            else:
                try:
                    evaluate(self.page, _CLOSE, path)
                except Exception:
                    self.discard()
                    raise
        finally:
            self.lab.shut_down_later(path)

    def discard(self) -> None:
        if self.page is not None and not self.page.is_closed():
            self.page.close()
        self.page = None


_RUN_ALL = """(path) => {
  const app = window.jupyterapp;
  const panel = [...app.shell.widgets('main')].find(w => w.context && w.context.path === path);
  app.commands.execute('notebook:run-all-cells', {widgetId: panel.id}).catch(error => console.error('Run All:', error));
}"""


def _judge_finished(path: str, cells: list[dict[str, Any]], final: dict[int, dict[str, Any]]) -> None:
    """Keep each cell that has just finished in ``final``; raise ``NotebookFailed`` for one that failed."""
    for cell in cells:
        if cell["count"] is None or cell["running"] or cell["index"] in final:
            continue
        final[cell["index"]] = cell
        errors = [(error["ename"], error["evalue"] if error["ename"] else error["traceback"])
                  for error in cell["errors"]]
        problem = cell_problem(cell["tags"], errors, "\n".join(cell["check_lines"]))
        if problem:
            raise NotebookFailed(f"{_describe(path, cell)}: {problem}"
                                 + (f"\nstderr: {cell['stderr']}" if cell["stderr"] else ""), cells)


def run_all(page: Any, path: str, timeout: float = 300, stall: float = 120, stopped: float = 10,
            interval: float = 0.5) -> list[dict[str, Any]]:
    """Run All in the open notebook ``path``, as a learner catching up does; return its code cells' final state.

    Run All is started, not awaited, and the cells polled every ``interval`` s. ``NotebookFailed`` names the
    notebook, the cell index (nbformat's) and the error as soon as a cell fails as ``learner_run.cell_problem`` does
    not allow, when Run All stopped with cells not run (kernel idle, nothing running for ``stopped`` s: an untagged
    cell raised), when the kernel dies, when no cell finishes for ``stall`` s, or after ``timeout`` s. (``stopped``
    was 3 s: twice, under a load of 10 and in a cold make test beside other work, the page showed the kernel idle with
    nothing running for over 3 s between cells 48 and 51 of notebook 03, where nothing fails: it passed in every
    other run.)
    """
    evaluate(page, _RUN_ALL, path)
    start = last_progress = time.monotonic()
    log.info("Run All started in %s", path)
    done_before, idle_since = -1, None
    cells: list[dict[str, Any]] = []
    final: dict[int, dict[str, Any]] = {}  # each finished cell as read once it had finished (checked then)
    while True:
        detail_from = next((cell["index"] for cell in cells if cell["index"] not in final), 1 << 30) if cells else 0
        try:
            state = snapshot(page, path, detail_from)
        except Exception as error:  # Playwright's TimeoutError, a crashed page
            running = next((_describe(path, c) for c in cells if c["count"] is None), path)
            raise NotebookFailed(f"{path}: the page stopped answering while running {running}: "
                                 f"{type(error).__name__}: {str(error).splitlines()[0]}", cells) from error
        if state is None:
            raise NotebookFailed(f"{path} is no longer open in JupyterLab.", cells)
        cells = [final.get(cell["index"], cell) for cell in state["cells"]]
        _judge_finished(path, cells, final)
        pending = [cell for cell in cells if cell["count"] is None or cell["running"]]
        if not pending:
            log.info("Run All finished in %s: %d code cells in %.1f s", path, len(cells), time.monotonic() - start)
            return cells
        now = time.monotonic()
        if state["kernel"] in ("dead", "restarting", "autorestarting"):
            raise NotebookFailed(f"{path}: the kernel is {state['kernel']} while running {_describe(path, pending[0])}",
                                 cells)
        if state["kernel"] == "idle" and not any(cell["running"] for cell in cells):
            idle_since = idle_since or now
            if now - idle_since > stopped:
                ran = [cell for cell in cells if cell["count"] is not None]
                after = f" after {_describe(path, ran[-1])}" if ran else ""
                raise NotebookFailed(f"{path}: Run All stopped{after}: {_describe(path, pending[0])} and "
                                     f"{len(pending) - 1} more code cells never ran", cells)
        else:
            idle_since = None
        done = len(cells) - len(pending)
        if done != done_before:
            log.info("%s: %d/%d code cells done after %.1f s", path, done, len(cells), now - start)
            done_before, last_progress = done, now
        if now - last_progress > stall or now - start > timeout:
            why = f"no cell finished for {now - last_progress:.0f} s" if now - last_progress > stall else \
                f"Run All took more than {timeout:.0f} s"
            raise NotebookFailed(f"{path}: {why}; {done}/{len(cells)} code cells done, waiting for "
                                 f"{_describe(path, pending[0])} (kernel {state['kernel']}, "
                                 f"websocket {state['connection']})", cells)
        time.sleep(interval)
