"""Answers for the checks of notebooks/10_hooks_at_scale.ipynb. The 10.3 and 10.4 cases each start a worker process
(a real two-rank gloo group), a few seconds apiece."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from tests.exercise_cases import Cases


# -- 10.1 ----------------------------------------------------------------------------------------------------------
def activity_stacked(module, running):  # noqa: ANN001, ANN201 -- one in-place add of a stacked pair
    def hook(mod, args, output):  # noqa: ANN001, ANN202
        running.add_(torch.stack([output.gt(0).to(running.dtype).mean(), torch.ones((), dtype=running.dtype)]))

    return module.register_forward_hook(hook)


def activity_as_float(module, running):  # noqa: ANN001, ANN201 -- float() takes a Python number: a graph break
    def hook(mod, args, output):  # noqa: ANN001, ANN202
        running[0] += float((output > 0).float().mean())
        running[1] += 1

    return module.register_forward_hook(hook)


def activity_python_counter(module, running):  # noqa: ANN001, ANN201 -- a Python int changes every call: recompiles
    seen = {"calls": 0}

    def hook(mod, args, output):  # noqa: ANN001, ANN202
        seen["calls"] += 1
        running[0] += (output > 0).float().mean()
        running[1] = seen["calls"]

    return module.register_forward_hook(hook)


def activity_of_input(module, running):  # noqa: ANN001, ANN201 -- the input, not the output
    def hook(mod, args, output):  # noqa: ANN001, ANN202
        running[0] += (args[0] > 0).float().mean()
        running[1] += 1

    return module.register_forward_hook(hook)


def activity_at_least_zero(module, running):  # noqa: ANN001, ANN201 -- ">= 0" counts a ReLU's zeros as active
    def hook(mod, args, output):  # noqa: ANN001, ANN202
        running[0] += (output >= 0).float().mean()
        running[1] += 1

    return module.register_forward_hook(hook)


def activity_no_handle(module, running):  # noqa: ANN001, ANN201
    module.register_forward_hook(lambda mod, args, output: running.add_(torch.stack(
        [(output > 0).float().mean(), torch.tensor(1.0)])) and None)


# -- 10.3 ----------------------------------------------------------------------------------------------------------
def weighted_new_tensor(state, bucket):  # noqa: ANN001, ANN201 -- fills a new tensor, returns a new tensor
    buffer = bucket.buffer()
    sent = torch.empty(buffer.numel() + 1, dtype=buffer.dtype)
    sent[:-1] = buffer * state.samples
    sent[-1] = state.samples
    work = dist.all_reduce(sent, group=state.group, async_op=True)
    return work.get_future().then(lambda fut: fut.value()[0][:-1] / fut.value()[0][-1:])


def _weighted(finish, *, scale=True):  # noqa: ANN001, ANN202 -- the right message, then a wrong last step
    def hook(state, bucket):  # noqa: ANN001, ANN202
        buffer = bucket.buffer()
        sent = torch.cat([buffer * (state.samples if scale else 1), torch.tensor([float(state.samples if scale else 1)])])

        def back(fut):  # noqa: ANN001, ANN202
            total = fut.value()[0]
            return buffer.copy_(finish(total, state))

        return dist.all_reduce(sent, group=state.group, async_op=True).get_future().then(back)

    return hook


def weighted_as_ddp(state, bucket):  # noqa: ANN001, ANN201 -- DDP's own average: one value short of rank 1's tensor
    return default_hooks.allreduce_hook(state.group, bucket)


def weighted_two_all_reduces(state, bucket):  # noqa: ANN001, ANN201 -- the count in a separate all-reduce
    buffer = bucket.buffer().mul_(state.samples)
    count = torch.tensor([float(state.samples)])
    dist.all_reduce(count, group=state.group)
    return dist.all_reduce(buffer, group=state.group, async_op=True).get_future().then(
        lambda fut: fut.value()[0].div_(count))


def weighted_count_kept(state, bucket):  # noqa: ANN001, ANN201 -- the Future also holds the count (now 1.0)
    sent = torch.cat([bucket.buffer() * state.samples, torch.tensor([float(state.samples)])])
    return dist.all_reduce(sent, group=state.group, async_op=True).get_future().then(
        lambda fut: fut.value()[0] / fut.value()[0][-1])


def weighted_returns_tensor(state, bucket):  # noqa: ANN001, ANN201 -- waits and returns the tensor itself
    buffer = bucket.buffer()
    sent = torch.cat([buffer * state.samples, torch.tensor([float(state.samples)])])
    dist.all_reduce(sent, group=state.group)
    return buffer.copy_(sent[:-1] / sent[-1])


def weighted_future_of_list(state, bucket):  # noqa: ANN001, ANN201 -- all_reduce's own Future: holds a list
    n = float(state.samples)
    send = torch.cat([bucket.buffer() * n, torch.tensor([n])])
    return dist.all_reduce(send, group=state.group, async_op=True).get_future()


def activity_branches(module, running):  # noqa: ANN001, ANN201 -- a Python if on a tensor: data-dependent branch
    def hook(mod, args, output):  # noqa: ANN001, ANN202
        frac = (output > 0).float().mean()
        if frac > 0.5:
            running[0] += frac
        else:
            running[0] += frac
        running[1] += 1

    return module.register_forward_hook(hook)


# -- 10.4 ----------------------------------------------------------------------------------------------------------
def bf16_through_torch(process_group, bucket):  # noqa: ANN001, ANN201 -- torch's own hook, under another name
    return default_hooks.bf16_compress_hook(process_group, bucket)


def bf16_copy_in_lambda(process_group, bucket):  # noqa: ANN001, ANN201 -- copy_ returns the buffer it filled
    buffer = bucket.buffer()
    compressed = buffer.bfloat16() / process_group.size()
    return dist.all_reduce(compressed, group=process_group, async_op=True).get_future().then(
        lambda fut: buffer.copy_(fut.value()[0]))


def bf16_divide_after(process_group, bucket):  # noqa: ANN001, ANN201 -- divides the bfloat16 sum in the callback
    buffer = bucket.buffer()
    compressed = buffer.bfloat16()

    def back(fut):  # noqa: ANN001, ANN202
        return buffer.copy_(fut.value()[0].div_(process_group.size()))

    return dist.all_reduce(compressed, group=process_group, async_op=True).get_future().then(back)


def bf16_not_compressed(process_group, bucket):  # noqa: ANN001, ANN201 -- float32 all the way: no compression
    return default_hooks.allreduce_hook(process_group, bucket)


def bf16_no_mean(process_group, bucket):  # noqa: ANN001, ANN201
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16)

    def back(fut):  # noqa: ANN001, ANN202
        buffer.copy_(fut.value()[0])
        return buffer

    return dist.all_reduce(compressed, group=process_group, async_op=True).get_future().then(back)


def bf16_fresh_tensor(process_group, bucket):  # noqa: ANN001, ANN201 -- right values in a new tensor, not the buffer
    compressed = bucket.buffer().to(torch.bfloat16).div_(process_group.size())
    return dist.all_reduce(compressed, group=process_group, async_op=True).get_future().then(
        lambda fut: fut.value()[0].to(torch.float32))



def activity_returning_running(module, running):  # noqa: ANN001, ANN201 -- add_ returns running: the new output
    return module.register_forward_hook(
        lambda m, args, output: running.add_(torch.stack([(output > 0).float().mean(), torch.ones(())])))


CASES = {
    "10.1": Cases(
        right=[activity_stacked],
        wrong=[
            (activity_as_float, "graph break"),
            (activity_python_counter, "recompiles"),
            (activity_of_input, "add up to"),
            (activity_at_least_zero, "add up to"),
            (activity_no_handle, "Return the handle"),
            (activity_returning_running, "in place of the layer's output"),
            (activity_branches, "data-dependent control flow"),
        ],
    ),
    "10.2": Cases(
        right=[3, torch.tensor(3.0)],
        wrong=[(1, "graph compiled so far"), (2, "graph compiled so far")],
    ),
    "10.3": Cases(
        right=[weighted_new_tensor],
        wrong=[
            (_weighted(lambda total, state: total[:-1]), "weighted sum"),
            (_weighted(lambda total, state: total[:-1] / state.group.size()), "number of ranks"),
            (_weighted(lambda total, state: total[:-1] / state.samples), "its own number of samples"),
            (_weighted(lambda total, state: total[:-1] / total[-1], scale=False), "counted as one sample"),
            (weighted_as_ddp, "rank 1 sends"),
            (weighted_two_all_reduces, "did not match"),
            (weighted_returns_tensor, "not a tensor"),
            (weighted_count_kept, "values for a bucket of"),
            (weighted_future_of_list, "Future holds a list, not one tensor"),
        ],
    ),
    "10.4": Cases(
        right=[bf16_through_torch, bf16_copy_in_lambda],
        wrong=[
            (bf16_not_compressed, "did not match"),
            (bf16_no_mean, "all_reduce sums"),
            (bf16_divide_after, "divided after the all-reduce"),
            (bf16_fresh_tensor, "bucket's own float32 buffer"),
        ],
    ),
}
