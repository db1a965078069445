"""One lock and one set of ranges: requirements.txt holds the exact versions (make lab, make test, environment.yml
read it); pyproject.toml declares the supported ranges, and the lock and Colab's snapshot both lie inside them."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from course_utils.machinery.pins import (
    DISTRIBUTION,
    installed_ranges,
    parse_pins,
    parse_ranges,
    read_pins,
    supported_ranges,
)

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("requirements.txt", "pyproject.toml", "environment.yml")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
COLAB = ROOT / "tools" / "compat" / "colab-packages.txt"


def declared() -> dict[str, list[Requirement]]:
    """pyproject's requirements: "" for the core dependencies, then each extra."""
    project = PYPROJECT["project"]
    groups = {"": project["dependencies"], **project["optional-dependencies"]}
    return {group: [Requirement(line) for line in lines] for group, lines in groups.items()}


def test_environment_yml_installs_the_lock_from_requirements_txt_on_python_311() -> None:
    # no second copy of the pins: conda's pip section reads requirements.txt itself
    text = (ROOT / "environment.yml").read_text(encoding="utf-8")
    pip_lines = re.findall(r"^\s{6}-\s+(.+?)\s*$", text, re.MULTILINE)
    assert pip_lines == ["-r requirements.txt", "--editable ."], pip_lines
    assert not re.search(r"==\d", text), "exact pins live in requirements.txt only"
    assert re.search(r"^\s*-\s*python=3\.11\s*$", text, re.MULTILINE)


def test_pyproject_declares_ranges_not_pins() -> None:
    for group, requirements in declared().items():
        for requirement in requirements:
            assert not any(s.operator in ("==", "===") for s in requirement.specifier), (group, str(requirement))
            assert any(s.operator in (">=", ">") for s in requirement.specifier), f"{requirement}: no lower bound"


def test_every_declared_package_is_in_the_lock_and_the_lock_is_inside_every_range() -> None:
    pins = read_pins()
    for group, requirements in declared().items():
        for requirement in requirements:
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{name} ({group or 'dependencies'}) has no exact version in requirements.txt"
            assert requirement.specifier.contains(pins[name]), \
                f"the lock's {name} {pins[name]} is outside {requirement}"
    named = {canonicalize_name(r.name) for requirements in declared().values() for r in requirements}
    assert set(pins) <= named, f"pinned but declared nowhere in pyproject.toml: {sorted(set(pins) - named)}"


def test_colab_s_versions_are_inside_the_supported_ranges() -> None:
    # pip keeps an installed version that satisfies the requirement: Colab's torch, numpy, ipywidgets... stay
    colab = parse_pins(COLAB.read_text(encoding="utf-8").splitlines())
    ranges = supported_ranges()
    for name, wanted in ranges.items():
        if name in colab:
            assert wanted.contains(colab[name]), f"Colab's {name} {colab[name]} is outside {wanted}"
    assert Version(colab["torch"]) in ranges["torch"] and Version(read_pins()["torch"]) in ranges["torch"]


def test_required_pins_present_and_installed() -> None:
    pins = read_pins()
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"
    for name in ("jupyterlab", "ipywidgets", "matplotlib", "numpy", "scikit-image", "scikit-learn", "tqdm",
                 "pytest", "nbval", "pytest-xdist"):
        assert name in pins, name
    for name, version in pins.items():  # installed as pinned
        assert metadata.version(name).split("+")[0] == version, name


@pytest.mark.parametrize("line", ["torch>=2.0", "torch", "torch==2.*", "torch==2.14.1,<3",
                                  "torch @ https://example.org/torch.whl", "-e .", "torch===2.14.1", "torch==="])
def test_a_requirement_that_is_not_one_exact_version_is_refused(line: str) -> None:
    with pytest.raises(ValueError, match=r"Line 2 is not an exact pin"):
        parse_pins(["numpy==2.4.6", line])


def test_names_are_normalised_and_comments_extras_and_other_platforms_skipped() -> None:
    lines = ["# comment", "", "Scikit_Image==0.26.0  # inline", "torch==2.14.1+cpu",
             'pywin32==311; sys_platform == "no-such-platform"']
    assert parse_pins(lines) == {"scikit-image": "0.26.0", "torch": "2.14.1+cpu"}
    ranges = parse_ranges(["torch>=2.11,<2.15", 'pytest>=9; extra == "test"', 'pywin32>=1; sys_platform == "nope"'])
    assert list(ranges) == ["torch"] and ranges["torch"].contains("2.14.1") and not ranges["torch"].contains("2.15.0")


def test_missing_requirements_file_or_distribution_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="make venv"):
        read_pins(tmp_path / "requirements.txt")
    with pytest.raises(FileNotFoundError, match="pip install"):
        installed_ranges("course-utils-not-installed-anywhere")


def test_installed_metadata_of_the_distribution_records_the_ranges_of_pyproject_toml() -> None:
    assert re.search(rf'^name = "{DISTRIBUTION}"$', (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.MULTILINE)
    # a difference means the install is stale
    assert installed_ranges() == supported_ranges(), \
        "the installed course_utils is older than pyproject.toml: run `make venv`"


def test_a_non_editable_install_without_the_checkout_reads_its_own_metadata(tmp_path: Path) -> None:
    # A real wheel install (as `pip install git+...` would make) into a folder with no requirements.txt: the ranges
    # come from the installed metadata, and there is no lock. Built from a copy, so no build/ lands in the checkout.
    source, site = tmp_path / "source", tmp_path / "site"
    shutil.copytree(ROOT / "course_utils", source / "course_utils", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "notebooks", source / "notebooks")
    for name in ("pyproject.toml", "requirements.txt", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
         "--target", str(site), str(source)],
        check=True, capture_output=True, text=True, timeout=300,
    )
    shutil.rmtree(source)  # the checkout is gone: only the installed files remain
    probe = ("import json, course_utils.machinery.pins as p\ntry:\n    p.read_pins(); lock = True\n"
             "except FileNotFoundError:\n    lock = False\n"
             "print(json.dumps([p.__file__, {k: str(v) for k, v in p.supported_ranges().items()}, lock]))")
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True,
                            text=True, timeout=120)
    module_file, ranges, lock = json.loads(result.stdout)
    assert Path(module_file).is_relative_to(site), module_file  # the installed copy, not this checkout
    assert not (Path(module_file).parent.parent / "requirements.txt").exists()
    assert ranges == {k: str(v) for k, v in supported_ranges().items()}
    assert lock is False
