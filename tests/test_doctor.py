"""doctor() passes in the course environment and says what to do when something is off, with the commands of the
route the learner took (make's venv, conda, another venv, a Python outside any environment)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from course_utils.machinery import env_check as doctor_module
from course_utils.machinery.env_check import SUPPORTED_PYTHONS, detect_route, doctor


def _fake(monkeypatch: pytest.MonkeyPatch, package: str, version: str | None) -> None:
    """doctor() sees ``package`` at ``version`` (None: not installed), every other package as installed."""
    real = doctor_module._installed
    monkeypatch.setattr(doctor_module, "_installed", lambda name: version if name == package else real(name))


def test_doctor_passes_here(capsys: pytest.CaptureFixture[str]) -> None:
    report = doctor()
    out = capsys.readouterr().out
    assert report.ok, out
    assert "✓ torch: 2.14.1" in out
    assert out.rstrip().endswith("All checks passed.")


@pytest.mark.parametrize("version", SUPPORTED_PYTHONS)
def test_the_passing_python_line_is_the_same_on_every_supported_python(version: str,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_module, "_python_version", lambda: version)
    python = doctor(show=False).findings[0]
    assert python.ok and python.line() == "✓ Python: a supported version (3.11, 3.12 or 3.13)"


@pytest.mark.parametrize("version", ["3.10", "3.14"])
def test_an_unsupported_python_is_reported_with_the_route_s_fix(version: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_module, "_python_version", lambda: version)
    report = doctor(show=False)
    python = report.findings[0]
    assert not report.ok and not python.ok
    assert python.detail == f"{version}, the course supports 3.11, 3.12 and 3.13"
    assert python.fix == detect_route().fix_python


@pytest.mark.parametrize("version", ["2.11.0", "2.12.1", "2.11.0+cu128"])
def test_a_torch_inside_the_supported_range_passes_with_the_note(version: str, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _fake(monkeypatch, "torch", version)
    report = doctor()
    out = capsys.readouterr().out
    assert report.ok, out
    assert f"✓ torch: {version}, supported; the last digits of some numbers may differ from the stored outputs" in out


@pytest.mark.parametrize("version", ["2.10.0", "2.15.0", "3.0.0"])
def test_a_torch_outside_the_range_fails_and_says_what_to_install(version: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, "torch", version)
    monkeypatch.setattr(doctor_module, "in_checkout", lambda: False)  # as on Colab: installed without the checkout
    report = doctor(show=False)
    torch_finding = next(f for f in report.findings if f.name == "torch")
    assert not report.ok and not torch_finding.ok
    assert torch_finding.detail == f"{version}, the course supports >=2.11,<2.15"
    assert '`%pip install "torch>=2.11,<2.15"`' in torch_finding.fix and "restart the kernel" in torch_finding.fix


def test_without_the_checkout_doctor_checks_ranges_and_does_not_need_jupyterlab(
        monkeypatch: pytest.MonkeyPatch) -> None:
    real = doctor_module._installed
    monkeypatch.setattr(doctor_module, "in_checkout", lambda: False)
    colab = {"numpy": "2.1.3", "jupyterlab": None}  # Colab's numpy; no JupyterLab (Colab brings its own front end)
    monkeypatch.setattr(doctor_module, "_installed", lambda name: colab[name] if name in colab else real(name))
    report = doctor(show=False)
    assert report.ok, str(report)
    names = [f.name for f in report.findings]
    assert "jupyterlab" not in names and "other course packages" in names
    numpy = next(f for f in report.findings if f.name == "numpy")
    assert numpy.detail.startswith("2.1.3, supported;")


# --- the route: detection from sys.prefix / sys.base_prefix and what is on disk there ---------------------------------


def make_venv(parent: Path, name: str = ".venv", stamp: bool = True) -> Path:
    prefix = parent / name
    (prefix / "bin").mkdir(parents=True)
    if stamp:
        (prefix / ".installed-py3.12-0123456789abcdef").touch()
    return prefix


def make_conda(prefix: Path, base: bool = False) -> Path:
    """A conda environment: conda's base environment (it has condabin/) or a named one."""
    (prefix / "conda-meta").mkdir(parents=True)
    if base:
        (prefix / "condabin").mkdir()
    return prefix


@pytest.mark.parametrize(("where", "name", "packages", "python"), [
    ("", ".venv", "`make venv`; then restart the kernel (Kernel > Restart Kernel).",
     "`make clean`, then `make lab PYTHON=python3.11`"),
    ("", ".venv312", "`make venv VENV=.venv312`", "`make clean VENV=.venv312`, then `make lab PYTHON=python3.11 "
                                                  "VENV=.venv312`"),
    ("envs", "course-3.13", "`make venv VENV={prefix}`", "`make clean VENV={prefix}`"),  # outside: named by its path
])
def test_a_venv_made_by_make_is_the_make_route_named_in_every_command(
        where: str, name: str, packages: str, python: str, tmp_path: Path) -> None:
    prefix = make_venv(tmp_path / where, name)
    route = detect_route(prefix, base_prefix=tmp_path / "python", checkout=tmp_path)
    assert route.name == "make" and packages.format(prefix=prefix) in route.fix_packages
    assert python.format(prefix=prefix) in route.fix_python
    assert route.fix_packages.startswith("In a terminal, in the course folder: `make venv")


def test_a_venv_not_made_by_make_is_a_plain_venv(tmp_path: Path) -> None:
    checkout = tmp_path / "course"
    checkout.mkdir()
    in_course = detect_route(make_venv(checkout, stamp=False), base_prefix=tmp_path / "python", checkout=checkout)
    elsewhere = detect_route(make_venv(tmp_path / "envs", "mine", stamp=False), base_prefix=tmp_path / "python",
                             checkout=checkout)
    for route in (in_course, elsewhere):
        assert route.name == "venv"
        assert "`python -m pip install -r requirements.txt`" in route.fix_packages
        assert "make venv" not in route.fix_packages
    assert "(mine) activated" in elsewhere.fix_packages


def test_a_named_conda_environment_is_updated_from_environment_yml(tmp_path: Path) -> None:
    prefix = make_conda(tmp_path / "miniforge3" / "envs" / "pytorch-hooks-course")
    route = detect_route(prefix, base_prefix=prefix, checkout=tmp_path)
    assert route.name == "conda"
    assert "`conda env update -n pytorch-hooks-course -f environment.yml`" in route.fix_packages
    assert "make" not in route.fix_packages + route.fix_widgets + route.fix_python
    assert route.fix_python.startswith(
        "In a terminal, in the course folder: `conda env remove -n pytorch-hooks-course`")


def test_conda_s_base_environment_is_told_to_make_the_course_s_own(tmp_path: Path) -> None:
    prefix = make_conda(tmp_path / "miniforge3", base=True)
    route = detect_route(prefix, base_prefix=prefix, checkout=tmp_path)
    assert route.name == "conda"
    assert route.fix_packages.startswith("This kernel runs in conda's base environment. ")
    assert "`conda env create -f environment.yml`, `conda activate pytorch-hooks-course`" in route.fix_packages


def test_a_python_outside_any_environment_gets_both_routes(tmp_path: Path) -> None:
    route = detect_route(tmp_path / "python", base_prefix=tmp_path / "python", checkout=tmp_path)
    assert route.name == "outside"
    assert "`make lab` (macOS, Linux, WSL2)" in route.fix_packages
    assert "on Windows the conda route: `conda env create -f environment.yml`" in route.fix_packages


def test_doctor_gives_the_conda_command_in_a_conda_kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    prefix = make_conda(tmp_path / "envs" / "pytorch-hooks-course")
    monkeypatch.setattr(sys, "prefix", str(prefix))
    monkeypatch.setattr(sys, "base_prefix", str(prefix))
    _fake(monkeypatch, "torch", "2.0.0")
    report = doctor()
    out = capsys.readouterr().out
    assert not report.ok
    assert "✗ torch: 2.0.0, the course supports >=2.11,<2.15\n    → In a terminal, in the course folder: " \
           "`conda env update -n pytorch-hooks-course -f environment.yml`; then restart the kernel" in out
    assert "make venv" not in out


def test_a_missing_widget_front_end_gets_the_fix_of_the_route_this_kernel_took(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake(monkeypatch, "jupyterlab_widgets", None)
    failing = [f for f in doctor(show=False).findings if not f.ok]
    assert [f.name for f in failing] == ["ipywidgets front end"] and "reload the browser" in failing[0].fix
    assert [f.fix for f in failing] == [detect_route().fix_widgets]
    if Path(sys.prefix).name.startswith(".venv") and sys.prefix != sys.base_prefix:  # make test's own venv
        assert detect_route().name == "make"
        venv = Path(sys.prefix).name
        assert f"`make venv{'' if venv == '.venv' else ' VENV=' + venv}`" in failing[0].fix
