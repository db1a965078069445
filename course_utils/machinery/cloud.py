"""Where the course is published, and what a notebook opened on Colab or Kaggle needs to run.

:data:`REPOSITORY` is the repository's GitHub owner/name, from ``course_utils/course.toml``. ``tools/cloud_badges.py``
generates from it each notebook's "Open in Colab / Open in Kaggle" links and the guarded install lines at the top
of its first code cell (which do nothing in the course's own environment, and on Colab or Kaggle ``pip install`` the
course without touching torch); ``tests/test_cloud_badges.py`` checks every notebook carries exactly those. The
website's launch buttons (Colab, Kaggle, Binder: ``python -m tools.site``) are made from the same functions.

Usage: ``colab_url("01_tensor_hooks.ipynb")``; ``install_lines()`` -> the guarded install, as notebook source
"""

from __future__ import annotations

from course_utils.machinery.layout import SETTINGS

__all__ = ["BRANCH", "REPOSITORY", "binder_url", "colab_url", "install_lines", "install_requirement", "kaggle_url",
           "site_url"]

REPOSITORY = SETTINGS.repository
"""GitHub owner/name the course is published under: change it in ``course_utils/course.toml``, then ``make sync``."""
BRANCH = SETTINGS.branch
"""The branch the cloud links open and the install cell installs."""


def _notebook_path(notebook: str) -> str:
    return f"{REPOSITORY}/blob/{BRANCH}/notebooks/{notebook}"


def colab_url(notebook: str) -> str:
    """The link that opens ``notebook`` (a file name in notebooks/) on Google Colab.

    Usage: ``colab_url("00_start_here.ipynb")``
    """
    return f"https://colab.research.google.com/github/{_notebook_path(notebook)}"


def kaggle_url(notebook: str) -> str:
    """The link that imports ``notebook`` into a new Kaggle notebook.

    Usage: ``kaggle_url("00_start_here.ipynb")``
    """
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{_notebook_path(notebook)}"


def binder_url(notebook: str) -> str:
    """The link that starts the course on mybinder.org (built from ``binder/``) and opens ``notebook`` from the
    learner's workspace that ``binder/postBuild`` prepares: ``workspace/`` for an English notebook, ``workspace-zh/``
    for a Chinese one (``"zh/01_tensor_hooks.ipynb"``), as ``make lab`` names them.

    Usage: ``binder_url("00_start_here.ipynb")``
    """
    folder, _, name = notebook.rpartition("/")
    workspace = f"workspace-{folder}" if folder else "workspace"
    return f"https://mybinder.org/v2/gh/{REPOSITORY}/{BRANCH}?urlpath=lab/tree/{workspace}/{name}"


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

    It runs pip only on Colab (its kernel imports ``google.colab``) or Kaggle (``KAGGLE_KERNEL_RUN_TYPE`` is set),
    and only when course_utils is not importable yet; anywhere else it does nothing. The platform's torch and
    torchvision are named at their installed versions, so pip keeps them: inside the supported range the install
    goes through untouched; outside it pip stops with a conflict instead of downloading another torch.
    Usage: ``"\\n".join(install_lines())``
    """
    return [
        "# On Colab or Kaggle: install the course's helpers first, keeping the torch and torchvision there. Elsewhere: nothing.",
        "import importlib.metadata, importlib.util, os, subprocess, sys",
        'if ("google.colab" in sys.modules or "KAGGLE_KERNEL_RUN_TYPE" in os.environ) \\',
        '        and importlib.util.find_spec("course_utils") is None:',
        '    keep = [f"{name}=={importlib.metadata.version(name)}" for name in ("torch", "torchvision")',
        "            if importlib.util.find_spec(name)]  # pip must not replace them",
        f'    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "{install_requirement()}", *keep], check=True)',
    ]
