"""Where the course is published, and what a notebook opened on Colab or Kaggle needs to run.

:data:`REPOSITORY` (from ``course_utils/course.toml``) gives each notebook's "Open in Colab / Kaggle" links and the
guarded install lines of its first code cell (``tools/cloud_badges.py`` writes them) and the website's launch
buttons. Every route opens the learner edition (published as the branch :data:`LEARNER_BRANCH` by
``.github/workflows/site.yml``) unless ``complete=True`` asks for the notebook with every solution; Binder opens the
workspace that ``binder/postBuild`` prepares, with ``complete/`` beside it.

Usage: ``colab_url("01_tensor_hooks.ipynb")``; ``install_lines()`` -> the guarded install, as notebook source
"""

from __future__ import annotations

from course_utils.machinery.layout import COMPLETE, SETTINGS

__all__ = ["BRANCH", "LEARNER_BRANCH", "REPOSITORY", "binder_url", "colab_url", "install_lines", "install_requirement",
           "kaggle_url", "site_url"]

REPOSITORY = SETTINGS.repository
"""GitHub owner/name the course is published under: change it in ``course_utils/course.toml``, then ``make sync``."""
BRANCH = SETTINGS.branch
"""The branch the complete notebooks' cloud links open, the install cell installs and Binder builds."""
LEARNER_BRANCH = "learner"
"""The branch the learner editions are published on (made anew from ``make site``'s output on every push to main)."""


def _notebook_path(notebook: str, complete: bool) -> str:
    return f"{REPOSITORY}/blob/{BRANCH if complete else LEARNER_BRANCH}/notebooks/{notebook}"


def colab_url(notebook: str, *, complete: bool = False) -> str:
    """The link that opens ``notebook`` (``"01_x.ipynb"``, ``"zh/01_x.ipynb"``) on Google Colab.

    Usage: ``colab_url("00_start_here.ipynb")``
    """
    return f"https://colab.research.google.com/github/{_notebook_path(notebook, complete)}"


def kaggle_url(notebook: str, *, complete: bool = False) -> str:
    """The link that imports ``notebook`` into a new Kaggle notebook (its learner edition unless ``complete``).

    Usage: ``kaggle_url("00_start_here.ipynb")``
    """
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{_notebook_path(notebook, complete)}"


def binder_url(notebook: str, *, complete: bool = False) -> str:
    """The link that starts the course on mybinder.org and opens ``notebook`` in the workspace ``binder/postBuild``
    prepares (``workspace/``, or ``workspace-zh/`` for ``"zh/01_x.ipynb"``; ``complete=True``: its ``complete/``).

    Usage: ``binder_url("00_start_here.ipynb")``
    """
    folder, _, name = notebook.rpartition("/")
    workspace = f"workspace-{folder}" if folder else "workspace"
    where = f"{workspace}/{COMPLETE}" if complete else workspace
    return f"https://mybinder.org/v2/gh/{REPOSITORY}/{BRANCH}?urlpath=lab/tree/{where}/{name}"


def site_url() -> str:
    """Where the course's website is published: the repository's GitHub Pages (``.github/workflows/site.yml``).

    Usage: ``site_url() + "zh/"`` (the Chinese edition)
    """
    owner, name = REPOSITORY.split("/")
    return f"https://{owner}.github.io/{name}/"


def install_requirement() -> str:
    """What the cloud install cell gives pip: the course from its repository (dependencies as ranges, so the
    platform's torch, torchvision, numpy... stay as they are when they are supported).

    Usage: ``pip install "<install_requirement()>"``
    """
    return f"course-utils @ git+https://github.com/{REPOSITORY}@{BRANCH}"


def install_lines() -> list[str]:
    """The guarded install that opens each notebook's first code cell, one source line each (no newline).

    It runs pip only on Colab or Kaggle, when course_utils is not importable yet. The platform's torch and
    torchvision are named at their installed versions, so pip keeps them (outside the supported range pip stops
    with a conflict instead of downloading another torch).
    Usage: ``"\\n".join(install_lines())``
    """
    return [
        "# On Colab or Kaggle: install the course's helpers first, keeping the torch and torchvision there. "
        "Elsewhere: nothing.",
        "import importlib.metadata, importlib.util, os, subprocess, sys",
        'if ("google.colab" in sys.modules or "KAGGLE_KERNEL_RUN_TYPE" in os.environ) \\',
        '        and importlib.util.find_spec("course_utils") is None:',
        '    keep = [f"{name}=={importlib.metadata.version(name)}" for name in ("torch", "torchvision")',
        "            if importlib.util.find_spec(name)]  # pip must not replace them",
        f'    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "{install_requirement()}", *keep], '
        'check=True)',
    ]
