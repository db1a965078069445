"""Every notebook opens with its Colab and Kaggle links, a "Report a problem" link and a guarded install that does
nothing here and installs the course (never torch) on Colab or Kaggle; all generated from course_utils.machinery.cloud,
where the repository is named once."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import nbformat
import pytest

from course_utils.machinery import cloud, report_problem
from tools import cloud_badges

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("tools/compat/*.json", "course_utils/machinery/locale/*/tools.po",
                              "course_utils/course.toml")

REAL_FIND_SPEC = importlib.util.find_spec


def first_code(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    return next(cell for cell in notebook.cells if cell.cell_type == "code")


def test_the_generated_parts_are_up_to_date(capsys: pytest.CaptureFixture[str]) -> None:
    assert cloud_badges.main(["--check"]) == 0, capsys.readouterr().out  # python -m tools.cloud_badges --check


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem[:2])
def test_each_notebook_opens_with_its_own_links_and_the_guarded_install(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    opening = notebook.cells[0].source
    assert f"[Colab]({cloud.colab_url(path.name)})" in opening  # the learner edition first
    assert f"[Kaggle]({cloud.kaggle_url(path.name)})" in opening
    assert f"[Colab]({cloud.colab_url(path.name, complete=True)})" in opening  # then the complete notebook
    assert f"[Kaggle]({cloud.kaggle_url(path.name, complete=True)})" in opening
    assert f"[Report a problem]({report_problem.notebook_problem_url(path.name)})" in opening
    assert "**Last verified**" in opening and "binder/" in opening  # Binder stays offered
    code = first_code(notebook).source
    assert code.startswith(cloud_badges.INSTALL_START + "\n" + "\n".join(cloud.install_lines()) + "\n"
                           + cloud_badges.INSTALL_END)
    assert "setup_notebook(" in code  # still the set-up cell (the hygiene rule)


def test_the_report_link_is_the_same_in_every_environment_and_sends_no_code_or_paths(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def no_versions() -> str:
        raise AssertionError("a link stored in markdown must not hold the versions of the machine that wrote it")

    monkeypatch.setattr(report_problem, "versions_line", no_versions)
    for path in NOTEBOOKS:
        opening = nbformat.read(path, as_version=4).cells[0].source
        url = report_problem.notebook_problem_url(path.name)
        assert f"[Report a problem]({url})" in opening  # what the tool wrote is what any environment computes
        parsed = urlparse(url)
        assert (parsed.netloc, parsed.path) == ("github.com", f"/{cloud.REPOSITORY}/issues/new")
        fields = {key: values[0] for key, values in parse_qs(parsed.query).items()}
        assert set(fields) == {"title", "body"} and path.name in fields["title"]
        body = fields["body"]
        assert f"notebook: {path.name}" in body and report_problem.ASK_FOR_VERSIONS in body
        assert str(ROOT) not in url and "/home/" not in body and "def " not in body and "import torch" not in body


def test_check_covers_the_report_link(tmp_path: Path) -> None:
    copy = tmp_path / NOTEBOOKS[2].name
    shutil.copy(NOTEBOOKS[2], copy)
    assert not cloud_badges.update_notebook(copy, cloud_badges.verified(), write=False)
    notebook = nbformat.read(copy, as_version=4)
    link = f"[Report a problem]({report_problem.notebook_problem_url(copy.name)})"
    for edited in (notebook.cells[0].source.replace(link, "[Report a problem](https://example.org/elsewhere)"),
                   notebook.cells[0].source.replace(link, "")):
        notebook.cells[0].source = edited
        nbformat.write(notebook, copy)
        assert cloud_badges.update_notebook(copy, cloud_badges.verified(), write=False), "--check must notice it"
    assert cloud_badges.update_notebook(copy, cloud_badges.verified()) is True
    assert not cloud_badges.update_notebook(copy, cloud_badges.verified(), write=False)
    assert nbformat.read(copy, as_version=4).cells[0].source.count(link) == 1


def run_install(monkeypatch: pytest.MonkeyPatch, *, colab: bool, kaggle: bool, installed: bool) -> list[Any]:
    """Execute the install lines as a notebook would, with pip replaced by a recorder."""
    calls: list[Any] = []
    monkeypatch.setattr(subprocess, "run", lambda *args, **kwargs: calls.append((args, kwargs)))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: (REAL_FIND_SPEC(name, *a) if installed else None) if name == "course_utils"
                        else REAL_FIND_SPEC(name, *a))
    monkeypatch.delitem(sys.modules, "google.colab", raising=False)
    monkeypatch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
    if colab:
        monkeypatch.setitem(sys.modules, "google.colab", type(sys)("google.colab"))
    if kaggle:
        monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    exec("\n".join(cloud.install_lines()), {})
    return calls


@pytest.mark.parametrize("platform", ["colab", "kaggle"])
def test_it_installs_the_course_and_not_torch_on_colab_or_kaggle_only(platform: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_install(monkeypatch, colab=False, kaggle=False, installed=True) == []
    assert run_install(monkeypatch, colab=False, kaggle=False, installed=False) == []  # not a cloud: never pip
    calls = run_install(monkeypatch, colab=platform == "colab", kaggle=platform == "kaggle", installed=False)
    assert len(calls) == 1
    (command,), kwargs = calls[0]
    assert command[1:5] == ["-m", "pip", "install", "--quiet"] and command[5] == cloud.install_requirement()
    assert kwargs == {"check": True}
    # torch and torchvision are held at the versions installed there: pip keeps them or stops, never replaces them
    assert command[6:] == [f"torch=={version('torch')}", f"torchvision=={version('torchvision')}"]
    assert not {"-U", "--upgrade", "--force-reinstall", "--upgrade-strategy"} & set(command), command
    # once installed (the next notebook of the same session), nothing runs
    assert run_install(monkeypatch, colab=platform == "colab", kaggle=platform == "kaggle", installed=True) == []


def test_the_repository_is_named_in_one_place() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs the git checkout")
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True)
    naming = []
    for name in filter(None, listed.stdout.split("\0")):
        path = ROOT / name
        if not path.is_file() or path.suffix not in (".py", ".md", ".ipynb", ".toml", ".txt", ".yml", ".yaml", ""):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for start, end in ((cloud_badges.LINKS_START, cloud_badges.LINKS_END),
                           (cloud_badges.INSTALL_START, cloud_badges.INSTALL_END)):
            while start in text and end in text[text.index(start):]:  # generated from the constant: not a second place
                begin = text.index(start)
                text = text[:begin] + text[text.index(end, begin) + len(end):]
        if cloud.REPOSITORY in text:
            naming.append(name)
    assert naming == ["course_utils/course.toml"], naming


def test_the_tool_is_idempotent_and_replaces_only_its_own_block(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / NOTEBOOKS[1].name
    shutil.copy(NOTEBOOKS[1], copy)
    outputs = [cell.get("outputs") for cell in nbformat.read(copy, as_version=4).cells]
    monkeypatch.setattr(cloud, "REPOSITORY", "someone/elsewhere")
    assert cloud_badges.update_notebook(copy, {}) is True
    once = copy.read_text(encoding="utf-8")
    assert cloud_badges.update_notebook(copy, {}) is False and copy.read_text(encoding="utf-8") == once
    notebook = nbformat.read(copy, as_version=4)
    assert "someone/elsewhere" in notebook.cells[0].source and "pytorch-hooks-course/" not in notebook.cells[0].source
    assert "https://github.com/someone/elsewhere/issues/new?" in notebook.cells[0].source  # the report link too
    assert notebook.cells[0].source.count(cloud_badges.LINKS_START) == 1
    assert first_code(notebook).source.count(cloud_badges.INSTALL_START) == 1
    data = {copy.stem: {"colab-2026-08-19": {"torch": "2.11.0", "date": "2026-11-25"}}}
    assert cloud_badges.update_notebook(copy, data) is True
    assert ("**Last verified** (`make test-compat`): torch 2.11.0 (Colab's packages of 2026-08-19) on 2026-11-25."
            in nbformat.read(copy, as_version=4).cells[0].source)
    assert [cell.get("outputs") for cell in nbformat.read(copy, as_version=4).cells] == outputs, "outputs untouched"
