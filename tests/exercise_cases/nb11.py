"""Answers for the checks of notebooks/11_hook_clinic.ipynb: right ones written differently from the notebook's
solutions, and the bugs of the clinic's reproductions as wrong ones."""

from __future__ import annotations

from tests.exercise_cases import Cases, answer, mutants

GRAD_OUTPUT = """
def grad_output_of(model, layer_name, x):
    caught = []
    flags = {module: module.inplace for module in model.modules() if hasattr(module, "inplace")}
    for module in flags:
        module.inplace = False
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gi, go: caught.append(go[0]))
    try:
        model(x).sum().backward()
    finally:
        handle.remove()
        for module, flag in flags.items():
            module.inplace = flag
    return caught[0]
"""
KEEP = """
def keep_outputs(model, names):
    kept = {name: [] for name in names}
    return kept, [model.get_submodule(name).register_forward_hook(
        lambda m, a, o, name=name: kept[name].append(o.detach().clone())) for name in names]
"""
MEAN = """
def output_mean(model, layer_name, x):
    seen = []
    handle = model.get_submodule(layer_name).register_forward_hook(lambda m, a, o: seen.append(o.mean().item()))
    try:
        model(x)
    finally:
        handle.remove()
    return seen[0]
"""
NORMS = """
def log_output_norms(model):
    norms, handles = {}, []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            norms[name] = []

            def hook(m, a, output, name=name):
                norms[name].append(output.norm().item())

            handles.append(module.register_forward_hook(hook))
    return norms, handles
"""
LAYER = """
def cam_layer(model, x):
    found = []
    hooks = [module.register_forward_hook(lambda m, a, o, name=name: found.append(name)
                                          if o.dim() == 4 and o.shape[-2] * o.shape[-1] > 1 else None)
             for name, module in model.named_modules() if name]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return found[-1]
"""
STEP = """
def train_step(model, optimizer, scaler, batches, limit):
    optimizer.zero_grad(set_to_none=True)
    for inputs, targets in batches:
        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    scaler.step(optimizer)
    scaler.update()
"""
RIGHT_GRAD_OUTPUT = answer("""
    def grad_output_of(model, layer_name, x):  # HookRegistry restores the flags
        caught = []
        with HookRegistry(model) as hooks:
            for module in model.modules():
                if getattr(module, "inplace", False):
                    hooks.set_attr(module, "inplace", False)
            hooks.full_backward(layer_name, lambda module, grad_in, grad_out: caught.append(grad_out[0]))
            model(x).sum().backward()
        model.zero_grad(set_to_none=True)
        return caught[0]
    """)
CLIP = "    torch.nn.utils.clip_grad_value_(model.parameters(), limit)\n"

CASES = {
    "11.1": Cases(
        right=[RIGHT_GRAD_OUTPUT],
        wrong=[*mutants(
                   GRAD_OUTPUT,
                   ("        module.inplace = False\n", "        pass\n", "in-place error"),  # the reproduction's hook
                   ("            module.inplace = flag\n", "            pass\n", "inplace` flags"),
                   ("module.inplace = flag", "module.inplace = True", "inplace` flags"),  # True is not "as found"
                   ("        handle.remove()\n", "        pass\n", "hooks are left"),
                   (("    try:\n", "    finally:\n"), ("    if True:\n", "    if True:\n"), "When the model raised"),
               ),
               (answer("""
                    def grad_output_of(model, layer_name, x):  # no full backward hook at all
                        caught = []

                        def on_output(module, args, output):
                            output.register_hook(caught.append)   # before the in-place op: this value's gradient

                        with model.get_submodule(layer_name).register_forward_hook(on_output):
                            leaf = x.detach().requires_grad_(True)
                            torch.autograd.grad(model(leaf).sum(), leaf)
                        return caught[0]
                    """), "no full backward hook"),
               (lambda model, layer_name, x: RIGHT_GRAD_OUTPUT(model, layer_name, x.requires_grad_(True)),
                "x.requires_grad")],
    ),
    "11.2": Cases(
        right=[answer(KEEP.replace("o.detach().clone()", "torch.empty_like(o, requires_grad=False).copy_(o.detach())")),
               answer(KEEP.replace("o.detach().clone()", "o.clone().detach()"))],
        wrong=mutants(
            KEEP,
            ("o.detach().clone()", "o", "still alive"),  # the reproduction: the output itself
            ("o.detach().clone()", "o.clone()", "still alive"),  # clone() keeps the graph
            ("o.detach().clone()", "o.detach()", "shares its memory"),  # detach() copies nothing
            ("lambda m, a, o, name=name:", "lambda m, a, o:", "under the same name"),
        ),
    ),
    "11.3": Cases(
        right=[answer(MEAN.replace("    try:\n        model(x)\n    finally:\n        handle.remove()\n",
                                   "    with handle, torch.no_grad():\n        model(x)\n"))],
        wrong=mutants(
            MEAN,
            ("        handle.remove()\n", "        pass\n", "hook(s) are left"),  # the reproduction
            (("    try:\n", "    finally:\n"), ("    if True:\n", "    if True:\n"), "finally"),
            ("    finally:\n", "    except Exception:\n        return float('nan')\n    finally:\n", "not swallow"),
        ),
    ),
    "11.4": Cases(
        right=[{"aux_head_in_eval": False, "under_no_grad": True, "forward_called_directly": False,
                "copied_after_hook": True}],   # the keys in another order
        wrong=[({"copied_after_hook": False, "forward_called_directly": False, "under_no_grad": False,
                 "aux_head_in_eval": False}, "2 of 4"),
               ({"copied_after_hook": True, "under_no_grad": True}, "exactly the keys"),
               ({"copied_after_hook": "yes", "forward_called_directly": False, "under_no_grad": True,
                 "aux_head_in_eval": False}, "True")],
    ),
    "11.5": Cases(
        right=[answer("""
                   def log_output_norms(model):
                       norms = {}
                       registry = HookRegistry(model)
                       for name, module in model.named_modules():
                           if name and not any(True for _ in module.children()):
                               norms[name] = []
                               registry.forward(module, lambda m, a, o, name=name: norms[name].append(torch.linalg.vector_norm(o).item()))
                       return norms, [registry]
                   """)],
        wrong=mutants(
            NORMS,
            ("                norms[name].append(output.norm().item())",  # the reproduction's accident
             "                return norms[name].append(output.norm().item()) or norms.setdefault('first', output.detach())",
             "in place of the layer's output"),
            ("output.norm()", "output.pow_(2).sum().sqrt()", "changed a layer's output in place"),
            (("    norms, handles = {}, []", "output, name=name):"),  # a defaultdict: every hook reads the last name
             ("    from collections import defaultdict\n    norms, handles = defaultdict(list), []", "output):"),
             "loop variable"),
            ("                norms[name].append(output.norm().item())",
             "                kept = output.detach()\n                norms[name].append(kept.norm().item())\n"
             "                return kept", "detached from the graph"),
            ("output, name=name):", "output):", "loop variable"),
            (("            norms[name] = []\n", "                norms[name].append(output.norm().item())"),
             ("", "                return norms.setdefault(name, []).append(output.norm().item()) or norms[name]"),
             "returned a list, not a tensor"),  # setdefault's list comes back as the output
            ("                norms[name].append(output.norm().item())",  # outputs and gradients stay the same
             "                return norms[name].append(output.norm().item()) or output * 1", "case 5"),
            ("output.norm()", "a[0].norm()", "output, per forward"),
            ("output.norm().item()", "output.norm()", "Python floats"),  # keeps a graph per forward
        ),
    ),
    "11.6": Cases(
        right=[answer("""
                   def cam_layer(model, x):  # the course's recorder, all modules
                       from course_utils.recorder import ActivationRecorder

                       names = [name for name, _ in model.named_modules() if name]
                       order = []
                       with HookRegistry(model) as hooks:
                           for name in names:
                               hooks.forward(name, lambda m, a, o, name=name: order.append(name))
                           with ActivationRecorder(model, names) as recorder, torch.no_grad():
                               model(x)
                       spatial = [name for name in order if recorder.outputs[name].dim() == 4
                                  and recorder.outputs[name].shape[-1] * recorder.outputs[name].shape[-2] > 1]
                       return spatial[-1]
                   """)],
        wrong=[*mutants(
                   LAYER,
                   (" and o.shape[-2] * o.shape[-1] > 1", "", "1x1"),  # forgets the 1x1 pool
                   ("o.shape[-2] * o.shape[-1] > 1", "o.shape[-2] > 1 and o.shape[-1] > 1", "not h > 1 and w > 1"),
                   ("o.shape[-2] * o.shape[-1] > 1", "o.shape[-1] > 1", "not h > 1 and w > 1"),
                   (("model.named_modules() if name]", "    return found[-1]"),
                    ("model.named_children()]", "    return found[-1] if found else None"), "nested ones too"),
               ),
               (lambda model, x: next(name for name, module in model.named_modules()
                                      if isinstance(module, __import__("torch").nn.Conv2d)), "last module")],
    ),
    "11.7": Cases(
        right=[answer("""
                   def attach_scale(module):  # a 1-element tensor, copy_ into it
                       scale = torch.ones(1)

                       def hook(m, args, output):
                           return output * scale

                       return (lambda value: scale.copy_(torch.tensor([value]))), module.register_forward_hook(hook)
                   """)],
        wrong=[(answer("""
                    def attach_scale(module):  # a fresh hook per value: the reproduction
                        state = {"handle": None}

                        class Handle:
                            def remove(self):
                                if state["handle"] is not None:
                                    state["handle"].remove()

                        def set_scale(value):
                            Handle().remove()
                            state["handle"] = module.register_forward_hook(lambda m, a, o: o * value)

                        return set_scale, Handle()
                    """), "graphs"),
               (answer("""
                    def attach_scale(module):  # one hook, but a Python number dynamo guards on
                        state = {"scale": 1.0}

                        def set_scale(value):
                            state["scale"] = value

                        return set_scale, module.register_forward_hook(lambda m, a, o: o * state["scale"])
                    """), "graphs"),
               (answer("""
                    def attach_scale(module):
                        scale = torch.ones(())
                        module.register_forward_hook(lambda m, a, o: o * scale)
                        extra = module.register_forward_hook(lambda m, a, o: None)
                        return scale.fill_, extra
                    """), "hooks are left")],
    ),
    "11.8": Cases(
        right=[answer(STEP.replace(CLIP, "    for param in model.parameters():\n        param.grad.clamp_(-limit, limit)\n"))],
        wrong=[(answer("""
                    def train_step(model, optimizer, scaler, batches, limit):  # the reproduction: a gradient hook clips
                        handles = [p.register_hook(lambda g: g.clamp(-limit, limit)) for p in model.parameters()]
                        try:
                            for inputs, targets in batches:
                                scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
                            scaler.step(optimizer)
                            scaler.update()
                        finally:
                            for handle in handles:
                                handle.remove()
                    """), "each micro-batch"), *mutants(
            STEP,
            ("    scaler.unscale_(optimizer)\n", "", "scaled gradients"),
            (CLIP, "", "without clipping"),
            ("    scaler.update()\n", "", "adjusts its scale"),
            ("clip_grad_value_", "clip_grad_norm_", "by value"),
            (" / len(batches)", "", "divided by their number"),  # sums the losses
            (("        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()\n", CLIP),
             ("        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()\n"
              "        torch.nn.utils.clip_grad_value_(model.parameters(), limit * scaler.get_scale())\n", ""),
             "after every micro-batch's backward"),  # clips the running (scaled) sum after every micro-batch
            ("    optimizer.zero_grad(set_to_none=True)\n", "", "gradients from before this step"),
        )],
    ),
}
