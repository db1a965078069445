"""The classroom: ``make hub``'s JupyterHub with learners in a real browser (Debian's Chromium, Playwright).

One hub for the module, started by ``tools/hub/serve.py`` exactly as ``make hub`` starts it, on free loopback ports,
with its own state, homes and system group (tests/browser/hubserver.py); everything it started is stopped and every
system user it created is removed at the end, also when a test fails.

- the hub listens on 127.0.0.1 only;
- a learner who is not approved yet, or who types a wrong password, gets no server (no account, no process);
- three learners log in at once, each opens ``00_start_here.ipynb`` from their own workspace (the learner edition)
  and runs it cell by cell, as a learner does, to its last cell ("No hook left"): the exercise cells still hold their
  stubs, and ``check()`` must say so in each of them; no other cell may fail except those the course marks
  ``raises-exception``;
- learner A cannot open learner B's files through the hub's URLs with A's session, nor on disk;
- Ctrl-C stops the hub, the proxy, the culler, every learner's server and every kernel.

Needs root (each learner is a system user); run with ``make test-browser``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest

from hubserver import ThrowAwayHub
from labserver import CHROMIUM, CHROMIUM_FLAGS, ROOT, SCREENSHOTS
from learner_run import learner_run_problems

pytestmark = pytest.mark.timeout(900)

NOTEBOOK = "00_start_here.ipynb"  # the shortest: every notebook's learner edition runs in tests/browser/test_jupyterlab.py


def need_browser_and_root() -> None:
    if not CHROMIUM.exists():
        message = f"Chromium not found at {CHROMIUM}: install Debian's chromium (apt-get install chromium)."
        if os.environ.get("COURSE_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    if os.geteuid() != 0:
        pytest.skip("the classroom tests need root: each learner is a separate system user (CI runs as root)")


@dataclass
class Learner:
    name: str
    password: str
    context: object = None
    page: object = None
    notes: dict[str, object] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        import pwd

        return Path(pwd.getpwnam(self.name).pw_dir)


@pytest.fixture(scope="module")
def hub() -> Iterator[ThrowAwayHub]:
    need_browser_and_root()

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)  # a cancelled run still removes the learners it created
    try:
        with ThrowAwayHub() as running:
            running.start()
            yield running
            running.stop(timeout=30)  # if the Ctrl-C test did not run; cleanup() ends anything left, by pid
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="module")
def chromium(hub: ThrowAwayHub) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def new_page(browser, outside: list[str]):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.on("request", lambda request: outside.append(request.url)
            if not re.match(r"^(https?|wss?)://(127\.0\.0\.1|localhost)(:\d+)?/", request.url)
            and re.match(r"^(https?|wss?)://", request.url) else None)
    return context, page


def sign_up(page, hub: ThrowAwayHub, learner: Learner) -> str:  # type: ignore[no-untyped-def]
    page.goto(f"{hub.url}/hub/signup")
    page.fill("#username_input", learner.name)
    page.fill("#password_input", learner.password)
    page.fill("#password_confirmation_input", learner.password)
    page.click("#signup_submit")
    page.wait_for_load_state()
    return page.inner_text("body")


def log_in(page, hub: ThrowAwayHub, name: str, password: str, next_url: str = "") -> None:  # type: ignore[no-untyped-def]
    page.goto(f"{hub.url}/hub/login" + (f"?next={next_url}" if next_url else ""))
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit", no_wait_after=True)


@dataclass
class Room:
    hub: ThrowAwayHub
    browser: object
    learners: dict[str, Learner]
    instructor: Learner
    outside: list[str]


@pytest.fixture(scope="module")
def room(hub: ThrowAwayHub, chromium) -> Iterator[Room]:  # type: ignore[no-untyped-def]
    """Five sign-ups (ann, bob, cat run the notebook; dan is approved but types a wrong password; eve is never
    approved); the instructor logs in with the first password ``make hub`` made and approves four of them."""
    outside: list[str] = []
    learners = {key: Learner(f"{hub.prefix}{key}", secrets.token_urlsafe(10)) for key in ("ann", "bob", "cat", "dan", "eve")}
    context, page = new_page(chromium, outside)
    try:
        for learner in learners.values():
            text = sign_up(page, hub, learner)
            assert "sent to the admin" in text, f"sign-up of {learner.name} failed: {text[:300]}"
    finally:
        context.close()
    instructor = Learner(hub.admin, hub.admin_password)
    instructor.context, instructor.page = new_page(chromium, outside)
    log_in(instructor.page, hub, instructor.name, instructor.password, next_url="/hub/authorize")
    instructor.page.wait_for_url(re.compile(r"^http://[^/?]+/hub/authorize$"), timeout=120_000)
    for key in ("ann", "bob", "cat", "dan"):
        instructor.page.goto(f"{hub.url}/hub/authorize/{learners[key].name}")
    authorize_page = instructor.page.inner_text("body")
    for key in ("ann", "bob", "cat", "dan", "eve"):
        assert learners[key].name in authorize_page
    yield Room(hub, chromium, learners, instructor, outside)
    for learner in [instructor, *learners.values()]:
        if learner.context is not None:
            learner.context.close()  # type: ignore[attr-defined]


def test_the_hub_listens_on_loopback_only(hub: ThrowAwayHub) -> None:
    import psutil

    listening = []
    for proc in hub.processes():
        try:
            listening += [(proc.pid, c.laddr.ip, c.laddr.port) for c in proc.net_connections("inet")  # type: ignore[attr-defined]
                          if c.status == psutil.CONN_LISTEN]
        except psutil.NoSuchProcess:
            continue
    assert any(port == hub.port for _, _, port in listening), f"nothing listens on the hub's port: {listening}"
    assert all(ip == "127.0.0.1" for _, ip, _ in listening), f"the hub listens beyond loopback: {listening}"


def no_account_and_no_server(hub: ThrowAwayHub, name: str) -> list[str]:
    import pwd

    found = []
    if name in hub.learner_uids():
        found.append(f"a system user {name}")
    try:
        pwd.getpwnam(name)
        found.append(f"an account {name}")
    except KeyError:
        pass
    if (hub.homes / name).exists():
        found.append(f"a home {hub.homes / name}")
    return found


def test_a_wrong_password_or_an_unapproved_learner_gets_no_server(room: Room) -> None:
    hub = room.hub
    dan, eve, ann = room.learners["dan"], room.learners["eve"], room.learners["ann"]
    context, page = new_page(room.browser, room.outside)
    try:
        log_in(page, hub, dan.name, dan.password + "x")
        page.wait_for_selector("text=Invalid username or password", timeout=60_000)
        log_in(page, hub, eve.name, eve.password)  # the right password, but the instructor did not approve eve
        page.wait_for_selector(f"text=User {eve.name} has not been authorized", timeout=60_000)
        log_in(page, hub, ann.name, ann.password[::-1])  # somebody else trying ann's name
        page.wait_for_selector("text=Invalid username or password", timeout=60_000)
        page.goto(f"{hub.url}/user/{dan.name}/lab")
        assert "/hub/login" in page.url, f"without a session, /user/{dan.name}/lab ended on {page.url}"
    finally:
        context.close()
    for learner in (dan, eve, ann):
        found = no_account_and_no_server(hub, learner.name)
        assert not found, f"{learner.name} got {found} without logging in"


PAGE_STATE = """() => ({
    dialogs: [...document.querySelectorAll('.jp-Dialog')].map(d => d.textContent.slice(0, 200)),
    prompts: [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')].map(p => p.textContent),
    focused: document.hasFocus(), active: document.activeElement && document.activeElement.className,
    status: document.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status'),
})"""

CELL_STATE = """([i]) => {
    const cells = [...document.querySelectorAll('.jp-Notebook .jp-Cell')];
    const cell = cells[i];
    if (!cell) return {count: cells.length, missing: true};
    const active = cells.findIndex(c => c.classList.contains('jp-mod-active'));
    const code = cell.classList.contains('jp-CodeCell');
    const prompt = code ? (cell.querySelector('.jp-InputPrompt')?.textContent || '') : '';
    return {count: cells.length, active, code, prompt};
}"""


def open_workspace_notebook(learner: Learner, hub: ThrowAwayHub) -> None:
    page = learner.page
    page.goto(f"{hub.url}/user/{learner.name}/lab/tree/{NOTEBOOK}?reset")  # type: ignore[attr-defined]
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=180_000)  # type: ignore[attr-defined]
    page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]', timeout=180_000)  # type: ignore[attr-defined]
    page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt").click()  # type: ignore[attr-defined]
    page.keyboard.press("Escape")  # type: ignore[attr-defined]


def run_cell_by_cell_together(learners: list[Learner], timeout: float) -> None:
    """Each learner presses Shift+Enter on one cell after the other, waiting for each code cell to finish (an
    error does not stop them, as it does not stop a learner); all learners at the same time. How many cells there
    are comes from the learner's file, not from the page: JupyterLab renders a long notebook's cells progressively,
    so a page counted too early shows only the first ones (a busy learner's run once stopped there)."""
    todo = {learner.name: {"i": 0, "waiting": False,
                           "count": len(json.loads((learner.home / "workspace" / NOTEBOOK).read_text())["cells"])}
            for learner in learners}
    deadline = time.monotonic() + timeout
    while any(state["i"] < state["count"] for state in todo.values()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the learners did not get through {NOTEBOOK} in {timeout:.0f} s: {todo}")
        for learner in learners:
            state = todo[learner.name]
            if state["i"] >= state["count"]:
                continue
            cell = learner.page.evaluate(CELL_STATE, [state["i"]])  # type: ignore[attr-defined]
            if cell.get("missing"):
                continue  # not rendered yet: wait for it
            if state["waiting"]:
                if re.search(r"\[\d+\]", cell["prompt"]):
                    state["i"], state["waiting"] = state["i"] + 1, False
                continue
            assert cell["active"] == state["i"], f"{learner.name}: cell {cell['active']} is active, expected {state['i']}"
            learner.page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
            if cell["code"]:
                state["waiting"] = True
            else:
                state["i"] += 1
        time.sleep(0.2)


def saved_cells(path: Path) -> list[dict]:
    try:
        notebook = json.loads(path.read_text())
    except json.JSONDecodeError:
        return []  # caught while JupyterLab writes it
    return [c for c in notebook["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def save_and_wait(learner: Learner, copy: Path, timeout: float) -> None:
    """Bring the learner's page to the front, click into the notebook and press Ctrl+S in command mode, as a learner
    does; again every 10 s while the file on disk does not hold every code cell executed (a key press that reached a
    page in the background was lost once), for at most ``timeout`` seconds; then fail with a screenshot and what the
    page shows (dialogs, prompts, focus)."""
    deadline, last_press = time.monotonic() + timeout, 0.0
    while time.monotonic() < deadline:
        if time.monotonic() - last_press > 10:
            page = learner.page
            page.bring_to_front()  # type: ignore[attr-defined]  # three learners' pages: keys go to the focused one
            page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt").click()  # type: ignore[attr-defined]
            page.keyboard.press("Escape")  # type: ignore[attr-defined]
            page.keyboard.press("Control+s")  # type: ignore[attr-defined]
            last_press = time.monotonic()
        cells = saved_cells(copy)
        if cells and all(c.get("execution_count") for c in cells):
            return
        time.sleep(0.25)
    cells = saved_cells(copy)
    missing = [i for i, c in enumerate(cells) if not c.get("execution_count")]
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    learner.page.screenshot(path=str(SCREENSHOTS / f"hub_not_saved_{learner.name}.png"))  # type: ignore[attr-defined]
    seen = learner.page.evaluate(PAGE_STATE)  # type: ignore[attr-defined]
    raise TimeoutError(f"page state: {seen}; "f"{learner.name}'s notebook was not saved with every code cell executed within {timeout:.0f} s: "
                       f"{len(cells)} code cells on disk, not executed: {missing[:10]}")


def test_three_learners_log_in_at_once_and_run_the_first_notebook_in_their_own_workspace(room: Room) -> None:
    hub = room.hub
    three = [room.learners[key] for key in ("ann", "bob", "cat")]
    started = time.monotonic()
    for learner in three:  # three logins sent before any server exists: the hub spawns them side by side
        learner.context, learner.page = new_page(room.browser, room.outside)
        log_in(learner.page, hub, learner.name, learner.password)
    for learner in three:
        learner.page.wait_for_url(re.compile(rf".*/user/{learner.name}/lab.*"), timeout=240_000)  # type: ignore[attr-defined]
    logged_in = time.monotonic() - started
    for learner in three:
        copy = learner.home / "workspace" / NOTEBOOK
        assert copy.exists(), f"{learner.name} has no {copy}"
        assert copy.stat().st_uid == __import__("pwd").getpwnam(learner.name).pw_uid, f"{copy} is not {learner.name}'s"
        assert "YOUR CODE HERE" in copy.read_text(), f"{copy} is not the learner edition"
        assert (learner.home.stat().st_mode & 0o077) == 0, f"{learner.home} is open to others"
        open_workspace_notebook(learner, hub)
    run_cell_by_cell_together(three, timeout=420)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for learner in three:
        copy = learner.home / "workspace" / NOTEBOOK
        save_and_wait(learner, copy, timeout=120)
        # only the stubs failed (or check() said it got a stub), in the learner's own kernel, to the last cell
        problems = learner_run_problems(nbformat.read(copy, 4), nbformat.read(ROOT / "notebooks" / NOTEBOOK, 4))
        assert not problems, f"{learner.name}'s run of {NOTEBOOK}:\n" + "\n".join(problems)
        learner.page.screenshot(path=str(SCREENSHOTS / f"hub_{learner.name[len(hub.prefix):]}.png"))  # type: ignore[attr-defined]
    print(f"\nthree learners: logged in and servers up in {logged_in:.0f} s, "
          f"{NOTEBOOK} done in {time.monotonic() - started:.0f} s in all")
    assert not room.outside, f"requests left the machine: {room.outside[:5]}"


def test_a_learner_cannot_open_another_learners_files_through_the_hub(room: Room) -> None:
    hub, ann, bob = room.hub, room.learners["ann"], room.learners["bob"]
    assert ann.page is not None and bob.page is not None, "the learners are not logged in (see the test above)"
    secret_b, secret_a = f"bob-secret-{secrets.token_hex(8)}", f"ann-secret-{secrets.token_hex(8)}"
    for learner, secret in ((bob, secret_b), (ann, secret_a)):
        path = learner.home / "workspace" / "secret.txt"
        subprocess.run(["runuser", "-u", learner.name, "--", "sh", "-c", f"printf %s {secret} > {path}"], check=True)
    own = ann.page.request.get(f"{hub.url}/user/{ann.name}/files/secret.txt")  # type: ignore[attr-defined]
    assert own.status == 200 and secret_a in own.text(), "ann cannot read her own file: the check below proves nothing"
    for path in (f"/user/{bob.name}/files/secret.txt", f"/user/{bob.name}/api/contents/secret.txt",
                 f"/user/{bob.name}/api/contents/{NOTEBOOK}", f"/user/{bob.name}/lab/tree/secret.txt"):
        response = ann.page.request.get(f"{hub.url}{path}")  # type: ignore[attr-defined]
        body = response.text()
        assert secret_b not in body and '"cells"' not in body, f"ann read {path} of bob through the hub"
        assert response.status == 403, f"{path} with ann's session: HTTP {response.status} at {response.url}"
    page = ann.page
    page.goto(f"{hub.url}/user/{bob.name}/lab/tree/secret.txt")  # type: ignore[attr-defined]
    content = page.content()  # type: ignore[attr-defined]
    assert secret_b not in content and "403" in content, f"ann's browser opened bob's lab: {page.url}"  # type: ignore[attr-defined]


def test_a_learner_cannot_read_or_change_another_learners_files_on_disk(room: Room) -> None:
    ann, bob = room.learners["ann"], room.learners["bob"]
    target = bob.home / "workspace" / NOTEBOOK
    assert target.exists()

    def as_ann(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["runuser", "-u", ann.name, "--", *command], capture_output=True, text=True, timeout=60)

    assert as_ann("cat", str(ann.home / "workspace" / NOTEBOOK)).returncode == 0, "ann cannot read her own notebook"
    for command in (("cat", str(target)), ("ls", str(bob.home)), ("touch", str(bob.home / "workspace" / "x")),
                    ("cp", "/dev/null", str(target))):
        result = as_ann(*command)
        assert result.returncode != 0 and "Permission denied" in result.stderr, f"ann ran {command}: {result}"
    assert "YOUR CODE HERE" in target.read_text()  # bob's notebook is untouched


def test_ctrl_c_stops_the_hub_and_every_learner_server_and_kernel(room: Room) -> None:
    hub = room.hub
    before = hub.processes()
    kernels = [p for p in before if "ipykernel" in " ".join(p.cmdline())]  # type: ignore[attr-defined]
    servers = [p for p in before if "jupyterhub.singleuser" in " ".join(p.cmdline())]  # type: ignore[attr-defined]
    assert len(servers) >= 3 and len(kernels) >= 3, f"expected the learners' servers and kernels: {before}"
    left = hub.stop(timeout=90)
    assert not left, f"still running after Ctrl-C: {left}"
    assert "Cleaning up single-user servers" in hub.log()
