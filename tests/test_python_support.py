"""Python 3.11-3.13: pyproject.toml, the Makefile's check and doctor() agree, and the Makefile's environment set-up
refuses another Python (or another venv's Python) with a message saying what to run. Also: the Makefile hashes the
pins with Python (no sha256sum, which macOS lacks), and the build backend used without isolation is the pinned one."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from course_utils.machinery.env_check import SUPPORTED_PYTHONS
from course_utils.machinery.pins import read_pins

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_requires_python_the_makefile_and_doctor_agree() -> None:
    requires = SpecifierSet(PYPROJECT["project"]["requires-python"])
    allowed = tuple(f"3.{minor}" for minor in range(6, 20) if requires.contains(f"3.{minor}.0"))
    makefile = re.search(r"^PYTHONS := (.+)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.MULTILINE)
    assert makefile, "the Makefile names its supported Pythons in one line: PYTHONS := 3.11 3.12 3.13"
    assert allowed == SUPPORTED_PYTHONS == tuple(makefile.group(1).split()) == ("3.11", "3.12", "3.13")
    classifiers = {c.rsplit(" :: ", 1)[1] for c in PYPROJECT["project"]["classifiers"] if "Python :: 3." in c}
    assert classifiers == set(SUPPORTED_PYTHONS)


def test_environment_yml_and_binder_use_a_supported_python() -> None:
    conda = re.search(r"^\s*-\s*python=(\d+\.\d+)\s*$", (ROOT / "environment.yml").read_text(), re.MULTILINE)
    assert conda and conda.group(1) in SUPPORTED_PYTHONS
    binder = (ROOT / "binder" / "runtime.txt").read_text().strip()
    assert binder.removeprefix("python-") in SUPPORTED_PYTHONS


def test_the_build_backend_range_holds_the_pinned_setuptools() -> None:
    # make venv installs course_utils with --no-build-isolation: the setuptools installed from requirements.txt
    # builds it, and pip's --check-build-dependencies refuses one outside pyproject's range.
    (requirement,) = (Requirement(r) for r in PYPROJECT["build-system"]["requires"])
    assert requirement.name == "setuptools"
    assert requirement.specifier.contains(read_pins()["setuptools"])
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for line in makefile.splitlines():
        if "--no-build-isolation" in line:
            assert "--check-build-dependencies" in line, line


# --- the Makefile, run for real (make -n prints without running; the checks run with fake Pythons) -----------------


def fake_python(folder: Path, version: tuple[int, int]) -> Path:
    """An executable that is this test's Python, but reports ``version`` as sys.version_info."""
    site = folder / f"site{version[0]}{version[1]}"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(
        f"import sys\nsys.version_info = ({version[0]}, {version[1]}, 0, 'final', 0)\n", encoding="utf-8"
    )
    script = folder / f"python{version[0]}.{version[1]}"
    script.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" "$@"\n', encoding="utf-8")
    script.chmod(0o755)
    return script


def run_make(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MAKE", "MFLAGS"))}
    env["PATH"] = path
    return subprocess.run([MAKE, "--no-print-directory", "-C", str(ROOT), *args], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


pytestmark = [pytest.mark.skipif(MAKE is None, reason="make is not installed"),
              pytest.mark.reads("requirements.txt", "pyproject.toml")]  # make check: these files


def test_the_makefile_hashes_the_pins_with_python_not_sha256sum(tmp_path: Path) -> None:
    empty = tmp_path / "bin"  # PATH holds nothing: no sha256sum, no cut, no cat
    empty.mkdir()
    result = run_make("-n", "venv", f"PYTHON={sys.executable}", f"VENV={tmp_path / 'venv'}", path=str(empty))
    assert result.returncode == 0, result.stderr
    data = b"".join((ROOT / name).read_bytes() for name in ("requirements.txt", "pyproject.toml"))
    expected = f"py{sys.version_info[0]}.{sys.version_info[1]}-{hashlib.sha256(data).hexdigest()[:16]}"
    assert f'test -n "{expected}"' in result.stdout


@pytest.mark.parametrize("version", [(3, 10), (3, 14)])
def test_an_unsupported_python_is_refused_before_any_venv_is_made(version: tuple[int, int], tmp_path: Path) -> None:
    python = fake_python(tmp_path, version)
    venv = tmp_path / "venv"
    result = run_make("venv", f"PYTHON={python}", f"VENV={venv}", path=os.environ["PATH"])
    assert result.returncode != 0
    assert f"is Python {version[0]}.{version[1]}; the course runs on Python 3.11 3.12 3.13" in result.stderr
    assert "make venv PYTHON=python3.12 VENV=.venv312" in result.stderr
    assert not venv.exists()


def test_a_venv_of_another_python_is_refused_with_the_folder_to_use(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    shutil.copy(fake_python(tmp_path, (3, 11)), venv / "bin" / "python")
    result = run_make("test", f"PYTHON={fake_python(tmp_path, (3, 12))}", f"VENV={venv}", path=os.environ["PATH"])
    assert result.returncode != 0
    assert f"{venv} was made with Python 3.11, not with PYTHON=" in result.stderr
    assert "One folder per Python: make test PYTHON=" in result.stderr and "VENV=.venv312" in result.stderr
    assert not list(venv.glob(".installed-*"))


def test_a_python_that_does_not_run_is_named(tmp_path: Path) -> None:
    result = run_make("venv", "PYTHON=python3.99-missing", f"VENV={tmp_path / 'venv'}", path=os.environ["PATH"])
    assert result.returncode != 0
    assert "Cannot run PYTHON=python3.99-missing" in result.stderr
