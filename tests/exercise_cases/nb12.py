"""Answers for the checks of notebooks/12_transformer_hooks.ipynb."""

from __future__ import annotations

import torch

from course_utils.hooks import HookRegistry
from course_utils.transformer import KVCache, generate
from tests.exercise_cases import Cases


# -- 12.1 ---------------------------------------------------------------------------------------------------------
def _run_then_remove(model, tokens, handles):  # noqa: ANN001, ANN202 -- one forward, then every handle removed
    try:
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()


def cache_with_registry(model, tokens):  # noqa: ANN001, ANN201 -- HookRegistry, a dict filled in any order
    found = {}
    with HookRegistry(model) as hooks:
        hooks.forward_pre("blocks.0", lambda module, args: found.__setitem__(-1, args[0].detach().clone()))
        for index, block in enumerate(model.blocks):
            hooks.forward(block, lambda module, args, output, index=index: found.__setitem__(index, output.detach()))
        with torch.no_grad():
            model(tokens)
    return [found[key] for key in sorted(found)]


def cache_keeping_the_graph(model, tokens):  # noqa: ANN001, ANN201 -- no detach
    streams = []
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: streams.append(args[0]))]
    handles += [block.register_forward_hook(lambda module, args, output: streams.append(output))
                for block in model.blocks]
    _run_then_remove(model, tokens, handles)
    return streams


def cache_without_embeddings(model, tokens):  # noqa: ANN001, ANN201
    streams = []
    handles = [block.register_forward_hook(lambda module, args, output: streams.append(output.detach()))
               for block in model.blocks]
    _run_then_remove(model, tokens, handles)
    return streams


def cache_block_inputs(model, tokens):  # noqa: ANN001, ANN201 -- args instead of output
    streams = []
    handles = [block.register_forward_pre_hook(lambda module, args: streams.append(args[0].detach()))
               for block in model.blocks]
    _run_then_remove(model, tokens, handles)
    return streams


def cache_layer_norms(model, tokens):  # noqa: ANN001, ANN201 -- ln1 of each block, then the last output
    streams = []
    handles = [block.ln1.register_forward_hook(lambda module, args, output: streams.append(output.detach()))
               for block in model.blocks]
    handles.append(model.blocks[-1].register_forward_hook(lambda module, args, output: streams.append(output.detach())))
    _run_then_remove(model, tokens, handles)
    return streams


def cache_the_token_embedding(model, tokens):  # noqa: ANN001, ANN201 -- model.embed's output: no positions
    streams = []
    handles = [model.embed.register_forward_hook(lambda module, args, output: streams.append(output.detach()))]
    handles += [block.register_forward_hook(lambda module, args, output: streams.append(output.detach()))
                for block in model.blocks]
    _run_then_remove(model, tokens, handles)
    return streams


def cache_on_the_module_list(model, tokens):  # noqa: ANN001, ANN201 -- model.blocks is never called
    streams = []
    with model.blocks.register_forward_hook(lambda module, args, output: streams.append(output.detach())):
        model(tokens)
    return streams


def cache_hooks_left(model, tokens):  # noqa: ANN001, ANN201 -- never removes its hooks
    streams = []
    model.blocks[0].register_forward_pre_hook(lambda module, args: streams.append(args[0].detach()))
    for block in model.blocks:
        block.register_forward_hook(lambda module, args, output: streams.append(output.detach()))
    model(tokens)
    return streams


def cache_removed_outside_finally(model, tokens):  # noqa: ANN001, ANN201 -- lost when the forward raises
    streams = []
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: streams.append(args[0].detach()))]
    handles += [block.register_forward_hook(lambda module, args, output: streams.append(output.detach()))
                for block in model.blocks]
    model(tokens)
    for handle in handles:
        handle.remove()
    return streams


def cache_without_running_the_model(model, tokens):  # noqa: ANN001, ANN201 -- registers, removes, never runs
    streams = []
    handles = [block.register_forward_hook(lambda module, args, output: streams.append(output.detach()))
               for block in model.blocks]
    for handle in handles:
        handle.remove()
    return streams


SHARED_STREAMS = []


def cache_into_a_shared_list(model, tokens):  # noqa: ANN001, ANN201 -- the list outlives the call
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: SHARED_STREAMS.append(args[0].detach()))]
    handles += [block.register_forward_hook(lambda module, args, output: SHARED_STREAMS.append(output.detach()))
                for block in model.blocks]
    _run_then_remove(model, tokens, handles)
    return SHARED_STREAMS


def cache_the_mlp_outputs(model, tokens):  # noqa: ANN001, ANN201 -- what the MLP adds, not the stream
    streams = []
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: streams.append(args[0].detach()))]
    handles += [block.mlp.register_forward_hook(lambda module, args, output: streams.append(output.detach()))
                for block in model.blocks]
    _run_then_remove(model, tokens, handles)
    return streams


def cache_by_a_late_bound_index(model, tokens):  # noqa: ANN001, ANN201 -- every hook writes the last index
    found = {}
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: found.__setitem__(0, args[0].detach()))]
    for index, block in enumerate(model.blocks):
        handles.append(block.register_forward_hook(
            lambda module, args, output: found.__setitem__(index + 1, output.detach())))
    _run_then_remove(model, tokens, handles)
    return [found[key] for key in sorted(found)]


def cache_into_slots_late_bound(model, tokens):  # noqa: ANN001, ANN201 -- a list of slots, every hook the last one
    streams = [None] * (len(model.blocks) + 1)
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: streams.__setitem__(0, args[0].detach()))]
    for index, block in enumerate(model.blocks):
        handles.append(block.register_forward_hook(
            lambda module, args, output: streams.__setitem__(index + 1, output.detach())))
    _run_then_remove(model, tokens, handles)
    return streams


def cache_two_blocks(model, tokens):  # noqa: ANN001, ANN201 -- the number of blocks hard-coded
    streams = [None, None, None]
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: streams.__setitem__(0, args[0].detach()))]
    handles += [model.blocks[i].register_forward_hook(
        lambda module, args, output, i=i: streams.__setitem__(i + 1, output.detach())) for i in range(2)]
    _run_then_remove(model, tokens, handles)
    return streams


# -- 12.2 ---------------------------------------------------------------------------------------------------------
def ablate_with_a_mask(model, layer, head):  # noqa: ANN001, ANN201 -- multiplies by a 0/1 mask
    attention = model.blocks[layer].attn
    mask = torch.ones(attention.n_heads, attention.d_head)
    mask[head] = 0
    return attention.out_proj.register_forward_pre_hook(lambda module, args: args[0] * mask.flatten())


def ablate_the_attention_output(model, layer, head):  # noqa: ANN001, ANN201 -- after out_proj mixed the heads
    width = model.blocks[layer].attn.d_head

    def hook(module, args, output):  # noqa: ANN001, ANN202
        mixed = output[0].clone()
        mixed[..., head * width:(head + 1) * width] = 0
        return mixed, output[1]

    return model.blocks[layer].attn.register_forward_hook(hook)


def ablate_with_the_notebooks_width(model, layer, head):  # noqa: ANN001, ANN201 -- d_head = 16 hard-coded
    def pre_hook(module, args):  # noqa: ANN001, ANN202
        heads = args[0].clone()
        heads[..., head * 16:(head + 1) * 16] = 0
        return (heads,)

    return model.blocks[layer].attn.out_proj.register_forward_pre_hook(pre_hook)


def ablate_after_out_proj(model, layer, head):  # noqa: ANN001, ANN201 -- a forward hook on out_proj
    width = model.blocks[layer].attn.d_head

    def hook(module, args, output):  # noqa: ANN001, ANN202
        mixed = output.clone()
        mixed[..., head * width:(head + 1) * width] = 0
        return mixed

    return model.blocks[layer].attn.out_proj.register_forward_hook(hook)


def ablate_interleaved(model, layer, head):  # noqa: ANN001, ANN201 -- every n_heads-th feature
    n_heads = model.blocks[layer].attn.n_heads

    def pre_hook(module, args):  # noqa: ANN001, ANN202
        heads = args[0].clone()
        heads[..., head::n_heads] = 0
        return (heads,)

    return model.blocks[layer].attn.out_proj.register_forward_pre_hook(pre_hook)


def ablate_without_returning(model, layer, head):  # noqa: ANN001, ANN201 -- changes a copy, returns nothing
    width = model.blocks[layer].attn.d_head

    def pre_hook(module, args):  # noqa: ANN001, ANN202
        heads = args[0].clone()
        heads[..., head * width:(head + 1) * width] = 0

    return model.blocks[layer].attn.out_proj.register_forward_pre_hook(pre_hook)


def ablate_returning_nothing(model, layer, head):  # noqa: ANN001, ANN201 -- the handle is not returned
    ablate_with_a_mask(model, layer, head)


def ablate_the_values(model, layer, head):  # noqa: ANN001, ANN201 -- zero the head's values: its output is zero
    attention = model.blocks[layer].attn
    width, values = attention.d_head, 2 * attention.n_heads * attention.d_head

    def hook(module, args, output):  # noqa: ANN001, ANN202
        made = output.clone()
        made[..., values + head * width:values + (head + 1) * width] = 0
        return made

    return attention.in_proj.register_forward_hook(hook)


def ablate_the_attentions_input(model, layer, head):  # noqa: ANN001, ANN201 -- a pre-hook on attn: what heads read
    width = model.blocks[layer].attn.d_head

    def pre_hook(module, args):  # noqa: ANN001, ANN202
        x = args[0].clone()
        x[..., head * width:(head + 1) * width] = 0
        return (x,)

    return model.blocks[layer].attn.register_forward_pre_hook(pre_hook)


def ablate_with_the_notebooks_head_count(model, layer, head):  # noqa: ANN001, ANN201 -- in_features // 4
    out_proj = model.blocks[layer].attn.out_proj
    width = out_proj.in_features // 4

    def pre_hook(module, args):  # noqa: ANN001, ANN202
        heads = args[0].clone()
        heads[..., head * width:(head + 1) * width] = 0   # past the end for head 5 of 8: an empty slice
        return (heads,)

    return out_proj.register_forward_pre_hook(pre_hook)


def ablate_on_the_block(model, layer, head):  # noqa: ANN001, ANN201 -- the block's output, the residual stream
    width = model.blocks[layer].attn.d_head

    def hook(module, args, output):  # noqa: ANN001, ANN202
        stream = output.clone()
        stream[..., head * width:(head + 1) * width] = 0
        return stream

    return model.blocks[layer].register_forward_hook(hook)


def ablate_the_previous_head(model, layer, head):  # noqa: ANN001, ANN201 -- heads counted from 1
    width = model.blocks[layer].attn.d_head

    def pre_hook(module, args):  # noqa: ANN001, ANN202
        heads = args[0].clone()
        heads[..., (head - 1) * width:head * width] = 0
        return (heads,)

    return model.blocks[layer].attn.out_proj.register_forward_pre_hook(pre_hook)


def ablate_returning_a_list(model, layer, head):  # noqa: ANN001, ANN201 -- list.remove is not a handle's remove
    return [ablate_with_a_mask(model, layer, head)]


# -- 12.3 ---------------------------------------------------------------------------------------------------------
def patch_in_one_batched_run(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201 -- one batch of both
    n = clean.shape[0]

    def hook(module, args, output):  # noqa: ANN001, ANN202
        patched = output.clone()
        patched[n:, position] = output[:n, position]
        return patched

    with model.blocks[layer].register_forward_hook(hook), torch.no_grad():
        return model(torch.cat([clean, corrupted]))[n:]


def patch_without_returning(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201
    kept = {}
    with model.blocks[layer].register_forward_hook(lambda m, a, output: kept.__setitem__("x", output)):
        model(clean)

    def hook(module, args, output):  # noqa: ANN001, ANN202
        patched = output.clone()
        patched[:, position] = kept["x"][:, position]

    with model.blocks[layer].register_forward_hook(hook):
        return model(corrupted)


def patch_every_position(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201
    kept = {}
    with model.blocks[layer].register_forward_hook(lambda m, a, output: kept.__setitem__("x", output)):
        model(clean)
    with model.blocks[layer].register_forward_hook(lambda m, a, output: kept["x"]):
        return model(corrupted)


def patch_with_a_setdefault_hook_left_on(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201
    saved = {}  # found by a learner run: setdefault returns the clean output, which replaces the corrupted one
    keep = model.blocks[layer].register_forward_hook(lambda m, a, output: saved.setdefault("clean", output))
    model(clean)

    def patch(module, args, output):  # noqa: ANN001, ANN202
        patched = output.clone()
        patched[:, position] = saved["clean"][:, position]
        return patched

    with model.blocks[layer].register_forward_hook(patch):
        result = model(corrupted)
    keep.remove()
    return result


def patch_the_input(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201 -- a pre-hook on the block
    kept = {}
    with model.blocks[layer].register_forward_pre_hook(lambda m, args: kept.__setitem__("x", args[0])):
        model(clean)

    def pre_hook(module, args):  # noqa: ANN001, ANN202
        patched = args[0].clone()
        patched[:, position] = kept["x"][:, position]
        return (patched,)

    with model.blocks[layer].register_forward_pre_hook(pre_hook):
        return model(corrupted)


def patch_hook_left(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201 -- the clean hook stays
    kept = {}
    model.blocks[layer].register_forward_hook(lambda m, a, output: kept.update(x=output))
    model(clean)

    def hook(module, args, output):  # noqa: ANN001, ANN202
        patched = output.clone()
        patched[:, position] = kept["x"][:, position]
        return patched

    with model.blocks[layer].register_forward_hook(hook):
        return model(corrupted)


def _patch_with(model, clean, corrupted, layer, index, runs=None):  # noqa: ANN001, ANN202 -- output[index]
    first, second = runs or (clean, corrupted)
    kept = {}
    with model.blocks[layer].register_forward_hook(lambda m, a, output: kept.__setitem__("x", output.detach())):
        model(first)

    def hook(module, args, output):  # noqa: ANN001, ANN202
        patched = output.clone()
        patched[index] = kept["x"][index]
        return patched

    with model.blocks[layer].register_forward_hook(hook):
        return model(second)


def patch_the_next_position(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201 -- off by one
    return _patch_with(model, clean, corrupted, layer, (slice(None), position + 1))


def patch_from_the_position_on(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201
    return _patch_with(model, clean, corrupted, layer, (slice(None), slice(position, None)))


def patch_the_first_sequence(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201
    return _patch_with(model, clean, corrupted, layer, (0, position))


def patch_the_clean_run(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201 -- the runs swapped
    return _patch_with(model, clean, corrupted, layer, (slice(None), position), runs=(corrupted, clean))


def patch_the_attention_output(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201 -- attn, not block
    attention, kept = model.blocks[layer].attn, {}
    with attention.register_forward_hook(lambda m, a, output: kept.__setitem__("x", output[0].detach())):
        model(clean)

    def hook(module, args, output):  # noqa: ANN001, ANN202
        patched = output[0].clone()
        patched[:, position] = kept["x"][:, position]
        return patched, output[1]

    with attention.register_forward_hook(hook):
        return model(corrupted)


def patch_before_the_next_module(model, clean, corrupted, layer, position):  # noqa: ANN001, ANN201 -- pre-hook after
    after = model.blocks[layer + 1] if layer + 1 < len(model.blocks) else model.ln_final
    kept = []
    with after.register_forward_pre_hook(lambda m, args: kept.append(args[0].detach())), torch.no_grad():
        model(clean)

    def pre_hook(module, args):  # noqa: ANN001, ANN202
        stream = args[0].clone()
        stream[:, position, :] = kept[0][:, position, :]
        return (stream,)

    with after.register_forward_pre_hook(pre_hook), torch.no_grad():
        return model(corrupted)


# -- 12.4 ---------------------------------------------------------------------------------------------------------
def steer_with_a_lambda(module, vector, scale):  # noqa: ANN001, ANN201 -- lambda, keeps vector*scale
    shift = vector * scale
    return module.register_forward_hook(lambda m, args, output: output + shift)


def steer_without_returning(module, vector, scale):  # noqa: ANN001, ANN201
    def hook(m, args, output):  # noqa: ANN001, ANN202
        output = output + scale * vector  # noqa: F841 -- rebinding a local changes nothing

    return module.register_forward_hook(hook)


def steer_scaling_the_vector_in_place(module, vector, scale):  # noqa: ANN001, ANN201
    vector.mul_(scale)
    return module.register_forward_hook(lambda m, args, output: output + vector)


def steer_without_the_scale(module, vector, scale):  # noqa: ANN001, ANN201
    return module.register_forward_hook(lambda m, args, output: output + vector)


def steer_the_last_position(module, vector, scale):  # noqa: ANN001, ANN201
    def hook(m, args, output):  # noqa: ANN001, ANN202
        steered = output.clone()
        steered[:, -1] += scale * vector
        return steered

    return module.register_forward_hook(hook)


def steer_in_place(module, vector, scale):  # noqa: ANN001, ANN201 -- changes the output in place, returns None
    def hook(m, args, output):  # noqa: ANN001, ANN202
        output.add_(vector, alpha=scale)

    return module.register_forward_hook(hook)


def steer_the_input(module, vector, scale):  # noqa: ANN001, ANN201 -- a pre-hook: what enters the block
    return module.register_forward_pre_hook(lambda m, args: (args[0] + scale * vector,))


def steer_with_a_unit_vector(module, vector, scale):  # noqa: ANN001, ANN201
    unit = vector / vector.norm()
    return module.register_forward_hook(lambda m, args, output: output + scale * unit)


# -- 12.5 ---------------------------------------------------------------------------------------------------------
def steered_by_hand_written_loop(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201 -- own loop
    def hook(module, args, kwargs, output):  # noqa: ANN001, ANN202
        where = (kwargs["positions"] >= start).float()[None, :, None]
        return output + where * vector

    cache, tokens, step = KVCache(), prompt, prompt
    with model.blocks[layer].register_forward_hook(hook, with_kwargs=True), torch.no_grad():
        for _ in range(new_tokens):
            step = model(step, kv_cache=cache)[:, -1:].argmax(dim=-1)
            tokens = torch.cat([tokens, step], dim=1)
    return tokens


def steered_by_slice(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201 -- output[:, start:]
    def hook(module, args, output):  # noqa: ANN001, ANN202
        steered = output.clone()
        steered[:, start:] += vector
        return steered

    with model.blocks[layer].register_forward_hook(hook):
        return generate(model, prompt, new_tokens, use_cache=True)


def steered_everywhere(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201
    with model.blocks[layer].register_forward_hook(lambda m, a, output: output + vector):
        return generate(model, prompt, new_tokens, use_cache=True)


def steered_hook_left_on(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201
    def hook(module, args, kwargs, output):  # noqa: ANN001, ANN202
        steered = output.clone()
        steered[:, kwargs["positions"] >= start] += vector
        return steered

    model.blocks[layer].register_forward_hook(hook, with_kwargs=True)
    return generate(model, prompt, new_tokens, use_cache=True)


def steered_without_the_cache(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201
    def hook(module, args, output):  # noqa: ANN001, ANN202
        steered = output.clone()
        steered[:, start:] += vector
        return steered

    with model.blocks[layer].register_forward_hook(hook):
        return generate(model, prompt, new_tokens, use_cache=False)


def _steered_where(model, prompt, new_tokens, layer, vector, chosen):  # noqa: ANN001, ANN202
    def hook(module, args, kwargs, output):  # noqa: ANN001, ANN202
        steered = output.clone()
        steered[:, chosen(kwargs["positions"])] += vector
        return steered

    with model.blocks[layer].register_forward_hook(hook, with_kwargs=True):
        return generate(model, prompt, new_tokens, use_cache=True)


def steered_after_start(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201 -- > for >=
    return _steered_where(model, prompt, new_tokens, layer, vector, lambda positions: positions > start)


def steered_generated_only(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201 -- start ignored
    return _steered_where(model, prompt, new_tokens, layer, vector, lambda positions: positions >= prompt.shape[1])


SEEN = [0]


def steered_by_a_counter_kept_between_calls(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201
    def hook(module, args, output):  # noqa: ANN001, ANN202
        where = torch.arange(SEEN[0], SEEN[0] + output.shape[1])
        SEEN[0] += output.shape[1]                  # never reset: the next call starts where this one ended
        return output + (where >= start)[:, None].to(output.dtype) * vector

    with model.blocks[layer].register_forward_hook(hook):
        return generate(model, prompt, new_tokens, use_cache=True)


def steered_at_the_input(model, prompt, new_tokens, layer, vector, start):  # noqa: ANN001, ANN201 -- a pre-hook
    def pre_hook(module, args, kwargs):  # noqa: ANN001, ANN202
        stream = args[0].clone()
        stream[:, kwargs["positions"] >= start] += vector
        return (stream,), kwargs

    with model.blocks[layer].register_forward_pre_hook(pre_hook, with_kwargs=True):
        return generate(model, prompt, new_tokens, use_cache=True)



def cache_returning_what_it_keeps(model, tokens):  # noqa: ANN001, ANN201 -- the hook returns the detached copy
    streams = []

    def keep(module, args, output):  # noqa: ANN001, ANN202
        streams.append(output.detach())
        return streams[-1]

    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: streams.append(args[0].detach()))]
    handles += [block.register_forward_hook(keep) for block in model.blocks]
    try:
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return streams


def ablate_new_args_as_a_list(model, layer, head):  # noqa: ANN001, ANN201 -- new args as a list, not a tuple
    attention = model.blocks[layer].attn

    def hook(module, args):  # noqa: ANN001, ANN202
        heads = args[0].clone()
        heads[..., head * attention.d_head:(head + 1) * attention.d_head] = 0
        return [heads]

    return attention.out_proj.register_forward_pre_hook(hook)


def steer_returning_a_tuple(module, vector, scale):  # noqa: ANN001, ANN201 -- the output wrapped in a tuple
    return module.register_forward_hook(lambda m, args, output: (output + scale * vector,))


CASES = {
    "12.1": Cases(
        right=[cache_with_registry],
        wrong=[
            (cache_keeping_the_graph, "grad_fn"),
            (cache_without_embeddings, "embedding stream is missing"),
            (cache_block_inputs, "what enters each block"),
            (cache_layer_norms, "LayerNorm"),
            (cache_the_token_embedding, "position embedding"),
            (cache_on_the_module_list, "ModuleList"),
            (cache_hooks_left, "left behind"),
            (cache_removed_outside_finally, "finally"),
            (cache_without_running_the_model, "never ran"),
            (cache_into_a_shared_list, "earlier call"),
            (cache_the_mlp_outputs, "model.blocks[0].mlp adds"),
            (cache_by_a_late_bound_index, "loop variable"),
            (cache_into_slots_late_bound, "loop variable"),
            (cache_two_blocks, "their number varies"),
            (cache_returning_what_it_keeps, "detached from the graph"),
        ],
    ),
    "12.2": Cases(
        right=[ablate_with_a_mask, ablate_the_values],
        wrong=[
            (ablate_the_attention_output, "attention module itself"),
            (ablate_after_out_proj, "forward pre-hook, whose args[0]"),
            (ablate_with_the_notebooks_width, "d_head = 16"),
            (ablate_interleaved, "Wrong head slice"),
            (ablate_without_returning, "changed nothing"),
            (ablate_returning_nothing, "Return the handle"),
            (ablate_the_attentions_input, "what all of its heads read"),
            (ablate_with_the_notebooks_head_count, "slice you zero is empty"),
            (ablate_on_the_block, "every feature mixes all the heads"),
            (ablate_the_previous_head, "previous head"),
            (ablate_new_args_as_a_list, "returned a list, not a tensor"),
            (ablate_returning_a_list, "(got list)"),
        ],
    ),
    "12.3": Cases(
        right=[patch_in_one_batched_run, patch_before_the_next_module],
        wrong=[
            (patch_without_returning, "changed nothing"),
            (patch_every_position, "at every position"),
            (patch_with_a_setdefault_hook_left_on, "dict.setdefault"),
            (patch_the_input, "what enters block"),
            (patch_hook_left, "left behind"),
            (patch_the_next_position, "next to position"),
            (patch_from_the_position_on, "every position from"),
            (patch_the_first_sequence, "first sequence"),
            (patch_the_clean_run, "swapped the runs"),
            (patch_the_attention_output, "block 1's attention"),
        ],
    ),
    "12.4": Cases(
        right=[steer_with_a_lambda, steer_in_place],
        wrong=[
            (steer_without_returning, "changed nothing"),
            (steer_returning_a_tuple, "returned a tuple, not a tensor"),
            (steer_scaling_the_vector_in_place, "changed the vector"),
            (steer_without_the_scale, "without its scale"),
            (steer_the_last_position, "last position"),
            (steer_the_input, "what enters the module"),
            (steer_with_a_unit_vector, "unit vector"),
        ],
    ),
    "12.5": Cases(
        right=[steered_by_hand_written_loop],
        wrong=[
            (steered_by_slice, "slice is empty"),
            (steered_everywhere, "every position"),
            (steered_hook_left_on, "after generation"),
            (steered_without_the_cache, "KV cache"),
            (steered_after_start, "after start"),
            (steered_generated_only, "generated positions"),
            (steered_by_a_counter_kept_between_calls, "Called twice"),
            (steered_at_the_input, "what enters block"),
        ],
    ),
}
