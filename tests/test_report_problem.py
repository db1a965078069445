"""'Report a problem': a prefilled issue link with the notebook, the exercise and versions -- never code or paths."""

from __future__ import annotations

import importlib.metadata
import platform
import re
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from course_utils import check
from course_utils.machinery import report_problem as report_problem_module
from course_utils.machinery.cloud import REPOSITORY
from course_utils.machinery.exercises import catalogue
from course_utils.machinery.report_problem import (
    ASK_FOR_VERSIONS,
    ProblemLink,
    notebook_of,
    notebook_problem_url,
    problem_url,
    report_problem,
)

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def fields(url: str) -> dict[str, str]:
    parsed = urlparse(url)
    assert (parsed.scheme, parsed.netloc, parsed.path) == ("https", "github.com", f"/{REPOSITORY}/issues/new")
    return {key: values[0] for key, values in parse_qs(parsed.query).items()}


def test_the_link_names_the_exercise_its_notebook_and_the_versions() -> None:
    query = fields(problem_url(exercise="06.1"))
    assert query["title"] == "Problem in exercise 06.1 (06_grad_cam.ipynb)"
    assert "notebook: 06_grad_cam.ipynb" in query["body"] and "notebook: -" not in query["body"]
    assert "exercise: 06.1" in query["body"] and f"torch {importlib.metadata.version('torch')}" in query["body"]
    assert f"Python {platform.python_version()}" in query["body"] and "course_utils " in query["body"]
    assert fields(problem_url(notebook="11_hook_clinic.ipynb"))["title"] == "Problem in 11_hook_clinic.ipynb"
    assert fields(problem_url())["title"] == "Problem in the course"


def test_each_exercise_names_its_own_notebook() -> None:
    for exercise_id, item in catalogue().items():
        notebook = notebook_of(exercise_id)
        assert notebook is not None and notebook.startswith(f"{item.notebook}_"), (exercise_id, notebook)
        assert (NOTEBOOKS / notebook).is_file()
        assert f"notebook: {notebook}" in fields(problem_url(exercise=exercise_id))["body"]
    assert notebook_of("99.1") is None  # an exercise of no notebook falls back
    assert "notebook: number 99" in fields(problem_url(exercise="99.1"))["body"]


def test_without_the_notebooks_the_link_says_what_it_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_notebooks(lang: str = "en") -> Path:
        raise FileNotFoundError("course_utils installed without its notebooks")

    monkeypatch.setattr(report_problem_module, "notebooks_folder", no_notebooks)
    assert notebook_of("06.1") is None
    query = fields(problem_url(exercise="06.1"))
    assert query["title"] == "Problem in exercise 06.1 (notebook 06)"
    assert "notebook: number 06 (its file name was not found here)" in query["body"]


@pytest.mark.parametrize("bad", ["/home/ada/secret.ipynb", "06.1; rm -rf", "def f(): pass", "../06_grad_cam.ipynb"])
def test_nothing_but_an_id_or_a_notebook_name_gets_in(bad: str) -> None:
    with pytest.raises(ValueError):
        problem_url(exercise=bad)
    with pytest.raises(ValueError):
        problem_url(notebook=bad)


def test_the_notebooks_static_link_asks_for_the_versions_instead_of_guessing_them() -> None:
    query = fields(notebook_problem_url("06_grad_cam.ipynb"))
    assert query["title"] == "Problem in 06_grad_cam.ipynb"
    assert "notebook: 06_grad_cam.ipynb" in query["body"] and "exercise: the exercise's id (06.1)" in query["body"]
    assert ASK_FOR_VERSIONS in query["body"]
    assert f"torch {importlib.metadata.version('torch')}" not in query["body"]
    assert f"Python {platform.python_version()}" not in query["body"]
    for bad in ("/home/ada/06_grad_cam.ipynb", "../06_grad_cam.ipynb", "06.1"):
        with pytest.raises(ValueError):
            notebook_problem_url(bad)


def test_report_problem_prints_the_link(capsys: pytest.CaptureFixture[str]) -> None:
    url = report_problem("03.2")
    assert url in capsys.readouterr().out and fields(url)["title"].startswith("Problem in exercise 03.2")


def test_a_failed_check_offers_the_link_without_the_learners_code(capsys: pytest.CaptureFixture[str]) -> None:
    secret = "a-learner-secret-value"

    def hook(grad):
        return grad * 0 if secret else grad

    assert not check("01.1", hook)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("✗ Exercise 01.1") and out[1].startswith("Think the check itself is wrong? https://")
    assert fields(out[1].split("wrong? ")[1]) == {"title": "Problem in exercise 01.1"}  # plain text: short
    assert len(out[1]) < 150 and secret not in out[1]
    html = ProblemLink("01.1")._repr_html_()   # in a notebook: a few words that link to the prefilled issue
    href = re.search(r'<a href="([^"]+)"', html).group(1).replace("&amp;", "&")
    body = fields(href)["body"]
    assert secret not in html and "exercise: 01.1" in body and "notebook: 01_tensor_hooks.ipynb" in body
    assert re.sub(r"<[^>]+>", "", html).startswith("Think the check itself is wrong? report it")


def test_in_a_notebook_the_cross_line_is_followed_by_a_link_not_an_address(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """JupyterLab, Colab and Kaggle render the display's HTML (a link); a plain-text front end shows its short text."""
    import IPython

    shown = []

    class Kernel:  # what get_ipython() returns inside a notebook: a shell with a kernel
        kernel = object()

    monkeypatch.setattr(IPython, "get_ipython", lambda: Kernel())
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    assert not check("01.1", lambda grad: grad * 0)
    out = capsys.readouterr().out
    assert "Think the check" not in out and len(shown) == 1
    bundle = {"text/html": shown[0]._repr_html_(), "text/plain": repr(shown[0])}
    assert 'href="https://github.com/' in bundle["text/html"] and len(bundle["text/plain"]) < 150
