"""The articles' models reproduce their numbers (M1) and shapes (L1-L2)."""

from __future__ import annotations

import pytest
import torch

from course_utils.hooks import HookRegistry, assert_no_hooks
from course_utils.models import MLP_INPUT, LeNet, seed_mlp


def test_seed_mlp_reproduces_example_m1_whatever_the_seed() -> None:
    model = seed_mlp()
    outputs = {}
    with HookRegistry(model) as hooks:
        for name in ("fc1", "relu1", "fc2"):
            hooks.forward(name, lambda m, i, o, name=name: outputs.__setitem__(name, o.detach()))
        model(torch.tensor(MLP_INPUT))
    assert outputs["fc1"].tolist() == [[7.0, -13.0, 27.0, -29.0]]
    assert outputs["relu1"].tolist() == [[7.0, 0.0, 27.0, 0.0]]
    assert outputs["fc2"].tolist() == [[89.0]]
    assert_no_hooks(model)
    torch.manual_seed(1)  # the weights do not depend on the seed
    first = seed_mlp().state_dict()
    torch.manual_seed(2)
    assert all(torch.equal(first[k], v) for k, v in seed_mlp().state_dict().items())


def test_lenet_shapes_and_int_input_error() -> None:
    torch.manual_seed(0)
    model = LeNet()
    x = torch.arange(1024).view(1, 1, 32, 32)
    with pytest.raises(RuntimeError):  # Example L1 as written: int64 input
        model(x)
    seen = {}
    with HookRegistry(model) as hooks:
        hooks.forward("conv2", lambda m, i, o: seen.update(conv2=tuple(o.shape)))  # update() returns None
        assert tuple(model(x.float()).shape) == (1, 10)
    assert seen["conv2"] == (1, 16, 10, 10)
    with pytest.raises(ValueError, match=r"\(N, 1, 32, 32\)"):
        model(torch.zeros(1, 3, 32, 32))
