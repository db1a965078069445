"""course_utils.memory: SavedTensorLog counts what autograd saves, per layer, each storage once, parameters and buffers
aside."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from course_utils.hooks import count_hooks
from course_utils.machinery.messages import in_language
from course_utils.memory import (
    OUTSIDE,
    SavedTensorLog,
    layer_label,
    saved_tensor_hooks_active,
    storage_key,
    tensor_bytes,
)


def _mlp() -> nn.Sequential:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))


def test_counts_each_storage_once_and_skips_parameter_views() -> None:
    model, x = _mlp(), torch.randn(4, 5)
    with SavedTensorLog(model) as log:
        model(x).sum().backward()
    # by hand: the Linear saves x (4x5 floats); the ReLU saves its output (4x7), which the last Linear saves again
    assert log.by_layer() == {"0": 4 * 4 * 5, "1": 4 * 4 * 7, "2": 0}
    assert log.total_bytes == 4 * (4 * 5 + 4 * 7)
    kinds = [(r.layer, r.first_saved_by, r.parameter) for r in log.records]
    assert kinds == [("0", None, False), ("1", None, False), ("2", "1", False), ("2", None, True)]
    assert [r.duplicate for r in log.records] == [False, False, True, False]  # the ReLU's output, saved again by "2"
    assert log.naive_bytes == log.total_bytes + 4 * 4 * 7 + 4 * 3 * 7


def test_gradients_are_unchanged_and_hooks_are_gone() -> None:
    model, x = _mlp(), torch.randn(4, 5)
    model(x).pow(2).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    with SavedTensorLog(model):
        assert saved_tensor_hooks_active() and count_hooks(model) == 2 * 3
        loss = model(x).pow(2).sum()
    loss.backward()
    assert all(torch.equal(p.grad, e) for p, e in zip(model.parameters(), expected))
    assert not saved_tensor_hooks_active() and count_hooks(model) == 0


def test_buffers_are_listed_like_parameters_and_not_counted() -> None:
    """BatchNorm2d saves its input, its running mean and variance (buffers), its weight (a parameter), then the mean
    and inverse standard deviation of the batch: only the input and the batch's two statistics are new memory."""
    torch.manual_seed(0)
    model, x = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3)), torch.randn(2, 1, 6, 6)
    with SavedTensorLog(model) as log:
        model(x).sum().backward()
    batch_norm = [(r.shape, r.parameter, r.buffer) for r in log.records if r.layer == "1"]
    assert sorted(batch_norm) == sorted([((2, 3, 4, 4), False, False), ((3,), False, True), ((3,), False, True),
                                         ((3,), True, False), ((3,), False, False), ((3,), False, False)])
    assert [r.buffer for r in log.records if r.layer == "0"] == [False, False]  # the conv's input, weight
    assert log.by_layer() == {"0": 4 * 2 * 6 * 6, "1": 4 * (2 * 3 * 4 * 4 + 3 + 3)}
    assert log.naive_bytes == log.total_bytes + 4 * 3 * 1 * 3 * 3 + 2 * 4 * 3 + 4 * 3  # conv weight, buffers, bn weight


def test_without_a_model_everything_is_outside() -> None:
    a = torch.randn(3, requires_grad=True)
    with SavedTensorLog() as log:
        (a * a).sum()
    assert log.by_layer() == {OUTSIDE: 12}       # a saved twice by mul: one storage
    with in_language("zh"):                      # the key stays English (code compares it); a table shows the label
        assert log.records[0].layer == OUTSIDE == "(outside any layer)"
        assert [layer_label(name) for name in ("(outside any layer)", "fc1")] == ["（不在任何层内）", "fc1"]
    assert layer_label(OUTSIDE) == "(outside any layer)"


def test_a_freed_address_is_not_taken_for_a_duplicate() -> None:
    a = torch.randn(256, requires_grad=True)
    with SavedTensorLog() as log:
        for _ in range(3):
            a.exp().sum().backward()             # each graph is freed before the next forward
    assert [r.duplicate for r in log.records] == [False, False, False]
    assert log.total_bytes == 3 * 256 * 4


def test_bad_input_and_reuse_are_refused() -> None:
    with pytest.raises(TypeError, match="nn.Module"):
        SavedTensorLog("model")  # type: ignore[arg-type]
    log = SavedTensorLog()
    with log:
        pass
    with pytest.raises(RuntimeError, match="already in use"):
        log.__enter__()


def test_small_helpers() -> None:
    w = torch.zeros(3, 4)
    assert storage_key(w.t()) == storage_key(w) and tensor_bytes(w) == 48
    assert tensor_bytes(torch.zeros(2, dtype=torch.int64)) == 16


def test_every_hook_goes_even_when_one_removal_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """SavedTensorLog owns its module hooks through a HookRegistry: a removal that fails does not stop the others."""
    model, real_remove, calls = _mlp(), RemovableHandle.remove, []

    def fails_once(handle: RemovableHandle) -> None:
        calls.append(handle)
        if len(calls) == 1:
            raise RuntimeError("this removal fails")
        real_remove(handle)

    log = SavedTensorLog(model)
    log.__enter__()
    assert count_hooks(model) == 6  # a pre-hook and a hook on each of the 3 layers
    monkeypatch.setattr(RemovableHandle, "remove", fails_once)
    with pytest.raises(RuntimeError, match="this removal fails"):
        log.__exit__(None, None, None)
    assert len(calls) == 6 and count_hooks(model) == 1 and not saved_tensor_hooks_active()
    assert storage_key(torch.empty(0)) is None  # no memory of its own to compare
