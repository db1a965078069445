"""doctor() passes in the course environment and says what to do when something is off."""

from __future__ import annotations

import pytest

from course_utils import env_check as doctor_module
from course_utils.env_check import doctor


def test_doctor_passes_here(capsys: pytest.CaptureFixture[str]) -> None:
    report = doctor()
    out = capsys.readouterr().out
    assert report.ok, out
    assert "✓ torch: 2.14.1" in out
    assert out.rstrip().endswith("All checks passed.")


def test_doctor_reports_a_wrong_torch_with_the_fix(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    real = doctor_module._installed
    monkeypatch.setattr(doctor_module, "_installed", lambda name: "2.0.0" if name == "torch" else real(name))
    report = doctor()
    out = capsys.readouterr().out
    assert not report.ok
    assert "✗ torch: 2.0.0, pinned 2.14.1" in out
    assert "make venv" in out and "restart the kernel" in out


def test_doctor_reports_a_missing_widget_front_end(monkeypatch: pytest.MonkeyPatch) -> None:
    real = doctor_module._installed
    monkeypatch.setattr(doctor_module, "_installed", lambda name: None if name == "jupyterlab_widgets" else real(name))
    report = doctor(show=False)
    failing = [f for f in report.findings if not f.ok]
    assert [f.name for f in failing] == ["ipywidgets front end"]
    assert "reload the browser" in failing[0].fix
