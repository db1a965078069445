"""Exercises of notebooks/10_hooks_at_scale.ipynb: a compile-friendly hook, a graph count, two DDP comm hooks.

The DDP checks run the learner's hook here as rank 0 and a reference hook in a worker as rank 1 (a real gloo group),
against plain autograd. gloo would abort this kernel on a size mismatch, so :func:`_guarded` refuses, here, an
all-reduce that does not match what rank 1 sends.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from course_utils.machinery.exercise_kit import *

_STEPS = 2
_BUCKET_CAP_MB = 0.0005  # ~500 bytes: after DDP rebuilds its buckets (second step) the model needs several


@contextlib.contextmanager
def _quiet_fresh_dynamo() -> Iterator[None]:
    """Empty dynamo caches before and after; dynamo's warnings off stderr."""
    logger = logging.getLogger("torch._dynamo")
    level = logger.level
    logger.setLevel(logging.ERROR)
    torch.compiler.reset()
    try:
        yield
    finally:
        torch.compiler.reset()
        logger.setLevel(level)


def _counting_backend(graphs: list) -> Callable[..., Any]:
    def backend(graph_module: torch.fx.GraphModule, example_inputs: list) -> Callable[..., Any]:
        graphs.append(graph_module)
        return graph_module.forward

    return backend


def _rebound(hook: Callable[..., Any], running: torch.Tensor) -> bool:
    """True when the hook's closure holds another tensor of running's shape: running rebound there
    (``nonlocal running; running = running + ...``), the caller's tensor left as it was."""
    try:
        values = inspect.getclosurevars(inspect.unwrap(hook)).nonlocals.values()
    except (TypeError, ValueError):  # not a plain function, or a closure cell not filled yet
        return False
    return any(isinstance(value, torch.Tensor) and value is not running and value.shape == running.shape
               for value in values)


@exercise("10.1")
def _activity_test(attach: Callable[[nn.Module, torch.Tensor], Any]) -> Verdict:
    torch.manual_seed(31)
    model = Net(lambda m, x: m.second(torch.tanh(m.first(x))), first=nn.Linear(6, 10), second=nn.Linear(10, 4))
    with torch.no_grad():  # three dead units: their outputs are exact zeros, so "> 0" and ">= 0" differ
        model.first.weight[:3] = 0
        model.first.bias[:3] = 0
    draw = generator(5)
    batches = [torch.randn(4, 6, generator=draw) for _index in range(5)]
    with torch.no_grad():
        truth = sum((float((model.first(x) > 0).float().mean()) for x in batches), 0.0)  # by hand, no hook
    running, graphs = torch.zeros(2), list[Any]()
    handle = attach(model.first, running)
    require(is_handle(handle), N_("Return the handle that register_forward_hook gave you, so the caller can remove "
                                  "it."))
    with removing(handle):
        with torch.no_grad():  # once eagerly first: what the hook returns is judged there (check() watches it)
            model(batches[0])
            hook = handle.hooks_dict_ref()[handle.id]
            returned = hook(model.first, (batches[0],), model.first(batches[0]))
        require(returned is None, N_("Your hook returns {type}, not None: it only adds to `running`. A forward hook's "
                                     "return value, when it is not None, replaces the module's output: look at what "
                                     "your hook returns."), type=Text(type(returned).__name__))
        running.zero_()
        with _quiet_fresh_dynamo():
            from torch._dynamo.utils import counters  # private: dynamo's own tally of graph breaks

            counters.clear()
            compiled = torch.compile(model, backend=_counting_backend(graphs))
            for x in batches:
                compiled(x)
            reasons = [reason.strip().splitlines()[0] for reason in counters["graph_break"]]
    require_no_hooks(model, N_("Removing the handle left hooks on the model."))
    require(not (reasons and any(word in reasons[0].lower() for word in ("branch", "jump", "data-dependent",
                                                                         "data dependent"))),
            N_("Your hook caused a graph break ({reason}): a Python if (or while, and, or) on a tensor's value is "
               "data-dependent control flow -- Python needs the value as a number, as with .item() or float() -- so "
               "dynamo cannot keep it in one graph. Keep everything a tensor inside the hook, decisions included."),
            reason=reasons[0] if reasons else "")
    require(not reasons, N_("Your hook caused a graph break ({reason}): keep everything a tensor -- no .item(), "
                            "float(), print or .tolist() inside the hook."), reason=reasons[0] if reasons else "")
    require(len(graphs) <= 1, N_("Dynamo compiled {graphs} graphs for {calls} calls of the same model: it recompiles "
                                 "when Python state the hook changes (a list that grows, a Python number) is part of "
                                 "its guards. Add to the tensor `running` in place instead."), graphs=len(graphs),
            calls=len(batches))
    require(running.any() or not _rebound(hook, running),
            N_("The caller's tensor `running` is still all zeros after {calls} forward calls: your hook assigned a new "
               "tensor to its own name, and the caller never sees it. Change the caller's tensor in place."),
            calls=len(batches))
    require(float(running[1]) == len(batches), N_("running[1] is {value:g} after {calls} forward calls: add 1 per "
                                                  "call."), value=float(running[1]), calls=len(batches))
    require(abs(float(running[0]) - truth) < 1e-5, N_("running[0] is {value:.4f}, but the fractions of the module's "
                                                      "output entries that are > 0 add up to {truth:.4f} over these "
                                                      "calls."), value=float(running[0]), truth=truth)
    return Verdict(True)


def _graphs_compiled() -> torch.Tensor:
    graphs: list = []
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(3, 2))
    x = torch.randn(5, 4)
    with _quiet_fresh_dynamo():
        handles = [net[0].register_forward_hook(lambda module, args, output: output * 10)]
        compiled = torch.compile(net, backend=_counting_backend(graphs))
        with removing(handles):
            compiled(x)
            handles.append(net[0].register_forward_hook(lambda module, args, output: output + 1))
            compiled(x)
            for handle in handles:
                handle.remove()
            compiled(x)
    return torch.tensor(float(len(graphs)))


_predict_graphs = exercise("10.2")(expect_live_value(
    _graphs_compiled, N_("Go through the three calls with C2 and C3 in mind: at each call, is there a graph compiled "
                         "so far whose guards still hold?"), atol=0.0,
    form=N_("Answer with a whole number: how many graphs dynamo compiles in all over the three calls; got {answer}, "
            "not a number.")))


# -- 10.3 and 10.4: DDP communication hooks in a real two-rank group ---------------------------------------------
def _ddp_model() -> nn.Sequential:
    torch.manual_seed(23)
    return nn.Sequential(nn.Linear(12, 20), nn.Tanh(), nn.Linear(20, 16), nn.Tanh(), nn.Linear(16, 5))


_SAMPLES = (6, 2)  # 10.3: rank 0's and rank 1's batch size at every step (10.4: 6 on both)


def _ddp_batch(rank: int, step: int, size: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    draw = generator(77 + 10 * rank + step)
    return torch.randn(size, 12, generator=draw), torch.randint(0, 5, (size,), generator=draw)


def _flat_gradient(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(x), y).backward()
    return torch.cat([p.grad.flatten() for p in model.parameters()])


def _trajectory(sizes: tuple[int, int]) -> list[dict[str, torch.Tensor]]:
    """Per step, by plain autograd: each rank's gradient (``sizes``: batch sizes) and the one over all samples."""
    model, found = _ddp_model(), []
    for step in range(_STEPS):
        batches = [_ddp_batch(rank, step, sizes[rank]) for rank in range(2)]
        flat = {f"rank{rank}": _flat_gradient(model, *batches[rank]) for rank in range(2)}
        flat["all"] = _flat_gradient(model, torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches]))
        found.append(flat)
        step_by = flat["all"] if sizes != (6, 6) else (flat["rank0"] + flat["rank1"]) / 2
        with torch.no_grad():
            vector_to_parameters(parameters_to_vector(model.parameters()) - 0.1 * step_by, model.parameters())
    return found


def _train_ddp(rank: int, hook: Callable[..., Any], state: Any, size: int = 6) -> list[torch.Tensor]:
    """The flat gradients of two SGD steps under DDP with ``hook``."""
    from torch.nn.parallel import DistributedDataParallel

    model = _ddp_model()
    ddp = DistributedDataParallel(model, bucket_cap_mb=_BUCKET_CAP_MB)
    ddp.register_comm_hook(state, hook)
    optimiser, found = torch.optim.SGD(ddp.parameters(), lr=0.1), []
    for step in range(_STEPS):
        optimiser.zero_grad(set_to_none=True)
        x, y = _ddp_batch(rank, step, size)
        F.cross_entropy(ddp(x), y).backward()
        found.append(torch.cat([p.grad.detach().flatten() for p in model.parameters()]))
        optimiser.step()
    return found


def _reference_weighted(state, bucket):
    import torch.distributed as dist

    grads = bucket.buffer()
    sent = torch.cat([grads * state.samples, grads.new_tensor([float(state.samples)])])

    def divide(fut):
        total = fut.value()[0]
        return grads.copy_(total[:-1] / total[-1])

    return dist.all_reduce(sent, group=state.group, async_op=True).get_future().then(divide)


def _partner(rank: int, world_size: int, which: str) -> list[torch.Tensor]:
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook

    if which == "weighted":
        return _train_ddp(rank, _reference_weighted, SimpleNamespace(group=dist.group.WORLD, samples=_SAMPLES[rank]),
                          _SAMPLES[rank])
    return _train_ddp(rank, bf16_compress_hook, dist.group.WORLD)


_SENDS = {
    "weighted": N_("one float32 tensor one value longer than the bucket: the bucket times state.samples, then "
                   "state.samples"),
    "bf16": N_("one bfloat16 copy of the bucket, already divided by the group's size"),
}
_EXPECTED_SEND = {"weighted": lambda n: (n + 1, torch.float32), "bf16": lambda n: (n, torch.bfloat16)}
_STOPPED = "[course check: all-reduce stopped]"
_DDP_ERRORS = (
    ("must return a torch.futures.Future", N_("DDP needs a Future from the hook, not a tensor: return the future of "
                                              "the all-reduce (async_op=True, .get_future()).")),
    ("expected the hook result", N_("The Future must hold one tensor (the bucket's new gradients), but an "
                                    "all-reduce's future holds a list of tensors: look at what your Future's value is "
                                    "(D1's hook shows it).")),
    ("Communication hook", N_("DDP rejected the hook's signature: write it as def hook(state, bucket) without type "
                              "annotations.")),
)


class _StoppedAllReduce(RuntimeError):
    """Raised here instead of an all-reduce that would not match rank 1's."""


def _noting(notes: dict[str, Any], buffer: torch.Tensor) -> Callable[[Any], Any]:
    """A then() callback that notes in ``notes`` what the hook's Future held (see :func:`_guarded`)."""

    def note_what_it_holds(done: Any) -> Any:
        value = done.value()
        if not isinstance(value, torch.Tensor):
            notes["held"] = type(value).__name__  # DDP's error would print all of it (a whole bucket)
        if not (isinstance(value, torch.Tensor) and value.data_ptr() == buffer.data_ptr()
                and value.shape == buffer.shape):
            notes["not_the_buffer"] += 1
        if isinstance(value, torch.Tensor) and value.numel() != buffer.numel():
            notes["sizes"] = (value.numel(), buffer.numel())  # DDP reads the first values and says nothing
        return value

    return note_what_it_holds


@contextlib.contextmanager
def _guarded(hook: Callable[..., Any], which: str, notes: dict[str, Any]) -> Iterator[Callable[..., Any]]:
    """The learner's hook, its all-reduces checked against rank 1's; ``notes`` gets what its Futures held:
    ``not_the_buffer`` (count), ``sizes`` (held, bucket size), ``held`` (a type that is not a tensor)."""
    import torch.distributed as dist

    real_all_reduce, current = dist.all_reduce, dict[str, Any](inside=False)
    notes.setdefault("not_the_buffer", 0)
    sends = Text(_SENDS[which])

    def stop(message: str, **fields: Any) -> None:
        raise _StoppedAllReduce(f"{_STOPPED} {Text(message, sends=sends, **fields)}")

    def checked_all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if current["inside"]:
            values, dtype = _EXPECTED_SEND[which](current["bucket"])
            if current["calls"]:
                stop(N_("Your hook started a second all-reduce for one bucket; rank 1 sends {sends}, once per bucket."))
            if tensor.numel() != values or tensor.dtype != dtype:
                stop(N_("For a bucket of {bucket} values your hook all-reduced {count} values of {got_dtype}; rank 1 "
                        "sends {values} values of {dtype}: {sends}."), bucket=current["bucket"],
                     count=tensor.numel(), got_dtype=tensor.dtype, values=values, dtype=dtype)
            current["calls"] += 1
        return real_all_reduce(tensor, *args, **kwargs)

    @functools.wraps(hook)  # DDP checks the learner's own signature and name
    def wrapped(state, bucket):
        current.update(inside=True, calls=0, bucket=bucket.buffer().numel())
        try:
            result = hook(state, bucket)
        finally:
            current["inside"] = False
        if not current["calls"]:
            stop(N_("Your hook did not call torch.distributed.all_reduce for a bucket; rank 1 sends {sends}."))
        if not callable(getattr(result, "then", None)):
            return result  # not a Future (all_reduce's get_future() gives torch._C.Future): DDP refuses it itself
        return result.then(_noting(notes, bucket.buffer()))

    dist.all_reduce = checked_all_reduce
    try:
        yield wrapped
    finally:
        dist.all_reduce = real_all_reduce


def _run_pair(hook: Callable[..., Any], make_state: Callable[[Any], Any], which: str,
              size: int = 6) -> tuple[dict[str, Any], list, list]:
    """(rank 0's state and notes, its gradients, rank 1's gradients); a DDP error becomes its ✗."""
    import torch.distributed as dist

    from course_utils.distributed import WorkerError, run_workers

    require(not dist.is_initialized(), N_("This kernel is already in a process group: run "
                                          "torch.distributed.destroy_process_group() (or restart the kernel) so the "
                                          "check can start its own."))
    kept: dict[str, Any] = {}
    mismatch = N_("The two ranks' all-reduces did not match: rank 1 runs torch's hook, which sends {sends}, per "
                  "bucket; your hook must send the same.")

    def rank0(rank: int, world_size: int) -> list[torch.Tensor]:
        kept["state"] = make_state(dist.group.WORLD)
        with _guarded(hook, which, kept) as guarded_hook:
            return _train_ddp(rank, guarded_hook, kept["state"], size)

    try:
        mine, theirs = run_workers(_partner, world_size=2, args=(which,), timeout=60, local=rank0)
    except WorkerError:
        fail(mismatch, sends=Text(_SENDS[which]))
    except (RuntimeError, ValueError) as error:
        text = str(error)
        require(_STOPPED not in text, N_("The two ranks' all-reduces did not match (the check stopped yours before "
                                         "gloo saw it). {reason}"),
                reason=text.split(_STOPPED, 1)[-1].strip().splitlines()[0] if _STOPPED in text else "")
        require("held" not in kept, N_("Your hook's Future holds a {kind}, not one tensor: DDP expects the Future to "
                                       "hold one tensor, the bucket's new gradients, and an all-reduce's future holds "
                                       "a list of tensors. Look at what D1's hook returns: the Future that "
                                       ".then(...) gives."), kind=kept.get("held"))
        for needle, advice in _DDP_ERRORS:
            require(needle not in text, advice)
        require("gloo" not in text and "Connection" not in text, mismatch, sends=Text(_SENDS[which]))
        raise
    return kept, mine, theirs


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@exercise("10.3")
def _weighted_test(hook: Callable[..., Any]) -> Verdict:
    noted, mine, theirs = _run_pair(hook, lambda group: SimpleNamespace(group=group, samples=_SAMPLES[0]), "weighted",
                                    _SAMPLES[0])
    n0, n1 = _SAMPLES
    for got, truth in zip(mine, _trajectory(_SAMPLES)):
        if torch.allclose(got, truth["all"], atol=1e-6):
            continue
        summed = n0 * truth["rank0"] + n1 * truth["rank1"]
        name_the_mistake(got, [
            (summed, N_("Rank 0 got the weighted sum of both ranks' gradients ({n0} and {n1} samples), not yet a "
                        "mean: look at what your then() callback does with the all-reduced tensor.")),
            (summed / 2, N_("Rank 0 divided the weighted sum by the number of ranks, which weighs the ranks, not the "
                            "samples: look at what your then() callback divides by.")),
            (summed / n0, N_("Rank 0 divided by its own number of samples, which the other rank does not share: look "
                             "at what your then() callback divides by.")),
            ((truth["rank0"] + n1 * truth["rank1"]) / (1 + n1),
             N_("Rank 0 counted as one sample: multiply the bucket by state.samples, and send state.samples as the "
                "last value.")),
        ], n0=n0, n1=n1)
        fail(N_("After the hook the gradients are not the per-sample mean over both ranks (relative difference "
                "{relative:.2g}). Look at both ends: what each rank's bucket is multiplied by before the all-reduce, "
                "and what your then() callback divides by -- it counts samples, not ranks."),
             relative=_relative(got, truth["all"]))
    require(all(map(torch.equal, mine, theirs)), N_("The two ranks ended with different gradients: every rank must "
                                                    "compute the new bucket from the same all-reduced tensor."))
    require("sizes" not in noted, N_("The gradients are right, but your Future held {held} values for a bucket of "
                                     "{size}: DDP copies the first ones and ignores the rest without a word, yet the "
                                     "Future must hold the bucket's new values only. Look at what your then() callback "
                                     "returns."),
        held=noted.get("sizes", (0, 0))[0], size=noted.get("sizes", (0, 0))[1])
    return Verdict(True)


@exercise("10.4")
def _bf16_test(hook: Callable[..., Any]) -> Verdict:
    noted, mine, theirs = _run_pair(hook, lambda group: group, "bf16")
    far = 1e-2
    for got, truth in zip(mine, _trajectory((6, 6))):
        own, other = truth["rank0"], truth["rank1"]
        mean = (own + other) / 2
        require(got.dtype == torch.float32, N_("The gradients came back as {dtype}: copy the result into the bucket's "
                                               "float32 buffer (decompress) before returning it."), dtype=got.dtype)
        if _relative(got, mean) > far:  # rank 1 ran torch's hook: divide, then sum
            name_the_mistake(got, [
                (own + other / 2, N_("Rank 0 got its whole gradient plus half of rank 1's: all_reduce sums what the "
                                     "ranks send, and rank 1 (torch's hook) sends its bucket divided by the group's "
                                     "size. Look at what your hook sends.")),
                ((own + other / 2) / 2, N_("You divided after the all-reduce, but rank 1 (torch's hook) divides before "
                                           "it, so the ranks sent different things: look at where your hook divides.")),
            ], lambda result, wrong: _relative(result, wrong) < far)
        require(torch.equal(got, got.to(torch.bfloat16).to(torch.float32)),
                N_("Some gradients are not bfloat16 numbers: the all-reduce was not done in bfloat16. Look at the "
                   "dtype of the tensor your hook hands to all_reduce."))
        require(_relative(got, mean) <= far, N_("The gradients are far from the mean of both ranks (relative error "
                                                "{relative:.2g}): average, in bfloat16, then copy back."),
                relative=_relative(got, mean))
    require(all(map(torch.equal, mine, theirs)), N_("The two ranks ended with different gradients: every rank must "
                                                    "decompress the same all-reduced tensor."))
    require(not noted["not_the_buffer"], N_("The gradients are right, but for {count} bucket(s) your Future held a new "
                                            "tensor, not the bucket's own float32 buffer that the exercise asks for "
                                            "(DDP copies a new tensor back; torch's compression hooks fill "
                                            "bucket.buffer() and return it). Look at what your then() callback "
                                            "returns."), count=noted["not_the_buffer"])
    return Verdict(True)


EXERCISES = (_activity_test, _predict_graphs, _weighted_test, _bf16_test)
