"""Where the course is published, and what a notebook opened on Colab or Kaggle needs to run.

:data:`REPOSITORY` is the repository's GitHub owner/name, from ``course_utils/course.toml``. ``tools/cloud_badges.py``
generates from it each notebook's "Open in Colab / Open in Kaggle" links and the guarded install lines at the top
of its first code cell (which do nothing in the course's own environment, and on Colab or Kaggle ``pip install`` the
course without touching torch); ``tests/test_cloud_badges.py`` checks every notebook carries exactly those. The
website's launch buttons (Colab, Kaggle, Binder: ``python -m tools.site``) are made from the same functions.

Every route opens the learner edition (the exercises as stubs, ``course_utils.machinery.learner_edition``) unless
``complete=True`` asks for the teaching notebook with every solution: Colab and Kaggle open a notebook from a GitHub
path, so the website's workflow (``.github/workflows/site.yml``) publishes the learner editions that ``make site``
writes (``notebooks/``, ``notebooks/zh/``) as the branch :data:`LEARNER_BRANCH`, made anew on every push to main;
Binder opens the learner's workspace that ``binder/postBuild`` prepares, with ``complete/`` beside it.

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
"""The branch ``.github/workflows/site.yml`` publishes the learner editions on (``notebooks/NN_x.ipynb``,
``notebooks/zh/``), made anew from ``make site``'s ``build/site/notebooks/`` on every push to main."""


def _notebook_path(notebook: str, complete: bool) -> str:
    return f"{REPOSITORY}/blob/{BRANCH if complete else LEARNER_BRANCH}/notebooks/{notebook}"


def colab_url(notebook: str, *, complete: bool = False) -> str:
    """The link that opens ``notebook`` (a path in notebooks/: ``"01_x.ipynb"``, ``"zh/01_x.ipynb"``) on Google Colab:
    its learner edition, or with ``complete=True`` the notebook with every solution.

    Usage: ``colab_url("00_start_here.ipynb")``
    """
    return f"https://colab.research.google.com/github/{_notebook_path(notebook, complete)}"


def kaggle_url(notebook: str, *, complete: bool = False) -> str:
    """The link that imports ``notebook`` into a new Kaggle notebook (its learner edition unless ``complete``).

    Usage: ``kaggle_url("00_start_here.ipynb")``
    """
    return f"https://kaggle.com/kernels/welcome?src=https://github.com/{_notebook_path(notebook, complete)}"


def binder_url(notebook: str, *, complete: bool = False) -> str:
    """The link that starts the course on mybinder.org (built from ``binder/``) and opens ``notebook`` from the
    learner's workspace that ``binder/postBuild`` prepares: ``workspace/`` for an English notebook, ``workspace-zh/``
    for a Chinese one (``"zh/01_tensor_hooks.ipynb"``), as ``make lab`` names them; ``complete=True``: the notebook
    with every solution, from the workspace's ``complete/``.

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

    It runs pip only on Colab (its kernel imports ``google.colab``) or Kaggle (``KAGGLE_KERNEL_RUN_TYPE`` is set),
    and only when course_utils is not importable yet; anywhere else it does nothing. The platform's torch and
    torchvision are named at their installed versions, so pip keeps them: inside the supported range the install
    goes through untouched; outside it pip stops with a conflict instead of downloading another torch.
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
