"""What autograd keeps for backward, counted through a saved-tensor pack hook: :class:`SavedTensorLog`.

Inside ``with SavedTensorLog(model) as log:`` every tensor an operation saves for backward passes through a ``pack``
hook (``torch.autograd.graph.saved_tensors_hooks``) that records its shape, dtype and bytes (``numel *
element_size``, exact, not the process's RSS); forward pre-hooks on the model's leaf modules tell which layer ran.
A storage is counted once, by the first layer that saves it (a record of a storage saved again names that layer:
``first_saved_by``); tensors sharing storage with a parameter (``Linear`` saves ``weight.t()``) are listed with
``parameter=True``, those sharing storage with a buffer (``BatchNorm2d`` saves its ``running_mean`` and
``running_var``) with ``buffer=True``, and neither is counted: the model keeps them anyway. Pack returns
``tensor.detach()``, unpack returns it unchanged: the computation does not change. Every hook goes when the block
ends, also when it raises.

Usage::

    with SavedTensorLog(model) as log:
        loss = model(x).sum()
    print(log.by_layer(), log.total_bytes)

:func:`checkpoint_memory` measures what checkpointing a chain of blocks keeps and recomputes (notebook 08, S6).
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn as nn

from course_utils._torch_internals import storage_key
from course_utils.hooks import HookRegistry
from course_utils.machinery.messages import N_, _

__all__ = ["SavedRecord", "SavedTensorLog", "checkpoint_memory", "layer_label", "saved_tensor_hooks_active",
           "storage_key", "tensor_bytes"]

OUTSIDE = N_("(outside any layer)")
"""The layer name given to tensors saved while no leaf module of the model was running (English in every language:
code compares it; :func:`layer_label` shows it in the course's language)."""


def layer_label(layer: str) -> str:
    """A layer name of the log as a table shows it: :data:`OUTSIDE` in the course's language, a module's name as it
    is. Usage: ``layer_label(OUTSIDE)  # "(outside any layer)"; in Chinese "（不在任何层内）"``"""
    return _(OUTSIDE) if layer == OUTSIDE else layer


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes of a tensor's elements: ``numel * element_size``. Usage: ``tensor_bytes(torch.ones(4))  # 16``"""
    return tensor.numel() * tensor.element_size()


def saved_tensor_hooks_active() -> bool:
    """True while a ``saved_tensors_hooks`` pair (or ``save_on_cpu``) is in force in the calling thread.

    Usage: ``assert not saved_tensor_hooks_active()``
    """
    return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None


@dataclass(frozen=True)
class SavedRecord:
    """One tensor an operation saved for backward. ``first_saved_by``: the layer whose earlier record holds the same
    storage (``None``: the first record of it); ``parameter`` / ``buffer``: it lives in a parameter / a buffer of the
    model."""

    layer: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    nbytes: int
    first_saved_by: str | None
    parameter: bool
    buffer: bool

    @property
    def duplicate(self) -> bool:
        """Its storage was saved before (by ``first_saved_by``), and counted there."""
        return self.first_saved_by is not None

    @property
    def counted(self) -> bool:
        """Counted as memory: not a storage already counted, nor a parameter's or a buffer's (the model keeps them)."""
        return not (self.duplicate or self.parameter or self.buffer)


class SavedTensorLog:
    """Record every tensor saved for backward inside the ``with`` block, by layer.

    Usage: ``with SavedTensorLog(model) as log: model(x)`` then ``log.by_layer()``
    """

    def __init__(self, model: nn.Module | None = None) -> None:
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"SavedTensorLog takes an nn.Module (or nothing); got {type(model).__name__}.")
        self.model = model
        self.records: list[SavedRecord] = []
        self._seen: dict[tuple[str, int], tuple[weakref.ref[torch.Tensor], str]] = {}  # -> (kept, its layer)
        self._parameters: set[tuple[str, int] | None] = set()
        self._buffers: set[tuple[str, int] | None] = set()
        self._stack: list[str] = []
        self._module_hooks = HookRegistry(model)
        self._hooks: contextlib.ExitStack | None = None

    # -- the hooks --------------------------------------------------------------------------------------
    def _pack(self, tensor: torch.Tensor) -> torch.Tensor:
        key = storage_key(tensor)
        layer = self._stack[-1] if self._stack else OUTSIDE
        earlier = self._seen.get(key) if key is not None else None  # None: no memory of its own (an empty tensor)
        # a freed storage's address can be reused: an earlier record whose tensor is gone was another storage
        first_saved_by = earlier[1] if earlier is not None and earlier[0]() is not None else None
        parameter = key is not None and key in self._parameters
        buffer = key is not None and key in self._buffers
        self.records.append(SavedRecord(layer, tuple(tensor.shape), tensor.dtype, tensor_bytes(tensor), first_saved_by,
                                        parameter, buffer))
        kept = tensor.detach()
        if key is not None and first_saved_by is None:
            self._seen[key] = (weakref.ref(kept), layer)
        return kept

    @staticmethod
    def _unpack(tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def _enter_layer(self, name: str) -> Any:
        def pre_hook(module: nn.Module, args: Any) -> None:
            self._stack.append(name)

        return pre_hook

    def _leave_layer(self, module: nn.Module, args: Any, output: Any) -> None:
        if self._stack:
            self._stack.pop()

    # -- context manager ----------------------------------------------------------------------------------
    def __enter__(self) -> SavedTensorLog:
        if self._hooks is not None:
            raise RuntimeError("This SavedTensorLog is already in use: create a new one for each with-block.")
        hooks = contextlib.ExitStack()  # on exit: the pack hooks off, then every module hook removed
        hooks.callback(self._module_hooks.remove)  # (even when one removal fails: then that error is raised)
        hooks.callback(self._stack.clear)
        # first: it can refuse (under disable_saved_tensors_hooks); registering the module hooks cannot
        hooks.enter_context(torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack))
        self._hooks = hooks
        if self.model is not None:
            self._parameters = {storage_key(p) for p in self.model.parameters()}
            self._buffers = {storage_key(b) for b in self.model.buffers()}
            for name, module in self.model.named_modules():
                if name and not list(module.children()):
                    self._module_hooks.adopt(module.register_forward_pre_hook(self._enter_layer(name)))
                    self._module_hooks.adopt(module.register_forward_hook(self._leave_layer, always_call=True))
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._hooks is not None:
            self._hooks.__exit__(*exc_info)

    # -- results ------------------------------------------------------------------------------------------
    def by_layer(self) -> dict[str, int]:
        """Counted bytes per layer, in the order the layers first saved something."""
        totals: dict[str, int] = {}
        for record in self.records:
            totals.setdefault(record.layer, 0)
            if record.counted:
                totals[record.layer] += record.nbytes
        return totals

    @property
    def total_bytes(self) -> int:
        """Bytes the graph holds for backward: every counted record."""
        return sum(record.nbytes for record in self.records if record.counted)

    @property
    def naive_bytes(self) -> int:
        """What a count of every pack call would say (duplicates, parameters and buffers included)."""
        return sum(record.nbytes for record in self.records)

    def __repr__(self) -> str:
        return f"SavedTensorLog({len(self.records)} saved tensors, {self.total_bytes} bytes counted)"


def checkpoint_memory(blocks: int, segments: Iterable[int], *, width: int = 256,
                      batch: int = 128) -> tuple[dict[int, tuple[int, int]], dict[int, int]]:
    """Checkpoint a chain of ``blocks`` blocks ``Linear(width, width)`` + ``GELU`` (then ``Linear(width, 10)``, a
    cross-entropy loss) in each number of ``segments`` (0: not at all; each must divide ``blocks``), measured as
    notebook 08's Example S6 does. Returns ``(memory, forwards)``: ``memory[s] = (bytes kept until backward, bytes one
    segment saves when recomputed, its input excluded)`` -- their sum is the peak -- and ``forwards[s]``, how many times
    the blocks' ``Linear`` layers ran in one forward and backward. The global random state is left as it was.

    Usage: ``memory, forwards = checkpoint_memory(16, [0, 1, 2, 4, 8, 16])``
    """
    from torch.utils.checkpoint import checkpoint

    settings = list(segments)
    if blocks < 1 or any(s < 0 or (s and blocks % s) for s in settings):
        raise ValueError(f"Each number of segments must be 0 or divide blocks={blocks}: got {settings}.")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        chain = [nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(blocks)]
        model = nn.Sequential(*chain, nn.Linear(width, 10))
        x = torch.randn(batch, width)
        y = torch.randint(0, 10, (batch,))

    def loss(segments: int) -> torch.Tensor:
        hidden = x
        if segments == 0:
            for block in chain:
                hidden = block(hidden)
        else:
            per = blocks // segments
            for start in range(0, blocks, per):
                hidden = checkpoint(nn.Sequential(*chain[start:start + per]), hidden, use_reentrant=False)
        return nn.functional.cross_entropy(model[blocks](hidden), y)

    def one_segment_saves(segments: int) -> int:
        segment_input = torch.randn(batch, width, requires_grad=True)
        with SavedTensorLog(model) as segment_log:
            hidden = segment_input
            for block in chain[:blocks // segments]:
                hidden = block(hidden)
        return segment_log.total_bytes - tensor_bytes(segment_input)

    memory: dict[int, tuple[int, int]] = {}
    forwards: dict[int, int] = {}
    for count in settings:
        ran = [0]
        handles = [block[0].register_forward_hook(lambda module, args, output, ran=ran: ran.__setitem__(0, ran[0] + 1))
                   for block in chain]
        try:
            with SavedTensorLog(model) as log:
                total = loss(count)
            total.backward()  # the checkpointed segments run again in here
        finally:
            for handle in handles:
                handle.remove()
        forwards[count] = ran[0]
        memory[count] = (log.total_bytes, one_segment_saves(count) if count else 0)
        model.zero_grad(set_to_none=True)
    return memory, forwards
