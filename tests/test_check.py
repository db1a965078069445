"""``make check`` (tools/check.py) picks what a change can break: nbval of the notebooks it touches in every language,
the test files that import a changed module or name a touched notebook, and, through the plugin, the tests whose
markers or parameters name the change; it reads the change from git once (tools/repo.py). Cheap: plans, synthetic
items and a throw-away git repository, no test run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools import check, repo

ROOT = Path(__file__).resolve().parent.parent


def test_each_file_of_a_notebook_runs_it_in_every_language_and_the_tests_that_name_it() -> None:
    number, stem = "02", next((ROOT / "notebooks").glob("02_*.ipynb")).stem
    for name in (f"notebooks/{stem}.ipynb", f"notebooks/zh/{stem}.ipynb", f"translations/zh/{stem}.po",
                 "course_utils/machinery/exercises/nb02.py", "course_utils/machinery/exercises/nb02.toml",
                 "tests/exercise_cases/nb02.py", "course_utils/machinery/locale/zh/nb02.po"):
        chosen = check.plan({name: "M"})
        assert chosen.touched == {number} and chosen.nbval == {number}, name
        assert chosen.notebook_paths() == [f"notebooks/{stem}.ipynb", f"notebooks/zh/{stem}.ipynb"]
    naming = {str(p.relative_to(ROOT)) for p in ROOT.glob("tests/**/test_*.py")
              if re.search(rf"{stem}\.ipynb|[\"']02\.\d+[\"']", p.read_text(encoding="utf-8"))}
    assert naming and check.plan({f"notebooks/{stem}.ipynb": "D"}).whole == naming, "what a removal breaks"
    assert check.plan({"tests/exercise_cases/nb02.py": "M"}).whole == naming, "what names a changed exercise"
    assert check.plan({"course_utils/machinery/exercises/nb02.toml": "M"}).whole == naming, "its texts changed"
    assert check.plan({f"notebooks/{stem}.ipynb": "M"}).whole == set()
    assert check.plan({"translations/zh/README.po": "M"}).touched == {"README.md"}
    assert check.plan({"README.zh.md": "M"}).touched == {"README.md"} and not check.plan({"notes.md": "?"}).touched


def test_a_changed_course_map_runs_the_notebook_that_shows_it(monkeypatch: pytest.MonkeyPatch) -> None:
    old_map = "<!-- course-map:start -->old<!-- course-map:end -->"
    monkeypatch.setattr(check, "committed", lambda path, revision: old_map)
    assert check.COURSE_MAP_NOTEBOOK in check.plan({"README.md": "M"}).nbval
    monkeypatch.setattr(check, "committed", lambda path, revision: (ROOT / path).read_text(encoding="utf-8"))
    assert check.plan({"README.md": "M"}).nbval == set(), "prose of the README only"


def test_the_importers_of_a_module_directly_through_others_and_through_a_package() -> None:
    sources = {
        "pkg.a": "X = 1",
        "pkg.b": "from pkg.a import X",
        "pkg.c": "from pkg import b",
        "pkg.d": "import pkg.c as c",
        "tool": "subprocess.run(['python', '-m', 'pkg.d'])",
        "pkg": "from pkg.e import shown\n_LAZY = {'hidden': 'pkg.f'}",
        "user": "from pkg import shown",
        "other": "from pkg.ab import Y",  # another module whose name starts the same
        "helper": "VALUE = 2",
        "test_helper": "from helper import VALUE",
    }
    exports = {("pkg", "pkg.e"): {"shown"}}
    packages = frozenset({"pkg"})
    assert check.importers({"pkg.a"}, sources, exports, packages) == {"pkg.a", "pkg.b", "pkg.c", "pkg.d", "tool"}
    assert check.importers({"pkg.e"}, sources, exports, packages) == {"pkg.e", "user"}
    assert check.importers({"pkg.f"}, sources, exports, packages) == {"pkg.f"}, "a lazy name is no import"
    assert check.importers({"helper"}, sources, exports, packages) == {"helper", "test_helper"}


def test_a_changed_tool_runs_its_tests_and_no_notebook() -> None:
    chosen = check.plan({"tools/sync.py": "M"})
    assert "tests/test_sync.py" in chosen.whole and not chosen.nbval and not chosen.touched
    assert check.plan({"tests/test_check.py": "M"}).whole == {"tests/test_check.py"}
    assert "tests/test_sync.py" in check.plan({"tools/no_longer_here.py": "D", "tools/sync.py": "D"}).whole
    assert not check.plan({"tools/i18n/messages.py": "M"}).nbval, "course_utils' docstrings name it; no import"


def test_the_plugin_keeps_the_share_of_the_change_and_leaves_out_what_builds_the_whole_course(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def item(nodeid: str, params: dict | None = None, reads: tuple[str, ...] = (), fixtures: tuple[str, ...] = ()):
        markers = [pytest.mark.reads(*reads).mark] if reads else []
        return SimpleNamespace(nodeid=nodeid, callspec=params and SimpleNamespace(params=params), fixturenames=fixtures,
                               iter_markers=lambda name: [m for m in markers if m.name == name])

    items = [
        item("tests/test_editions.py::test_leaks[02]", {"path": ROOT / "notebooks/02_hook_lifecycle.ipynb"}),
        item("tests/test_editions.py::test_leaks[03]", {"path": ROOT / "notebooks/03_forward_hooks.ipynb"}),
        item("tests/test_editions.py::test_stub_keeps_the_def_line"),
        item("tests/test_editions.py::test_every_deck", fixtures=("course_editions",)),
        item("tests/test_exercises.py::test_right[02.3]", {"exercise_id": "02.3", "index": 0}),
        item("tests/test_exercises.py::test_right[12.3]", {"exercise_id": "12.3", "index": 0}),
        item("tests/test_zh_edition.py::test_current[README.md]", {"source": "README.md"}),
        item("tests/test_readme.py::test_map", reads=("notebooks/[0-9][0-9]_*.ipynb",)),
        item("tests/test_pins.py::test_lock", reads=("requirements.txt",)),
        item("tests/test_hooks.py::test_anything"),
        item("notebooks/02_hook_lifecycle.ipynb::Cell 0"),
    ]
    deselected: list = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    monkeypatch.setenv(check.PLAN_ENV, '{"whole": ["notebooks/02_hook_lifecycle.ipynb"], "touched": ["02"], '
                                       '"changed": ["notebooks/02_hook_lifecycle.ipynb"]}')
    check.pytest_collection_modifyitems(config, items)
    assert [i.nodeid.split("::")[1] for i in items] == [
        "test_leaks[02]", "test_stub_keeps_the_def_line", "test_right[02.3]", "test_map", "Cell 0"]
    assert len(deselected) == 6
    assert check.names_touched({"source": "README.md"}, {"README.md"}) is True
    assert check.names_touched({"text": "chart.png", "size": 12.5}, {"12"}) is not None  # 12.5: an exercise id too


def _git(folder: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=folder, check=True,
                   capture_output=True)


def test_it_reads_the_change_from_git_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _git(tmp_path, "init", "-q", "-b", "main")
    for name, text in ((".gitignore", "build/\n"), ("a.md", "one\n"), ("b.md", "two\n")):
        (tmp_path / name).write_text(text)
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    monkeypatch.setattr(repo, "ROOT", tmp_path)
    assert repo.changes() == {}
    (tmp_path / "a.md").write_text("one, changed\n")
    (tmp_path / "b.md").unlink()
    (tmp_path / "new file.md").write_text("new\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "ignored.md").write_text("ignored\n")
    assert repo.changes() == {"a.md": "M", "b.md": "D", "new file.md": "?"}
    _git(tmp_path, "checkout", "-q", "-b", "topic")
    _git(tmp_path, "commit", "-q", "-am", "topic")
    assert repo.changes() == {"new file.md": "?"}
    assert repo.changes(base="main") == {"a.md": "M", "b.md": "D", "new file.md": "?"}
    assert repo.committed("a.md", "main") == "one\n" and repo.committed("b.md") is None
    with pytest.raises(repo.GitError, match="no-such-branch"):
        repo.changes(base="no-such-branch")


def test_make_check_calls_it_and_make_test_still_runs_everything() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^check: venv\n\t\$\(PY\) -m tools check ", makefile, re.MULTILINE)
    recipe = re.search(r"^test: .*?\n((?:\t.*\n|\s+\\.*\n)+)", makefile, re.MULTILINE)[1]
    assert "tests $(NOTEBOOKS)" in recipe and "tools check" not in recipe


def test_every_file_a_test_says_it_reads_exists() -> None:
    """A ``reads`` marker that matches no file is a rule that never fires: the file was renamed or removed."""
    missing = []
    for path in ROOT.glob("tests/**/test_*.py"):
        for marker in re.finditer(r"pytest\.mark\.reads\(([^)]*)\)", path.read_text(encoding="utf-8")):
            missing += [f"{path.name}: {glob}" for glob in re.findall(r"\"([^\"]+)\"", marker[1])
                        if not any(ROOT.glob(glob))]
    assert not missing, missing


@pytest.mark.parametrize("changed", [{"course_utils/course.toml": "M"},  # a fork sets translations_may_lag = true
                                     {"notebooks/10_hooks_at_scale.ipynb": "D", "course_utils/comm_hooks.py": "D",
                                      "course_utils/machinery/exercises/nb10.py": "D"}])  # a notebook removed
def test_a_lag_change_or_a_removal_runs_the_tests_it_can_break(changed: dict[str, str]) -> None:
    """What the real markers select: the sync report (it prints the lag setting) when course.toml changes, the usage
    lines (a docstring naming a removed module) when a module goes."""
    the_plan = check.plan(changed)
    wanted = {"whole": sorted(the_plan.whole), "changed": the_plan.changed, "touched": sorted(the_plan.touched)}
    files = ["tests/test_sync.py", "tests/test_usage_lines.py"]
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "tools.check",
                          "-p", "no:cacheprovider", *files], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, check.PLAN_ENV: json.dumps(wanted)}).stdout
    kept = {line.split("::")[0] for line in out.splitlines() if "::" in line}
    expected = {"tests/test_sync.py"} if "course_utils/course.toml" in changed else {"tests/test_usage_lines.py"}
    assert expected <= kept, out[-2000:]
