"""One set of pins: requirements.txt, environment.yml and the installed environment agree."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest

from course_utils.pins import parse_pins, read_pins

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


def test_a_loose_requirement_is_refused() -> None:
    with pytest.raises(ValueError, match="not an exact pin"):
        parse_pins(["torch>=2.0"])
    assert parse_pins(["# comment", "", "Scikit_Image==0.26.0  # inline"]) == {"scikit-image": "0.26.0"}


def test_missing_requirements_file_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="make venv"):
        read_pins(tmp_path / "requirements.txt")
