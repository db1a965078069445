"""Answers for the checks of notebooks/12_transformer_hooks.ipynb."""

from __future__ import annotations

from course_utils.transformer import KVCache, generate
from tests.exercise_cases import Cases, answer, mutants

USES = {"generate": generate, "KVCache": KVCache, "SHARED": [], "SEEN": [0]}
CACHE = """
def cache_residuals(model, tokens):
    streams, handles = [], []
    try:
        handles.append(model.blocks[0].register_forward_pre_hook(lambda module, args: streams.append(args[0].detach())))
        for block in model.blocks:
            handles.append(block.register_forward_hook(lambda module, args, output: streams.append(output.detach())))
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return streams
"""
PRE = "        handles.append(model.blocks[0].register_forward_pre_hook(lambda module, args: streams.append(args[0].detach())))\n"
POST = "block.register_forward_hook(lambda module, args, output: streams.append(output.detach()))"
SLOTS = """
def cache_residuals(model, tokens):
    streams = [None] * (len(model.blocks) + 1)
    handles = [model.blocks[0].register_forward_pre_hook(lambda module, args: streams.__setitem__(0, args[0].detach()))]
    for index, block in enumerate(model.blocks):
        handles.append(block.register_forward_hook(
            lambda module, args, output, index=index: streams.__setitem__(index + 1, output.detach())))
    try:
        model(tokens)
    finally:
        for handle in handles:
            handle.remove()
    return streams
"""
ABLATE = """
def ablate_head(model, layer, head):
    attention = model.blocks[layer].attn
    width = attention.d_head

    def pre_hook(module, args):
        heads = args[0].clone()
        heads[..., head * width:(head + 1) * width] = 0
        return (heads,)

    return attention.out_proj.register_forward_pre_hook(pre_hook)
"""
TAKE_INPUT = ("def pre_hook(module, args):\n        heads = args[0].clone()", "return (heads,)")
PATCH = """
def patch_position(model, clean, corrupted, layer, position):
    kept = {}
    with model.blocks[layer].register_forward_hook(lambda m, a, output: kept.__setitem__("x", output.detach())):
        model(clean)

    def hook(module, args, output):
        patched = output.clone()
        patched[:, position] = kept["x"][:, position]
        return patched

    with model.blocks[layer].register_forward_hook(hook):
        return model(corrupted)
"""
KEEP = 'model.blocks[layer].register_forward_hook(lambda m, a, output: kept.__setitem__("x", output.detach()))'
STEER = """
def add_steering(module, vector, scale):
    def hook(m, args, output):
        if isinstance(output, tuple):
            return (output[0] + scale * vector, *output[1:])
        return output + scale * vector

    return module.register_forward_hook(hook)
"""
KV = """
def generate_steered(model, prompt, new_tokens, layer, vector, start):
    def hook(module, args, kwargs, output):
        steered = output.clone()
        steered[:, kwargs["positions"] >= start] += vector
        return steered

    with model.blocks[layer].register_forward_hook(hook, with_kwargs=True):
        return generate(model, prompt, new_tokens, use_cache=True)
"""
SLICED = (("def hook(module, args, kwargs, output):", 'steered[:, kwargs["positions"] >= start]', "hook, with_kwargs=True"),
          ("def hook(module, args, output):", "steered[:, start:]", "hook"))

CASES = {
    "12.1": Cases(
        right=[answer(CACHE),
               answer("""
                   def cache_residuals(model, tokens):  # HookRegistry, a dict filled in any order
                       found = {}
                       with HookRegistry(model) as hooks:
                           hooks.forward_pre("blocks.0", lambda module, args: found.__setitem__(-1, args[0].detach().clone()))
                           for index, block in enumerate(model.blocks):
                               hooks.forward(block, lambda module, args, output, index=index: found.__setitem__(index, output.detach()))
                           with torch.no_grad():
                               model(tokens)
                       return [found[key] for key in sorted(found)]
                   """)],
        wrong=[*mutants(
                   CACHE,
                   (".detach()", "", "grad_fn"),
                   (PRE, "", "embedding stream is missing"),
                   ((PRE, POST), ("", "block.register_forward_pre_hook(lambda module, args: streams.append(args[0].detach()))"),
                    "what enters each block"),
                   ((PRE, "handles.append(block.register", "        model(tokens)"),  # ln1 of each block, then the last output
                    ("", "handles.append(block.ln1.register", "        handles.append(model.blocks[-1]."
                     "register_forward_hook(lambda module, args, output: streams.append(output.detach())))\n        model(tokens)"),
                    "LayerNorm"),
                   (PRE, "        handles.append(model.embed.register_forward_hook(lambda module, args, output: "
                         "streams.append(output.detach())))\n", "position embedding"),  # no positions
                   ("            handle.remove()", "            pass", "left behind"),
                   (("    try:\n", "    finally:\n"), ("    if True:\n", "    if True:\n"), "finally"),
                   ("        model(tokens)\n", "", "never ran"),
                   ("        model(tokens)\n", "        model(tokens)\n        model(tokens)\n", "ran the model 2 times"),
                   ("streams, handles = [], []", "streams, handles = SHARED, []", "earlier call"),  # outlives the call
                   (POST, POST.replace("block.", "block.mlp."), "model.blocks[0].mlp adds"),
                   ("streams.append(output.detach()))", "streams.append(output.detach()) or streams[-1])",
                    "detached from the graph"),  # the hook returns the detached copy
                   **USES),
               *mutants(
                   SLOTS,
                   (", index=index:", ":", "loop variable"),  # a list of slots, every hook the last one
                   (("    streams = [None] * (len(model.blocks) + 1)", "streams.__setitem__", ", index=index:",
                     "    return streams"),
                    ("    found = {}", "found.__setitem__", ":", "    return [found[key] for key in sorted(found)]"),
                    "loop variable"),  # a dict, every hook writes the last index
                   (("(len(model.blocks) + 1)", "enumerate(model.blocks)"), ("3", "enumerate(model.blocks[:2])"),
                    "their number varies"),  # the number of blocks hard-coded
                   (("streams.__setitem__(0,", "index + 1"), ("streams.__setitem__(-1,", "index"),
                    "belongs at 1"),  # the embedding stream last
               ),
               (answer("""
                    def cache_residuals(model, tokens):  # model.blocks is never called
                        streams = []
                        with model.blocks.register_forward_hook(lambda module, args, output: streams.append(output.detach())):
                            model(tokens)
                        return streams
                    """), "ModuleList")],
    ),
    "12.2": Cases(
        right=[answer(ABLATE),
               answer("""
                   def ablate_head(model, layer, head):  # multiplies by a 0/1 mask
                       attention = model.blocks[layer].attn
                       mask = torch.ones(attention.n_heads, attention.d_head)
                       mask[head] = 0
                       return attention.out_proj.register_forward_pre_hook(lambda module, args: args[0] * mask.flatten())
                   """),
               answer("""
                   def ablate_head(model, layer, head):  # zero the head's values: its output is zero
                       attention = model.blocks[layer].attn
                       width, values = attention.d_head, 2 * attention.n_heads * attention.d_head

                       def hook(module, args, output):
                           made = output.clone()
                           made[..., values + head * width:values + (head + 1) * width] = 0
                           return made

                       return attention.in_proj.register_forward_hook(hook)
                   """)],
        wrong=mutants(
            ABLATE,
            ((*TAKE_INPUT, "out_proj.register_forward_pre_hook"),  # after out_proj mixed the heads
             ("def pre_hook(module, args, output):\n        heads = output[0].clone()", "return heads, output[1]",
              "register_forward_hook"), "attention module itself"),
            ((*TAKE_INPUT, "out_proj.register_forward_pre_hook"),
             ("def pre_hook(module, args, output):\n        heads = output.clone()", "return heads",
              "out_proj.register_forward_hook"), "forward pre-hook, whose args[0]"),
            ("width = attention.d_head", "width = 16", "d_head = 16"),
            ("heads[..., head * width:(head + 1) * width] = 0", "heads[..., head::attention.n_heads] = 0",
             "Wrong head slice"),  # every n_heads-th feature
            ("        return (heads,)\n", "", "returned None"),  # changes a copy, returns nothing
            ("return (heads,)", "return args", "logits are those of the model without it"),  # hands the args on
            ("    return attention", "    attention", "Return the handle"),
            ("attention.out_proj.register_forward_pre_hook", "attention.register_forward_pre_hook",
             "what all of its heads read"),
            ("width = attention.d_head", "width = attention.out_proj.in_features // 4",
             "slice you zero is empty"),  # past the end for head 5 of 8
            ((*TAKE_INPUT, "attention.out_proj.register_forward_pre_hook"),  # the residual stream
             ("def pre_hook(module, args, output):\n        heads = output.clone()", "return heads",
              "model.blocks[layer].register_forward_hook"), "every feature mixes all the heads"),
            ("head * width:(head + 1) * width", "(head - 1) * width:head * width", "previous head"),  # from 1
            ("return (heads,)", "return [heads]", "returned a list, not a tensor"),
            ("    return attention.out_proj.register_forward_pre_hook(pre_hook)",
             "    return [attention.out_proj.register_forward_pre_hook(pre_hook)]", "(got list)"),
            ("heads[..., head * width:(head + 1) * width] = 0", "heads[0, :, head * width:(head + 1) * width] = 0",
             "at every position of every sequence"),  # the first sequence only
            ((*TAKE_INPUT, "out_proj.register_forward_pre_hook"),  # the head's queries at in_proj's output
             ("def pre_hook(module, args, output):\n        heads = output.clone()", "return heads",
              "in_proj.register_forward_hook"), "through its values alone"),
        ),
    ),
    "12.3": Cases(
        right=[answer("""
                   def patch_position(model, clean, corrupted, layer, position):  # one batch of both runs
                       n = clean.shape[0]

                       def hook(module, args, output):
                           patched = output.clone()
                           patched[n:, position] = output[:n, position]
                           return patched

                       with model.blocks[layer].register_forward_hook(hook), torch.no_grad():
                           return model(torch.cat([clean, corrupted]))[n:]
                   """),
               answer("""
                   def patch_position(model, clean, corrupted, layer, position):  # a pre-hook on the module after
                       after = model.blocks[layer + 1] if layer + 1 < len(model.blocks) else model.ln_final
                       kept = []
                       with after.register_forward_pre_hook(lambda m, args: kept.append(args[0].detach())), torch.no_grad():
                           model(clean)

                       def pre_hook(module, args):
                           stream = args[0].clone()
                           stream[:, position, :] = kept[0][:, position, :]
                           return (stream,)

                       with after.register_forward_pre_hook(pre_hook), torch.no_grad():
                           return model(corrupted)
                   """)],
        wrong=mutants(
            PATCH,
            ("        return patched\n", "", "changed nothing"),
            ('        patched[:, position] = kept["x"][:, position]\n        return patched', '        return kept["x"]',
             "at every position"),
            (("    with " + KEEP + ":\n        model(clean)", "        return model(corrupted)"),  # found by a learner run
             ('    keep = model.blocks[layer].register_forward_hook(lambda m, a, output: kept.setdefault("x", output))\n'
              "    model(clean)", "        result = model(corrupted)\n    keep.remove()\n    return result"),
             "dict.setdefault"),  # setdefault returns the clean output, which replaces the corrupted one
            ((KEEP, "    def hook(module, args, output):\n        patched = output.clone()", "        return patched",
              "register_forward_hook(hook)"),
             ('model.blocks[layer].register_forward_pre_hook(lambda m, args: kept.__setitem__("x", args[0]))',
              "    def hook(module, args):\n        patched = args[0].clone()", "        return (patched,)",
              "register_forward_pre_hook(hook)"), "the stream that enters block"),
            ("    with " + KEEP + ":\n        model(clean)",  # the clean hook stays
             "    model.blocks[layer].register_forward_hook(lambda m, a, output: kept.update(x=output))\n    model(clean)",
             "left behind"),
            ("[:, position]", "[:, position + 1]", "next to position"),
            (("    with " + KEEP + ":\n        model(clean)", "        return model(corrupted)"),  # the keeping hook stays
             ("    keep = " + KEEP + "\n    model(clean)", "        result = model(corrupted)\n    keep.remove()\n    return result"),
             "still registered"),
            ("model.blocks[layer]", "model.blocks[layer - 1]", "the stream that enters block 1"),
            ('kept["x"][:, position]', 'kept["x"][:, position - 1]', "Which activation did you keep"),
            ("[:, position]", "[:, position:]", "every position from"),
            ("[:, position]", "[0, position]", "first sequence"),
            ("[:, position]", "[position]", "dimension 0 is the batch; the positions are dimension 1"),
            (("        model(clean)", "        return model(corrupted)"),
             ("        model(corrupted)", "        return model(clean)"), "swapped the runs"),
            ((KEEP, "        patched = output.clone()", "        return patched", "model.blocks[layer].register_forward_hook(hook)"),
             (KEEP.replace(".register", ".attn.register").replace("output.detach()", "output[0].detach()"),
              "        patched = output[0].clone()", "        return patched, output[1]",
              "model.blocks[layer].attn.register_forward_hook(hook)"), "block 1's attention"),
        ),
    ),
    "12.4": Cases(
        right=[answer("""
                   def add_steering(module, vector, scale):  # lambda, keeps vector*scale
                       shift = vector * scale
                       return module.register_forward_hook(
                           lambda m, args, output: output + shift if torch.is_tensor(output)
                           else (output[0] + shift,) + tuple(output[1:]))
                   """),
               answer("""
                   def add_steering(module, vector, scale):  # changes the output in place, returns nothing
                       def hook(m, args, output):
                           (output[0] if isinstance(output, tuple) else output).add_(vector, alpha=scale)

                       return module.register_forward_hook(hook)
                   """)],
        wrong=[*mutants(
                   STEER,
                   ("        return output + scale * vector", "        output = output + scale * vector", "changed nothing"),
                   ("return output + scale * vector", "return (output + scale * vector,)", "your hook returned a tuple"),
                   (("    def hook", "scale * vector"), ("    vector.mul_(scale)\n\n    def hook", "vector"),
                    "changed the vector"),
                   ("scale * vector", "vector", "without its scale"),
                   ("        return output + scale * vector",
                    "        steered = output.clone()\n        steered[:, -1] += scale * vector\n        return steered",
                    "last position"),
                   ("scale * vector", "scale * vector / vector.norm()", "unit vector"),
                   ("scale * vector", "(scale * vector).repeat(24, 1)", "any number of positions"),  # one length only
                   ("(output[0] + scale * vector, *output[1:])", "output[0] + scale * vector",
                    "returned a Tensor: return a tuple"),  # the tuple's first element alone
                   ("(output[0] + scale * vector, *output[1:])", "(output[0] + scale * vector,)", "a tuple of 1"),
                   ("(output[0] + scale * vector, *output[1:])", "(output[0], output[0] + scale * vector)",
                    "left the tuple's first element as it was and changed the one at index 1"),  # steers output[1]
                   ("(output[0] + scale * vector, *output[1:])", '(output[0] + scale * vector, "garbage")',
                    "replaced the element at index 1 of the tuple"),
                   ("        if isinstance(output, tuple):\n            return (output[0] + scale * vector, *output[1:])\n",
                    "", "returns a tuple (output, weights)"),  # the tuple not handled
                   ("        return output + scale * vector",  # steers position 0 .. of every sequence but the first
                    "        steered = output.clone()\n        steered[:, 1:] += scale * vector\n        return steered",
                    "positions (batch times sequence)"),
               ),
               (answer("""
                    def add_steering(module, vector, scale):  # a pre-hook: what enters the module
                        return module.register_forward_pre_hook(lambda m, args: (args[0] + scale * vector, *args[1:]))
                    """), "what enters the module"),
               (answer("""
                    def add_steering(module, vector, scale):  # the shift shaped at the first call's length
                        kept = []

                        def hook(m, args, output):
                            stream = output[0] if isinstance(output, tuple) else output
                            if not kept:
                                kept.append((scale * vector).expand(stream.shape[1], -1))
                            steered = stream + kept[0]
                            return (steered, *output[1:]) if isinstance(output, tuple) else steered

                        return module.register_forward_hook(hook)
                    """), "KV-cached generation")],
    ),
    "12.5": Cases(
        right=[answer("""
                   def generate_steered(model, prompt, new_tokens, layer, vector, start):  # its own loop
                       def hook(module, args, kwargs, output):
                           where = (kwargs["positions"] >= start).float()[None, :, None]
                           return output + where * vector

                       cache, tokens, step = KVCache(), prompt, prompt
                       with model.blocks[layer].register_forward_hook(hook, with_kwargs=True), torch.no_grad():
                           for _ in range(new_tokens):
                               step = model(step, kv_cache=cache)[:, -1:].argmax(dim=-1)
                               tokens = torch.cat([tokens, step], dim=1)
                       return tokens
                   """, **USES)],
        wrong=[*mutants(
                   KV,
                   (*SLICED, "not absolute positions"),  # output[:, start:]
                   ("def hook(module, args, kwargs, output):", "def hook(module, args, output):",
                    "four arguments"),  # with_kwargs=True, three parameters
                   ("hook, with_kwargs=True", "hook", "four arguments"),  # four parameters, without with_kwargs
                   ('kwargs["positions"]', "args[1]", "one positional argument"),
                   ('steered[:, kwargs["positions"] >= start] += vector', "steered += vector", "every position"),
                   ("    with model.blocks[layer].register_forward_hook(hook, with_kwargs=True):\n",
                    "    model.blocks[layer].register_forward_hook(hook, with_kwargs=True)\n    if True:\n",
                    "after generation"),
                   ((*SLICED[0], "use_cache=True"), (*SLICED[1], "use_cache=False"), "KV cache"),
                   (">= start", "> start", "after start"),
                   ('kwargs["positions"] >= start', 'kwargs["positions"] - prompt.shape[1] >= start', "end of the prompt"),
                   ("+= vector", "+= 2 * vector", "first differ"),
                   (">= start", ">= prompt.shape[1]", "generated positions"),  # start ignored
                   (("def hook(module, args, kwargs, output):\n        steered = output.clone()", "        return steered",
                     "register_forward_hook(hook"),
                    ("def hook(module, args, kwargs):\n        steered = args[0].clone()", "        return (steered,), kwargs",
                     "register_forward_pre_hook(hook"), "what enters block"),
                   **USES),
               (answer("""
                    def generate_steered(model, prompt, new_tokens, layer, vector, start):
                        def hook(module, args, output):
                            where = torch.arange(SEEN[0], SEEN[0] + output.shape[1])
                            SEEN[0] += output.shape[1]  # never reset: the next call starts where this one ended
                            return output + (where >= start)[:, None].to(output.dtype) * vector

                        with model.blocks[layer].register_forward_hook(hook):
                            return generate(model, prompt, new_tokens, use_cache=True)
                    """, **USES), "Called twice")],
    ),
}
