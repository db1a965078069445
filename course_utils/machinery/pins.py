"""The course's versions: the exact lock (``requirements.txt``: what ``make lab`` installs and the stored outputs were
made with) and the supported ranges (``pyproject.toml``'s ``dependencies``; an installed wheel carries them as
``Requires-Dist``, read where course_utils runs without its checkout, e.g. on Colab). Parsed with ``packaging``.

Usage: ``read_pins()["torch"]`` -> ``"2.14.1"``; ``supported_ranges()["torch"]`` -> ``SpecifierSet(">=2.11,<2.15")``
"""

from __future__ import annotations

import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from course_utils.machinery.messages import _

__all__ = [
    "CHECKOUT", "DISTRIBUTION", "PYPROJECT_FILE", "REQUIREMENTS_FILE", "in_checkout", "installed_ranges", "parse_pins",
    "parse_ranges", "read_pins", "supported_ranges",
]

DISTRIBUTION = "course-utils"
"""The distribution name of course_utils (``[project] name`` in pyproject.toml)."""

CHECKOUT = Path(__file__).resolve().parents[2]  # the course folder, where course_utils runs from a checkout
REQUIREMENTS_FILE = CHECKOUT / "requirements.txt"
PYPROJECT_FILE = CHECKOUT / "pyproject.toml"


def in_checkout() -> bool:
    """Whether course_utils is imported from a course checkout (its requirements.txt and pyproject.toml beside it).

    Usage: ``if in_checkout(): pins = read_pins()``
    """
    return REQUIREMENTS_FILE.is_file() and PYPROJECT_FILE.is_file()


def parse_pins(lines: list[str]) -> dict[str, str]:
    """Parse ``name==version`` requirement lines into ``{normalised name: version}``.

    Usage: ``parse_pins(["Scikit_Image==0.26.0  # inline"])`` -> ``{"scikit-image": "0.26.0"}``.
    Comments and blank lines are skipped, as are pins whose environment marker (``; python_version < "3.12"``)
    does not apply here; a requirement that is not one exact version is an error naming its line.
    """
    pins: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            requirement = Requirement(line)
        except InvalidRequirement as error:
            raise ValueError(
                f"Line {number} is not an exact pin (name==version): {raw.strip()!r} ({str(error).splitlines()[0]})"
            ) from None
        specifiers = list(requirement.specifier)
        if requirement.url or len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in specifiers[0].version:
            raise ValueError(f"Line {number} is not an exact pin (name==version): {raw.strip()!r}")
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        pins[canonicalize_name(requirement.name)] = specifiers[0].version
    return pins


def parse_ranges(requirements: list[str]) -> dict[str, SpecifierSet]:
    """``{normalised name: SpecifierSet}`` of the requirements that apply without extras (``Requires-Dist`` lines
    or pyproject's ``dependencies``); optional ones (``; extra == "test"``) and other platforms' are skipped.

    Usage: ``parse_ranges(["torch>=2.11,<2.15"])`` -> ``{"torch": SpecifierSet("<2.15,>=2.11")}``
    """
    ranges: dict[str, SpecifierSet] = {}
    for line in requirements:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        ranges[canonicalize_name(requirement.name)] = requirement.specifier
    return ranges


def installed_ranges(distribution: str = DISTRIBUTION) -> dict[str, SpecifierSet]:
    """The ranges recorded in the installed distribution's ``Requires-Dist`` metadata.

    Usage: ``installed_ranges()["torch"]`` -- what ``pip install`` of course_utils (wheel, git URL) recorded.
    """
    try:
        requirements = metadata.requires(distribution)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(_(
            "course_utils is neither in a course checkout (no requirements.txt next to it) nor installed as the "
            "{distribution} distribution. Install it: `pip install` of the course's repository (see its README), "
            "or `make venv` in the course folder.").format(distribution=repr(distribution))
        ) from None
    if not requirements:
        raise ValueError(_(
            "The installed {distribution} distribution records no dependencies: reinstall it (`pip install` of the "
            "course's repository, or `make venv` in the course folder).").format(distribution=repr(distribution))
        )
    return parse_ranges(requirements)


def supported_ranges() -> dict[str, SpecifierSet]:
    """The versions the course supports, by normalised name: pyproject.toml's ``dependencies`` in a checkout, else
    the installed metadata (:func:`installed_ranges`).

    Usage: ``Version("2.11.0") in supported_ranges()["torch"]`` -> ``True``
    """
    if in_checkout():
        with PYPROJECT_FILE.open("rb") as handle:
            return parse_ranges(tomllib.load(handle)["project"]["dependencies"])
    return installed_ranges()


def read_pins(path: Path | str | None = None) -> dict[str, str]:
    """The exact lock with normalised package names, from ``path`` or the checkout's ``requirements.txt`` (none
    without a checkout: ``FileNotFoundError``).

    Usage: ``read_pins()["torch"]`` -> ``"2.14.1"``
    """
    if path is None:
        if not in_checkout():
            raise FileNotFoundError(
                "The exact versions (requirements.txt) are in the course checkout only; this course_utils was "
                "installed without it. supported_ranges() gives the versions it supports."
            )
        path = REQUIREMENTS_FILE
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"Cannot find the pins file {path}. Pass the course's requirements.txt, or call read_pins() without "
            "a path to use the course checkout (run `make venv` there)."
        )
    return parse_pins(path.read_text(encoding="utf-8").splitlines())
