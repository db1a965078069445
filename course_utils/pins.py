"""Read the course's pinned dependencies from ``requirements.txt`` (the one place they are written).

Usage: ``read_pins()`` -> ``{"torch": "2.14.1", "torchvision": "0.29.1", ...}``
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["REQUIREMENTS_FILE", "read_pins", "parse_pins"]

REQUIREMENTS_FILE = Path(__file__).resolve().parent.parent / "requirements.txt"

_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)\s*(?:#.*)?$")


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_pins(lines: list[str]) -> dict[str, str]:
    """Parse ``name==version`` lines (comments and blank lines skipped); anything else is an error."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _PIN.match(line)
        if not match:
            raise ValueError(f"Line {number} is not an exact pin (name==version): {raw.strip()!r}")
        pins[_normalise(match.group(1))] = match.group(2)
    return pins


def read_pins(path: Path | None = None) -> dict[str, str]:
    """The pins in ``requirements.txt`` of the course checkout, with normalised package names."""
    path = REQUIREMENTS_FILE if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"Cannot find the course's requirements.txt next to course_utils ({path.name}). "
            "Install course_utils in editable mode from the course folder: run `make venv` there."
        )
    return parse_pins(path.read_text(encoding="utf-8").splitlines())
