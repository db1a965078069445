"""Check that the running kernel has what the course needs, and say exactly what to do when it does not.

Usage (in a notebook): ``report = doctor()`` prints one line per check; ``report.ok`` is True when all pass.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import metadata

from course_utils.pins import read_pins

__all__ = ["Finding", "DoctorReport", "doctor"]

_FIX_PINS = "In a terminal, in the course folder, run `make venv`, then restart the kernel (Kernel > Restart Kernel)."
_KEY_PACKAGES = ("torch", "torchvision", "numpy", "matplotlib", "ipywidgets", "jupyterlab")


@dataclass(frozen=True)
class Finding:
    """One check: what was checked, whether it passed, and what to do if not."""

    name: str
    ok: bool
    detail: str
    fix: str = ""

    def line(self) -> str:
        mark = "✓" if self.ok else "✗"
        text = f"{mark} {self.name}: {self.detail}"
        return text if self.ok else f"{text}\n    → {self.fix}"


@dataclass
class DoctorReport:
    """All findings; ``ok`` is True when every check passed."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def __str__(self) -> str:
        summary = "All checks passed." if self.ok else "Something needs fixing: follow the → lines above."
        return "\n".join([*(f.line() for f in self.findings), summary])


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _check_python() -> Finding:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    return Finding(
        "Python",
        version == "3.11",
        f"{version} (the course is pinned for 3.11)",
        "Create the environment with Python 3.11: `make venv PYTHON=python3.11`, or the conda route "
        "(`conda env create -f environment.yml`).",
    )


def _check_pins(pins: dict[str, str]) -> list[Finding]:
    findings = []
    wrong = []
    for name, wanted in pins.items():
        have = _installed(name)
        if have is None or have.split("+")[0] != wanted:
            wrong.append(f"{name} {have or 'missing'} (want {wanted})")
    for name in _KEY_PACKAGES:
        if name in pins:
            have = _installed(name)
            ok = have is not None and have.split("+")[0] == pins[name]
            findings.append(
                Finding(name, ok, f"{pins[name]}" if ok else f"{have or 'not installed'}, pinned {pins[name]}", _FIX_PINS)
            )
    others_ok = not [w for w in wrong if w.split()[0] not in _KEY_PACKAGES]
    findings.append(
        Finding(
            "other pinned packages",
            others_ok,
            f"all {len(pins) - len(_KEY_PACKAGES)} match requirements.txt" if others_ok else "; ".join(wrong),
            _FIX_PINS,
        )
    )
    return findings


def _check_widgets_frontend() -> Finding:
    front_end = _installed("jupyterlab_widgets")
    return Finding(
        "ipywidgets front end",
        front_end is not None,
        "jupyterlab_widgets installed (widgets will render in JupyterLab)" if front_end else "jupyterlab_widgets missing",
        "Run `make venv` (it installs ipywidgets with its JupyterLab extension), then reload the browser tab.",
    )


def _check_kernel() -> Finding:
    try:
        import course_utils  # noqa: F401  (importable from this kernel: the kernel is the course's Python)
        import torch  # noqa: F401
    except ImportError as error:  # pragma: no cover - doctor is itself in course_utils
        return Finding("kernel", False, str(error), "Choose the kernel of the course environment.")
    shell = _ipython_kind()
    return Finding(
        "kernel",
        True,
        f"course_utils and torch import here ({shell})",
        "",
    )


def _ipython_kind() -> str:
    try:
        from IPython import get_ipython

        shell = get_ipython()
    except ImportError:
        shell = None
    if shell is None:
        return "plain Python"
    return "Jupyter kernel" if "ipykernel" in sys.modules else type(shell).__name__


def doctor(*, show: bool = True) -> DoctorReport:
    """Check Python, the pinned packages, the widgets front end and the kernel; print the findings.

    Usage: ``report = doctor(); assert report.ok``
    """
    findings = [_check_python()]
    try:
        pins = read_pins()
    except (FileNotFoundError, ValueError) as error:
        findings.append(Finding("requirements.txt", False, str(error), _FIX_PINS))
    else:
        findings.extend(_check_pins(pins))
    findings.append(_check_widgets_frontend())
    findings.append(_check_kernel())
    report = DoctorReport(findings)
    if show:
        print(report)
    return report
