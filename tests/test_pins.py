"""One set of pins: requirements.txt, environment.yml and the installed environment agree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from course_utils.pins import DISTRIBUTION, installed_pins, parse_pins, read_pins

ROOT = Path(__file__).resolve().parent.parent


def environment_yml_pins() -> dict[str, str]:
    lines = (ROOT / "environment.yml").read_text(encoding="utf-8").splitlines()
    pip_lines = [re.sub(r"^\s*-\s*", "", line) for line in lines if re.match(r"^\s+-\s+[A-Za-z0-9_.-]+==", line)]
    return parse_pins(pip_lines)


def test_environment_yml_has_exactly_the_same_pins() -> None:
    assert environment_yml_pins() == read_pins()


def test_environment_yml_uses_python_311_and_installs_course_utils() -> None:
    text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    assert re.search(r"^\s*-\s*python=3\.11\s*$", text, re.MULTILINE)
    assert "--editable ." in text


def test_required_pins_present() -> None:
    pins = read_pins()
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    for name in ("jupyterlab", "ipywidgets", "matplotlib", "numpy", "scikit-image", "scikit-learn", "tqdm",
                 "pytest", "nbval", "pytest-xdist"):
        assert name in pins, name


def test_installed_versions_match_the_pins() -> None:
    for name, version in read_pins().items():
        assert metadata.version(name).split("+")[0] == version, name


@pytest.mark.parametrize("line", ["torch>=2.0", "torch", "torch==2.*", "torch==2.14.1,<3",
                                  "torch @ https://example.org/torch.whl", "-e .", "torch===2.14.1", "torch==="])
def test_a_requirement_that_is_not_one_exact_version_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match=r"Line 2 is not an exact pin"):
        parse_pins(["numpy==2.4.6", line])


def test_names_are_normalised_and_comments_and_other_platforms_skipped() -> None:
    lines = ["# comment", "", "Scikit_Image==0.26.0  # inline", "torch==2.14.1+cpu",
             'pywin32==311; sys_platform == "no-such-platform"']
    assert parse_pins(lines) == {"scikit-image": "0.26.0", "torch": "2.14.1+cpu"}


def test_missing_requirements_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="make venv"):
        read_pins(tmp_path / "requirements.txt")


def test_installed_metadata_records_the_pins_of_requirements_txt() -> None:
    # pyproject.toml turns requirements.txt into Requires-Dist; a difference means the install is stale.
    assert installed_pins() == read_pins(), "the installed course_utils is older than requirements.txt: run `make venv`"


def test_no_checkout_and_no_installed_distribution_says_what_to_do() -> None:
    with pytest.raises(FileNotFoundError, match="make venv"):
        installed_pins("course-utils-not-installed-anywhere")


def test_project_name_is_the_distribution_read_when_installed() -> None:
    assert re.search(rf'^name = "{DISTRIBUTION}"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)


def test_a_non_editable_install_without_the_checkout_reads_its_own_metadata(tmp_path: Path) -> None:
    # A real wheel install (as `pip install git+...` would make) into a folder with no requirements.txt: read_pins()
    # must find the pins in the installed metadata. Built from a copy, so no build/ or egg-info lands in the checkout.
    source, site = tmp_path / "source", tmp_path / "site"
    shutil.copytree(ROOT / "course_utils", source / "course_utils", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "requirements.txt", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
         "--target", str(site), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    shutil.rmtree(source)  # the checkout is gone: only the installed files remain
    probe = "import json, course_utils.pins as p; print(json.dumps([p.__file__, p.read_pins()]))"
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True,
                            text=True, timeout=120)
    module_file, pins = json.loads(result.stdout)
    assert Path(module_file).is_relative_to(site), module_file  # the installed copy, not this checkout
    assert not (Path(module_file).parent.parent / "requirements.txt").exists()
    assert pins == read_pins()
