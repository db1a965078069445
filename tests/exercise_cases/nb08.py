"""Answers for the checks of notebooks/08_saved_tensor_hooks.ipynb."""

from __future__ import annotations

import torch
from torch.autograd.graph import saved_tensors_hooks
from torch.multiprocessing.reductions import StorageWeakRef

from course_utils.memory import SavedTensorLog, storage_key
from tests.exercise_cases import Cases


class _Record:
    """What HalfWithRecords packs for a float tensor: enough to rebuild the view from the shared copy."""

    def __init__(self, dtype, copy, size, stride, offset):  # noqa: ANN001, ANN204
        self.dtype, self.copy, self.size, self.stride, self.offset = dtype, copy, size, stride, offset


class HalfWithRecords(saved_tensors_hooks):
    """One float16 copy per storage, keyed by StorageWeakRef, the whole storage taken with set_(), a small record
    object packed, and the parameters found with storage_key -- written differently from the notebook."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        parameters = {storage_key(p) for p in model.parameters()}
        copies = {}

        def pack(t):  # noqa: ANN001, ANN202
            if t.dtype not in (torch.float32, torch.float64, torch.float16, torch.bfloat16) or storage_key(t) in parameters:
                return t.detach()
            storage = t.untyped_storage()
            key = StorageWeakRef(storage)
            for known, copy in list(copies.items()):
                if known.expired():
                    del copies[known]
            if key not in copies:
                whole = torch.empty(0, dtype=t.dtype).set_(storage)
                copies[key] = whole.half()
            return _Record(t.dtype, copies[key], t.size(), t.stride(), t.storage_offset())

        def unpack(packed):  # noqa: ANN001, ANN202
            if isinstance(packed, torch.Tensor):
                return packed
            return torch.as_strided(packed.copy, packed.size, packed.stride, packed.offset).to(packed.dtype)

        super().__init__(pack, unpack)


def _shared_pack(model, *, check_alive=True, key=lambda t: storage_key(t), cast_ints=False,  # noqa: ANN001, ANN202
                 keep_parameters=True, keep_original=False):
    """A per-storage float16 pair with one thing switched off or wrong (for the wrong answers below)."""
    parameters = {storage_key(p) for p in model.parameters()}
    copies = {}

    def pack(t):  # noqa: ANN001, ANN202
        if (not t.is_floating_point() and not cast_ints) or (keep_parameters and storage_key(t) in parameters):
            return t.detach()
        entry = copies.get(key(t))
        if entry is None or (check_alive and entry[0]() is None):
            whole = t.detach().as_strided((t.untyped_storage().nbytes() // t.element_size(),), (1,), 0)
            original = StorageWeakRef(t.untyped_storage())
            alive = (lambda kept=t: kept) if keep_original else (lambda ref=original: None if ref.expired() else True)
            entry = copies[key(t)] = (alive, whole.half())
        return t.dtype, entry[1], t.shape, t.stride(), t.storage_offset()

    def unpack(packed):  # noqa: ANN001, ANN202
        if isinstance(packed, torch.Tensor):
            return packed
        dtype, copy, shape, stride, offset = packed
        return copy.as_strided(shape, stride, offset).to(dtype)

    return pack, unpack


class HalfPerCall(saved_tensors_hooks):
    """A new float16 copy at every pack call: the memory saved twice is copied twice (S4's pack)."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        parameters = {storage_key(p) for p in model.parameters()}

        def pack(t):  # noqa: ANN001, ANN202
            if not t.is_floating_point() or storage_key(t) in parameters:
                return t.dtype, t.detach()
            return t.dtype, t.detach().half()

        super().__init__(pack, lambda packed: packed[1].to(packed[0]))


class HalfPerView(saved_tensors_hooks):
    """One copy per view (address, offset, shape, stride): the ReLU output and its flattened view are two copies."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        super().__init__(*_shared_pack(
            model, key=lambda t: (storage_key(t), t.storage_offset(), tuple(t.shape), t.stride())))


class HalfTrustsAddresses(saved_tensors_hooks):
    """Per storage, but a cached copy is used even when the memory now belongs to another tensor."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        super().__init__(*_shared_pack(model, check_alive=False))


class HalfKeepsOriginals(saved_tensors_hooks):
    """Knows the storage is alive because it keeps it alive: the float32 tensors stay in memory."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        super().__init__(*_shared_pack(model, keep_original=True))


class HalfEverything(saved_tensors_hooks):
    """Casts the integer indices too: float16 cannot hold indices above 2048."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        super().__init__(*_shared_pack(model, cast_ints=True))


class HalfCopiesParameters(saved_tensors_hooks):
    """Copies the parameters' views too: memory added, not saved."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        super().__init__(*_shared_pack(model, keep_parameters=False))


class HalfWithoutModel(saved_tensors_hooks):
    """The class of a simpler exercise: no model argument."""

    def __init__(self):  # noqa: ANN204
        super().__init__(lambda t: (t.dtype, t.detach().half() if t.is_floating_point() else t.detach()),
                         lambda p: p[1].to(p[0]))


class HalfFirstViewReshaped(saved_tensors_hooks):
    """One copy per storage, but of the first view packed, reshaped for the later views: right only for views that
    are contiguous at offset 0."""

    def __init__(self, model):  # noqa: ANN001, ANN204
        parameters = {storage_key(p) for p in model.parameters()}
        copies = {}

        def pack(t):  # noqa: ANN001, ANN202
            if not t.is_floating_point() or storage_key(t) in parameters:
                return t.detach()
            known = copies.get(storage_key(t))
            if known is None or known[0].expired():
                known = copies[storage_key(t)] = (StorageWeakRef(t.untyped_storage()), t.detach().half())
            return t.dtype, known[1], t.shape

        def unpack(packed):  # noqa: ANN001, ANN202
            if isinstance(packed, torch.Tensor):
                return packed
            return packed[1].to(packed[0]).reshape(packed[2])

        super().__init__(pack, unpack)


def bytes_with_log(model, x):  # noqa: ANN001, ANN201 -- the course's helper, leaf modules only
    with SavedTensorLog(model) as log:
        model(x)
    names = dict(model.named_modules())
    return {name: nbytes for name, nbytes in log.by_layer().items() if name in names}


def bytes_every_call(model, x):  # noqa: ANN001, ANN201 -- counts duplicates and parameter views
    totals, running, handles = {}, [], []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            handles.append(module.register_forward_pre_hook(lambda m, a, name=name: running.append(name)))
    try:
        def pack(t):  # noqa: ANN001, ANN202
            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()
            return t.detach()

        with saved_tensors_hooks(pack, lambda t: t):
            model(x)
    finally:
        for h in handles:
            h.remove()
    return totals


def bytes_no_dedupe(model, x):  # noqa: ANN001, ANN201 -- parameters skipped, but shared memory counted again
    with SavedTensorLog(model) as log:
        model(x)
    totals = {}
    for record in log.records:
        if not record.parameter:
            totals[record.layer] = totals.get(record.layer, 0) + record.nbytes
    return totals


def bytes_leaves_hooks(model, x):  # noqa: ANN001, ANN201 -- right numbers, but the hooks stay on the model
    with SavedTensorLog(model) as log:
        for module in model.modules():
            module.register_forward_hook(lambda m, a, out: None)
        model(x)
    return log.by_layer()


def bytes_not_on_error(model, x):  # noqa: ANN001, ANN201 -- right numbers, but no finally: an error leaves hooks
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    running, totals, seen = [], {}, {}
    handles = []
    for n, m in model.named_modules():
        if n and not list(m.children()):
            handles.append(m.register_forward_pre_hook(lambda mod, a, name=n: running.append(name)))
            handles.append(m.register_forward_hook(lambda mod, a, out: running.pop() and None))

    def pack(t):  # noqa: ANN001, ANN202
        address = t.untyped_storage().data_ptr()
        if running and address not in params and address not in seen:
            seen[address] = t.detach()
            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()
        return t.detach()

    hooks = saved_tensors_hooks(pack, lambda t: t)
    hooks.__enter__()
    model(x)
    hooks.__exit__(None, None, None)
    for h in handles:
        h.remove()
    return totals



def bytes_never_pops(model, x):  # noqa: ANN001, ANN201 -- marks where a leaf starts, never where it ends
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    running, totals, seen, handles = [], {}, set(), []

    def pack(t):  # noqa: ANN001, ANN202
        address = t.untyped_storage().data_ptr()
        if running and address not in params and address not in seen:
            seen.add(address)
            totals[running[-1]] = totals.get(running[-1], 0) + t.numel() * t.element_size()
        return t

    try:
        for n, m in model.named_modules():
            if n and not list(m.children()):
                handles.append(m.register_forward_pre_hook(lambda mod, a, name=n: running.append(name)))
        with saved_tensors_hooks(pack, lambda t: t):
            model(x)
    finally:
        for h in handles:
            h.remove()
    return totals


def _bytes_by(model, x, key, *, last_saver=False):  # noqa: ANN001, ANN202 -- raw hooks, one thing done its own way
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    running, totals, owner, handles = [], {}, {}, []

    def pack(t):  # noqa: ANN001, ANN202
        if running and t.untyped_storage().data_ptr() not in params:
            nbytes = t.numel() * t.element_size()
            if key(t) in owner and last_saver:
                totals[owner[key(t)]] -= nbytes
                del owner[key(t)]
            if key(t) not in owner:
                owner[key(t)] = running[-1]
                totals[running[-1]] = totals.get(running[-1], 0) + nbytes
        return t

    def leave(m, a, out):  # noqa: ANN001, ANN202
        running.pop()

    try:
        for n, m in model.named_modules():
            if n and not list(m.children()):
                handles.append(m.register_forward_pre_hook(lambda mod, a, name=n: running.append(name)))
                handles.append(m.register_forward_hook(leave, always_call=True))
        with saved_tensors_hooks(pack, lambda t: t):
            model(x)
    finally:
        for h in handles:
            h.remove()
    return totals


def bytes_last_saver(model, x):  # noqa: ANN001, ANN201 -- a storage saved again moves to the later layer
    return _bytes_by(model, x, lambda t: t.untyped_storage().data_ptr(), last_saver=True)


def bytes_by_tensor_view(model, x):  # noqa: ANN001, ANN201 -- one entry per view, not per storage
    return _bytes_by(model, x, lambda t: (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape)))


def bytes_with_a_returning_marker(model, x):  # noqa: ANN001, ANN201 -- the end marker returns the name it pops
    running, totals, seen = [], {}, set()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(tensor):  # noqa: ANN001, ANN202
        address = tensor.untyped_storage().data_ptr()
        if running and address not in params and address not in seen:
            seen.add(address)
            totals[running[-1]] = totals.get(running[-1], 0) + tensor.numel() * tensor.element_size()
        return tensor

    handles = []
    try:
        for name, module in model.named_modules():
            if name and not list(module.children()):
                handles.append(module.register_forward_pre_hook(lambda m, a, name=name: running.append(name)))
                handles.append(module.register_forward_hook(lambda m, a, out: running.pop(), always_call=True))
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            model(x)
    finally:
        for handle in handles:
            handle.remove()
    return totals


CASES = {
    "08.1": Cases(right=[[1, 2], (1.0, 2.0), torch.tensor([1, 2])],
                  wrong=[([2, 2], "Too many pack calls"), ([1, 1], "unpack count is too low"), ([0, 0], "Too few pack"),
                         ([1, 3], "unpack count is too high"), ("1, 2", "Expected"),
                         ([2, 4], "not every operation keeps a tensor")]),
    "08.2": Cases(
        right=[HalfWithRecords],
        wrong=[
            (HalfPerCall, "stored it twice"),
            (HalfPerView, "stored it twice"),
            (HalfTrustsAddresses, "same memory address"),
            (HalfKeepsOriginals, "keeps the float32 tensors"),
            (HalfEverything, "integer tensors"),
            (HalfCopiesParameters, "parameters"),
            (HalfWithoutModel, "takes the model"),
            (HalfFirstViewReshaped, "views of one storage"),
        ],
    ),
    "08.3": Cases(
        right=[bytes_with_log],
        wrong=[
            (bytes_every_call, "leave them out"),
            (bytes_no_dedupe, "counted twice"),
            (bytes_leaves_hooks, "left hooks"),
            (bytes_not_on_error, "When the forward raises"),
            (bytes_with_a_returning_marker, "returned a str, not a tensor"),
            (bytes_never_pops, "where each leaf's call ends"),
            (bytes_last_saver, "first layer that saved it"),
            (bytes_by_tensor_view, "counted twice"),
        ],
    ),
}
