"""Check that the running kernel has what the course needs, and say exactly what to do when it does not.

The advice follows the route the learner took: the course's own virtual environment (``make lab``), the conda
environment of ``environment.yml`` (Windows, or anyone using conda), another virtual environment, or a Python
outside any environment.

Usage (in a notebook): ``report = doctor()`` prints one line per check; ``report.ok`` is True when all pass.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from course_utils.pins import read_pins

__all__ = ["SUPPORTED_PYTHONS", "Finding", "DoctorReport", "Route", "detect_route", "doctor"]

SUPPORTED_PYTHONS = ("3.11", "3.12", "3.13")
"""The Python versions the course runs on; pyproject.toml's requires-python and the Makefile's check say the same
(tests/test_pins.py keeps them equal)."""

_CHECKOUT = Path(__file__).resolve().parent.parent
_KEY_PACKAGES = ("torch", "torchvision", "numpy", "matplotlib", "ipywidgets", "jupyterlab")
_CONDA_ROUTE = "`conda env create -f environment.yml`, `conda activate pytorch-hooks-course`, `jupyter lab`"


@dataclass(frozen=True)
class Route:
    """How this kernel's environment was made, and the commands that repair it on that route.

    ``install`` (re)installs the pinned packages and ``new_python`` makes the environment anew with a supported
    Python (and starts JupyterLab): commands for a terminal in the course folder. ``note`` says what is wrong with
    the route itself, ``after`` what to do once ``install`` ran.
    Usage: ``detect_route().install`` -> ``"`make venv`"``
    """

    name: str  # "make", "conda", "venv" or "outside"
    install: str
    new_python: str
    note: str = ""
    after: str = "then restart the kernel (Kernel > Restart Kernel)"

    @property
    def fix_packages(self) -> str:
        return f"{self.note}In a terminal, in the course folder: {self.install}; {self.after}."

    @property
    def fix_widgets(self) -> str:
        return (f"{self.note}In a terminal, in the course folder: {self.install} (it installs ipywidgets with its "
                "JupyterLab extension); then reload the browser tab.")

    @property
    def fix_python(self) -> str:
        return f"{self.note}In a terminal, in the course folder: {self.new_python}."


def _supported_list(word: str = "or", prefix: str = "") -> str:
    names = [f"{prefix}{version}" for version in SUPPORTED_PYTHONS]
    return f"{', '.join(names[:-1])} {word} {names[-1]}"


def _same_path(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:  # pragma: no cover - an unreadable path is simply not the course's
        return False


def detect_route(prefix: Path | str | None = None, base_prefix: Path | str | None = None,
                 checkout: Path | str | None = None) -> Route:
    """Which route made the environment at ``prefix`` (default: this kernel's ``sys.prefix``).

    - ``conda``: ``prefix`` holds ``conda-meta/`` (the environment.yml route; Binder too); conda's own root
      environment ("base") also holds ``condabin/``.
    - ``make``: a virtual environment (``prefix != base_prefix``) with ``make venv``'s ``.installed-*`` stamp
      (named by its folder when it is in the course folder, by its path elsewhere).
    - ``venv``: any other virtual environment.
    - ``outside``: a Python outside any environment (system, pyenv, the python.org installer).

    Usage: ``detect_route().name`` -> ``"make"``
    """
    prefix = Path(sys.prefix if prefix is None else prefix)
    base_prefix = Path(sys.base_prefix if base_prefix is None else base_prefix)
    checkout = _CHECKOUT if checkout is None else Path(checkout)
    any_python = "or " + ", ".join(f"python{version}" for version in SUPPORTED_PYTHONS[1:])
    open_lab = "then open the notebook in the JupyterLab that starts"
    if (prefix / "conda-meta").is_dir():
        if (prefix / "condabin").is_dir():  # conda's root ("base") environment, not one made for the course
            return Route("conda", _CONDA_ROUTE, _CONDA_ROUTE, note="This kernel runs in conda's base environment. ",
                         after=open_lab)
        env = f"-n {prefix.name}" if prefix.parent.name == "envs" else f"-p {prefix}"
        return Route(
            "conda",
            f"`conda env update {env} -f environment.yml`",
            f"`conda env remove {env}`, then {_CONDA_ROUTE} (environment.yml brings a supported Python)",
        )
    if not _same_path(prefix, base_prefix):
        if any(prefix.glob(".installed-*")):
            folder = prefix.name if _same_path(prefix.parent, checkout) else str(prefix)
            venv = "" if folder == ".venv" else f" VENV={folder}"
            return Route("make", f"`make venv{venv}`",
                         f"`make clean{venv}`, then `make lab PYTHON=python3.11{venv}` ({any_python})")
        return Route(
            "venv",
            f"with this virtual environment ({prefix.name}) activated, `python -m pip install -r requirements.txt` "
            "and `python -m pip install --no-deps -e .`",
            f"`make lab PYTHON=python3.11` ({any_python}) makes the course's own environment; on Windows, the conda "
            f"route: {_CONDA_ROUTE}",
        )
    return Route(
        "outside",
        f"`make lab` (macOS, Linux, WSL2), or on Windows the conda route: {_CONDA_ROUTE}",
        f"install Python {_supported_list()}, then `make lab PYTHON=python3.11` ({any_python}) on macOS, Linux, WSL2; "
        f"or on Windows the conda route, which brings its own Python: {_CONDA_ROUTE}",
        note="This kernel runs on a Python outside the course's environment. ",
        after=open_lab,
    )


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


def _python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _check_python(route: Route) -> Finding:
    # The passing line names no version: stored outputs must be the same on every supported Python.
    version = _python_version()
    ok = version in SUPPORTED_PYTHONS
    return Finding(
        "Python",
        ok,
        f"a supported version ({_supported_list()})" if ok else f"{version}, the course supports {_supported_list('and')}",
        route.fix_python,
    )


def _check_pins(pins: dict[str, str], fix: str) -> list[Finding]:
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
                Finding(name, ok, f"{pins[name]}" if ok else f"{have or 'not installed'}, pinned {pins[name]}", fix)
            )
    others_ok = not [w for w in wrong if w.split()[0] not in _KEY_PACKAGES]
    findings.append(
        Finding(
            "other pinned packages",
            others_ok,
            f"all {len(pins) - len(_KEY_PACKAGES)} match requirements.txt" if others_ok else "; ".join(wrong),
            fix,
        )
    )
    return findings


def _check_widgets_frontend(route: Route) -> Finding:
    front_end = _installed("jupyterlab_widgets")
    return Finding(
        "ipywidgets front end",
        front_end is not None,
        "jupyterlab_widgets installed (widgets will render in JupyterLab)" if front_end else "jupyterlab_widgets missing",
        route.fix_widgets,
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
    """Check Python, the pinned packages, the widgets front end and the kernel; print the findings, each failing
    one with the command that fixes it on the route this environment was made by (:func:`detect_route`).

    Usage: ``report = doctor(); assert report.ok``
    """
    route = detect_route()
    findings = [_check_python(route)]
    try:
        pins = read_pins()
    except (FileNotFoundError, ValueError) as error:
        findings.append(Finding("requirements.txt", False, str(error), route.fix_packages))
    else:
        findings.extend(_check_pins(pins, route.fix_packages))
    findings.append(_check_widgets_frontend(route))
    findings.append(_check_kernel())
    report = DoctorReport(findings)
    if show:
        print(report)
    return report
