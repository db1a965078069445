"""check() against answers written to fool it or to break the learner's session (issue 23, section 2): each test
performs the attack and fails if the cheat is accepted, if check() hangs, or if a global change outlives the check.
Every ✗ line also ends with how to ask for a hint."""

from __future__ import annotations

import dataclasses
import os
import sys
import time

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from course_utils import saliency
from course_utils.machinery import checks
from course_utils.machinery.blocked_helpers import is_blocked
from course_utils.machinery.exercise_kit import ReferenceRefused, Verdict
from course_utils.machinery.exercises import nb02, nb06
from course_utils.hooks import HookRegistry
from tests.exercise_cases import all_cases
from tests.session_state import same_session, session_state

CASES = all_cases()


@pytest.fixture(autouse=True)
def _fresh_hints():  # noqa: ANN202
    checks._reset_hints()
    yield
    checks._reset_hints()


_HINT_TAILS = ("gives a hint.", "gives the next hint.", "says where the solution is.")


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


def _with_limit(monkeypatch: pytest.MonkeyPatch, exercise_id: str, seconds: float) -> None:
    """Give one real exercise a short time limit (the default, 60 s, is for slow laptops)."""
    table = dict(checks.catalogue())
    table[exercise_id] = dataclasses.replace(table[exercise_id], time_limit_s=seconds)
    monkeypatch.setattr(checks, "catalogue", lambda: table)


def _global_hook_counts() -> dict[str, int]:
    import torch.nn.modules.module as module_globals
    import torch.optim.optimizer as optimizer_globals

    return {f"{m.__name__}.{name}": len(value) for m in (module_globals, optimizer_globals)
            for name, value in vars(m).items()
            if name.startswith("_global_") and "hook" in name and isinstance(value, dict)}


# -- cheats ------------------------------------------------------------------------------------------------------
def test_the_course_reference_refuses_learner_callers(capsys) -> None:
    with pytest.raises(ReferenceRefused, match="02.2"):
        nb02._live_leaf_run()  # the predict cheat: the truth, computed before check()

    def weights_from_the_reference(model, layer_name, x, targets):  # noqa: ANN001, ANN202
        _, gradient = nb06._split_truth(model, int(layer_name), x, targets)
        return gradient.mean(dim=(2, 3))

    def cam_from_the_reference(model, layer_name, x, targets):  # noqa: ANN001, ANN202
        activation, gradient = nb06._split_truth(model, int(layer_name), x, targets)
        return nb06._cam(activation, gradient)

    for exercise_id, cheat in (("06.1", weights_from_the_reference), ("06.2", cam_from_the_reference)):
        ok, out = _judged(capsys, exercise_id, cheat)
        assert not ok and "reference" in out and "_split_truth" in out


def test_switching_a_blocked_helper_back_on_inside_the_answer_is_refused(capsys) -> None:
    original = saliency.grad_cam.__code__

    def restores_then_calls(model, layer_name, x, targets):  # noqa: ANN001, ANN202
        saliency.grad_cam.__code__ = original
        return saliency.grad_cam(model, layer_name, x, list(targets), upsample=False, normalize=False)

    ok, out = _judged(capsys, "06.2", restores_then_calls)
    assert not ok and "grad_cam" in out and "switched" in out
    assert saliency.grad_cam.__code__ is original and not is_blocked(saliency.grad_cam)


def test_a_helper_replaced_before_the_check_is_refused(capsys) -> None:
    original = saliency.grad_cam.__code__

    def my_grad_cam(model, layer, x, targets=None, *, upsample=True, normalize=True):  # noqa: ANN001, ANN202
        return torch.zeros(1)

    saliency.grad_cam.__code__ = my_grad_cam.__code__
    try:
        ok, out = _judged(capsys, "06.2", CASES["06.2"].right[0])
        assert not ok and "restart the kernel" in out
    finally:
        saliency.grad_cam.__code__ = original


def test_replacing_relu6_forward_instead_of_a_hook_is_refused(capsys) -> None:
    real_forward = nn.ReLU6.forward

    class _Guided(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):  # noqa: ANN001, ANN205
            ctx.save_for_backward(x)
            return x.clamp(0, 6)

        @staticmethod
        def backward(ctx, grad):  # noqa: ANN001, ANN205
            (x,) = ctx.saved_tensors
            return grad.clamp(min=0) * ((x > 0) & (x < 6))

    def patch_the_class(model):  # noqa: ANN001, ANN202
        nn.ReLU6.forward = lambda self, x: _Guided.apply(x)
        return []

    def patch_the_instances(model):  # noqa: ANN001, ANN202
        for module in model.modules():
            if isinstance(module, nn.ReLU6):
                module.forward = _Guided.apply
        return []

    for cheat in (patch_the_class, patch_the_instances):
        ok, out = _judged(capsys, "05.1", cheat)
        assert not ok and ("ReLU6.forward" in out or "forward" in out), out
        assert nn.ReLU6.forward is real_forward


def test_delegating_to_the_course_mode_is_refused(capsys) -> None:
    class Delegates(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            self.hooks, self.counter = HookRegistry(), [0]
            return saliency._GuideFunctionalRelus.__torch_function__(self, func, types, args, kwargs)

    class BorrowsTheRule(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
            result = func(*args, **(kwargs or {}))
            if func in (F.relu, torch.relu) and result.requires_grad:
                result.register_hook(saliency._guide)
            return result

    for cheat in (Delegates, BorrowsTheRule):
        ok, out = _judged(capsys, "05.3", cheat)
        assert not ok and "switched off" in out, out
    assert torch._C._len_torch_function_stack() == 0


class _AlwaysEqual(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN206
        if func in (torch.allclose, torch.equal, torch.isclose, torch.Tensor.__eq__):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


@pytest.mark.parametrize("exercise_id", ["02.2", "08.1"])
def test_a_tensor_subclass_that_claims_equality_is_compared_by_its_numbers(exercise_id: str, capsys) -> None:
    liar = torch.tensor([123.0, 456.0]).as_subclass(_AlwaysEqual)
    ok, _ = _judged(capsys, exercise_id, liar)
    assert not ok


def test_a_str_subclass_that_equals_everything_is_read_as_its_text(capsys) -> None:
    class Everything(str):
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = str.__hash__

        def lower(self) -> str:
            return "b"

        def strip(self, *args: object) -> str:
            return self

    ok, _ = _judged(capsys, "05.2", Everything("a"))
    assert not ok


def test_a_hook_that_patches_torch_allclose_fails_and_the_patch_is_undone(capsys) -> None:
    real = torch.allclose

    def clamp_and_patch(grad):  # noqa: ANN001, ANN202
        torch.allclose = lambda *args, **kwargs: True
        return grad

    ok, out = _judged(capsys, "01.1", clamp_and_patch)
    assert not ok and "torch.allclose" in out
    assert torch.allclose is real


def test_patching_pytorch_before_the_check_is_named(capsys) -> None:
    real = F.relu
    F.relu = lambda x, inplace=False: real(x, inplace)
    try:
        ok, out = _judged(capsys, "01.1", CASES["01.1"].right[0])
        assert not ok and "torch.nn.functional.relu" in out and "restart the kernel" in out
    finally:
        F.relu = real


def test_shapes_are_whole_numbers_not_truncated_floats(capsys) -> None:
    ok, out = _judged(capsys, "04.1", ((3.7, 5.2), (5.9, 2.4)))
    assert not ok and "whole numbers" in out
    ok, _ = _judged(capsys, "04.1", ((3.0, 5.0), (5.0, 2.0)))  # whole floats are whole numbers
    assert ok
    ok, out = _judged(capsys, "04.1", ((3, None), (5, 2)))
    assert not ok and "bug in the course" not in out


def test_a_correct_extractor_that_leaves_a_global_hook_fails_and_the_hook_goes(capsys) -> None:
    before = _global_hook_counts()

    def extract_with_a_global_hook(model, x, names):  # noqa: ANN001, ANN202
        wanted = {model.get_submodule(name): name for name in names}
        got = {}

        def keep(module, args, output):  # noqa: ANN001, ANN202
            if module in wanted:
                got[wanted[module]] = output.detach().clone()

        nn.modules.module.register_module_forward_hook(keep)  # never removed
        model(x)
        return got

    ok, out = _judged(capsys, "03.2", extract_with_a_global_hook)
    assert not ok and "global forward hook" in out
    assert _global_hook_counts() == before


def test_global_optimizer_hooks_left_behind_are_named_and_removed(capsys, monkeypatch) -> None:
    from torch.optim.optimizer import register_optimizer_step_post_hook

    before = _global_hook_counts()
    right = CASES["01.1"].right[0]

    def leaves_an_optimizer_hook(grad):  # noqa: ANN001, ANN202
        register_optimizer_step_post_hook(lambda opt, args, kwargs: None)
        return right(grad)

    ok, out = _judged(capsys, "01.1", leaves_an_optimizer_hook)
    assert not ok and "global optimizer step post-hook" in out
    assert _global_hook_counts() == before


# -- hangs -------------------------------------------------------------------------------------------------------
def test_an_endless_loop_in_a_hook_is_stopped_and_the_kernel_stays_usable(capsys, monkeypatch) -> None:
    _with_limit(monkeypatch, "01.1", 1.0)

    def spins(grad):  # noqa: ANN001, ANN202
        while True:
            pass

    def swallows_and_spins(grad):  # noqa: ANN001, ANN202
        while True:
            try:
                while True:
                    pass
            except BaseException:  # noqa: BLE001, S110 -- the learner's bare except: interrupted again
                pass

    for answer in (spins, swallows_and_spins):
        before = session_state()
        start = time.monotonic()
        ok, out = _judged(capsys, "01.1", answer)
        assert not ok and "did not finish in 1 s" in out and "endless loop" in out
        assert time.monotonic() - start < 15
        assert same_session(before, session_state())
    ok, _ = _judged(capsys, "01.1", CASES["01.1"].right[0])  # the session still checks answers
    assert ok


def test_the_time_limit_keeps_the_callers_own_alarm() -> None:
    import signal

    from course_utils.machinery.sandbox import time_limit

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 5.0)
        with time_limit(2.0):
            pass
        remaining, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 3.0 < remaining <= 5.0
        assert signal.getsignal(signal.SIGALRM) is not None and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_an_endless_loop_off_the_main_thread_is_stopped_too(capsys, monkeypatch) -> None:
    import threading

    _with_limit(monkeypatch, "01.1", 1.0)
    result = {}

    def spins(grad):  # noqa: ANN001, ANN202
        while True:
            pass

    thread = threading.Thread(target=lambda: result.update(v=checks.check("01.1", spins)))
    thread.start()
    thread.join(30)
    assert not thread.is_alive() and not result["v"] and "did not finish" in result["v"].message


@pytest.mark.timeout(180)
def test_an_endless_loop_in_a_comm_hook_on_rank_0_is_stopped(capsys, monkeypatch) -> None:
    import torch.distributed as dist

    _with_limit(monkeypatch, "10.3", 6.0)  # the spinning hook burns a core until then

    def spins(state, bucket):  # noqa: ANN001, ANN202
        while True:
            pass

    start = time.monotonic()
    ok, out = _judged(capsys, "10.3", spins)
    assert not ok and "did not finish in 6 s" in out, out
    assert time.monotonic() - start < 90
    assert not dist.is_initialized()


# -- state left behind -------------------------------------------------------------------------------------------
class _Refuses(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        raise NotImplementedError("this mode refuses every call")


def test_a_hook_that_breaks_every_global_before_raising_is_reported_and_undone(capsys) -> None:
    before = session_state()
    cwd = os.getcwd()
    limit = sys.getrecursionlimit()
    errors = np.geterr()
    precision = torch.get_float32_matmul_precision()

    def vandal(grad):  # noqa: ANN001, ANN202
        torch.set_grad_enabled(False)
        torch.set_default_dtype(torch.float64)
        np.seterr(all="ignore")
        torch.set_float32_matmul_precision("medium")
        sys.setrecursionlimit(limit + 7)
        os.chdir("/")
        torch.set_default_device("meta")
        _Refuses().__enter__()
        raise ValueError("and now fail")

    ok, out = _judged(capsys, "01.1", vandal)
    assert not ok and "ValueError" in out and "bug in the course" not in out
    assert same_session(before, session_state())
    assert torch.is_grad_enabled() and torch.get_default_dtype() == torch.float32
    assert torch._C._len_torch_function_stack() == 0 and torch.empty(1).device.type == "cpu"
    assert os.getcwd() == cwd and sys.getrecursionlimit() == limit and np.geterr() == errors
    assert torch.get_float32_matmul_precision() == precision


def test_a_correct_answer_with_restored_side_effects_passes_and_names_them(capsys) -> None:
    right = CASES["01.1"].right[0]
    limit = sys.getrecursionlimit()

    def right_but_untidy(grad):  # noqa: ANN001, ANN202
        sys.setrecursionlimit(limit + 3)
        return right(grad)

    ok, out = _judged(capsys, "01.1", right_but_untidy)
    assert ok and "Note: your code changed the recursion limit (put back)." in out
    assert sys.getrecursionlimit() == limit


def test_a_mode_whose_exit_forgets_super_is_taken_off(capsys) -> None:
    guide = CASES["05.3"].right[0]

    class ForgetsSuperExit(guide):  # type: ignore[misc, valid-type]
        def __exit__(self, *exc):  # noqa: ANN002, ANN204
            return None

    ok, out = _judged(capsys, "05.3", ForgetsSuperExit)
    assert not ok and "super().__exit__" in out
    assert torch._C._len_torch_function_stack() == 0


def test_set_default_device_is_put_back(capsys) -> None:
    def sets_meta(grad):  # noqa: ANN001, ANN202
        torch.set_default_device("meta")
        return grad.clamp(-1, 1)

    checks.check("01.1", sets_meta)
    out = capsys.readouterr().out
    assert "default device" in out
    assert torch.empty(1).device.type == "cpu" and torch._C._len_torch_function_stack() == 0


# -- the learner's mistakes are the learner's --------------------------------------------------------------------
def test_wrong_types_are_the_learners_error_not_a_course_bug(capsys) -> None:
    def measure_long(w, x):  # noqa: ANN001, ANN202
        return CASES["02.1"].right[0](w, x).long()

    def weights_long(model, layer_name, x, targets):  # noqa: ANN001, ANN202
        return CASES["06.1"].right[0](model, layer_name, x, targets).long()

    class IntShapes:
        def __init__(self, model):  # noqa: ANN001, ANN204
            self.calls = [("act", 6)]

        def __enter__(self):  # noqa: ANN204
            return self

        def __exit__(self, *exc):  # noqa: ANN002, ANN204
            return None

    for exercise_id, answer in (("02.1", measure_long), ("06.1", weights_long), ("03.3", IntShapes),
                                ("04.1", ((3, None), (None, 2)))):
        ok, out = _judged(capsys, exercise_id, answer)
        assert not ok and "bug in the course" not in out, (exercise_id, out)


@pytest.mark.parametrize("kind", [SystemExit, KeyboardInterrupt])
def test_system_exit_and_keyboard_interrupt_become_a_cross(kind: type[BaseException], capsys) -> None:
    def raises(grad):  # noqa: ANN001, ANN202
        raise kind(0)

    ok, out = _judged(capsys, "01.1", raises)
    assert not ok and kind.__name__ in out


def test_a_flood_of_printed_lines_is_cut_short(capsys) -> None:
    right = CASES["01.1"].right[0]

    def chatty(grad):  # noqa: ANN001, ANN202
        for i in range(100_000):
            print("line", i)
        return right(grad)

    ok, out = _judged(capsys, "01.1", chatty)
    assert len(out) < 30_000 and "did not show the rest" in out
    assert ok  # what it prints does not make the answer wrong


def test_a_numpy_array_is_a_fine_answer_where_numbers_are_asked(capsys) -> None:
    right = CASES["02.2"].right[1]
    ok, _ = _judged(capsys, "02.2", np.asarray(right))
    assert ok


def test_every_cross_line_ends_with_how_to_ask_for_a_hint(capsys) -> None:
    for exercise_id in ("00.2", "01.1", "05.2"):
        answer, _ = CASES[exercise_id].wrong[0]
        for _ in range(4):  # before any hint, between hints, after the last one
            ok, out = _judged(capsys, exercise_id, answer)
            assert not ok and out.rstrip().endswith(("gives a hint.", "gives the next hint.",
                                                     "says where the solution is."))
            checks.hint(exercise_id)
            capsys.readouterr()


def test_the_guard_adds_little_time_to_a_check(capsys) -> None:
    """The guard's own cost (snapshot, restore, timer, output budget) per check() call, on a trivial exercise."""
    def trivial(answer):  # noqa: ANN001, ANN202
        return Verdict(True)

    table = dict(checks.catalogue())
    table["99.1"] = dataclasses.replace(table["05.2"], id="99.1", validate=trivial)
    checks.catalogue, real = (lambda: table), checks.catalogue  # type: ignore[assignment]
    try:
        checks.check("99.1", "b")
        timings = []
        for _ in range(5):
            start = time.perf_counter()
            checks.check("99.1", "b")
            timings.append(time.perf_counter() - start)
    finally:
        checks.catalogue = real  # type: ignore[assignment]
    capsys.readouterr()
    assert sorted(timings)[2] < 0.1, timings  # measured ~10 ms; the bound leaves room for a busy machine


def test_a_scratch_validator_sees_plain_values(capsys, monkeypatch) -> None:
    seen = []

    def records(answer):  # noqa: ANN001, ANN202
        seen.append(answer)
        return Verdict(True)

    table = dict(checks.catalogue())
    table["99.1"] = dataclasses.replace(table["05.2"], id="99.1", validate=records)
    monkeypatch.setattr(checks, "catalogue", lambda: table)

    class Loud(str):
        pass

    checks.check("99.1", [Loud("x"), np.int64(3), (np.float32(0.5),)])
    capsys.readouterr()
    assert seen == [["x", 3, (0.5,)]] and type(seen[0][0]) is str and type(seen[0][1]) is int


def test_an_answer_with_the_wrong_signature_is_the_learners_error(capsys) -> None:
    def clamp_hook(module, grad):  # noqa: ANN001, ANN202 -- a module hook's signature for a tensor hook
        return grad.clamp(-1, 1)

    ok, out = _judged(capsys, "01.1", clamp_hook)
    assert not ok and "bug in the course" not in out and "clamp_hook()" in out


def test_a_debuggers_trace_function_survives_a_stopped_answer(capsys, monkeypatch) -> None:
    _with_limit(monkeypatch, "01.1", 1.0)

    def debugger(frame, event, arg):  # noqa: ANN001, ANN202 -- a debugger's global trace function, doing nothing
        return None

    def spins(grad):  # noqa: ANN001, ANN202
        while True:
            pass

    here = sys._getframe()
    sys.settrace(debugger)
    try:
        ok, out = _judged(capsys, "01.1", spins)
        assert sys.gettrace() is debugger and here.f_trace is None
    finally:
        sys.settrace(None)
    assert not ok and "did not finish" in out


def test_a_copy_of_a_blocked_helper_made_before_the_check_is_refused(capsys) -> None:
    import types

    copy = types.FunctionType(saliency.grad_cam.__code__, saliency.grad_cam.__globals__, "my_grad_cam",
                              saliency.grad_cam.__defaults__)
    copy.__kwdefaults__ = saliency.grad_cam.__kwdefaults__

    def through_the_copy(model, layer_name, x, targets):  # noqa: ANN001, ANN202
        try:
            return copy(model, layer_name, x, list(targets), upsample=False, normalize=False)
        except Exception:  # noqa: BLE001 -- swallowing the refusal does not help either
            return torch.zeros(3, 7, 5)

    ok, out = _judged(capsys, "06.2", through_the_copy)
    assert not ok and "copy of its code" in out, out
    assert sys.getprofile() is None and not is_blocked(saliency.grad_cam)
