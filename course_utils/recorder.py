"""Record what layers compute -- outputs, optionally inputs, and gradients -- by layer name, safely.

An :class:`ActivationRecorder` keeps, detached, each chosen layer's **outputs** (forward hooks), with ``inputs=True``
its positional tensor **inputs** (forward *pre*-hooks, before an in-place layer changes them), and with
``gradients=True`` the **gradients** of its outputs (a tensor hook on each output; never full backward hooks, which
raise at forward time on models with ``ReLU(inplace=True)``, pytorch#61519).

Stored tensors are aliases, and a later in-place operation (an in-place ReLU, a residual ``out += identity``) would
silently change them: on resnet18, 17 of 60 recorded outputs. While active, the recorder watches every operation that
writes (a ``TorchDispatchMode``) and clones a recorded tensor just before it is written (``on_overwrite="clone"``), or
makes reading it raise (``"raise"``); reading also checks the version counter, for writes after the recorder closed.

A layer that runs several times in one forward gets one key per call (``"layer1.0.relu#0"``, ``"#1"``); by default
each forward of the model starts afresh (``keep="last"``), ``keep="all"`` numbers the calls across forwards.

Usage::

    with ActivationRecorder(model, ["layer1", "layer4"], gradients=True) as rec:
        model(x).sum().backward()
    rec.outputs["layer4"].shape, rec.gradient("layer4").shape
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import torch
import torch.nn as nn

# TorchDispatchMode is documented ("Extending PyTorch", __torch_dispatch__) but lives in a private module, and
# torch has no public alias for it (2.14.1). It is the only way to see every aten operation that writes into a
# tensor, which is what lets the recorder keep right values on models with in-place layers. We also read
# ``func._schema.arguments[i].alias_info.is_write``. tests/test_recorder.py::test_private_dispatch_api_still_works
# fails with a clear message if a torch upgrade moves or changes either.
from torch.utils._python_dispatch import TorchDispatchMode

from course_utils._torch_internals import storage_key
from course_utils.hooks import HookRegistry, LayerSpec, UnknownLayerError, resolve_layers
from course_utils.machinery.messages import _

__all__ = [
    "ActivationRecorder",
    "LayerNeverRanError",
    "NoGradientError",
    "OverwrittenActivationError",
    "RecordedValues",
]

_V = TypeVar("_V")


class LayerNeverRanError(LookupError):
    """A recorded layer did not run in the recorded forward pass(es)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class NoGradientError(RuntimeError):
    """A gradient was asked for but none was recorded (no backward yet, ``no_grad``, or ``gradients=False``)."""


class OverwrittenActivationError(RuntimeError):
    """A stored tensor was changed in place after it was recorded, so it no longer holds what the layer computed."""


class _NotRecordedKeyError(KeyError):
    """``rec.outputs[key]`` for a key that :meth:`ActivationRecorder.keys` does not list (a mapping's KeyError,
    so ``in`` and ``.get()`` work), with the recorder's explanation as its message."""

    def __str__(self) -> str:  # KeyError would otherwise show the message in quotes
        return str(self.args[0]) if self.args else ""


class RecordedValues(Mapping[str, _V], Generic[_V]):
    """A read-only, live view of what an :class:`ActivationRecorder` recorded, keyed as in its ``keys()``.

    ``rec.outputs["fc1"]`` reads that one entry only, and an entry that cannot be read (overwritten, no gradient)
    raises for its own key only; iterating (``.items()``, ``dict(...)``) reads every entry, so it raises at a bad one.

    Usage: ``rec.outputs["fc1"]``, ``"fc1" in rec.gradients``, ``list(rec.outputs)``
    """

    def __init__(self, recorder: ActivationRecorder, read: Callable[[str], _V], what: str) -> None:
        self._recorder = recorder
        self._read = read
        self._what = what

    def __getitem__(self, key: str) -> _V:
        try:
            self._recorder._one(key)  # a key keys() lists: a recorded layer that ran, or name#k
        except LookupError as error:  # unknown layer, never ran, or a layer that ran several times
            raise _NotRecordedKeyError(f"{error} (no {self._what} entry {key!r})") from error
        return self._read(key)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            self._recorder._one(key)
        except LookupError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._recorder.keys())

    def __len__(self) -> int:
        return len(self._recorder.keys())

    def __repr__(self) -> str:
        return f"<{self._what} of {len(self)} recorded call(s): {', '.join(map(repr, self))}>"


@dataclass
class _Entry:
    """One tensor the recorder keeps, with what is needed to tell whether it is still valid."""

    tensor: torch.Tensor
    version: int
    overwritten_by: str | None = None

    def read(self, what: str) -> torch.Tensor:
        if self.overwritten_by is not None:
            raise OverwrittenActivationError(
                _("{what} was overwritten in place by {operator} after it was recorded. Use "
                  "ActivationRecorder(..., on_overwrite='clone') (the default) to keep a copy, or make the layer that "
                  "writes in place non-inplace.").format(what=what, operator=self.overwritten_by)
            )
        if self.tensor._version != self.version:
            raise OverwrittenActivationError(
                _("{what} was changed in place after it was recorded (its version counter moved from {before} to "
                  "{after}), probably after the recorder was closed. Read it before changing the model's output in "
                  "place, or record with clone=True.").format(what=what, before=self.version,
                                                              after=self.tensor._version)
            )
        return self.tensor


@dataclass
class _Call:
    """Everything recorded for one call of one layer."""

    output: Any = None  # an _Entry, or a tuple/list of them for layers that return several tensors
    inputs: tuple[_Entry | None, ...] = ()
    gradient: torch.Tensor | None = None
    no_gradient_reason: str = "no backward pass has reached this layer yet: call .backward() on a result first"
    done: bool = False  # False while only the pre-hook has run (or the forward raised in between)
    unsupported: str | None = None  # type name of an output the recorder cannot store


class _CopyOnWrite(TorchDispatchMode):
    """Sees every aten operation while active; before an operation writes into the memory of a recorded
    alias, hands that alias to the recorder (which clones it or marks it as overwritten)."""

    def __init__(self, recorder: ActivationRecorder) -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.recorder._aliases:
            for argument, value in _arguments(func, args, kwargs):
                if argument.alias_info is not None and argument.alias_info.is_write:
                    for tensor in _tensors_in(value):
                        self.recorder._before_write(tensor, str(func))
        return func(*args, **kwargs)


def _arguments(func: Any, args: tuple, kwargs: dict) -> Iterable[tuple[Any, Any]]:
    schema_args = func._schema.arguments
    for argument, value in zip(schema_args, args):
        yield argument, value
    by_name = {argument.name: argument for argument in schema_args}
    for name, value in kwargs.items():
        if name in by_name:
            yield by_name[name], value


def _tensors_in(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for item in value if isinstance(item, torch.Tensor)]
    return []


class ActivationRecorder:
    """Context manager that records layer outputs (optionally inputs and gradients) by dotted layer name.

    Usage: ``with ActivationRecorder(model, ["conv2"]) as rec: model(x)``, then ``rec.outputs["conv2"]``.

    Args:
        model: the model whose layers are recorded (it is not changed: no ``eval()``, no attribute changes).
        layers: dotted names, modules or module types (see :func:`course_utils.hooks.resolve_layers`).
        inputs: also record each layer's positional tensor inputs (before the layer runs).
        gradients: also record the gradient of each layer's output (tensor outputs only).
        clone: copy every output at once (simple, twice the memory) instead of keeping aliases.
        on_overwrite: ``"clone"`` keeps a copy when an alias is about to be overwritten in place;
            ``"raise"`` lets the write happen and makes reading that entry raise.
        offload: move what is recorded to the CPU (frees accelerator memory for big models).
        keep: ``"last"`` forgets earlier forwards of ``model`` when it runs again; ``"all"`` keeps every call.
    """

    def __init__(
        self,
        model: nn.Module,
        layers: LayerSpec | Iterable[LayerSpec],
        *,
        inputs: bool = False,
        gradients: bool = False,
        clone: bool = False,
        on_overwrite: Literal["clone", "raise"] = "clone",
        offload: bool = False,
        keep: Literal["last", "all"] = "last",
    ) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(f"ActivationRecorder records an nn.Module; got {type(model).__name__}.")
        if on_overwrite not in ("clone", "raise"):
            raise ValueError(f"on_overwrite must be 'clone' or 'raise', got {on_overwrite!r}.")
        if keep not in ("last", "all"):
            raise ValueError(f"keep must be 'last' or 'all', got {keep!r}.")
        self.model = model
        self.layers = resolve_layers(model, layers)  # raises UnknownLayerError for a typo, before anything runs
        self.record_inputs = inputs
        self.record_gradients = gradients
        self.clone = clone
        self.on_overwrite = on_overwrite
        self.offload = offload
        self.keep = keep
        self._calls: dict[str, list[_Call]] = {name: [] for name, _ in self.layers}
        self._aliases: dict[tuple[str, int], list[tuple[_Entry, str]]] = {}
        self._hooks = HookRegistry(model)
        self._gradient_hooks = HookRegistry()  # per forward: dropped by clear()
        self._mode: _CopyOnWrite | None = None
        self._entered = False

    # -- recording -------------------------------------------------------------------------------------
    def __enter__(self) -> ActivationRecorder:
        if self._mode is not None:
            raise RuntimeError("This recorder is already active: use one `with` block at a time.")
        self._entered = True
        try:
            if self.keep == "last":
                self._hooks.forward_pre(self.model, lambda module, args: self.clear())
            for name, module in self.layers:
                if self.record_inputs:
                    self._hooks.forward_pre(module, self._input_hook(name))
                self._hooks.forward(module, self._output_hook(name))
            self._mode = _CopyOnWrite(self)
            self._mode.__enter__()
        except BaseException:
            self._hooks.remove()
            self._mode = None
            raise
        return self

    def __exit__(self, *exc_info: Any) -> None:
        try:
            if self._mode is not None:
                self._mode.__exit__(*exc_info)
        finally:
            self._mode = None
            self._aliases.clear()
            try:
                self._gradient_hooks.remove()
            finally:
                self._hooks.remove()

    def clear(self) -> None:
        """Forget everything recorded so far (``keep="last"`` does this at each forward of the model)."""
        for calls in self._calls.values():
            calls.clear()
        self._aliases.clear()
        self._gradient_hooks.remove()

    def _keep(self, tensor: torch.Tensor, label: str) -> _Entry:
        stored = tensor.detach()
        if self.offload and stored.device.type != "cpu":
            stored = stored.to("cpu")  # a copy: nothing on the accelerator can overwrite it
        elif self.clone:
            stored = stored.clone()
        entry = _Entry(stored, stored._version)
        if stored.data_ptr() == tensor.data_ptr():  # still an alias of the model's tensor: watch for writes
            key = storage_key(stored)
            if key is not None:
                self._aliases.setdefault(key, []).append((entry, label))
        return entry

    def _before_write(self, tensor: torch.Tensor, op_name: str) -> None:
        key = storage_key(tensor)
        if key is None or key not in self._aliases:
            return
        for entry, _label in self._aliases.pop(key):
            if self.on_overwrite == "clone":
                entry.tensor = entry.tensor.clone()
                entry.version = entry.tensor._version
            else:
                entry.overwritten_by = op_name

    def _input_hook(self, name: str) -> Any:
        def record_inputs(module: nn.Module, args: tuple) -> None:
            kept = tuple(
                self._keep(arg, f"{name} input {i}") if isinstance(arg, torch.Tensor) else None
                for i, arg in enumerate(args)
            )
            self._calls[name].append(_Call(inputs=kept))

        return record_inputs

    def _output_hook(self, name: str) -> Any:
        def record_output(module: nn.Module, args: tuple, output: Any) -> None:
            calls = self._calls[name]
            if self.record_inputs and calls and not calls[-1].done:
                call = calls[-1]  # the pre-hook opened this call
            else:
                call = _Call()
                calls.append(call)
            call.done = True
            if isinstance(output, torch.Tensor):
                call.output = self._keep(output, name)
            elif isinstance(output, (tuple, list)) and output and all(isinstance(o, torch.Tensor) for o in output):
                call.output = type(output)(self._keep(o, f"{name} output {i}") for i, o in enumerate(output))
            else:
                call.unsupported = type(output).__name__
            if self.record_gradients:
                self._watch_gradient(call, output)
            return None

        return record_output

    def _watch_gradient(self, call: _Call, output: Any) -> None:
        if not isinstance(output, torch.Tensor):
            call.no_gradient_reason = (
                f"the layer returns a {type(output).__name__}, not a tensor: record the layer that makes the tensor"
            )
            return
        if not torch.is_grad_enabled():
            call.no_gradient_reason = "the forward ran under torch.no_grad() (or inference_mode): no graph, no gradient"
            return
        if not output.requires_grad:
            call.no_gradient_reason = (
                "its output does not require grad (frozen parameters and an input without requires_grad)"
            )
            return

        def store(grad: torch.Tensor) -> None:
            stored = grad.detach()
            call.gradient = stored.to("cpu") if self.offload else stored.clone()

        # Removed at the next forward (keep="last") or when the recorder closes.
        self._gradient_hooks.tensor(output, store)

    # -- reading -------------------------------------------------------------------------------------
    def _entries(self, name: str) -> list[_Call]:
        if name not in self._calls:
            base, _, index = name.rpartition("#")
            if base in self._calls and index.isdigit():
                calls = self._entries(base)
                if int(index) < len(calls):
                    return [calls[int(index)]]
                raise LayerNeverRanError(f"{base!r} ran {len(calls)} time(s); there is no call #{index}.")
            raise self._unknown(name)
        calls = [call for call in self._calls[name] if call.done]
        if not calls:
            hint = (
                " The recorder was never used in a `with` block."
                if not self._entered
                else " Does forward() use it? (A layer defined in __init__ but not called records nothing.)"
            )
            raise LayerNeverRanError(f"Layer {name!r} has not run while the recorder was active.{hint}")
        return calls

    def _one(self, name: str) -> _Call:
        calls = self._entries(name)
        if len(calls) > 1:
            keys = ", ".join(f"'{name}#{i}'" for i in range(len(calls)))
            raise LookupError(f"Layer {name!r} ran {len(calls)} times: ask for one call, e.g. {keys}.")
        return calls[0]

    def calls(self, name: str) -> int:
        """How many times layer ``name`` ran while recording (0 if it never ran)."""
        if name not in self._calls:
            raise self._unknown(name)
        return sum(call.done for call in self._calls[name])

    def _unknown(self, name: str) -> UnknownLayerError:
        recorded = ", ".join(repr(n) for n in self._calls)
        return UnknownLayerError(f"{name!r} is not a recorded layer. This recorder records: {recorded}.")

    def _require(self, what: Literal["inputs", "gradients"]) -> None:
        if what == "inputs" and not self.record_inputs:
            raise ValueError("Inputs were not recorded: create the recorder with inputs=True.")
        if what == "gradients" and not self.record_gradients:
            raise NoGradientError("Gradients were not recorded: create the recorder with gradients=True.")

    def keys(self) -> list[str]:
        """One key per recorded call: the layer name, or ``name#k`` for a layer that ran several times."""
        keys: list[str] = []
        for name in self._calls:
            n = self.calls(name)
            keys += [name] if n == 1 else [f"{name}#{i}" for i in range(n)]
        return keys

    def output(self, name: str) -> Any:
        """The recorded output of one call (``"fc1"`` or ``"layer1.0.relu#1"``)."""
        call = self._one(name)
        if call.unsupported is not None:
            raise TypeError(
                f"Layer {name!r} returned a {call.unsupported}, which the recorder does not store; "
                f"record one of its sub-layers that returns a tensor."
            )
        if isinstance(call.output, (tuple, list)):
            return type(call.output)(entry.read(_("Output {i} of {name}").format(i=i, name=repr(name)))
                                     for i, entry in enumerate(call.output))
        return call.output.read(_("The output of {name}").format(name=repr(name)))

    def input(self, name: str, index: int = 0) -> torch.Tensor:
        """The recorded positional input ``index`` of one call (needs ``inputs=True``)."""
        self._require("inputs")
        call = self._one(name)
        entry = call.inputs[index] if index < len(call.inputs) else None
        if entry is None:
            raise IndexError(
                f"Layer {name!r} got {len(call.inputs)} positional input(s); input {index} is not a tensor.")
        return entry.read(_("Input {index} of {name}").format(index=index, name=repr(name)))

    def gradient(self, name: str) -> torch.Tensor:
        """The gradient of the loss with respect to one call's output (needs ``gradients=True`` and a backward)."""
        self._require("gradients")
        call = self._one(name)
        if call.gradient is None:
            raise NoGradientError(f"No gradient for {name!r}: {call.no_gradient_reason}.")
        return call.gradient

    @property
    def outputs(self) -> RecordedValues[Any]:
        """Every recorded output, keyed as in :meth:`keys` (a live :class:`RecordedValues`)."""
        return RecordedValues(self, self.output, "outputs")

    @property
    def inputs(self) -> RecordedValues[torch.Tensor]:
        """Every recorded first positional input, keyed as in :meth:`keys` (needs ``inputs=True``)."""
        self._require("inputs")
        return RecordedValues(self, self.input, "inputs")

    @property
    def gradients(self) -> RecordedValues[torch.Tensor]:
        """Every recorded gradient, keyed as in :meth:`keys`; a call without one raises :class:`NoGradientError`."""
        self._require("gradients")
        return RecordedValues(self, self.gradient, "gradients")

    def __repr__(self) -> str:
        return f"ActivationRecorder({len(self.layers)} layers, {len(self.keys())} calls recorded)"
