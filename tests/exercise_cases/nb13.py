"""Answers for the checks of notebooks/13_hooks_on_library_models.ipynb."""

from __future__ import annotations

from accelerate.hooks import ModelHook, add_hook_to_module, remove_hook_from_module

from tests.exercise_cases import Cases, answer, mutants

ACCELERATE = {"ModelHook": ModelHook, "add_hook_to_module": add_hook_to_module,
              "remove_hook_from_module": remove_hook_from_module}
STEER = """
def steer_generation(model, prompt, new_tokens, layer, vector, start):
    offset = [0]                                      # positions this block has run so far: the prompt, then 1 a step

    def shift_late_positions(mod, args, out):
        where = torch.arange(offset[0], offset[0] + out.shape[1]) >= start
        offset[0] += out.shape[1]
        return out + where.to(out.dtype)[:, None] * vector

    with model.transformer.h[layer].register_forward_hook(shift_late_positions):
        return model.generate(prompt, max_new_tokens=new_tokens, do_sample=False)
"""
GRADIENTS = """
def attention_gradients(model):
    grads = {}

    def catch(index):
        def hook(mod, args, out):
            if out[0].requires_grad:                  # reentrant checkpointing: the first forward keeps no graph
                out[0].register_hook(lambda grad: grads.__setitem__(index, grad))
        return hook

    handles = [block.attn.register_forward_hook(catch(i)) for i, block in enumerate(model.transformer.h)]
    return grads, handles
"""
WATCH = """
def watch_weight_norms(module, norms):
    class NormRecorder(ModelHook):
        def pre_forward(self, mod, *args, **kwargs):  # chained after accelerate's: the weight is loaded
            norms.append(mod.weight.detach().norm().item())
            return args, kwargs

    try:
        theirs = module._hf_hook
    except AttributeError:
        theirs = None
    add_hook_to_module(module, NormRecorder(), append=True)

    def remove():
        remove_hook_from_module(module)               # takes every accelerate hook off...
        if theirs is not None:
            add_hook_to_module(module, theirs)        # ...so put theirs back alone
    return remove
"""
ATTRIBUTION = """
def head_attribution(model, clean, corrupted, metric):
    n_head = model.config.n_head
    inputs, gradients, corrupted_z = {}, {}, []

    def clean_input(index):
        def pre(mod, args):
            inputs[index, True] = args[0].detach()
        return pre

    def corrupted_input(index):
        def pre(mod, args):
            inputs[index, False] = args[0].detach()
            args[0].register_hook(lambda grad: gradients.__setitem__(index, grad))
            corrupted_z.append(args[0])
        return pre

    projections = [block.attn.c_proj for block in model.transformer.h]
    handles = [p.register_forward_pre_hook(clean_input(i)) for i, p in enumerate(projections)]
    try:
        model(clean)                                  # the hooks keep detached copies: no graph is kept
    finally:
        for h in handles:
            h.remove()
    handles = [p.register_forward_pre_hook(corrupted_input(i)) for i, p in enumerate(projections)]
    try:
        metric(model(corrupted).logits).backward(inputs=corrupted_z)   # gradients for z only, none for the weights
    finally:
        for h in handles:
            h.remove()
    scores = torch.zeros(len(projections), n_head)
    for i in range(len(projections)):
        change = (inputs[i, True] - inputs[i, False]) * gradients[i]
        scores[i] = change.reshape(-1, n_head, change.shape[-1] // n_head).sum(dim=(0, 2))
    return scores
"""

BACKWARD_HOOKS = """
def head_attribution(model, clean, corrupted, metric):  # full backward hooks, .grad put back
    n_head, acts, grads = model.config.n_head, {}, {}
    saved = {name: None if p.grad is None else p.grad.clone() for name, p in model.named_parameters()}
    blocks = model.transformer.h
    try:
        with HookRegistry(model) as hooks:
            for i, block in enumerate(blocks):
                hooks.forward_pre(block.attn.c_proj, lambda m, a, i=i: acts.__setitem__(("clean", i), a[0].detach()))
            model(clean)
        with HookRegistry(model) as hooks:
            for i, block in enumerate(blocks):
                hooks.forward_pre(block.attn.c_proj, lambda m, a, i=i: acts.__setitem__(("corrupted", i), a[0].detach()))
                hooks.full_backward(block.attn.c_proj, lambda m, gi, go, i=i: grads.__setitem__(i, gi[0]))
            metric(model(corrupted).logits).backward()
    finally:
        for name, p in model.named_parameters():
            p.grad = saved[name]
    return torch.stack([((acts["clean", i] - acts["corrupted", i]) * grads[i])
                        .reshape(-1, n_head, grads[i].shape[-1] // n_head).sum((0, 2))
                        for i in range(len(blocks))])
"""

CASES = {
    "13.1": Cases(
        right=[answer(STEER),
               answer("""
                   def steer_generation(model, prompt, new_tokens, layer, vector, start):  # the call's position_ids
                       def hook(module, args, kwargs, output):
                           return output + (kwargs["position_ids"] >= start)[..., None].to(output.dtype) * vector

                       handle = model.transformer.h[layer].register_forward_hook(hook, with_kwargs=True)
                       try:
                           return model.generate(prompt, max_new_tokens=new_tokens, do_sample=False)
                       finally:
                           handle.remove()
                   """)],
        wrong=mutants(
            STEER,
            ("        offset[0] += out.shape[1]\n", "", "index in the output"),  # the slice of notebook 12's trap
            (">= start", ">= 0", "Every position"),
            ("do_sample=False)", "do_sample=False, use_cache=False)", "whole sequence"),
            (">= start", "> start", "start was"),
            ("    with model.transformer.h[layer].register_forward_hook(shift_late_positions):\n",
             "    model.transformer.h[layer].register_forward_hook(shift_late_positions)\n    if True:\n",
             "left behind"),
            ("        return model.generate(", "        tokens = model.generate(", "got None"),
        ),
    ),
    "13.2": Cases(
        right=[answer(GRADIENTS),
               answer("""
                   def attention_gradients(model):  # only forwards that build a graph: is_grad_enabled, grad_fn
                       grads, handles = {}, []
                       for index, block in enumerate(model.transformer.h):
                           def keep(module, args, output, index=index):
                               if torch.is_grad_enabled() and output[0].grad_fn is not None:
                                   output[0].register_hook(lambda grad: grads.update({index: grad}))

                           handles.append(block.attn.register_forward_hook(keep))
                       return grads, handles
                   """)],
        wrong=[*mutants(
            GRADIENTS,
            ("            if out[0].requires_grad:                  # reentrant checkpointing: the first forward keeps "
             "no graph\n                out[0]", "            out[0]", "use_reentrant=True): cannot register a hook on a "
             "tensor that doesn't require gradient."),
            ("grads.__setitem__(index, grad)", "grads.__setitem__(len(grads), grad)", "one gradient per layer index"),
            ("grads.__setitem__(index, grad)", "grads.__setitem__(index, grads.get(index, 0) + grad)",
             "adds up the training steps"),
            ("grads.__setitem__(index, grad)", "grads.setdefault(index, grad)", "the first training step's"),
            ("out[0].register_hook(lambda grad: grads.__setitem__(index, grad))", "grads.__setitem__(index, out[0])",
             "the attention output itself, not a gradient"),
            (("def hook(mod, args, out):", "block.attn.register_forward_hook(catch(i))"),
             ("def hook(mod, out):", "block.attn.c_proj.register_forward_pre_hook(catch(i))"),
             "the one at attn.c_proj's input"),  # out is then c_proj's args: out[0] the heads side by side
            ("    return grads, handles", "    return grads, []", "left behind (model.transformer.h.0.attn._forward_hooks)"),
            ("    return grads, handles", "    return grads", "Return (grads, handles)"),
        ),
            (answer("""
                def attention_gradients(model):  # keeps the tensor: backward's re-run replaces it
                    kept = {}

                    def keep(index):
                        def hook(module, args, output):
                            output[0].retain_grad()
                            kept[index] = output[0]
                        return hook

                    return kept, [block.attn.register_forward_hook(keep(i)) for i, block in enumerate(model.transformer.h)]
                """), "never received a gradient (checkpointing with use_reentrant=False)")],
    ),
    "13.3": Cases(
        right=[answer(WATCH, **ACCELERATE),
               answer("""
                   def watch_weight_norms(module, norms):  # a torch pre-hook that reads accelerate's CPU copy
                       def pre(m, args):
                           hook = getattr(m, "_hf_hook", None)
                           weight = hook.weights_map["weight"] if getattr(hook, "offload", False) else m.weight
                           norms.append(weight.detach().norm().item())

                       return module.register_forward_pre_hook(pre).remove
                   """)],
        wrong=[*mutants(
            WATCH,
            ("append=True", "append=False", "accelerate's hook is gone"),
            ("            add_hook_to_module(module, theirs)        # ...so put theirs back alone", "            pass",
             "took accelerate's hook off too"),
            (("        remove_hook_from_module(module)               # takes every accelerate hook off...\n",
              "        if theirs is not None:\n            add_hook_to_module(module, theirs)        # ...so put "
              "theirs back alone\n"), ("        pass\n", ""), "still records"),
            ("    return remove", "    return None", "remove()"),
            ("            norms.append(mod.weight.detach().norm().item())", "            mod.weight.detach().norm()",
             "recorded nothing"),
            **ACCELERATE),
            (answer("""
                def watch_weight_norms(module, norms):  # a torch pre-hook: runs before accelerate loads the weight
                    handle = module.register_forward_pre_hook(lambda m, args: norms.append(m.weight.norm().item()))
                    return handle.remove
                """), "Where is the weight")],
    ),
    "13.4": Cases(
        right=[answer(ATTRIBUTION), answer(BACKWARD_HOOKS)],
        wrong=[*mutants(
            ATTRIBUTION,
            ("backward(inputs=corrupted_z)", "backward()", "changed the parameters' .grad"),
            ("(inputs[i, True] - inputs[i, False])", "(inputs[i, False] - inputs[i, True])", "signs are flipped"),
            ("reshape(-1, n_head, change.shape[-1] // n_head).sum(dim=(0, 2))",
             "reshape(-1, change.shape[-1] // n_head, n_head).sum(dim=(0, 1))",
             "first-order estimates"),  # every n_head-th feature taken as a head
            ("    finally:\n        for h in handles:\n            h.remove()\n    scores",
             "    except Exception:\n        return torch.zeros(len(projections), n_head)\n    finally:\n"
             "        for h in handles:\n            h.remove()\n    scores",
             "let the error through"),
            ("    return scores", "    return scores.tolist()", "as a tensor"),
            ("    n_head = model.config.n_head\n", "    n_head = model.eval().config.n_head\n", "training mode"),
        ), *mutants(BACKWARD_HOOKS, ("None if p.grad is None else p.grad.clone()", "p.grad", "in place"))],
    ),
}
