"""Exercises of notebooks/11_hook_clinic.ipynb: each the fix of a hook bug people file, run on unseen models."""

from __future__ import annotations

import copy
import gc
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.machinery.exercise_kit import *


def _inplace_flags(model: nn.Module) -> dict[str, bool]:
    return {name: module.inplace for name, module in model.named_modules() if hasattr(module, "inplace")}


def _without_inplace(model: nn.Module) -> nn.Module:
    """A copy with every in-place flag off, for the ground truth."""
    clone = copy.deepcopy(model)
    for module in clone.modules():
        if hasattr(module, "inplace"):
            module.inplace = False  # type: ignore[assignment]  # nn.Module's __setattr__ is typed for tensors
    return clone


def _grad_at_output(model: nn.Sequential, index: int, x: torch.Tensor) -> torch.Tensor:
    """d model(x).sum() / d (output of model[index]), by splitting the model there."""
    plain = _without_inplace(model)
    with torch.no_grad():
        middle = plain[: index + 1](x)
    middle.requires_grad_(True)
    return torch.autograd.grad(plain[index + 1:](middle).sum(), middle)[0]


@exercise("11.1")
def _grad_output_test(answer: Callable[..., Any]) -> Verdict:
    torch.manual_seed(111)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(inplace=True), nn.Conv2d(4, 3, 3, padding=1),
                          nn.ReLU(inplace=True), nn.Flatten(), nn.Linear(3 * 5 * 6, 6), nn.ReLU(), nn.Linear(6, 2))
    x = torch.randn(3, 2, 5, 6, generator=generator(5))
    x_before, flags = x.clone(), _inplace_flags(model)
    for name in ("0", "1", "2"):
        try:
            with watch_hooks(model[int(name)]) as seen:
                got = answer(model, name, x)
        except RuntimeError as error:
            require("BackwardHookFunction" not in str(error),
                    N_("At layer '{name}' PyTorch still raised the in-place error of the reproduction: the full "
                       "backward hook's output (or input) is changed in place by an in-place ReLU. Switch those off "
                       "while your hook is there."), name=name)
            raise
        require(_inplace_flags(model) == flags, N_("After your function the model's `inplace` flags are not what they "
                                                   "were: set back every flag you changed (also when something "
                                                   "raises)."))
        require_no_hooks(model, N_("After your function layer hooks are left on the model ({count}): remove the hook "
                                   "before returning, in a `finally`."))
        require(torch.equal(x, x_before), N_("Your function changed x: leave the caller's input as it was."))
        require_untouched(x, x_before, N_("Your function switched on x.requires_grad (or left a gradient in x.grad): "
                                          "the caller's x must come back as it was. The model's parameters already "
                                          "require grad, so the backward reaches the hooked layer without it."))
        require(isinstance(got, torch.Tensor), N_("Return the gradient as a tensor; got {type} at layer '{name}'."),
                type=type(got).__name__, name=name)
        truth = _grad_at_output(model, int(name), x)
        require(got.shape == truth.shape, N_("At layer '{name}' expected a gradient shaped like the layer's output "
                                             "{expected}, got {got}: use grad_output[0]."), name=name,
                expected=tuple(truth.shape), got=tuple(got.shape))
        require(torch.allclose(got, truth, atol=1e-5), N_("At layer '{name}' the gradient is not d model(x).sum() / d "
                                                          "output: is it grad_output[0] of the layer you were asked "
                                                          "about, from one backward?"), name=name)
        require("_backward_hooks" in seen.kinds,
                N_("The right gradient at layer '{name}', but while the model ran that layer carried no full backward "
                   "hook ({found}): the exercise is the fix of a full backward hook next to in-place ops -- register "
                   "one with register_full_backward_hook."), name=name,
                found=", ".join(seen.kinds) or Text(N_("no hook")))
    failing = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.ReLU(inplace=True), FailsOnPurpose())
    flags = _inplace_flags(failing)
    the_error_gets_out(lambda: answer(failing, "0", x.clone()))
    require(_inplace_flags(failing) == flags, N_("When the model raised, the `inplace` flags stayed switched off: set "
                                                 "them back in a `finally`, where the hook is removed too."))
    require_no_hooks(failing, N_("When the model raised, your hook stayed on the model: remove it in a `finally`."))
    return Verdict(True)


def _filled_one(kept: dict, total: int, forwards: int, message: str) -> None:
    """:func:`fail` when one list of ``kept`` holds all ``total`` entries: hooks made in a loop, late-bound."""
    counts = {name: len(value) if isinstance(value, list) else None for name, value in kept.items()}
    filled = [name for name, count in counts.items() if count]
    require(not (len(filled) == 1 and counts[filled[0]] == total), message, count=forwards,
            filled=filled[0] if filled else "", total=total)


@exercise("11.2")
def _keep_outputs_test(answer: Callable[..., Any]) -> Verdict:
    torch.manual_seed(112)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(inplace=True), nn.Linear(7, 4), nn.ReLU(inplace=True),
                          nn.Linear(4, 2))
    plain, names, draw, sizes = _without_inplace(model), ["0", "2"], generator(12), (4, 2, 3)
    truths: dict[str, list[torch.Tensor]] = {name: [] for name in names}
    alive: list[weakref.ref] = []
    result = answer(model, names)
    require(isinstance(result, tuple) and len(result) == 2, N_("Return a pair (kept, handles): the dict of lists and "
                                                               "the list of handles."))
    kept, handles = result
    require(isinstance(handles, (list, tuple)) and all(map(is_handle, handles)),
            N_("The second item must be the list of handles that register_forward_hook returned."))
    with removing(handles):
        for size in sizes:
            batch = torch.randn(size, 5, generator=draw)
            alive.append(weakref.ref(batch))
            with torch.no_grad():
                hidden = plain[0](batch)
                truths["0"].append(hidden.clone())
                truths["2"].append(plain[2](plain[1](hidden)))
            model(batch)  # an evaluation loop that forgot torch.no_grad(): no backward frees the graph
            del batch
    gc.collect()
    require_no_hooks(model, N_("Removing your handles left hooks on the model: return every handle you registered."))
    require(isinstance(kept, dict) and sorted(kept) == names,
            N_("`kept` must be a dict with one key per layer name, {names}; got {got}."), names=names,
            got=sorted(kept) if isinstance(kept, dict) else type(kept).__name__)
    still_alive = sum(ref() is not None for ref in alive)
    require(not still_alive, N_("After the loop {still_alive} of {total} input batches are still alive: what you kept "
                                "holds the autograd graph (through its grad_fn), and the graph holds the batch."),
            still_alive=still_alive, total=len(sizes))
    _filled_one(kept, len(names) * len(sizes), len(sizes),
                N_("After {count} forwards kept['{filled}'] holds all {total} tensors and the other list none: every "
                   "hook appends under the same name. Which value of the loop variable does a hook defined in the loop "
                   "see when it runs?"))
    for name in names:
        require(isinstance(kept[name], list) and len(kept[name]) == len(sizes),
                N_("kept['{name}'] has {got} tensors after {forwards} forwards; append one per forward."), name=name,
                got=len(kept[name]) if isinstance(kept[name], list) else None, forwards=len(sizes))
        for got, truth in zip(kept[name], truths[name]):
            require(isinstance(got, torch.Tensor) and got.shape == truth.shape,
                    N_("kept['{name}'] should hold the layer's output tensors, shaped like them."), name=name)
            require(not got.requires_grad, N_("kept['{name}'] holds tensors that require grad: detach them."),
                    name=name)
            if not torch.allclose(got, truth, atol=1e-6):
                require(not torch.allclose(got, truth.clamp(min=0), atol=1e-6),
                        N_("kept['{name}'] holds the values as they are after the in-place ReLU that follows the "
                           "layer: "
                           "your tensor shares its memory with the output, which that ReLU overwrites."), name=name)
                fail(N_("kept['{name}'] does not hold the layer's outputs, in forward order."), name=name)
    return Verdict(True)


@exercise("11.3")
def _mean_test(answer: Callable[..., Any]) -> Verdict:
    torch.manual_seed(113)
    model, draw = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 4), nn.Sigmoid()), generator(13)
    for call in range(4):
        x = torch.randn(2 + call, 3, generator=draw)
        for name in ("1", "3"):
            with torch.no_grad():
                truth = float(model[: int(name) + 1](x).mean())
            got = answer(model, name, x)
            require(not count_hooks(model), N_("After call {call} {left} hook(s) are left on the model: each call must "
                                               "remove the hook it registered."), call=call + 1,
                    left=count_hooks(model))
            require(isinstance(got, (float, int, torch.Tensor)) and abs(float(got) - truth) <= 1e-5,
                    N_("Layer '{name}': expected the mean of its output ({truth:.4f}), got {got!r}."), name=name,
                    truth=truth, got=got)
    broken = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), FailsOnPurpose())
    the_error_gets_out(lambda: answer(broken, "1", torch.randn(2, 3, generator=draw)))
    require_no_hooks(broken, N_("When the model raises, your hook stays on the model: remove it in a `finally` (or "
                                "use the handle as a context manager)."))
    return Verdict(True)


def _fires(scenario: str) -> bool:
    """Whether a forward hook on ``model.layer`` fires when the model runs in ``scenario``."""
    fired: list[bool] = []
    model = {
        # .forward called directly: module hooks run only through module(...)
        "forward_called_directly": Net(lambda m, x: m.layer.forward(x), layer=nn.Linear(3, 3)),
        # an auxiliary head that runs in training mode only (as in torchvision's GoogLeNet and Inception v3)
        "aux_head_in_eval": Net(lambda m, x: (m.body(x), m.layer(m.body(x))) if m.training else m.body(x),
                                body=nn.Linear(3, 3), layer=nn.Linear(3, 2)).eval(),
    }.get(scenario, Net(lambda m, x: m.layer(x), layer=nn.Linear(3, 3)))
    handle = model.layer.register_forward_hook(lambda module, args, output: fired.append(True))
    if scenario == "copied_after_hook":
        model = copy.deepcopy(model)
        handle.remove()  # removes the original's hook only
    with removing(handle), torch.set_grad_enabled(scenario != "under_no_grad"):
        model(torch.ones(1, 3))
    return bool(fired)


_SCENARIOS = ("copied_after_hook", "forward_called_directly", "under_no_grad", "aux_head_in_eval")


@exercise("11.4")
def _fires_test(answer: Any) -> Verdict:
    require(isinstance(answer, dict) and sorted(answer) == sorted(_SCENARIOS),
            N_("Answer with a dict with exactly the keys {scenarios}, each True or False."), scenarios=list(_SCENARIOS))
    require(all(isinstance(value, bool) for value in answer.values()),
            N_("Each value must be True (the hook fires) or False (it does not)."))
    wrong = [name for name in _SCENARIOS if answer[name] != _fires(name)]
    require(not wrong, N_("{wrong} of {total} predictions differ from what PyTorch does. For each scenario ask: which "
                          "module object is called, is it called as module(...), and does the forward reach it? The "
                          "diagnosis above and the hints say where module hooks live."), wrong=len(wrong),
            total=len(_SCENARIOS))
    return Verdict(True)


@exercise("11.5")
def _norms_test(answer: Callable[..., Any]) -> Verdict:
    torch.manual_seed(115)
    model = nn.Sequential(nn.Linear(4, 5), nn.GELU(), nn.Sequential(nn.Linear(5, 5), nn.Tanh()), nn.Linear(5, 3))
    reference, draw = copy.deepcopy(model), generator(15)
    batches = [torch.randn(3, 4, generator=draw), torch.randn(2, 4, generator=draw)]
    result = answer(model)
    require(isinstance(result, tuple) and len(result) == 2, N_("Return a pair (norms, handles)."))
    norms, handles = result
    hooks = [(name, module, hook, key in module._forward_hooks_with_kwargs)  # asked at the end what they return
             for name, module in model.named_modules() for key, hook in module._forward_hooks.items()]
    with removing(handles):
        outputs = [model(batch) for batch in batches]
    require_no_hooks(model, N_("Removing your handles left hooks on the model: return every handle."))
    for number, (got, want) in enumerate(zip(outputs, [reference(batch) for batch in batches]), start=1):
        require(got.shape == want.shape and torch.allclose(got.detach(), want.detach(), atol=1e-6),
                N_("Forward {number}: the model's output changed while your hooks were on, though no hook returned a "
                   "new output: a hook changed a layer's output in place (a method ending in `_`, `+=`, an assignment "
                   "into it). A hook that only records leaves the tensors it is handed as they are."), number=number)
    for number, got in enumerate(outputs, start=1):
        require(got.requires_grad, N_("Forward {number}: the output no longer requires grad: a hook returned a "
                                      "detached tensor, which replaced the layer's output."), number=number)
    leaves = [(name, module) for name, module in reference.named_modules() if name and not list(module.children())]
    if isinstance(norms, dict):
        _filled_one(dict(norms), len(leaves) * len(batches), len(batches),
                    N_("After {count} forwards norms['{filled}'] holds all {total} numbers and no other leaf has any: "
                       "every hook appends under the same name. Which value of the loop variable does a hook defined "
                       "in the loop see when it runs?"))
    names = sorted(name for name, _module in leaves)
    require(isinstance(norms, dict) and sorted(norms) == names,
            N_("`norms` needs one key per leaf module, by its name in named_modules(): {names}."), names=names)
    for name, module in leaves:
        values: list[torch.Tensor] = []
        for batch in batches:
            with torch.no_grad(), module.register_forward_hook(
                    lambda module, args, output, values=values: values.append(float(output.norm()))):
                reference(batch)
        got = norms[name]
        require(isinstance(got, list) and len(got) == len(values),
                N_("norms['{name}'] should be a list with one number per forward ({count})."), name=name,
                count=len(values))
        require(all(isinstance(value, (float, int)) and not isinstance(value, bool) for value in got),
                N_("norms['{name}'] holds {type} values: store Python floats (`.item()`), not tensors that keep the "
                   "graph alive."), name=name, type=type(got[0]).__name__ if got else "")
        require(all(abs(float(g) - v) <= 1e-4 for g, v in zip(got, values)),
                N_("norms['{name}'] is not the L2 norm of that layer's output, per forward."), name=name)
    _require_returns_none(model, hooks, batches[0])
    return Verdict(True)


def _require_returns_none(model: nn.Module, hooks: list[tuple[str, nn.Module, Callable[..., Any], bool]],
                          x: torch.Tensor) -> None:
    """Each of ``hooks`` (the learner's forward hooks, gone from ``model`` by now), called once more with what its
    module got and gave for ``x``, returns None: a hook that returns an equal tensor (``... or o * 1``) or the
    output itself changes no number, yet replaces the output (case 5)."""
    seen: dict[nn.Module, tuple[Any, Any]] = {}

    def record(module: nn.Module, args: Any, output: Any) -> None:
        seen.setdefault(module, (args, output))

    with removing([module.register_forward_hook(record) for module in model.modules()]):
        model(x)
    for name, module, hook, with_kwargs in hooks:
        args, output = seen[module]
        returned = hook(module, args, {}, output) if with_kwargs else hook(module, args, output)
        require(returned is None,
                N_("Your hook on `{name}` returns a {type}, not None. Go back to case 5: what does PyTorch do with "
                   "what a forward hook returns? Your outputs stay the same only because what your hook returns has "
                   "the output's values."),
                name=name or type(model).__name__, type=Text(type(returned).__name__))


def _layer_models() -> list[tuple[nn.Module, torch.Tensor, str, str]]:
    """(model, input, the right layer, the last layer with a 4-D output even if 1x1)."""
    torch.manual_seed(116)
    sequential = nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Conv2d(3, 5, 3), nn.ReLU(), nn.AdaptiveMaxPool2d(1),
                               nn.Flatten(), nn.Linear(5, 2))
    strip = nn.Sequential(nn.Conv2d(1, 3, (3, 1)), nn.ReLU(), nn.AdaptiveAvgPool2d((1, 4)), nn.Conv2d(3, 2, 1),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2, 2))  # maps 2x7, then 1x4, then 1x1
    # the right layer nested in a block whose own output is flat; the last map one column wide (4x3, then 4x1)
    column = nn.Sequential(nn.Sequential(nn.Conv2d(1, 3, 3), nn.ReLU(), nn.Conv2d(3, 2, (1, 3)), nn.ReLU(),
                                         nn.AdaptiveMaxPool2d(1), nn.Flatten()), nn.Linear(2, 2))
    def residual() -> Net:
        return Net(lambda m, x: torch.relu(x + m.conv(x)), conv=nn.Conv2d(4, 4, 3, padding=1))

    named = Net(lambda m, x: m.head(m.pool(m.blocks(m.stem(x))).flatten(1)), stem=nn.Conv2d(3, 4, 3, padding=1),
                blocks=nn.Sequential(residual(), residual()), pool=nn.AdaptiveAvgPool2d(1), head=nn.Linear(4, 5))
    draw = generator(16)
    return [(sequential, torch.randn(2, 1, 9, 7, generator=draw), "3", "4"),
            (named, torch.randn(1, 3, 6, 8, generator=draw), "blocks", "pool"),
            (strip, torch.randn(2, 1, 4, 7, generator=draw), "3", "4"),
            (column, torch.randn(2, 1, 6, 5, generator=draw), "0.3", "0.4")]


def _map_shapes(model: nn.Module, x: torch.Tensor) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    handles = [module.register_forward_hook(
        lambda m, args, out, name=name: shapes.__setitem__(name, tuple(out.shape)) if out.dim() == 4 else None)
        for name, module in model.named_modules() if name]
    with removing(handles), torch.no_grad():
        model(x)
    return shapes


@exercise("11.6")
def _layer_test(answer: Callable[..., Any]) -> Verdict:
    for model, x, right, pooled in _layer_models():
        x_before = x.clone()
        got = answer(model, x)
        require_no_hooks(model, N_("Your function left hooks on the model: remove them before returning."))
        require(torch.equal(x, x_before), N_("Your function changed x: leave the caller's input as it was."))
        if got == right:
            continue
        require(got != pooled, N_("'{got}' has a 4-D output, but it is 1x1: after global pooling there is nothing left "
                                  "to localise. Require h * w > 1."), got=got)
        names, shapes = dict(model.named_modules()), _map_shapes(model, x)
        flat = shapes[right]
        require(not (got in shapes and min(flat[-2:]) == 1 and min(shapes[got][-2:]) > 1),
                N_("{got!r} is not the last with a map: a later module's output is {shape}, and h * w = {cells} > 1 -- "
                   "a map one row (or one column) high still says where. Require h * w > 1, not h > 1 and w > 1."),
                got=got, shape=flat, cells=flat[-2] * flat[-1])
        require(not ("." in right and (got is None or got not in names or "." not in got)),
                N_("On a model whose last map comes from a layer inside a block (its name has a dot, and the block's "
                   "own output is flat) you returned {got!r}: hook every named module, nested ones too "
                   "(named_modules(), not named_children())."), got=got)
        require(got in names, N_("{got!r} is not a module name of the model (names from named_modules())."), got=got)
        fail(N_("Expected the last module, in the order the forward calls finish, whose output is (N, C, h, w) with h "
                "* w > 1; got {got!r}."), got=got)
    return Verdict(True)


@exercise("11.7")
def _scale_test(answer: Callable[..., Any]) -> Verdict:
    from torch._dynamo.utils import counters

    torch.manual_seed(117)
    model = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))
    x = torch.randn(4, 3, generator=generator(17))
    result = answer(model[0])
    require(isinstance(result, tuple) and len(result) == 2 and callable(result[0]),
            N_("Return a pair (set_scale, handle)."))
    set_scale, handle = result
    outputs: list[torch.Tensor] = []
    scales = (0.5, 2.0, 3.0)
    with removing(handle):
        set_scale(1.0)
        with torch.no_grad():  # once eagerly first: what the hook returns is judged there (check() watches it)
            model(x)
        # Dynamo caches compiled code per code object (nn.Module's forward machinery, shared by every model) up to a
        # recompile limit, then runs eagerly without counting: start from nothing, or a retried wrong answer passes.
        torch.compiler.reset()
        compiled, before = torch.compile(model, backend="eager"), counters["stats"]["unique_graphs"]
        for scale in scales:
            set_scale(scale)
            outputs.append(compiled(x))
        graphs = counters["stats"]["unique_graphs"] - before
    require_no_hooks(model, N_("After handle.remove() hooks are left on the layer: return the handle of the one "
                               "hook, and register no other."))
    with torch.no_grad():
        for scale, got in zip(scales, outputs):
            require(torch.allclose(got.detach(), model[2](torch.tanh(model[0](x) * scale)), atol=1e-5),
                    N_("After set_scale({scale}) the compiled model's output is not the eager model with layer '0''s "
                       "output multiplied by that scale."), scale=scale)
    require(graphs <= 1, N_("torch.compile built {graphs} graphs for {count} scales: between the calls, set_scale "
                            "changed something dynamo guards on. Look at what set_scale changes -- the hooks on the "
                            "layer? a Python number the hook reads? -- and at the diagnosis of case 7."),
            graphs=graphs, count=len(scales))
    return Verdict(True)


def _clip_model() -> nn.Sequential:
    torch.manual_seed(118)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2))


def _clip_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    draw = generator(18)
    return [(torch.randn(5, 4, generator=draw) * 2, torch.randn(5, 2, generator=draw) * 3) for _ in range(3)]


_SCALE = 2.0 ** 10


def _reference_step(clip: str, limit: float, *, divide: bool = True) -> list[torch.Tensor]:
    """Parameters after one SGD step on the accumulated gradient, clipped as ``clip`` says (``"once"``: the task;
    ``divide=False``: each loss not divided by the number of micro-batches). No scaler: scaling by a power of two and
    unscaling is exact."""
    model, batches = _clip_model(), _clip_batches()
    scaled = clip in ("before unscale", "per scaled micro-batch")
    handles = [param.register_hook(lambda grad: grad.clamp(-limit, limit))
               for param in model.parameters()] if clip.startswith("per") else []
    with removing(handles):
        for x, y in batches:
            loss = F.mse_loss(model(x), y) / (len(batches) if divide else 1)
            (loss * (_SCALE if scaled else 1.0)).backward()
            if clip == "after each backward":
                torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    if clip in ("once", "before unscale"):
        torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    elif clip == "norm":
        torch.nn.utils.clip_grad_norm_(model.parameters(), limit)
    with torch.no_grad():
        for param in model.parameters():
            param.sub_(0.1 * param.grad / (_SCALE if scaled else 1.0))
    return [param.detach().clone() for param in model.parameters()]


def _train_step_run(answer: Callable[..., Any], *, stale: bool) -> tuple[list[torch.Tensor], float, bool]:
    """The parameters after the answer's step, the scale then, whether hooks were left; ``stale``: old .grad first."""
    model = _clip_model()
    if stale:
        draw = generator(8118)
        for param in model.parameters():
            param.grad = torch.randn(param.shape, generator=draw)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    # growth_interval=1: a scaler.update() after a step without inf/nan doubles the scale at once
    scaler = torch.amp.GradScaler("cpu", init_scale=_SCALE, growth_interval=1)
    answer(model, optimizer, scaler, _clip_batches(), 0.05)
    left = any(count_hooks(param) for param in model.parameters()) or count_hooks(model)
    return [param.detach() for param in model.parameters()], scaler.get_scale(), bool(left)


@exercise("11.8")
def _train_step_test(answer: Callable[..., Any]) -> Verdict:
    limit, (got, scale, left) = 0.05, _train_step_run(answer, stale=False)
    require(not left, N_("Hooks are left on the model or its parameters after train_step: clipping once needs no hook "
                         "at all."))

    def same(*clips: str, divide: bool = True) -> bool:
        return any(all(torch.allclose(g, r, atol=1e-6) for g, r in zip(got, _reference_step(clip, limit,
                                                                                              divide=divide)))
                   for clip in clips)

    if same("once"):
        require(scale != _SCALE, N_("The step is right, but the scaler's scale did not change after it: the step goes "
                                    "through the scaler, which then adjusts its scale for the next step. Which scaler "
                                    "call comes after scaler.step(optimizer)?"))
        # Right from empty gradients; in a training loop, the parameters still hold the previous step's.
        got, scale, left = _train_step_run(answer, stale=True)
        require(not left and same("once") and scale != _SCALE,
                N_("Your step is right when the parameters start without gradients, but not when they still hold "
                   "gradients from before this step, as they do in a training loop after the previous step: those "
                   "gradients were kept and added to this step's. Look at what the parameters' .grad hold when "
                   "train_step begins."))
        return Verdict(True)
    require(not same("none"), N_("The step equals one without clipping: clip the accumulated, unscaled gradients "
                                 "before scaler.step."))
    require(not same("before unscale"), N_("You clipped the scaled gradients: after unscaling they are 1/scale of the "
                                           "limit. Call scaler.unscale_(optimizer) first, then clip."))
    require(not same("norm"), N_("You clipped the gradients' norm: the task clips by value, every entry to ±limit "
                                 "(clip_grad_value_)."))
    require(not same("once", divide=False), N_("The step's gradient is {count} times too large before clipping: it is "
                                               "the gradient of the mean of the micro-batches' losses, so each loss is "
                                               "divided by their number before its backward."),
            count=len(_clip_batches()))
    require(not same("per micro-batch", "per scaled micro-batch"),
            N_("You clipped each micro-batch's contribution (a gradient hook fires on every backward): clip once, the "
               "accumulated gradient, after the last backward and after unscale_. Register no hook."))
    require(not same("after each backward"), N_("You clipped after every micro-batch's backward: the running sum was "
                                                "clipped before the later micro-batches were added to it. Clip once, "
                                                "the accumulated gradient, after the last backward and after "
                                                "unscale_."))
    fail(N_("The step is not SGD on the mean of the micro-batch losses' gradients, unscaled, clipped by value once "
            "after the last backward."))


EXERCISES = (_grad_output_test, _keep_outputs_test, _mean_test, _fires_test, _norms_test, _layer_test, _scale_test,
             _train_step_test)
