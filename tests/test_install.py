"""The course as a learner installs it: the built wheel, in a fresh virtual environment, used from a temporary folder
with no checkout in sight; and `pip install` of it into an environment that already has a supported torch changes
nothing there.

The fresh environment borrows this environment's packages (a ``.pth`` line, so torch is not copied) and gets the
wheel itself with ``pip install --no-deps --no-index``; the dry run asks pip's resolver, offline, what installing the
wheel *with* its dependencies would change.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from course_utils.machinery.exercises import catalogue

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("pyproject.toml", "course_utils/course.toml",
                               "course_utils/machinery/exercises/*.toml")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The course's wheel, built from a copy of the checkout's tracked files (so no build/ lands in the checkout)."""
    source = tmp_path_factory.mktemp("source")
    listed = run(["git", "ls-files", "-z"], cwd=ROOT).stdout.split("\0") if (ROOT / ".git").exists() else []
    names = [n for n in listed if n and (ROOT / n).is_file()] or [
        str(p.relative_to(ROOT)) for folder in ("course_utils", "notebooks") for p in (ROOT / folder).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    ] + ["pyproject.toml", "README.md", "requirements.txt"]
    for name in names:
        if name.split("/")[0] in ("course_utils", "notebooks") or "/" not in name:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
         "--wheel-dir", str(out), str(source)])
    (built,) = out.glob("course_utils-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment that sees this environment's packages (torch, numpy, ...) but not course_utils."""
    prefix = tmp_path_factory.mktemp("env") / "venv"
    venv.EnvBuilder(with_pip=False).create(prefix)
    python = prefix / "bin" / "python"
    site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # a plain path line: the .pth files of this environment (its editable course_utils finder) are not processed
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def pip(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check", *args],
               env={**os.environ, "PIP_NO_INDEX": "1"})


def outside(python: Path, code: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with the fresh environment's Python in ``cwd``, without this session's PYTHONPATH (the checkout)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if check:
        return run([str(python), "-c", code], cwd=cwd, env=env)
    return subprocess.run([str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


PROBE = r"""
import json, sys, tempfile
from pathlib import Path
import course_utils, course_utils.machinery.pins as pins
from course_utils.machinery.course import course_map, notebooks_folder
from course_utils.machinery.workspace import prepare_workspace
from course_utils.images import load_photo
from course_utils.models import efficientnet_lite0, imagenet_categories
from course_utils.transformer import induction_transformer
report = course_utils.doctor(show=False)
workspace = Path(tempfile.mkdtemp()) / "workspace"
prepare_workspace(workspace, quiet=True)
chinese = Path(tempfile.mkdtemp()) / "workspace-zh"
prepare_workspace(chinese, quiet=True, lang="zh")
from course_utils.machinery.messages import catalogue
from course_utils.machinery.exercises import catalogue as exercises

print(json.dumps({
    "module": course_utils.__file__, "in_checkout": pins.in_checkout(), "notebooks": str(notebooks_folder()),
    "map": [row.file for row in course_map()], "doctor_ok": report.ok, "doctor": str(report),
    "workspace": sorted(p.name for p in workspace.glob("*.ipynb")),
    "complete": sorted(p.name for p in (workspace / "complete").glob("*.ipynb")),
    "photo": list(load_photo("cat|coffee").shape), "model": type(efficientnet_lite0()).__name__,
    "categories": len(imagenet_categories()),
    "transformer": sum(p.numel() for p in induction_transformer().parameters()),
    "zh_notebooks": str(notebooks_folder("zh")),
    "zh_workspace": sorted(p.name for p in chinese.glob("*.ipynb")),
    "zh_edition": json.loads((chinese / "01_tensor_hooks.ipynb").read_text())["metadata"]["language_edition"]["lang"],
    "zh_messages": len(catalogue("zh")._catalog),
    "exercises": {key: [item.task, item.kind, len(item.hints)] for key, item in exercises().items()},
}))
"""


def test_the_wheel_works_from_a_temporary_folder_without_the_checkout(wheel: Path, fresh_env: Path,
                                                                      tmp_path: Path) -> None:
    untracked = []
    if (ROOT / ".git").exists():  # the wheel is built from the tracked files only
        listed = run(["git", "ls-files", "--others", "--exclude-standard", "--", "notebooks"], cwd=ROOT).stdout
        untracked = sorted(name for name in listed.splitlines() if name.endswith(".ipynb"))
    assert not untracked, (f"new notebook not tracked by git: git add it ({', '.join(untracked)}); the wheel, like "
                           "a clone, holds only the files git tracks")
    pip(fresh_env, "install", "--quiet", "--no-deps", str(wheel))
    result = outside(fresh_env, PROBE, tmp_path)
    got = json.loads(result.stdout.splitlines()[-1])
    assert Path(got["module"]).is_relative_to(fresh_env.parent.parent), got["module"]  # the installed copy
    assert not got["in_checkout"]
    assert Path(got["notebooks"]).is_relative_to(fresh_env.parent.parent)
    assert got["map"] == NOTEBOOKS
    assert got["workspace"] == NOTEBOOKS and got["complete"] == NOTEBOOKS
    assert got["doctor_ok"], got["doctor"]
    assert "other course packages: all" in got["doctor"]  # ranges, not the lock, without a checkout
    assert got["photo"] == [224, 224, 3] and got["model"] and got["categories"] == 1000
    assert got["transformer"] == 109_824  # notebook 12's weights are package data in the wheel
    # the Chinese edition and the compiled message catalogue ship in the wheel
    assert Path(got["zh_notebooks"]).is_relative_to(fresh_env.parent.parent)
    assert got["zh_workspace"] == NOTEBOOKS and got["zh_edition"] == "zh"
    assert got["zh_messages"] > 500, "course.mo is missing from the wheel: check() would speak English only"
    # every exercise, with the texts of its exercises/nbNN.toml (package data of the wheel)
    assert got["exercises"] == {key: [item.task, item.kind, len(item.hints)] for key, item in catalogue().items()}


def test_without_its_notebooks_the_course_map_says_what_to_do(wheel: Path, fresh_env: Path, tmp_path: Path) -> None:
    pip(fresh_env, "install", "--quiet", "--no-deps", str(wheel))  # there already after the test above
    site = Path(outside(fresh_env, "import course_utils, pathlib; print(pathlib.Path(course_utils.__file__).parent)",
                        tmp_path).stdout.strip())
    assert site.is_relative_to(fresh_env.parent.parent)
    shutil.move(site / "notebooks", tmp_path / "hidden")  # put back afterwards (no second install)
    try:
        result = outside(fresh_env, "from course_utils.machinery.course import course_map; course_map()", tmp_path,
                         check=False)
        assert result.returncode != 0
        assert "FileNotFoundError" in result.stderr and "`pip install`" in result.stderr, result.stderr
    finally:
        shutil.move(tmp_path / "hidden", site / "notebooks")


def test_installing_with_dependencies_keeps_a_supported_torch(wheel: Path, fresh_env: Path) -> None:
    # pip's resolver, offline: with this environment's torch 2.14.1 (supported) installed, installing the course with
    # its dependencies would install the course alone -- no torch, no torchvision, no other version change.
    pip(fresh_env, "uninstall", "--quiet", "--yes", "course-utils")
    result = pip(fresh_env, "install", "--dry-run", "--quiet", "--report", "-", str(wheel))
    report = json.loads(result.stdout)
    would_install = sorted(item["metadata"]["name"] for item in report["install"])
    assert would_install == ["course-utils"], would_install
