"""check() and hint(): ✓ or a hint, never the solution; the learner's session is left as it was found; an error in
the learner's code names the learner's line, an error in a check is reported as a course bug."""

from __future__ import annotations

import importlib
import random
import sys
import uuid

import numpy as np
import pytest
import torch

from course_utils.machinery import checks
from course_utils.machinery.checks import all_exercises, check, exercise, hint
from course_utils.machinery.exercise_kit import Exercise, Status, Verdict, expect_choice, expect_tensor
from tests.session_state import same_session, session_state


@pytest.fixture
def scratch_exercise(monkeypatch: pytest.MonkeyPatch):
    """Install a temporary exercise 99.1 whose validator is given by the test."""

    def install(validate, hints=("nudge", "closer"), what=None):
        item = Exercise("99.1", "test only", validate, what=what, hints=hints, kind="write")
        table = dict(checks.catalogue())
        table["99.1"] = item
        monkeypatch.setattr(checks, "catalogue", lambda: table)
        checks._reset_hints()
        return item

    yield install
    checks._reset_hints()


def test_choice_right_wrong_and_misuse(scratch_exercise, capsys: pytest.CaptureFixture[str]) -> None:
    scratch_exercise(expect_choice("b", ["a", "b", "c"], "Look at what you can call .remove() on."))
    assert check("99.1", "b") and check("99.1", "  B ")
    assert capsys.readouterr().out.startswith("✓ Exercise 99.1: correct.")
    assert not check("99.1", "a")
    out = capsys.readouterr().out
    assert out.startswith("✗ Exercise 99.1: not yet.") and "remove()" in out and 'hint("99.1")' in out
    assert not check("99.1", 42)
    assert "got int" in capsys.readouterr().out
    assert not check("99.1", "d")
    assert "not one of the options" in capsys.readouterr().out
    with pytest.raises(ValueError, match="not among the options"):
        expect_choice("z", ["a"], "")


def test_unknown_id_suggests_close_ids(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    some_id = next(iter(all_exercises()))
    with pytest.raises(KeyError, match=r"There is no exercise .*Did you mean"):
        exercise(some_id[:-1] + "9")
    table = {**checks.catalogue(), "97.3": Exercise("97.3", "test only", lambda answer: Verdict(True))}
    monkeypatch.setattr(checks, "catalogue", lambda: table)
    assert not check("7.3", "x")  # check() prints the advice as a ✗ line instead of a traceback
    out = capsys.readouterr().out
    assert out.startswith("✗ There is no exercise '7.3'. Did you mean '97.3'") and "Traceback" not in out
    hint("7.3")  # hint() too
    assert capsys.readouterr().out.startswith("There is no exercise '7.3'. Did you mean '97.3'")
    with pytest.raises(TypeError, match="strings like"):
        exercise(1)  # type: ignore[arg-type]


def test_exercise_definitions_are_validated_so_the_catalogue_is_well_formed() -> None:
    from course_utils.machinery.report_problem import problem_url

    for wrong in ("1.2", "01.123"):  # one id syntax (layout.EXERCISE_ID): what the progress record and links accept
        with pytest.raises(ValueError, match="look like '01.2'"):
            Exercise(wrong, "task", lambda a: Verdict(True))
    with pytest.raises(ValueError):
        problem_url("01.123")
    assert "01.12" in problem_url("01.12") and Exercise("01.12", "task", lambda a: Verdict(True))
    with pytest.raises(ValueError, match="kind must be"):
        Exercise("01.2", "task", lambda a: Verdict(True), kind="quiz")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="tuple of strings"):
        Exercise("01.2", "task", lambda a: Verdict(True), hints="one")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one-line task"):  # so every exercise of the catalogue has one
        Exercise("01.2", " ", lambda a: Verdict(True))


@pytest.fixture
def exercise_package(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A package of exercise modules whose ``nbNN.py`` and ``nbNN.toml`` the test writes: ``make(files)`` returns
    its name, with the kit reading its TOML files."""
    from course_utils.machinery import exercise_kit

    made: list[str] = []

    def make(files: dict[str, str]) -> str:
        name = f"scratch_exercises_{uuid.uuid4().hex}"  # a new name: the kit keeps what it read by package
        (tmp_path / name).mkdir()
        for file, text in {"__init__.py": "", **files}.items():
            (tmp_path / name / file).write_text(text, encoding="utf-8")
        monkeypatch.setattr(exercise_kit, "EXERCISE_PACKAGE", name)
        importlib.invalidate_caches()
        made.append(name)
        return name

    monkeypatch.syspath_prepend(tmp_path)
    yield make
    for name in [module for module in sys.modules if module.startswith(tuple(made))]:
        del sys.modules[name]


MODULE = """
from course_utils.machinery.exercise_kit import *

@exercise("04.1")
def _check(answer) -> Verdict:
    return Verdict(answer == 1)

EXERCISES = (_check,)
"""


def test_an_exercise_is_its_check_and_its_table_in_the_toml(exercise_package) -> None:
    from course_utils.machinery.exercises import collect

    package = exercise_package({"nb04.py": MODULE, "nb04.toml": '["04.1"]\ntask = "Answer 1."\nstretch = true\n'
                                                                'hints = ["one", "two"]\ntime_limit_s = 5\n'})
    item = collect(package)["04.1"]
    assert (item.task, item.stretch, item.hints, item.time_limit_s, item.kind) == ("Answer 1.", True, ("one", "two"),
                                                                                   5, "write")
    assert item.judge(1) and not item.judge(2)


@pytest.mark.parametrize(("toml", "error", "words"), [
    ('["04.2"]\ntask = "Another."\n', LookupError, ['nb04.toml has no table ["04.1"]', "add one"]),  # id not there
    ("", LookupError, ['nb04.toml has no table ["04.1"]']),  # no table at all
    ('["04.1"]\ntask = "Answer 1."\nhint = ["one"]\n', ValueError, ["no field hint (a typo?)", "hints"]),
    ('["04.1"]\ntask = "Answer 1."\nhints = "one"\n', ValueError, ["hints = 'one' is not a list of strings"]),
    ('["04.1"]\ntask = "Answer 1."\nstretch = "yes"\n', ValueError, ["stretch = 'yes' is not true or false"]),
    ('["04.1"]\nwhat = "a function f(x)"\n', ValueError, ["write a one-line task"]),
    ('["04.1"]\ntask = "Answer 1.\n', ValueError, ["nb04.toml is not valid TOML"]),
    ('["04.1"]\ntask = "Answer 1."\n\n["04.2"]\ntask = "Another."\n', ValueError,
     ["a table for 04.2, which no exercise of the EXERCISES of nb04.py declares", '@exercise("04.2")']),
])
def test_a_module_and_its_toml_that_disagree_say_what_to_fix(exercise_package, toml: str, error: type[Exception],
                                                            words: list[str]) -> None:
    from course_utils.machinery.exercises import collect

    package = exercise_package({"nb04.py": MODULE, "nb04.toml": toml} if toml else {"nb04.py": MODULE})
    with pytest.raises(error) as raised:
        collect(package)
    assert all(word in str(raised.value) for word in words), raised.value


def test_a_toml_without_its_module_is_an_error(exercise_package) -> None:
    from course_utils.machinery.exercises import collect

    package = exercise_package({"nb04.py": MODULE, "nb04.toml": '["04.1"]\ntask = "Answer 1."\n',
                                "nb05.toml": '["05.1"]\ntask = "Answer 2."\n'})
    with pytest.raises(ValueError, match=r"exercises/nb05.toml has no module nb05.py beside it"):
        collect(package)


def test_a_verdict_carries_its_status_and_is_translated_when_read() -> None:
    from course_utils.machinery.messages import N_, Text, in_language

    assert Verdict(True).status is Status.PASSED and Verdict(False, "no").status is Status.FAILED
    stub = Verdict(False, Text(N_("Your answer is still the stub")), status=Status.STUB)
    assert stub.message == "Your answer is still the stub" and not stub
    with in_language("zh"):
        assert stub.message == "你的答案还是占位代码"
    with pytest.raises(ValueError, match="cannot have the status"):
        Verdict(True, status=Status.TIMED_OUT)


def test_tensor_validator_handles_none_shapes_and_lists() -> None:
    validate = expect_tensor([1.0, 2.0], "think again")
    assert validate(torch.tensor([1.0, 2.0])).ok and validate([1, 2]).ok
    assert not validate(None).ok and "None" in validate(None).message
    assert "shape" in validate(torch.ones(3)).message
    assert validate(torch.tensor([1.0, 2.5])).message == "think again"
    assert "got str" in validate("12").message


def test_a_validator_that_changes_every_global_leaves_the_session_as_it_was(scratch_exercise, capsys) -> None:
    def vandal(answer):
        torch.manual_seed(123), np.random.seed(1), random.seed(2)
        torch.rand(5), np.random.rand(3), random.random()
        torch.set_grad_enabled(False)
        torch.set_num_threads(torch.get_num_threads() + 1)
        torch.set_printoptions(precision=9)
        np.set_printoptions(precision=9)
        torch.set_default_dtype(torch.float64)
        torch.set_anomaly_enabled(True)
        torch.use_deterministic_algorithms(True)
        return Verdict(True)

    scratch_exercise(vandal)
    torch.rand(1)  # move the generators away from their seeded start
    before = session_state()
    assert check("99.1", None)
    assert same_session(before, session_state())
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    check("99.1", None)
    assert torch.equal(torch.rand(3), expected)  # the learner's next random numbers are unchanged


# Every real check leaving the session as it found it: tests/test_exercises.py asserts it on every right and wrong
# case it runs anyway (running them all once more here cost ~50 s of make test).


def test_an_error_in_the_learners_code_names_the_learners_line(scratch_exercise, capsys) -> None:
    def run_it(fn):
        return Verdict(fn(torch.ones(2)) is not None)

    scratch_exercise(run_it, what="a function")

    def my_hook(grad):
        scaled = grad * 2
        return scaled.no_such_method()

    assert not check("99.1", my_hook)
    out = capsys.readouterr().out
    assert "Your code raised AttributeError" in out and "in my_hook" in out and "scaled.no_such_method()" in out
    assert "bug in the course" not in out


def test_an_error_inside_a_check_is_reported_as_a_course_bug(scratch_exercise, capsys) -> None:
    def broken_validator(answer):
        return Verdict(torch.ones(2) @ torch.ones(3) is None)

    item = scratch_exercise(broken_validator)
    object.__setattr__(item, "validate", broken_validator)
    # the validator lives in this test file, which counts as "not the course": move it into the package's eyes
    broken_validator.__code__ = broken_validator.__code__.replace(co_filename=checks.__file__)
    verdict = check("99.1", lambda g: g)
    out = capsys.readouterr().out
    assert not verdict and verdict.status is Status.COURSE_BUG
    assert "bug in the course's check" in out and "RuntimeError" in out and "course_utils/machinery/checks.py" in out
    assert "Your code raised" not in out


def test_an_error_pytorch_raises_on_the_learners_hook_is_the_learners(scratch_exercise, capsys) -> None:
    def run_hook(hook):
        w = torch.ones(2, requires_grad=True)
        w.register_post_accumulate_grad_hook(hook)
        (w * 2).sum().backward()  # PyTorch raises: post-accumulate hooks must return None
        return Verdict(True)

    scratch_exercise(run_hook, what="a hook")
    run_hook.__code__ = run_hook.__code__.replace(co_filename=checks.__file__)
    assert not check("99.1", lambda p: p.grad * 2)
    out = capsys.readouterr().out
    assert "PyTorch raised RuntimeError" in out and "bug in the course" not in out


def test_a_stub_left_in_place_is_named_as_such(scratch_exercise, capsys) -> None:
    scratch_exercise(lambda fn: Verdict(fn() is None), what="a function")

    def answer():
        raise NotImplementedError("Exercise 99.1: your code goes here")

    verdict = check("99.1", answer)
    out = capsys.readouterr().out
    assert not verdict and verdict.status is Status.STUB and "still the stub" in out
    assert "Think the check itself is wrong?" not in out  # a stub is no attempt: nothing to report, nothing recorded

    def raises_its_own():
        raise NotImplementedError

    assert check("99.1", raises_its_own).status is Status.STUB


def test_a_validator_that_returns_no_verdict_is_a_course_bug(scratch_exercise, capsys) -> None:
    scratch_exercise(lambda answer: True)
    assert not check("99.1", 1)
    assert "not a Verdict" in capsys.readouterr().out


def test_hints_come_one_by_one_then_point_to_the_solution(scratch_exercise, capsys) -> None:
    scratch_exercise(lambda answer: Verdict(False, "no"))
    hint("99.1")
    assert capsys.readouterr().out.startswith("Hint 1/2 for exercise 99.1: nudge Call hint() again")
    hint("99.1")
    assert capsys.readouterr().out.startswith("Hint 2/2 for exercise 99.1: closer")
    hint("99.1")
    assert "complete notebook" in capsys.readouterr().out
    check("99.1", 1)
    assert capsys.readouterr().out.splitlines()[0].endswith('hint("99.1") says where the solution is.')


def test_hint_without_an_id_gives_the_next_hint_of_the_exercise_last_worked_on(scratch_exercise, capsys) -> None:
    scratch_exercise(lambda answer: Verdict(False, "no"))
    hint()
    assert capsys.readouterr().out.startswith('hint() needs an exercise id, e.g. hint("01.2")')
    check("99.1", 1)
    assert capsys.readouterr().out.splitlines()[0].endswith('Stuck? hint("99.1") gives a hint.')
    hint()  # what the ✗ line's "Call hint() again" promises, from the first hint on
    assert capsys.readouterr().out.startswith(
        "Hint 1/2 for exercise 99.1 (the last one you worked on): nudge Call hint() again for the next one.")
    hint()
    assert capsys.readouterr().out.startswith("Hint 2/2 for exercise 99.1 (the last one you worked on): closer")
    other = next(key for key, item in all_exercises().items() if key != "99.1" and len(item.hints) > 1)
    hint(other)
    capsys.readouterr()
    hint()
    assert capsys.readouterr().out.startswith("Hint 2/")  # other's next one: hint(other) was the last asked about
    check("99.1", 1)
    hint()
    assert "No more hints for exercise 99.1." in capsys.readouterr().out
