"""``make check`` (tools/check_change.py) picks the right set: for each kind of change, the notebooks nbval re-runs
in both languages, the test files it runs whole and each per-notebook file's share; it reads the change from git;
and ``make test`` still runs everything. Cheap: plans and a throw-away git repository, no test run."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools import check_change
from tools.check_change import plan

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def graph() -> check_change.ImportGraph:
    return check_change.import_graph()


def test_a_changed_notebook_runs_itself_in_both_languages_and_its_share_of_the_tests(graph) -> None:  # noqa: ANN001
    for name in ("notebooks/02_hook_lifecycle.ipynb", "notebooks/zh/02_hook_lifecycle.ipynb",
                 "translations/zh/02_hook_lifecycle.po"):
        chosen = plan([name], graph)
        assert chosen.nbval == {"02_hook_lifecycle"}, name
        assert chosen.notebook_paths() == ["notebooks/02_hook_lifecycle.ipynb", "notebooks/zh/02_hook_lifecycle.ipynb"]
        assert chosen.keys == {"02_hook_lifecycle", "02."}
        assert chosen.whole == {"tests/test_readme.py", "tests/test_instructor_guide.py"}
        assert not chosen.uncovered
        files = chosen.test_files()
        for per_notebook in ("tests/test_notebook_hygiene.py", "tests/test_zh_edition.py", "tests/test_exercises.py",
                             "tests/test_editions.py", "tests/test_figure_alt.py"):
            assert per_notebook in files
        assert "tests/test_website.py" not in files and "tests/test_hooks.py" not in files


def test_a_changed_course_map_runs_the_notebook_that_shows_it(graph) -> None:  # noqa: ANN001
    added = plan(["notebooks/13_mine.ipynb", "README.md", "course_utils/machinery/exercises/nb13.py"], graph,
                 course_map=True)
    assert check_change.COURSE_MAP_NOTEBOOK in added.nbval, "00_start_here prints the course map: its output changed"
    assert "12_transformer_hooks" not in added.nbval, "a new exercise module does not run the whole course"
    assert check_change.COURSE_MAP_NOTEBOOK not in plan(["README.md"], graph).nbval, "prose of the README only"


def test_an_exercise_check_runs_its_notebook_and_its_cases_only_their_tests(graph) -> None:  # noqa: ANN001
    checks = plan(["course_utils/machinery/exercises/nb06.py"], graph)
    assert checks.nbval == {"06_grad_cam"} and {"06.", "06_grad_cam"} <= checks.keys
    assert check_change.MESSAGES_TEST in checks.whole
    assert "tests/test_exercises.py" in checks.test_files(), "the exercise tests of 06 run, not only one node"
    cases = plan(["tests/exercise_cases/nb06.py"], graph)
    assert cases.nbval == set() and cases.keys == {"06."} and "tests/test_exercises.py" in cases.test_files()
    messages = plan(["course_utils/machinery/locale/zh/nb06.po"], graph)
    assert messages.nbval == {"06_grad_cam"} and check_change.MESSAGES_TEST in messages.whole


def test_a_changed_module_runs_the_tests_and_notebooks_that_import_it(graph) -> None:  # noqa: ANN001
    timeline = plan(["course_utils/timeline.py"], graph)
    assert "tests/test_timeline.py" in timeline.whole
    assert "02_hook_lifecycle" in timeline.nbval  # from course_utils.timeline import HookTimeline
    assert "tests/test_pins.py" not in timeline.whole and "12_transformer_hooks" not in timeline.nbval
    tool = plan(["tools/sync.py"], graph)
    assert tool.whole == {"tests/test_sync.py"} and not tool.nbval
    helper = plan(["tests/notebook_hygiene.py"], graph)
    assert "tests/test_notebook_hygiene.py" in helper.whole  # imported as a top-level module (tests/ on sys.path)
    assert plan(["tests/test_hooks.py"], graph).whole == {"tests/test_hooks.py"}


def test_guides_and_other_files_run_the_tests_that_read_them(graph) -> None:  # noqa: ANN001
    readme = plan(["README.md"], graph)
    assert readme.whole == {"tests/test_readme.py"} and readme.keys == {"README.md"} and not readme.nbval
    assert plan(["CONTRIBUTING.md"], graph).whole == {"tests/test_contributing.py"}
    assert "tests/test_structure.py" in plan(["Makefile"], graph).whole
    lag = plan(["translations/settings.toml"], graph)
    assert lag.whole == {"tests/test_zh_edition.py"}
    odd = plan(["tests/conftest.py", "notes.txt"], graph)
    assert not odd and set(odd.uncovered) == {"tests/conftest.py", "notes.txt"}


def test_a_per_notebook_test_is_kept_when_its_parameters_name_the_change() -> None:
    keys = {"02_hook_lifecycle", "02.", "README.md"}
    assert check_change.mentions({"path": ROOT / "notebooks" / "zh" / "02_hook_lifecycle.ipynb"}, keys)
    assert check_change.mentions({"exercise_id": "02.3", "index": 1}, keys)
    assert check_change.mentions({"source": "README.md"}, keys)
    assert not check_change.mentions({"exercise_id": "12.3", "index": 0}, keys)
    assert not check_change.mentions({"source": "notebooks/03_forward_hooks.ipynb"}, keys)


def test_the_plugin_keeps_the_share_and_leaves_out_what_builds_the_whole_course(monkeypatch) -> None:  # noqa: ANN001
    def item(nodeid: str, params: dict | None = None, fixtures: tuple[str, ...] = ()) -> SimpleNamespace:
        callspec = SimpleNamespace(params=params) if params is not None else None
        return SimpleNamespace(nodeid=nodeid, callspec=callspec, fixturenames=fixtures)

    items = [
        item("tests/test_editions.py::test_leaks[02_hook_lifecycle]", {"path": "notebooks/02_hook_lifecycle.ipynb"}),
        item("tests/test_editions.py::test_leaks[03_forward_hooks]", {"path": "notebooks/03_forward_hooks.ipynb"}),
        item("tests/test_editions.py::test_stub_keeps_the_def_line"),
        item("tests/test_editions.py::test_every_slide_deck", fixtures=("editions", "course_editions")),
        item("tests/test_readme.py::test_anything"),
        item("notebooks/02_hook_lifecycle.ipynb::Cell 0"),
    ]
    deselected = []
    config = SimpleNamespace(hook=SimpleNamespace(pytest_deselected=lambda items: deselected.extend(items)))
    monkeypatch.setenv(check_change.PLAN_ENV, '{"whole": ["tests/test_readme.py"], "keys": ["02_hook_lifecycle", "02."]}')
    check_change.pytest_collection_modifyitems(config, items)
    assert [i.nodeid for i in items] == [
        "tests/test_editions.py::test_leaks[02_hook_lifecycle]", "tests/test_editions.py::test_stub_keeps_the_def_line",
        "tests/test_readme.py::test_anything", "notebooks/02_hook_lifecycle.ipynb::Cell 0"]
    assert len(deselected) == 2


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True)


def test_it_reads_the_change_from_git(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "a.md").write_text("one\n")
    (tmp_path / "b.md").write_text("two\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "first")
    monkeypatch.setattr(check_change, "ROOT", tmp_path)
    assert check_change.changed_files() == []
    (tmp_path / "a.md").write_text("one, changed\n")
    (tmp_path / "new.md").write_text("new\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "ignored.md").write_text("ignored\n")
    assert check_change.changed_files() == ["a.md", "new.md"]
    _git(tmp_path, "checkout", "-q", "-b", "topic")
    _git(tmp_path, "add", "a.md")
    _git(tmp_path, "commit", "-q", "-m", "topic")
    assert check_change.changed_files() == ["new.md"]
    assert check_change.changed_files(base="main") == ["a.md", "new.md"]


def test_make_check_exists_and_make_test_still_runs_everything() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^check: venv\n\t\$\(PY\) -m tools\.check_change ", makefile, re.MULTILINE)
    recipe = re.search(r"^test: .*?\n((?:\t.*\n|\s+\\.*\n)+)", makefile, re.MULTILINE)[1]
    assert "tests $(NOTEBOOKS)" in recipe and "check_change" not in recipe


def test_every_test_the_rules_name_exists() -> None:
    named = [*check_change.PER_NOTEBOOK, *check_change.WITH_ANY_NOTEBOOK, check_change.MESSAGES_TEST,
             *(test for _pattern, tests, _keys in check_change.FILE_RULES for test in tests)]
    for test in named:
        file, _, name = test.partition("::")
        assert (ROOT / file).is_file(), f"tools/check_change.py names {file}, which does not exist"
        if name:
            assert re.search(rf"^def {name}\(", (ROOT / file).read_text(encoding="utf-8"), re.MULTILINE), test
