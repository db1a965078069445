"""Each exercise accepts a right answer and rejects typical wrong ones with a useful hint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from course_utils.checks import all_exercises, check
from course_utils.course import course_map, read_opening


def out(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().out


def test_01_1_prediction(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("01.1", [4, 7, 10, 13])
    assert not check("01.1", torch.tensor([3.0, 6.0, 9.0, 12.0]))  # forgot the +1 hook
    assert "last hook returns" in out(capsys)


def test_01_2_clamp_hook(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("01.2", lambda grad: grad.clamp(-1, 1))
    assert not check("01.2", lambda grad: None)
    assert "return" in out(capsys)
    assert not check("01.2", lambda grad: grad.clamp(0, 1))
    assert "inside [-1, 1]" in out(capsys)


def test_01_3_norm_recorder(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("01.3", lambda norms: (lambda grad: norms.append(grad.norm().item())))
    assert not check("01.3", lambda norms: (lambda grad: norms.append(grad.norm().item()) or grad * 2))
    assert "must return None" in out(capsys)
    assert not check("01.3", lambda norms: (lambda grad: norms.append(grad.abs().sum().item())))
    assert "L2 norm" in out(capsys)


def leaky(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    received: list[torch.Tensor] = []
    w.register_hook(lambda grad: received.append(grad))
    ((w * x).sum() ** 2).backward()
    return received[0]


def leaks_only_on_error(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    received: list[torch.Tensor] = []
    handle = w.register_hook(lambda grad: received.append(grad))
    ((w * x).sum() ** 2).backward()
    handle.remove()
    return received[0]


def test_02_2_leaked_handle(capsys: pytest.CaptureFixture[str]) -> None:
    assert not check("02.2", leaky)
    assert "still registered" in out(capsys)
    assert not check("02.2", leaks_only_on_error)
    assert "finally" in out(capsys)


def test_02_3_order_is_checked_live(capsys: pytest.CaptureFixture[str]) -> None:
    right = ["tensor hook", "retain_grad", "grad_fn pre-hook", "grad_fn hook", "post-accumulate hook"]
    assert check("02.3", right)
    assert not check("02.3", ["retain_grad", *right[:1], *right[2:]])  # the PyTorch 1.x intuition
    assert "Not the order" in out(capsys)
    assert not check("02.3", right[:3])
    assert "each once" in out(capsys)


def test_03_1_conv2_extractor(capsys: pytest.CaptureFixture[str]) -> None:
    def right(model, x):  # type: ignore[no-untyped-def]
        grabbed = {}
        with model.conv2.register_forward_hook(lambda m, a, o: grabbed.update(o=o.detach())):
            model(x)
        return grabbed["o"]

    def leaky(model, x):  # type: ignore[no-untyped-def]
        grabbed = {}
        model.conv2.register_forward_hook(lambda m, a, o: grabbed.update(o=o.detach()))
        model(x)
        return grabbed["o"]

    def wrong_layer(model, x):  # type: ignore[no-untyped-def]
        grabbed = {}
        with model.conv1.register_forward_hook(lambda m, a, o: grabbed.update(o=o.detach())):
            model(x)
        return grabbed["o"]

    assert check("03.1", right)
    assert not check("03.1", leaky)
    assert "still on the model" in out(capsys)
    assert not check("03.1", wrong_layer)
    assert "(N, 16, 10, 10)" in out(capsys)


def test_03_2_normalising_pre_hook(capsys: pytest.CaptureFixture[str]) -> None:
    def in_place(module, args):  # type: ignore[no-untyped-def]
        x = args[0]
        x.sub_(x.mean(dim=1, keepdim=True)).div_(x.std(dim=1, keepdim=True, unbiased=False))

    assert check("03.2", lambda m, args: ((args[0] - args[0].mean(1, keepdim=True)) / args[0].std(1, keepdim=True, unbiased=False),))
    assert not check("03.2", in_place)
    assert "in place" in out(capsys)
    assert not check("03.2", lambda m, args: None)
    assert "raw input" in out(capsys)


def test_03_3_and_03_4(capsys: pytest.CaptureFixture[str]) -> None:
    right = ["global forward pre-hook", "forward pre-hook", "global forward hook", "forward hook"]
    assert check("03.3", right)
    assert not check("03.3", ["global forward pre-hook", "forward pre-hook", "forward hook", "global forward hook"])
    assert "Not the order" in out(capsys)
    assert check("03.4", "The rectified values")
    assert not check("03.4", "the original values")


def test_04_exercises(capsys: pytest.CaptureFixture[str]) -> None:
    assert check("04.1", ((4,), (2, 3), (3, 4)))
    assert not check("04.1", ((4,), (2, 3), (4, 3)))  # weight in its own shape: the intuition, not the hook
    assert "transposed" in out(capsys)
    assert check("04.2", lambda m, gi, go: tuple(g.clamp(-1, 1) for g in gi))
    assert not check("04.2", lambda m, gi, go: None)
    assert "unchanged" in out(capsys)
    assert check("04.3", ["backward pre-hook: 1", "full backward hook: 1", "backward pre-hook: 0", "full backward hook: 0"])
    assert not check("04.3", ["backward pre-hook: 0", "full backward hook: 0", "backward pre-hook: 1", "full backward hook: 1"])
    assert check("04.4", "it sees only the last autograd node")
    assert not check("04.4", "fc1 has no gradient")


def test_05_exercises(capsys: pytest.CaptureFixture[str]) -> None:
    from course_utils.exercises.nb05 import exercise_05_2
    from course_utils.saliency import guided_backprop, vanilla_gradient

    assert check("05.1", lambda x, g: g.clamp(min=0) * (x > 0))
    assert not check("05.1", lambda x, g: g * (x > 0))
    assert "plain ReLU backward" in out(capsys)
    assert not check("05.1", lambda x, g: g.clamp(min=0))
    assert "deconvnet" in out(capsys)
    model, x = exercise_05_2()
    assert check("05.2", guided_backprop(model, x, functional=True))
    assert not check("05.2", vanilla_gradient(model, x))
    assert "vanilla gradient" in out(capsys)
    assert not check("05.3", "the trained network is broken")


def test_06_exercises(capsys: pytest.CaptureFixture[str]) -> None:
    right = lambda a, g: (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)  # noqa: E731
    assert check("06.1", right)
    assert not check("06.1", lambda a, g: (a * g).sum(dim=1).clamp(min=0))
    assert "element-wise" in out(capsys)
    assert not check("06.1", lambda a, g: (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1))
    assert "ReLU" in out(capsys)
    assert check("06.2", "where the gradient is spatially constant") and not check("06.2", "at every layer")
    assert check("06.3", "right") and not check("06.3", "left")


def test_07_exercises(capsys: pytest.CaptureFixture[str]) -> None:
    from course_utils.regularize import drop_block, dropout2d

    assert check("07.1", lambda model: dropout2d(model, "2", 0.5))
    assert not check("07.1", lambda model: dropout2d(model, ["0", "2"], 0.5))
    assert "Exactly one forward hook" in out(capsys)
    assert not check("07.1", lambda model: drop_block(model, "2", 0.0, 3))
    assert "zeroed" in out(capsys)
    assert check("07.2", "blocks overlap and fewer blocks cover the borders") and not check("07.2", "gamma is rounded down")
    assert check("07.3", "post-accumulate-grad hook") and not check("07.3", "tensor hook on the parameter")


def test_every_exercise_is_used_in_a_notebook() -> None:
    notebooks = Path(__file__).resolve().parent.parent / "notebooks"
    sources = "".join(
        "".join(cell["source"]) for path in notebooks.glob("*.ipynb") for cell in json.loads(path.read_text())["cells"]
    )
    for exercise_id in all_exercises():
        assert f'check("{exercise_id}"' in sources, f"exercise {exercise_id} is not checked in any notebook"


def test_course_map_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="No course notebooks"):
        course_map(tmp_path)
    bad = tmp_path / "01_x.ipynb"
    bad.write_text(json.dumps({"cells": [{"cell_type": "markdown", "source": "# Title only"}]}))
    with pytest.raises(ValueError, match="lacks learn, minutes"):
        read_opening(bad)
