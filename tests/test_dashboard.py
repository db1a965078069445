"""The hub dashboard (tools/hub/dashboard.py) reads only well-formed progress records that the learner owns, and
shows the room as it is. The real hub, with learners and the instructor in a browser: tests/browser/test_hub.py."""

from __future__ import annotations

import datetime
import json
import os
import pwd
from pathlib import Path

import pytest
from traitlets.config import Config

from course_utils.machinery.progress_record import Attempt, record
from tools.hub import dashboard

NOW = datetime.datetime(2026, 11, 25, 12, 0, 0, tzinfo=datetime.UTC)


def write_record(home: Path, *entries: tuple[str, str, int, str]) -> Path:
    path = home / dashboard.RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"exercise": e, "verdict": v, "attempt": a, "time": t}) + "\n"
                            for e, v, a, t in entries))
    return path


def test_a_record_is_read_when_the_learner_owns_it_and_refused_when_someone_else_does(tmp_path: Path) -> None:
    write_record(tmp_path, ("01.1", "fail", 1, "2026-11-25T11:58:00Z"), ("01.1", "pass", 2, "2026-11-25T11:59:00Z"))
    attempts, problem = dashboard.read_learner_record(tmp_path, os.getuid())
    assert problem is None and [a.verdict for a in attempts] == ["fail", "pass"]
    assert dashboard.read_learner_record(tmp_path / "nobody", os.getuid()) == ([], None)
    assert dashboard.read_learner_record(tmp_path, os.getuid() + 1) == ([], "not owned by the learner")


def test_links_and_devices_are_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text('{"exercise": "01.1", "verdict": "pass", "attempt": 1, "time": "t"}\n')
    learner = tmp_path / "learner"
    (learner / "workspace").mkdir(parents=True)
    (learner / dashboard.RECORD).symlink_to(secret)  # the learner points the record at a file they cannot read
    assert dashboard.read_learner_record(learner, None)[0] == []
    (learner / dashboard.RECORD).unlink()
    (learner / "workspace").rmdir()
    write_record(tmp_path / "bob", ("01.1", "pass", 1, "2026-11-25T11:59:00Z"))
    (learner / "workspace").symlink_to(tmp_path / "bob" / "workspace")  # or the folder at another's workspace
    assert dashboard.read_learner_record(learner, None) == ([], "the record's path goes through a link")
    fifo_home = tmp_path / "fifo"
    (fifo_home / "workspace").mkdir(parents=True)
    os.mkfifo(fifo_home / dashboard.RECORD)  # would block a plain open() forever
    assert dashboard.read_learner_record(fifo_home, None) == ([], "not a regular file")


def test_only_the_end_of_a_huge_record_is_read(tmp_path: Path) -> None:
    path = write_record(tmp_path, ("01.1", "fail", 1, "2026-11-25T11:00:00Z"))
    line = json.dumps({"exercise": "02.1", "verdict": "fail", "attempt": 1, "time": "2026-11-25T11:00:00Z"}) + "\n"
    with open(path, "a") as handle:
        handle.write(line * (2 * dashboard.MAX_BYTES // len(line)))
        handle.write(json.dumps({"exercise": "03.1", "verdict": "pass", "attempt": 1, "time": "2026-11-25T11:59:00Z"}))
    attempts, _ = dashboard.read_learner_record(tmp_path, None)
    assert attempts[-1].exercise == "03.1" and "01.1" not in {a.exercise for a in attempts}
    assert len(attempts) < dashboard.MAX_BYTES // len(line) + 2


def test_the_room_counts_done_tried_and_who_is_stuck() -> None:
    records = {
        "ada": [Attempt("01.1", "fail", 1, "2026-11-25T11:50:00Z"), Attempt("01.1", "pass", 2, "2026-11-25T11:55:00Z")],
        "bob": [Attempt("06.1", "fail", 1, "2026-11-25T11:58:00Z"), Attempt("06.1", "fail", 2, "2026-11-25T11:59:30Z")],
        "cy": [Attempt("06.1", "fail", 1, "2026-11-25T10:00:00Z")],
        "dee": [],
    }
    data = dashboard.room(records, ["01.1", "06.1", "07.1"], NOW)
    assert data["learners"]["ada"]["exercises"] == {"01.1": {"state": "done", "attempts": 2}}
    assert data["learners"]["bob"]["exercises"] == {"06.1": {"state": "tried", "attempts": 2}}
    assert data["stuck_on"] == ["06.1"] and data["stuck_count"] == 2
    assert [data["learners"][n]["idle_s"] for n in ("ada", "bob", "cy", "dee")] == [300, 30, 7200, None]
    page = dashboard.render(data, {"cy": "not owned by the learner"})
    assert "Most learners are stuck on <strong>06.1</strong> (2 of 4" in page
    assert "✗2" in page and "✓" in page and "30 s ago" in page and "5 min ago" in page and "2 h ago" in page
    assert "no check yet" in page and "(not owned by the learner)" in page
    assert dashboard.room({}, ["01.1"], NOW)["stuck_on"] == []


def test_names_are_escaped_and_the_page_says_the_record_is_self_reported() -> None:
    page = dashboard.render(dashboard.room({"<script>x</script>": []}, ["01.1"], NOW), {})
    assert "<script>x" not in page and "&lt;script&gt;" in page
    assert "never a grade" in page and "write by hand" in page


def test_the_service_is_registered_for_admins_only() -> None:
    c = Config()
    dashboard.configure_dashboard(c, python="/usr/bin/python3", port=8123, admins={"instructor"},
                                  state=Path("/srv/hub"), pythonpath="/srv/course")
    (service,) = c.JupyterHub.services
    assert service["name"] == "dashboard" and service["url"] == "http://127.0.0.1:8123"
    assert service["environment"]["COURSE_DASHBOARD_ADMINS"] == "instructor"
    (role,) = c.JupyterHub.load_roles
    assert role["services"] == ["dashboard"] and not any(s.startswith("access:") for s in role["scopes"])


def test_under_tljh_the_record_a_learner_checks_into_is_the_one_shown(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jupyter-ada"
    folder = home / "pytorch-hooks-learner"  # nbgitpuller's clone: the learner's notebooks, no workspace manifest
    folder.mkdir(parents=True)
    real = pwd.getpwnam
    mine = list(pwd.getpwuid(os.getuid()))
    mine[0], mine[5] = "jupyter-ada", str(home)  # pw_name, pw_dir: a system user jupyter-ada who is this test's uid
    monkeypatch.setattr(pwd, "getpwnam", lambda name: pwd.struct_passwd(mine) if name == "jupyter-ada" else real(name))
    monkeypatch.delenv("COURSE_PROGRESS", raising=False)
    monkeypatch.chdir(folder)  # where the kernel runs
    assert record("01.1", False) is None and record("01.1", True) is None
    records, problems = dashboard.collect(["ada", "bob"], None,
                                          record=Path("pytorch-hooks-learner/.course-progress.jsonl"),
                                          system_users="tljh")
    assert [(a.exercise, a.verdict, a.attempt) for a in records["ada"]] == [("01.1", "fail", 1), ("01.1", "pass", 2)]
    assert records["bob"] == [] and problems == {}  # no system user jupyter-bob yet: nothing to read, no error
    with pytest.raises(ValueError, match="relative"):
        dashboard.collect(["ada"], None, record=Path("/etc/shadow"), system_users="tljh")
    with pytest.raises(ValueError, match="relative"):
        dashboard.collect(["ada"], None, record=Path("../jupyter-bob/.course-progress.jsonl"), system_users="tljh")


def test_tljh_system_names_follow_tljh() -> None:
    assert dashboard.tljh_system_username("ada") == "jupyter-ada"
    assert dashboard.tljh_system_username("a" * 17) == "jupyter-" + "a" * 17  # 25 characters: kept
    # 26 characters or more: the first 26, '-', the first 5 hex digits of the SHA-256 of the whole name
    assert dashboard.tljh_system_username("abcdefghijklmnopqr") == "jupyter-abcdefghijklmnopqr-e375e"
    assert len(dashboard.tljh_system_username("x" * 32)) == 32


def test_a_time_in_the_future_or_no_time_is_ignored_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 34.9: the record is the learner's own file; a pass they wrote by hand with a time in the future (their
    row would say "0 s ago" for ever) or with a string that is no time is not shown, and the row says so."""
    write_record(tmp_path, ("01.1", "fail", 1, "2026-11-25T11:58:00Z"), ("02.1", "pass", 1, "2099-01-01T00:00:00Z"),
                 ("03.1", "pass", 1, "just now"), ("04.1", "pass", 1, "2026-11-25T12:01:00Z"))
    attempts, _ = dashboard.read_learner_record(tmp_path, None)
    kept, ignored = dashboard.plausible(attempts, NOW)
    assert [a.exercise for a in kept] == ["01.1", "04.1"] and ignored == 2  # one minute ahead: a clock's slack
    assert dashboard.plausible([Attempt("01.1", "pass", 1, "2026-11-25 11:00:00")], NOW) == ([], 1)
    monkeypatch.setattr(dashboard, "learner_home", lambda name, state, system_users: (tmp_path, None))
    records, problems = dashboard.collect(["ada"], None, now=NOW)
    assert records["ada"] == kept and problems == {"ada": "2 line(s) ignored: a time in the future or not a time"}
    data = dashboard.room(records, ["01.1", "02.1", "03.1", "04.1"], NOW)
    assert set(data["learners"]["ada"]["exercises"]) == {"01.1", "04.1"}
    page = dashboard.render(data, problems)
    assert page.count('<td class="done"') == 1 and "2 line(s) ignored" in page
