"""The exercise self-checks: ✓ for right answers, hints for wrong ones, clear messages for misuse."""

from __future__ import annotations

import re

import pytest
import torch

from course_utils.checks import all_exercises, check, exercise


def test_right_answer_prints_tick(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("00.1", "a handle")
    assert capsys.readouterr().out.startswith("✓ Exercise 00.1: correct.")


def test_answers_are_case_and_space_insensitive(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("00.1", "  A   Handle ")


def test_wrong_answer_prints_hint_not_solution(capsys: pytest.CaptureFixture[str]) -> None:
    assert not check("00.1", "None")
    out = capsys.readouterr().out
    assert out.startswith("✗ Exercise 00.1: not yet.")
    assert "remove()" in out
    assert "a handle" not in out.lower()


def test_wrong_type_says_what_is_expected(capsys: pytest.CaptureFixture[str]) -> None:
    assert not check("00.1", 42)
    assert "got int" in capsys.readouterr().out


def test_option_outside_the_list_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert not check("00.1", "a hook id")
    assert "not one of the options" in capsys.readouterr().out


def test_unknown_id_suggests_close_ids() -> None:
    with pytest.raises(KeyError, match=r"There is no exercise '00\.9'.*Did you mean"):
        check("00.9", "x")
    with pytest.raises(TypeError, match="strings like"):
        exercise(1)  # type: ignore[arg-type]


def test_catalogue_ids_are_well_formed_and_tasks_written() -> None:
    catalogue = all_exercises()
    assert len(catalogue) >= 2
    for exercise_id, item in catalogue.items():
        assert re.fullmatch(r"\d\d\.\d+", exercise_id), exercise_id
        assert item.task.strip(), exercise_id


def test_tensor_validator_handles_none_shapes_and_lists() -> None:
    from course_utils.checks import expect_tensor

    validate = expect_tensor([1.0, 2.0], "think again")
    assert validate(torch.tensor([1.0, 2.0])).ok
    assert validate([1, 2]).ok
    assert not validate(None).ok and "None" in validate(None).message
    assert "shape" in validate(torch.ones(3)).message
    assert validate(torch.tensor([1.0, 2.5])).message == "think again"
    assert "got str" in validate("12").message


def test_a_raising_answer_is_reported_not_hidden(capsys: pytest.CaptureFixture[str]) -> None:
    from course_utils.checks import Exercise, Verdict, expect_callable, register

    def run_it(fn):  # noqa: ANN001, ANN202
        fn()
        return Verdict(True)

    register(Exercise("99.1", "test only", expect_callable(run_it, "a function")))
    try:
        def broken() -> None:
            raise ValueError("boom")

        assert not check("99.1", broken)
        assert "your code raised ValueError: boom" in capsys.readouterr().out
    finally:
        from course_utils import checks

        checks._EXERCISES.pop("99.1")
