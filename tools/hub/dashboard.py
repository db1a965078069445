"""The instructor's view of the room: a JupyterHub service (admins only) showing every learner's progress record.

A learners x exercises grid (✓ done, ✗N tried N times), the time since each learner's last check, and the exercise
most learners are stuck on; it refreshes every 15 s. It reads each learner's record only: no link followed, a
regular file the learner owns, its last 256 KiB, well-formed lines with a real UTC time not in the future. The
record is the learner's own file: a view of the room, never a grade.

Registered by :func:`configure_dashboard` (course_hub.configure; TLJH's ``deploy/tljh/jupyterhub_config.d/course.py``).
By hand: ``python -m tools.hub.dashboard`` with JupyterHub's service environment, ``COURSE_DASHBOARD_RECORD`` (the
record's path in a home) and ``COURSE_DASHBOARD_SYSTEM_USERS`` (``same`` or ``tljh``: ``jupyter-NAME``).
"""

from __future__ import annotations

import datetime
import functools
import html
import json
import os
import pwd
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from course_utils.machinery.layout import RECORD_NAME

from .course_auth import tljh_system_username

SERVICE = "dashboard"
RECORD = Path("workspace") / RECORD_NAME  # make hub's: the workspace the spawn hook prepares
SYSTEM_USERS = ("same", "tljh")
MAX_BYTES = 256 * 1024
REFRESH_S = 15


# -- reading the records ---------------------------------------------------------------------------------------------
def record_in_home(record: str | Path) -> Path:
    """``record`` checked to be a path inside a learner's home: relative, with no ``..``.

    Usage: ``record_in_home("pytorch-hooks-learner/.course-progress.jsonl")``
    """
    path = Path(record)
    if path.is_absolute() or ".." in path.parts or not path.name:
        raise ValueError(f"the progress record's path must be relative to a learner's home, without '..': {record!r}")
    return path


def read_learner_record(home: Path, owner_uid: int | None, record: Path = RECORD) -> tuple[list[Any], str | None]:
    """The learner's well-formed attempts and, when the record could not be read, why. ``owner_uid``: its owner
    (None: no check, learners sharing one account). No link is followed."""
    from course_utils.machinery.progress_record import parse_lines

    path = home / record_in_home(record)
    try:
        if os.path.realpath(path) != str(path):
            return [], "the record's path goes through a link"
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return [], None
    except OSError as error:
        return [], f"unreadable ({error.strerror or error})"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return [], "not a regular file"
        if owner_uid is not None and info.st_uid != owner_uid:
            return [], "not owned by the learner"
        start = max(0, info.st_size - MAX_BYTES)
        os.lseek(fd, start, os.SEEK_SET)
        data = os.read(fd, MAX_BYTES)
    finally:
        os.close(fd)
    text = data.decode("utf-8", errors="replace")
    if start:
        text = text.split("\n", 1)[-1]  # the first line may be cut
    attempts, _ = parse_lines(text.splitlines())
    return attempts, None


def learner_home(name: str, state: Path | None, system_users: str = "same") -> tuple[Path, int | None] | None:
    """A learner's home and the uid that must own the record: the system user's (root, or TLJH's ``jupyter-NAME``),
    or ``<state>/homes/<name>`` with no owner check (a hub run as one account)."""
    _check_system_users(system_users)
    if system_users == "tljh" or os.geteuid() == 0:
        try:
            entry = pwd.getpwnam(tljh_system_username(name) if system_users == "tljh" else name)
        except KeyError:
            return None
        return Path(entry.pw_dir), entry.pw_uid
    if state is None:
        return None
    return state / "homes" / name, None


TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"  # what course_utils.machinery.progress_record writes
CLOCK_SLACK_S = 120  # a kernel's clock may run this far ahead of the hub's (one machine: none)


def plausible(attempts: Iterable[Any], now: datetime.datetime) -> tuple[list[Any], int]:
    """The attempts whose time is a UTC time not in the future, and how many others there were: a learner can write
    anything into their own record, but not move the room's clock.

    Usage: ``kept, ignored = plausible(attempts, datetime.datetime.now(datetime.timezone.utc))``
    """
    kept, ignored = [], 0
    latest = now + datetime.timedelta(seconds=CLOCK_SLACK_S)
    for attempt in attempts:
        when = _utc(attempt.time)
        if when is None or when > latest:
            ignored += 1
        else:
            kept.append(attempt)
    return kept, ignored


def _utc(stamp: Any) -> datetime.datetime | None:
    try:
        return datetime.datetime.strptime(stamp, TIME_FORMAT).replace(tzinfo=datetime.UTC)
    except (TypeError, ValueError):
        return None


def _check_system_users(system_users: str) -> str:
    if system_users not in SYSTEM_USERS:
        raise ValueError(f"system_users is one of {SYSTEM_USERS}, got {system_users!r}")
    return system_users


# -- the room --------------------------------------------------------------------------------------------------------
def room(records: Mapping[str, list[Any]], exercise_ids: Iterable[str], now: datetime.datetime) -> dict[str, Any]:
    """The dashboard's content as plain data: per learner, each exercise's state and attempts, the last check."""
    ids = sorted(exercise_ids)
    learners = {}
    for name, attempts in sorted(records.items()):
        cells = {}
        for exercise_id in ids:
            mine = [a for a in attempts if a.exercise == exercise_id]
            if any(a.verdict == "pass" for a in mine):
                cells[exercise_id] = {"state": "done", "attempts": len(mine)}
            elif mine:
                cells[exercise_id] = {"state": "tried", "attempts": len(mine)}
        times = [a.time for a in attempts]
        last = max(times) if times else None
        learners[name] = {"exercises": cells, "last_check": last, "idle_s": _seconds_since(last, now)}
    stuck_counts = {e: sum(1 for one in learners.values() if _state(one, e) == "tried") for e in ids}
    most = max(stuck_counts.values(), default=0)
    stuck = sorted(e for e, n in stuck_counts.items() if n == most and n > 0)
    return {"exercises": ids, "learners": learners, "stuck_on": stuck, "stuck_count": most}


def _state(learner: dict[str, Any], exercise: str) -> Any:
    """A learner's state on an exercise ("passed", "tried") in the dashboard's table, or None."""
    return learner["exercises"].get(exercise, {}).get("state")


def _seconds_since(stamp: str | None, now: datetime.datetime) -> int | None:
    then = _utc(stamp)
    return None if then is None else max(0, int((now - then).total_seconds()))


def _ago(seconds: int | None) -> str:
    if seconds is None:
        return "no check yet"
    if seconds < 90:
        return f"{seconds} s ago"
    if seconds < 5400:
        return f"{seconds // 60} min ago"
    return f"{seconds // 3600} h ago"


def render(data: Mapping[str, Any], problems: Mapping[str, str]) -> str:
    """The dashboard page (HTML, every value escaped)."""
    e = html.escape
    ids = data["exercises"]
    if data["stuck_on"]:
        stuck = (f"Most learners are stuck on <strong>{e(', '.join(data['stuck_on']))}</strong> "
                 f"({data['stuck_count']} of {len(data['learners'])} tried it and have not passed yet).")
    else:
        stuck = "Nobody is stuck right now."
    head = "".join(f"<th>{e(i)}</th>" for i in ids)
    rows = []
    for name, learner in data["learners"].items():
        cells = []
        for exercise_id in ids:
            cell = learner["exercises"].get(exercise_id)
            if cell is None:
                cells.append("<td></td>")
            elif cell["state"] == "done":
                cells.append(f'<td class="done" title="done in {cell["attempts"]} attempt(s)">✓</td>')
            else:
                cells.append(f'<td class="tried" title="{cell["attempts"]} attempt(s), not passed">'
                             f'✗{cell["attempts"]}</td>')
        note = f' <span class="problem">({e(problems[name])})</span>' if name in problems else ""
        rows.append(f'<tr data-learner="{e(name)}"><th>{e(name)}{note}</th>{"".join(cells)}'
                    f'<td class="last">{e(_ago(learner["idle_s"]))}</td></tr>')
    body = "\n".join(rows) or f'<tr><td colspan="{len(ids) + 2}">No learner has signed up yet.</td></tr>'
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="{REFRESH_S}">
<title>The room: course progress</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }} table {{ border-collapse: collapse; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 2px 5px; text-align: center; }} tbody th {{ text-align: left; }}
td.done {{ background: #d9f2d9; }} td.tried {{ background: #fde2c8; }} .problem {{ color: #a00; font-weight: normal; }}
</style></head>
<body><h1>The room: course progress</h1>
<p id="stuck">{stuck}</p>
<p>✓ done · ✗N tried N times, not passed yet · blank: not started. Read from each learner's progress record
(exercise, verdict, attempt, time; never their code). The record is the learner's own file, which they can
also write by hand: a view of the room, never a grade. Refreshes every {REFRESH_S} s.</p>
<table id="room"><thead><tr><th>learner</th>{head}<th>last check</th></tr></thead>
<tbody>
{body}
</tbody></table></body></html>
"""


# -- the service -----------------------------------------------------------------------------------------------------
def _learner_names(api_url: str, token: str, admins: set[str]) -> list[str]:
    from urllib.request import Request, urlopen

    request = Request(f"{api_url.rstrip('/')}/users", headers={"Authorization": f"token {token}"})
    with urlopen(request, timeout=10) as response:  # the hub's own API, on 127.0.0.1
        users = json.loads(response.read().decode("utf-8"))
    return sorted(u["name"] for u in users if u["name"] not in admins and not u.get("admin"))


def collect(names: Iterable[str], state: Path | None, *, record: Path = RECORD, system_users: str = "same",
            now: datetime.datetime | None = None) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """Every learner's plausible attempts, and a note for each record unreadable or with impossible times.

    Usage: ``records, problems = collect(["ada", "bob"], None, system_users="tljh")``
    """
    now = now or datetime.datetime.now(datetime.UTC)
    records: dict[str, list[Any]] = {}
    problems: dict[str, str] = {}
    for name in names:
        where = learner_home(name, state, system_users)
        if where is None:
            records[name] = []
            continue
        attempts, problem = read_learner_record(*where, record=record)
        records[name], ignored = plausible(attempts, now)
        if ignored:
            note = f"{ignored} line(s) ignored: a time in the future or not a time"
            problem = f"{problem}; {note}" if problem else note
        if problem:
            problems[name] = problem
    return records, problems


def main() -> None:  # pragma: no cover - run by the hub; tests/browser/test_hub.py drives it for real
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import ioloop, web

    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]
    api_url, token = os.environ["JUPYTERHUB_API_URL"], os.environ["JUPYTERHUB_API_TOKEN"]
    admins = set(filter(None, os.environ.get("COURSE_DASHBOARD_ADMINS", "").split(",")))
    state = Path(os.environ["COURSE_HUB_STATE"]) if os.environ.get("COURSE_HUB_STATE") else None
    record = record_in_home(os.environ.get("COURSE_DASHBOARD_RECORD") or RECORD)
    system_users = _check_system_users(os.environ.get("COURSE_DASHBOARD_SYSTEM_USERS") or "same")

    @functools.cache
    def exercise_ids() -> list[str]:
        # read at the first view, not at start: the catalogue imports torch (2-3 CPU-seconds), which a hub that is
        # starting (or told to stop at once) can do without
        from course_utils.machinery.checks import all_exercises

        return list(all_exercises())

    def snapshot() -> tuple[dict[str, Any], dict[str, str]]:
        now = datetime.datetime.now(datetime.UTC)
        records, problems = collect(_learner_names(api_url, token, admins), state, record=record,
                                    system_users=system_users, now=now)
        return room(records, exercise_ids(), now), problems

    class Page(HubOAuthenticated, web.RequestHandler):
        def initialize(self, api: bool) -> None:
            self.api = api

        @web.authenticated
        def get(self) -> None:
            data, problems = snapshot()
            self.set_header("Cache-Control", "no-store")
            if self.api:
                self.write({**data, "problems": problems})
                return
            self.set_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
            self.write(render(data, problems))

    app = web.Application([
        (prefix, Page, {"api": False}), (url_path_join(prefix, "api/room"), Page, {"api": True}),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=os.urandom(32))
    url = os.environ["JUPYTERHUB_SERVICE_URL"]
    from urllib.parse import urlparse

    where = urlparse(url)
    if where.port is None:
        raise SystemExit(f"[course dashboard] the service URL {url} names no port")
    app.listen(where.port, where.hostname)
    print(f"[course dashboard] serving {prefix} on {where.hostname}:{where.port}", flush=True)
    ioloop.IOLoop.current().start()


def configure_dashboard(c: Any, *, python: str, port: int, admins: Iterable[str], state: Path | None,
                        pythonpath: str, record: str | Path = RECORD, system_users: str = "same") -> None:
    """Register the dashboard as a managed JupyterHub service that only admins may open (``record``,
    ``system_users``: see :func:`learner_home`).

    Usage (in course_hub.configure): ``configure_dashboard(c, python=sys.executable, port=..., admins={...}, ...)``
    """
    _check_system_users(system_users)
    environment = {"COURSE_DASHBOARD_ADMINS": ",".join(sorted(admins)), "PYTHONPATH": pythonpath,
                   "COURSE_DASHBOARD_RECORD": str(record_in_home(record)),
                   "COURSE_DASHBOARD_SYSTEM_USERS": system_users}
    if state is not None:
        environment["COURSE_HUB_STATE"] = str(state)
    c.JupyterHub.services = [*(c.JupyterHub.services if "services" in c.JupyterHub else []), {
        "name": SERVICE,
        "url": f"http://127.0.0.1:{port}",
        "command": [python, "-m", "tools.hub.dashboard"],  # with the course on PYTHONPATH
        "oauth_no_confirm": True,
        "display": True,
        "environment": environment,
    }]
    # The service's own token may list the users (names only); who may OPEN it is JupyterHub's access:services
    # scope, which the admin role has and the default user role does not.
    roles = list(c.JupyterHub.load_roles if "load_roles" in c.JupyterHub else [])
    roles.append({"name": "course-dashboard", "scopes": ["list:users", "read:users:name"], "services": [SERVICE]})
    c.JupyterHub.load_roles = roles


if __name__ == "__main__":
    main()
