"""Own every hook you register, and get rid of all of them reliably.

A :class:`HookRegistry` registers module hooks (by dotted layer name, module object or module type), tensor,
post-accumulate-grad and autograd-node hooks, and temporary changes to modules (``relu.inplace = False``);
``remove()`` -- called when a ``with`` block ends, also when it raises -- removes every hook and undoes every change.
:func:`count_hooks`, :func:`hook_report` and :func:`assert_no_hooks` read every hook dictionary torch keeps on a
module, its children and their parameters, and the process-wide global module hooks.

Usage::

    with HookRegistry(model) as hooks:
        hooks.forward("features.3", lambda module, inputs, output: print(output.shape))
        model(x)
    assert_no_hooks(model)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
import torch.nn as nn

from course_utils._torch_internals import global_hook_dicts

__all__ = [
    "HookRegistry",
    "LayerSpec",
    "UnknownLayerError",
    "resolve_layers",
    "count_hooks",
    "hook_report",
    "assert_no_hooks",
]

LayerSpec = str | nn.Module | type
"""A layer given by dotted name (``"features.3"``), by the module object, or by module type (``nn.ReLU``)."""

# Dictionaries that do not hold hooks but flags about hooks stored elsewhere (keyed by the same hook id).
_FLAG_DICT_SUFFIXES = ("_with_kwargs", "_always_called")


class UnknownLayerError(LookupError):
    """Raised when a layer name, module or type does not match anything in the model."""

    def __str__(self) -> str:  # LookupError would otherwise show the message in quotes
        return str(self.args[0]) if self.args else ""


def resolve_layers(model: nn.Module | None, layers: LayerSpec | Iterable[LayerSpec]) -> list[tuple[str, nn.Module]]:
    """Turn a layer spec (or a list of them) into ``[(dotted_name, module), ...]``.

    Usage: ``resolve_layers(model, "features.3")``, ``resolve_layers(model, nn.ReLU)``.

    An unknown name raises :class:`UnknownLayerError` listing the closest valid names.
    """
    if isinstance(layers, (str, nn.Module, type)):
        specs: list[Any] = [layers]
    elif isinstance(layers, Iterable):
        specs = list(layers)
        if not specs:
            raise ValueError("No layers given: pass a dotted name, a module, a module type, or a list of them.")
    else:
        raise TypeError(
            f"Layers must be a dotted name (str), an nn.Module, a module type, or a list of them; "
            f"got {type(layers).__name__}."
        )
    resolved: list[tuple[str, nn.Module]] = []
    for spec in specs:
        for item in _resolve_one(model, spec):
            if all(item[1] is not seen for _, seen in resolved):
                resolved.append(item)
    return resolved


def _resolve_one(model: nn.Module | None, spec: Any) -> list[tuple[str, nn.Module]]:
    if isinstance(spec, nn.Module):
        if model is None:
            return [(type(spec).__name__, spec)]
        for name, module in model.named_modules(remove_duplicate=False):
            if module is spec:
                return [(name, module)]
        raise UnknownLayerError(
            f"The {type(spec).__name__} you passed is not part of this {type(model).__name__}. "
            f"Pass one of the model's own modules (e.g. model.get_submodule('...')) or its dotted name."
        )
    if model is None:
        raise TypeError(
            f"Layer {spec!r} can only be looked up in a model: create the registry as HookRegistry(model), "
            f"or pass the module object itself."
        )
    if isinstance(spec, str):
        names = [name for name, _ in model.named_modules()]
        if spec in names:
            return [(spec, model.get_submodule(spec))]
        close = difflib.get_close_matches(spec, [n for n in names if n], n=5, cutoff=0.5)
        hint = (
            "Closest names: " + ", ".join(repr(n) for n in close) + "."
            if close
            else "Valid names start with: " + ", ".join(repr(n) for n in names[1:6]) + "."
        )
        raise UnknownLayerError(
            f"No layer named {spec!r} in {type(model).__name__}. {hint} "
            f"List them all with [name for name, _ in model.named_modules()]."
        )
    if isinstance(spec, type):
        if not issubclass(spec, nn.Module):
            raise TypeError(f"A layer type must be an nn.Module subclass, got {spec.__name__}.")
        found = [(name, module) for name, module in model.named_modules() if isinstance(module, spec)]
        if not found:
            present = sorted({type(module).__name__ for module in model.modules()})
            raise UnknownLayerError(
                f"{type(model).__name__} has no {spec.__name__} layer. Layer types it has: {', '.join(present)}."
            )
        return found
    raise TypeError(
        f"Layers must be a dotted name (str), an nn.Module or a module type; got {type(spec).__name__}."
    )


def _require_callable(hook: Any) -> None:
    if not callable(hook):
        raise TypeError(f"A hook must be a function (callable); got {type(hook).__name__}.")


class HookRegistry:
    """Registers hooks, keeps their handles, and removes them all (plus temporary changes) on exit.

    Usage: ``with HookRegistry(model) as hooks: hooks.forward("fc1", hook); model(x)``
    """

    def __init__(self, model: nn.Module | None = None) -> None:
        self.model = model
        self._handles: list[Any] = []
        self._undo: list[Callable[[], None]] = []

    # -- module hooks -------------------------------------------------------------------------------
    def _on_layers(self, layers: LayerSpec | Iterable[LayerSpec], register: str, hook: Any, **options: Any) -> list:
        _require_callable(hook)
        return [self.adopt(getattr(m, register)(hook, **options)) for _, m in resolve_layers(self.model, layers)]

    def forward(
        self,
        layers: LayerSpec | Iterable[LayerSpec],
        hook: Callable[..., Any],
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
        always_call: bool = False,
    ) -> list[Any]:
        """Register ``hook(module, args, output)`` on each layer; returns the handles."""
        return self._on_layers(layers, "register_forward_hook", hook, prepend=prepend, with_kwargs=with_kwargs,
                               always_call=always_call)

    def forward_pre(
        self,
        layers: LayerSpec | Iterable[LayerSpec],
        hook: Callable[..., Any],
        *,
        prepend: bool = False,
        with_kwargs: bool = False,
    ) -> list[Any]:
        """Register ``hook(module, args)`` to run before each layer's forward; returns the handles."""
        return self._on_layers(layers, "register_forward_pre_hook", hook, prepend=prepend, with_kwargs=with_kwargs)

    def full_backward(
        self, layers: LayerSpec | Iterable[LayerSpec], hook: Callable[..., Any], *, prepend: bool = False
    ) -> list[Any]:
        """Register ``hook(module, grad_input, grad_output)`` (a full backward hook); returns the handles."""
        return self._on_layers(layers, "register_full_backward_hook", hook, prepend=prepend)

    def backward_pre(
        self, layers: LayerSpec | Iterable[LayerSpec], hook: Callable[..., Any], *, prepend: bool = False
    ) -> list[Any]:
        """Register ``hook(module, grad_output)`` to run before each layer's backward; returns the handles."""
        return self._on_layers(layers, "register_full_backward_pre_hook", hook, prepend=prepend)

    # -- tensor and autograd-node hooks ----------------------------------------------------------------
    def tensor(self, tensor: torch.Tensor, hook: Callable[[torch.Tensor], torch.Tensor | None]) -> Any:
        """Register ``hook(grad)`` on a tensor (``tensor.register_hook``); returns the handle."""
        _require_callable(hook)
        return self.adopt(tensor.register_hook(hook))

    def post_accumulate(self, tensor: torch.Tensor, hook: Callable[[torch.Tensor], None]) -> Any:
        """Register ``hook(leaf)`` to run after ``leaf.grad`` was accumulated (leaf tensors only)."""
        _require_callable(hook)
        if not tensor.is_leaf:
            raise ValueError(
                "Post-accumulate-grad hooks exist only for leaf tensors (parameters, inputs you created); "
                "for an intermediate tensor use tensor(...) instead."
            )
        return self.adopt(tensor.register_post_accumulate_grad_hook(hook))

    def node(self, node: Any, hook: Callable[..., Any], *, before: bool = False) -> Any:
        """Hook an autograd node (``tensor.grad_fn``): ``before=True`` registers a pre-hook
        ``hook(grad_outputs)``, otherwise a hook ``hook(grad_inputs, grad_outputs)``; returns the handle."""
        _require_callable(hook)
        if node is None:
            raise ValueError("This tensor has no grad_fn (it is a leaf or does not require grad): nothing to hook.")
        return self.adopt(node.register_prehook(hook) if before else node.register_hook(hook))

    # -- anything else ------------------------------------------------------------------------------
    def adopt(self, handle: Any) -> Any:
        """Take ownership of any handle with a ``remove()`` method; returns it."""
        if not callable(getattr(handle, "remove", None)):
            raise TypeError(f"Only handles with a remove() method can be adopted; got {type(handle).__name__}.")
        self._handles.append(handle)
        return handle

    def set_attr(self, obj: Any, name: str, value: Any) -> None:
        """Set ``obj.name = value`` until the registry is removed, then restore the old value.

        Usage: ``hooks.set_attr(model.relu, "inplace", False)``
        """
        if not hasattr(obj, name):
            raise AttributeError(f"{type(obj).__name__} has no attribute {name!r} to change temporarily.")
        old = getattr(obj, name)
        setattr(obj, name, value)
        self._undo.append(lambda: setattr(obj, name, old))

    # -- clean-up ----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._handles)

    def remove(self) -> None:
        """Remove every hook and undo every temporary change (newest first). Safe to call twice.

        A step that fails does not stop the others: one failure is re-raised as it was, several as an
        ``ExceptionGroup`` (catch them with ``except* RuntimeError:``). Usage: ``hooks.remove()``
        """
        errors: list[Exception] = []
        steps = [handle.remove for handle in reversed(self._handles)] + list(reversed(self._undo))
        self._handles.clear()
        self._undo.clear()
        for step in steps:
            try:
                step()
            except Exception as error:  # keep removing the rest, then re-raise
                errors.append(error)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            raise ExceptionGroup(
                f"HookRegistry.remove(): {len(errors)} clean-up steps failed (all other hooks were removed)", errors
            )

    def __enter__(self) -> HookRegistry:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.remove()  # returns None: an exception raised in the with-block propagates unchanged

    def __repr__(self) -> str:
        return f"HookRegistry({len(self._handles)} hooks, {len(self._undo)} temporary changes)"


# -- inspecting what is left ----------------------------------------------------------------------------
def _hook_dicts(obj: Any) -> dict[str, Mapping[Any, Any]]:
    """Every dictionary attribute of ``obj`` whose name says it holds hooks (found by name, so hook kinds
    that later torch versions add are covered too). Tensors keep theirs as properties, hence ``dir``."""
    names = dir(obj) if isinstance(obj, torch.Tensor) else list(vars(obj))
    found = {}
    for name in names:
        if "hook" in name and not name.startswith("__"):
            value = getattr(obj, name, None)
            if isinstance(value, Mapping):
                found[name] = value
    return found


def _add_report(obj: nn.Module | torch.Tensor, prefix: str, report: dict[str, int]) -> None:
    for dict_name, hooks in _hook_dicts(obj).items():
        if hooks:
            report[f"{prefix}{dict_name}"] = len(hooks)


def hook_report(target: nn.Module | torch.Tensor, *, include_global: bool = False) -> dict[str, int]:
    """Non-empty hook dictionaries of a module (with its children and parameters) or of a tensor.

    Keys look like ``"fc1._forward_hooks"``, ``"fc1.weight._backward_hooks"`` or, for a tensor,
    ``"_post_accumulate_grad_hooks"``; with ``include_global=True`` the global module hooks are added.
    Usage: ``hook_report(model)``
    """
    report: dict[str, int] = {}
    if isinstance(target, torch.Tensor):
        _add_report(target, "", report)
    elif isinstance(target, nn.Module):
        for name, sub in target.named_modules(remove_duplicate=False):
            prefix = f"{name}." if name else ""
            _add_report(sub, prefix, report)
            for param_name, param in sub.named_parameters(recurse=False):
                _add_report(param, f"{prefix}{param_name}.", report)
    else:
        raise TypeError(f"Expected an nn.Module or a torch.Tensor, got {type(target).__name__}.")
    if include_global:
        report.update(_global_only_report())
    return report


def count_hooks(target: nn.Module | torch.Tensor, *, include_global: bool = False) -> int:
    """Number of hooks on a module (its children and parameters included) or on a tensor; flag entries
    (with-kwargs, always-call) are not counted twice.

    Usage: ``count_hooks(model)``
    """
    return sum(
        n for key, n in hook_report(target, include_global=include_global).items()
        if not key.endswith(_FLAG_DICT_SUFFIXES)
    )


def assert_no_hooks(*targets: nn.Module | torch.Tensor, include_global: bool = True) -> None:
    """Raise ``AssertionError`` naming every hook (or hook flag) still registered on the given models or tensors.

    Usage: ``assert_no_hooks(model, mlp)`` or ``assert_no_hooks(x, z)`` -- the last cell of every notebook.

    Blind spot: hooks on autograd nodes (``z.grad_fn.register_hook``, :meth:`HookRegistry.node`) are not seen:
    torch keeps them inside the C++ node, with no Python dictionary to read. Remove them through their handles.
    """
    if not targets:
        raise ValueError("Pass the models (or tensors) to check, e.g. assert_no_hooks(model).")
    leftovers: dict[str, int] = {}
    for index, target in enumerate(targets):
        label = f"{type(target).__name__}#{index}" if len(targets) > 1 else type(target).__name__
        for key, n in hook_report(target).items():
            leftovers[f"{label}: {key}"] = n
    if include_global:
        leftovers.update(_global_only_report())
    if leftovers:
        lines = "\n".join(f"  {key}: {n}" for key, n in leftovers.items())
        raise AssertionError(
            "Hooks are still registered:\n"
            f"{lines}\n"
            "Remove them with handle.remove(), or register them inside `with HookRegistry(model) as hooks:`."
        )


def _global_only_report() -> dict[str, int]:
    return {name: len(hooks) for name, hooks in global_hook_dicts(optimizers=False).items() if hooks}
