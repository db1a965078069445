"""Exercises of notebooks/08_saved_tensor_hooks.ipynb: pack/unpack calls, a float16 pair, saved bytes per layer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd.graph import saved_tensors_hooks
from torch.multiprocessing.reductions import StorageWeakRef

from course_utils.machinery.exercise_kit import *


def _saved_tensor_hooks_active() -> bool:
    """True while a saved_tensors_hooks pair is in force; a pair an answer left on is taken off."""
    if torch._C._autograd._top_saved_tensors_default_hooks(False) is None:
        return False
    for _ in range(100):  # bounded: more than this is not an answer's leftovers
        torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t).__exit__(None, None, None)
        if torch._C._autograd._top_saved_tensors_default_hooks(False) is None:
            break
    return True


def _pack_unpack_calls() -> tuple[float, float]:
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
    return float(calls["pack"]), float(calls["unpack"])


@exercise("08.1")
def _predict_calls(answer: Any) -> Verdict:
    value = as_float_tensor(answer, form=N_("Answer with a list of two numbers, [pack calls, unpack calls]; "
                                            "got {answer}, not a list of numbers."))
    require(value.numel() == 2, N_("Answer with two numbers, [pack calls, unpack calls]; got {count}."),
            count=value.numel())
    (pack, unpack), (truth_pack, truth_unpack) = value.reshape(2).tolist(), _pack_unpack_calls()
    if (pack, unpack) == (truth_pack, truth_unpack):
        return Verdict(True)
    require(pack <= truth_pack, N_("Too many pack calls: not every operation keeps a tensor for its backward. For each "
                                   "of the three -- the multiplication, exp, sum -- ask what its backward needs to "
                                   "compute its input's gradient: a tensor is packed only where one is needed."))
    require(pack == truth_pack, N_("Too few pack calls: exp's derivative is exp itself, so its backward needs a "
                                   "tensor."))
    require(unpack >= truth_unpack, N_("The pack count is right; the unpack count is too low: retain_graph=True keeps "
                                       "the saved tensors for a second backward, and every backward that needs one "
                                       "unpacks it again."))
    fail(N_("The pack count is right; the unpack count is too high: each backward unpacks each saved tensor it uses "
            "once."))


def _tensors_in(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list, dict)) or hasattr(value, "__dict__") and not callable(value):
        for item in (value if isinstance(value, (tuple, list)) else
                     value.values() if isinstance(value, dict) else vars(value).values()):
            yield from _tensors_in(item)


def _memory(tensor: torch.Tensor) -> tuple[str, int]:
    return str(tensor.device), tensor.untyped_storage().data_ptr()


def _pooling_model() -> nn.Sequential:
    torch.manual_seed(31)
    # 64x64 maps: max-pooling indices reach 4095, which float16 cannot hold exactly (integers above 2048). ReLU saves
    # its output, and the Linear saves the same memory again, through Flatten, as a view of another shape.
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 32 * 32, 3))


def _loss(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(model(x), torch.tensor([0, 2, 1]))


@dataclass
class _Saved:
    """One pack call seen by the check: the tensor autograd saved, and what the learner's pack returned."""

    dtype: torch.dtype
    memory: tuple[str, int]
    storage: int                 # which storage: addresses are reused once a storage is freed
    nbytes: int                  # of the whole storage the saved tensor lives in
    parameter: bool
    original: StorageWeakRef     # to see whether the original storage is still alive after forward
    kept: list[torch.Tensor]


_ALIVE = N_("Your class keeps the float32 tensors autograd saved alive (in a cache, or in what pack returns), so no "
            "memory is saved: keep only the float16 copy, and a weak reference (StorageWeakRef) to tell whether the "
            "original still exists.")


def _address_reuse_probe(pack: Callable[[torch.Tensor], Any], unpack: Callable[[Any], torch.Tensor]) -> None:
    """Two tensors in the very same memory, the first freed before the second exists (as the allocator does), and
    three views of one storage."""
    memory = bytearray(64 * 4)
    first = torch.frombuffer(memory, dtype=torch.float32)
    first.fill_(1.0)
    packed_first = pack(first)
    original = StorageWeakRef(first.untyped_storage())
    del first
    require(original.expired(), _ALIVE)
    second = torch.frombuffer(memory, dtype=torch.float32)
    second.fill_(2.0)
    back = unpack(pack(second))
    require(not (isinstance(back, torch.Tensor) and torch.equal(back, torch.ones(64))),
            N_("A tensor was freed, a new one got the same memory address, and your unpack gave back the old tensor's "
               "values: a cached copy is valid only while the storage it was made from is alive. Look at how your "
               "cache tells a live entry from a stale one."))
    require(isinstance(back, torch.Tensor) and back.dtype == torch.float32
            and torch.equal(back, torch.full((64,), 2.0)),
            N_("unpack did not give back the tensor pack received (a 1-D float32 tensor of 2.0s came back as something "
               "else): rebuild it with its shape, stride and storage offset, in its original dtype."))
    require(torch.equal(unpack(packed_first), torch.ones(64)),
            N_("unpack gave back wrong values for a tensor whose memory was reused afterwards: each packed value must "
               "keep its own float16 copy."))
    # views of one storage, packed one after the other while it lives: the whole tensor, a transposed view, a view
    # at an offset (values float16 holds exactly)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    views = {N_("the tensor itself"): base, N_("the transpose"): base.t(), N_("the slice"): base[1:, 2:]}
    packed = {name: pack(view) for name, view in views.items()}
    for name, view in views.items():
        back = unpack(packed[name])
        require(isinstance(back, torch.Tensor) and back.shape == view.shape and torch.equal(back.float(), view),
                N_("Three views of one storage were packed -- the tensor, its transpose, and a slice that starts at an "
                   "offset -- and unpack gave back wrong values for {view}: rebuild each view from the one float16 "
                   "copy of the whole storage, with that view's own size, stride and storage offset."),
                view=Text(name))
    middle = torch.arange(10, dtype=torch.float32)[2:5]  # the first view packed of its storage is a part of it
    try:
        rebuilt = unpack(pack(middle))
    except RuntimeError:
        rebuilt = None
    require(isinstance(rebuilt, torch.Tensor) and rebuilt.shape == middle.shape
            and torch.equal(rebuilt.float(), middle),
            N_("A slice from the middle of a storage (3 of its 10 elements, at storage offset 2) was the first view of "
               "it packed, and unpack failed or gave back wrong values: look at how much of the storage your float16 "
               "copy covers, and where it starts."))


def _records(seen: list[_Saved]) -> None:
    for record in seen:
        kept_dtypes = [t.dtype for t in record.kept]
        if record.parameter:
            require(any(_memory(t) == record.memory for t in record.kept),
                    N_("A tensor living in one of the model's parameters (a Linear saves weight.t()) was stored as a "
                       "copy ({kept}): it costs nothing as it is, a copy adds memory -- keep it as it is."),
                    kept=kept_dtypes)
        elif not record.dtype.is_floating_point:
            require(record.dtype in kept_dtypes, N_("A {dtype} tensor (the max-pooling indices) was stored as {kept}: "
                                                    "integer tensors must be stored as they are -- float16 cannot "
                                                    "even hold integers above 2048 exactly."), dtype=record.dtype,
                    kept=kept_dtypes)
        else:
            require(torch.float16 in kept_dtypes, N_("A {dtype} tensor was stored as {kept}: store floating-point "
                                                     "tensors as float16 (that is the memory saving)."),
                    dtype=record.dtype, kept=kept_dtypes or Text(N_("no tensor")))


@exercise("08.2")
def _half_test(hooks_class: Callable[..., Any]) -> Verdict:
    model = _pooling_model()
    try:
        instance = hooks_class(model)
    except TypeError as error:
        fail(N_("SaveInHalf(model) failed ({error}): the class takes the model, so that it can keep the tensors living "
                "in its parameters as they are."), error=error)
    require(isinstance(instance, saved_tensors_hooks),
            N_("SaveInHalf must subclass torch.autograd.graph.saved_tensors_hooks and call super().__init__(pack, "
               "unpack) with your two functions."))
    require(callable(getattr(instance, "pack_hook", None)) and callable(getattr(instance, "unpack_hook", None)),
            N_("Call super().__init__(pack, unpack) in __init__, so the base class knows your hooks."))
    learner_pack = instance.pack_hook
    try:
        _address_reuse_probe(learner_pack, instance.unpack_hook)
    except Refusal:
        raise
    except Exception as error:
        fail(N_("Your hooks failed on a plain 1-D float32 tensor ({type}: {error})."), type=type(error).__name__,
             error=error)
    x, reference_model = torch.randn(3, 2, 64, 64, generator=generator(5)), _pooling_model()
    _loss(reference_model, x).backward()
    reference = [p.grad for p in reference_model.parameters()]
    parameters = {_memory(p) for p in model.parameters()}
    seen: list[_Saved] = []
    storages: dict[tuple[str, int], tuple[StorageWeakRef, int]] = {}  # address -> (the storage there, its number)

    def spy(tensor: torch.Tensor) -> Any:
        address, storage = _memory(tensor), tensor.untyped_storage()
        known = storages.get(address)
        if known is None or known[0].expired():  # a freed storage's address is soon given to another tensor
            known = storages[address] = (StorageWeakRef(storage), len(storages) + len(seen))
        packed = learner_pack(tensor)
        seen.append(_Saved(tensor.dtype, address, known[1], storage.nbytes(), address in parameters,
                           StorageWeakRef(storage), list(_tensors_in(packed))))
        return packed

    instance.pack_hook = spy
    try:
        with instance:
            loss = _loss(model, x)
    except RuntimeError as error:
        fail(N_("The forward pass failed inside your with-block ({error})."), error=str(error).splitlines()[0][:120])
    require(not _saved_tensor_hooks_active(), N_("The hooks stayed in force after the with-block: do not override "
                                                 "__enter__/__exit__."))
    require(seen, N_("Your pack hook was never called: pass it to super().__init__(pack, unpack)."))
    _records(seen)
    floats = [r for r in seen if r.dtype.is_floating_point and not r.parameter]
    require(all(r.original.expired() for r in floats if r.memory != _memory(x)), _ALIVE)
    taken = sum({_memory(t): t.untyped_storage().nbytes() for r in floats for t in r.kept
                 if t.dtype == torch.float16}.values())
    floor = sum({r.storage: r.nbytes // 2 for r in floats}.values())
    require(taken <= floor, N_("Your float16 copies take {taken} bytes; one copy per storage takes {floor}. Autograd "
                               "saved some memory more than once -- here the ReLU's output, and the Linear's input, "
                               "which is the same memory seen through Flatten -- and your pack stored it twice: keep "
                               "one copy per storage and rebuild each view from it."), taken=taken, floor=floor)
    try:
        loss.backward()
    except RuntimeError as error:
        fail(N_("Backward failed ({error}): unpack must give back each tensor with the shape, stride and dtype it had "
                "when it was saved."), error=str(error).splitlines()[0][:120])
    got = [p.grad for p in model.parameters()]
    require(all(g is not None and g.dtype == r.dtype for g, r in zip(got, reference)),
            N_("The gradients came out in another dtype: unpack must restore the original dtype."))
    gap = max(float((g - r).norm() / r.norm()) for g, r in zip(got, reference))
    require(gap <= 1e-2, N_("The gradients differ from plain autograd by {error:.1%}: does unpack give back the same "
                            "values, in the right view of the copy (size, stride, storage offset)?"), error=gap)
    return Verdict(True)


def _graph_truth(model: nn.Module, x: torch.Tensor, *, dedupe: bool = True, skip_params: bool = True
                 ) -> dict[str, int]:
    """Bytes per leaf module from the graph's own ``_saved_*`` attributes (no saved-tensor hooks involved)."""
    outputs: list[tuple[str, Any]] = []
    handles = [module.register_forward_hook(lambda m, args, out, name=name: outputs.append((name, out.grad_fn)))
               for name, module in model.named_modules() if name and not list(module.children())]
    with removing(handles):
        model(x)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    visited, seen, totals = set(), set(), dict[str, int]()
    for name, node in outputs:
        stack = [node] if node is not None else []
        while stack:
            current = stack.pop()
            if current is None or current in visited:
                continue
            visited.add(current)
            for tensor in (t for attribute in dir(current) if attribute.startswith("_saved_")
                           for t in _tensors_in(getattr(current, attribute))):
                address = tensor.untyped_storage().data_ptr()
                if not ((skip_params and address in params) or (dedupe and address in seen)):
                    seen.add(address)
                    totals[name] = totals.get(name, 0) + tensor.numel() * tensor.element_size()
            stack.extend(next_node for next_node, _input_nr in current.next_functions)
    return totals


@exercise("08.3")
def _bytes_test(function: Callable[[nn.Module, torch.Tensor], Any]) -> Verdict:
    torch.manual_seed(41)
    # the in-place ReLU saves its output, and the Linear the same storage again through Flatten, as another view
    convnet = nn.Sequential(nn.Conv2d(3, 5, 3), nn.MaxPool2d(2), nn.ReLU(inplace=True), nn.Flatten(),
                            nn.Linear(5 * 3 * 3, 4), nn.Tanh())
    nested = nn.Sequential(nn.Sequential(nn.Linear(6, 7), nn.ReLU()), nn.Linear(7, 2), nn.Sigmoid())
    # its own forward saves a tensor (tanh's) after its last leaf ran: no leaf module saved that one
    tanh_after = Net(lambda m, x: torch.tanh(m.body(x) * 3), body=nn.Sequential(nn.Linear(4, 6), nn.Sigmoid()))
    for model, x in ((convnet, torch.randn(2, 3, 8, 8, generator=generator(1))),
                     (nested, torch.randn(5, 6, generator=generator(2))),
                     (tanh_after, torch.randn(3, 4, generator=generator(3)))):
        answer = function(model, x)
        require(not _saved_tensor_hooks_active(), N_("A saved_tensors_hooks pair is still in force after your "
                                                     "function returned: use it as a with-block."))
        require_no_hooks(model, N_("Your function left hooks on the model: remove every handle before returning."))
        require(isinstance(answer, dict), N_("Return a dict {{layer name: bytes}}, got {type}."),
                type=type(answer).__name__)
        got = {str(k): int(v) for k, v in answer.items() if int(v) != 0}
        truth = _graph_truth(model, x)
        if got == truth:
            continue
        require(got != _graph_truth(model, x, dedupe=False),
                N_("Some memory is counted twice: a tensor saved by one layer and again by the next (e.g. an "
                   "activation's output and the following layer's input) is one storage."))
        require(got not in (_graph_truth(model, x, skip_params=False),
                            _graph_truth(model, x, dedupe=False, skip_params=False)),
                N_("Tensors that live in a parameter (a Linear saves weight.t()) cost no new memory: leave them out."))
        require(not (model is tanh_after and got.get("body.1", 0) > truth.get("body.1", 0)),
                N_("The last leaf module got more bytes than it saved: after a leaf's forward ends, the code of the "
                   "module around it (here a tanh in the model's own forward) can save tensors too, and no leaf module "
                   "is running then. Mark where each leaf's call ends, not only where it starts."))
        total, expected = sum(got.values()), sum(truth.values())
        require(total != expected, N_("The total ({total} bytes) is right, but not how it is shared between the "
                                      "layers: "
                                      "expected {expected}, got {got}. A storage counts for the first layer that saved "
                                      "it, also when a later layer saves it again."), total=expected, expected=truth,
                got=got)
        require(total < expected or not set(got) <= set(truth),
                N_("More bytes in all than the layers saved ({got} against {expected}): is some memory counted twice? "
                   "One storage seen through two tensor objects (a view, the output of an in-place op) is still one "
                   "storage."), got=total, expected=expected)
        require(set(got) == set(truth), N_("Expected entries for the leaf modules {expected} (dotted names from "
                                           "named_modules), got {got}."), expected=sorted(truth), got=sorted(got))
        fail(N_("Wrong bytes: expected {expected}, got {got}. Count numel() * element_size() of each new storage, for "
                "the layer running when it was saved."), expected=truth, got=got)
    failing = nn.Sequential(nn.Linear(6, 4), nn.Tanh(), FailsOnPurpose())
    the_error_gets_out(lambda: function(failing, torch.randn(3, 6)),
                       N_("The error raised inside the model's forward disappeared: let it propagate."), RuntimeError)
    left_in_force = _saved_tensor_hooks_active()  # (and taken off)
    require(not count_hooks(failing) and not left_in_force,
            N_("When the forward raises, your hooks stay behind: remove them in a finally block (and leave the "
               "with-block of saved_tensors_hooks)."))
    return Verdict(True)


EXERCISES = (_predict_calls, _half_test, _bytes_test)
