"""The hook cheat-sheet stays true: every API it names exists in the installed PyTorch, every keyword option it lists
is a parameter of that API, and every notebook section it links to exists (anchored as nbconvert and JupyterLab
anchor headings)."""

from __future__ import annotations

import importlib
import inspect
import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import torch

# make check runs these tests when one of these files changes
pytestmark = pytest.mark.reads("notebooks/hooks_cheatsheet.md", "notebooks/*/hooks_cheatsheet.md",
                              "translations/*/hooks_cheatsheet.po")

ROOT = Path(__file__).resolve().parent.parent
CHEATSHEET = ROOT / "notebooks" / "hooks_cheatsheet.md"
API = re.compile(r"`(torch(?:\.\w+)+)`")
NOTEBOOK_LINK = re.compile(r"\]\((\d\d_\w+\.ipynb)#((?:[^()\s]|\([^()\s]*\))+)\)")  # balanced () allowed


def text() -> str:
    return CHEATSHEET.read_text(encoding="utf-8")


def resolve(dotted: str) -> Any:
    """Import the longest importable module prefix of ``dotted``, then follow attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(dotted)


def heading_anchor(heading: str) -> str:
    """The id nbconvert gives a markdown heading (the text, spaces as dashes, URL-quoted); JupyterLab uses the
    same text unquoted, which the browser quotes the same way in a link."""
    plain = re.sub(r"`([^`]*)`", r"\1", heading).replace("**", "").strip()
    return quote(plain.replace(" ", "-"), safe="?/:@!$&'()*+,;=")


def notebook_anchors(path: Path) -> set[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    sources = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "markdown"]  # a list or a string
    return {heading_anchor(m) for source in sources for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", source, re.MULTILINE)}


def table_rows() -> list[list[str]]:
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")]
            for line in text().splitlines() if line.startswith("| `torch.")]


def test_the_cheatsheet_names_apis_and_links_sections_that_exist() -> None:
    assert len(set(API.findall(text()))) >= 30
    links = NOTEBOOK_LINK.findall(text())
    assert len(links) >= 20
    for notebook, anchor in links:
        path = CHEATSHEET.parent / notebook
        assert path.exists(), f"hooks_cheatsheet.md links {notebook}, which does not exist"
        anchors = notebook_anchors(path)
        assert anchor in anchors, f"{notebook} has no heading with anchor #{anchor}; its anchors: {sorted(anchors)}"
    for row in table_rows():  # every row links the PyTorch docs or a notebook
        assert "](https://docs.pytorch.org/" in row[-1] or ".ipynb#" in row[-1], row[0]


@pytest.mark.parametrize("name", sorted(set(API.findall(CHEATSHEET.read_text(encoding="utf-8")))))
def test_every_named_api_exists_in_the_installed_torch(name: str) -> None:
    try:
        resolve(name)
    except (ImportError, AttributeError) as error:
        pytest.fail(f"hooks_cheatsheet.md names `{name}`, which torch does not have ({error})")


def test_listed_keyword_options_are_parameters_of_the_api() -> None:
    checked = 0
    for row in table_rows():
        if not (options := re.findall(r"\(((?:`\w+`(?:, )?)+)\)", row[0])):
            continue
        names = re.findall(r"`(\w+)`", options[0])
        for api in API.findall(row[0]):
            parameters = inspect.signature(resolve(api)).parameters
            missing = [n for n in names if n not in parameters]
            assert not missing, f"{api} has no parameter {missing}; it takes {list(parameters)}"
            checked += 1
    assert checked >= 8


def test_heading_anchor_matches_nbconvert() -> None:
    from nbconvert.filters.strings import add_anchor

    for heading in ("2 · Keeping a gradient with `retain_grad()`", '`with_kwargs`, "input" and T10–T12'):
        html = add_anchor(f"<h2>{heading.replace('`', '')}</h2>")
        assert f'id="{heading_anchor(heading)}"' in html, html


# -- behaviour the cheat-sheet states, run live (issue 24) ---------------------------------------------------------
def _row(api: str) -> str:
    rows = [" | ".join(row) for row in table_rows() if row[0].startswith(f"`{api}`")]
    assert len(rows) == 1, f"one row for {api}"
    return rows[0]


def test_post_accumulate_grad_hook_return_values_raise_as_the_cheatsheet_says() -> None:
    row = _row("torch.Tensor.register_post_accumulate_grad_hook")
    assert "must be `None` (returning the tensor itself passes too); another tensor raises `RuntimeError`" in row
    assert "*should return None* if it has the tensor's shape and dtype, *has changed the size (type) of value*" in row
    assert "any other value `TypeError`" in row
    for value, error, words in ((torch.zeros(2), RuntimeError, "should return None"),
                                (torch.zeros(3), RuntimeError, "has changed the size"),
                                (torch.zeros(2, dtype=torch.float64), RuntimeError, "has changed the type"),
                                (0.0, TypeError, ""), ("x", TypeError, "")):
        leaf = torch.ones(2, requires_grad=True)
        with leaf.register_post_accumulate_grad_hook(lambda param, value=value: value):
            with pytest.raises(error, match=words or None):  # "": any message
                (leaf * 2).sum().backward()
    leaf = torch.ones(2, requires_grad=True)
    with leaf.register_post_accumulate_grad_hook(lambda param: param):   # the very tensor: accepted
        (leaf * 2).sum().backward()
    assert torch.equal(leaf.grad, torch.full((2,), 2.0))


def test_save_on_cpu_copies_only_with_pin_memory_as_the_cheatsheet_says() -> None:
    from torch.autograd.graph import save_on_cpu

    row = _row("torch.autograd.graph.save_on_cpu")
    assert "default `pin_memory=False` changes nothing, but `pin_memory=True` copies every saved tensor" in row
    probe = torch.randn(5)
    (_, kept), (_, copied) = save_on_cpu().pack_hook(probe), save_on_cpu(pin_memory=True).pack_hook(probe)
    assert kept.data_ptr() == probe.data_ptr()
    assert copied.data_ptr() != probe.data_ptr() and torch.equal(copied, probe)


def test_a_python_number_is_saved_without_pack_as_the_cheatsheet_says() -> None:
    from torch.autograd.graph import saved_tensors_hooks

    assert "a Python number an op keeps (`a * 3`) is saved without calling `pack_hook`" in _row(
        "torch.autograd.graph.saved_tensors_hooks")
    packed = []
    a = torch.ones(3, requires_grad=True)
    with saved_tensors_hooks(lambda t: packed.append(t) or t.detach(), lambda t: t):
        y = a * 3
    assert packed == [] and y.grad_fn._saved_other.dim() == 0 and y.grad_fn._saved_other.item() == 3


def test_step_pre_hooks_get_the_optimizer_first_in_args_as_the_cheatsheet_says() -> None:
    assert "where `args` starts with the optimizer itself" in _row("torch.optim.Optimizer.register_step_pre_hook")
    weight = torch.nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    seen = []
    with optimizer.register_step_pre_hook(lambda opt, args, kwargs: seen.append(args)):
        optimizer.step()
    assert len(seen) == 1 and len(seen[0]) == 1 and seen[0][0] is optimizer


def test_a_global_full_backward_hook_breaks_in_place_models_as_the_cheatsheet_says() -> None:
    import torch.nn.modules.module as module_globals

    assert "any model with an in-place op" in _row("torch.nn.modules.module.register_module_full_backward_pre_hook")
    assert "under `no_grad` nothing is wrapped: no error" in _row("torch.nn.Module.register_full_backward_hook")
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(inplace=True), torch.nn.Linear(3, 1))
    handle = module_globals.register_module_full_backward_hook(lambda module, grad_input, grad_output: None)
    try:
        with pytest.raises(RuntimeError, match="BackwardHookFunction"):
            model(torch.randn(2, 3, requires_grad=True))
        with torch.no_grad():
            model(torch.randn(2, 3))   # nothing is wrapped without grad: the in-place ReLU is fine
    finally:
        handle.remove()
    model(torch.randn(2, 3, requires_grad=True)).sum().backward()  # without the global hook: fine


def test_an_in_place_relu_input_is_kept_unrectified_only_as_a_clone_as_the_cheatsheet_says() -> None:
    assert "keep `args[0].clone()`" in _row("torch.nn.Module.register_forward_pre_hook")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(inplace=True))
    kept: dict[str, Any] = {}
    handles = [model[1].register_forward_pre_hook(
                   lambda module, args: kept.update(alias=args[0], clone=args[0].clone())),
               model[0].register_forward_hook(lambda module, args, output: kept.update(before=output.clone()))]
    try:
        with torch.no_grad():
            output = model(torch.randn(8, 3))
    finally:
        for handle in handles:
            handle.remove()
    assert (kept["clone"] < 0).any() and torch.equal(kept["clone"], kept["before"])  # unrectified, seen in two places
    assert torch.equal(kept["alias"], output) and not (kept["alias"] < 0).any()      # the stored alias was rectified


# a worker function: module level, so that run_workers' processes can import it by name
def _bucket_as_the_comm_hook_gets_it(rank: int, world_size: int) -> dict[str, list[float]]:
    import copy

    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    local = copy.deepcopy(model)
    x = torch.full((4, 3), float(rank + 1))                # each rank its own data, so its own gradients
    local(x).sum().backward()
    buckets = []

    def hook(state, bucket):
        buckets.append(bucket.buffer().clone())
        return default_hooks.allreduce_hook(state, bucket)

    ddp = DistributedDataParallel(model)
    ddp.register_comm_hook(dist.group.WORLD, hook)
    ddp(x).sum().backward()
    return {"bucket": sorted(torch.cat(buckets).tolist()),
            "local": [value for p in local.parameters() for value in p.grad.flatten().tolist()],
            "after": [value for p in model.parameters() for value in p.grad.flatten().tolist()]}


def test_a_comm_hook_gets_each_rank_gradients_undivided_as_the_cheatsheet_says() -> None:
    from course_utils.distributed import run_workers

    assert "the bucket is not divided by the world size" in _row(
        "torch.nn.parallel.DistributedDataParallel.register_comm_hook")
    rank0, rank1 = run_workers(_bucket_as_the_comm_hook_gets_it, world_size=2, timeout=60)
    for result in (rank0, rank1):   # the hook sees this rank's own gradients: DDP divides only without a hook
        assert result["bucket"] == pytest.approx(sorted(result["local"]))
    mean = [(a + b) / 2 for a, b in zip(rank0["local"], rank1["local"])]
    assert rank0["local"] != rank1["local"]
    assert rank0["after"] == pytest.approx(mean) and rank1["after"] == pytest.approx(mean)  # allreduce_hook divides
