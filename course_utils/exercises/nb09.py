"""Exercises of notebooks/09_state_and_optimizer_hooks.ipynb: a renaming load pre-hook, a step pre-hook that skips
non-finite steps, and the optimizer step inside backward -- each run on models and optimizers the learner has not
seen, against plain PyTorch without hooks."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.exercise_kit import Exercise, Verdict, expect_callable
from course_utils.hooks import count_hooks
from course_utils.optim_hooks import optimizer_hook_report


# -- 09.1 ------------------------------------------------------------------------------------------------
class _Renamed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Linear(3, 4)
        self.classifier = nn.Linear(4, 2)


def _old_keys(prefix: str) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(7)
    return {f"{prefix}block1.weight": torch.randn(4, 3, generator=generator),
            f"{prefix}block1.bias": torch.randn(4, generator=generator),
            f"{prefix}out.weight": torch.randn(2, 4, generator=generator),
            f"{prefix}out.bias": torch.randn(2, generator=generator)}


def _has_remove(handle: Any) -> bool:
    return callable(getattr(handle, "remove", None))


def _rename_test(function: Callable[[nn.Module, dict[str, str]], Any]) -> Verdict:
    renames = {"block1.": "stem.", "out.": "classifier."}
    model = _Renamed()
    checkpoint = dict(_old_keys(""), extra_counter=torch.tensor(3))
    handle = function(model, dict(renames))
    if not _has_remove(handle):
        return Verdict(False, "Return the handle that register_load_state_dict_pre_hook gave you.")
    try:
        result = model.load_state_dict(checkpoint, strict=False)
    finally:
        handle.remove()
    if count_hooks(model):
        return Verdict(False, "Removing the handle left hooks on the model: register exactly one pre-hook.")
    if sorted(result.unexpected_keys) != ["extra_counter"] or result.missing_keys:
        return Verdict(False, f"After loading, missing keys {result.missing_keys} and unexpected keys "
                              f"{result.unexpected_keys}; expected only the unknown 'extra_counter' to stay unexpected "
                              "(rename the known prefixes, leave other keys alone).")
    if not torch.equal(model.stem.weight, checkpoint["block1.weight"]) or not torch.equal(model.classifier.bias, checkpoint["out.bias"]):
        return Verdict(False, "The keys matched but the wrong tensors were loaded: keep each tensor with its renamed key.")
    # the same model as a submodule of a bigger one: the hook must use its prefix
    inner = _Renamed()
    outer = nn.Sequential(OrderedDict(backbone=inner, out=nn.Linear(2, 1)))
    big_checkpoint = dict(_old_keys("backbone."))
    big_checkpoint["out.weight"], big_checkpoint["out.bias"] = torch.ones(1, 2), torch.zeros(1)
    handle = function(inner, dict(renames))
    try:
        outer.load_state_dict(big_checkpoint)
    except RuntimeError as error:
        return Verdict(False, "Loading into a model that contains yours failed: "
                              f"{str(error).splitlines()[-1].strip()[:160]} -- keys arrive with the hook's prefix "
                              "(e.g. 'backbone.'), and keys outside that prefix are not yours to rename.")
    finally:
        handle.remove()
    if not torch.equal(inner.stem.weight, big_checkpoint["backbone.block1.weight"]) or not torch.equal(outer.out.weight, torch.ones(1, 2)):
        return Verdict(False, "Inside a bigger model the wrong tensors were loaded: rename only keys that start with "
                              "the hook's prefix.")
    return Verdict(True)


# -- 09.2 ------------------------------------------------------------------------------------------------
def _small_model() -> nn.Sequential:
    torch.manual_seed(13)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))


def _state_equal(a: torch.optim.Optimizer, b: torch.optim.Optimizer, params_a: list, params_b: list) -> bool:
    for pa, pb in zip(params_a, params_b):
        sa, sb = a.state.get(pa, {}), b.state.get(pb, {})
        if set(sa) != set(sb):
            return False
        for key in sa:
            va, vb = sa[key], sb[key]
            if isinstance(va, torch.Tensor):
                if not torch.equal(va, vb):
                    return False
            elif va != vb:
                return False
    return True


def _skip_test(function: Callable[[torch.optim.Optimizer], Any]) -> Verdict:
    batches = [torch.randn(5, 4, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    makers = {"SGD with momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
              "Adam": lambda ps: torch.optim.Adam(ps, lr=0.01)}
    for label, make in makers.items():
        guarded_model, plain_model = _small_model(), _small_model()
        guarded, plain = make(guarded_model.parameters()), make(plain_model.parameters())
        handle = function(guarded)
        if not _has_remove(handle):
            return Verdict(False, "Return the handle that register_step_pre_hook gave you.")
        try:
            for index, batch in enumerate(batches):
                for model, optimizer in ((guarded_model, guarded), (plain_model, plain)):
                    optimizer.zero_grad()
                    model(batch).pow(2).sum().backward()
                    if index == 1:  # one non-finite entry, in the last parameter only
                        list(model.parameters())[-1].grad[0] = float("nan")
                guarded.step()
                if index != 1:
                    plain.step()  # the reference simply does not step
                if index == 1 and not all(torch.isfinite(p).all() for p in guarded_model.parameters()):
                    return Verdict(False, f"With {label}, a step after a nan gradient wrote nan into the weights: "
                                          "look at every parameter's gradient, not only the first.")
        finally:
            handle.remove()
        if optimizer_hook_report(guarded):
            return Verdict(False, "Removing the handle left hooks on the optimizer: register one step pre-hook.")
        weights_equal = all(torch.equal(a, b) for a, b in zip(guarded_model.parameters(), plain_model.parameters()))
        state_equal = _state_equal(guarded, plain, list(guarded_model.parameters()), list(plain_model.parameters()))
        if weights_equal and state_equal:
            continue
        if not state_equal:
            return Verdict(False, f"With {label}, the skipped step still changed the optimizer's state (step counts, "
                                  "moments or momentum): zero gradients are not 'no gradients' -- momentum and Adam's "
                                  "moments still move. Parameters without a gradient are skipped entirely.")
        return Verdict(False, f"With {label}, the weights differ from training that simply skips that step: finite "
                              "steps must run unchanged.")
    return Verdict(True)


# -- 09.3 ------------------------------------------------------------------------------------------------
def _wide_model() -> nn.Sequential:
    torch.manual_seed(17)
    return nn.Sequential(nn.Linear(5, 24), nn.Tanh(), nn.Linear(24, 24), nn.ReLU(inplace=True), nn.Linear(24, 3))


def _fused_test(function: Callable[[nn.Module, Callable[[list], torch.optim.Optimizer]], Any]) -> Verdict:
    makers = {"SGD with momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
              "Adam": lambda ps: torch.optim.Adam(ps, lr=0.01)}
    batches = [torch.randn(6, 5, generator=torch.Generator().manual_seed(20 + i)) for i in range(3)]
    for label, make in makers.items():
        fused_model, plain_model = _wide_model(), _wide_model()
        params = list(fused_model.parameters())
        peak = [0]

        def observe(param: torch.Tensor) -> None:
            alive = sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None)
            peak[0] = max(peak[0], alive)

        observers = [p.register_post_accumulate_grad_hook(observe) for p in params]  # first: they run first
        handles = function(fused_model, make)
        try:
            if not isinstance(handles, (list, tuple)) or not all(_has_remove(h) for h in handles):
                return Verdict(False, "Return the list of handles, one per parameter.")
            plain = make(plain_model.parameters())
            for batch in batches:
                fused_model(batch).pow(2).mean().backward()
                left = [p for p in params if p.grad is not None]
                if left:
                    return Verdict(False, f"After backward, {len(left)} parameters still hold a .grad: free each "
                                          "gradient in the hook once its optimizer has stepped.")
                plain.zero_grad()
                plain_model(batch).pow(2).mean().backward()
                plain.step()
        finally:
            for handle in observers + (list(handles) if isinstance(handles, (list, tuple)) else []):
                if _has_remove(handle):
                    handle.remove()
        if count_hooks(fused_model):
            return Verdict(False, "Removing your handles left hooks on the parameters.")
        if all(torch.equal(a, b) for a, b in zip(params, _wide_model().parameters())):
            return Verdict(False, "The weights never changed: the hook must call the optimizer's step().")
        if not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(params, plain_model.parameters())):
            return Verdict(False, f"With {label}, the weights differ from plain training: one optimizer per parameter, "
                                  "created once (its state must survive from step to step), stepped when that "
                                  "parameter's gradient is ready.")
        largest = max(p.numel() * p.element_size() for p in params)
        if peak[0] > largest:
            return Verdict(False, f"During backward up to {peak[0]} bytes of gradients existed at once (the largest "
                                  f"parameter has {largest}): free each gradient right after its step.")
    return Verdict(True)


EXERCISES = (
    Exercise(
        "09.1",
        "Write rename_on_load(model, renames): a load_state_dict pre-hook that renames old key prefixes to new ones, "
        "honouring the hook's prefix; return the handle.",
        expect_callable(_rename_test, "a function rename_on_load(model, renames)"),
        hints=(
            "The pre-hook gets (module, state_dict, prefix, ...) and may change state_dict in place: pop the old key, "
            "store the tensor under the new one.",
            "Compare and rebuild keys as prefix + old and prefix + new; iterate over list(state_dict) because you "
            "change the dict while looping.",
        ),
        kind="write",
        praise="Old checkpoints load into new code, and the model's source never changed.",
    ),
    Exercise(
        "09.2",
        "Write skip_nonfinite_steps(optimizer): a step pre-hook that makes step() change nothing (weights and state) "
        "when a gradient is inf or nan; return the handle.",
        expect_callable(_skip_test, "a function skip_nonfinite_steps(optimizer)"),
        hints=(
            "register_step_pre_hook(hook) calls hook(optimizer, args, kwargs) before every step; "
            "optimizer.param_groups lists the parameters.",
            "Optimizers skip a parameter whose .grad is None -- zero gradients would still move momentum and Adam's "
            "moments. torch.isfinite(grad).all() tells whether a gradient is usable.",
        ),
        kind="write",
        praise="One bad batch no longer ruins the run, and the optimizer's state is as if it never happened.",
    ),
    Exercise(
        "09.3",
        "Write attach_optimizer_in_backward(model, make_optimizer): one optimizer per parameter, stepped and its "
        "gradient freed by a post-accumulate-grad hook; return the handles.",
        expect_callable(_fused_test, "a function attach_optimizer_in_backward(model, make_optimizer)"),
        hints=(
            "Create make_optimizer([param]) once per parameter, outside the hook, and keep it: its state (momentum, "
            "moments) must last from step to step.",
            "register_post_accumulate_grad_hook(hook) calls hook(param) once param.grad is complete: step that "
            "parameter's optimizer there, then set param.grad = None.",
        ),
        kind="write",
        stretch=True,
        praise="The whole update happens during backward, and at most about one gradient exists at a time.",
    ),
)
