"""DDP communication hooks, measured: what each hook sends, whether the ranks agree, and how far from the exact mean.

Worker processes cannot see a notebook's functions, so the experiment lives here: :func:`compare_comm_hooks` trains
one small model under DDP with each hook (all-reduce, ``fp16_compress_hook``, PowerSGD) and returns, per step, DDP's
gradients, the rank's own local ones and two byte counts: **bytes in** (:func:`counting_hook`: the buckets DDP hands
the hook) and **bytes sent** (:func:`counting_all_reduce`: every tensor handed to all-reduce, PowerSGD's callbacks'
too). That is the payload per rank, not the wire: gloo's ring moves about 2 (N - 1) / N times it, plus headers.

Usage::

    from course_utils.distributed import run_workers
    from course_utils.comm_hooks import compare_comm_hooks
    rank0, rank1 = run_workers(compare_comm_hooks, world_size=2, args=(("allreduce", "fp16", "powersgd"), 4))
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["HOOKS", "ByteCount", "counting_hook", "compare_comm_hooks", "counting_all_reduce", "make_model",
           "rank_batch", "powersgd_payload"]

HOOKS = ("allreduce", "fp16", "powersgd")
POWERSGD_RANK = 1
POWERSGD_START = 2  # the first steps use plain all-reduce (error feedback needs >= 2)


def make_model() -> nn.Sequential:
    """The small MLP every rank trains (32 -> 64 -> 64 -> 8); the same initial weights on every call."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))


def rank_batch(rank: int, step: int, batch: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank ``rank``'s data for ``step``: every rank sees different samples (as in data-parallel training)."""
    generator = torch.Generator().manual_seed(1000 * rank + step)
    return torch.randn(batch, 32, generator=generator), torch.randint(0, 8, (batch,), generator=generator)


def powersgd_payload(model: nn.Module, rank: int = POWERSGD_RANK, min_compression_rate: float = 2.0) -> int:
    """Elements PowerSGD all-reduces per step for ``model``, by hand: ``(n + m) * rank`` for each n x m matrix it
    compresses (those where that is ``min_compression_rate`` times smaller than ``n * m``), everything else whole."""
    total = 0
    for param in model.parameters():
        n, m = param.shape[0], param.numel() // param.shape[0]
        r = min(n, m, rank)
        compressed = (n + m) * r
        total += compressed if param.dim() > 1 and compressed * min_compression_rate < n * m else param.numel()
    return total


@dataclass
class ByteCount:
    """Bytes counted during one step: what DDP gave the hook, what the hook handed to all-reduce."""

    bytes_in: int = 0
    bytes_sent: int = 0
    all_reduce_calls: int = 0
    hook_calls: int = 0


@contextlib.contextmanager
def counting_all_reduce(count: ByteCount) -> Iterator[ByteCount]:
    """Wrap ``torch.distributed.all_reduce`` so that every call adds its tensor's size to ``count.bytes_sent``;
    the original function is put back when the block ends, also on error. Meant for worker processes.

    Usage: ``with counting_all_reduce(count): loss.backward()``
    """
    import torch.distributed as dist

    original = dist.all_reduce

    def all_reduce(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        count.bytes_sent += tensor.numel() * tensor.element_size()
        count.all_reduce_calls += 1
        return original(tensor, *args, **kwargs)

    dist.all_reduce = all_reduce
    try:
        yield count
    finally:
        dist.all_reduce = original


def counting_hook(inner: Callable[..., torch.futures.Future[torch.Tensor]],
                  count: ByteCount) -> Callable[..., torch.futures.Future[torch.Tensor]]:
    """A comm hook that wraps another one: adds the bytes of every bucket DDP hands it to ``count.bytes_in``,
    then lets ``inner`` do the communication and returns its future.

    DDP inspects a hook's signature: its second parameter must be called ``bucket`` and, if annotated, be a
    ``dist.GradBucket`` -- so the wrapper is a plain function without annotations.

    Usage: ``ddp.register_comm_hook(group, counting_hook(fp16_compress_hook, count))``
    """

    def hook(state, bucket):
        buffer = bucket.buffer()
        count.bytes_in += buffer.numel() * buffer.element_size()
        count.hook_calls += 1
        return inner(state, bucket)

    hook.__name__ = f"counting_{getattr(inner, '__name__', 'hook')}"
    return hook


def _hook_and_state(name: str, group: Any) -> tuple[Callable[..., Any], Any]:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

    if name == "allreduce":
        return default_hooks.allreduce_hook, group
    if name == "fp16":
        return default_hooks.fp16_compress_hook, group
    if name == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=POWERSGD_RANK,
                                            start_powerSGD_iter=POWERSGD_START, random_seed=0)
        return powerSGD_hook.powerSGD_hook, state
    raise ValueError(f"Unknown hook {name!r}; choose from {HOOKS}.")


def _flat_grads(model: nn.Module) -> torch.Tensor:
    return torch.cat([param.grad.detach().flatten() for param in model.parameters() if param.grad is not None])


def compare_comm_hooks(rank: int, world_size: int, hooks: Sequence[str] = HOOKS, steps: int = 4) -> dict[str, Any]:
    """Train :func:`make_model` for ``steps`` SGD steps under DDP with each hook; runs in every rank.

    Returns ``{hook: {"ddp": [flat grads per step], "local": [...], "counts": [ByteCount per step],
    "powersgd_stats": (rate, before, after) or None}}``.

    Usage: ``run_workers(compare_comm_hooks, world_size=2, args=(("fp16",), 3))``
    """
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    group = dist.group.WORLD
    found: dict[str, Any] = {}
    for name in hooks:
        hook, state = _hook_and_state(name, group)
        model = make_model()
        plain = make_model()  # the same weights, never communicates: this rank's own gradients
        ddp = DistributedDataParallel(model)
        count = ByteCount()
        ddp.register_comm_hook(state, counting_hook(hook, count))
        optimiser = torch.optim.SGD(ddp.parameters(), lr=0.1)
        record: dict[str, Any] = {"ddp": [], "local": [], "counts": [], "powersgd_stats": None}
        for step in range(steps):
            x, y = rank_batch(rank, step)
            plain.load_state_dict(model.state_dict())
            plain.zero_grad(set_to_none=True)
            F.cross_entropy(plain(x), y).backward()
            before = ByteCount(**vars(count))
            optimiser.zero_grad(set_to_none=True)
            with counting_all_reduce(count):
                F.cross_entropy(ddp(x), y).backward()
            record["ddp"].append(_flat_grads(model))
            record["local"].append(_flat_grads(plain))
            record["counts"].append(ByteCount(*(now - then for now, then in zip(vars(count).values(),
                                                                               vars(before).values()))))
            optimiser.step()
        if name == "powersgd":
            record["powersgd_stats"] = tuple(float(v) for v in state.compression_stats())
        found[name] = record
    return found
