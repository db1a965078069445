"""The course's widgets, driven from Python as a learner drives them with the mouse: each control changes the
choice, and the figure shown -- with its alt text -- follows (tests/browser/test_jupyterlab.py drives one in
JupyterLab). FigureExplorer, every explorer a notebook builds, and the same driving on ipywidgets 7 (Colab's)."""

from __future__ import annotations

import html
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
import torch.nn as nn

from course_utils.attention_view import attention_explorer
from course_utils.charts import checkpoint_bars, feature_histograms
from course_utils.charts import graphs_per_call as graphs_chart
from course_utils.hooks import UnknownLayerError, assert_no_hooks
from course_utils.machinery.messages import set_language, width
from course_utils.machinery.notebook import _configure_matplotlib
from course_utils.memory import checkpoint_memory
from course_utils.recompiles import PATTERNS, graphs_per_call, pattern_options
from course_utils.saliency import grad_cam
from course_utils.widgets import METHODS, WIDGET_VIEW, FigureExplorer, SaliencyExplorer
from tests.test_timeline import watched_backward

ROOT = Path(__file__).resolve().parent.parent


def shown(output_widget) -> dict:
    """The one figure output an Output widget shows."""
    (output,) = output_widget.outputs
    assert output["output_type"] == "display_data"
    return output


def controls(explorer: FigureExplorer) -> tuple[tuple, Any]:
    """An explorer's widget as a learner sees it: the controls of its first row, and the Output showing the figure."""
    box = explorer.widget()
    return box.children[0].children, box.children[-1]


def alt_shown(output_widget) -> str:
    output = shown(output_widget)
    alt = output["data"]["text/plain"]
    assert output["data"]["text/html"].endswith(f' alt="{html.escape(alt, quote=True)}"/>')
    return alt


# -- FigureExplorer ----------------------------------------------------------------------------------------
def bars(n: int, colour: str):
    fig, ax = plt.subplots()
    ax.bar(range(n), range(1, n + 1), color=colour)
    return fig, {"top": n}


def test_figure_explorer_follows_its_controls_and_draws_each_choice_once() -> None:
    drawn = []

    def draw(n, colour):
        drawn.append((n, colour))
        return bars(n, colour)

    open_before = set(plt.get_fignums())
    explorer = FigureExplorer(draw, alt="{n} {colour} bars rising from one to {top}, each one taller than the last.",
                              controls={"n": [2, 3, 5], "colour": ["red", "blue"]}, value={"n": 3})
    box = explorer.widget()
    slider, buttons = box.children[0].children
    output = box.children[1]
    assert type(slider).__name__ == "SelectionSlider" and type(buttons).__name__ == "ToggleButtons"
    assert alt_shown(output).startswith("3 red bars rising from one to 3")
    slider.value = 5
    assert explorer.state == {"n": 5, "colour": "red"} and alt_shown(output).startswith("5 red bars")
    buttons.value = "blue"
    assert alt_shown(output).startswith("5 blue bars")
    slider.value = 3
    buttons.value = "red"
    assert drawn == [(3, "red"), (5, "red"), (5, "blue"), (3, "blue")]  # (3, red) again: kept, not drawn again
    assert set(plt.get_fignums()) <= open_before  # every figure it drew is closed
    assert explorer.widget() is box


def test_the_displayed_explorer_holds_the_controls_and_the_figure_and_refuses_unknown_choices() -> None:
    explorer = FigureExplorer(lambda n: bars(n, "red"), alt="{n} red bars rising from one to {top}, left to right.",
                              controls={"n": [2, 4]})
    data, metadata = explorer._repr_mimebundle_()
    assert data[WIDGET_VIEW] == {"version_major": 2, "version_minor": 0, "model_id": explorer.widget().model_id}
    assert data["text/plain"] == explorer.alt_text() and metadata == {}
    assert data["text/html"] == shown(explorer.widget().children[1])["data"]["text/html"]
    with pytest.raises(ValueError, match="choose one of"):
        explorer.select(n=3)
    with pytest.raises(ValueError, match="Unknown control"):
        explorer.select(colour="red")
    with pytest.raises(ValueError, match="at least one control"):
        FigureExplorer(lambda: None, alt="x", controls={})
    with pytest.raises(ValueError, match="says too little"):
        FigureExplorer(lambda n: bars(n, "red"), alt="bars", controls={"n": [2]}).figure_output()


# -- the notebooks' explorers ---------------------------------------------------------------------------------
def test_notebook_02_replay_steps_through_the_hooks_in_firing_order() -> None:
    timeline = watched_backward()[-1]

    def replay(step):
        event = timeline.events[step - 1]
        return timeline.plot(upto=step), {"event": f"{event.kind} on {event.target}", "steps": len(timeline.events)}

    steps = list(range(1, len(timeline.events) + 1))
    stepper = FigureExplorer(replay, controls={"step": steps}, value={"step": steps[-1]},
                             alt="Step {step} of {steps} of one backward pass; the hook firing now: {event}.")
    (slider,), output = controls(stepper)
    assert alt_shown(output) == "Step 5 of 5 of one backward pass; the hook firing now: post-accumulate hook on x."
    slider.value = 2
    assert alt_shown(output) == "Step 2 of 5 of one backward pass; the hook firing now: retain_grad on z."
    with pytest.raises(ValueError, match="upto"):
        timeline.plot(upto=6)
    plt.close("all")


def test_notebook_03_layer_chooser_names_the_recordings_that_differ() -> None:
    torch.manual_seed(0)
    truth = {"bn": torch.randn(2, 3, 4, 4), "fc": torch.randn(2, 5)}
    rectified = {"bn": truth["bn"].relu(), "fc": truth["fc"]}          # what an in-place ReLU leaves in an alias
    features = {"by hand": truth, "naive hooks": rectified, "recorder": {k: v.clone() for k, v in truth.items()}}
    chooser = FigureExplorer(lambda layer: feature_histograms(features, layer), controls={"layer": ["bn", "fc"]},
                             alt="Histograms of the {count} values of {layer}; differ: {wrong}; below zero: "
                                 "{below[0]:.0%} by hand, {below[1]:.0%} as the naive hooks kept them.")
    (buttons,), output = controls(chooser)
    by_hand = float((truth["bn"] < 0).float().mean())
    assert alt_shown(output) == (f"Histograms of the 96 values of bn; differ: naive hooks; below zero: "
                                 f"{by_hand:.0%} by hand, 0% as the naive hooks kept them.")
    buttons.value = "fc"
    assert "of the 10 values of fc; differ: —;" in alt_shown(output)


def test_notebook_06_saliency_explorer_redraws_with_alt_text() -> None:
    ex = saliency_explorer()
    box = ex.widget()
    (photo, target), (layer, method), output = box.children[0].children, box.children[1].children, box.children[2]
    assert alt_shown(output).startswith("Grad-CAM map of 'class ")
    method.value = "Guided Backprop"
    assert ex.state["method"] == "Guided Backprop" and layer.disabled
    assert alt_shown(output).startswith("Guided Backprop map of") and "layer -" in alt_shown(output)
    photo.value = "b"
    assert ex.state["photo"] == "b" and target.value == ex.class_options("b")[0][1]
    assert "on 'b'" in alt_shown(output)
    assert [c.description for c in (photo, target, layer, method)] == ["photo", "class", "layer", "method"]
    assert [label for label, _ in method.options] == list(METHODS)
    set_language("zh")                                               # the Chinese notebook: its controls in Chinese
    try:
        with plt.rc_context():
            _configure_matplotlib("zh")                          # and its fonts: the title is drawn in Chinese
            chinese_explorer = saliency_explorer()
            in_chinese = chinese_explorer.widget()
            (photo, target), (layer, method) = in_chinese.children[0].children, in_chinese.children[1].children
            assert [c.description for c in (photo, target, layer, method)] == ["照片", "类别", "层", "方法"]
            assert list(method.options) == [("Grad-CAM", "Grad-CAM"), ("导向反向传播", "Guided Backprop"),
                                            ("导向 Grad-CAM", "Guided Grad-CAM"), ("普通梯度", "vanilla gradient")]
            method.value = "vanilla gradient"                    # the value stays the English key the code compares
            assert chinese_explorer.state["method"] == "vanilla gradient"
            assert alt_shown(in_chinese.children[2]).startswith("普通梯度 map of")   # the alt template is the caller's
    finally:
        set_language(None)
    assert_no_hooks(ex.model)


def test_notebook_08_checkpoint_explorer_measures_other_depths() -> None:
    memory, forwards = checkpoint_memory(4, [0, 1, 2, 4], width=8, batch=4)
    activation = 4 * 8 * 4                                         # one (batch, width) float32 activation
    peaks = {s: sum(m) for s, m in memory.items()}
    assert peaks[1] == peaks[0]                                    # one segment saves nothing
    assert peaks[2] == peaks[4] == min(peaks.values())             # s + 2n/s: 2 + 4 = 4 + 2, the tie of S6
    assert memory[4][0] - memory[2][0] == 2 * activation           # two more segment inputs kept
    assert forwards == {0: 4, 1: 8, 2: 8, 4: 8}                    # recomputation: every Linear runs twice
    with pytest.raises(ValueError, match="divide"):
        checkpoint_memory(4, [3])

    def peaks_for(blocks):
        every = [0] + [s for s in range(1, blocks + 1) if blocks % s == 0]
        return checkpoint_bars(*checkpoint_memory(blocks, every, width=8, batch=4))

    explorer = FigureExplorer(peaks_for, controls={"blocks": [4, 9]}, value={"blocks": 4},
                              alt="A chain of {blocks} blocks: the lowest peak, {best_mb:.4f} MB, at {best} segments.")
    (slider,), output = controls(explorer)
    assert alt_shown(output).endswith("at 2, 4 segments.")
    slider.value = 9
    assert alt_shown(output).endswith("at 3 segments.")            # 3 + 18/3 = 9 < 1 + 18, 9 + 2


def test_notebook_11_pattern_chooser_counts_the_graphs_of_each_pattern() -> None:
    measured = {"a fresh hook, a new number each call": [1, 2, 2]}   # as the notebook measures it

    def graphs_for(pattern):
        if pattern not in measured:
            measured[pattern] = graphs_per_call(pattern, calls=3)
        return graphs_chart(measured, pattern)

    chooser = FigureExplorer(graphs_for, controls={"pattern": pattern_options()}, labels={"pattern": "hook pattern"},
                             value={"pattern": "a fresh hook, a new number each call"},
                             alt="Graphs built after each of {calls} calls for the pattern '{pattern}': {per_call}.")
    (dropdown,), output = controls(chooser)
    assert type(dropdown).__name__ == "Dropdown"  # long labels: a list, not buttons
    assert dropdown.description == "hook pattern" and [label for label, _ in dropdown.options] == list(PATTERNS)
    assert alt_shown(output).endswith(": 1, 2, 2.")
    dropdown.value = "hooks never removed (case 3)"
    assert alt_shown(output).endswith("'hooks never removed (case 3)': 1, 2, 3.")
    dropdown.value = "no hook"
    assert alt_shown(output).endswith("'no hook': 1, 1, 1.")
    figure, _values = graphs_chart({"no hook": [1, 1, 1]}, "no hook")
    assert list(figure.axes[0].get_yticks()) == [0, 1, 2]  # it counts graphs: whole numbers only (no 0.5, 1.5)
    with pytest.raises(ValueError, match="Unknown pattern"):
        graphs_per_call("a hook in a hat")
    set_language("zh")                      # the Chinese notebook: the names in Chinese, the values the same keys
    try:
        with plt.rc_context():
            _configure_matplotlib("zh")         # and its fonts: the legend is drawn in Chinese
            in_chinese = FigureExplorer(lambda pattern: graphs_chart(measured, pattern),
                                        controls={"pattern": pattern_options()}, value={"pattern": "no hook"},
                                        alt="每次调用之后已经构建的图的数量，模式“{pattern}”：{per_call}。")
            (dropdown,), output = controls(in_chinese)
            assert [label for label, _ in dropdown.options] == [
                "每次调用都注册一个新钩子，读取新数字", "每次调用都注册一个新钩子，读取相同数字",
                "钩子从不移除（病例 3）", "没有钩子"]
            assert alt_shown(output) == "每次调用之后已经构建的图的数量，模式“没有钩子”：1, 1, 1。"
            assert in_chinese.state == {"pattern": "no hook"}
            figure, _values = graphs_chart(measured, "no hook")
            assert [text.get_text() for text in figure.axes[0].get_legend().get_texts()] == [
                "每次调用都注册一个新钩子，读取新数字", "钩子从不移除（病例 3）", "没有钩子"]
    finally:
        set_language(None)
    plt.close("all")


def _explorers(notebook: Path) -> list[tuple[str, set[str], dict[str, str]]]:
    """Each ``FigureExplorer(...)`` a notebook's code builds: its cell id, its controls' names and its labels."""
    import ast
    import json

    found = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
        for node in ast.walk(ast.parse(source)) if "FigureExplorer(" in source else ():
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FigureExplorer":
                given = {keyword.arg: keyword.value for keyword in node.keywords}
                names = {key.value for key in given["controls"].keys}  # type: ignore[attr-defined]
                labels = ast.literal_eval(given["labels"]) if "labels" in given else {}
                found.append((cell["id"], names, labels))
    return found


@pytest.mark.reads("notebooks/*.ipynb", "notebooks/zh/*.ipynb")
def test_every_notebook_explorer_labels_its_controls_in_the_notebooks_language() -> None:
    """A control shows its name unless the notebook labels it: the Chinese notebooks' labels are Chinese."""
    for english in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for language, notebook in (("en", english), ("zh", english.parent / "zh" / english.name)):
            for cell, names, labels in _explorers(notebook):
                assert set(labels) == names, f"{notebook.name} {cell}: label every control ({sorted(names)})"
                if language == "zh":
                    assert all(width(label) > len(label) for label in labels.values()), \
                        f"zh {notebook.name} {cell}: {labels}"  # a Chinese character takes two columns


def test_notebook_12_attention_explorer_shows_the_chosen_head_and_where_the_repeat_starts() -> None:
    heads, size = 4, 24
    patterns = {layer: torch.zeros(2, heads, size, size) for layer in (0, 1)}
    patterns[1][1, 3] = torch.eye(size)                             # one head of one sequence: all on the diagonal
    explorer = attention_explorer(patterns, torch.tensor([5, 6]), value={"layer": 1, "head": 3, "sequence": 1},
                                  alt="Layer {layer}, head {head}, sequence {sequence}: a {size} by {size} grid; the "
                                      "last {repeat} tokens repeat from position {start}.")
    assert isinstance(explorer, FigureExplorer)
    (layer, head, sequence), output = controls(explorer)
    assert [type(c).__name__ for c in (layer, head, sequence)] == ["SelectionSlider"] * 3
    assert [c.description for c in (layer, head, sequence)] == ["layer", "head", "sequence"]
    assert alt_shown(output) == ("Layer 1, head 3, sequence 1: a 24 by 24 grid; the last 6 tokens repeat from "
                                 "position 18.")
    diagonal = shown(output)["data"]["text/html"]
    sequence.value = 0
    assert alt_shown(output).endswith("the last 5 tokens repeat from position 19.")
    assert shown(output)["data"]["text/html"] != diagonal             # another sequence: another picture
    head.value = 0
    assert explorer.state == {"layer": 1, "head": 0, "sequence": 0}
    with pytest.raises(ValueError, match=r"choose one of \[0, 1, 2, 3\]"):
        explorer.select(head=4)
    with pytest.raises(ValueError, match="one repeat length per sequence"):
        attention_explorer(patterns, torch.tensor([5]), alt=explorer.alt)
    with pytest.raises(ValueError, match="cached patterns"):
        attention_explorer({}, torch.tensor([5]), alt=explorer.alt)
    set_language("zh")                                               # the Chinese notebook: its controls in Chinese
    try:
        in_chinese = attention_explorer(patterns, torch.tensor([5, 6]), alt=explorer.alt)
    finally:
        set_language(None)
    assert in_chinese.labels == {"layer": "层", "head": "头", "sequence": "序列"}   # the controls' descriptions
    plt.close("all")


# -- SaliencyExplorer: its selection logic and caching, tested without a browser -------------------------------
def saliency_explorer() -> SaliencyExplorer:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 6)).eval()
    rng = np.random.default_rng(0)
    photos = {name: rng.integers(0, 255, size=(20, 24, 3), dtype=np.uint8) for name in ("a", "b")}
    return SaliencyExplorer(model, photos, ["0", "2"], [f"class {i}" for i in range(6)], top_k=3,
                            alt="{method} map of '{label}' on '{photo}' at layer {layer}, warm where it credits it.")


def test_initial_state_class_options_and_selections() -> None:
    ex = saliency_explorer()
    options = ex.class_options("a")
    assert len(options) == 3 and ex.state["target"] == options[0][1]
    probabilities = [float(label.rsplit("(", 1)[1].rstrip(")")) for label, _ in options]
    assert probabilities == sorted(probabilities, reverse=True)
    assert ex.state == {"photo": "a", "target": options[0][1], "layer": "2", "method": "Grad-CAM"}
    ex.select(target=5)  # a new photo resets the class, unless one is given
    assert ex.select(photo="b")["target"] == ex.class_options("b")[0][1]
    assert ex.select(photo="a", target=4)["target"] == 4
    with pytest.raises(ValueError, match="choose one of"):  # bad selections say what is allowed
        ex.select(method="LIME")
    with pytest.raises(ValueError, match="Unknown setting"):
        ex.select(colour="red")
    with pytest.raises(ValueError, match="class index"):
        ex.select(target=6)
    with pytest.raises(UnknownLayerError, match="Closest names"):
        SaliencyExplorer(ex.model, ex.photos, ["22"], ex.categories, alt=ex.alt)


def test_saliency_follows_the_selection_and_is_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    ex = saliency_explorer()
    ex.select(layer="0", target=2)
    expected = grad_cam(ex.model, "0", ex.inputs["a"], 2)[0]
    assert torch.equal(ex.saliency(), expected)
    calls = []
    monkeypatch.setattr("course_utils.widgets.grad_cam", lambda *a, **k: calls.append(a) or expected[None])
    ex.saliency()
    assert calls == []  # cached
    ex.select(layer="2")
    ex.saliency()
    assert len(calls) == 1
    for method in METHODS:
        ex.select(method=method)
        result = ex.saliency()
        assert result.shape == ((3, 224, 224) if method != "Grad-CAM" else (224, 224))  # photos are cropped to 224
    assert not ex.select(method="vanilla gradient") or not ex.uses_layer()
    assert_no_hooks(ex.model)


# -- ipywidgets 7 (Colab's 7.7.1) -----------------------------------------------------------------------------
DRIVE_ON_7 = """
import matplotlib; matplotlib.use("Agg")
import ipywidgets, matplotlib.pyplot as plt
assert ipywidgets.__version__.startswith("7."), ipywidgets.__version__
from course_utils.widgets import FigureExplorer, WIDGET_VIEW
def draw(n, colour):
    fig, ax = plt.subplots(); ax.bar(range(n), range(1, n + 1), color=colour); return fig, {"top": n}
e = FigureExplorer(draw, alt="{n} {colour} bars rising from one to {top}, each taller than the last.",
                   controls={"n": [2, 3, 5], "colour": ["red", "blue"]}, value={"n": 3})
data, metadata = e._repr_mimebundle_()
assert data[WIDGET_VIEW]["model_id"] == e.widget().model_id
slider, buttons = e.widget().children[0].children
slider.value = 5; buttons.value = "blue"
(output,) = e.widget().children[1].outputs
assert output["data"]["text/plain"].startswith("5 blue bars"), output["data"]["text/plain"]
print("driven on ipywidgets", ipywidgets.__version__)
"""


def ipywidgets_7(tmp_path: Path) -> Path | None:
    """A folder with ipywidgets 7 and what it needs that ipywidgets 8 does not: $COURSE_IPYWIDGETS7, or the wheels
    of Colab's package set that `make test-compat` keeps in its cache."""
    given = os.environ.get("COURSE_IPYWIDGETS7")
    if given:
        return Path(given)
    cache = Path(os.environ.get("COURSE_COMPAT_CACHE", Path.home() / ".cache" / "course-compat")) / "wheels"
    wheels = sorted(cache.glob("ipywidgets-7.*.whl")) + sorted(cache.glob("ipython_genutils-*.whl"))
    if not any(w.name.startswith("ipywidgets-7.") for w in wheels):
        return None
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp_path)
    return tmp_path


def test_the_explorer_drives_the_same_on_ipywidgets_7(tmp_path: Path) -> None:
    folder = ipywidgets_7(tmp_path)
    if folder is None:
        pytest.skip("no ipywidgets 7 here: set COURSE_IPYWIDGETS7 to a folder that holds it (pip install --target "
                    "DIR --no-deps ipywidgets==7.7.1 ipython_genutils), or run make test-compat first")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}
    run = subprocess.run([sys.executable, "-c", DRIVE_ON_7], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "driven on ipywidgets 7." in run.stdout
