"""A link that opens a prefilled issue on the course's repository (``cloud.REPOSITORY``): what a learner clicks when
the course is wrong. It names the notebook, the exercise and the versions of course_utils, torch and Python -- never
the learner's code, outputs or file paths. The static link in each notebook's opening cell asks for the versions.

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

__all__ = ["ProblemLink", "notebook_of", "notebook_problem_url", "problem_url", "report_problem", "versions_line"]

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


def _checked(pattern: re.Pattern[str], value: str, example: str) -> str:
    """``value`` when it matches ``pattern`` (so nothing else, a path or code, gets into a link), else ValueError."""
    if not pattern.fullmatch(str(value)):
        raise ValueError(f"{'exercise' if pattern is _EXERCISE else 'notebook'} looks like {example!r}, got {value!r}")
    return value


def notebook_of(exercise: str) -> str | None:
    """The notebook file that exercise ``"06.1"`` is in (``"06_grad_cam.ipynb"``); ``None`` where it cannot be known.

    Usage: ``notebook_of("06.1")``
    """
    number = _checked(_EXERCISE, exercise, "06.1").split(".")[0]
    try:
        found = [path.name for path in notebooks_folder().glob(f"{number}_*.ipynb") if _NOTEBOOK.fullmatch(path.name)]
    except FileNotFoundError:
        return None
    return found[0] if len(found) == 1 else None


def problem_url(exercise: str | None = None, notebook: str | None = None) -> str:
    """The link to a new issue on the course's repository, prefilled with the exercise, its notebook (found with
    :func:`notebook_of` when not given) and :func:`versions_line`. Usage: ``problem_url("06.1")``
    """
    if exercise is not None and notebook is None:
        notebook = notebook_of(exercise)
    return _issue_url(exercise, notebook, versions_line())


class ProblemLink:
    """The line under a ✗: "Think the check itself is wrong?" and a link to report it. In a notebook (HTML) the
    link is a few words hiding the prefilled issue's long address; as plain text, a short address (no body).

    Usage: ``print(ProblemLink("06.1"))`` (in a notebook, ``IPython.display.display`` shows the link)"""

    def __init__(self, exercise: str) -> None:
        self.exercise = exercise
        self.url = problem_url(exercise=exercise)

    def __str__(self) -> str:
        title = urlencode({"title": f"Problem in exercise {self.exercise}"})
        return _("Think the check itself is wrong? {url}").format(
            url=f"https://github.com/{cloud.REPOSITORY}/issues/new?{title}")

    __repr__ = __str__

    def _repr_html_(self) -> str:
        label = html.escape(_("report it"))
        link = f'<a href="{html.escape(self.url)}" target="_blank" rel="noopener">{label}</a>'
        return html.escape(_("Think the check itself is wrong? {url}")).replace("{url}", link) + html.escape(
            _(" (a prefilled issue; no code or paths are sent)"))


def notebook_problem_url(notebook: str) -> str:
    """The link that each notebook's opening cell carries (``tools/cloud_badges.py`` writes it there): static text,
    so the issue asks the reader to paste :func:`versions_line`'s line. Usage: ``notebook_problem_url("06_x.ipynb")``
    """
    _checked(_NOTEBOOK, notebook, "06_grad_cam.ipynb")
    return _issue_url(None, notebook, ASK_FOR_VERSIONS,
                      exercise_hint=f"the exercise's id ({notebook[:2]}.1), if it is about one")


def _issue_url(exercise: str | None, notebook: str | None, versions: str, exercise_hint: str = "-") -> str:
    if exercise is not None:
        _checked(_EXERCISE, exercise, "06.1")
    if notebook is not None:
        _checked(_NOTEBOOK, notebook, "06_grad_cam.ipynb")
    if exercise:
        title = f"Problem in exercise {exercise} ({notebook or 'notebook ' + exercise.split('.')[0]})"
    else:
        title = f"Problem in {notebook or 'the course'}"
    # where the file name cannot be known (course_utils installed without its notebooks): say what is known
    unknown = f"number {exercise.split('.')[0]} (its file name was not found here)" if exercise else "-"
    body = "\n".join([
        "**What happened** (what you ran, what you saw; please no personal paths):",
        "",
        "",
        "**What you expected:**",
        "",
        "",
        "---",
        f"notebook: {notebook or unknown}",
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
