"""Exercises of notebooks/12_transformer_hooks.ipynb: cache the residual stream, ablate a head, patch a position,
steer with a vector (a block's output or an attention module's tuple), and steer during KV-cached generation.

Each check builds its own ``InductionTransformer`` (random weights, another shape than the notebook's), computes the
truth without the learner's hooks, and names a wrong answer by recomputing the usual mistakes. 12.4 judges what its
hook returns itself (``watch_hooks = false`` in nb12.toml): handing on a tuple is part of that exercise.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from typing import Any

import torch

from course_utils.machinery.exercise_kit import *
from course_utils.transformer import InductionTransformer, generate, repeated_sequences

_LEFT_AFTER_REMOVE = N_("After removing the handle you returned, a hook is still there ({where}): register one hook "
                        "and return its handle.")


def _model(n_layers: int, n_heads: int, seed: int, d_model: int = 32) -> InductionTransformer:
    """A transformer with random weights (larger than PyTorch's default, so that every part matters)."""
    torch.manual_seed(seed)
    return seeded(InductionTransformer(d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_mlp=2 * d_model), seed,
                  1.5, matrices_only=True).train()


def _tokens(batch: int, seed: int) -> torch.Tensor:
    return repeated_sequences(batch, seed=seed)[0]


def _run(model: InductionTransformer, tokens: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(tokens)


# -- 12.1: cache the residual stream ------------------------------------------------------------------------------
def _streams(model: InductionTransformer, tokens: torch.Tensor) -> list[torch.Tensor]:
    """The embedding stream and every block's output, computed without hooks."""
    with torch.no_grad():
        positions = torch.arange(tokens.shape[1])
        streams = [model.embed(tokens) + model.pos_embed(positions)]
        for block in model.blocks:
            streams.append(block(streams[-1], positions=positions))
    return streams


def _additions(model: InductionTransformer, streams: list[torch.Tensor]) -> list[tuple[str, int, torch.Tensor]]:
    """What each block's ``attn`` and ``mlp`` add to the stream (their outputs), from the streams."""
    found: list[tuple[str, int, torch.Tensor]] = []
    with torch.no_grad():
        positions = torch.arange(streams[0].shape[1])
        for index, (block, x) in enumerate(zip(model.blocks, streams)):
            attended = block.attn(block.ln1(x), positions=positions)[0]
            found += [("attn", index, attended), ("mlp", index, block.mlp(block.ln2(x + attended)))]
    return sorted(found, key=lambda item: item[0])


def _nothing_cached(runs: list[list[str]]) -> None:
    """Why the learner's list is empty, from the hooks that were registered each time the model ran."""
    require(runs, N_("Your list is empty, and the model never ran: call model(tokens) while your hooks are "
                     "registered."))
    require(runs[-1], N_("Your list is empty: no hook was registered while the model ran. Register the hooks before "
                         "model(tokens), and remove them only after it has returned."))
    require(not any(name.startswith("blocks._forward") for name in runs[-1]),
            N_("Your list is empty: no hook fired. Hook each block (model.blocks[i]); model.blocks itself, a "
               "ModuleList, is never called."))
    fail(N_("Your list is empty, although hooks were registered while the model ran ({where}): do they add what they "
            "see to the list you return?"), where=", ".join(runs[-1]))


def _wrong_count(result: list, truth: list[torch.Tensor], n_layers: int, runs: list[list[str]]) -> None:
    """12.1's ✗ for a list of another length than the model's streams."""
    if not result:
        _nothing_cached(runs)
    fields = {"got": len(result), "expected": len(truth), "blocks": n_layers}
    require(len(runs) <= 1, N_("Your list holds {got} tensors, not {expected}: your function ran the model {runs} "
                               "times, and every run added its streams. Run model(tokens) once, with every hook "
                               "registered."), runs=len(runs), **fields)
    require(not (len(result) > len(truth) and all(map(same, result[-len(truth):], truth))),
            N_("Your list also holds the tensors of an earlier call ({got} tensors, of which the last {expected} are "
               "right): make a new list inside cache_residuals, so that every call starts empty."), **fields)
    name_the_mistake(result, [
        (truth[1:], N_("The embedding stream is missing: it is what enters model.blocks[0] (a forward pre-hook sees it "
                       "as args[0]). Put it first.")),
        (truth[:-1], N_("Your list holds what enters each block, and the last block's output is missing ({blocks} "
                        "blocks here): keep the output of every block of model.blocks (their number varies from model "
                        "to model), and what enters block 0.")),
    ], lambda got, wrong: len(got) == len(wrong) and all(map(same, got, wrong)), **fields)
    require(not (len(result) < len(truth) and all(any(same(r, t) for t in truth) for r in result)),
            N_("Expected {expected} tensors for this model (the embedding stream, then one per block), got {got}: each "
               "is a residual stream, but some are missing. Did one hook overwrite what another kept? Hooks made in a "
               "loop all see the loop variable's last value unless each is given its own."), **fields)
    fail(N_("Expected {expected} tensors for this model (the embedding stream, then one per block), got {got}."),
         **fields)


def _wrong_stream(model: InductionTransformer, tokens: torch.Tensor, truth: list[torch.Tensor], index: int,
                  checked: torch.Tensor, result: list) -> None:
    """12.1's ✗ for stream ``index``, which is not the residual stream there."""
    n_layers = len(model.blocks)
    require(not all(map(same, result, reversed(truth))),
            N_("The streams are in reverse order: the embedding stream first, then block 0's output, and so on."))
    require(not (index == 0 and same(checked, model.embed(tokens).detach())),
            N_("Stream 0 is the token embedding alone: what enters block 0 also has the position embedding added. Take "
               "args[0] of block 0 in a forward pre-hook."))
    require(not any(same(checked, model.blocks[min(i, n_layers - 1)].ln1(t).detach()) for i, t in enumerate(truth)),
            N_("Stream {index} is a LayerNorm's output, not the residual stream: hook the blocks themselves, "
               "model.blocks[i]."), index=index)
    for part, block, addition in _additions(model, truth):
        require(not same(checked, addition), N_("Stream {index} is what model.blocks[{block}].{part} adds to the "
                                                "residual stream, not the stream itself: keep what the block "
                                                "returns."), index=index, block=block, part=part)
    elsewhere = [other for other, stream in enumerate(truth) if other != index and same(checked, stream)]
    require(not elsewhere, N_("Stream {index} is the residual stream that belongs at {other}: stream 0 is what "
                              "enters block 0, stream i + 1 what block i returns."), index=index,
            other=elsewhere[0] if elsewhere else None)
    fail(N_("Stream {index} is not the residual stream there: the embedding stream is what enters block 0, stream i + "
            "1 what block i returns."), index=index)


@exercise("12.1")
def _cache_test(cache_residuals: Callable[..., Any]) -> Verdict:
    for n_layers, n_heads, seed in ((3, 2, 121), (1, 4, 122)):
        model, tokens = _model(n_layers, n_heads, seed), _tokens(5, seed)
        truth = _streams(model, tokens)
        with watch_hooks(model) as seen:
            result = cache_residuals(model, tokens)  # gradients on, as in a learner's session
        require_no_hooks(model)
        require(isinstance(result, (list, tuple)), N_("Return a list of tensors, the embedding stream first and then "
                                                      "one per block, got {type}."), type=type_name(result))
        result = list(result)
        require(not any(isinstance(item, torch.Tensor) and item.grad_fn is not None for item in result),
                N_("Your cached tensors still have a grad_fn: the cache keeps the autograd graph, and everything saved "
                   "for a backward that never comes. Keep output.detach()."))
        if len(result) != n_layers + 1:
            _wrong_count(result, truth, n_layers, seen.runs)
        empty = [index for index, item in enumerate(result) if item is None]
        require(not (empty and n_layers > 1 and same(result[-1], truth[-1])),
                N_("Streams {empty} are None and the last one is right: every block's hook wrote to the same place. "
                   "Hooks made in a loop all see the loop variable's last value unless each is given its own."),
                empty=empty)
        for index, (item, expected) in enumerate(zip(result, truth)):
            checked = tensor_result(item, tuple(expected.shape), Text(N_("stream {index}"), index=index))
            if not same(checked, expected):
                _wrong_stream(model, tokens, truth, index, checked, result)
    failing = _model(2, 2, 123)
    failing.blocks[1] = FailsOnPurpose()
    the_error_gets_out(lambda: cache_residuals(failing, _tokens(2, 123)))
    require_no_hooks(failing, N_("When the model raises, a hook stays behind ({where}): remove the handles in a "
                                 "finally block."))
    return Verdict(True)


# -- 12.2: ablate one head ----------------------------------------------------------------------------------------
def _zeroed(model: InductionTransformer, layer: int, tokens: torch.Tensor, columns: Any) -> torch.Tensor:
    """Logits with ``columns`` of out_proj's input set to zero."""
    def pre_hook(module: Any, args: tuple) -> tuple:
        heads = args[0].clone()
        heads[..., columns] = 0
        return (heads,)

    with model.blocks[layer].attn.out_proj.register_forward_pre_hook(pre_hook):
        return _run(model, tokens)


def _called_with(model: InductionTransformer, module: torch.nn.Module, tokens: torch.Tensor) -> tuple[tuple, dict]:
    """The arguments ``module`` is called with when ``model`` runs on ``tokens``."""
    seen: list[tuple[tuple, dict]] = []
    with module.register_forward_pre_hook(lambda hooked, args, kwargs: seen.append((args, kwargs)), with_kwargs=True):
        _run(model, tokens)
    return seen[0]


def _hands_input_on(module: torch.nn.Module) -> bool:
    """Whether ``module``'s forward pre-hooks hand its input on as the very tensor it was called with (a hook that
    returns nothing, or the args it got), rather than a new tensor."""
    seen, probe = [], torch.randn(2, 3, int(module.in_features), generator=generator(0))
    with module.register_forward_pre_hook(lambda hooked, args: seen.append(args[0])), torch.no_grad():
        module(probe)
    return seen[0] is probe


def _returns_none(module: Any) -> bool:
    """Whether every forward pre-hook on ``module`` (those called without kwargs) returns None on a probe input."""
    probe = torch.randn(2, 3, module.in_features, generator=generator(1))
    hooks = [hook for key, hook in module._forward_pre_hooks.items()
             if key not in module._forward_pre_hooks_with_kwargs]
    with torch.no_grad():
        return bool(hooks) and all(hook(module, (probe,)) is None for hook in hooks)


def _misplaced_ablation(where: list[str], layer: int, head: int) -> None:
    """12.2's ✗ for an ablation hooked somewhere in block ``layer`` other than out_proj's forward pre-hooks."""
    inside = f"blocks.{layer}."
    if f"{inside}attn.out_proj._forward_pre_hooks" in where or not any(n.startswith(inside) for n in where):
        return
    require(f"{inside}attn._forward_hooks" not in where,
            N_("You hooked the attention module itself: its output has already been mixed by out_proj, so no slice of "
               "it belongs to one head. Register a forward pre-hook on blocks[{layer}].attn.out_proj, whose input "
               "holds the heads side by side."), layer=layer)
    require(f"{inside}attn.out_proj._forward_hooks" not in where,
            N_("A forward hook on out_proj sees its output, after it has mixed the heads: use a forward pre-hook, "
               "whose args[0] is out_proj's input, the heads side by side."))
    require(f"{inside}attn._forward_pre_hooks" not in where,
            N_("A pre-hook on the attention module changes what all of its heads read (the normalised residual "
               "stream), not what head {head} produces: the heads' outputs lie side by side further in, after they "
               "are computed and before they are mixed."), head=head)
    require(not any(name.startswith(f"{inside}attn.in_proj.") for name in where),
            N_("At in_proj's output a head is switched off through its values alone (its queries and keys only change "
               "where it looks), and what you zeroed there is not exactly head {head}'s values. out_proj's input, "
               "where the heads' outputs lie side by side, is the simpler place."), head=head)
    fail(N_("Your hook is on {where}, where every feature mixes all the heads, so no slice of it is head {head}'s: "
            "look inside the attention of block {layer}, where each head's features are still apart."),
         where=", ".join(n for n in where if n.startswith(inside)), head=head, layer=layer)


@exercise("12.2")
def _ablate_test(ablate_head: Callable[..., Any]) -> Verdict:
    for n_heads, layer, head, seed in ((4, 0, 1, 127), (8, 1, 5, 124), (8, 0, 7, 125), (4, 1, 3, 126)):
        model, tokens = _model(2, n_heads, seed), _tokens(6, seed)
        width, out_proj = model.blocks[0].attn.d_head, model.blocks[layer].attn.out_proj
        own = slice(head * width, (head + 1) * width)
        expected, untouched = _zeroed(model, layer, tokens, own), _run(model, tokens)
        clean_heads = _called_with(model, out_proj, tokens)[0][0]
        handle = ablate_head(model, layer, head)
        where = hooks_left(model)
        with removing(handle):
            require_handle(handle, N_("Return the handle that register_forward_pre_hook gives you, so that the caller "
                                      "can remove the hook (got {type})."))
            require(where, N_("No hook is registered on the model after your call: register one on the attention of "
                              "block {layer}."), layer=layer)
            result, heads = _run(model, tokens), _called_with(model, out_proj, tokens)[0][0]
            passes_through = same(result, untouched) and _hands_input_on(out_proj)
            returns_none = passes_through and _returns_none(out_proj)
        require_no_hooks(model, _LEFT_AFTER_REMOVE)
        if same(result, expected):
            continue
        require(not (same(result, untouched) and f"blocks.{layer}.attn.out_proj._forward_pre_hooks" in where
                     and not passes_through),
                N_("Your hook returns out_proj's input with nothing zeroed: the slice you zero is empty for this "
                   "model, whose attention has {n_heads} heads of d_head = {width}. Take both from the module, not "
                   "from the notebook's model."), n_heads=n_heads, width=width)
        _misplaced_ablation(where, layer, head)
        require(not (same(result, untouched) and returns_none),
                N_("Your hook changed nothing: it returned None and left out_proj's input as it was, so whatever it "
                   "changed was a copy that out_proj never reads. A pre-hook's copy takes the input's place only "
                   "when the hook returns it (the new args)."))
        require(not same(result, untouched), N_("Your hook changed nothing: the logits are those of the model "
                                                "without it. A pre-hook on out_proj changes out_proj's input in "
                                                "place, or through what it returns (the new args)."))
        require(width == 16 or not same(result, _zeroed(model, layer, tokens, slice(head * 16, (head + 1) * 16))),
                N_("You took d_head = 16 from the notebook's model; this model's heads have d_head = {width}. Read it "
                   "from the module (attn.d_head, or in_features // n_heads)."), width=width)
        for columns, description in (
                (list(range(head, n_heads * width, n_heads)), N_("every n_heads-th feature")),
                (slice(head * n_heads, (head + 1) * n_heads), N_("features head*n_heads to (head+1)*n_heads")),
                (slice((head + 1) * width, (head + 2) * width), N_("the next head's features")),
                (slice((head - 1) * width, head * width), N_("the previous head's features")),
                (slice(0, head * width), N_("the heads before it"))):
            require(not same(result, _zeroed(model, layer, tokens, columns)),
                    N_("Wrong head slice: you zeroed {description}. Head h owns the d_head consecutive features "
                       "h*d_head to (h+1)*d_head of out_proj's input."), description=Text(description))
        others = [i for i in range(n_heads * width) if not own.start <= i < own.stop]
        name_the_mistake(result, [
            (lambda: _zeroed(model, layer, tokens, others), N_("You kept head {head} and zeroed all the others: zero "
                                                               "only its own slice.")),
            (lambda: _zeroed(model, 1 - layer, tokens, own), N_("You ablated head {head} of the other block: the hook "
                                                                "belongs on model.blocks[{layer}].")),
        ], head=head, layer=layer)
        features = (heads != clean_heads).flatten(0, -2).any(0)            # the features your hook changed
        zero = (heads[..., own] == 0).flatten(0, -2).all(0)
        fail(N_("Not head {head} of block {layer} switched off: in what out_proj reads, {zero} of the head's {width} "
                "features are zero at every position of every sequence, and {changed} features of other heads "
                "changed. That head's d_head features must "
                "be zero and every other feature as it was."), head=head, layer=layer, width=width,
             zero=int(zero.sum()), changed=int(features.sum() - features[own].sum()))
    return Verdict(True)


# -- 12.3: patch one position of one block's output ----------------------------------------------------------------
def _patched(model: InductionTransformer, clean: torch.Tensor, corrupted: torch.Tensor, layer: int,
             positions: Any, where: str = "output", rows: Any = slice(None)) -> torch.Tensor:
    """The corrupted run with ``[rows, positions]`` of block ``layer``'s output taken from the clean run
    (``where="input"``: of its input; ``"attn"``: of its attention's output)."""
    block, kept = model.blocks[layer], list[torch.Tensor]()

    def swapped(activation: torch.Tensor) -> torch.Tensor:
        if not kept:  # the clean run: keep the activation, change nothing
            kept.append(activation)
            return activation
        patched = activation.clone()
        patched[rows, positions] = kept[0][rows, positions]
        return patched

    with (block.register_forward_pre_hook(lambda module, args: (swapped(args[0]),)) if where == "input" else
          block.attn.register_forward_hook(lambda module, args, out: (swapped(out[0]), *out[1:])) if where == "attn"
          else block.register_forward_hook(lambda module, args, out: swapped(out))):
        _run(model, clean)
        return _run(model, corrupted)


@exercise("12.3")
def _patch_test(patch_position: Callable[..., Any]) -> Verdict:
    for layer, position, seed in ((1, 13, 128), (2, 0, 129), (0, 23, 130)):
        model, clean = _model(3, 2, seed), _tokens(4, seed)
        corrupted = clean.clone()
        corrupted[:, ::3] = (corrupted[:, ::3] + 1) % 64            # a third of the tokens changed
        clean_before, corrupted_before = clean.clone(), corrupted.clone()
        expected, hooks_per_run = _patched(model, clean, corrupted, layer, position), []
        with model.register_forward_pre_hook(lambda module, args: hooks_per_run.append(count_hooks(module) - 1)):
            try:
                raw = patch_position(model, clean, corrupted, layer, position)
            except IndexError as error:
                if f"dimension 0 with size {clean.shape[0]}" not in str(error):
                    raise
                fail(N_("Your code raised {error}. It used position {position} as an index along dimension 0, "
                        "which has {batch} entries here. In the block's output dimension 0 is the batch; the "
                        "positions are dimension 1."), error=f"IndexError: {error}", batch=clean.shape[0],
                     position=position)
        require_no_hooks(model)
        require(torch.equal(clean, clean_before) and torch.equal(corrupted, corrupted_before),
                N_("Your function changed the clean or corrupted tokens: leave the caller's inputs alone."))
        result = tensor_result(raw, tuple(expected.shape), Text(N_("the logits of the patched run")))
        if same(result, expected):
            continue
        length = clean.shape[1]
        fields = {"layer": layer, "position": position, "hooks": hooks_per_run[-1] if hooks_per_run else 0}
        if same(result, _run(model, corrupted)):
            require(fields["hooks"] <= 1, N_("Your patch changed nothing, and {hooks} hooks were on the model during "
                                             "the last run: is the hook that kept the clean output still registered? "
                                             "It runs again and keeps the corrupted output before your patch reads "
                                             "it. Remove it before the corrupted run."), **fields)
            fail(N_("Your patch changed nothing: the corrupted run's logits came out as they were. Does your hook "
                    "return the patched copy? A forward hook replaces the block's output only with what it returns."))
        if same(result, _run(model, clean)) or same(result, _patched(model, clean, corrupted, layer, slice(None))):
            require(fields["hooks"] <= 1,
                    N_("The block's whole output was replaced by the clean one, and {hooks} hooks were on the model "
                       "during the last run: the hook that kept the clean output is still registered, and it returns "
                       "what it kept (dict.setdefault returns the stored value), which replaces the output. Remove it "
                       "before the corrupted run."), **fields)
            fail(N_("The block's whole output was replaced by the clean one, at every position: patch only position "
                    "{position} (output[:, position])."), **fields)
        name_the_mistake(result, [(lambda: _patched(model, clean, corrupted, layer, position, where="input"),
                                   N_("You patched the stream that enters block {layer} (the block's input, which the "
                                      "block before it returns), not the stream block {layer} returns."))], **fields)
        for other in range(len(model.blocks)):
            require(other == layer or not same(result, _patched(model, clean, corrupted, other, position)),
                    N_("You patched block {other}; the task asks for block {layer}."), other=other, layer=layer)
        for other in (position - 1, position + 1):
            require(not (0 <= other < length and same(result, _patched(model, clean, corrupted, layer, other))),
                    N_("You patched position {other}, next to position {position}: positions count from 0 along the "
                       "second dimension of the block's output, the first being the batch."), other=other,
                    position=position)
        name_the_mistake(result, [
            *([(lambda: _patched(model, clean, corrupted, layer, slice(position, None)),
                N_("You patched every position from {position} on: patch position {position} alone."))]
              if position + 1 < length else []),
            (lambda: _patched(model, clean, corrupted, layer, position, rows=0),
             N_("You patched only the first sequence of the batch: patch position {position} of every sequence (the "
                "batch is the first dimension).")),
            (lambda: _patched(model, corrupted, clean, layer, position),
             N_("You swapped the runs: the clean run gives the activation, and the corrupted run is the one patched, "
                "whose logits you return.")),
            (lambda: _patched(model, clean, corrupted, layer, position, where="attn"),
             N_("You patched the output of block {layer}'s attention, not of the block: patch what "
                "model.blocks[{layer}] returns, the residual stream.")),
        ], **fields)
        first = int(((result - expected).abs().amax(dim=(0, 2)) > ATOL).nonzero()[0])
        require(first >= position, N_("Your logits differ from the patched run's already at position {first}, before "
                                      "position {position}, which a patch at {position} cannot reach (attention looks "
                                      "only back): which tokens did your last run read, and what else did your hooks "
                                      "change?"), first=first, **fields)
        fail(N_("Your logits agree with the patched run's before position {position} and differ from it on: the run "
                "and the place are right, but what you put at position {position} is not block {layer}'s output "
                "there in the clean run. Which activation did you keep, and from which run?"), **fields)
    return Verdict(True)


# -- 12.4: steer with a vector, on a tensor or a tuple, at any length --------------------------------------------
def _shifted(stream: torch.Tensor, shift: torch.Tensor, positions: Any = slice(None), rows: Any = slice(None)
             ) -> torch.Tensor:
    steered = stream.clone()
    steered[rows, positions] += shift
    return steered


@exercise("12.4")
def _steer_test(add_steering: Callable[..., Any]) -> Verdict:
    model = _model(3, 4, 131)
    for target, scale, length, seed in (("blocks.1", 0.7, 24, 131), ("blocks.0", -2.0, 9, 132),
                                        ("blocks.2.attn", 3.0, 24, 133), ("blocks.0.attn", 1.5, 5, 134)):
        module, vector = model.get_submodule(target), torch.randn(32, generator=generator(seed))
        args, kwargs = _called_with(model, module, _tokens(4, seed)[:, :length])
        before, returns_tuple = vector.clone(), target.endswith("attn")
        with torch.no_grad():
            untouched = module(*args, **kwargs)
        stream = untouched[0] if returns_tuple else untouched
        fields = {"target": target, "length": length, "count": len(untouched) if returns_tuple else 1}
        handle = add_steering(module, vector, scale)
        with removing(handle), torch.no_grad():
            require_handle(handle, N_("Return the handle that register_forward_hook gives you, so that the caller can "
                                      "remove the hook (got {type})."))
            changed = not torch.equal(vector, before)
            try:
                result = module(*args, **kwargs)
            except (RuntimeError, TypeError, ValueError, IndexError) as error:
                if length == 24 and not returns_tuple:  # the notebook's case: check() names the learner's line
                    raise
                fail(N_("{target} returns a tuple (output, weights), and your hook raised {error} on it: steer the "
                        "tuple's first element and return a tuple with the rest as it was.") if returns_tuple else
                     N_("On {length} positions your hook on {target} raised {error}: steering must fit any number of "
                        "positions, not only the notebook's 24."), error=f"{type(error).__name__}: {error}", **fields)
            changed = changed or not torch.equal(vector, before)
        require_no_hooks(model, _LEFT_AFTER_REMOVE)
        require(not changed, N_("Your code changed the vector it was given (an in-place operation on it): compute "
                                "scale * vector as a new tensor."))
        if returns_tuple:
            require(isinstance(result, tuple), N_("{target} returns a tuple (output, weights), and your hook returned "
                                                  "a {type}: return a tuple of the same length, its first element "
                                                  "steered and the rest as it was."), type=type_name(result), **fields)
            require(len(result) == len(untouched), N_("{target} returns a tuple of {count} (output, weights), and your "
                                                      "hook returned a tuple of {size}: keep the rest of the tuple as "
                                                      "it was."), size=len(result), **fields)
            kept = [index for index, (got, was) in enumerate(zip(result[1:], untouched[1:]), 1)
                    if not (got is was or (isinstance(was, torch.Tensor) and same(got, was)))]
            require(not (kept and same(result[0], stream)),
                    N_("Your hook left the tuple's first element as it was and changed the one at index {index}: on "
                       "{target} the output proper, the one to steer, is the tuple's first element (the rest, such as "
                       "the weights, is handed on as it was)."), index=kept[0] if kept else None, **fields)
            require(not kept, N_("Your hook replaced the element at index {index} of the tuple {target} returns: hand "
                                 "the rest of the tuple on as it was, and steer only its first element."),
                    index=kept[0] if kept else None, **fields)
            result = result[0]
        require(isinstance(result, torch.Tensor), N_("{target} returns a tensor, and your hook returned a {type}: what "
                                                     "a forward hook returns replaces the output, so return a tensor "
                                                     "shaped like it."), type=type_name(result), **fields)
        expected = _shifted(stream, scale * vector)
        if same(result, expected):
            continue
        name_the_mistake(result, [
            (stream, N_("Your hook changed nothing: a forward hook replaces the output only with what it returns. "
                        "Return the steered output from the hook.")),
            (_shifted(stream, vector), N_("You added the vector without its scale: add scale * vector.")),
            (_shifted(stream, scale * vector, positions=-1),
             N_("You steered only the last position: add the vector at every position.")),
            (_shifted(stream, scale * vector, rows=0),
             N_("You steered only the first sequence of the batch: add the vector to every sequence, at every "
                "position.")),
            (lambda: _first(module(args[0] + scale * vector, *args[1:], **kwargs)),
             N_("You added the vector to what enters the module (a forward pre-hook): the task adds it to what the "
                "module returns.")),
            (_shifted(stream, scale * vector / vector.norm()),
             N_("You scaled a unit vector (vector / its norm): add scale * vector as it was given, with its own "
                "length.")),
        ])
        added = result - stream
        steered = torch.isclose(added, scale * vector, atol=ATOL).all(-1)
        fail(N_("Not scale * vector added at every position of {target}'s output: {steered} of its {total} positions "
                "(batch times sequence) got exactly that. Compare what your hook adds with scale * vector."),
             steered=int(steered.sum()), total=steered.numel(), **fields)
    _steer_generation(add_steering, model)
    return Verdict(True)


def _first(output: Any) -> torch.Tensor:
    return output[0] if isinstance(output, tuple) else output


def _steer_generation(add_steering: Callable[..., Any], model: InductionTransformer) -> None:
    """12.4 during KV-cached generation: the block sees the prompt once, then one position per step."""
    prompt, vector = _tokens(3, 135)[:, :9], torch.randn(32, generator=generator(135)) * 2
    with model.blocks[1].register_forward_hook(lambda module, args, output: output + 1.5 * vector):
        expected = generate(model, prompt, 8, use_cache=False)
    handle = add_steering(model.blocks[1], vector, 1.5)
    with removing(handle):
        try:
            result = generate(model, prompt, 8, use_cache=True)
        except (RuntimeError, TypeError, ValueError, IndexError) as error:
            fail(N_("During KV-cached generation, where blocks.1 sees the prompt's 9 positions and then one position "
                    "per step, your hook raised {error}: every call must be steered at each of its positions, whatever "
                    "their number."), error=f"{type(error).__name__}: {error}")
    require(torch.equal(result, expected),
            N_("During KV-cached generation, where blocks.1 sees the prompt's 9 positions and then one position per "
               "step, your steering gives other tokens than scale * vector added at every position of every call: "
               "does your hook keep something from an earlier call, such as a shift shaped for its length?"))


# -- 12.5 (stretch): steer during KV-cached generation -------------------------------------------------------------
def _generated(model: InductionTransformer, prompt: torch.Tensor, new_tokens: int, layer: int, vector: torch.Tensor,
               start: int, use_cache: bool, mistake: str = "") -> torch.Tensor:
    """Greedy generation steered at absolute positions >= start (``mistake="slice"``: output[:, start:];
    ``"everywhere"``: every position; ``"after"``: positions > start; ``"generated"``: only the positions after the
    prompt; ``"prompt_end"``: start counted from the end of the prompt; ``"input"``: the block's input instead of its
    output)."""
    def steered(stream: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        stream = stream.clone()
        where = {"slice": (slice(None), slice(start, None)), "everywhere": (slice(None),),
                 "after": (slice(None), positions > start), "generated": (slice(None), positions >= prompt.shape[1]),
                 "prompt_end": (slice(None), positions >= prompt.shape[1] + start)
                 }.get(mistake, (slice(None), positions >= start))
        stream[where] += vector
        return stream

    block = model.blocks[layer]
    with (block.register_forward_pre_hook(lambda module, args, kwargs: ((steered(args[0], kwargs["positions"]),),
                                                                        kwargs), with_kwargs=True)
          if mistake == "input" else
          block.register_forward_hook(lambda module, args, kwargs, output: steered(output, kwargs["positions"]),
                                      with_kwargs=True)):
        return generate(model, prompt, new_tokens, use_cache=use_cache)


def _hook_raised(error: Exception) -> None:
    """12.5's ✗ for a hook whose signature does not match how it was registered, or that reads args[1]."""
    frames = [frame.filename.replace(os.sep, "/") for frame in traceback.extract_tb(error.__traceback__)]
    called_by_torch = [name.endswith(("torch/nn/modules/module.py", "course_utils/machinery/hook_watch.py"))
                       for name in frames]  # where a hook is called: by torch, or by the watcher around it
    text = f"{type(error).__name__}: {error}"
    require(not (isinstance(error, TypeError) and "positional argument" in str(error)
                 and called_by_torch[-1:] == [True]),
            N_("Your hook raised {error}: a forward hook registered with with_kwargs=True is called with four "
               "arguments (module, args, kwargs, output), one registered without it with three (module, args, "
               "output). Give your hook the signature that matches how you registered it."), error=text)
    require(not (isinstance(error, IndexError) and "tuple index out of range" in str(error)
                 and called_by_torch[-2:-1] == [True]),
            N_("Your hook raised {error}: the block is called with one positional argument, the residual stream "
               "(args[0]); everything else it is told comes as keyword arguments, which a hook sees only when it "
               "is registered to."), error=text)


@exercise("12.5")
def _kv_test(generate_steered: Callable[..., Any]) -> Verdict:
    for case, (layer, prompt_length, start, seed) in enumerate(((0, 10, 5, 135), (1, 12, 15, 134))):
        model = _model(2, 4, seed)
        prompt, new_tokens = _tokens(6, seed)[:, :prompt_length], 24 - prompt_length
        vector = torch.randn(32, generator=generator(seed)) * 3
        before = vector.clone()
        expected, lengths = _generated(model, prompt, new_tokens, layer, vector, start, use_cache=False), []
        with model.register_forward_pre_hook(lambda module, args: lengths.append(args[0].shape[1])):
            try:
                raw = generate_steered(model, prompt, new_tokens, layer, vector, start)
            except (TypeError, IndexError) as error:
                _hook_raised(error)
                raise
        require_no_hooks(model, N_("A hook is still on the model after generation ({where}): every later call would be "
                                   "steered too. Remove it when generation ends (a with block or finally)."))
        require(torch.equal(vector, before), N_("Your code changed the vector it was given: leave it as it was."))
        result = tensor_result(raw, tuple(expected.shape), Text(N_("the prompt followed by the generated tokens")),
                               floating=False)
        require(all(length == 1 for length in lengths[1:]),
                N_("Your generation reran the whole sequence at every step: use the KV cache (generate(..., "
                   "use_cache=True)), which feeds one new token per step."))
        again = generate_steered(model, prompt, new_tokens, layer, vector, start) if case == 0 else result
        require(isinstance(again, torch.Tensor) and torch.equal(again, result),  # state kept between calls
                N_("Called twice with the same arguments, your function generates different tokens: something it keeps "
                   "(a counter, a list) lives on from one call to the next. Create it anew inside generate_steered."))
        if torch.equal(result, expected):
            continue
        require(torch.equal(result[:, :prompt_length], prompt),
                N_("Return the prompt followed by the generated tokens: the first {length} tokens of your result are "
                   "not the prompt."), length=prompt_length)
        name_the_mistake(result, [(lambda mistake=mistake: _generated(model, prompt, new_tokens, layer, vector, start,
                                                                      True, mistake), message)
                                  for mistake, message in (
            ("slice", N_("output[:, start:] counts the positions of this call's output, not absolute positions. "
                         "With the KV cache each step's output holds only the new position, so after the prompt the "
                         "slice is empty and no generated position is steered. What is the block told, at each call, "
                         "about the absolute positions it is working on?")),
            ("everywhere", N_("You steered every position: only positions >= start ({start}) get the vector.")),
            ("after", N_("You steered the positions after start, not from start on: position {start} itself gets the "
                         "vector too.")),
            ("prompt_end", N_("You steered from position {late} on: you counted start from the end of the prompt. "
                              "start is an absolute position, counted from the prompt's first token (position 0), as "
                              "kwargs['positions'] counts.")),
            ("generated", N_("You steered the generated positions, those after the prompt: start ({start}) says where "
                             "steering begins, inside the prompt or after it.")),
            ("input", N_("You added the vector to what enters block {layer} (a forward pre-hook): the task adds it to "
                         "what the block returns.")))], torch.equal, start=start, layer=layer,
            late=prompt_length + start)
        first = int((result != expected).any(0).nonzero()[0])
        fail(N_("Your tokens first differ from those of the steered generation at position {first}, the token chosen "
                "at generation step {step}: the steering that chose it is not vector added at every position >= "
                "{start} of block {layer}'s output. Compare with generate(..., use_cache=False) and the same "
                "steering."),
             first=first, step=first - prompt_length + 1, start=start, layer=layer)
    return Verdict(True)


EXERCISES = (_cache_test, _ablate_test, _patch_test, _steer_test, _kv_test)
