"""Answers for the checks of notebooks/10_hooks_at_scale.ipynb. The 10.3 and 10.4 cases each start a worker process
(a real two-rank gloo group), a few seconds apiece."""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

from tests.exercise_cases import Cases, answer, mutants

USES = {"dist": dist, "default_hooks": default_hooks}
ACTIVITY = """
def watch_activity(module, running):
    def hook(mod, args, output):
        running[0] += (output > 0).float().mean()
        running[1] += 1

    return module.register_forward_hook(hook)
"""
WEIGHTED = """
def weighted_mean_hook(state, bucket):
    buffer = bucket.buffer()
    sent = torch.cat([buffer * state.samples, torch.tensor([float(state.samples)])])

    def back(fut):
        total = fut.value()[0]
        return buffer.copy_(total[:-1] / total[-1])

    return dist.all_reduce(sent, group=state.group, async_op=True).get_future().then(back)
"""
BF16 = """
def bf16_hook(process_group, bucket):
    buffer = bucket.buffer()
    compressed = buffer.to(torch.bfloat16).div_(process_group.size())

    def back(fut):
        return buffer.copy_(fut.value()[0])

    return dist.all_reduce(compressed, group=process_group, async_op=True).get_future().then(back)
"""

CASES = {
    "10.1": Cases(
        right=[answer("""
                   def watch_activity(module, running):  # one in-place add of a stacked pair
                       def hook(mod, args, output):
                           running.add_(torch.stack([output.gt(0).to(running.dtype).mean(), torch.ones((), dtype=running.dtype)]))

                       return module.register_forward_hook(hook)
                   """)],
        wrong=mutants(
            ACTIVITY,
            ("running[0] += (output > 0).float().mean()", "running[0] += float((output > 0).float().mean())",
             "graph break"),  # float() takes a Python number
            (("    def hook", "        running[1] += 1"),  # a Python int changes every call: recompiles
             ("    seen = {'calls': 0}\n\n    def hook", "        seen['calls'] += 1\n        running[1] = seen['calls']"),
             "recompiles"),
            ("(output > 0)", "(args[0] > 0)", "add up to"),  # the input, not the output
            ("(output > 0)", "(output >= 0)", "add up to"),  # ">= 0" counts a ReLU's zeros as active
            ("    return module", "    module", "Return the handle"),
            ("        running[0] += (output > 0).float().mean()\n        running[1] += 1",
             "        nonlocal running\n        running = running + torch.stack([(output > 0).float().mean(), "
             "torch.ones(())])", "Change the caller's tensor in place"),  # a new tensor: the caller's stays zeros
            ("        running[1] += 1", "        running[1] += 1\n        return output",
             "not None"),  # the statement: the hook returns None
            ("        running[0] += (output > 0).float().mean()\n        running[1] += 1",
             "        return running.add_(torch.stack([(output > 0).float().mean(), torch.ones(())]))",
             "in place of the layer's output"),  # add_ returns running: the new output
            ("        running[0] += (output > 0).float().mean()",
             "        frac = (output > 0).float().mean()\n        if frac > 0.5:\n            running[0] += frac\n"
             "        else:\n            running[0] += frac", "data-dependent control flow"),  # a Python if on a tensor
        ),
    ),
    "10.2": Cases(right=[3, torch.tensor(3.0)], wrong=[(1, "graph compiled so far"), (2, "graph compiled so far"),
                                                       ("3", "Answer with a whole number"),  # a string, not a type error
                                                       (None, "Answer with a whole number")]),
    "10.3": Cases(
        right=[answer("""
                   def weighted_mean_hook(state, bucket):  # fills a new tensor, returns a new tensor
                       buffer = bucket.buffer()
                       sent = torch.empty(buffer.numel() + 1, dtype=buffer.dtype)
                       sent[:-1] = buffer * state.samples
                       sent[-1] = state.samples
                       work = dist.all_reduce(sent, group=state.group, async_op=True)
                       return work.get_future().then(lambda fut: fut.value()[0][:-1] / fut.value()[0][-1:])
                   """, **USES)],
        wrong=[*mutants(
                   WEIGHTED,
                   ("total[:-1] / total[-1]", "total[:-1]", "weighted sum"),
                   ("total[:-1] / total[-1]", "total[:-1] / state.group.size()", "number of ranks"),
                   ("total[:-1] / total[-1]", "total[:-1] / state.samples", "its own number of samples"),
                   (("buffer * state.samples", "total[:-1] / total[-1]"), ("buffer", "total[:-1] / state.group.size()"),
                    "samples, not ranks"),  # DDP's average in the weighted tensor: a rank weighs as much as another
                   ("buffer * state.samples, torch.tensor([float(state.samples)])", "buffer, torch.tensor([1.0])",
                    "counted as one sample"),
                   ("    buffer = bucket.buffer()\n", "    return default_hooks.allreduce_hook(state.group, bucket)\n",
                    "rank 1 sends"),  # DDP's own average: one value short of rank 1's tensor
                   ("return buffer.copy_(total[:-1] / total[-1])", "return total / total[-1]",
                    "values for a bucket of"),  # the Future also holds the count (now 1.0)
                   (".get_future().then(back)", ".get_future()", "Future holds a list, not one tensor"),
                   ("    return dist.all_reduce(sent, group=state.group, async_op=True).get_future().then(back)",
                    "    dist.all_reduce(sent, group=state.group)\n    return buffer.copy_(sent[:-1] / sent[-1])",
                    "not a tensor"),  # waits and returns the tensor itself
                   **USES),
               (answer("""
                    def weighted_mean_hook(state, bucket):  # the count in a separate all-reduce
                        buffer = bucket.buffer().mul_(state.samples)
                        count = torch.tensor([float(state.samples)])
                        dist.all_reduce(count, group=state.group)
                        return dist.all_reduce(buffer, group=state.group, async_op=True).get_future().then(
                            lambda fut: fut.value()[0].div_(count))
                    """, **USES), "did not match")],
        endless=[answer("def weighted_mean_hook(state, bucket):\n    while True:\n        pass\n")],  # on rank 0
    ),
    "10.4": Cases(
        right=[lambda process_group, bucket: default_hooks.bf16_compress_hook(process_group, bucket),  # torch's own
               answer(BF16, **USES)],
        wrong=mutants(
            BF16,
            ("    buffer = bucket.buffer()\n", "    return default_hooks.allreduce_hook(process_group, bucket)\n",
             "did not match"),  # float32 all the way: no compression
            (".div_(process_group.size())", "", "all_reduce sums"),
            (("buffer.to(torch.bfloat16).div_(process_group.size())", "fut.value()[0])"),
             ("buffer.to(torch.bfloat16)", "fut.value()[0].div_(process_group.size()))"), "divided after the all-reduce"),
            ("buffer.copy_(fut.value()[0])", "fut.value()[0].to(torch.float32)", "bucket's own float32 buffer"),
            **USES),
    ),
}
