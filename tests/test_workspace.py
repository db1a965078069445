"""The learner's workspace (make lab): created from the learner edition, and a learner's file is never overwritten
or deleted -- not by a second preparation, not by a course update."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_utils.machinery.course import NOTEBOOKS_DIR
from course_utils.machinery.learner_edition import solution_blocks
from course_utils.machinery.workspace import MANIFEST, prepare_workspace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A copy of two course notebooks that a test may change (as a course update would)."""
    folder = tmp_path / "course"
    folder.mkdir()
    for path in sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))[1:3]:
        shutil.copy(path, folder / path.name)
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_new_workspace_holds_the_learner_edition_and_the_complete_notebooks(course: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    messages = prepare_workspace(workspace, notebooks_dir=course, quiet=True)
    names = sorted(p.name for p in course.glob("*.ipynb"))
    assert sorted(p.name for p in workspace.glob("*.ipynb")) == names
    assert sorted(p.name for p in (workspace / "complete").glob("*.ipynb")) == names
    assert len(messages) == 2 * len(names)
    for name in names:
        learner = nbformat.read(workspace / name, as_version=4)
        assert any("learner-stub" in c.metadata.get("tags", []) for c in learner.cells)
        assert not any(solution_blocks(c.source) for c in learner.cells if c.cell_type == "code")
        assert all(c.get("outputs", []) == [] for c in learner.cells if c.cell_type == "code")
        complete = workspace / "complete" / name
        assert complete.read_bytes() == (course / name).read_bytes()
        assert not os.access(complete, os.W_OK) or os.geteuid() == 0  # root may write anyway
        assert not complete.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)


def test_an_edited_notebook_survives_a_second_preparation_and_a_course_update(course: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    prepare_workspace(workspace, notebooks_dir=course, quiet=True)
    name = sorted(p.name for p in course.glob("*.ipynb"))[0]
    mine = workspace / name
    notebook = nbformat.read(mine, as_version=4)
    stub = next(c for c in notebook.cells if "learner-stub" in c.metadata.get("tags", []))
    stub.source = "my_answer = 'my own work'\n"
    nbformat.write(notebook, mine)
    (workspace / "my_notes.txt").write_text("notes")
    edited = mine.read_bytes()

    assert prepare_workspace(workspace, notebooks_dir=course, quiet=True) == []  # nothing to do, nothing touched
    assert mine.read_bytes() == edited

    teaching = nbformat.read(course / name, as_version=4)  # the course changes this notebook
    teaching.cells[0].source += "\n\nA sentence added by a course update."
    nbformat.write(teaching, course / name)
    before = _files(workspace)
    messages = prepare_workspace(workspace, notebooks_dir=course, quiet=True)
    after = _files(workspace)
    assert mine.read_bytes() == edited and (workspace / "my_notes.txt").read_text() == "notes"
    assert set(before) <= set(after), "a file disappeared"
    updates = sorted(workspace.glob(f"{Path(name).stem}.course-update-*.ipynb"))
    assert len(updates) == 1 and "A sentence added by a course update." in updates[0].read_text()
    assert any(f"new version of {name}" in m and updates[0].name in m and "untouched" in m for m in messages)
    # the untouched complete/ copy is course-owned: it follows the course
    assert "A sentence added by a course update." in (workspace / "complete" / name).read_text()
    # announced once; a third run changes nothing
    assert prepare_workspace(workspace, notebooks_dir=course, quiet=True) == []
    assert _files(workspace) == after


def test_a_changed_complete_copy_is_kept_a_deleted_notebook_comes_back_and_no_manifest_loses_nothing(
        course: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    prepare_workspace(workspace, notebooks_dir=course, quiet=True)
    name = sorted(p.name for p in course.glob("*.ipynb"))[0]
    complete = workspace / "complete" / name
    complete.chmod(0o644)
    complete.write_text(complete.read_text() + " ")
    teaching = nbformat.read(course / name, as_version=4)
    teaching.cells[0].source += " (updated)"
    nbformat.write(teaching, course / name)
    (workspace / name).unlink()
    assert f"added {name}" in prepare_workspace(workspace, notebooks_dir=course, quiet=True)
    assert complete.read_text().endswith(" ")
    assert list((workspace / "complete").glob("*.course-update-*.ipynb"))
    (workspace / MANIFEST).unlink()
    before = _files(workspace)
    prepare_workspace(workspace, notebooks_dir=course, quiet=True)
    assert all(_files(workspace)[key] == value for key, value in before.items())


def test_bad_places_get_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="No course notebooks"):
        prepare_workspace(tmp_path / "ws", notebooks_dir=tmp_path)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError, match="not a folder"):
        prepare_workspace(blocker)
    workspace = tmp_path / "ws2"
    workspace.mkdir()
    (workspace / MANIFEST).write_text("{broken")
    with pytest.raises(SystemExit, match="unreadable"):
        prepare_workspace(workspace)


def test_the_command_line_prepares_the_real_course(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "course_utils.machinery.workspace", str(tmp_path / "ws")],
                            capture_output=True, text=True, check=True, cwd=tmp_path)
    assert "Workspace ready" in result.stdout
    pattern = "[0-9][0-9]_*.ipynb"
    assert len(list((tmp_path / "ws").glob(pattern))) == len(list(NOTEBOOKS_DIR.glob(pattern)))
    manifest = json.loads((tmp_path / "ws" / MANIFEST).read_text())
    assert set(manifest) == {"delivered", "offered"}


def test_preparing_a_workspace_does_not_import_torch() -> None:
    """``make lab`` and the hub prepare each learner's workspace in a process of its own: it needs no torch (2-3
    CPU-seconds to import), so ``course_utils`` imports the names it offers only when they are used."""
    probe = ("import sys, course_utils, course_utils.machinery.workspace; print('torch' in sys.modules); "
             "from course_utils import check, HookRegistry; print('torch' in sys.modules, check.__module__, "
             "HookRegistry.__module__, course_utils.hooks.__name__)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    assert result.stdout.split() == ["False", "True", "course_utils.machinery.checks", "course_utils.hooks",
                                     "course_utils.hooks"], result.stdout + result.stderr
