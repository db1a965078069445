"""A link that opens a prefilled issue on the course's repository: what a learner clicks when the course is wrong.

The issue is prefilled with the notebook, the exercise id and the versions of course_utils, torch and Python --
never the learner's code, outputs or file paths. The repository is ``course_utils.machinery.cloud.REPOSITORY``.
The link in each notebook's opening cell (:func:`notebook_problem_url`, written there by ``tools/cloud_badges.py``)
is static text: it cannot know the reader's versions, so its issue asks for them instead.

Usage::

    from course_utils.machinery.report_problem import problem_url, report_problem
    report_problem("06.1")          # prints the link for exercise 06.1 (its notebook is filled in too)
    problem_url(notebook="06_grad_cam.ipynb")
"""

from __future__ import annotations

import html
import importlib.metadata
import platform
import re
from urllib.parse import urlencode

from course_utils.machinery import cloud
from course_utils.machinery.course import notebooks_folder
from course_utils.machinery.layout import EXERCISE_ID
from course_utils.machinery.messages import _

__all__ = ["ProblemLink", "notebook_of", "notebook_problem_url", "problem_link", "problem_url", "report_problem",
           "short_problem_url", "versions_line"]

_EXERCISE = re.compile(EXERCISE_ID)
_NOTEBOOK = re.compile(r"\d\d_[a-z0-9_]+(?:\.ipynb)?")
# What the static link's issue asks for in place of the versions (a link in a notebook's markdown cannot know them)
ASK_FOR_VERSIONS = ("versions: please run `from course_utils.machinery.report_problem import versions_line; "
                    "print(versions_line())` in the notebook and paste the line it prints here")


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions_line() -> str:
    """``course_utils 0.1.0 | torch 2.14.1 | Python 3.11.7`` (names and versions only).

    Usage: ``print(versions_line())``
    """
    return f"course_utils {_version('course-utils')} | torch {_version('torch')} | Python {platform.python_version()}"


def notebook_of(exercise: str) -> str | None:
    """The notebook file that exercise ``"06.1"`` is in (``"06_grad_cam.ipynb"``: the course notebook numbered 06);
    ``None`` where it cannot be known (no course notebooks here, or none with that number).

    Usage: ``notebook_of("06.1")``
    """
    if not _EXERCISE.fullmatch(str(exercise)):
        raise ValueError(f"exercise looks like '06.1', got {exercise!r}")
    try:
        folder = notebooks_folder()
    except FileNotFoundError:
        return None
    found = [path.name for path in folder.glob(f"{exercise.split('.')[0]}_*.ipynb") if _NOTEBOOK.fullmatch(path.name)]
    return found[0] if len(found) == 1 else None


def problem_url(exercise: str | None = None, notebook: str | None = None) -> str:
    """The link to a new issue on the course's repository, prefilled with what helps the maintainers.

    ``exercise`` (``"06.1"``) and ``notebook`` (``"06_grad_cam.ipynb"``) are checked against their patterns, so
    nothing else (a path, code) can end up in the link; given an exercise only, the link names its notebook too
    (:func:`notebook_of`). Usage: ``problem_url("06.1")``
    """
    if exercise is not None and notebook is None:
        notebook = notebook_of(exercise)
    return _issue_url(exercise, notebook, versions_line())


def short_problem_url(exercise: str) -> str:
    """A short link to a new issue titled with the exercise (no body): what a plain-text ✗ line shows, where a link
    cannot hide a long address behind a word. Usage: ``short_problem_url("06.1")``"""
    if not _EXERCISE.fullmatch(str(exercise)):
        raise ValueError(f"exercise looks like '06.1', got {exercise!r}")
    title = urlencode({"title": f"Problem in exercise {exercise}"})
    return f"https://github.com/{cloud.REPOSITORY}/issues/new?" + title


class ProblemLink:
    """The line under a ✗: "Think the check itself is wrong?" and a link to report it. In a notebook (JupyterLab,
    Colab, Kaggle: HTML) the link is a few words, behind which the prefilled issue's whole address hides; as plain
    text (a terminal, a script) it is :func:`short_problem_url`'s short address.

    Usage: ``print(problem_link("06.1"))`` (in a notebook, ``IPython.display.display`` shows the link)"""

    def __init__(self, exercise: str) -> None:
        self.exercise = exercise
        self.url = problem_url(exercise=exercise)

    def __str__(self) -> str:
        return _("Think the check itself is wrong? {url}").format(url=short_problem_url(self.exercise))

    __repr__ = __str__

    def _repr_html_(self) -> str:
        label = html.escape(_("report it"))
        link = f'<a href="{html.escape(self.url)}" target="_blank" rel="noopener">{label}</a>'
        return html.escape(_("Think the check itself is wrong? {url}")).replace("{url}", link) + html.escape(
            _(" (a prefilled issue; no code or paths are sent)"))


def problem_link(exercise: str) -> ProblemLink:
    """The "Think the check itself is wrong?" line of exercise ``exercise`` (see :class:`ProblemLink`)."""
    return ProblemLink(exercise)


def notebook_problem_url(notebook: str) -> str:
    """The link that each notebook's opening cell carries (``tools/cloud_badges.py`` writes it there).

    The same issue as ``problem_url(notebook=notebook)``, but the same text in every environment: a link stored in
    markdown cannot know the reader's versions, so the issue asks the reader to paste :func:`versions_line`'s line.
    Usage: ``notebook_problem_url("06_grad_cam.ipynb")``
    """
    if not _NOTEBOOK.fullmatch(str(notebook)):
        raise ValueError(f"notebook looks like '06_grad_cam.ipynb', got {notebook!r}")
    example = f"{notebook[:2]}.1"
    return _issue_url(None, notebook, ASK_FOR_VERSIONS,
                      exercise_hint=f"the exercise's id ({example}), if it is about one")


def _title(exercise: str | None, notebook: str | None) -> str:
    """"Problem in exercise 06.1 (notebook 06)", "Problem in 06_grad_cam.ipynb" or "Problem in the course"."""
    if exercise:
        return f"Problem in exercise {exercise} ({notebook or 'notebook ' + exercise.split('.')[0]})"
    return f"Problem in {notebook or 'the course'}"


def _unknown_notebook(exercise: str | None) -> str:
    # only where the file name cannot be known (course_utils installed without its notebooks): say what is known
    return f"number {exercise.split('.')[0]} (its file name was not found here)" if exercise else "-"


def _issue_url(exercise: str | None, notebook: str | None, versions: str, exercise_hint: str = "-") -> str:
    if exercise is not None and not _EXERCISE.fullmatch(str(exercise)):
        raise ValueError(f"exercise looks like '06.1', got {exercise!r}")
    if notebook is not None and not _NOTEBOOK.fullmatch(str(notebook)):
        raise ValueError(f"notebook looks like '06_grad_cam.ipynb', got {notebook!r}")
    title = _title(exercise, notebook)
    body = "\n".join([
        "**What happened** (what you ran, what you saw; please no personal paths):",
        "",
        "",
        "**What you expected:**",
        "",
        "",
        "---",
        f"notebook: {notebook or _unknown_notebook(exercise)}",
        f"exercise: {exercise or exercise_hint}",
        versions,
    ])
    return f"https://github.com/{cloud.REPOSITORY}/issues/new?" + urlencode({"title": title, "body": body})


def report_problem(exercise_or_notebook: str | None = None) -> str:
    """Print (and return) the link that opens a prefilled issue for an exercise or a notebook.

    Usage: ``report_problem("06.1")`` or ``report_problem("06_grad_cam.ipynb")``
    """
    value = exercise_or_notebook
    is_exercise = value is not None and _EXERCISE.fullmatch(value) is not None
    url = problem_url(exercise=value if is_exercise else None, notebook=None if is_exercise else value)
    print(_("Report a problem with the course (a prefilled issue; no code or paths are sent): {url}").format(url=url))
    return url
