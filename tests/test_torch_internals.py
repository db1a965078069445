"""The private torch names the course reads live in course_utils/_torch_internals.py only, each pinned here by a test
that fails if a PyTorch release moves it (see PRIVATE_NAMES)."""

from __future__ import annotations

import ast
from pathlib import Path

import torch
import torch.nn as nn
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

from course_utils import _torch_internals
from course_utils._torch_internals import PRIVATE_NAMES, global_hook_dicts, print_options, storage_key

ROOT = Path(__file__).resolve().parent.parent
MACHINERY = ROOT / "course_utils" / "machinery"


def _sizes() -> dict[str, int]:
    return {name: len(hooks) for name, hooks in global_hook_dicts().items()}


def test_every_global_hook_is_seen() -> None:
    module = nn.modules.module
    registrations = {
        "module._global_forward_hooks": lambda: module.register_module_forward_hook(lambda m, a, o: None),
        "module._global_forward_pre_hooks": lambda: module.register_module_forward_pre_hook(lambda m, a: None),
        "module._global_backward_hooks": lambda: module.register_module_full_backward_hook(lambda m, gi, go: None),
        "module._global_backward_pre_hooks": lambda: module.register_module_full_backward_pre_hook(lambda m, g: None),
        "module._global_buffer_registration_hooks": lambda: module.register_module_buffer_registration_hook(
            lambda m, n, b: None),
        "module._global_module_registration_hooks": lambda: module.register_module_module_registration_hook(
            lambda m, n, s: None),
        "module._global_parameter_registration_hooks": lambda: module.register_module_parameter_registration_hook(
            lambda m, n, p: None),
        "optimizer._global_optimizer_pre_hooks": lambda: register_optimizer_step_pre_hook(lambda o, a, k: None),
        "optimizer._global_optimizer_post_hooks": lambda: register_optimizer_step_post_hook(lambda o, a, k: None),
    }
    for name, register in registrations.items():
        before = _sizes()
        handle = register()
        try:
            dotted = f"torch.nn.modules.{name}" if name.startswith("module.") else f"torch.optim.{name}"
            assert {grown for grown, size in _sizes().items() if size > before.get(grown, 0)} == {dotted}, name
            assert (dotted in global_hook_dicts(modules=False)) is name.startswith("optimizer.")
        finally:
            handle.remove()
        assert _sizes() == before


def test_print_options_are_read_as_set() -> None:
    before = print_options()
    try:
        torch.set_printoptions(precision=7, threshold=50, edgeitems=2, linewidth=60, sci_mode=True)
        assert print_options() == {"precision": 7, "threshold": 50, "edgeitems": 2, "linewidth": 60, "sci_mode": True}
        assert repr(torch.tensor([1.0])) == "tensor([1.0000000e+00])"
    finally:
        torch.set_printoptions(**before)
    assert print_options() == before


def test_storage_keys_tell_shared_memory() -> None:
    w = torch.ones(3, 4)
    assert storage_key(w.t()) == storage_key(w) != storage_key(w.clone())
    assert storage_key(torch.empty(0)) is None and storage_key(torch.empty(2, device="meta")) is None


def _private_torch_names(path: Path) -> set[str]:
    """Dotted torch names with a private part (``torch._C.x``, ``torch.utils._device``) a file reads, and the
    ``_global_*hooks`` it finds by name in torch's modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = {"torch": "torch"}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("torch"):
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else "torch"
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            found |= {f"{node.module}.{a.name}" for a in node.names
                      if any(part.startswith("_") and not part.startswith("__")
                             for part in f"{node.module}.{a.name}".split("."))}
    for node in ast.walk(tree):
        chain, current = [], node
        while isinstance(current, ast.Attribute):
            chain.append(current.attr)
            current = current.value
        if chain and isinstance(current, ast.Name) and current.id in aliases:
            parts = aliases[current.id].split(".") + chain[::-1]
            if any(part.startswith("_") and not part.startswith("__") for part in parts):
                found.add(".".join(parts))
    found = {name for name in found if not any(other.startswith(name + ".") for other in found)}
    if '"_global_"' in path.read_text(encoding="utf-8"):
        found |= {f"{module}._global_*hooks" for module, alias in (("torch.nn.modules.module", "_module_globals"),
                                                                     ("torch.optim.optimizer", "_optimizer_globals"))
                  if alias in aliases}
    return found


def test_the_private_names_are_read_in_one_place_and_each_is_pinned() -> None:
    assert _private_torch_names(Path(_torch_internals.__file__)) == set(PRIVATE_NAMES)
    tests = {test.split("::")[1] for test in PRIVATE_NAMES.values()}
    assert tests <= set(globals()), "each private name names the test that pins it"
    machinery = [path for path in MACHINERY.rglob("*.py") if "exercises" not in path.parts]
    elsewhere = {str(path.relative_to(ROOT)): names for path in machinery if (names := _private_torch_names(path))}
    assert not elsewhere, f"private torch names outside course_utils/_torch_internals.py: {elsewhere}"
    assert len(PRIVATE_NAMES) <= 6  # the mode stacks (issue 45) added three: torch has no public API for them


def test_modes_left_on_are_left() -> None:
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    from course_utils._torch_internals import default_device_set, dispatch_modes, function_modes, put_back_modes

    before = (function_modes(), dispatch_modes())
    assert not default_device_set()
    torch.set_default_device("cpu")
    assert default_device_set() and torch.get_default_device() == torch.device("cpu")
    function, dispatch = TorchFunctionMode(), TorchDispatchMode()
    function.__enter__(), dispatch.__enter__()
    assert function_modes()[-1] is function and dispatch_modes()[-1] is dispatch
    assert put_back_modes(*before) == [dispatch, function]
    assert default_device_set(), "set_default_device's own mode stays: the guard puts the device back with it"
    torch.set_default_device(None)
    assert (function_modes(), dispatch_modes()) == before and not default_device_set()
