"""Exercises of notebooks/09_state_and_optimizer_hooks.ipynb: a load pre-hook that splits an old fused ``qkv``
projection, step hooks that undo a bad step (weights and optimizer state), and the optimizer step inside backward
with gradient accumulation -- each run on models and optimizers the learner has not seen, against plain PyTorch
without hooks."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable
from course_utils.machinery.messages import _, N_
from course_utils.hooks import count_hooks
from course_utils.optim_hooks import optimizer_hook_report


def _has_remove(handle: Any) -> bool:
    return callable(getattr(handle, "remove", None))


# -- 09.1 ------------------------------------------------------------------------------------------------
_WIDTH = 6


class _Attention(nn.Module):
    """Today's attention projections: q, k, v and out, each Linear(d, d) (a fused qkv once held the first three)."""

    def __init__(self, width: int = _WIDTH) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.out = nn.Linear(width, width)


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attn = _Attention()
        self.mlp = nn.Linear(_WIDTH, _WIDTH)


def _transformer() -> nn.Sequential:
    return nn.Sequential(OrderedDict(embed=nn.Linear(3, _WIDTH), blocks=nn.ModuleList([_Block(), _Block()]),
                                     head=nn.Linear(_WIDTH, 2)))


def _fused_name(key: str) -> str | None:
    """'blocks.0.attn.k.bias' -> 'blocks.0.attn.qkv.bias'; None for keys of other modules."""
    parts = key.split(".")
    if len(parts) >= 2 and parts[-2] in ("q", "k", "v"):
        return ".".join(parts[:-2] + ["qkv", parts[-1]])
    return None


def _old_checkpoint(model: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """The model's keys in the old format: every attention's q, k and v stored as one fused qkv, values made up."""
    generator = torch.Generator().manual_seed(seed)
    old: dict[str, torch.Tensor] = {}
    for key, value in model.state_dict().items():
        fused = _fused_name(key)
        if fused is None:
            old[key] = torch.randn(value.shape, generator=generator)
        elif fused not in old:
            old[fused] = torch.randn(3 * value.shape[0], *value.shape[1:], generator=generator)
    return old


def _expected(old: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The new-format checkpoint, by slicing: q's rows first, then k's, then v's."""
    new = {}
    for key, value in old.items():
        parts = key.split(".")
        if len(parts) < 2 or parts[-2] != "qkv":
            new[key] = value
            continue
        third = value.shape[0] // 3
        for index, name in enumerate("qkv"):
            new[".".join(parts[:-2] + [name, parts[-1]])] = value[index * third:(index + 1) * third]
    return new


def _mismatch(missing: list[str], unexpected: list[str]) -> Verdict:
    fused_left = [key for key in unexpected if ".qkv." in f".{key}"]
    if missing and all(key.endswith(".bias") for key in missing):
        return Verdict(False, _("After your hook, {key} is missing: the fused qkv.bias must be split into "
                                "q.bias, k.bias and v.bias as well.").format(key=missing[0]))
    if missing and fused_left:
        return Verdict(False, _("{key} was not split: a hook on a module deep in a model receives the keys "
                                "with the hook's prefix in front (here '{prefix}'). Look "
                                "at the keys your hook looks for, and at the ones it stores.").format(
                                    key=fused_left[0], prefix=fused_left[0][:-len('qkv.weight')]))
    if fused_left:
        return Verdict(False, _("The fused entry {key} is still in the checkpoint after your hook, beside "
                                "its q, k and v pieces, and a strict load refuses keys the model does not have: look "
                                "at what your hook leaves in state_dict.").format(key=fused_left[0]))
    return Verdict(False, _("After your hook, missing keys {missing} and unexpected keys {unexpected}: add "
                            "exactly q, k and v's entries, and leave every other key alone.").format(
                                missing=missing[:3], unexpected=unexpected[:3]))


def _split_test(function: Callable[[nn.Module], Any]) -> Verdict:
    # 1) the attention module loaded on its own (prefix ""); 2) the same class inside a model, two blocks deep;
    # 3) a checkpoint already in the new format must load unchanged
    alone = _Attention()
    cases: list[tuple[str, nn.Module, list[nn.Module], dict[str, torch.Tensor]]] = [
        (N_("an attention module on its own"), alone, [alone], _old_checkpoint(alone, 3))]
    deep = _transformer()
    cases.append((N_("a model with two attention blocks"), deep, [block.attn for block in deep.blocks],
                  _old_checkpoint(deep, 4)))
    current = _transformer()
    generator = torch.Generator().manual_seed(5)
    current_checkpoint = {key: torch.randn(value.shape, generator=generator) for key, value in current.state_dict().items()}
    cases.append((N_("a checkpoint already in the new format"), current, [block.attn for block in current.blocks],
                  current_checkpoint))
    for label, model, attentions, checkpoint in cases:
        handles = [function(attention) for attention in attentions]
        if not all(_has_remove(handle) for handle in handles):
            for attention in attentions:
                attention._load_state_dict_pre_hooks.clear()
            return Verdict(False, _("Return the handle that register_load_state_dict_pre_hook gave you."))
        given = dict(checkpoint)
        try:
            result = model.load_state_dict(given, strict=False)
        except RuntimeError as error:
            if "size mismatch" in str(error):
                return Verdict(False, _("The split tensors have the wrong shape (size mismatch): q, k and v are "
                                        "stacked along dim 0 -- the rows, the output features -- so each gets a "
                                        "third of the rows."))
            raise
        except KeyError as error:
            return Verdict(False, _("Your hook raised KeyError {error} on {label}: a checkpoint without a fused qkv "
                                    "entry (already in the new format) must pass untouched.").format(
                                        error=error, label=_(label)))
        finally:
            for handle in handles:
                handle.remove()
        if count_hooks(model):
            return Verdict(False, _("Removing the handle left hooks on the model: register exactly one pre-hook."))
        if list(given) != list(checkpoint):
            return Verdict(False, _("The caller's checkpoint dict changed: load_state_dict hands the hook a copy -- "
                                    "change only the state_dict the hook receives."))
        if result.missing_keys or result.unexpected_keys:
            return _mismatch(list(result.missing_keys), list(result.unexpected_keys))
        loaded = model.state_dict()
        wrong = [key for key, value in _expected(checkpoint).items() if not torch.equal(loaded[key], value)]
        if wrong:
            return Verdict(False, _("With {label}, {key} did not get the right values: the fused weight holds q's "
                                    "rows first, then k's, then v's (and the bias likewise).").format(
                                        label=_(label), key=wrong[0]))
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
                if not isinstance(vb, torch.Tensor) or not torch.equal(va, vb):
                    return False
            elif va != vb:
                return False
    return True


_MAX_CHANGE = 1.0  # a normal step of these models moves a weight by at most ~0.3


def _reachable_tensors(value: Any, depth: int = 0, seen: set[int] | None = None) -> list[torch.Tensor]:
    """The tensors a hook can reach: through its closure, the globals it names, the object of a bound method, and
    the lists, dicts, tuples and attributes inside them (a few levels deep)."""
    seen = set() if seen is None else seen
    if depth > 5 or id(value) in seen or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return []
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        return [value]
    found: list[torch.Tensor] = []
    items: list[Any] = []
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set)):
        items = list(value)
    elif callable(value) and hasattr(value, "__code__"):
        items = [cell.cell_contents for cell in (value.__closure__ or ()) if _filled(cell)]
        items += [value.__globals__[name] for name in value.__code__.co_names if name in value.__globals__
                  and isinstance(value.__globals__[name], (dict, list, tuple, torch.Tensor))]
    elif hasattr(value, "__func__"):  # a bound method: its object and its function
        items = [value.__self__, value.__func__]
    elif hasattr(value, "__dict__") and not isinstance(value, (torch.nn.Module, torch.optim.Optimizer, type)):
        items = list(vars(value).values())
    for item in items:
        found += _reachable_tensors(item, depth + 1, seen)
    return found


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _kept_a_bad_step(optimizer: torch.optim.Optimizer, params: list[torch.Tensor], before: list[torch.Tensor],
                     label: str) -> Verdict:
    """09.2's ✗ for a bad step that was kept: what the learner's step hooks hold says why."""
    moved = max(float((p.detach() - w).abs().max()) for p, w in zip(params, before))
    hooks = [*optimizer._optimizer_step_pre_hooks.values(), *optimizer._optimizer_step_post_hooks.values()]
    held = [t for hook in hooks for t in _reachable_tensors(hook)]
    storages = {p.untyped_storage().data_ptr() for p in params}
    if any(t.untyped_storage().data_ptr() in storages for t in held):
        return Verdict(False, _("With {label}, a step that moved a weight by {moved:.3g} (max_change is "
                                "{max_change:g}) was kept. Look at what your pre-hook keeps of the weights: a tensor "
                                "that shares memory with a weight (detach() does) changes with it when step() updates "
                                "it in place.").format(label=_(label), moved=moved, max_change=_MAX_CHANGE))
    copies = all(any(t.shape == w.shape and t.dtype == w.dtype and torch.equal(t.detach(), w) for t in held)
                 for w in before)  # what the weights were before this step
    if not copies:
        return Verdict(False, _("With {label}, a step that moved a weight by {moved:.3g} (max_change is "
                                "{max_change:g}) was kept, and your hooks hold no copy of some weights: the weights "
                                "must go back too, so the pre-hook has to keep a copy of each of them.").format(
                                    label=_(label), moved=moved, max_change=_MAX_CHANGE))
    return Verdict(False, _("With {label}, a step that moved a weight by {moved:.3g} (max_change is {max_change:g}) "
                            "was kept, although your hooks hold copies of the weights: did your post-hook find this "
                            "step bad (any single element's absolute change above max_change), and did it write the "
                            "copies back into the weights?").format(label=_(label), moved=moved,
                                                                      max_change=_MAX_CHANGE))


def _state_not_restored(optimizer: torch.optim.Optimizer, params: list[torch.Tensor],
                        state_before: list[torch.Tensor], label: str) -> Verdict:
    """09.2's ✗ for an undone step whose optimizer state did not go back: what the optimizer and the learner's step
    hooks hold says why (the answer may never have used state_dict())."""
    if any(not any(key is p for p in params) for key in optimizer.state):
        return Verdict(False, _("With {label}, after the undone step the optimizer's state is kept under tensors that "
                                "are not its parameters: optimizer.state is keyed by the parameters themselves, and "
                                "the state your post-hook put back has copies of them as its keys, so the optimizer "
                                "finds no state for its own parameters. Look at what your pre-hook copies: the "
                                "state's values, or its keys too?").format(label=_(label)))
    hooks = [*optimizer._optimizer_step_pre_hooks.values(), *optimizer._optimizer_step_post_hooks.values()]
    held = [t for hook in hooks for t in _reachable_tensors(hook)]
    now = {t.untyped_storage().data_ptr() for p in params for t in optimizer.state.get(p, {}).values()
           if isinstance(t, torch.Tensor)}
    if any(t.untyped_storage().data_ptr() in now for t in held):
        return Verdict(False, _("With {label}, the undone step still changed the optimizer's state (momentum, step "
                                "counts, moments): it must go back too. Look at what your pre-hook keeps of it: "
                                "its tensors are the optimizer's own, which step() changes in place -- a copy of a "
                                "dict that holds them (optimizer.state, or what optimizer.state_dict() returns) "
                                "still shares them.").format(label=_(label)))
    if not all(any(t.shape == s.shape and t.dtype == s.dtype and torch.equal(t.detach(), s) for t in held)
               for s in state_before):
        return Verdict(False, _("With {label}, the undone step still changed the optimizer's state (momentum, step "
                                "counts, moments), and your hooks hold no copy of it from before the step: the state "
                                "must go back too, so the pre-hook has to keep a copy of it and the post-hook put it "
                                "back.").format(label=_(label)))
    return Verdict(False, _("With {label}, the undone step still changed the optimizer's state (momentum, step "
                            "counts, moments), although your hooks hold a copy of it from before the step: did your "
                            "post-hook put that copy back into the optimizer?").format(label=_(label)))


def _undo_test(function: Callable[[torch.optim.Optimizer, float], Any]) -> Verdict:
    batches = [torch.randn(5, 4, generator=torch.Generator().manual_seed(i)) for i in range(5)]
    trainings = {  # optimizer, and the batches that make a bad step: a huge gradient, or one nan entry
        N_("SGD with momentum"): (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), {1: "huge", 3: "nan"}),
        "Adam": (lambda ps: torch.optim.Adam(ps, lr=0.01), {2: "nan"}),
    }
    for label, (make, bad) in trainings.items():
        guarded_model, plain_model = _small_model(), _small_model()
        guarded, plain = make(guarded_model.parameters()), make(plain_model.parameters())
        handles = function(guarded, _MAX_CHANGE)
        if not isinstance(handles, (list, tuple)) or not handles or not all(_has_remove(h) for h in handles):
            if isinstance(handles, (list, tuple)):
                for handle in handles:
                    if _has_remove(handle):
                        handle.remove()
            elif _has_remove(handles):
                handles.remove()
            guarded._optimizer_step_pre_hooks.clear()
            guarded._optimizer_step_post_hooks.clear()
            return Verdict(False, _("Return the list of both handles, [pre-hook handle, post-hook handle]."))
        try:
            for index, batch in enumerate(batches):
                for model, optimizer in ((guarded_model, guarded), (plain_model, plain)):
                    optimizer.zero_grad()
                    loss = model(batch).pow(2).sum()
                    (loss * 1e4 if bad.get(index) == "huge" else loss).backward()
                    if bad.get(index) == "nan":
                        list(model.parameters())[-1].grad[0] = float("nan")
                before = [p.detach().clone() for p in guarded_model.parameters()]
                state_before = [t.detach().clone() for p in guarded_model.parameters()
                                for t in guarded.state.get(p, {}).values() if isinstance(t, torch.Tensor)]
                guarded.step()
                if index not in bad:
                    plain.step()  # the reference simply does not step on a bad batch
                params = list(guarded_model.parameters())
                if not all(torch.isfinite(p).all() for p in params):
                    return Verdict(False, _("With {label}, a step that left a weight nan was kept: every comparison "
                                            "with nan is False (nan > max_change too). Look at how your post-hook "
                                            "decides that a step was bad.").format(label=_(label)))
                if not all(torch.equal(a, b) for a, b in zip(params, plain_model.parameters())):
                    if index in bad:
                        return _kept_a_bad_step(guarded, params, before, label)
                    return Verdict(False, _("With {label}, a normal step was undone or changed: undo only a step that "
                                            "moved a weight by more than max_change or left one not finite.").format(
                                                label=_(label)))
                if not _state_equal(guarded, plain, params, list(plain_model.parameters())):
                    return _state_not_restored(guarded, params, state_before, label)
        finally:
            for handle in handles:
                handle.remove()
        if optimizer_hook_report(guarded):
            return Verdict(False, _("Removing your handles left hooks on the optimizer: register one pre-hook and one "
                                    "post-hook, and return both handles."))
    return Verdict(True)


# -- 09.3 ------------------------------------------------------------------------------------------------
def _wide_model() -> nn.Sequential:
    torch.manual_seed(17)
    return nn.Sequential(nn.Linear(5, 24), nn.Tanh(), nn.Linear(24, 24), nn.ReLU(inplace=True), nn.Linear(24, 3))


def _late_bound_name(params: list[torch.Tensor]) -> str | None:
    """The name of a variable that the hooks of different parameters -- distinct functions, made one per loop
    iteration -- share through one closure cell, when it holds a parameter or a one-parameter optimizer: a function
    defined in a loop reads the loop's variables when it runs (late binding), so every hook gets the last iteration's
    value. None if there is none."""
    cells: dict[int, tuple[str, Any, set[int], set[int]]] = {}
    for param in params:
        for hook in (getattr(param, "_post_accumulate_grad_hooks", None) or {}).values():
            code, closure = getattr(hook, "__code__", None), getattr(hook, "__closure__", None)
            if code is None or not closure:
                continue
            for name, cell in zip(code.co_freevars, closure):
                entry = cells.setdefault(id(cell), (name, cell, set(), set()))
                entry[2].add(id(param))
                entry[3].add(id(hook))
    for name, cell, hooked, functions in cells.values():
        if len(hooked) < 2 or len(functions) < 2:
            continue
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        one_parameter_optimizer = (isinstance(value, torch.optim.Optimizer)
                                   and sum(len(group["params"]) for group in value.param_groups) == 1)
        if one_parameter_optimizer or any(value is p for p in params):
            return name
    return None


def _accumulation_test(function: Callable[[nn.Module, Callable[[list], torch.optim.Optimizer], int], Any]) -> Verdict:
    makers = {N_("SGD with momentum"): lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
              "Adam": lambda ps: torch.optim.Adam(ps, lr=0.01)}
    batches = [torch.randn(6, 5, generator=torch.Generator().manual_seed(20 + i)) for i in range(6)]
    for every in (1, 3):
        for label, make in makers.items():
            fused_model, plain_model = _wide_model(), _wide_model()
            params = list(fused_model.parameters())
            handles = function(fused_model, make, every)
            try:
                if not isinstance(handles, (list, tuple)) or not all(_has_remove(h) for h in handles):
                    return Verdict(False, _("Return the list of handles, one per parameter."))
                shared = _late_bound_name(params)
                if shared is not None:
                    return Verdict(False, _("The hooks of different parameters all read one and the same `{shared}`: "
                                            "your hook refers to a variable of the loop that created it, and Python "
                                            "looks such a variable up when the hook runs -- after the loop has ended, "
                                            "so every hook gets the last parameter's value (late binding). Look at "
                                            "which of the loop's variables your hook reads.").format(shared=shared))
                plain = make(plain_model.parameters())
                for number, batch in enumerate(batches, start=1):
                    try:
                        fused_model(batch).pow(2).mean().backward()
                    except RuntimeError as error:
                        if "modified by an inplace operation" not in str(error):
                            raise
                        return Verdict(False, _("The backward failed: a weight it still needed was changed in place "
                                                "while it ran ({error}). A hook runs as soon as its own parameter's "
                                                "gradient is ready, while other parameters' gradients are still being "
                                                "computed: the optimizer it steps must hold that parameter "
                                                "alone.").format(error=str(error).split(":")[0]))
                    plain_model(batch).pow(2).mean().backward()
                    if number % every:  # inside an accumulation window: gradients kept and summed
                        missing = [p for p in params if p.grad is None]
                        if len(missing) == len(params):
                            return Verdict(False, _("With every={every}, after backward {done} of {every} no "
                                                    "parameter has a .grad left: your hook freed it at every call. "
                                                    "Keep it until the every-th call, so that the next backward adds "
                                                    "to it.").format(
                                                        every=every, done=number % every))
                        if missing:
                            return Verdict(False, _("With every={every}, after backward {done} of {every} some "
                                                    "parameters have no .grad and others do: each parameter's hook "
                                                    "runs once per backward, so count the calls per parameter (a "
                                                    "counter shared by all the hooks counts parameters, not backward "
                                                    "passes -- and a counter made inside your loop is shared too if "
                                                    "the hook reads the loop's variable when it runs).").format(
                                                        every=every, done=number % every))
                        if not all(torch.allclose(p.grad, q.grad, atol=1e-6)
                                   for p, q in zip(params, plain_model.parameters())):
                            return Verdict(False, _("With every={every}, the gradients between two steps are not the "
                                                    "sum of the backward passes so far: step and free .grad only on "
                                                    "the every-th call.").format(every=every))
                        continue
                    plain.step()
                    plain.zero_grad(set_to_none=True)
                    left = [p for p in params if p.grad is not None]
                    if left:
                        return Verdict(False, _("With every={every}, after backward {number}, the last of a window, "
                                                "{count} parameters still hold a .grad: free each gradient in the "
                                                "hook once its optimizer has stepped.").format(
                                                    every=every, number=number, count=len(left)))
                    if not all(torch.allclose(a, b, atol=1e-6) for a, b in zip(params, plain_model.parameters())):
                        if all(torch.equal(a, b) for a, b in zip(params, _wide_model().parameters())):
                            return Verdict(False, _("The weights never changed: the hook must call the optimizer's "
                                                    "step()."))
                        return Verdict(False, _("With {label} and every={every}, the weights differ from plain "
                                                "training that calls backward() {every} time(s), then step(): one "
                                                "optimizer per parameter, created once (its state must survive from "
                                                "step to step), stepped on the every-th call of its own hook.").format(
                                                    label=_(label), every=every))
            finally:
                if isinstance(handles, (list, tuple)):
                    for handle in handles:
                        if _has_remove(handle):
                            handle.remove()
            if count_hooks(fused_model):
                return Verdict(False, _("Removing your handles left hooks on the parameters."))
    return Verdict(True)


EXERCISES = (
    Exercise(
        "09.1",
        N_("Write split_qkv_on_load(attention): a load_state_dict pre-hook that splits an old fused qkv projection "
           "into q, k and v, honouring the hook's prefix; return the handle."),
        expect_callable(_split_test, N_("a function split_qkv_on_load(attention)")),
        hints=(
            N_("The pre-hook gets (module, state_dict, prefix, ...) and may change state_dict in place; the keys it "
               "looks for are the module's own keys with prefix in front of them."),
            N_("A fused tensor of 3d rows comes apart in three pieces of d rows with torch.chunk (or tensor_split) "
               "along dim 0; the parameter names to build can come from the module itself "
               "(module.q.named_parameters())."),
        ),
        kind="write",
        praise=N_("Old checkpoints load into new code, tensors reshaped on the way, and the model's source never "
                  "changed."),
    ),
    Exercise(
        "09.2",
        N_("Write undo_bad_steps(optimizer, max_change): step hooks that put the weights and the optimizer's state "
           "back after a step that moved a weight too far or left it not finite; return both handles."),
        expect_callable(_undo_test, N_("a function undo_bad_steps(optimizer, max_change)")),
        hints=(
            N_("What a step did is known only after it: a pre-hook keeps copies of what the step may change, a "
               "post-hook compares and restores."),
            N_("optimizer.state_dict() and load_state_dict() save and restore momentum, step counts and moments -- but "
               "the dict holds the optimizer's live tensors, which step() changes in place: keep a copy.deepcopy of it "
               "(import copy). Weights: keep clone()s, which have their own memory, and put them back with copy_ under "
               "torch.no_grad()."),
        ),
        kind="write",
        praise=N_("A bad step leaves no trace: not in the weights, not in Adam's moments, not in the step count."),
    ),
    Exercise(
        "09.3",
        N_("Write attach_optimizer_in_backward(model, make_optimizer, every): one optimizer per parameter, stepped "
           "by a post-accumulate-grad hook on every every-th gradient, accumulating in between; return the handles."),
        expect_callable(_accumulation_test, N_("a function "
                                               "attach_optimizer_in_backward(model, make_optimizer, every)")),
        hints=(
            N_("Each parameter's hook runs once per backward pass, when that parameter's .grad holds the sum so far: "
               "it needs its own count of how often it has run."),
            N_("Keep .grad between the steps (backward adds to it); on the every-th call step that parameter's "
               "optimizer, created once outside the hook, then set .grad to None. A hook defined inside a loop must "
               "hold its own optimizer and counter: bind them when the hook is made -- default arguments "
               "(def hook(p, opt=opt, count=count)) or a small function that builds and returns the hook."),
        ),
        kind="write",
        stretch=True,
        praise=N_("Gradient accumulation inside backward: the update of a big batch, one parameter's step at a time."),
    ),
)
