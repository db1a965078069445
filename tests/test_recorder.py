"""ActivationRecorder: right where naive hooks and FX feature extraction are wrong, and leaves nothing behind."""

from __future__ import annotations

import gc
import importlib

import pytest
import torch
import torch.nn as nn
import torchvision
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack
from torchvision.models.feature_extraction import create_feature_extractor, get_graph_node_names

from course_utils.hooks import UnknownLayerError, assert_no_hooks
from course_utils.machinery.messages import in_language
from course_utils.memory import SavedTensorLog, saved_tensor_hooks_active
from course_utils.recorder import ActivationRecorder, LayerNeverRanError, NoGradientError, OverwrittenActivationError


@pytest.fixture(scope="module")
def resnet() -> tuple[nn.Module, torch.Tensor, list[str], dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None)
    x = torch.randn(1, 3, 64, 64)
    leaves = [name for name, module in model.named_modules() if not list(module.children())]
    return model, x, leaves, true_outputs(model, x, leaves)


def true_outputs(model: nn.Module, x: torch.Tensor, leaves: list[str]) -> dict[str, torch.Tensor]:
    """Ground truth: a copy of every leaf output taken the moment the layer returns it."""
    counts: dict[str, int] = {}
    truth: dict[tuple[str, int], torch.Tensor] = {}
    handles = []
    for name in leaves:
        def grab(module: nn.Module, args: tuple, output: torch.Tensor, name: str = name) -> None:
            counts[name] = counts.get(name, 0) + 1
            truth[(name, counts[name] - 1)] = output.detach().clone()
        handles.append(model.get_submodule(name).register_forward_hook(grab))
    try:
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    # keys as the recorder names them: plain name for one call, name#k for several
    return {(n if counts[n] == 1 else f"{n}#{k}"): t for (n, k), t in truth.items()}


def test_recorder_is_right_where_naive_hooks_are_wrong(resnet) -> None:
    model, x, leaves, truth = resnet
    naive: dict[str, list[torch.Tensor]] = {}
    handles = [model.get_submodule(n).register_forward_hook(
        lambda m, a, out, n=n: naive.setdefault(n, []).append(out.detach()) and None) for n in leaves]
    model(x)
    for handle in handles:
        handle.remove()
    with ActivationRecorder(model, leaves) as rec:
        model(x)
    assert len(rec.keys()) == len(truth) == 60
    assert all(torch.equal(rec.outputs[key], truth[key]) for key in truth)
    naive_flat = {(name if len(calls) == 1 else f"{name}#{k}"): out
                  for name, calls in naive.items() for k, out in enumerate(calls)}
    naive_wrong = [key for key in truth if not torch.equal(naive_flat[key], truth[key])]
    assert len(naive_wrong) == 17  # measured: in-place ReLUs and `out += identity` overwrite 17 aliases
    assert_no_hooks(model)


def test_recorder_agrees_with_fx_where_fx_is_right_and_not_where_it_is_wrong(resnet) -> None:
    model, x, leaves, truth = resnet
    _, nodes = get_graph_node_names(model)
    fx_name = {key: key.replace("#0", "").replace("#1", "_1") for key in truth}
    assert all(name in nodes for name in fx_name.values())
    fx = create_feature_extractor(model, return_nodes=list(fx_name.values()))(x)
    with ActivationRecorder(model, leaves) as rec:
        model(x)
    fx_right = [key for key in truth if torch.equal(fx[fx_name[key]], truth[key])]
    fx_wrong = [key for key in truth if key not in fx_right]
    assert len(fx_wrong) == 9 and len(fx_right) == 51  # measured on torch 2.14.1 / torchvision 0.29.1
    assert all(torch.equal(rec.output(key), fx[fx_name[key]]) for key in fx_right)
    assert all(torch.equal(rec.output(key), truth[key]) for key in fx_wrong)


def test_raise_mode_flags_exactly_the_overwritten_entries(resnet) -> None:
    model, x, leaves, truth = resnet
    with ActivationRecorder(model, leaves, on_overwrite="raise") as rec:
        model(x)
    flagged = []
    for key in rec.keys():
        try:
            value = rec.output(key)
        except OverwrittenActivationError as error:
            assert "aten.relu_" in str(error) or "aten.add_" in str(error)
            flagged.append(key)
        else:
            assert torch.equal(value, truth[key])
    assert len(flagged) == 17  # the 17 aliases a naive detach() hook gets wrong on resnet18


def test_a_layer_called_twice_gets_one_entry_per_call(resnet) -> None:
    model, x, _, _ = resnet
    with ActivationRecorder(model, ["layer1.0.relu", "layer1.0.bn1", "layer1.0.bn2"], inputs=True) as rec:
        model(x)
    assert rec.calls("layer1.0.relu") == 2
    assert rec.keys() == ["layer1.0.relu#0", "layer1.0.relu#1", "layer1.0.bn1", "layer1.0.bn2"]
    assert torch.equal(rec.output("layer1.0.relu#0"), torch.relu(rec.output("layer1.0.bn1")))
    assert torch.equal(rec.input("layer1.0.relu#0"), rec.output("layer1.0.bn1"))  # before rectification
    assert rec.input("layer1.0.relu#0").min() < 0 <= rec.output("layer1.0.relu#0").min()
    with pytest.raises(LookupError, match=r"ran 2 times.*'layer1.0.relu#0', 'layer1.0.relu#1'"):
        rec.output("layer1.0.relu")
    with pytest.raises(LayerNeverRanError, match="no call #5"):
        rec.output("layer1.0.relu#5")


def test_gradients_equal_autograd_with_in_place_relu() -> None:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(4, 5), nn.ReLU(inplace=True), nn.Linear(5, 2))
    x = torch.randn(3, 4)
    with ActivationRecorder(model, ["0", "1", "2"], gradients=True) as rec:
        out = model(x)
        (out**2).sum().backward()
    hidden = model[0](x)
    grad_hidden_out = torch.autograd.grad((model[2](torch.relu(hidden)) ** 2).sum(), hidden)[0]
    assert torch.allclose(rec.gradient("0"), grad_hidden_out)  # gradient w.r.t. the pre-ReLU values
    assert torch.allclose(rec.gradient("2"), 2 * out.detach())
    assert_no_hooks(model)


def test_clear_errors_for_missing_gradients() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    x = torch.ones(1, 2)
    with ActivationRecorder(model, ["0"], gradients=True) as rec:
        with torch.no_grad():
            model(x)
    with pytest.raises(NoGradientError, match="no_grad"):
        rec.gradient("0")
    with ActivationRecorder(model, ["0"], gradients=True) as rec:
        model(x)
    with pytest.raises(NoGradientError, match="no backward"):
        rec.gradient("0")
    with ActivationRecorder(model, ["0"]) as rec:
        model(x).sum().backward()
    with pytest.raises(NoGradientError, match="gradients=True"):
        rec.gradient("0")
    model[0].requires_grad_(False)
    with ActivationRecorder(model, ["0", "1"], gradients=True) as rec:
        model(x).sum().backward()
    assert torch.equal(rec.gradients["1"], torch.ones(1, 2))  # the mapping raises for the layer without one only
    with pytest.raises(NoGradientError, match="does not require grad"):
        rec.gradients["0"]
    with pytest.raises(NoGradientError, match="does not require grad"):
        rec.gradient("0")


def test_unknown_and_unused_layers() -> None:
    class WithSpareHead(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Linear(2, 2)
            self.spare = nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.body(x)

    model = WithSpareHead()
    with pytest.raises(UnknownLayerError, match="Closest names: 'body'"):
        ActivationRecorder(model, ["bodyy"])
    with ActivationRecorder(model, ["body", "spare"]) as rec:
        model(torch.ones(1, 2))
    assert rec.keys() == ["body"]
    with pytest.raises(LayerNeverRanError, match="Does forward\\(\\) use it"):
        rec.output("spare")
    with pytest.raises(UnknownLayerError, match="records: 'body', 'spare'"):
        rec.output("head")
    never_entered = ActivationRecorder(model, ["body"])
    with pytest.raises(LayerNeverRanError, match="never used in a `with` block"):
        never_entered.output("body")
    with pytest.raises(ValueError, match="on_overwrite"):
        ActivationRecorder(model, ["body"], on_overwrite="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="nn.Module"):
        ActivationRecorder("model", ["body"])  # type: ignore[arg-type]


@pytest.mark.parametrize("make", [
    lambda model: ActivationRecorder(model, ["0", "1"], inputs=True, gradients=True), SavedTensorLog])
def test_nothing_left_behind_after_an_exception(make) -> None:
    """The recorder and SavedTensorLog: the error gets out, and no hook, mode or saved-tensor hook stays."""
    class Boom(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise RuntimeError("boom")

    model = nn.Sequential(nn.Linear(2, 2), Boom())
    with pytest.raises(RuntimeError, match="boom"):
        with make(model):
            model(torch.ones(1, 2, requires_grad=True))
    assert_no_hooks(model)
    assert _get_current_dispatch_mode_stack() == [] and not saved_tensor_hooks_active()


def test_keep_last_and_keep_all_and_writes_after_closing() -> None:
    model = nn.Sequential(nn.Linear(2, 2))
    a, b = torch.ones(1, 2), 2 * torch.ones(1, 2)
    with ActivationRecorder(model, ["0"]) as last:
        model(a)
        out = model(b)
    assert torch.equal(last.output("0"), model(b).detach())
    with ActivationRecorder(model, ["0"], keep="all") as every:
        model(a)
        model(b)
    assert every.keys() == ["0#0", "0#1"]
    assert torch.equal(every.output("0#0"), model(a).detach())
    with torch.no_grad():
        out.mul_(2)  # after the recorder closed: only the version counter can tell
    with pytest.raises(OverwrittenActivationError, match="version counter"):
        last.output("0")
    with in_language("zh"), pytest.raises(OverwrittenActivationError, match="^'0' 的输出在被记录之后被原地修改了"):
        last.output("0")


def test_inputs_model_mode_and_caller_tensors_untouched() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(inplace=True))
    model.train()
    x = torch.tensor([[1.0, -2.0]], requires_grad=True)
    before = x.detach().clone()
    with ActivationRecorder(model, ["0", "1"], gradients=True, offload=True) as rec:
        model(x).sum().backward()
    assert model.training and torch.equal(x.detach(), before)
    assert rec.outputs["1"].device.type == "cpu"


def test_tuple_outputs_and_unsupported_outputs() -> None:
    class Pair(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x + 1, x * 2

    class Mapping(nn.Module):
        def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
            return {"y": x}

    model = nn.Sequential(Pair(), Mapping())
    with ActivationRecorder(model, ["0", "1"]) as rec:
        model[0](torch.ones(2))
        model[1](torch.ones(2))
    first, second = rec.output("0")
    assert torch.equal(first, torch.full((2,), 2.0)) and torch.equal(second, torch.full((2,), 2.0))
    with pytest.raises(TypeError, match="returned a dict"):
        rec.output("1")


def test_100_uses_leave_no_growth() -> None:
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(inplace=True), nn.Conv2d(4, 2, 3))
    x = torch.randn(2, 1, 8, 8)

    def use_once() -> None:
        with ActivationRecorder(model, ["0", "1", "2"], inputs=True, gradients=True) as rec:
            model(x).sum().backward()
        assert rec.output("0").shape == (2, 4, 6, 6)
        model.zero_grad(set_to_none=True)

    def live_tensors() -> int:
        return sum(issubclass(type(obj), torch.Tensor) for obj in gc.get_objects())

    use_once()
    gc.collect()
    baseline_tensors = live_tensors()
    baseline_objects = len(gc.get_objects())
    for _ in range(100):
        use_once()
    gc.collect()
    # The count is process-wide: another test's garbage may be freed meanwhile, so only growth is a leak.
    assert live_tensors() <= baseline_tensors
    assert len(gc.get_objects()) - baseline_objects < 50
    assert_no_hooks(model)


def test_mappings_read_one_entry_per_access_and_a_bad_entry_spoils_only_its_key() -> None:
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 3), nn.ReLU(inplace=True), *[nn.Linear(3, 3) for _ in range(40)])
    names = [str(i) for i in range(len(model))]
    with ActivationRecorder(model, names, on_overwrite="raise", inputs=True) as rec:
        model(torch.randn(2, 3))
    read: list[str] = []
    real_output = rec.output
    rec.output = lambda key: read.append(key) or real_output(key)  # type: ignore[method-assign]
    outputs = rec.outputs
    assert read == []  # nothing is read until a key is asked for
    fifth = outputs["5"]
    assert read == ["5"]  # one entry read, not 42
    with torch.no_grad():
        assert torch.equal(fifth, model[5](rec.input("5")))
    with pytest.raises(OverwrittenActivationError, match="aten.relu_"):
        outputs["0"]  # the in-place ReLU wrote into Linear 0's output: only this key raises
    with in_language("zh"), pytest.raises(OverwrittenActivationError, match=r"^'0' 的输出在被记录之后被 aten.relu_"):
        outputs["0"]  # notebook 03 prints this message in the Chinese edition
    with torch.no_grad():  # the ReLU's own input was rewritten by it, so rebuild it from layer 0's recorded input
        assert torch.equal(outputs["1"], torch.relu(model[0](rec.input("0"))))
    assert len(outputs) == 42 and list(outputs)[:3] == ["0", "1", "2"] and "41" in outputs
    with pytest.raises(OverwrittenActivationError):
        dict(outputs)  # reading everything still reaches the bad entry: never swallowed


def test_mappings_behave_like_mappings_for_keys_they_do_not_have() -> None:
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))
    with ActivationRecorder(model, ["0", "1", "2"]) as rec:
        model[0](torch.ones(1, 2))  # only layer 0 runs
    assert list(rec.outputs) == ["0"] and "2" not in rec.outputs and rec.outputs.get("2") is None
    with pytest.raises(KeyError, match="has not run"):
        rec.outputs["2"]
    with pytest.raises(KeyError, match="not a recorded layer"):
        rec.outputs["head"]
    with pytest.raises(ValueError, match="inputs=True"):
        _ = rec.inputs
    with pytest.raises(NoGradientError, match="gradients=True"):
        _ = rec.gradients


def test_private_dispatch_api_still_works() -> None:
    """The recorder relies on torch.utils._python_dispatch.TorchDispatchMode and on operator schemas saying
    which argument an op writes to. Both are private: this test says so plainly if a torch upgrade changes them."""
    try:
        mode_class = importlib.import_module("torch.utils._python_dispatch").TorchDispatchMode
    except (ImportError, AttributeError) as error:
        pytest.fail(
            f"torch {torch.__version__} no longer has torch.utils._python_dispatch.TorchDispatchMode ({error}); "
            "course_utils/recorder.py imports it to watch in-place writes: find its new home and update the import."
        )
    seen: list[tuple[str, list[bool]]] = []

    class Spy(mode_class):  # type: ignore[misc, valid-type]
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            try:
                writes = [bool(a.alias_info is not None and a.alias_info.is_write) for a in func._schema.arguments]
            except AttributeError as error:
                pytest.fail(
                    f"torch {torch.__version__}: an operator schema no longer exposes arguments[i].alias_info.is_write "
                    f"({error}); course_utils/recorder.py reads it to know which ops write in place."
                )
            seen.append((str(func), writes))
            return func(*args, **(kwargs or {}))

    x = torch.randn(3)
    with Spy():
        x.relu_()
        torch.relu(x)
    assert seen[0][0] == "aten.relu_.default" and seen[0][1][0], (
        f"TorchDispatchMode no longer reports in-place relu_ as writing to its first argument: {seen}"
    )
    assert seen[1][0] == "aten.relu.default" and not any(seen[1][1]), seen
