"""The course's messages in Chinese: every message id has a zh entry, ``COURSE_LANG=zh`` / ``setup_notebook(lang="zh")``
switch check(), hint() and doctor() to Chinese, English stays the fallback, and a bad language never breaks a check.
Each language switch runs in a fresh Python (run_python), through the real check(), hint() and doctor(): no stubs."""

from __future__ import annotations

import os
import re
import textwrap
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from course_utils.machinery import messages
from course_utils.machinery.env_check import detect_route
from course_utils.machinery.guard import SessionGuard
from course_utils.machinery.messages import _, in_every_language, set_language
from tests.fresh_python import FreshPython
from tests.test_doctor import make_conda, make_venv
from tools.i18n import messages as catalogue_tool

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("course_utils/machinery/locale/*", "course_utils/course.toml")  # translations_may_lag

ROOT = Path(__file__).resolve().parent.parent
CHINESE = range(0x4E00, 0xA000)


def has_chinese(text: str) -> bool:
    return any(ord(char) in CHINESE for char in text)


_FRESH: list[FreshPython] = []  # the module's server of fresh Pythons, started by the first run_python


@pytest.fixture(scope="module", autouse=True)
def _stop_fresh_pythons() -> Iterator[None]:
    yield
    while _FRESH:
        _FRESH.pop().close()


def run_python(code: str, lang: str | None) -> str:
    """Run ``code`` in a fresh Python with ``COURSE_LANG=lang`` (unset: None); its stdout, or a failure showing both
    streams. A fork of one process that imported torch and nothing of the course (tests/fresh_python.py): the course
    is imported afresh in each, under that environment, as in a learner's new kernel."""
    env = {key: value for key, value in os.environ.items() if key != "COURSE_LANG"}
    env.update({"PYTHONPATH": str(ROOT), "COURSE_PROGRESS": "off", "PYTHONIOENCODING": "utf-8"})
    if lang is not None:
        env["COURSE_LANG"] = lang
    if not _FRESH:
        _FRESH.append(FreshPython(ROOT, env={**env, "COURSE_LANG": "not read by the server"}))
    returncode, stdout, stderr = _FRESH[0].run(textwrap.dedent(code), env)
    assert returncode == 0, f"stdout:\n{stdout}\nstderr:\n{stderr}"
    return stdout


@pytest.fixture()
def chinese() -> Iterator[None]:
    """This process shows Chinese for the test; the language is given back to COURSE_LANG afterwards."""
    set_language("zh")
    try:
        yield
    finally:
        set_language(None)


# -- (a) the catalogue is complete --------------------------------------------------------------------------------
def test_every_message_has_a_chinese_entry_and_course_mo_is_compiled() -> None:
    """``tools/i18n/messages.py verify``: every _()/N_() message of course_utils has a zh translation, no entry is
    stray, no two parts translate a message differently, and course.mo is compiled from the .po files."""
    problems = catalogue_tool.problems("zh")
    assert not problems, "\n".join(problems)
    untranslated = catalogue_tool.missing("zh")  # only where the translation may lag: problems() names them otherwise
    if untranslated:
        from tools.i18n.editions import UntranslatedWarning

        listed = "\n".join(f"{where[0]}: {msgid!r}" for msgid, where in untranslated.items())
        warnings.warn(UntranslatedWarning(f"{len(untranslated)} messages show in English (translations_may_lag = "
                                          f"true):\n{listed}"), stacklevel=2)


# A message has one entry in the catalogue wherever it is used (the course marks no msgctxt). Each short message
# below is used by more than one module, and each use means the same thing, so one translation serves them all:
# "layer" (attention_view's and widgets' control, 层), "none" (07's chart of checkpoint segments and nb07's "found
# {found}", 无), "no hook" (recompiles' pattern and nb11's "found", 没有钩子), the hook kinds (hook_watch's messages
# and timeline's lanes), "notebook" (progress's and cloud_badges' column head, 笔记本).
SHARED_SHORT_MESSAGES = {"layer", "none", "no hook", "tensor hook", "forward hook", "forward pre-hook",
                         "backward pre-hook", "notebook"}


def test_a_short_message_shared_by_modules_means_the_same_in_each() -> None:
    """A one- or two-word message (the timeline's column heads "pass", "hook", "on"; "all"; "none") is ambiguous in
    English: a second module that marks the same word gets the first one's translation. The shared ones were read
    and mean the same in every use (SHARED_SHORT_MESSAGES); a new one fails here until it is read too, and where it
    means something else it gets a longer, unambiguous msgid."""
    shared = {msgid for msgid, where in catalogue_tool.source_messages().items()
              if re.fullmatch(r"\(?[A-Za-z][\w-]*( [\w-]+)?\)?", msgid)
              and len({place.rsplit(":", 1)[0] for place in where}) > 1}
    new, gone = sorted(shared - SHARED_SHORT_MESSAGES), sorted(SHARED_SHORT_MESSAGES - shared)
    assert not new and not gone, f"read where these are used: newly shared {new}, no longer shared {gone}"


def test_no_message_is_marked_inside_an_f_string() -> None:
    """Babel's extractor does not look inside f-strings: ``f"{_('done')}"`` would never reach the catalogue (and
    never be translated) while the completeness test stays green."""
    import tokenize

    hidden = []
    for path in sorted((ROOT / "course_utils").rglob("*.py")):
        with path.open("rb") as handle:
            for token in tokenize.tokenize(handle.readline):
                prefix = re.match(r"[A-Za-z]*", token.string).group(0).lower() if token.type == tokenize.STRING else ""
                if "f" in prefix and re.search(r"\bN?_\(\s*[rRbBuU]?['\"]", token.string):
                    hidden.append(f"{path.relative_to(ROOT)}:{token.start[0]}")
    assert not hidden, f"mark these messages outside the f-string: {hidden}"


# Markdown emphasis: an asterisk that opens after a space, bracket or Chinese character and closes before one
_EMPHASIS = re.compile(r"(?<![A-Za-z0-9_*)\]])\*(?=[^\s*])[^*\n]*?[^\s*]\*(?![A-Za-z0-9_*(\[])")


def _emphasised(text: str) -> bool:
    return bool(_EMPHASIS.search(re.sub(r"`[^`]*`", "", text)))


def test_no_printed_message_uses_markdown_emphasis() -> None:
    """check(), hint() and doctor() print plain text, where ``*word*`` shows its asterisks: in either language, a
    message of course_utils emphasises nothing (the tools' messages are Markdown for the notebooks: exempt)."""
    assert _emphasised("does your hook *return* it?") and _emphasised("钩子把*缩放后*的梯度")
    assert not _emphasised("h * w > 1") and not _emphasised("features h*d_head to (h+1)*d_head")
    printed = {msgid for msgid, where in catalogue_tool.source_messages().items()
               if any(place.startswith("course_utils/") for place in where)}
    found = [msgid for msgid in printed if _emphasised(msgid)]
    found += [f"zh: {message.string}" for path in catalogue_tool.parts("zh")
              for message in catalogue_tool.read_part(path)
              if message.id in printed and message.string and _emphasised(message.string)]
    assert not found, "write these without *...*:\n" + "\n".join(found)


# -- (b) the language switch ---------------------------------------------------------------------------------------
WRONG_THEN_HINT = """
    from course_utils.machinery.checks import check, hint
    from course_utils.machinery.messages import set_language

    def clamp_to_unit_positive(grad):  # a wrong answer to 01.1: clips the negative side to 0
        return grad.clamp(0, 1)

    verdict = check("01.1", clamp_to_unit_positive)
    assert not verdict
    hint("01.1")
    print("-- back to English --")
    set_language("en")
    check("01.1", clamp_to_unit_positive)
    hint("01.1")
"""


def test_course_lang_zh_makes_check_and_hint_speak_chinese_and_set_language_en_switches_back() -> None:
    out = run_python(WRONG_THEN_HINT, "zh")
    chinese, english = out.split("-- back to English --\n")
    assert "✗ 练习 01.1：还没通过。" in chinese
    assert "觉得是检查本身有错？https://github.com/" in chinese
    assert "练习 01.1，提示 1/" in chinese
    assert "Exercise 01.1" not in chinese and "Think the check" not in chinese
    assert "✗ Exercise 01.1: not yet." in english
    assert "Think the check itself is wrong? https://github.com/" in english
    assert "Hint 2/" in english and "for exercise 01.1" in english  # the hint count goes on
    assert not any(phrase in english for phrase in ("练习", "提示", "觉得"))


def test_zh_hint_label_of_the_last_exercise_reads_without_a_stray_space_and_a_regional_lang_is_chinese() -> None:
    out = run_python("""
        from course_utils.machinery.checks import check, hint
        check("01.1", None)
        hint()
    """, "zh_CN.UTF-8")
    line = next(line for line in out.splitlines() if "提示 1/" in line)
    assert line.startswith("练习 01.1（你最近做的那道），提示 1/"), line


def test_setup_notebook_lang_zh_switches_a_session_without_course_lang() -> None:
    out = run_python("""
        from course_utils import setup_notebook
        from course_utils.machinery.checks import check, hint
        hint("01.1")
        setup_notebook(lang="zh")
        hint("01.1")
        check("99.9", None)
    """, None)
    first, second, unknown = out.splitlines()[:3]
    assert first.startswith("Hint 1/") and "for exercise 01.1" in first
    assert second.startswith("练习 01.1，提示 2/")
    assert unknown.startswith("✗ 没有编号为 '99.9' 的练习。")


@pytest.mark.parametrize("bad", ["fr", "klingon", "", 3])
def test_a_bad_language_is_a_clear_value_error_that_changes_nothing(chinese: None, bad: object) -> None:
    from course_utils import setup_notebook

    with pytest.raises(ValueError, match=r"en, zh"):
        set_language(bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"en, zh"):
        setup_notebook(lang=bad)  # type: ignore[arg-type]
    assert messages.language() == "zh"
    assert _("All checks passed.") == "所有检查都通过了。"


def test_an_unknown_course_lang_never_breaks_check() -> None:
    out = run_python(WRONG_THEN_HINT, "fr")
    assert "✗ Exercise 01.1: not yet." in out
    assert "Hint 1/" in out and not has_chinese(out)


# -- (c) English is the fallback ------------------------------------------------------------------------------------
def test_a_message_without_a_translation_comes_out_in_english(chinese: None) -> None:
    untranslated = "A sentence that no catalogue translates: {count} hooks."
    assert _(untranslated) == untranslated
    assert _(untranslated).format(count=2) == "A sentence that no catalogue translates: 2 hooks."
    assert _("") == ""  # never the catalogue's header
    assert _("All checks passed.") == "所有检查都通过了。"  # while a translated one is Chinese


def test_english_is_unchanged_when_nothing_chooses_a_language() -> None:
    set_language(None)
    if messages.language() != "en":
        pytest.skip("COURSE_LANG chooses another language in this environment")
    assert _("All checks passed.") == "All checks passed."


# -- the pieces check() composes -------------------------------------------------------------------------------------
def test_a_chinese_stub_is_recognised_as_not_done_in_either_language() -> None:
    """A learner edition made with COURSE_LANG=zh raises in Chinese; check() knows it is the stub in English too."""
    out = run_python("""
        from course_utils.machinery.learner_edition import stub_source
        from course_utils.machinery.messages import set_language
        from course_utils.machinery.checks import check
        source = stub_source('def clamp(grad):\\n    ### BEGIN SOLUTION\\n    return grad\\n    ### END SOLUTION\\n'
                             'check("01.1", clamp)\\n')
        print(source)
        namespace = {}
        exec(compile(source.replace('check("01.1", clamp)', ''), "<cell>", "exec"), namespace)
        set_language("en")
        verdict = check("01.1", namespace["clamp"])
        print("VERDICT", verdict.message)
    """, "zh")
    assert "# YOUR CODE HERE，然后删掉下面那行 raise" in out
    assert 'raise NotImplementedError("练习 01.1：在这里写你的代码")' in out
    assert "VERDICT Your answer is still the stub" in out
    assert "Think the check itself is wrong?" not in out  # a stub is no attempt: nothing to report
    assert len(in_every_language("your code goes here")) == 2


def test_a_global_hook_left_behind_is_named_in_chinese_and_still_fails_a_right_answer() -> None:
    """Whether a leftover makes the answer wrong is the Change's flag, not an English word in its phrase."""
    out = run_python("""
        import torch
        from course_utils.machinery.checks import check

        def clamp_and_leave_a_global_hook(grad):
            torch.nn.modules.module.register_module_forward_hook(lambda module, args, output: None)
            return grad.clamp(-1, 1)

        print("PASSED" if check("01.1", clamp_and_leave_a_global_hook) else "FAILED")
    """, "zh")
    assert re.search(r"✗ 练习 01\.1：还没通过。答案的结果是对的，但你的代码留下了 \d+ 个已注册的全局前向钩子", out)
    assert "你注册的每个钩子，都要用它的句柄移除" in out
    assert out.splitlines()[-1] == "FAILED"


def test_session_guard_changes_are_translated_and_flagged(chinese: None) -> None:
    import torch

    guard = SessionGuard()
    handle = torch.nn.modules.module.register_module_forward_pre_hook(lambda module, args: None)
    torch.set_default_device("meta")
    try:
        changes = guard.restore()
    finally:
        handle.remove()
        torch.set_default_device(None)
    by_text = {str(change): change.fatal for change in changes}
    assert by_text == {
        "留下了 1 个已注册的全局前向预钩子（torch.nn.modules.module._global_forward_pre_hooks；已替你移除）："
        "你注册的每个钩子，都要用它的句柄移除": True,
        _("changed the default device with torch.set_default_device (put back)"): False,
    }
    assert has_chinese(next(text for text, fatal in by_text.items() if not fatal))


def test_progress_speaks_chinese_with_its_columns_aligned(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    record.write_text('{"exercise": "01.1", "verdict": "pass", "attempt": 1, "time": "2026-11-25T04:01:02Z"}\n'
                      "not a line of ours\n", encoding="utf-8")
    env_code = f"""
        import os
        os.environ["COURSE_PROGRESS"] = {str(record)!r}
        from course_utils.machinery.progress import progress
        progress()
    """
    chinese, english = run_python(env_code, "zh").splitlines(), run_python(env_code, None).splitlines()
    assert chinese[0].split() == ["笔记本", "完成", "尝试", "未开始", "未完成的练习"]
    assert english[0].split() == ["notebook", "done", "tried", "not", "started", "still", "open"]
    assert chinese[1:-2] == english[1:-2]  # the rows of numbers are the same in both languages
    width = sum(2 if ord(char) > 0x2E80 else 1 for char in chinese[0].split("未开始")[0] + "未开始")
    assert width == len(english[0].split("not started")[0] + "not started")  # Chinese headers take two columns each
    total = re.fullmatch(r"all +1 of (\d+) exercises done", english[-2]).group(1)
    assert re.fullmatch(rf"合计 +1 / {total} 道练习已完成", chinese[-2])
    assert chinese[-1] == "（record.jsonl 中有 1 行无法读取，已跳过。）"


# -- (d) doctor() ---------------------------------------------------------------------------------------------------
def test_doctor_reports_in_chinese() -> None:
    out = run_python("""
        from course_utils.machinery.env_check import doctor
        report = doctor()
        print("OK" if report.ok else "NOT OK")
    """, "zh")
    lines = out.splitlines()
    assert lines[0].startswith("✓ Python：受支持的版本（3.11, 3.12 或 3.13）") or lines[0].startswith("✗ Python：")
    assert any(line.startswith("✓ 内核：这里可以导入 course_utils 和 torch") for line in lines)
    assert lines[-2] in ("所有检查都通过了。", "有问题需要修复：请按上面 → 开头的行操作。")
    assert lines[-2] == ("所有检查都通过了。" if lines[-1] == "OK" else "有问题需要修复：请按上面 → 开头的行操作。")
    assert "All checks passed" not in out and "kernel:" not in out


def test_doctor_fixes_in_chinese_keep_the_commands(chinese: None, tmp_path: Path) -> None:
    route = detect_route(make_venv(tmp_path), base_prefix=tmp_path / "python", checkout=tmp_path)
    assert route.fix_packages == "在终端里进入课程文件夹，运行：`make venv`；然后重启内核（Kernel > Restart Kernel）。"
    assert "先 `make clean`，再 `make lab PYTHON=python3.11`（或 python3.12, python3.13）" in route.fix_python
    base = make_conda(tmp_path / "conda", base=True)
    conda = detect_route(base, base_prefix=base, checkout=tmp_path)
    assert conda.fix_packages.startswith("这个内核运行在 conda 的 base 环境里。在终端里进入课程文件夹，运行：")
    assert "`conda env create -f environment.yml`, `conda activate pytorch-hooks-course`" in conda.fix_packages
