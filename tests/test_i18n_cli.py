"""The translators' commands do what their docstrings say: ``messages add`` takes a ``.po`` part and refuses anything
else (it used to write a PO file named ``nb03.py`` that nothing read), ``verify`` names a stray file among the parts,
and ``editions`` takes ``--missing`` before or after the command."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools.i18n import editions, messages

ROOT = Path(__file__).resolve().parent.parent
EXERCISES = ROOT / "course_utils" / "machinery" / "exercises" / "nb03.py"


@pytest.fixture()
def locale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the message catalogue's parts, which the commands then read and write."""
    copy = tmp_path / "locale"
    shutil.copytree(messages.LOCALE, copy)
    monkeypatch.setattr(messages, "LOCALE", copy)
    return copy


def test_the_documented_add_names_a_po_part() -> None:
    assert "messages add nb03.po course_utils/machinery/exercises/nb03.py" in messages.__doc__
    assert "add nb03.py" not in messages.__doc__


@pytest.mark.parametrize("part", ["nb03.py", "nb03", ".po", "../nb03.po", "zh/nb03.po"])
def test_add_refuses_a_part_that_is_not_a_po_file_and_writes_nothing(locale: Path, part: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in (locale / "zh").iterdir())
    with pytest.raises(ValueError, match="such as nb03.po"):
        messages.add("zh", part, [EXERCISES])
    with pytest.raises(SystemExit) as exit_code:
        messages.main(["add", part, str(EXERCISES)])
    assert exit_code.value.code == 2 and "such as nb03.po" in capsys.readouterr().err
    assert sorted(p.name for p in (locale / "zh").iterdir()) == before


def test_add_appends_to_a_po_part_and_verify_names_a_stray_file(locale: Path) -> None:
    assert messages.add("zh", "new.po", [EXERCISES]) == 0  # every message of nb03 is translated already
    assert (locale / "zh" / "new.po").is_file()
    (locale / "zh" / "new.po").unlink()
    assert messages.problems("zh") == []
    (locale / "zh" / "nb03.py").write_text("#: a part written under the wrong name\n", encoding="utf-8")
    assert any("nb03.py: not a .po part" in problem for problem in messages.problems("zh"))


def test_editions_takes_missing_before_or_after_the_command() -> None:
    parser_order = ["export", "--missing", "notebooks/01_tensor_hooks.ipynb"], ["--missing", "export",
                                                                               "notebooks/01_tensor_hooks.ipynb"]
    import contextlib
    import io

    outputs = []
    for argv in parser_order:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert editions.main([*argv[:-1], str(ROOT / argv[-1])]) == 0
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1]
