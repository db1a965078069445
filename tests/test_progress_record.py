"""The progress record: what check() appends, where, and that recording never breaks check()."""

from __future__ import annotations

import errno
import json
import multiprocessing
from pathlib import Path

import pytest

from course_utils.machinery import progress_record
from course_utils.machinery.progress import progress
from course_utils.machinery.progress_record import RECORD_NAME, parse_line, read_record, record, record_path


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A learner's workspace (its manifest marks it) as the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("COURSE_PROGRESS", raising=False)
    (tmp_path / ".course-manifest.json").write_text("{}")
    return tmp_path


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_record_is_one_line_with_the_attempt_number_and_nothing_else(in_tmp: Path) -> None:
    assert record("06.1", False) is None and record("06.1", True) is None and record("01.2", True) is None
    written = lines(in_tmp / RECORD_NAME)
    assert [(r["exercise"], r["verdict"], r["attempt"]) for r in written] == [
        ("06.1", "fail", 1), ("06.1", "pass", 2), ("01.2", "pass", 1)]
    assert all(set(r) == {"exercise", "verdict", "attempt", "time"} for r in written)
    assert all(r["time"].endswith("Z") and len(r["time"]) == 20 for r in written)
    assert oct((in_tmp / RECORD_NAME).stat().st_mode & 0o777) == "0o600"


def test_the_record_lives_in_the_workspace_above_the_working_directory(in_tmp: Path) -> None:
    (in_tmp / "complete").mkdir()
    assert record_path(in_tmp / "complete") == in_tmp / RECORD_NAME
    assert record_path(in_tmp) == in_tmp / RECORD_NAME


def test_nothing_is_recorded_in_the_courses_checkout_unless_the_learner_asks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The course's checkout (read-only or not) is no workspace: check() there writes nothing, and says nothing; a
    folder of the learner's own, where the course is installed as a package (Colab, a TLJH clone), is one."""
    from course_utils import check

    notebooks = progress_record.REQUIREMENTS_FILE.parent / "notebooks"
    monkeypatch.chdir(notebooks)
    before = set(notebooks.parent.rglob(RECORD_NAME))
    assert record_path() is None and record("01.1", True) is None
    check("01.1", "not a hook")
    assert "not recorded" not in capsys.readouterr().out and set(notebooks.parent.rglob(RECORD_NAME)) == before
    progress()
    assert "not in the course's own folder" in capsys.readouterr().out
    monkeypatch.setenv("COURSE_PROGRESS", str(tmp_path / "asked.jsonl"))
    assert record("01.1", True) is None and lines(tmp_path / "asked.jsonl")[0]["exercise"] == "01.1"
    monkeypatch.delenv("COURSE_PROGRESS")
    (tmp_path / ".course-manifest.json").unlink()
    monkeypatch.chdir(tmp_path)  # no manifest, outside the checkout: the learner's own folder
    assert record_path() == tmp_path / RECORD_NAME
    monkeypatch.setattr(progress_record, "in_checkout", lambda: False)  # the course installed from its wheel
    monkeypatch.chdir(notebooks)
    assert record_path() == notebooks / RECORD_NAME


def test_off_records_nothing(in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COURSE_PROGRESS", "off")
    assert record_path() is None and record("01.1", True) is None
    assert not (in_tmp / RECORD_NAME).exists()


def test_a_folder_a_device_or_a_disk_that_cannot_be_written_gives_a_note_not_an_error(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (in_tmp / "a-file").write_text("x")
    monkeypatch.setenv("COURSE_PROGRESS", str(in_tmp / "a-file" / "record.jsonl"))  # real: a file is no folder
    note = record("01.1", True)
    assert note and note.startswith("(Your progress was not recorded: NotADirectoryError")
    assert "COURSE_PROGRESS=off" in note
    monkeypatch.setenv("COURSE_PROGRESS", "/dev/full")  # reading it never ends: refused before any read
    assert "not a regular file" in record("01.1", True)
    monkeypatch.delenv("COURSE_PROGRESS")

    def read_only(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(in_tmp / RECORD_NAME))

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(progress_record.os, "write", full)
    assert "No space left on device" in record("01.1", True)
    monkeypatch.setattr(progress_record.os, "open", read_only)
    assert "PermissionError" in record("01.1", True)


def test_a_corrupt_record_is_read_around_and_still_appended_to(in_tmp: Path) -> None:
    path = in_tmp / RECORD_NAME
    good = json.dumps({"exercise": "02.1", "verdict": "pass", "attempt": 1, "time": "2026-01-01T00:00:00Z"})
    path.write_bytes(b"\x00\xff garbage\n" + good.encode() + b"\n{\"exercise\": \"02.1\"}\n" + b"x" * 5000
                     + b"\n[1, 2]\n")
    assert record("02.1", False) is None
    attempts, unreadable = read_record(path)
    assert [(a.exercise, a.verdict, a.attempt) for a in attempts] == [("02.1", "pass", 1), ("02.1", "fail", 2)]
    assert unreadable == 4


def test_only_well_formed_lines_count() -> None:
    assert parse_line('{"exercise": "01.1", "verdict": "pass", "attempt": 1, "time": "t"}')
    for bad in ('{"exercise": "../etc", "verdict": "pass", "attempt": 1, "time": "t"}',
                '{"exercise": "01.1", "verdict": "maybe", "attempt": 1, "time": "t"}',
                '{"exercise": "01.1", "verdict": "pass", "attempt": true, "time": "t"}',
                '{"exercise": "01.1", "verdict": "pass", "attempt": 0, "time": "t"}', "null", "not json"):
        assert parse_line(bad) is None, bad


def _record_many(path: str, count: int) -> None:
    for _ in range(count):
        assert record("03.2", True, path=Path(path)) is None


def test_kernels_checking_at_once_do_not_corrupt_the_record(in_tmp: Path) -> None:
    path = in_tmp / RECORD_NAME
    methods = multiprocessing.get_all_start_methods()  # fork: no second import of torch per process
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    workers = [context.Process(target=_record_many, args=(str(path), 40)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    attempts, unreadable = read_record(path)
    assert unreadable == 0 and sorted(a.attempt for a in attempts) == list(range(1, 161))


def test_progress_shows_done_tried_and_not_started_and_resets(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for exercise, passed in (("01.1", False), ("01.1", True), ("01.2", False)):
        record(exercise, passed)
    summary = progress()
    out = capsys.readouterr().out
    assert "01.1" in summary["01"]["done"] and summary["01"]["tried"] == ["01.2"]
    assert all(not row["done"] and not row["tried"] for number, row in summary.items() if number != "01")
    assert "01_tensor_hooks" in out and "1 of" in out.splitlines()[-1]
    progress(reset=True)
    out = capsys.readouterr().out
    assert "Progress reset. The old record is kept as .course-progress." in out
    assert not (in_tmp / RECORD_NAME).exists() and len(list(in_tmp.glob(".course-progress.*.jsonl"))) == 1
    assert all(not row["done"] for row in progress().values())


def test_progress_as_a_cells_last_line_prints_its_table_once(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A notebook shows a cell's last value through IPython's display formatter: for progress() it shows nothing
    more (the table is printed), where a plain dict would be shown again."""
    from IPython.core.formatters import DisplayFormatter

    record("01.1", True)
    summary = progress()
    out = capsys.readouterr().out
    assert out.count("01_tensor_hooks") == 1 and "'done'" not in out
    assert DisplayFormatter().format(summary) == ({}, {})
    assert DisplayFormatter().format(dict(summary))[0]["text/plain"].startswith("{'00'")
    assert summary["01"]["done"] == ["01.1"]


def test_a_course_update_of_the_workspace_leaves_the_record_alone(in_tmp: Path) -> None:
    from course_utils.machinery.workspace import prepare_workspace

    workspace = in_tmp / "workspace"
    prepare_workspace(workspace)
    path = workspace / RECORD_NAME
    assert record_path(workspace) == path and record("01.1", True, path=path) is None
    before = path.read_bytes()
    manifest = workspace / ".course-manifest.json"
    data = json.loads(manifest.read_text())
    data["delivered"] = {name: "an older version" for name in data["delivered"]}  # as after a course update
    manifest.write_text(json.dumps(data))
    prepare_workspace(workspace)
    assert path.read_bytes() == before


def test_check_records_each_attempt_and_a_failed_record_never_hides_the_verdict(
        in_tmp: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from course_utils import check

    check("01.1", "not a hook")
    check("01.1", None)
    assert [(r["exercise"], r["verdict"], r["attempt"]) for r in lines(in_tmp / RECORD_NAME)] == [
        ("01.1", "fail", 1), ("01.1", "fail", 2)]
    assert "not a hook" not in (in_tmp / RECORD_NAME).read_text()  # the answer itself is never recorded
    capsys.readouterr()
    monkeypatch.setenv("COURSE_PROGRESS", str(in_tmp / "a-missing-folder" / "record.jsonl"))
    verdict = check("01.1", "not a hook")
    out = capsys.readouterr().out.splitlines()
    assert not verdict and out[0].startswith("✗ Exercise 01.1: not yet.")
    assert out[-1].startswith("(Your progress was not recorded: FileNotFoundError")
    monkeypatch.delenv("COURSE_PROGRESS")
    check("1.1", None)  # an unknown id is no attempt, nor a stub not written yet (nothing to report either)

    def stub(grad):
        raise NotImplementedError("Exercise 01.1: your code goes here")

    assert not check("01.1", stub)
    out = capsys.readouterr().out
    assert "still the stub" in out and "Think the check itself is wrong" not in out
    assert len(lines(in_tmp / RECORD_NAME)) == 2
