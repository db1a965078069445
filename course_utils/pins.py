"""Read the course's pinned dependencies: ``requirements.txt`` in a checkout, the installed metadata elsewhere.

``requirements.txt`` is the one place the pins are written; ``pyproject.toml`` turns it into the ``Requires-Dist``
metadata of the ``course-utils`` distribution. So in a course checkout (``make venv``, an editable install, Binder)
the file is read -- it is the source, and the installed metadata lags behind it until the next ``make venv``;
where course_utils was installed without its checkout (a wheel, ``pip install`` from git) the installed metadata
is read instead. Both are parsed with ``packaging.requirements``.

Usage: ``read_pins()`` -> ``{"torch": "2.14.1", "torchvision": "0.29.1", ...}``
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

__all__ = ["DISTRIBUTION", "REQUIREMENTS_FILE", "installed_pins", "parse_pins", "read_pins"]

DISTRIBUTION = "course-utils"
"""The distribution name of course_utils (``[project] name`` in pyproject.toml)."""

_CHECKOUT = Path(__file__).resolve().parent.parent
REQUIREMENTS_FILE = _CHECKOUT / "requirements.txt"


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
        if (
            requirement.url
            or len(specifiers) != 1
            or specifiers[0].operator != "=="
            or specifiers[0].version.endswith(".*")
        ):
            raise ValueError(f"Line {number} is not an exact pin (name==version): {raw.strip()!r}")
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        pins[canonicalize_name(requirement.name)] = specifiers[0].version
    return pins


def installed_pins(distribution: str = DISTRIBUTION) -> dict[str, str]:
    """The pins recorded in the installed distribution's ``Requires-Dist`` metadata.

    Usage: ``installed_pins()`` -- what ``pip install`` of course_utils (wheel, git URL, editable) recorded.
    """
    try:
        requirements = metadata.requires(distribution)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"course_utils is neither in a course checkout (no requirements.txt next to it) nor installed as the "
            f"{distribution!r} distribution. Run `make venv` in the course folder (or `pip install .` there)."
        ) from None
    if not requirements:
        raise ValueError(
            f"The installed {distribution!r} distribution records no dependencies: reinstall it from the course "
            f"folder (`make venv`) so that its metadata carries the pins of requirements.txt."
        )
    return parse_pins(requirements)


def read_pins(path: Path | str | None = None) -> dict[str, str]:
    """The course's pins with normalised package names: from ``path`` if given, else from ``requirements.txt``
    of the checkout course_utils is imported from, else from the installed metadata (:func:`installed_pins`).

    Usage: ``read_pins()["torch"]`` -> ``"2.14.1"``
    """
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(
                f"Cannot find the pins file {path}. Pass the course's requirements.txt, or call read_pins() without "
                "a path to use the course checkout or the installed course_utils (run `make venv` to install it)."
            )
        return parse_pins(path.read_text(encoding="utf-8").splitlines())
    if REQUIREMENTS_FILE.is_file() and (_CHECKOUT / "pyproject.toml").is_file():
        return parse_pins(REQUIREMENTS_FILE.read_text(encoding="utf-8").splitlines())
    return installed_pins()
