"""Answers for the checks of notebooks/06_grad_cam.ipynb."""

from __future__ import annotations

from tests.exercise_cases import Cases, answer, mutants

USES = {"scores": answer("def scores(logits, targets):\n"
                         "    return logits[torch.arange(len(targets)), torch.as_tensor(targets)].sum()\n")}
WEIGHTS = """
def channel_weights(model, layer_name, x, targets):
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    try:
        scores(model(x), targets).backward()
    finally:
        handle.remove()
    return seen[0].mean(dim=(2, 3))
"""
CAM = """
def grad_cam_two_hooks(model, layer_name, x, targets):
    kept = []

    def hook(module, args, output):
        kept.append(output.detach().clone())
        output.register_hook(kept.append)

    handle = model.get_submodule(layer_name).register_forward_hook(hook)
    try:
        scores(model(x), targets).backward()
    finally:
        handle.remove()
    a, g = kept
    return (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)
"""
PER_CALL = """
def cam_per_call(model, module, x, targets):
    acts, grads = [], []

    def hook(mod, args, output):
        acts.append(output.detach().clone())
        output.register_hook(grads.append)

    handle = module.register_forward_hook(hook)
    try:
        scores(model(x), targets).backward()
    finally:
        handle.remove()
    grads.reverse()
    return [(g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0) for a, g in zip(acts, grads)]
"""
BACKWARD = "        scores(model(x), targets).backward()"

CASES = {
    "06.1": Cases(
        right=[answer("""
                   def channel_weights(model, layer_name, x, targets):  # registry, autograd.grad
                       seen = []
                       inputs = x.detach().clone().requires_grad_(True)
                       with HookRegistry(model) as hooks:
                           hooks.full_backward(layer_name, lambda module, gin, gout: seen.append(gout[0]))
                           torch.autograd.grad(scores(model(inputs), targets), inputs)
                       return torch.stack([g.flatten(2).mean(-1) for g in seen])[0]
                   """, **USES),
               answer("""
                   def channel_weights(model, layer_name, x, targets):  # N backwards, the handle in a `with`
                       rows = []
                       for sample, target in enumerate(targets):
                           seen = []
                           with model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0])):
                               model(x[sample : sample + 1])[0, target].backward()
                           rows.append(seen[0].mean(dim=(2, 3))[0])
                       return torch.stack(rows)
                   """, **USES)],
        wrong=[*mutants(
                   WEIGHTS,
                   ("seen.append(gout[0])", "seen.append(gin[0])", "grad_output[0]"),
                   (".mean(dim=(2, 3))", ".sum(dim=(2, 3))", "spatial sum"),
                   ("    finally:\n        handle.remove()\n", "    finally:\n        pass\n", "left behind"),
                   ("    try:\n" + BACKWARD + "\n    finally:\n        handle.remove()\n",
                    "    scores(model(x), targets).backward()\n    handle.remove()\n",
                    "When the model raises, your hook stays behind"),
                   ("    finally:\n", "    except Exception:\n        return None\n    finally:\n", "let the error through"),
                   (BACKWARD, "        logits = model(x)\n        scores(logits, logits.argmax(dim=1).tolist()).backward()",
                    "top class"),
                   (BACKWARD, "        model(x)[:, targets].sum().backward()", "logits[:, targets]"),
                   (BACKWARD, "        torch.autograd.grad(scores(model(x.requires_grad_()), targets), x)", "requires_grad"),
                   **USES),
               (answer(WEIGHTS.replace(".mean(dim=(2, 3))", ".mean(dim=(2, 3)).long()"), **USES),
                "floating-point numbers"),  # a wrong type is the learner's, never the course's bug
               (answer("""
                    def channel_weights(model, layer_name, x, targets):  # no hook of its own
                        from course_utils.saliency import layer_activation_and_gradient

                        _, gradient = layer_activation_and_gradient(model, layer_name, x, list(targets))
                        return gradient.mean(dim=(2, 3))
                    """, **USES), "no full backward hook")],
    ),
    "06.2": Cases(
        right=[answer("""
                   def grad_cam_two_hooks(model, layer_name, x, targets):  # hands the model a clone
                       kept = {}

                       def hook(module, args, output):
                           kept["a"] = output
                           output.register_hook(lambda grad: kept.__setitem__("g", grad))
                           return output.clone()

                       layer = dict(model.named_modules())[layer_name]
                       handle = layer.register_forward_hook(hook)
                       try:
                           scores(model(x), targets).backward()
                       finally:
                           handle.remove()
                       weights = kept["g"].sum(dim=(2, 3), keepdim=True) / (kept["g"].shape[2] * kept["g"].shape[3])
                       return torch.relu((weights * kept["a"].detach()).sum(dim=1))
                   """, **USES)],
        wrong=[*mutants(
                   CAM,
                   ("output.detach().clone()", "output.detach()", "Keep a copy"),
                   ("(g.mean(dim=(2, 3), keepdim=True) * a)", "(a * g)", "element-wise product"),
                   (".sum(dim=1).clamp(min=0)", ".sum(dim=1)", "positive part"),
                   ("    finally:\n        handle.remove()\n", "    finally:\n        pass\n", "left behind"),
                   ("    return (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)",
                    "    maps = (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)\n"
                    "    return torch.nn.functional.interpolate(maps[:, None], size=x.shape[-2:], mode='bilinear',"
                    " align_corners=False)[:, 0]", "input's size"),  # grad_cam's display step done too
                   ("    return (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)",
                    "    maps = (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)\n"
                    "    low, high = maps.amin(dim=(1, 2), keepdim=True), maps.amax(dim=(1, 2), keepdim=True)\n"
                    "    return (maps - low) / (high - low)", "maps are scaled"),
                   (BACKWARD, "        model(x)[:, targets[0]].sum().backward()", "its own class"),
                   (BACKWARD, "        model(x)[:, targets].sum().backward()", "logits[:, targets]"),
                   (BACKWARD, "        model(x).max(dim=1).values.sum().backward()", "top class"),
                   ("        kept.append(output.detach().clone())\n        output.register_hook(kept.append)",
                    "        kept.append(args[0].detach().clone())\n        args[0].register_hook(kept.append)",
                    "layer's input"),
                   (("        output.register_hook(kept.append)\n", BACKWARD),  # after the in-place ReLU ran
                    ("        kept.append(output)\n", "        logits = model(x)\n        kept.pop().register_hook(kept.append)\n"
                                                    "        scores(logits, targets).backward()"), "inside the forward hook"),
                   (".mean(dim=(2, 3), keepdim=True)", ".sum(dim=(2, 3), keepdim=True)", "not its sum"),
                   (".sum(dim=1).clamp(min=0)", ".mean(dim=1).clamp(min=0)", "not their mean"),
                   ("        output.register_hook(kept.append)", "        return output.register_hook(kept.append)",
                    "in place of the layer's output"),  # the hook returns a handle
                   **USES),
               (answer("""
                    def grad_cam_two_hooks(model, layer_name, x, targets):  # the finished function
                        from course_utils.saliency import grad_cam

                        return grad_cam(model, layer_name, x, list(targets), upsample=False, normalize=False)
                    """, **USES), "course's own"),
               (answer("""
                    def grad_cam_two_hooks(model, layer_name, x, targets):  # the course's recorder
                        from course_utils.recorder import ActivationRecorder

                        with ActivationRecorder(model, [layer_name], gradients=True) as rec:
                            scores(model(x), targets).backward()
                        a, g = rec.output(layer_name), rec.gradient(layer_name)
                        return (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)
                    """, **USES), "course's own"),
               (answer("""
                    def grad_cam_two_hooks(model, layer_name, x, targets):  # 06.1's hook
                        kept = {}
                        layer = model.get_submodule(layer_name)
                        handles = [layer.register_forward_hook(lambda m, args, output: kept.__setitem__("a", output.detach().clone())),
                                   layer.register_full_backward_hook(lambda m, gin, gout: kept.__setitem__("g", gout[0]))]
                        try:
                            scores(model(x), targets).backward()
                        finally:
                            for handle in handles:
                                handle.remove()
                        a, g = kept["a"], kept["g"]
                        return (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)
                    """, **USES), "full backward hook")],
    ),
    "06.3": Cases(
        right=[answer("""
                   def cam_per_call(model, module, x, targets):  # dicts keyed by call
                       acts, grads = {}, {}

                       def hook(mod, args, output):
                           call = len(acts)
                           acts[call] = output.clone().detach()
                           output.register_hook(lambda grad, call=call: grads.__setitem__(call, grad))

                       with HookRegistry(model) as hooks:
                           hooks.forward(module, hook)
                           scores(model(x), targets).backward()
                       return [torch.relu(torch.einsum("nc,nchw->nhw", grads[i].mean(dim=(2, 3)), acts[i])) for i in sorted(acts)]
                   """, **USES)],
        wrong=mutants(
            PER_CALL,
            ("    grads.reverse()\n", "", "wrong way round"),  # the backward runs last call first
            ("output.detach().clone()", "output.detach()", "Keep a copy"),
            ("for a, g in zip(acts, grads)]", "for a, g in zip(acts, grads)][-1:]", "list of 2 maps"),
            ("for a, g in zip(acts, grads)]", "for a, g in zip(acts, grads)][::-1]", "reverse order"),
            **USES),
    ),
}
