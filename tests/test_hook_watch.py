"""hook_watch's one patch of PyTorch (course_utils/machinery/hook_watch.py, PATCHED): the upstream behaviour it works
around, pinned. When one of these fails, PyTorch changed: see whether the patch can go."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.modules.module as module_globals

from course_utils.machinery.hook_watch import PATCHED, HookMistake, watching_hooks


def test_pytorch_uses_a_forward_hooks_value_unchecked_and_the_next_layer_fails() -> None:
    """What the learner would see without the watch: an error about the next layer, not about their hook."""
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))
    with model[0].register_forward_hook(lambda module, args, output: "recorded"):
        with pytest.raises(TypeError, match=r"relu_\(\): argument 'input' \(position 1\) must be Tensor, not str"):
            model(torch.ones(2, 3))


def test_no_global_hook_sees_what_a_modules_own_hook_returned() -> None:
    """PyTorch runs the global forward hooks before a module's own ones: a global hook cannot watch their values."""
    seen, layer = [], nn.Linear(3, 3)
    with module_globals.register_module_forward_hook(lambda module, args, output: seen.append(output)), \
            layer.register_forward_hook(lambda module, args, output: output * 0):
        result = layer(torch.ones(1, 3))
    assert len(seen) == 1 and not torch.equal(seen[0], result), "a global hook now sees what local hooks return"


def test_the_watch_names_the_hook_and_puts_every_method_back() -> None:
    before = [vars(owner)[name] for owner, name, _kind in PATCHED]
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True))

    def recorder(module, args, output):
        return "recorded"

    with watching_hooks() as watch, model[0].register_forward_hook(recorder):
        with pytest.raises(HookMistake):
            model(torch.ones(2, 3))
    assert "`recorder` on a Linear returned a str, not a tensor" in str(watch.mistakes[0])
    assert [vars(owner)[name] for owner, name, _kind in PATCHED] == before


def test_a_tensor_in_place_of_a_layers_tuple_is_named_as_such() -> None:
    """A layer that returns a tuple (output, weights), a hook that returns only the tensor: said so, not 'a Tensor,
    not a tensor'."""
    attention = nn.MultiheadAttention(4, 1, batch_first=True)
    x = torch.ones(1, 2, 4)
    with watching_hooks() as watch, attention.register_forward_hook(lambda module, args, output: output[0]):
        with pytest.raises(HookMistake):
            attention(x, x, x)
    assert "returned a tensor, not a tuple" in str(watch.mistakes[0])
