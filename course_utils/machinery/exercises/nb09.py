"""Exercises of notebooks/09_state_and_optimizer_hooks.ipynb: a load pre-hook, undoing a bad step, step in backward."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from course_utils.machinery.exercise_kit import *
from course_utils.optim_hooks import optimizer_hook_report

_WIDTH = 6


def _attention() -> nn.Module:
    """Today's attention projections: q, k, v and out (a fused qkv once held the first three)."""
    return nn.ModuleDict({name: nn.Linear(_WIDTH, _WIDTH) for name in ("q", "k", "v", "out")})


def _transformer() -> nn.Sequential:
    blocks = nn.ModuleList([nn.ModuleDict({"attn": _attention(), "mlp": nn.Linear(_WIDTH, _WIDTH)}) for _ in range(2)])
    return nn.Sequential(OrderedDict(embed=nn.Linear(3, _WIDTH), blocks=blocks, head=nn.Linear(_WIDTH, 2)))


def _old_checkpoint(model: nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """The model's keys in the old format: every attention's q, k and v stored as one fused qkv, values made up."""
    draw, old = generator(seed), {}
    for key, value in model.state_dict().items():
        parts = key.split(".")
        if parts[-2:-1] in (["q"], ["k"], ["v"]):  # 'blocks.0.attn.k.bias' -> 'blocks.0.attn.qkv.bias'
            fused = ".".join(parts[:-2] + ["qkv", parts[-1]])
            if fused not in old:
                old[fused] = torch.randn(3 * value.shape[0], *value.shape[1:], generator=draw)
        else:
            old[key] = torch.randn(value.shape, generator=draw)
    return old


def _expected(old: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The new-format checkpoint, by slicing: q's rows first, then k's, then v's."""
    new = {}
    for key, value in old.items():
        parts = key.split(".")
        if parts[-2:-1] != ["qkv"]:
            new[key] = value
            continue
        for index, piece in enumerate(value.chunk(3)):
            new[".".join(parts[:-2] + ["qkv"[index], parts[-1]])] = piece
    return new


def _mismatch(missing: list[str], unexpected: list[str]) -> None:
    fused_left = [key for key in unexpected if ".qkv." in f".{key}"]
    require(not missing or not all(key.endswith(".bias") for key in missing),
            N_("After your hook, {key} is missing: the fused qkv.bias must be split into q.bias, k.bias and v.bias as "
               "well."), key=missing[0] if missing else "")
    require(not (missing and fused_left),
            N_("{key} was not split: a hook on a module deep in a model receives the keys with the hook's prefix in "
               "front (here '{prefix}'). Look at the keys your hook looks for, and at the ones it stores."),
            key=fused_left[0] if fused_left else "", prefix=fused_left[0][:-len("qkv.weight")] if fused_left else "")
    require(not fused_left, N_("The fused entry {key} is still in the checkpoint after your hook, beside its q, k and "
                               "v pieces, and a strict load refuses keys the model does not have: look at what your "
                               "hook leaves in state_dict."), key=fused_left[0] if fused_left else "")
    fail(N_("After your hook, missing keys {missing} and unexpected keys {unexpected}: add exactly q, k and v's "
            "entries, and leave every other key alone."), missing=missing[:3], unexpected=unexpected[:3])


@exercise("09.1")
def _split_test(function: Callable[[nn.Module], Any]) -> Verdict:
    # the attention module loaded on its own (prefix ""); the same class inside a model, two blocks deep; a checkpoint
    # already in the new format, which must load unchanged
    alone, deep, current = _attention(), _transformer(), _transformer()
    draw = generator(5)
    cases = [(N_("an attention module on its own"), alone, [alone], _old_checkpoint(alone, 3)),
             (N_("a model with two attention blocks"), deep, [block.attn for block in deep.blocks],
              _old_checkpoint(deep, 4)),
             (N_("a checkpoint already in the new format"), current, [block.attn for block in current.blocks],
              {key: torch.randn(value.shape, generator=draw) for key, value in current.state_dict().items()})]
    for label, model, attentions, checkpoint in cases:
        handles = [function(attention) for attention in attentions]
        require(all(map(is_handle, handles)), N_("Return the handle that register_load_state_dict_pre_hook gave you."))
        given = dict(checkpoint)
        with removing(handles):
            try:
                result = model.load_state_dict(given, strict=False)
            except RuntimeError as error:
                require("size mismatch" not in str(error),
                        N_("The split tensors have the wrong shape (size mismatch): q, k and v are stacked along dim 0 "
                           "-- the rows, the output features -- so each gets a third of the rows."))
                raise
            except KeyError as error:
                fail(N_("Your hook raised KeyError {error} on {label}: a checkpoint without a fused qkv entry (already "
                        "in the new format) must pass untouched."), error=error, label=Text(label))
        require_no_hooks(model, N_("Removing the handle left hooks on the model: register exactly one pre-hook."))
        require(list(given) == list(checkpoint), N_("The caller's checkpoint dict changed: load_state_dict hands the "
                                                    "hook a copy -- change only the state_dict the hook receives."))
        if result.missing_keys or result.unexpected_keys:
            _mismatch(list(result.missing_keys), list(result.unexpected_keys))
        loaded = model.state_dict()
        wrong = [key for key, value in _expected(checkpoint).items() if not torch.equal(loaded[key], value)]
        require(not wrong, N_("With {label}, {key} did not get the right values: the fused weight holds q's rows "
                              "first, then k's, then v's (and the bias likewise)."), label=Text(label),
                key=wrong[0] if wrong else "")
    return Verdict(True)


def _small_model() -> nn.Sequential:
    torch.manual_seed(13)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))


def _state_equal(a: torch.optim.Optimizer, b: torch.optim.Optimizer, params_a: list, params_b: list) -> bool:
    for pa, pb in zip(params_a, params_b):
        sa, sb = a.state.get(pa, {}), b.state.get(pb, {})
        if set(sa) != set(sb) or not all((isinstance(sb[k], torch.Tensor) and torch.equal(sa[k], sb[k]))
                                         if isinstance(sa[k], torch.Tensor) else sa[k] == sb[k] for k in sa):
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
    return [tensor for item in items for tensor in _reachable_tensors(item, depth + 1, seen)]


def _filled(cell: Any) -> bool:
    try:
        _ = cell.cell_contents
    except ValueError:
        return False
    return True


def _held(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    """The tensors the learner's step hooks on ``optimizer`` can reach."""
    hooks = [*optimizer._optimizer_step_pre_hooks.values(), *optimizer._optimizer_step_post_hooks.values()]
    return [t for hook in hooks for t in _reachable_tensors(hook)]


def _copies_of(held: list[torch.Tensor], tensors: list[torch.Tensor]) -> bool:
    return all(any(t.shape == w.shape and t.dtype == w.dtype and torch.equal(t.detach(), w) for t in held)
               for w in tensors)


def _kept_a_bad_step(optimizer: torch.optim.Optimizer, params: list[torch.Tensor], before: list[torch.Tensor],
                     label: str) -> None:
    """09.2's ✗ for a bad step that was kept: what the learner's step hooks hold says why."""
    held, storages = _held(optimizer), {p.untyped_storage().data_ptr() for p in params}
    fields = {"label": Text(label), "max_change": _MAX_CHANGE,
              "moved": max(float((p.detach() - w).abs().max()) for p, w in zip(params, before))}
    require(not any(t.untyped_storage().data_ptr() in storages for t in held),
            N_("With {label}, a step that moved a weight by {moved:.3g} (max_change is {max_change:g}) was kept. Look "
               "at what your pre-hook keeps of the weights: a tensor that shares memory with a weight (detach() does) "
               "changes with it when step() updates it in place."), **fields)
    require(_copies_of(held, before),  # what the weights were before this step
            N_("With {label}, a step that moved a weight by {moved:.3g} (max_change is {max_change:g}) was kept, and "
               "your hooks hold no copy of some weights: the weights must go back too, so the pre-hook has to keep a "
               "copy of each of them."), **fields)
    fail(N_("With {label}, a step that moved a weight by {moved:.3g} (max_change is {max_change:g}) was kept, although "
            "your hooks hold copies of the weights: did your post-hook find this step bad (any single element's "
            "absolute change above max_change), and did it write the copies back into the weights?"), **fields)


def _state_not_restored(optimizer: torch.optim.Optimizer, params: list[torch.Tensor],
                        state_before: list[torch.Tensor], label: str) -> None:
    """09.2's ✗ for an undone step whose optimizer state did not go back: what the optimizer and the learner's step
    hooks hold says why (the answer may never have used state_dict())."""
    require(all(any(key is p for p in params) for key in optimizer.state),
            N_("With {label}, after the undone step the optimizer's state is kept under tensors that are not its "
               "parameters: optimizer.state is keyed by the parameters themselves, and the state your post-hook put "
               "back has copies of them as its keys, so the optimizer finds no state for its own parameters. Look at "
               "what your pre-hook copies: the state's values, or its keys too?"), label=Text(label))
    held = _held(optimizer)
    now = {t.untyped_storage().data_ptr() for p in params for t in optimizer.state.get(p, {}).values()
           if isinstance(t, torch.Tensor)}
    require(not any(t.untyped_storage().data_ptr() in now for t in held),
            N_("With {label}, the undone step still changed the optimizer's state (momentum, step counts, moments): it "
               "must go back too. Look at what your pre-hook keeps of it: its tensors are the optimizer's own, which "
               "step() changes in place -- a copy of a dict that holds them (optimizer.state, or what "
               "optimizer.state_dict() returns) still shares them."), label=Text(label))
    require(_copies_of(held, state_before),
            N_("With {label}, the undone step still changed the optimizer's state (momentum, step counts, moments), "
               "and your hooks hold no copy of it from before the step: the state must go back too, so the pre-hook "
               "has to keep a copy of it and the post-hook put it back."), label=Text(label))
    fail(N_("With {label}, the undone step still changed the optimizer's state (momentum, step counts, moments), "
            "although your hooks hold a copy of it from before the step: did your post-hook put that copy back into "
            "the optimizer?"), label=Text(label))


@exercise("09.2")
def _undo_test(function: Callable[[torch.optim.Optimizer, float], Any]) -> Verdict:
    batches = [torch.randn(5, 4, generator=generator(i)) for i in range(5)]
    trainings = {  # optimizer, and the batches that make a bad step: a huge gradient, or one nan entry
        N_("SGD with momentum"): (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9), {1: "huge", 3: "nan"}),
        # Adam moves every element by about lr: normal steps whose norm exceeds max_change, though no element's does
        "Adam": (lambda ps: torch.optim.Adam(ps, lr=0.3), {2: "nan"}),
    }
    for label, (make, bad) in trainings.items():
        guarded_model, plain_model = _small_model(), _small_model()
        guarded, plain = make(guarded_model.parameters()), make(plain_model.parameters())
        handles = function(guarded, _MAX_CHANGE)
        with removing(handles):
            require(isinstance(handles, (list, tuple)) and handles and all(map(is_handle, handles)),
                    N_("Return the list of both handles, [pre-hook handle, post-hook handle]."))
            for index, batch in enumerate(batches):
                for model, optimizer in ((guarded_model, guarded), (plain_model, plain)):
                    optimizer.zero_grad()
                    loss = model(batch).pow(2).sum()
                    (loss * 1e4 if bad.get(index) == "huge" else loss).backward()
                    if bad.get(index) == "nan":
                        list(model.parameters())[-1].grad[0] = float("nan")
                params = list(guarded_model.parameters())
                before = [p.detach().clone() for p in params]
                state_before = [t.detach().clone() for p in params for t in guarded.state.get(p, {}).values()
                                if isinstance(t, torch.Tensor)]
                guarded.step()
                if index not in bad:
                    plain.step()  # the reference simply does not step on a bad batch
                require(all(torch.isfinite(p).all() for p in params),
                        N_("With {label}, a step that left a weight nan was kept: every comparison with nan is False "
                           "(nan > max_change too). Look at how your post-hook decides that a step was bad."),
                        label=Text(label))
                if not all(torch.equal(a, b) for a, b in zip(params, plain_model.parameters())):
                    if index in bad:
                        _kept_a_bad_step(guarded, params, before, label)
                    fail(N_("With {label}, a normal step was undone or changed: undo only a step that moved a weight "
                            "by more than max_change or left one not finite."), label=Text(label))
                if not _state_equal(guarded, plain, params, list(plain_model.parameters())):
                    _state_not_restored(guarded, params, state_before, label)
        require(not optimizer_hook_report(guarded), N_("Removing your handles left hooks on the optimizer: register "
                                                       "one pre-hook and one post-hook, and return both handles."))
    return Verdict(True)


def _wide_model() -> nn.Sequential:
    torch.manual_seed(17)
    return nn.Sequential(nn.Linear(5, 24), nn.Tanh(), nn.Linear(24, 24), nn.ReLU(inplace=True), nn.Linear(24, 3))


def _late_bound_name(params: list[torch.Tensor]) -> str | None:
    """The name of a closure variable that the hooks of different parameters share and that holds a parameter or a
    one-parameter optimizer (a loop variable read late: every hook gets the last value), else None."""
    cells: dict[int, tuple[str, Any, set[int], set[int]]] = {}
    for param in params:
        for hook in (getattr(param, "_post_accumulate_grad_hooks", None) or {}).values():
            code, closure = getattr(hook, "__code__", None), getattr(hook, "__closure__", None)
            for name, cell in zip(code.co_freevars, closure) if code is not None and closure else ():
                entry = cells.setdefault(id(cell), (name, cell, set(), set()))
                entry[2].add(id(param))
                entry[3].add(id(hook))
    for name, cell, hooked, functions in cells.values():
        if len(hooked) < 2 or len(functions) < 2 or not _filled(cell):
            continue
        value = cell.cell_contents
        if (isinstance(value, torch.optim.Optimizer) and sum(len(group["params"]) for group in value.param_groups) == 1
                or any(value is p for p in params)):
            return name
    return None


def _window(every: int, done: int, params: list[torch.Tensor], plain_model: nn.Module) -> None:
    """09.3's ✗ inside an accumulation window (backward ``done`` of ``every``)."""
    missing = [p for p in params if p.grad is None]
    require(len(missing) != len(params), N_("With every={every}, after backward {done} of {every} no parameter has a "
                                            ".grad left: your hook freed it at call {done}, before the every-th. Keep "
                                            "it until the every-th call, so that the next backward adds to it."),
            every=every, done=done)
    require(not missing, N_("With every={every}, after backward {done} of {every} some parameters have no .grad and "
                            "others do: each parameter's hook runs once per backward, so count the calls per parameter "
                            "(a counter shared by all the hooks counts parameters, not backward passes -- and a "
                            "counter made inside your loop is shared too if the hook reads the loop's variable when it "
                            "runs)."), every=every, done=done)
    require(all(torch.allclose(p.grad, q.grad, atol=1e-6) for p, q in zip(params, plain_model.parameters())),
            N_("With every={every}, the gradients between two steps are not the sum of the backward passes so far: "
               "step and free .grad only on the every-th call."), every=every)


@exercise("09.3")
def _accumulation_test(function: Callable[[nn.Module, Callable[[list], torch.optim.Optimizer], int], Any]) -> Verdict:
    makers = {N_("SGD with momentum"): lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9),
              "Adam": lambda ps: torch.optim.Adam(ps, lr=0.01)}
    batches = [torch.randn(6, 5, generator=generator(20 + i)) for i in range(6)]
    for every in (1, 3):
        for label, make in makers.items():
            fused_model, plain_model = _wide_model(), _wide_model()
            params = list(fused_model.parameters())
            handles = function(fused_model, make, every)
            with removing(handles):
                require(isinstance(handles, (list, tuple)) and all(map(is_handle, handles)),
                        N_("Return the list of handles, one per parameter."))
                shared = _late_bound_name(params)
                require(shared is None, N_("The hooks of different parameters all read one and the same `{shared}`: "
                                           "your hook refers to a variable of the loop that created it, and Python "
                                           "looks such a variable up when the hook runs -- after the loop has ended, "
                                           "so every hook gets the last parameter's value (late binding). Look at "
                                           "which of the loop's variables your hook reads."), shared=shared)
                plain = make(plain_model.parameters())
                for number, batch in enumerate(batches, start=1):
                    try:
                        fused_model(batch).pow(2).mean().backward()
                    except RuntimeError as error:
                        require("modified by an inplace operation" not in str(error),
                                N_("The backward failed: a weight it still needed was changed in place while it ran "
                                   "({error}). A hook runs as soon as its own parameter's gradient is ready, while "
                                   "other parameters' gradients are still being computed: the optimizer it steps must "
                                   "hold that parameter alone."), error=str(error).split(":")[0])
                        raise
                    plain_model(batch).pow(2).mean().backward()
                    if number % every:  # inside an accumulation window: gradients kept and summed
                        _window(every, number % every, params, plain_model)
                        continue
                    plain.step()
                    plain.zero_grad(set_to_none=True)
                    left = [p for p in params if p.grad is not None]
                    require(not left, N_("With every={every}, after backward {number}, the last of a window, {count} "
                                         "parameters still hold a .grad: free each gradient in the hook once its "
                                         "optimizer has stepped."), every=every, number=number, count=len(left))
                    if all(torch.allclose(a, b, atol=1e-6) for a, b in zip(params, plain_model.parameters())):
                        continue
                    require(not all(torch.equal(a, b) for a, b in zip(params, _wide_model().parameters())),
                            N_("The weights never changed: the hook must call the optimizer's step()."))
                    fail(N_("With {label} and every={every}, the weights differ from plain training that calls "
                            "backward() {every} time(s), then step(): one optimizer per parameter, created once (its "
                            "state must survive from step to step), stepped on the every-th call of its own hook."),
                         label=Text(label), every=every)
            require_no_hooks(fused_model, N_("Removing your handles left hooks on the parameters."))
    return Verdict(True)


EXERCISES = (_split_test, _undo_test, _accumulation_test)
