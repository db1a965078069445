"""Answers for the checks of notebooks/08_saved_tensor_hooks.ipynb."""

from __future__ import annotations

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.multiprocessing.reductions import StorageWeakRef

from course_utils.memory import SavedTensorLog, storage_key
from tests.exercise_cases import Cases, answer, mutants

USES = {"saved_tensors_hooks": saved_tensors_hooks, "StorageWeakRef": StorageWeakRef, "storage_key": storage_key,
        "SavedTensorLog": SavedTensorLog}
HALF = """
class SaveInHalf(saved_tensors_hooks):
    def __init__(self, model):
        parameters = {storage_key(p) for p in model.parameters()}
        copies = {}

        def pack(t):
            if not t.is_floating_point() or storage_key(t) in parameters:
                return t.detach()
            key = storage_key(t)
            entry = copies.get(key)
            if entry is None or entry[0].expired():
                whole = t.detach().as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)
                entry = copies[key] = (StorageWeakRef(t.untyped_storage()), whole.half())
            return t.dtype, entry[1], t.shape, t.stride(), t.storage_offset()

        def unpack(packed):
            if isinstance(packed, torch.Tensor):
                return packed
            dtype, copy, shape, stride, offset = packed
            return copy.as_strided(shape, stride, offset).to(dtype)

        super().__init__(pack, unpack)
"""
BYTES = """
def saved_bytes_by_layer(model, x):
    running, totals, seen, handles = [], {}, set(), []
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(t):
        address = t.untyped_storage().data_ptr()
        if running and address not in params and address not in seen:
            seen.add(address)
            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()
        return t

    try:
        for name, module in model.named_modules():
            if name and not list(module.children()):
                handles.append(module.register_forward_pre_hook(lambda m, a, name=name: running.append(name)))
                handles.append(module.register_forward_hook(lambda m, a, out: running.pop() and None, always_call=True))
        with saved_tensors_hooks(pack, lambda t: t):
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return totals
"""
COUNT = ("        if running and address not in params and address not in seen:\n            seen.add(address)\n"
         "            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()")

CASES = {
    "08.1": Cases(right=[[1, 2], (1.0, 2.0), torch.tensor([1, 2])],
                  wrong=[([2, 2], "Too many pack calls"), ([1, 1], "unpack count is too low"), ([0, 0], "Too few pack"),
                         ([1, 3], "unpack count is too high"), ("1, 2", "a list of two numbers"),
                         ([2, 4], "not every operation keeps a tensor"),
                         (None, "Answer with a list of two numbers")]),  # not 'is that .grad still empty?'
    "08.2": Cases(
        right=[answer(HALF, **USES),
               answer("""
                   class Record:  # enough to rebuild the view from the shared copy
                       def __init__(self, dtype, copy, size, stride, offset):
                           self.dtype, self.copy, self.size, self.stride, self.offset = dtype, copy, size, stride, offset

                   class SaveInHalf(saved_tensors_hooks):  # copies keyed by StorageWeakRef, the storage taken with set_()
                       def __init__(self, model):
                           parameters = {storage_key(p) for p in model.parameters()}
                           copies = {}

                           def pack(t):
                               if t.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16) or storage_key(t) in parameters:
                                   return t.detach()
                               storage = t.untyped_storage()
                               key = StorageWeakRef(storage)
                               for known, copy in list(copies.items()):
                                   if known.expired():
                                       del copies[known]
                               if key not in copies:
                                   copies[key] = torch.empty(0, dtype=t.dtype).set_(storage).half()
                               return Record(t.dtype, copies[key], t.size(), t.stride(), t.storage_offset())

                           def unpack(packed):
                               if isinstance(packed, torch.Tensor):
                                   return packed
                               return torch.as_strided(packed.copy, packed.size, packed.stride, packed.offset).to(packed.dtype)

                           super().__init__(pack, unpack)
                   """, **USES)],
        wrong=[*mutants(
                   HALF,
                   ("entry = copies.get(key)", "entry = None", "stored it twice"),  # a new copy at every pack call
                   ("key = storage_key(t)", "key = (storage_key(t), t.storage_offset(), tuple(t.shape), t.stride())",
                    "stored it twice"),  # one copy per view
                   (" or entry[0].expired()", "", "same memory address"),  # trusts a reused address
                   (("StorageWeakRef(t.untyped_storage()), whole", "entry[0].expired()"), ("t, whole", "entry[0] is None"),
                    "keeps the float32 tensors"),  # knows the storage is alive because it keeps it alive
                   ("not t.is_floating_point() or ", "", "integer tensors"),
                   (" or storage_key(t) in parameters", "", "parameters"),
                   ("as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)",
                    "as_strided((t.numel(),), (1,), 0)", "how much of the storage"),  # the first view's elements only
                   (("whole.half()", "copy.as_strided(shape, stride, offset)"), ("t.detach().half()", "copy.reshape(shape)"),
                    "views of one storage"),  # the first view's copy, reshaped for the later views
                   **USES),
               (answer("""
                    class SaveInHalf(saved_tensors_hooks):  # the class of a simpler exercise: no model argument
                        def __init__(self):
                            super().__init__(lambda t: (t.dtype, t.detach().half() if t.is_floating_point() else t.detach()),
                                             lambda p: p[1].to(p[0]))
                    """, **USES), "takes the model")],
    ),
    "08.3": Cases(
        right=[answer(BYTES, **USES),
               answer("""
                   def saved_bytes_by_layer(model, x):  # the course's helper, leaf modules only
                       with SavedTensorLog(model) as log:
                           model(x)
                       names = dict(model.named_modules())
                       return {name: nbytes for name, nbytes in log.by_layer().items() if name in names}
                   """, **USES)],
        wrong=mutants(
            BYTES,
            ("if running and address not in params and address not in seen:", "if running:", "leave them out"),
            (" and address not in seen", "", "counted twice"),
            ("            handle.remove()", "            pass", "left hooks"),
            (("    try:\n", "    finally:\n"), ("    if True:\n", "    if True:\n"), "When the forward raises"),
            ("running.pop() and None", "running.pop()", "returned a str, not a tensor"),
            ("                handles.append(module.register_forward_hook(lambda m, a, out: running.pop() and None, "
             "always_call=True))\n", "", "where each leaf's call ends"),
            (("seen, handles = [], {}, set(), []", COUNT),  # a storage saved again moves to the later layer
             ("seen, handles = [], {}, {}, []",
              "        if running and address not in params:\n            if address in seen:\n"
              "                totals[seen[address]] -= t.numel() * t.element_size()\n"
              "            seen[address] = running[-1]\n"
              "            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()"),
             "first layer that saved it"),
            (("address not in seen:\n            seen.add(address)",),  # one entry per view, not per storage
             ("(address, t.storage_offset(), tuple(t.shape)) not in seen:\n"
              "            seen.add((address, t.storage_offset(), tuple(t.shape)))",), "counted twice"),
            **USES),
    ),
}
