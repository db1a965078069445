"""Exercises of notebooks/08_saved_tensor_hooks.ipynb: predict pack/unpack calls, a float16 saved-tensor pair, and
saved bytes per layer -- each run on graphs the learner has not seen, against plain autograd or the graph itself."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.graph import saved_tensors_hooks

from course_utils.exercise_kit import Exercise, Verdict, expect_callable, expect_live_value
from course_utils.hooks import count_hooks


def _saved_tensor_hooks_active() -> bool:
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


# -- 08.1 ------------------------------------------------------------------------------------------------
def _pack_unpack_calls() -> torch.Tensor:
    """The snippet of exercise 08.1, run live with counting hooks."""
    calls = {"pack": 0, "unpack": 0}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        calls["pack"] += 1
        return tensor.detach()

    def unpack(stored: torch.Tensor) -> torch.Tensor:
        calls["unpack"] += 1
        return stored

    a = torch.randn(4, requires_grad=True)
    with saved_tensors_hooks(pack, unpack):
        y = (a * 3).exp().sum()
    y.backward(retain_graph=True)
    y.backward()
    return torch.tensor([float(calls["pack"]), float(calls["unpack"])])


# -- 08.2 ------------------------------------------------------------------------------------------------
def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors_in(item)


def _pooling_model() -> nn.Sequential:
    torch.manual_seed(31)
    # 64x64 maps: max-pooling indices reach 4095, which float16 cannot hold exactly (integers above 2048)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.Tanh(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 32 * 32, 3))


def _grads(model: nn.Module, x: torch.Tensor, context: Any) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    with context:
        loss = F.cross_entropy(model(x), torch.tensor([0, 2, 1]))
    loss.backward()
    return [p.grad.clone() for p in model.parameters()]


class _NoHooks:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def _half_test(hooks_class: Callable[[], Any]) -> Verdict:
    instance = hooks_class()
    if not isinstance(instance, saved_tensors_hooks):
        return Verdict(False, "SaveInHalf must subclass torch.autograd.graph.saved_tensors_hooks and call "
                              "super().__init__(pack, unpack) with your two functions.")
    if not callable(getattr(instance, "pack_hook", None)) or not callable(getattr(instance, "unpack_hook", None)):
        return Verdict(False, "Call super().__init__(pack, unpack) in __init__, so the base class knows your hooks.")
    model = _pooling_model()
    x = torch.randn(3, 2, 64, 64, generator=torch.Generator().manual_seed(5))
    reference = _grads(model, x, _NoHooks())

    learner_pack = instance.pack_hook
    stored: list[tuple[torch.dtype, list[torch.dtype]]] = []

    def spy(tensor: torch.Tensor) -> Any:
        packed = learner_pack(tensor)
        stored.append((tensor.dtype, [t.dtype for t in _tensors_in(packed)]))
        return packed

    instance.pack_hook = spy
    try:
        got = _grads(model, x, instance)
    except RuntimeError as error:
        if _saved_tensor_hooks_active():
            return Verdict(False, "The hooks stayed in force after the with-block: do not override __enter__/__exit__.")
        return Verdict(False, f"Backward failed ({str(error).splitlines()[0][:120]}): unpack must give back each tensor "
                              "in the dtype it had when it was saved, with the right values.")
    if _saved_tensor_hooks_active():
        return Verdict(False, "The hooks stayed in force after the with-block: do not override __enter__/__exit__.")
    if not stored:
        return Verdict(False, "Your pack hook was never called: pass it to super().__init__(pack, unpack).")
    for dtype, kept in stored:
        if dtype.is_floating_point and torch.float16 not in kept:
            return Verdict(False, f"A {dtype} tensor was stored as {kept or 'no tensor'}: store floating-point tensors "
                                  "as float16 (that is the memory saving).")
        if not dtype.is_floating_point and dtype not in kept:
            return Verdict(False, f"A {dtype} tensor (the max-pooling indices) was stored as {kept}: integer tensors "
                                  "must be stored as they are -- float16 cannot even hold integers above 2048 exactly.")
    if any(g.dtype != r.dtype for g, r in zip(got, reference)):
        return Verdict(False, "The gradients came out in another dtype: unpack must restore the original dtype.")
    error = max(float((g - r).norm() / r.norm()) for g, r in zip(got, reference))
    if error > 1e-2:
        return Verdict(False, f"The gradients differ from plain autograd by {error:.1%}: does unpack give back the same "
                              "values (and the integer tensors untouched)?")
    return Verdict(True)


# -- 08.3 ------------------------------------------------------------------------------------------------
class _Explodes(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("this layer fails on purpose")


def _graph_truth(model: nn.Module, x: torch.Tensor, *, dedupe: bool = True, skip_params: bool = True) -> dict[str, int]:
    """Bytes per leaf module from the graph's own ``_saved_*`` attributes (no saved-tensor hooks involved)."""
    outputs: list[tuple[str, Any]] = []
    handles = []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            handles.append(module.register_forward_hook(
                lambda m, args, out, name=name: outputs.append((name, out.grad_fn))))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    visited: set[Any] = set()
    seen: set[int] = set()
    totals: dict[str, int] = {}
    for name, node in outputs:
        stack = [node] if node is not None else []
        while stack:
            current = stack.pop()
            if current is None or current in visited:
                continue
            visited.add(current)
            for attribute in dir(current):
                if not attribute.startswith("_saved_"):
                    continue
                for tensor in _tensors_in(getattr(current, attribute)):
                    address = tensor.untyped_storage().data_ptr()
                    if (skip_params and address in params) or (dedupe and address in seen):
                        continue
                    seen.add(address)
                    totals[name] = totals.get(name, 0) + tensor.numel() * tensor.element_size()
            stack.extend(next_node for next_node, _ in current.next_functions)
    return totals


def _nonzero(mapping: Any) -> dict[str, int] | None:
    if not isinstance(mapping, dict):
        return None
    return {str(k): int(v) for k, v in mapping.items() if int(v) != 0}


def _bytes_test(function: Callable[[nn.Module, torch.Tensor], Any]) -> Verdict:
    torch.manual_seed(41)
    convnet = nn.Sequential(nn.Conv2d(3, 5, 3), nn.ReLU(inplace=True), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Linear(5 * 3 * 3, 4), nn.Tanh())
    nested = nn.Sequential(nn.Sequential(nn.Linear(6, 7), nn.ReLU()), nn.Linear(7, 2), nn.Sigmoid())
    cases = [(convnet, torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))),
             (nested, torch.randn(5, 6, generator=torch.Generator().manual_seed(2)))]
    for model, x in cases:
        answer = function(model, x)
        if _saved_tensor_hooks_active():
            return Verdict(False, "A saved_tensors_hooks pair is still in force after your function returned: use it "
                                  "as a with-block.")
        if count_hooks(model):
            return Verdict(False, "Your function left hooks on the model: remove every handle before returning.")
        got = _nonzero(answer)
        if got is None:
            return Verdict(False, f"Return a dict {{layer name: bytes}}, got {type(answer).__name__}.")
        truth = _graph_truth(model, x)
        if got == truth:
            continue
        if got == _graph_truth(model, x, dedupe=False):
            return Verdict(False, "Some memory is counted twice: a tensor saved by one layer and again by the next "
                                  "(e.g. an activation's output and the following layer's input) is one storage.")
        if got == _graph_truth(model, x, skip_params=False) or got == _graph_truth(model, x, dedupe=False, skip_params=False):
            return Verdict(False, "Tensors that live in a parameter (a Linear saves weight.t()) cost no new memory: "
                                  "leave them out.")
        if set(got) != set(truth):
            return Verdict(False, f"Expected entries for the leaf modules {sorted(truth)} (dotted names from "
                                  f"named_modules), got {sorted(got)}.")
        return Verdict(False, f"Wrong bytes: expected {truth}, got {got}. Count numel() * element_size() of each "
                              "new storage, for the layer running when it was saved.")
    failing = nn.Sequential(nn.Linear(6, 4), nn.Tanh(), _Explodes())
    try:
        function(failing, torch.randn(3, 6))
    except RuntimeError:
        if count_hooks(failing) or _saved_tensor_hooks_active():
            return Verdict(False, "When the forward raises, your hooks stay behind: remove them in a finally block "
                                  "(and leave the with-block of saved_tensors_hooks).")
        return Verdict(True)
    return Verdict(False, "The error raised inside the model's forward disappeared: let it propagate.")


EXERCISES = (
    Exercise(
        "08.1",
        "Predict how many times pack and unpack are called for (a * 3).exp().sum() and two backward passes.",
        expect_live_value(_pack_unpack_calls, "Ask, for each operation, whether its backward needs a tensor; then "
                                              "count how often backward reads each saved tensor."),
        hints=(
            "A multiplication by a Python number needs only that number in backward, not a tensor.",
            "exp's derivative is exp itself: it saves its result. Every backward pass unpacks what it uses.",
        ),
        kind="predict",
        praise="Only operations whose backward needs a tensor save one, and every backward reads it again.",
    ),
    Exercise(
        "08.2",
        "Write SaveInHalf, a saved_tensors_hooks subclass that stores floating-point saved tensors as float16 and "
        "other tensors unchanged, and restores the original dtype in unpack.",
        expect_callable(_half_test, "a class SaveInHalf (a saved_tensors_hooks subclass)"),
        hints=(
            "In __init__, define pack(tensor) and unpack(packed), then call super().__init__(pack, unpack).",
            "pack can return a pair (original dtype, stored tensor); tensor.is_floating_point() tells which tensors "
            "to convert with .to(torch.float16), and unpack converts back with .to(original dtype).",
        ),
        kind="write",
        praise="Half the bytes for every float autograd keeps, and the integer indices untouched.",
    ),
    Exercise(
        "08.3",
        "Write saved_bytes_by_layer(model, x): the bytes each leaf module saves for backward, each storage once, "
        "parameters excluded, hooks removed also on error.",
        expect_callable(_bytes_test, "a function saved_bytes_by_layer(model, x)"),
        hints=(
            "A forward pre-hook on each leaf module can record which layer is running; the pack hook of "
            "saved_tensors_hooks reads it. A forward hook with always_call=True marks the end.",
            "tensor.untyped_storage().data_ptr() identifies memory: keep the addresses already counted and those of "
            "the parameters; remove the module hooks in a finally block.",
        ),
        kind="write",
        stretch=True,
        praise="Module hooks and saved-tensor hooks together: a memory profiler per layer in a few lines.",
    ),
)
