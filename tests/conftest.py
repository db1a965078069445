"""Make tests/ and the repository root importable; mark each test with its cost (unit, notebooks, browser, hub: ``make
unit``, ``make nbval``, ``make test-browser``, ``make test-hub``); group and order ``make test``'s work so that its
two workers finish together (``work_unit``)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
# check() records each attempt in the learner's progress record (course_utils.machinery.progress_record): never from the
# tests, their notebook kernels or the servers they start, unless a test asks for it.
os.environ["COURSE_PROGRESS"] = "off"
# The English notebooks' stored outputs are English: a COURSE_LANG of the shell running the tests must not reach
# their kernels (the Chinese notebooks choose Chinese themselves, with setup_notebook(lang="zh")).
os.environ.pop("COURSE_LANG", None)


def worker_threads() -> int | None:
    """torch's thread count for one xdist worker: the cores shared out among the workers; None outside xdist. (Two
    threads per worker on two busy cores only contend: OpenMP's spinning doubled tests/test_saliency.py's CPU.)"""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers < 2:
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // workers)


# Before torch is imported (the test modules import it): this process and what it starts (nbval's kernels, servers,
# distributed workers) get the same count, unless OMP_NUM_THREADS was given. The notebooks set their own one thread
# (setup_notebook), so their outputs do not depend on it.
if worker_threads() is not None:
    os.environ.setdefault("OMP_NUM_THREADS", str(worker_threads()))
    if "torch" in sys.modules:  # imported already (by a plugin): too late for the variable
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
for path in (TESTS.parent, TESTS):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

# -- scheduling ------------------------------------------------------------------------------------------------------
# A work unit is what one xdist worker runs from start to end: a test file (nbval's cells share a kernel, a browser
# module its server and browser); the JupyterLab notebooks in two halves of about equal time; the editions' tests
# with the browser checks of their pages (one ``course_editions`` build), the website's likewise (``course_site``).
# The units go out longest first, the notebooks by their measured time, so no long unit starts last.
JUPYTERLAB = "tests/browser/test_jupyterlab.py"
EDITIONS = "tests/test_editions.py"
SITE = "tests/test_website.py"
SAME_UNIT = {"tests/browser/test_static_maths.py": EDITIONS, "tests/browser/test_site.py": SITE}
LONGEST_FIRST = ("tests/browser/test_hub.py", f"{JUPYTERLAB}@1", f"{JUPYTERLAB}@2", "tests/test_exercises.py", SITE,
                 EDITIONS)


def notebook_seconds() -> dict[str, float]:
    """Each notebook's run time measured by ``make timings`` (tools/notebook_timings.json), by file name."""
    try:
        seconds = json.loads((TESTS.parent / "tools" / "notebook_timings.json").read_text())["seconds"]
    except (OSError, ValueError, KeyError):
        return {}
    return {f"{stem}.ipynb": float(value) for stem, value in seconds.items()}


@functools.cache
def jupyterlab_halves() -> dict[str, int]:
    """Half 1 or 2 for each notebook: longest first, each to the half with less time so far."""
    seconds = notebook_seconds()
    totals = {1: 0.0, 2: 0.0}
    half = {}
    for name in sorted(seconds, key=lambda n: (-seconds[n], n)):
        chosen = min(totals, key=lambda h: (totals[h], h))
        half[name] = chosen
        totals[chosen] += seconds[name]
    return half


def work_unit(nodeid: str) -> str:
    """The unit a test belongs to: its file (the static maths pages: the editions' file), or
    ``tests/browser/test_jupyterlab.py@1`` / ``@2``."""
    file = nodeid.split("::", 1)[0]
    if file != JUPYTERLAB:
        return SAME_UNIT.get(file, file)
    if "[" in nodeid:
        return f"{file}@{jupyterlab_halves().get(nodeid.rsplit('[', 1)[1].rstrip(']'), 2)}"
    if "explorer" in nodeid:  # with 06, whose run it reuses
        return f"{file}@{jupyterlab_halves().get('06_grad_cam.ipynb', 1)}"
    return f"{file}@2"


def _rank(unit: str, seconds: dict[str, float]) -> tuple[int, float]:
    if unit in LONGEST_FIRST:
        return 0, LONGEST_FIRST.index(unit)
    name = Path(unit).name
    if name in seconds:
        return 1, -seconds[name]
    return 2, 0.0


COSTS = ("notebooks", "browser", "hub")  # pyproject.toml's markers; the rest is "unit" (make unit, nbval, ...)


@pytest.hookimpl(tryfirst=True)  # before -m selects by these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test's cost marker (nbval's cells: ``notebooks``; tests/browser: ``browser``; ``hub``: set by its files;
    else ``unit``); then the longest units first, each unit's tests together and in their own order (a stable sort)."""
    for item in items:
        if item.nodeid.split("::", 1)[0].endswith(".ipynb"):
            item.add_marker("notebooks")
        elif item.nodeid.startswith("tests/browser/"):
            item.add_marker("browser")
        if not any(item.get_closest_marker(name) for name in COSTS):
            item.add_marker("unit")
    seconds = notebook_seconds()
    position = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (*_rank(work_unit(item.nodeid), seconds), work_unit(item.nodeid),
                                 position[id(item)]))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unused when xdist is not loaded
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's scope scheduling, with ``work_unit`` as the scope."""
    from xdist.scheduler import LoadScopeScheduling

    class WorkUnitScheduling(LoadScopeScheduling):
        """Units in the order of the collection (``pytest_collection_modifyitems``), not by their number of tests
        as xdist orders them."""

        in_collection_order = False

        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not self.in_collection_order:
                first: dict[str, int] = {}
                for index, nodeid in enumerate(self.collection):
                    first.setdefault(self._split_scope(nodeid), index)
                self.workqueue = OrderedDict(sorted(self.workqueue.items(), key=lambda unit: first[unit[0]]))
                self.in_collection_order = True
            super()._assign_work_unit(node)

    return WorkUnitScheduling(config, log)


@contextmanager
def kept(name: str) -> Iterator[Path]:
    """``build/<name>``, a folder kept from one test run to the next, locked while in use (one run at a time)."""
    import fcntl

    folder = TESTS.parent / "build" / name
    folder.parent.mkdir(exist_ok=True)
    with open(folder.parent / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder


# What the editions are made from: built again when one of these changed since the last run.
EDITION_SOURCES = ("notebooks", "tools/build_editions.py", "tools/nbconvert_templates", "vendor",
                   "course_utils/machinery", "course_utils/course.toml", "requirements.txt")


@pytest.fixture(scope="session")
def course_editions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The learner and slides editions as ``tools.build_editions`` builds them into ``learner/`` and ``slides/``
    (read them, do not change them: copy what you need to change). Kept in build/test-editions and built again only
    when one of ``EDITION_SOURCES`` changed (the slides take 11 CPU-s); each run gets its own copy."""
    from tools import build_editions
    from tools.site.build import tree_digest

    out = tmp_path_factory.mktemp("editions") / "editions"
    digest = tree_digest(EDITION_SOURCES)
    with kept("test-editions") as folder:
        stamp = folder / "sources.sha256"
        if not stamp.exists() or stamp.read_text() != digest:
            shutil.rmtree(folder, ignore_errors=True)
            for builder in (build_editions.build_learner, build_editions.build_slides):
                builder(folder)
            stamp.write_text(digest)
        shutil.copytree(folder, out, symlinks=True)
    return out


@pytest.fixture(scope="session")
def course_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course's website, built once per worker process as ``make site`` builds it (``python -m tools.site``: both
    languages) into a temporary ``site/`` (read it, do not change it). Without the slides, which ``course_editions``
    builds and tests/test_editions.py and tests/browser/test_static_maths.py test. Sphinx's cache is kept in
    build/test-site-cache, so a second run rebuilds only the pages whose sources changed (one run at a time)."""
    from tools.site.build import build

    out = tmp_path_factory.mktemp("website") / "site"
    with kept("test-site-cache") as cache:
        build(out, cache, slides=False)
    return out
