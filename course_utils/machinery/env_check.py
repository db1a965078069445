"""Check that the running kernel has what the course needs, and say exactly what to do when it does not.

The advice follows the route the learner took (:func:`detect_route`). Versions: the lock (requirements.txt) passes
as before; any version inside the supported ranges (pyproject.toml) passes with a note that the last digits of some
numbers may differ from the stored outputs; outside them doctor() says what to install. The report is in the
course's language; commands and package names stay as they are typed.

Usage (in a notebook): ``report = doctor()`` prints one line per check; ``report.ok`` is True when all pass.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from packaging.specifiers import SpecifierSet

from course_utils.machinery.messages import N_, _
from course_utils.machinery.pins import CHECKOUT, in_checkout, read_pins, supported_ranges

__all__ = ["SUPPORTED_NOTE", "SUPPORTED_PYTHONS", "Finding", "describe_range", "DoctorReport", "Route",
           "detect_route", "doctor"]

SUPPORTED_PYTHONS = ("3.11", "3.12", "3.13")
"""The Python versions the course runs on; pyproject.toml's requires-python and the Makefile's check say the same
(tests/test_pins.py keeps them equal)."""

_KEY_PACKAGES = ("torch", "torchvision", "numpy", "matplotlib", "ipywidgets", "jupyterlab")
# what doctor() says of a version inside the supported range that is not the lock's
SUPPORTED_NOTE = N_("supported; the last digits of some numbers may differ from the stored outputs")
_CONDA_ROUTE = "`conda env create -f environment.yml`, `conda activate pytorch-hooks-course`, `jupyter lab`"


@dataclass(frozen=True)
class Route:
    """How this kernel's environment was made: ``install`` (re)installs the packages, ``new_python`` makes the
    environment anew with a supported Python; ``note`` (what is wrong with the route) and ``after`` are ``N_()`` text.

    Usage: ``detect_route().install`` -> ``"`make venv`"``
    """

    name: str  # "make", "conda", "venv" or "outside"
    install: str
    new_python: str
    note: str = ""
    after: str = N_("then restart the kernel (Kernel > Restart Kernel)")

    @property
    def fix_packages(self) -> str:
        return _("{note}In a terminal, in the course folder: {install}; {after}.").format(
            note=_(self.note), install=self.install, after=_(self.after))

    @property
    def fix_widgets(self) -> str:
        return _("{note}In a terminal, in the course folder: {install} (it installs ipywidgets with its "
                 "JupyterLab extension); then reload the browser tab.").format(note=_(self.note), install=self.install)

    @property
    def fix_python(self) -> str:
        return _("{note}In a terminal, in the course folder: {command}.").format(note=_(self.note),
                                                                               command=self.new_python)


def _supported_list(word: str = "or") -> str:
    pattern = _("{versions} and {last}") if word == "and" else _("{versions} or {last}")
    return pattern.format(versions=", ".join(SUPPORTED_PYTHONS[:-1]), last=SUPPORTED_PYTHONS[-1])


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
    checkout = CHECKOUT if checkout is None else Path(checkout)
    any_python = _("or {pythons}").format(pythons=", ".join(f"python{version}" for version in SUPPORTED_PYTHONS[1:]))
    open_lab = N_("then open the notebook in the JupyterLab that starts")
    if (prefix / "conda-meta").is_dir():
        if (prefix / "condabin").is_dir():  # conda's root ("base") environment, not one made for the course
            return Route("conda", _CONDA_ROUTE, _CONDA_ROUTE,
                         note=N_("This kernel runs in conda's base environment. "), after=open_lab)
        env = f"-n {prefix.name}" if prefix.parent.name == "envs" else f"-p {prefix}"
        return Route(
            "conda",
            f"`conda env update {env} -f environment.yml`",
            _("`conda env remove {env}`, then {conda_route} (environment.yml brings a supported Python)").format(
                env=env, conda_route=_CONDA_ROUTE),
        )
    if not _same_path(prefix, base_prefix):
        if any(prefix.glob(".installed-*")):
            folder = prefix.name if _same_path(prefix.parent, checkout) else str(prefix)
            venv = "" if folder == ".venv" else f" VENV={folder}"
            return Route("make", f"`make venv{venv}`",
                         _("`make clean{venv}`, then `make lab PYTHON=python3.11{venv}` ({other_pythons})").format(
                             venv=venv, other_pythons=any_python))
        return Route(
            "venv",
            _("with this virtual environment ({name}) activated, `python -m pip install -r requirements.txt` "
              "and `python -m pip install --no-deps -e .`").format(name=prefix.name),
            _("`make lab PYTHON=python3.11` ({other_pythons}) makes the course's own environment; on Windows, the "
              "conda route: {conda_route}").format(other_pythons=any_python, conda_route=_CONDA_ROUTE),
        )
    return Route(
        "outside",
        _("`make lab` (macOS, Linux, WSL2), or on Windows the conda route: {conda_route}").format(
            conda_route=_CONDA_ROUTE),
        _("install Python {versions}, then `make lab PYTHON=python3.11` ({other_pythons}) on macOS, Linux, WSL2; "
          "or on Windows the conda route, which brings its own Python: {conda_route}").format(
              versions=_supported_list(), other_pythons=any_python, conda_route=_CONDA_ROUTE),
        note=N_("This kernel runs on a Python outside the course's environment. "),
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
        text = _("{mark} {name}: {detail}").format(mark=mark, name=self.name, detail=self.detail)
        return text if self.ok else f"{text}\n    → {self.fix}"


@dataclass
class DoctorReport:
    """All findings; ``ok`` is True when every check passed."""

    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def __str__(self) -> str:
        summary = _("All checks passed.") if self.ok else _("Something needs fixing: follow the → lines above.")
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
    detail = (_("a supported version ({versions})").format(versions=_supported_list()) if ok
              else _("{version}, the course supports {versions}").format(version=version,
                                                                          versions=_supported_list("and")))
    return Finding("Python", ok, detail, route.fix_python)


def describe_range(wanted: SpecifierSet) -> str:
    """A range as people write it, lower bound first: ``">=2.11,<2.15"``.

    Usage: ``describe_range(supported_ranges()["torch"])``
    """
    order = {">=": 0, ">": 0, "~=": 0, "==": 1, "===": 1, "!=": 2, "<=": 3, "<": 3}
    ordered = sorted(wanted, key=lambda s: (order.get(s.operator, 4), str(s)))
    return ",".join(str(s) for s in ordered) or _("any version")


def _range_fix(name: str, wanted: SpecifierSet, route: Route) -> str:
    if in_checkout():
        return route.fix_packages
    return _("Install a supported {name}: run `%pip install \"{requirement}\"` in a cell (torch: see "
             "https://pytorch.org/get-started/locally/ for your machine's build), then restart the kernel.").format(
                 name=name, requirement=f"{name}{describe_range(wanted)}")


def _check_versions(pins: dict[str, str] | None, ranges: dict[str, SpecifierSet], route: Route) -> list[Finding]:
    """One finding per key package, then one for the others: the lock's version passes as before; another version
    passes inside the supported range (with :data:`SUPPORTED_NOTE`); outside it, or missing, fails with the fix.
    Without a checkout (``pins`` None) only the ranges are checked, and packages the learner's platform brings
    itself (JupyterLab) are not required."""
    names = list(pins) if pins is not None else list(ranges)
    others = [name for name in names if name not in _KEY_PACKAGES]
    findings, wrong, supported_others = [], [], []
    not_installed, missing = _("not installed"), _("missing")
    for name in [*(n for n in _KEY_PACKAGES if n in names), *others]:
        have, pinned = _installed(name), (pins or {}).get(name)
        fix = route.fix_packages if name not in ranges else _range_fix(name, ranges[name], route)
        if have is not None and pinned is not None and have.split("+")[0] == pinned:
            detail, ok = pinned, True
        # (packaging >= 26, the course's floor: a version it cannot parse is in no range, not an error)
        elif name in ranges and have is not None and ranges[name].contains(have, prereleases=True):
            detail, ok = f"{have}, {_(SUPPORTED_NOTE)}", True
            supported_others += [f"{name} {have}"] if name in others else []
        else:
            want = (_("pinned {version}").format(version=pinned) if pinned is not None and name not in ranges
                    else _("the course supports {versions}").format(versions=describe_range(ranges[name])))
            detail, ok = f"{have or not_installed}, {want}", False
            wrong += [(f"{name} {have or missing} ({want})", fix)] if name in others else []
        if name not in others:
            findings.append(Finding(name, ok, detail, "" if ok else fix))
    label = _("other course packages") if pins is None else _("other pinned packages")
    if wrong:
        fix = wrong[0][1] if len({f for _text, f in wrong}) == 1 else route.fix_packages
        findings.append(Finding(label, False, "; ".join(text for text, _fix in wrong), fix))
    elif pins is None:
        findings.append(Finding(label, True, _("all {count} in the supported ranges").format(count=len(others))))
    elif supported_others:
        findings.append(Finding(label, True, _("{packages}: {note}; the other {count} match requirements.txt").format(
            packages=", ".join(supported_others), note=_(SUPPORTED_NOTE), count=len(others) - len(supported_others))))
    else:
        findings.append(Finding(label, True, _("all {count} match requirements.txt").format(count=len(others))))
    return findings


def _check_widgets_frontend(route: Route) -> Finding:
    installed = _installed("jupyterlab_widgets") is not None
    detail = (_("jupyterlab_widgets installed (widgets will render in JupyterLab)") if installed
              else _("jupyterlab_widgets missing"))
    return Finding(_("ipywidgets front end"), installed, detail, route.fix_widgets)


def _check_kernel() -> Finding:
    try:
        import torch  # noqa: F401
        from IPython import get_ipython

        import course_utils  # noqa: F401  (importable from this kernel: the kernel is the course's Python)
    except ImportError as error:  # pragma: no cover - doctor is itself in course_utils
        return Finding(_("kernel"), False, str(error), _("Choose the kernel of the course environment."))
    shell = get_ipython()
    kind = (_("plain Python") if shell is None else _("Jupyter kernel") if "ipykernel" in sys.modules
            else type(shell).__name__)
    return Finding(_("kernel"), True, _("course_utils and torch import here ({shell})").format(shell=kind))


def doctor(*, show: bool = True) -> DoctorReport:
    """Check Python, the course's packages (the lock, or any version in the supported ranges), the widgets front
    end and the kernel; print the findings, each failing one with the command that fixes it on the route this
    environment was made by (:func:`detect_route`).

    Usage: ``report = doctor(); assert report.ok``
    """
    route = detect_route()
    findings = [_check_python(route)]
    try:
        pins = read_pins() if in_checkout() else None
        ranges = supported_ranges()
    except (FileNotFoundError, ValueError) as error:
        findings.append(Finding(_("course versions"), False, str(error), route.fix_packages))
    else:
        findings.extend(_check_versions(pins, ranges, route))
    findings.append(_check_widgets_frontend(route))
    findings.append(_check_kernel())
    report = DoctorReport(findings)
    if show:
        print(report)
    return report
