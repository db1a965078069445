"""course_utils.comm_hooks: the byte counters count what they claim, put torch back, and the worker experiment's
numbers agree with hand computations (DDP run in a one-process gloo group here; the two-process run is the
notebook's and tests/test_distributed.py's)."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel

from course_utils.comm_hooks import (
    ByteCount,
    compare_comm_hooks,
    counting_all_reduce,
    counting_hook,
    make_model,
    powersgd_payload,
    rank_batch,
)
from course_utils.distributed import single_process_group
from course_utils.hooks import count_hooks


def test_make_model_and_batches_are_deterministic_and_differ_by_rank() -> None:
    first, second = make_model(), make_model()
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), second.parameters()))
    assert sum(p.numel() for p in first.parameters()) == 32 * 64 + 64 + 64 * 64 + 64 + 64 * 8 + 8
    assert torch.equal(rank_batch(0, 1)[0], rank_batch(0, 1)[0])
    assert not torch.equal(rank_batch(0, 1)[0], rank_batch(1, 1)[0])


def test_powersgd_payload_by_hand() -> None:
    # rank 1: 64x32 -> 96, 64x64 -> 128, 8x64 -> 72 (all compressible at rate 2); biases 64 + 64 + 8 whole
    assert powersgd_payload(make_model()) == 96 + 128 + 72 + 64 + 64 + 8
    # a 4x4 matrix at rank 1 sends 8 < 16 / 2? no: 8 * 2 = 16 is not < 16, so it is sent whole
    assert powersgd_payload(nn.Linear(4, 4)) == 16 + 4
    assert powersgd_payload(nn.Linear(4, 4), rank=1, min_compression_rate=1.5) == 8 + 4


def test_counting_hook_counts_every_bucket_and_keeps_the_gradients() -> None:
    torch.manual_seed(3)
    model = nn.Sequential(nn.Linear(10, 30), nn.ReLU(), nn.Linear(30, 4))
    reference = nn.Sequential(nn.Linear(10, 30), nn.ReLU(), nn.Linear(30, 4))
    reference.load_state_dict(model.state_dict())
    x, y = torch.randn(5, 10), torch.randint(0, 4, (5,))
    F.cross_entropy(reference(x), y).backward()
    count = ByteCount()
    with single_process_group() as group:
        ddp = DistributedDataParallel(model, bucket_cap_mb=0.0005)  # ~500 bytes: two buckets after the first step
        ddp.register_comm_hook(group, counting_hook(default_hooks.allreduce_hook, count))
        for _ in range(2):
            model.zero_grad(set_to_none=True)
            with counting_all_reduce(count):
                F.cross_entropy(ddp(x), y).backward()
        del ddp
    n_bytes = sum(p.numel() for p in model.parameters()) * 4
    assert count.bytes_in == count.bytes_sent == 2 * n_bytes
    assert count.hook_calls == count.all_reduce_calls == 3  # one bucket in step 1 (DDP bucketizes later), two in step 2
    assert all(torch.allclose(p.grad, q.grad) for p, q in zip(model.parameters(), reference.parameters()))
    assert count_hooks(model) == 0
    original = dist.all_reduce
    with pytest.raises(KeyError):  # counting_all_reduce puts torch back, also on error
        with counting_all_reduce(count):
            assert dist.all_reduce is not original
            raise KeyError("inside")
    assert dist.all_reduce is original


def test_fp16_payload_is_half_and_compare_comm_hooks_reports_it_in_one_process() -> None:
    with single_process_group():
        found = compare_comm_hooks(0, 1, ("allreduce", "fp16"), steps=2)
    n_params = sum(p.numel() for p in make_model().parameters())
    for step in range(2):
        assert found["allreduce"]["counts"][step].bytes_sent == 4 * n_params
        assert found["fp16"]["counts"][step].bytes_sent == 2 * n_params
        assert found["fp16"]["counts"][step].bytes_in == 4 * n_params
        # one rank: the average is the rank's own gradient (fp16 rounds it)
        assert torch.equal(found["allreduce"]["ddp"][step], found["allreduce"]["local"][step])
        assert torch.allclose(found["fp16"]["ddp"][step], found["fp16"]["local"][step], rtol=1e-2, atol=1e-4)
    with pytest.raises(ValueError, match="Unknown hook"):
        with single_process_group():
            compare_comm_hooks(0, 1, ("int8",), steps=1)
