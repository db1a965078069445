"""What check() promises a learner (the sections below), each tried with the answer that would break it. Deliberate
tampering (patching torch.allclose, lying tensor subclasses, calling the checker's reference) is not defended against:
a cheat only fools the learner who cheats (issue 38)."""

from __future__ import annotations

import dataclasses
import linecache
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn as nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from course_utils.machinery import checks, guard
from course_utils.machinery.exercise_kit import Exercise, Status, Verdict, expect_tensor, generator, require
from tests.session_state import _global_hook_counts, same_session, session_state

_HINT_TAILS = ("gives a hint.", "gives the next hint.", "says where the solution is.")


def _course_code(source: str) -> dict:
    """Run ``source`` as a file of the course package would run: a check's code is the course's, and its lines are
    readable (check() reads them to tell a learner's wrong signature from a course bug)."""
    filename = str(Path(checks.__file__).parent / "exercises" / "_test_check_adversarial.py")
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"torch": torch, "Verdict": Verdict, "generator": generator, "require": require}
    exec(compile(source, filename, "exec"), namespace)
    return namespace


_clamping = _course_code("""
def clamping(hook):  # the test's own exercise: a tensor hook that clamps to [-1, 1]
    upstream = torch.randn(3, 4, generator=generator(0)) * 3
    hook(upstream.clone())  # called directly first, as a check calls the learner's function
    x = torch.ones(3, 4, requires_grad=True)
    z = x * 1.0
    z.register_hook(hook)
    (z * upstream).sum().backward()
    require(torch.allclose(x.grad, upstream.clamp(-1, 1)), "Clamp the gradient to [-1, 1].")
    return Verdict(True)
""")["clamping"]
OWN = {  # exercises of this test's own, so that no test depends on a notebook that may be removed (issue 46)
    "99.1": Exercise("99.1", "Write clamp_hook(grad).", _clamping, what="a hook(grad)", hints=("nudge", "closer")),
    "99.2": Exercise("99.2", "Predict two numbers.", expect_tensor([11.0, 22.0], "Count again."), kind="predict",
                     hints=("nudge",)),
}
RIGHT = {"99.1": lambda grad: grad.clamp(-1, 1), "99.2": (11, 22)}
WRONG = {"99.1": lambda grad: grad.clamp(0, 1), "99.2": (10, 20)}


@pytest.fixture(autouse=True)
def exercises(monkeypatch: pytest.MonkeyPatch):
    """The exercises check() knows: the course's and OWN; a test may add one or change one."""
    table = {**checks.catalogue(), **OWN}
    monkeypatch.setattr(checks, "catalogue", lambda: table)
    checks._reset_hints()
    yield table
    checks._reset_hints()


def _judged(capsys: pytest.CaptureFixture[str], exercise_id: str, answer: object) -> tuple[bool, str]:
    """check() once; the verdict and the printed verdict line. A ✗ line must end with how to ask for a hint, and
    the next line offers the prefilled 'report a problem' link."""
    verdict = bool(checks.check(exercise_id, answer))
    out = capsys.readouterr().out
    if not verdict:
        first, *rest = out.splitlines()
        assert first.startswith(f"✗ Exercise {exercise_id}: not yet."), out
        assert first.rstrip().endswith(tuple(f'hint("{exercise_id}") {tail}' for tail in _HINT_TAILS)), out
        assert rest and rest[0].startswith("Think the check itself is wrong? https://github.com/"), out
        out = first + "\n" + "\n".join(rest[1:])
    return verdict, out


def _scratch(exercises: dict, validate) -> None:
    """Exercise 99.9: 99.2's, with another validator."""
    exercises["99.9"] = dataclasses.replace(OWN["99.2"], id="99.9", validate=validate)


def _spins(*args: object) -> None:
    while True:
        pass


# -- a time limit ------------------------------------------------------------------------------------------------
def test_an_endless_loop_in_a_hook_is_stopped_and_the_kernel_stays_usable(capsys, exercises) -> None:
    exercises["99.1"] = dataclasses.replace(OWN["99.1"], time_limit_s=1.0)  # the default, 60 s, is for slow laptops

    def swallows_once_then_spins(grad):
        try:
            _spins()
        except BaseException:
            pass
        _spins()

    def debugger(frame, event, arg):
        return None

    for answer in (_spins, swallows_once_then_spins):
        before = session_state()
        start = time.monotonic()
        sys.settrace(debugger)
        try:
            ok, out = _judged(capsys, "99.1", answer)
            assert sys.gettrace() is debugger  # a debugger's trace function survives a stopped answer
        finally:
            sys.settrace(None)
        assert not ok and "did not finish in 1 s" in out and "endless loop" in out
        assert time.monotonic() - start < 15
        assert same_session(before, session_state())
    ok, _ = _judged(capsys, "99.1", RIGHT["99.1"])  # the session still checks answers
    assert ok
    assert checks._run(checks.exercise("99.1"), _spins)[0].status is Status.TIMED_OUT


def test_the_time_limit_stops_the_learners_code_not_the_courses_own() -> None:
    """Past the limit, the course's own code (a check's set-up, its clean-up) runs on; the learner's is stopped."""
    namespace: dict = {}
    exec(compile("def course_work(seconds, then=None):\n    import time\n    end = time.monotonic() + seconds\n"
                 "    while time.monotonic() < end: pass\n    return then() if then else None\n",
                 guard.__file__, "exec"), namespace)  # code that counts as the course's
    course_work = namespace["course_work"]
    with guard.time_limit(0.2) as timer:
        course_work(0.6)
        assert not timer.fired
        with pytest.raises(guard.TimeLimitExceeded):
            course_work(0.1, then=_spins)  # the learner's loop, called by the course: stopped at once
    assert timer.fired


def test_the_time_limit_keeps_the_callers_own_alarm() -> None:
    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        with guard.time_limit(2.0):
            pass
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 3.0 < remaining <= 5.0
        assert signal.getsignal(signal.SIGALRM) is not None and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_off_the_main_thread_there_is_no_limit_and_check_says_so_once(capsys) -> None:
    right, results = RIGHT["99.1"], []

    def two_checks() -> None:
        results.extend([checks.check("99.1", right), checks.check("99.1", right)])

    checks._no_time_limit_said.clear()
    thread = threading.Thread(target=two_checks)
    thread.start()
    thread.join(60)
    out = capsys.readouterr().out
    assert not thread.is_alive() and all(results)
    assert out.count("cannot stop an endless loop") == 1 and "interrupt the kernel" in out


# -- an output cap -----------------------------------------------------------------------------------------------
def test_a_flood_of_printed_lines_is_cut_short(capsys) -> None:
    def chatty(grad):
        for i in range(100_000):
            print("line", i)
        return RIGHT["99.1"](grad)

    ok, out = _judged(capsys, "99.1", chatty)
    assert len(out) < 30_000 and "did not show the rest" in out
    assert ok  # what it prints does not make the answer wrong


# -- SystemExit and Ctrl-C ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", [SystemExit, KeyboardInterrupt])
def test_system_exit_and_keyboard_interrupt_become_a_cross(kind: type[BaseException], capsys) -> None:
    def raises(grad):
        raise kind(0)

    ok, out = _judged(capsys, "99.1", raises)
    assert not ok and kind.__name__ in out


# -- the session as it was ---------------------------------------------------------------------------------------
def test_an_answer_that_changes_every_promised_global_then_raises_leaves_the_session_as_it_was(capsys) -> None:
    before = session_state()

    def vandal(grad):
        torch.manual_seed(123), np.random.seed(1)
        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)
        torch.set_printoptions(precision=9)
        np.set_printoptions(precision=9)
        torch.set_num_threads(torch.get_num_threads() + 1)
        torch.set_anomaly_enabled(True)
        torch.set_default_device("meta")
        raise ValueError("and now fail")

    ok, out = _judged(capsys, "99.1", vandal)
    assert not ok and "ValueError" in out and "bug in the course" not in out
    assert "changed the default device with torch.set_default_device (put back)" in out
    assert same_session(before, session_state())
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
    assert torch.empty(1).device.type == "cpu"


@pytest.mark.parametrize("mode", ["function", "dispatch"])
def test_a_torch_mode_left_active_is_taken_off_and_named_and_the_session_put_back(capsys, exercises, mode) -> None:
    """Notebook 05 teaches TorchFunctionMode: an answer that enters one (here with the usual `**kwargs` bug, so every
    torch call it sees fails) and never leaves it must not leave it on for the session, nor stop the guard from
    putting back the grad mode, the default device and the random states."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Buggy(TorchFunctionMode if mode == "function" else TorchDispatchMode):  # type: ignore[misc]
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **kwargs)

        __torch_dispatch__ = __torch_function__

    def enters_and_stays(x):
        torch.manual_seed(3), torch.set_default_device("meta"), torch.set_grad_enabled(False)
        Buggy().__enter__()
        return x * 2

    _scratch(exercises, lambda answer: Verdict(bool(torch.equal(answer(torch.ones(2)), torch.full((2,), 2.0)))))
    before = session_state()
    ok, out = _judged(capsys, "99.9", enters_and_stays)
    assert not ok and "left 1 torch mode(s) active (Buggy; taken off)" in out, out
    assert same_session(before, session_state())
    assert torch.is_grad_enabled() and torch.ones(1).device.type == "cpu"


@pytest.mark.parametrize(("leave_one", "named"), [
    (lambda: nn.modules.module.register_module_forward_hook(lambda module, args, output: None), "global forward hook"),
    (lambda: register_optimizer_step_post_hook(lambda opt, args, kwargs: None),
     "global optimizer step post-hook"),
])
def test_a_correct_answer_that_leaves_a_global_hook_fails_and_the_hook_goes(leave_one, named, capsys) -> None:
    before = _global_hook_counts()

    def clamps_and_leaves_a_global_hook(grad):
        leave_one()  # never removed
        return grad.clamp(-1, 1)

    ok, out = _judged(capsys, "99.1", clamps_and_leaves_a_global_hook)
    assert not ok and named in out
    assert _global_hook_counts() == before


def test_a_hook_registered_during_a_check_on_the_learners_own_model_runs_unwatched_afterwards(capsys) -> None:
    """check() wraps the hooks an answer registers (hook_watch); one the answer leaves on the learner's own model is
    theirs to remove, and after the check it behaves exactly as they wrote it -- nothing raised, nothing replaced."""
    own = nn.Linear(3, 3)
    returned = object()

    def clamps_and_hooks_own(grad):
        if not own._forward_hooks:
            own.register_forward_hook(lambda module, args, output: returned)
        return grad.clamp(-1, 1)

    ok, _out = _judged(capsys, "99.1", clamps_and_hooks_own)
    assert ok
    # the wrapper passes the learner's value through: not the check's business
    assert own(torch.ones(1, 3)) is returned
    own._forward_hooks.clear()
    registrations = (torch.Tensor.register_hook, nn.Module.register_forward_hook, nn.Module.register_full_backward_hook)
    assert all(function.__code__.co_filename.startswith(torch.__path__[0]) for function in registrations)  # put back


# -- the learner's mistakes are the learner's (wrong types and values: the exercise cases) --------------------------
def test_an_answer_with_the_wrong_signature_is_the_learners_error(capsys) -> None:
    def clamp_hook(module, grad):
        return grad.clamp(-1, 1)

    class Tracer:  # the check calls Tracer(grad); this one takes no argument
        pass

    for answer in (clamp_hook, Tracer):
        ok, out = _judged(capsys, "99.1", answer)
        assert not ok and "parameters do not fit" in out and "bug in the course" not in out, out
    assert "clamp_hook()" in _judged(capsys, "99.1", clamp_hook)[1]


class _Tagged(torch.Tensor):  # a library's subclass, say
    pass


@pytest.mark.parametrize("answer", [np.asarray([11.0, 22.0]), torch.tensor([11.0, 22.0]).as_subclass(_Tagged)],
                         ids=["numpy", "tensor-subclass"])
def test_numbers_asked_for_are_compared_by_their_values_whatever_holds_them(answer, capsys) -> None:
    assert _judged(capsys, "99.2", answer)[0]


def test_a_scratch_validator_sees_plain_values(capsys, exercises) -> None:
    seen = []

    def records(answer):
        seen.append(answer)
        return Verdict(True)

    _scratch(exercises, records)

    class Loud(str):
        pass

    checks.check("99.9", [Loud("x"), np.int64(3), (np.float32(0.5),)])
    capsys.readouterr()
    assert seen == [["x", 3, (0.5,)]] and type(seen[0][0]) is str and type(seen[0][1]) is int


# -- a correct answer is never refused ---------------------------------------------------------------------------
def test_a_correct_answer_that_changes_settings_passes(capsys) -> None:
    def right_but_untidy(grad):
        torch.set_printoptions(precision=2)
        torch.manual_seed(5)
        return RIGHT["99.1"](grad)

    ok, out = _judged(capsys, "99.1", right_but_untidy)
    assert ok and out.startswith("✓ Exercise 99.1: correct.")


# -- every ✗ says how to get a hint; the guard is cheap ---------------------------------------------------------
def test_every_cross_line_ends_with_how_to_ask_for_a_hint(capsys) -> None:
    for exercise_id, answer in WRONG.items():
        for _ in range(4):  # before any hint, between hints, after the last one
            ok, out = _judged(capsys, exercise_id, answer)
            assert not ok and out.rstrip().endswith(_HINT_TAILS)
            checks.hint(exercise_id)
            capsys.readouterr()


def test_the_guard_adds_little_time_to_a_check(capsys, exercises) -> None:
    """The guard's own cost (snapshot, restore, timer, output budget) per check() call, on a trivial exercise."""
    _scratch(exercises, lambda answer: Verdict(True))
    checks.check("99.9", "b")
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        checks.check("99.9", "b")
        timings.append(time.perf_counter() - start)
    capsys.readouterr()
    assert sorted(timings)[2] < 0.05, timings  # measured ~1 ms (benchmarks/bench_check_overhead.py)
