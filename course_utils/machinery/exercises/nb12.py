"""Exercises of notebooks/12_transformer_hooks.ipynb: cache the residual stream, ablate a head, patch a position,
steer with a vector, and steer during KV-cached generation.

Every check builds its own transformers (``course_utils.transformer.InductionTransformer`` with random weights and
another number of blocks, heads or ``d_head`` than the notebook's model), draws new token sequences, and computes the
truth itself: by running the blocks one by one (12.1), or with its own correct hook (12.2-12.5). A wrong answer is
matched against the mistakes learners make here, each recomputed: hooking the attention module (or the block, or
``in_proj``) instead of ``out_proj``'s input, the wrong head slice, a hook that changes a copy and returns nothing, a
cache that keeps the graph or outlives the call, a patch of the block's input, of the wrong position (off by one,
every position from it on, one sequence) or of the wrong run, a vector changed in place or added to the input, a
slice of the output that is empty once a KV cache feeds one position at a time, and state kept between calls. Where
hooks sit while the model runs is read with ``hook_report`` (``_Watch``), so that a ✗ can say where to look.

Usage: ``catalogue()["12.2"]`` (through ``course_utils.machinery.exercises``); ``check("12.2", ablate_head)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.hooks import RemovableHandle

from course_utils.hooks import hook_report
from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable, lets_the_error_through, plain_tensor
from course_utils.machinery.messages import N_, _
from course_utils.transformer import InductionTransformer, generate, repeated_sequences


def _model(n_layers: int, n_heads: int, seed: int, d_model: int = 32) -> InductionTransformer:
    """A transformer with random weights (larger than PyTorch's default, so that every part matters)."""
    torch.manual_seed(seed)
    model = InductionTransformer(d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_mlp=2 * d_model)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 1.5 / parameter.shape[-1] ** 0.5)
    return model


def _tokens(batch: int, seed: int) -> torch.Tensor:
    return repeated_sequences(batch, seed=seed)[0]


def _hooks_left(model: torch.nn.Module) -> list[str]:
    return sorted(hook_report(model))


def _left_behind(model: torch.nn.Module) -> Verdict | None:
    left = _hooks_left(model)
    if left:
        return Verdict(False, _("A hook is left behind ({where}): remove it with its handle, in a finally block or a "
                                "with block.").format(where=left[0]))
    return None


def _same(a: Any, b: torch.Tensor) -> bool:
    return isinstance(a, torch.Tensor) and a.shape == b.shape and torch.allclose(a.float(), b, atol=1e-5)


def _as_plain(result: Any, shape: tuple[int, ...], what: str) -> torch.Tensor | Verdict:
    if not isinstance(result, torch.Tensor):
        return Verdict(False, _("Return {what} as a tensor of shape {shape}, got {type}.").format(
            what=what, shape=shape, type="None" if result is None else type(result).__name__))
    if tuple(result.shape) != shape:
        return Verdict(False, _("Expected {what} of shape {shape}, got {got}.").format(
            what=what, shape=shape, got=tuple(result.shape)))
    try:
        return plain_tensor(result)
    except TypeError as error:
        return Verdict(False, str(error))


def _run(model: InductionTransformer, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens)


def _is_handle(value: Any) -> bool:
    return isinstance(value, RemovableHandle)


class _Watch:
    """Records, each time ``model`` runs, which hooks are registered on it (``runs``: one report per call).

    A forward pre-hook on the model itself, registered before the learner's code runs, so it fires first and
    sees the learner's hooks; ``with _Watch(model) as watch:`` removes it, also on failure."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model, self.runs = model, []

    def _record(self, module: Any, args: tuple) -> None:
        report = hook_report(self.model)
        report["_forward_pre_hooks"] -= 1           # this pre-hook itself
        self.runs.append(sorted(name for name, count in report.items() if count))

    def __enter__(self) -> _Watch:
        self._handle = self.model.register_forward_pre_hook(self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.remove()


# -- 12.1: cache the residual stream --------------------------------------------------------------------------------
def _streams(model: InductionTransformer, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The embedding stream and every block's output, computed without hooks."""
    with torch.no_grad():
        positions = torch.arange(tokens.shape[1])
        x = model.embed(tokens) + model.pos_embed(positions)
        streams = [x]
        for block in model.blocks:
            x = block(x, positions=positions)
            streams.append(x)
    return streams


def _additions(model: InductionTransformer, streams: list[torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    """What each block's ``attn`` and ``mlp`` add to the stream (their outputs), from the streams."""
    found: dict[str, list[torch.Tensor]] = {"attn": [], "mlp": []}
    with torch.no_grad():
        positions = torch.arange(streams[0].shape[1])
        for block, x in zip(model.blocks, streams):
            attended = block.attn(block.ln1(x), positions=positions)[0]
            found["attn"].append(attended)
            found["mlp"].append(block.mlp(block.ln2(x + attended)))
    return found


def _nothing_cached(runs: list[list[str]]) -> Verdict:
    """Why the learner's list is empty, from the hooks that were registered each time the model ran."""
    if not runs:
        return Verdict(False, _("Your list is empty, and the model never ran: call model(tokens) while your hooks "
                                "are registered."))
    hooked = runs[-1]
    if not hooked:
        return Verdict(False, _("Your list is empty: no hook was registered while the model ran. Register the hooks "
                                "before model(tokens), and remove them only after it has returned."))
    if any(name.startswith("blocks._forward") for name in hooked):
        return Verdict(False, _("Your list is empty: no hook fired. Hook each block (model.blocks[i]); "
                                "model.blocks itself, a ModuleList, is never called."))
    return Verdict(False, _("Your list is empty, although hooks were registered while the model ran ({where}): do "
                            "they add what they see to the list you return?").format(where=", ".join(hooked)))


class _Failure(RuntimeError):
    """What the check's failing block raises (12.1: the hooks must go, also then)."""


class _FailingBlock(torch.nn.Module):
    def forward(self, x: torch.Tensor, **kwargs: Any) -> torch.Tensor:
        raise _Failure("this block fails on purpose")


def _cache_test(cache_residuals: Callable[..., Any]) -> Verdict:
    for n_layers, n_heads, seed in ((3, 2, 121), (1, 4, 122)):
        model, tokens = _model(n_layers, n_heads, seed), _tokens(5, seed)
        truth = _streams(model, tokens)
        with _Watch(model) as watch:
            result = cache_residuals(model, tokens)  # gradients on, as in a learner's session
        untidy = _left_behind(model)
        if untidy is not None:
            return untidy
        if not isinstance(result, (list, tuple)):
            return Verdict(False, _("Return a list of tensors, the embedding stream first and then one per block, "
                                    "got {type}.").format(type="None" if result is None else type(result).__name__))
        result = list(result)
        if any(isinstance(item, torch.Tensor) and item.grad_fn is not None for item in result):
            return Verdict(False, _("Your cached tensors still have a grad_fn: the cache keeps the autograd graph, "
                                    "and everything saved for a backward that never comes. Keep output.detach()."))
        if len(result) != n_layers + 1:
            if not result:
                return _nothing_cached(watch.runs)
            if len(result) > n_layers + 1 and all(_same(r, t) for r, t in zip(result[-len(truth):], truth)):
                return Verdict(False, _("Your list also holds the tensors of an earlier call ({got} tensors, of which "
                                        "the last {expected} are right): make a new list inside cache_residuals, "
                                        "so that every call starts empty.").format(got=len(result),
                                                                                   expected=len(truth)))
            if len(result) == n_layers and all(_same(r, t) for r, t in zip(result, truth[1:])):
                return Verdict(False, _("The embedding stream is missing: it is what enters model.blocks[0] (a "
                                        "forward pre-hook sees it as args[0]). Put it first."))
            if len(result) == n_layers and all(_same(r, t) for r, t in zip(result, truth[:-1])):
                return Verdict(False, _("Your list holds what enters each block, and the last block's output is "
                                        "missing ({blocks} blocks here): keep the output of every block of "
                                        "model.blocks (their number varies from model to model), and what enters "
                                        "block 0.").format(blocks=n_layers))
            if len(result) < n_layers + 1 and all(any(_same(r, t) for t in truth) for r in result):
                return Verdict(False, _("Expected {expected} tensors for this model (the embedding stream, then one "
                                        "per block), got {got}: each is a residual stream, but some are missing. "
                                        "Did one hook overwrite what another kept? Hooks made in a loop all see the "
                                        "loop variable's last value unless each is given its own.").format(
                    expected=n_layers + 1, got=len(result)))
            return Verdict(False, _("Expected {expected} tensors for this model (the embedding stream, then one per "
                                    "block), got {got}.").format(expected=n_layers + 1, got=len(result)))
        empty = [index for index, item in enumerate(result) if item is None]
        if empty and n_layers > 1 and isinstance(result[-1], torch.Tensor) and _same(result[-1], truth[-1]):
            return Verdict(False, _("Streams {empty} are None and the last one is right: every block's hook wrote to "
                                    "the same place. Hooks made in a loop all see the loop variable's last value "
                                    "unless each is given its own.").format(empty=empty))
        for index, (item, expected) in enumerate(zip(result, truth)):
            checked = _as_plain(item, tuple(expected.shape), _("stream {index}").format(index=index))
            if isinstance(checked, Verdict):
                return checked
            if _same(checked, expected):
                continue
            if all(_same(r, t) for r, t in zip(result, reversed(truth))):
                return Verdict(False, _("The streams are in reverse order: the embedding stream first, then block 0's "
                                        "output, and so on."))
            if index == 0 and _same(checked, model.embed(tokens).detach()):
                return Verdict(False, _("Stream 0 is the token embedding alone: what enters block 0 also has the "
                                        "position embedding added. Take args[0] of block 0 in a forward pre-hook."))
            layer_norms = [model.blocks[min(i, n_layers - 1)].ln1(t).detach() for i, t in enumerate(truth)]
            if any(_same(checked, t) for t in layer_norms):
                return Verdict(False, _("Stream {index} is a LayerNorm's output, not the residual stream: hook the "
                                        "blocks themselves, model.blocks[i].").format(index=index))
            for part, added in _additions(model, truth).items():
                for block, addition in enumerate(added):
                    if _same(checked, addition):
                        return Verdict(False, _("Stream {index} is what model.blocks[{block}].{part} adds to the "
                                                "residual stream, not the stream itself: keep what the block "
                                                "returns.").format(index=index, block=block, part=part))
            return Verdict(False, _("Stream {index} is not the residual stream there: the embedding stream is what "
                                    "enters block 0, stream i + 1 what block i returns.").format(index=index))
    failing = _model(2, 2, 123)
    failing.blocks[1] = _FailingBlock()
    refused = lets_the_error_through(lambda: cache_residuals(failing, _tokens(2, 123)), _Failure)
    if refused is not None:
        return refused
    left = _hooks_left(failing)
    if left:
        return Verdict(False, _("When the model raises, a hook stays behind ({where}): remove the handles in a "
                                "finally block.").format(where=left[0]))
    return Verdict(True)


_EXERCISE_12_1 = Exercise(
    "12.1",
    N_("Write cache_residuals(model, tokens): the embedding stream and every block's output, cached by raw hooks "
       "without the graph."),
    expect_callable(_cache_test, N_("a function cache_residuals(model, tokens)")),
    hints=(
        N_("A forward pre-hook on model.blocks[0] sees the embedding stream as args[0]; a forward hook on each block "
           "sees what the block returns."),
        N_("Append output.detach() (not output) in the order the hooks fire, and remove every handle in a finally "
           "block."),
    ),
    kind="write",
    praise=N_("One pre-hook and one hook per block: the residual stream, without the graph behind it."),
    observe_only=True,
)


# -- 12.2: ablate one head ------------------------------------------------------------------------------------------
def _zeroed(model: InductionTransformer, layer: int, tokens: torch.Tensor, columns: Any,
            where: str = "input") -> torch.Tensor:
    """Logits with ``columns`` of out_proj's input (``where="input"``) or of its output set to zero."""
    attention = model.blocks[layer].attn

    def pre_hook(module: Any, args: tuple) -> tuple:
        heads = args[0].clone()
        heads[..., columns] = 0
        return (heads,)

    def hook(module: Any, args: tuple, output: Any) -> Any:
        mixed = output[0].clone()
        mixed[..., columns] = 0
        return (mixed, output[1])

    if where == "input":
        handle = attention.out_proj.register_forward_pre_hook(pre_hook)
    else:
        handle = attention.register_forward_hook(hook)
    with handle:
        return _run(model, tokens)


def _hands_input_on(module: torch.nn.Module) -> bool:
    """Whether ``module``'s forward pre-hooks hand its input on as the very tensor it was called with (a hook that
    returns nothing, or the args it got), rather than a new tensor."""
    seen, probe = [], torch.randn(2, 3, module.in_features, generator=torch.Generator().manual_seed(0))
    with module.register_forward_pre_hook(lambda hooked, args: seen.append(args[0])), torch.no_grad():
        module(probe)
    return seen[0] is probe


def _misplaced_ablation(where: list[str], layer: int, head: int) -> Verdict | None:
    """A verdict for an ablation hooked somewhere in block ``layer`` other than out_proj's forward pre-hooks."""
    inside = f"blocks.{layer}."
    if f"{inside}attn.out_proj._forward_pre_hooks" in where or not any(n.startswith(inside) for n in where):
        return None
    if f"{inside}attn._forward_hooks" in where:
        return Verdict(False, _("You hooked the attention module itself: its output has already been mixed by "
                                "out_proj, so no slice of it belongs to one head. Register a forward pre-hook on "
                                "blocks[{layer}].attn.out_proj, whose input holds the heads side by side.").format(
            layer=layer))
    if f"{inside}attn.out_proj._forward_hooks" in where:
        return Verdict(False, _("A forward hook on out_proj sees its output, after it has mixed the heads: use a "
                                "forward pre-hook, whose args[0] is out_proj's input, the heads side by side."))
    if f"{inside}attn._forward_pre_hooks" in where:
        return Verdict(False, _("A pre-hook on the attention module changes what all of its heads read (the "
                                "normalised residual stream), not what head {head} produces: the heads' outputs "
                                "lie side by side further in, after they are computed and before they are "
                                "mixed.").format(head=head))
    if any(name.startswith(f"{inside}attn.in_proj.") for name in where):
        return Verdict(False, _("in_proj makes the queries, keys and values of every head: what you zeroed there "
                                "does not switch off head {head}'s output. The heads' outputs lie side by side "
                                "where out_proj reads them.").format(head=head))
    return Verdict(False, _("Your hook is on {where}, where every feature mixes all the heads: a head can be "
                            "switched off only where the heads' outputs lie side by side, inside the attention of "
                            "block {layer}.").format(where=", ".join(n for n in where if n.startswith(inside)),
                                                     layer=layer))


def _ablate_test(ablate_head: Callable[..., Any]) -> Verdict:
    for n_heads, layer, head, seed in ((4, 0, 1, 127), (8, 1, 5, 124), (8, 0, 7, 125), (4, 1, 3, 126)):
        model, tokens = _model(2, n_heads, seed), _tokens(6, seed)
        width = model.blocks[0].attn.d_head
        own = slice(head * width, (head + 1) * width)
        expected, untouched = _zeroed(model, layer, tokens, own), _run(model, tokens)
        handle = ablate_head(model, layer, head)
        where = _hooks_left(model)
        try:
            if not _is_handle(handle):
                return Verdict(False, _("Return the handle that register_forward_pre_hook gives you, so that the "
                                        "caller can remove the hook (got {type}).").format(
                    type="None" if handle is None else type(handle).__name__))
            if not where:
                return Verdict(False, _("No hook is registered on the model after your call: register one on the "
                                        "attention of block {layer}.").format(layer=layer))
            result = _run(model, tokens)
            passes_through = _same(result, untouched) and _hands_input_on(model.blocks[layer].attn.out_proj)
        finally:
            if _is_handle(handle):
                handle.remove()
        left = _hooks_left(model)
        if left:
            return Verdict(False, _("After removing the handle you returned, a hook is still there ({where}): "
                                    "register one hook and return its handle.").format(where=left[0]))
        if _same(result, expected):
            continue
        if _same(result, untouched) and f"blocks.{layer}.attn.out_proj._forward_pre_hooks" in where \
                and not passes_through:
            return Verdict(False, _("Your hook returns out_proj's input with nothing zeroed: the slice you zero is "
                                    "empty for this model, whose attention has {n_heads} heads of d_head = {width}. "
                                    "Take both from the module, not from the notebook's model.").format(
                n_heads=n_heads, width=width))
        misplaced = _misplaced_ablation(where, layer, head)
        if misplaced is not None:
            return misplaced
        if _same(result, untouched):
            return Verdict(False, _("Your hook changed nothing: a pre-hook changes out_proj's input only through "
                                    "what it returns (the new args). Modify a copy and return it."))
        if width != 16 and _same(result, _zeroed(model, layer, tokens, slice(head * 16, (head + 1) * 16))):
            return Verdict(False, _("You took d_head = 16 from the notebook's model; this model's heads have "
                                    "d_head = {width}. Read it from the module (attn.d_head, or in_features // "
                                    "n_heads).").format(width=width))
        wrong_slices = (
            (list(range(head, n_heads * width, n_heads)), _("every n_heads-th feature")),
            (slice(head * n_heads, (head + 1) * n_heads), _("features head*n_heads to (head+1)*n_heads")),
            (slice((head + 1) * width, (head + 2) * width), _("the next head's features")),
            (slice((head - 1) * width, head * width), _("the previous head's features")),
            (slice(0, head * width), _("the heads before it")),
        )
        for columns, description in wrong_slices:
            if _same(result, _zeroed(model, layer, tokens, columns)):
                return Verdict(False, _("Wrong head slice: you zeroed {description}. Head h owns the d_head "
                                        "consecutive features h*d_head to (h+1)*d_head of out_proj's "
                                        "input.").format(description=description))
        others = [i for i in range(n_heads * width) if not own.start <= i < own.stop]
        if _same(result, _zeroed(model, layer, tokens, others)):
            return Verdict(False, _("You kept head {head} and zeroed all the others: zero only its own "
                                    "slice.").format(head=head))
        if _same(result, _zeroed(model, 1 - layer, tokens, own)):
            return Verdict(False, _("You ablated head {head} of the other block: the hook belongs on "
                                    "model.blocks[{layer}].").format(head=head, layer=layer))
        return Verdict(False, _("Not head {head} of block {layer} switched off: in out_proj's input, that head's "
                                "d_head features must be zero and every other feature as it was.").format(
            head=head, layer=layer))
    return Verdict(True)


_EXERCISE_12_2 = Exercise(
    "12.2",
    N_("Write ablate_head(model, layer, head): a pre-hook that zeroes one head before out_proj mixes them; return "
       "its handle."),
    expect_callable(_ablate_test, N_("a function ablate_head(model, layer, head)")),
    hints=(
        N_("The heads are side by side in the input of model.blocks[layer].attn.out_proj; the attention module's own "
           "output is too late."),
        N_("Head h owns features h*d_head to (h+1)*d_head, and d_head is an attribute of the attention module. Clone "
           "args[0], zero the slice, return the copy."),
    ),
    kind="write",
    praise=N_("One slice of out_proj's input: the whole of head ablation."),
)


# -- 12.3: patch one position of one block's output --------------------------------------------------------------------
def _patched(model: InductionTransformer, clean: torch.Tensor, corrupted: torch.Tensor, layer: int,
             positions: Any, where: str = "output", rows: Any = slice(None)) -> torch.Tensor:
    """The corrupted run with ``[rows, positions]`` of block ``layer``'s output taken from the clean run
    (``where="input"``: of its input; ``"attn"``: of its attention's output)."""
    block, kept = model.blocks[layer], {}

    def swapped(activation: torch.Tensor) -> torch.Tensor:
        patched = activation.clone()
        patched[rows, positions] = kept["x"][rows, positions]
        return patched

    if where == "input":
        with block.register_forward_pre_hook(lambda module, args: kept.__setitem__("x", args[0])):
            _run(model, clean)
        handle = block.register_forward_pre_hook(lambda module, args: (swapped(args[0]),))
    elif where == "attn":
        with block.attn.register_forward_hook(lambda module, args, output: kept.__setitem__("x", output[0])):
            _run(model, clean)
        handle = block.attn.register_forward_hook(lambda module, args, output: (swapped(output[0]), output[1]))
    else:
        with block.register_forward_hook(lambda module, args, output: kept.__setitem__("x", output)):
            _run(model, clean)
        handle = block.register_forward_hook(lambda module, args, output: swapped(output))
    with handle:
        return _run(model, corrupted)


def _misplaced_patch(model: InductionTransformer, clean: torch.Tensor, corrupted: torch.Tensor, layer: int,
                     position: int, result: torch.Tensor) -> Verdict | None:
    """A verdict for a patch of the right block at the wrong place: another position, part of the batch, the
    runs swapped, or the attention's output."""
    for other in (position - 1, position + 1):
        if 0 <= other < clean.shape[1] and _same(result, _patched(model, clean, corrupted, layer, other)):
            return Verdict(False, _("You patched position {other}, next to position {position}: positions count from "
                                    "0 along the second dimension of the block's output, the first being the "
                                    "batch.").format(other=other, position=position))
    if position + 1 < clean.shape[1] and _same(result, _patched(model, clean, corrupted, layer,
                                                                slice(position, None))):
        return Verdict(False, _("You patched every position from {position} on: patch position {position} "
                                "alone.").format(position=position))
    if _same(result, _patched(model, clean, corrupted, layer, position, rows=0)):
        return Verdict(False, _("You patched only the first sequence of the batch: patch position {position} of "
                                "every sequence (the batch is the first dimension).").format(position=position))
    if _same(result, _patched(model, corrupted, clean, layer, position)):
        return Verdict(False, _("You swapped the runs: the clean run gives the activation, and the corrupted run is "
                                "the one patched, whose logits you return."))
    if _same(result, _patched(model, clean, corrupted, layer, position, where="attn")):
        return Verdict(False, _("You patched the output of block {layer}'s attention, not of the block: patch what "
                                "model.blocks[{layer}] returns, the residual stream.").format(layer=layer))
    return None


def _patch_test(patch_position: Callable[..., Any]) -> Verdict:
    for layer, position, seed in ((1, 13, 128), (2, 0, 129), (0, 23, 130)):
        model = _model(3, 2, seed)
        clean = _tokens(4, seed)
        corrupted = clean.clone()
        corrupted[:, ::3] = (corrupted[:, ::3] + 1) % 64            # a third of the tokens changed
        clean_before, corrupted_before = clean.clone(), corrupted.clone()
        expected = _patched(model, clean, corrupted, layer, position)
        raw = patch_position(model, clean, corrupted, layer, position)
        untidy = _left_behind(model)
        if untidy is not None:
            return untidy
        if not (torch.equal(clean, clean_before) and torch.equal(corrupted, corrupted_before)):
            return Verdict(False, _("Your function changed the clean or corrupted tokens: leave the caller's inputs "
                                    "alone."))
        result = _as_plain(raw, tuple(expected.shape), _("the logits of the patched run"))
        if isinstance(result, Verdict):
            return result
        if _same(result, expected):
            continue
        if _same(result, _run(model, corrupted)):
            return Verdict(False, _("Your patch changed nothing: a forward hook replaces the block's output only "
                                    "with what it returns. Return the patched copy."))
        if _same(result, _run(model, clean)) or _same(result, _patched(model, clean, corrupted, layer, slice(None))):
            return Verdict(False, _("The block's whole output was replaced by the clean one, at every position: "
                                    "patch only position {position} (output[:, position]). Is the hook that kept "
                                    "the clean output still registered during the corrupted run, and does it return "
                                    "something (dict.setdefault returns the stored value)? A forward hook's return "
                                    "value replaces the output.").format(position=position))
        if _same(result, _patched(model, clean, corrupted, layer, position, where="input")):
            return Verdict(False, _("You patched what enters block {layer} (its input); patch what it returns, with "
                                    "a forward hook.").format(layer=layer))
        for other in range(len(model.blocks)):
            if other != layer and _same(result, _patched(model, clean, corrupted, other, position)):
                return Verdict(False, _("You patched block {other}; the task asks for block {layer}.").format(
                    other=other, layer=layer))
        verdict = _misplaced_patch(model, clean, corrupted, layer, position, result)
        if verdict is not None:
            return verdict
        return Verdict(False, _("Not the corrupted run with block {layer}'s output at position {position} taken from "
                                "the clean run.").format(layer=layer, position=position))
    return Verdict(True)


_EXERCISE_12_3 = Exercise(
    "12.3",
    N_("Write patch_position(model, clean, corrupted, layer, position): the corrupted run's logits with one position "
       "of one block's output patched from the clean run."),
    expect_callable(_patch_test, N_("a function patch_position(model, clean, corrupted, layer, position)")),
    hints=(
        N_("Two runs: the clean one with a hook that keeps the block's output, then the corrupted one with a hook that "
           "returns a patched copy."),
        N_("Clone the corrupted output, copy output[:, position] from the clean one, and return the copy: a forward "
           "hook's return value replaces the output."),
    ),
    kind="write",
    praise=N_("Cache, then replace: activation patching is two forward hooks."),
)


# -- 12.4: steer with a vector ----------------------------------------------------------------------------------------
def _steered(model: InductionTransformer, layer: int, tokens: torch.Tensor, shift: torch.Tensor,
             positions: Any = slice(None), rows: Any = slice(None), where: str = "output") -> torch.Tensor:
    """The model with ``shift`` added at ``[rows, positions]`` of block ``layer``'s output (``where="input"``: of
    its input)."""
    def shifted(stream: torch.Tensor) -> torch.Tensor:
        steered = stream.clone()
        steered[rows, positions] += shift
        return steered

    block = model.blocks[layer]
    if where == "input":
        handle = block.register_forward_pre_hook(lambda module, args: (shifted(args[0]),))
    else:
        handle = block.register_forward_hook(lambda module, args, output: shifted(output))
    with handle:
        return _run(model, tokens)


def _steer_test(add_steering: Callable[..., Any]) -> Verdict:
    for layer, scale, seed in ((1, 0.7, 131), (0, -2.0, 132), (2, 3.0, 133)):
        model, tokens = _model(3, 4, seed), _tokens(4, seed)
        vector = torch.randn(32, generator=torch.Generator().manual_seed(seed))
        before = vector.clone()
        expected, untouched = _steered(model, layer, tokens, scale * vector), _run(model, tokens)
        handle = add_steering(model.blocks[layer], vector, scale)
        try:
            if not _is_handle(handle):
                return Verdict(False, _("Return the handle that register_forward_hook gives you, so that the caller "
                                        "can remove the hook (got {type}).").format(
                    type="None" if handle is None else type(handle).__name__))
            changed = not torch.equal(vector, before)
            result = _run(model, tokens)
            changed = changed or not torch.equal(vector, before)
        finally:
            if _is_handle(handle):
                handle.remove()
        left = _hooks_left(model)
        if left:
            return Verdict(False, _("After removing the handle you returned, a hook is still there ({where}): "
                                    "register one hook and return its handle.").format(where=left[0]))
        if changed:
            return Verdict(False, _("Your code changed the vector it was given (an in-place operation on it): "
                                    "compute scale * vector as a new tensor."))
        if _same(result, expected):
            continue
        if _same(result, untouched):
            return Verdict(False, _("Your hook changed nothing: a forward hook replaces the output only with what it "
                                    "returns. Return the steered output from the hook."))
        if _same(result, _steered(model, layer, tokens, vector)):
            return Verdict(False, _("You added the vector without its scale: add scale * vector."))
        if _same(result, _steered(model, layer, tokens, scale * vector, positions=-1)):
            return Verdict(False, _("You steered only the last position: add the vector at every position."))
        if _same(result, _steered(model, layer, tokens, scale * vector, rows=0)):
            return Verdict(False, _("You steered only the first sequence of the batch: add the vector to every "
                                    "sequence, at every position."))
        if _same(result, _steered(model, layer, tokens, scale * vector, where="input")):
            return Verdict(False, _("You added the vector to what enters the module (a forward pre-hook): the task "
                                    "adds it to what the module returns."))
        if _same(result, _steered(model, layer, tokens, scale * vector / vector.norm())):
            return Verdict(False, _("You scaled a unit vector (vector / its norm): add scale * vector as it was "
                                    "given, with its own length."))
        return Verdict(False, _("Not the model with scale * vector added to the output of the block you were "
                                "given."))
    return Verdict(True)


_EXERCISE_12_4 = Exercise(
    "12.4",
    N_("Write add_steering(module, vector, scale): a forward hook that adds scale * vector to the output; return "
       "its handle."),
    expect_callable(_steer_test, N_("a function add_steering(module, vector, scale)")),
    hints=(
        N_("A forward hook that returns a tensor replaces the module's output with it."),
        N_("Return output + scale * vector from the hook (a new tensor; the vector broadcasts over the batch and the "
           "positions), and return the handle from your function."),
    ),
    kind="write",
    praise=N_("Activation addition is one line in a forward hook."),
)


# -- 12.5 (stretch): steer during KV-cached generation -----------------------------------------------------------------
def _generated(model: InductionTransformer, prompt: torch.Tensor, new_tokens: int, layer: int, vector: torch.Tensor,
               start: int, use_cache: bool, mistake: str = "") -> torch.Tensor:
    """Greedy generation steered at absolute positions >= start (``mistake="slice"``: output[:, start:];
    ``"everywhere"``: every position; ``"after"``: positions > start; ``"generated"``: only the positions after the
    prompt; ``"input"``: the block's input instead of its output)."""
    def steered(stream: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        stream = stream.clone()
        if mistake == "slice":
            stream[:, start:] += vector
        elif mistake == "everywhere":
            stream += vector
        elif mistake == "after":
            stream[:, positions > start] += vector
        elif mistake == "generated":
            stream[:, positions >= prompt.shape[1]] += vector
        else:
            stream[:, positions >= start] += vector
        return stream

    block = model.blocks[layer]
    if mistake == "input":
        handle = block.register_forward_pre_hook(
            lambda module, args, kwargs: ((steered(args[0], kwargs["positions"]),), kwargs), with_kwargs=True)
    else:
        handle = block.register_forward_hook(
            lambda module, args, kwargs, output: steered(output, kwargs["positions"]), with_kwargs=True)
    with handle:
        return generate(model, prompt, new_tokens, use_cache=use_cache)


def _kv_test(generate_steered: Callable[..., Any]) -> Verdict:
    for case, (layer, prompt_length, start, seed) in enumerate(((1, 12, 15, 134), (0, 10, 5, 135))):
        model = _model(2, 4, seed)
        prompt, new_tokens = _tokens(6, seed)[:, :prompt_length], 24 - prompt_length
        vector = torch.randn(32, generator=torch.Generator().manual_seed(seed)) * 3
        before = vector.clone()
        expected = _generated(model, prompt, new_tokens, layer, vector, start, use_cache=False)
        lengths: list[int] = []
        counter = model.register_forward_pre_hook(lambda module, args: lengths.append(args[0].shape[1]))
        try:
            raw = generate_steered(model, prompt, new_tokens, layer, vector, start)
        finally:
            counter.remove()
        untidy = _left_behind(model)
        if untidy is not None:
            return Verdict(False, _("A hook is still on the model after generation ({where}): every later call would "
                                    "be steered too. Remove it when generation ends (a with block or "
                                    "finally).").format(where=_hooks_left(model)[0]))
        if not torch.equal(vector, before):
            return Verdict(False, _("Your code changed the vector it was given: leave it as it was."))
        result = _as_plain(raw, tuple(expected.shape), _("the prompt followed by the generated tokens"))
        if isinstance(result, Verdict):
            return result
        if any(length != 1 for length in lengths[1:]):
            return Verdict(False, _("Your generation reran the whole sequence at every step: use the KV cache "
                                    "(generate(..., use_cache=True)), which feeds one new token per step."))
        again = generate_steered(model, prompt, new_tokens, layer, vector, start) if case == 0 else result
        if not (isinstance(again, torch.Tensor) and torch.equal(again, result)):  # state kept between calls
            return Verdict(False, _("Called twice with the same arguments, your function generates different tokens: "
                                    "something it keeps (a counter, a list) lives on from one call to the next. "
                                    "Create it anew inside generate_steered."))
        if torch.equal(result, expected):
            continue
        mistakes = (
            ("slice", _("output[:, start:] assumes the output holds every position. With the KV cache each step's "
                        "output holds only the new position, so the slice is empty and nothing is steered. Use the "
                        "absolute positions the block is called with (kwargs['positions'], with_kwargs=True).")),
            ("everywhere", _("You steered every position: only positions >= start ({start}) get the vector.")),
            ("after", _("You steered the positions after start, not from start on: position {start} itself gets the "
                        "vector too.")),
            ("generated", _("You steered the generated positions, those after the prompt: start ({start}) says "
                            "where steering begins, inside the prompt or after it.")),
            ("input", _("You added the vector to what enters block {layer} (a forward pre-hook): the task adds it to "
                        "what the block returns.")),
        )
        for mistake, message in mistakes:
            if torch.equal(result, _generated(model, prompt, new_tokens, layer, vector, start, True, mistake)):
                return Verdict(False, message.format(start=start, layer=layer))
        return Verdict(False, _("Not the tokens of a generation steered at positions >= {start} of block {layer}: "
                                "compare with generate(..., use_cache=False) and the same hook.").format(
            start=start, layer=layer))
    return Verdict(True)


_EXERCISE_12_5 = Exercise(
    "12.5",
    N_("Write generate_steered(model, prompt, new_tokens, layer, vector, start): KV-cached generation steered from an "
       "absolute position on."),
    expect_callable(_kv_test, N_("a function generate_steered(model, prompt, new_tokens, layer, vector, start)")),
    hints=(
        N_("With the KV cache the block sees the prompt once, then one position per step: slicing the output by "
           "position fails silently. Which argument of the block's call says where you are?"),
        N_("register_forward_hook(hook, with_kwargs=True) passes kwargs: kwargs['positions'] >= start is a mask over "
           "the positions of this call. Remove the hook when generation ends."),
    ),
    kind="write",
    stretch=True,
    praise=N_("Absolute positions, not slices of the output: your hook is right with and without a cache."),
)

EXERCISES = (_EXERCISE_12_1, _EXERCISE_12_2, _EXERCISE_12_3, _EXERCISE_12_4, _EXERCISE_12_5)
