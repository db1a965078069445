"""The translators' commands do what their docstrings say: ``messages add`` takes a ``.po`` part and refuses anything
else (it used to write a PO file named ``nb03.py`` that nothing read), ``verify`` names a stray file among the parts,
and ``editions`` takes ``--missing`` before or after the command."""

from __future__ import annotations

import dataclasses
import gettext
import io
import shutil
from pathlib import Path

import pytest

from tools import sync
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


@pytest.mark.parametrize("part", ["nb03.py", "nb03", ".po", "../nb03.po", "zh/nb03.po"])
def test_add_refuses_a_part_that_is_not_a_po_file_and_writes_nothing(locale: Path, part: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert "add nb03.po course_utils/machinery/exercises/nb03.py" in messages.__doc__  # documented, and no .py part
    assert "add nb03.py" not in messages.__doc__
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


def test_editions_takes_missing_before_or_after_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    notebook = str(ROOT / "notebooks" / "01_tensor_hooks.ipynb")
    outputs = []
    for argv in (["export", "--missing", notebook], ["--missing", "export", notebook]):
        assert editions.main(argv) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]


def test_a_lagging_fork_adds_a_message_once_and_it_shows_in_english(locale: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 46: messages lag like cells. A new message fails the strict rule; where the translation may lag it is no
    problem, it shows in English and stays listed as missing, and once ``add`` has listed it make sync asks for the
    msgstr only, never for the ``add`` again."""
    code = tmp_path / "course_utils" / "machinery" / "exercises" / "nb99.py"
    code.parent.mkdir(parents=True)
    code.write_text('from course_utils.machinery.messages import N_\nX = N_("A new message of a fork.")\n')
    texts = code.with_suffix(".toml")  # and its exercise's texts
    texts.write_text('# a comment\n["99.1"]\ntask = "A new task."\nkind = "predict"\nhints = [\n  "A hint.",\n]\n')
    for name, value in (("ROOT", tmp_path), ("PACKAGE", tmp_path / "course_utils"), ("TOOLS", tmp_path / "tools")):
        monkeypatch.setattr(messages, name, value)
    new = "A new message of a fork."
    assert messages.source_messages()["A new task."] == ["course_utils/machinery/exercises/nb99.toml:3"]
    assert messages.source_messages()["A hint."] == ["course_utils/machinery/exercises/nb99.toml:6"]
    assert "predict" not in messages.source_messages()  # a setting, not a text
    assert new in messages.unlisted("zh") and new in messages.missing("zh")
    assert any(new in problem for problem in messages.problems("zh", may_lag=False))
    assert not any(new in problem for problem in messages.problems("zh", may_lag=True))
    assert "-m tools.i18n.messages add nb99.po course_utils/machinery/exercises/nb99.toml" in "\n".join(
        sync.messages_to_do())

    assert messages.add("zh", "nb99.po", [code, texts]) == 3
    assert "\n#: " not in (locale / "zh" / "nb99.po").read_text(encoding="utf-8"), "no reference to go stale"
    assert new not in messages.unlisted("zh"), "make sync would ask for the add again"
    assert new in messages.missing("zh"), "python -m tools.i18n.messages missing no longer lists it"
    assert messages.to_write("zh") == {"nb99.po": [new, "A new task.", "A hint."]}
    assert not any(new in problem for problem in messages.problems("zh", may_lag=True))
    assert gettext.GNUTranslations(io.BytesIO(messages.compiled("zh"))).gettext(new) == new  # English stands in
    for lag in (True, False):
        monkeypatch.setattr(sync, "SETTINGS", dataclasses.replace(sync.SETTINGS, translations_may_lag=lag))
        text = "\n".join(sync.messages_to_do())
        assert "nb99.po: 3 empty msgstr" in text and "tools.i18n.messages add" not in text
        assert ("show in English" in text) is lag
