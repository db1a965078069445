"""What the course reads of PyTorch's own state, in one place: the process-wide hook dictionaries, the print
options, the stacks of torch function and dispatch modes, and the key of the memory a tensor lives in.

PyTorch has no public API for the first three, so they are read through private names, each listed in
:data:`PRIVATE_NAMES` with the test that pins it: a PyTorch release that moves one fails that test, not a learner's
check. Nothing else in ``course_utils`` (outside the exercise modules) may touch a private torch name.

Usage::

    from course_utils._torch_internals import global_hook_dicts, storage_key
    {name: len(hooks) for name, hooks in global_hook_dicts().items() if hooks}
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.modules.module as _module_globals
import torch.optim.optimizer as _optimizer_globals

__all__ = ["PRIVATE_NAMES", "default_device_set", "dispatch_modes", "function_modes", "global_hook_dicts",
           "print_options",
           "put_back_modes", "storage_key"]

# Each private torch name the course reads, and the test that fails if a PyTorch release moves it.
PRIVATE_NAMES: dict[str, str] = {
    "torch.nn.modules.module._global_*hooks": "tests/test_torch_internals.py::test_every_global_hook_is_seen",
    "torch.optim.optimizer._global_*hooks": "tests/test_torch_internals.py::test_every_global_hook_is_seen",
    "torch._tensor_str.PRINT_OPTS": "tests/test_torch_internals.py::test_print_options_are_read_as_set",
    "torch.overrides._get_current_function_mode_stack": "tests/test_torch_internals.py::test_modes_left_on_are_left",
    "torch.utils._python_dispatch._get_current_dispatch_mode_stack":
        "tests/test_torch_internals.py::test_modes_left_on_are_left",
    "torch.utils._device.DeviceContext": "tests/test_torch_internals.py::test_modes_left_on_are_left",
}

_PRINT_OPTIONS = ("precision", "threshold", "edgeitems", "linewidth", "sci_mode")


def global_hook_dicts(*, modules: bool = True, optimizers: bool = True) -> dict[str, dict[Any, Any]]:
    """The process-wide hook dictionaries by dotted name (``"torch.nn.modules.module._global_forward_hooks"``):
    every module-level dict of ``torch.nn.modules.module`` and ``torch.optim.optimizer`` whose name starts with
    ``_global_`` and mentions hooks (found by name, so kinds a later torch adds are seen too). The dicts themselves:
    deleting a key unregisters that hook."""
    found: dict[str, dict[Any, Any]] = {}
    for wanted, module in ((modules, _module_globals), (optimizers, _optimizer_globals)):
        if wanted:
            found.update({f"{module.__name__}.{name}": value for name, value in vars(module).items()
                          if name.startswith("_global_") and "hook" in name and isinstance(value, dict)})
    return found


def print_options() -> dict[str, Any]:
    """torch's print options, as ``torch.set_printoptions(**print_options())`` takes them back."""
    return {name: getattr(torch._tensor_str.PRINT_OPTS, name) for name in _PRINT_OPTIONS}


def function_modes() -> list[Any]:
    """The torch function modes in force, the innermost last (``TorchFunctionMode`` subclasses a ``with`` entered,
    and the ``DeviceContext`` that ``torch.set_default_device`` keeps at the bottom)."""
    return torch.overrides._get_current_function_mode_stack()


def dispatch_modes() -> list[Any]:
    """The torch dispatch modes in force, the innermost last."""
    return torch.utils._python_dispatch._get_current_dispatch_mode_stack()


def default_device_set() -> bool:
    """True while ``torch.set_default_device`` keeps a device in force (its mode is on the stack), even the CPU:
    ``torch.set_default_device(None)`` takes it off."""
    return any(isinstance(mode, torch.utils._device.DeviceContext) for mode in function_modes())


def put_back_modes(function: list[Any], dispatch: list[Any]) -> list[Any]:
    """Leave every mode entered since :func:`function_modes` and :func:`dispatch_modes` returned ``function`` and
    ``dispatch`` (and enter again any of those left since), through the modes' own ``__exit__``/``__enter__``;
    return the modes taken off. ``set_default_device``'s mode stays: it puts the default device back itself."""
    taken = dispatch_modes()[len(dispatch):]
    for mode in reversed(taken):  # a dispatch mode's own __exit__ also puts back torch's "in a mode" flags
        type(mode).__exit__(mode, None, None, None)
    keep = [mode for mode in function if not isinstance(mode, torch.utils._device.DeviceContext)]
    now = [mode for mode in function_modes() if not isinstance(mode, torch.utils._device.DeviceContext)]
    if [id(mode) for mode in now] != [id(mode) for mode in keep]:
        for mode in reversed(now):  # the innermost first: TorchFunctionMode.__exit__ leaves the innermost mode
            torch.overrides.TorchFunctionMode.__exit__(mode, None, None, None)
        for mode in keep:
            torch.overrides.TorchFunctionMode.__enter__(mode)
        taken += [mode for mode in now if all(mode is not kept for kept in keep)]
    return taken


def storage_key(tensor: torch.Tensor) -> tuple[str, int] | None:
    """Identifies the memory a tensor lives in (device and storage address): views of one storage share it. None for
    a tensor with no memory of its own to compare (empty, on the meta device, sparse).

    Usage: ``storage_key(w.t()) == storage_key(w)``
    """
    if tensor.numel() == 0 or tensor.is_meta:
        return None
    try:
        return (str(tensor.device), tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. sparse)
        return None
