"""HookTimeline records the real firing order, changes no gradient, and leaves no hook behind."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
import torch.nn as nn

from course_utils.hooks import assert_no_hooks, count_hooks
from course_utils.machinery.messages import in_language, width
from course_utils.machinery.notebook import _configure_matplotlib
from course_utils.timeline import HookTimeline


def small_graph() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    z = x * w
    return x, w, z, (z * z).sum()


def watched_backward() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, HookTimeline]:
    """small_graph's backward pass recorded: x's accumulation, z's tensor hook, retain_grad and node."""
    x, w, z, loss = small_graph()
    with HookTimeline() as timeline:
        timeline.watch_leaf(x, "x")
        timeline.watch_tensor(z, "z")
        timeline.watch_retain_grad(z, "z")
        timeline.watch_node(z, "z")
        loss.backward()
    return x, w, z, timeline


def test_tensor_level_order_matches_pytorch_2() -> None:
    x, w, z, timeline = watched_backward()
    assert timeline.order() == [
        "tensor hook: z",
        "retain_grad: z",  # stored after the tensor hooks (PyTorch >= 2.0), before the node runs
        "grad_fn pre-hook: z.grad_fn (MulBackward0)",
        "grad_fn hook: z.grad_fn (MulBackward0)",
        "post-accumulate hook: x",
    ]
    assert torch.equal(x.grad, 2 * z.detach() * w.detach())  # observers changed nothing
    assert_no_hooks(x, w, z)


def test_retain_grad_sees_what_a_user_hook_returned() -> None:
    x, w, z, loss = small_graph()
    z.retain_grad()  # the user's own retain_grad: the event must come after it stored the hooked gradient
    stored_at_event: list[torch.Tensor] = []
    with HookTimeline() as timeline:
        log = timeline.log

        def spy(kind: str, target: str, phase: str | None = None) -> None:
            if kind == "retain_grad":
                stored_at_event.append(z.grad.clone())
            log(kind, target, phase)

        timeline.log = spy  # type: ignore[method-assign]
        timeline.watch_retain_grad(z, "z")
        with z.register_hook(timeline.wrap(lambda grad: grad * 2, "z (x2)")):
            loss.backward()
    assert timeline.order() == ["your hook: z (x2)", "retain_grad: z"]
    assert len(stored_at_event) == 1 and torch.equal(stored_at_event[0], 2 * 2 * z.detach())
    assert torch.equal(z.grad, 2 * 2 * z.detach())


def test_watch_retain_grad_leaves_the_tensor_as_it_was() -> None:
    x, w, z, loss = small_graph()
    assert not z.retains_grad
    with HookTimeline() as timeline:
        timeline.watch_retain_grad(z, "z")
        loss.backward(retain_graph=True)
    assert timeline.order() == ["retain_grad: z"]
    assert not z.retains_grad  # the timeline never turned retain_grad on (torch could not turn it off again)
    # the observer is gone: a second backward through the same graph logs nothing
    loss.backward()
    assert timeline.order() == ["retain_grad: z"]
    x, w, z, loss = small_graph()  # a tensor that retained its grad still does after the timeline
    z.retain_grad()
    with HookTimeline() as timeline:
        timeline.watch_retain_grad(z, "z")
        loss.backward()
    assert z.retains_grad and torch.equal(z.grad, 2 * z.detach())


def test_retain_grad_comes_before_the_node_pre_hook_whatever_the_watch_order() -> None:
    x, w, z, loss = small_graph()
    with HookTimeline() as timeline:
        timeline.watch_node(z, "z")  # node watched first, retain_grad second
        timeline.watch_retain_grad(z, "z")
        timeline.watch_tensor(z, "z")
        loss.backward()
    assert timeline.order() == [
        "tensor hook: z",
        "retain_grad: z",
        "grad_fn pre-hook: z.grad_fn (MulBackward0)",
        "grad_fn hook: z.grad_fn (MulBackward0)",
    ]


def test_module_and_global_order() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    x = torch.ones(1, 2, requires_grad=True)
    with HookTimeline() as timeline:
        timeline.watch_global()
        timeline.watch_module(model, ["0"])
        model(x).sum().backward()
    order = timeline.order()
    assert order[:6] == [
        "global forward pre-hook: Sequential",
        "global forward pre-hook: Linear",
        "forward pre-hook: 0",
        "global forward hook: Linear",
        "forward hook: 0",
        "global forward pre-hook: ReLU",
    ]
    assert order.index("backward pre-hook: 0") < order.index("full backward hook: 0")
    assert {e.phase for e in timeline.events[:6]} == {"forward"}
    assert timeline.events[-1].phase == "backward"
    assert count_hooks(model, include_global=True) == 0


def test_hooks_removed_when_the_body_raises_and_bad_targets_are_explained() -> None:
    model = nn.Linear(2, 1)
    with pytest.raises(RuntimeError, match="boom"):
        with HookTimeline() as timeline:
            timeline.watch_global()
            timeline.watch_module(model)
            raise RuntimeError("boom")
    assert_no_hooks(model)
    x, w, z, loss = small_graph()
    timeline = HookTimeline()
    with pytest.raises(ValueError, match="is a leaf"):
        timeline.watch_retain_grad(x, "x")
    with pytest.raises(ValueError, match="no grad_fn"):
        timeline.watch_node(x, "x")
    with pytest.raises(ValueError, match="Nothing to draw"):
        timeline.plot()
    timeline.stop()


def tensor_hook_then_leaf() -> HookTimeline:
    """small_graph's backward pass recorded with z's tensor hook and w's accumulation only."""
    x, w, z, loss = small_graph()
    with HookTimeline() as timeline:
        timeline.watch_tensor(z, "z")
        timeline.watch_leaf(w, "w")
        loss.backward()
    return timeline


def test_plot_and_table() -> None:
    timeline = tensor_hook_then_leaf()
    figure = timeline.plot()
    labels = [tick.get_text() for tick in figure.axes[0].get_yticklabels()]
    assert labels == ["tensor hook", "post-accumulate hook"]
    assert figure.axes[0].get_xlabel() == "firing order (red: backward pass)"  # no forward event: no blue in the key
    assert timeline.table().splitlines()[1].split() == ["1", "backward", "tensor", "hook", "z"]
    assert HookTimeline().table() == "(no hook fired)"
    model = nn.Linear(2, 1)
    with HookTimeline() as timeline:  # both passes fired: the key names both
        timeline.watch_module(model)
        model(torch.ones(1, 2, requires_grad=True)).sum().backward()
    figure = timeline.plot()
    assert figure.axes[0].get_xlabel() == "firing order (blue: forward pass, red: backward pass)"
    assert_no_hooks(model)


def test_the_table_in_chinese_names_passes_and_kinds_in_chinese_lined_up_by_display_width() -> None:
    timeline = tensor_hook_then_leaf()
    with in_language("zh"):
        lines = timeline.table().splitlines()
        empty = HookTimeline().table()
    assert [line.split() for line in lines] == [["#", "传播", "钩子", "对象"], ["1", "反向", "张量钩子", "z"],
                                                ["2", "反向", "梯度累加后钩子", "w"]]
    # Every column starts at the same display column on every line (a Chinese character takes two).
    for word in (1, 2, 3):
        assert len({width(line[:line.index(line.split()[word])]) for line in lines}) == 1
    assert [event.kind for event in timeline.events] == ["tensor hook", "post-accumulate hook"]  # the data stays
    with in_language("zh"):  # notebook 02's replay names the firing hook in its alt text
        assert [event.kind_label for event in timeline.events] == ["张量钩子", "梯度累加后钩子"]
    assert empty == "（没有钩子被触发）"


def test_the_node_lanes_in_chinese_use_the_glossary_terms() -> None:
    """The grad_fn kinds read 节点预钩子 / 节点钩子 (GLOSSARY.md), as notebook 02's prose names them; the target column
    already shows the grad_fn."""
    timeline = watched_backward()[3]
    with in_language("zh"), plt.rc_context():
        _configure_matplotlib("zh")  # the Chinese notebook's fonts: the lanes are drawn in Chinese
        labels = [event.kind_label for event in timeline.events]
        table = timeline.table().splitlines()
        figure = timeline.plot()
        lanes = [tick.get_text() for tick in figure.axes[0].get_yticklabels()]
        plt.close(figure)
    assert labels == ["张量钩子", "retain_grad", "节点预钩子", "节点钩子", "梯度累加后钩子"]
    assert table[3].split() == ["3", "反向", "节点预钩子", "z.grad_fn", "(MulBackward0)"]
    assert "节点钩子" in lanes and "节点预钩子" in lanes
    assert [event.kind for event in timeline.events][2:4] == ["grad_fn pre-hook", "grad_fn hook"]  # compared: English
