"""``make hub`` from a checkout only its owner can read (issue 23.3): ``git clone`` into a 0700 folder, the hub started
from the clone with its default state (``.hub`` in the clone), one learner signs up, is approved, logs in and gets
JupyterLab on the workspace, running the learners' copy of the environment outside the clone.

A module of its own (its own hub and browser, nothing shared with tests/browser/test_hub.py), so that ``make test``'s
second worker runs it while the first runs the classroom module. Needs root; run with ``make test-browser``.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hubserver import ThrowAwayHub
from labserver import CHROMIUM, CHROMIUM_FLAGS, ROOT
from test_hub import NOTEBOOK, Learner, log_in, need_browser_and_root, new_page, process_of, sign_up

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    need_browser_and_root()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def private_clone(dest: Path) -> Path:
    """``git clone`` of this checkout into ``dest`` (mode 0700, as ``mktemp -d`` makes it), with this working tree's
    files on top (what is being tested, committed or not) and the course's environment as ``.venv``."""
    dest.mkdir(mode=0o700)
    clone = dest / "course"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(clone)], check=True, timeout=120)
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           check=True, capture_output=True, timeout=60).stdout.decode().split("\0")
    for name in filter(None, files):
        source, target = ROOT / name, clone / name
        if source.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            target.chmod(source.stat().st_mode & 0o777)
    (clone / ".venv").symlink_to(os.path.realpath(ROOT / ".venv"))
    return clone


def test_the_hub_runs_from_a_checkout_only_its_owner_can_read(chromium) -> None:  # type: ignore[no-untyped-def]
    """Issue 23.3: clone into a 0700 folder and start the hub from there with its default state (``.hub`` in the
    clone); a learner signs up, is approved, logs in and gets JupyterLab on the workspace, running the learners'
    copy of the environment outside the clone."""
    import pwd

    need_browser_and_root()
    top = Path(tempfile.mkdtemp(prefix="course-private-"))
    assert (top.stat().st_mode & 0o777) == 0o700
    clone = private_clone(top / "checkout")
    outside: list[str] = []
    try:
        with ThrowAwayHub(checkout=clone, state=clone / ".hub") as hub:
            # outside the clone, kept between runs like make hub's own (/var/lib/course-hub): rebuilt only when the
            # course's files (by content) or the installed packages change
            env_dir = Path("/var/lib/course-hub/learner-env-test-private-clone")
            hub.extra_env["HUB_LEARNER_ENV"] = str(env_dir)
            hub.start()
            learner = Learner(f"{hub.prefix}liv", secrets.token_urlsafe(10))
            context, page = new_page(chromium, outside)
            try:
                assert "sent to the admin" in sign_up(page, hub, learner)
                log_in(page, hub, hub.admin, hub.admin_password, next_url="/hub/authorize")
                page.wait_for_url(re.compile(r"^http://[^/?]+/hub/authorize$"), timeout=120_000)
                page.click(f"#authorize-{learner.name}")
                page.wait_for_selector(f"#authorize-{learner.name}:has-text('Unauthorize')", timeout=60_000)
                context.clear_cookies()
                log_in(page, hub, learner.name, learner.password)
                page.wait_for_url(re.compile(rf".*/user/{learner.name}/lab.*"), timeout=240_000)  # the server is up
            finally:
                context.close()
            home = Path(pwd.getpwnam(learner.name).pw_dir)
            assert "YOUR CODE HERE" in (home / "workspace" / NOTEBOOK).read_text()
            server = process_of(hub, learner, "jupyterhub.singleuser")
            assert server.cmdline()[0] == str(env_dir / "bin" / "python"), server.cmdline()
            probe = subprocess.run(["runuser", "-u", learner.name, "--", str(env_dir / "bin" / "python"), "-c",
                                    "import course_utils; print(course_utils.__file__)"], capture_output=True,
                                   text=True, timeout=120, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, cwd="/")
            assert probe.stdout.startswith(str(env_dir / "course" / "course_utils")), probe.stdout + probe.stderr
            assert not str(clone) in probe.stdout
            left = hub.stop(timeout=90)  # as in test_hub.py: services stop one by one, slowly under load
            assert not left, f"still running after Ctrl-C: {left}"
    finally:
        shutil.rmtree(top, ignore_errors=True)
    assert not outside, f"requests left the machine: {outside[:5]}"
