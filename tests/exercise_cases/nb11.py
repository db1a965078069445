"""Answers for the checks of notebooks/11_hook_clinic.ipynb: right ones written differently from the notebook's
solutions, and the bugs of the clinic's reproductions as wrong ones."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from course_utils.hooks import HookRegistry
from tests.exercise_cases import Cases


# -- 11.1 ------------------------------------------------------------------------------------------------------------
def grad_output_with_registry(model, layer_name, x):  # noqa: ANN001, ANN201 -- HookRegistry restores the flags
    caught = []
    with HookRegistry(model) as hooks:
        for module in model.modules():
            if getattr(module, "inplace", False):
                hooks.set_attr(module, "inplace", False)
        hooks.full_backward(layer_name, lambda module, grad_in, grad_out: caught.append(grad_out[0]))
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    return caught[0]


def grad_output_by_tensor_hook(model, layer_name, x):  # noqa: ANN001, ANN201 -- no full backward hook at all
    caught = []

    def on_output(module, args, output):  # noqa: ANN001, ANN202
        output.register_hook(caught.append)   # registered before the in-place op: the gradient of this value

    with model.get_submodule(layer_name).register_forward_hook(on_output):
        leaf = x.detach().requires_grad_(True)
        torch.autograd.grad(model(leaf).sum(), leaf)
    return caught[0]


def grad_output_naive(model, layer_name, x):  # noqa: ANN001, ANN201 -- the reproduction's hook
    caught = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gi, go: caught.append(go[0]))
    try:
        model(x).sum().backward()
    finally:
        handle.remove()
    return caught[0]


def grad_output_flags_left_off(model, layer_name, x):  # noqa: ANN001, ANN201
    for module in model.modules():
        if hasattr(module, "inplace"):
            module.inplace = False
    return grad_output_naive(model, layer_name, x)


def grad_output_all_relus_in_place_after(model, layer_name, x):  # noqa: ANN001, ANN201 -- True is not "as found"
    relus = [module for module in model.modules() if isinstance(module, nn.ReLU)]
    for relu in relus:
        relu.inplace = False
    try:
        return grad_output_naive(model, layer_name, x)
    finally:
        for relu in relus:
            relu.inplace = True


def norms_as_tensors(model):  # noqa: ANN001, ANN201 -- keeps a graph per forward
    norms = {name: [] for name, module in model.named_modules() if name and not list(module.children())}
    handles = [module.register_forward_hook(lambda m, a, o, name=name: norms[name].append(o.norm()))
               for name, module in model.named_modules() if name in norms]
    return norms, handles


def grad_output_hook_left(model, layer_name, x):  # noqa: ANN001, ANN201 -- flags restored, hook forgotten
    caught = []
    flags = {module: module.inplace for module in model.modules() if hasattr(module, "inplace")}
    for module in flags:
        module.inplace = False
    model.get_submodule(layer_name).register_full_backward_hook(lambda m, gi, go: caught.append(go[0]))
    try:
        model(x).sum().backward()
    finally:
        for module, flag in flags.items():
            module.inplace = flag
    return caught[-1]


# -- 11.2 ------------------------------------------------------------------------------------------------------------
def keep_with_copy_(model, names):  # noqa: ANN001, ANN201 -- a copy made by hand
    kept = {name: [] for name in names}
    handles = [model.get_submodule(name).register_forward_hook(
        lambda m, a, out, name=name: kept[name].append(torch.empty_like(out, requires_grad=False).copy_(out.detach())))
        for name in names]
    return kept, handles


def keep_clone_then_detach(model, names):  # noqa: ANN001, ANN201
    kept = {name: [] for name in names}

    def make(name):  # noqa: ANN001, ANN202
        def hook(module, args, output):  # noqa: ANN001, ANN202
            kept[name].append(output.clone().detach())
        return hook

    return kept, [model.get_submodule(name).register_forward_hook(make(name)) for name in names]


def keep_raw(model, names):  # noqa: ANN001, ANN201 -- the reproduction: output itself
    kept = {name: [] for name in names}
    return kept, [model.get_submodule(name).register_forward_hook(lambda m, a, o, name=name: kept[name].append(o))
                  for name in names]


def keep_detached_alias(model, names):  # noqa: ANN001, ANN201 -- detach() copies nothing
    kept = {name: [] for name in names}
    return kept, [model.get_submodule(name).register_forward_hook(
        lambda m, a, o, name=name: kept[name].append(o.detach())) for name in names]


def keep_clone_only(model, names):  # noqa: ANN001, ANN201 -- clone() keeps the graph
    kept = {name: [] for name in names}
    return kept, [model.get_submodule(name).register_forward_hook(
        lambda m, a, o, name=name: kept[name].append(o.clone())) for name in names]


def keep_late_binding(model, names):  # noqa: ANN001, ANN201 -- each lambda reads `name` when it runs: the last one
    kept = {name: [] for name in names}
    handles = []
    for name in names:
        handles.append(model.get_submodule(name).register_forward_hook(
            lambda m, a, o: kept[name].append(o.detach().clone())))
    return kept, handles


# -- 11.3 ------------------------------------------------------------------------------------------------------------
def mean_with_context(model, layer_name, x):  # noqa: ANN001, ANN201 -- the handle as a context manager
    seen = []
    with model.get_submodule(layer_name).register_forward_hook(lambda m, a, o: seen.append(o.mean().item())):
        with torch.no_grad():
            model(x)
    return seen[-1]


def mean_never_removed(model, layer_name, x):  # noqa: ANN001, ANN201 -- the reproduction
    seen = []
    model.get_submodule(layer_name).register_forward_hook(lambda m, a, o: seen.append(o.mean().item()))
    model(x)
    return seen[0]


def mean_removed_without_finally(model, layer_name, x):  # noqa: ANN001, ANN201
    seen = []
    handle = model.get_submodule(layer_name).register_forward_hook(lambda m, a, o: seen.append(o.mean().item()))
    model(x)
    handle.remove()
    return seen[0]


def mean_swallows(model, layer_name, x):  # noqa: ANN001, ANN201
    seen = [float("nan")]
    handle = model.get_submodule(layer_name).register_forward_hook(lambda m, a, o: seen.append(o.mean().item()))
    try:
        model(x)
    except Exception:  # noqa: BLE001 -- the mistake under test
        pass
    finally:
        handle.remove()
    return seen[-1]


# -- 11.5 ------------------------------------------------------------------------------------------------------------
def norms_with_registry(model):  # noqa: ANN001, ANN201
    norms = {}
    registry = HookRegistry(model)
    for name, module in model.named_modules():
        if name and not any(True for _ in module.children()):
            norms[name] = []
            registry.forward(module, lambda m, a, o, name=name: norms[name].append(torch.linalg.vector_norm(o).item()))
    return norms, [registry]


def norms_setdefault_returns(model):  # noqa: ANN001, ANN201 -- the reproduction's accident: setdefault returns
    norms, first = {}, {}
    handles = []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            norms[name] = []
            handles.append(module.register_forward_hook(
                lambda m, a, o, name=name: (norms[name].append(o.norm().item()),
                                            first.setdefault(name, o.detach()))[1]))
    return norms, handles


def norms_returns_detached(model):  # noqa: ANN001, ANN201
    norms = {}
    handles = []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            norms[name] = []

            def hook(m, a, o, name=name):  # noqa: ANN001, ANN202
                kept = o.detach()
                norms[name].append(kept.norm().item())
                return kept

            handles.append(module.register_forward_hook(hook))
    return norms, handles


def norms_of_input(model):  # noqa: ANN001, ANN201
    norms = {}
    handles = []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            norms[name] = []
            handles.append(module.register_forward_hook(
                lambda m, a, o, name=name: norms[name].append(a[0].norm().item())))
    return norms, handles


# -- 11.6 ------------------------------------------------------------------------------------------------------------
def layer_with_recorder(model, x):  # noqa: ANN001, ANN201 -- the course's recorder, all modules
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


def layer_last_4d(model, x):  # noqa: ANN001, ANN201 -- forgets the 1x1 pool
    found = []
    with HookRegistry(model) as hooks:
        for name, _ in model.named_modules():
            if name:
                hooks.forward(name, lambda m, a, o, name=name: found.append(name) if o.dim() == 4 else None)
        with torch.no_grad():
            model(x)
    return found[-1]


def layer_first_conv(model, x):  # noqa: ANN001, ANN201
    return next(name for name, module in model.named_modules() if isinstance(module, nn.Conv2d))


# -- 11.7 ------------------------------------------------------------------------------------------------------------
def scale_in_buffer(module):  # noqa: ANN001, ANN201 -- a 1-element tensor, copy_ into it
    scale = torch.ones(1)

    def hook(m, args, output):  # noqa: ANN001, ANN202
        return output * scale

    return (lambda value: scale.copy_(torch.tensor([value]))), module.register_forward_hook(hook)


def scale_reregistered(module):  # noqa: ANN001, ANN201 -- a fresh hook per value: the reproduction
    state = {"handle": None}

    class Handle:
        def remove(self):  # noqa: ANN202
            if state["handle"] is not None:
                state["handle"].remove()

    def set_scale(value):  # noqa: ANN001, ANN202
        if state["handle"] is not None:
            state["handle"].remove()
        state["handle"] = module.register_forward_hook(lambda m, a, o: o * value)

    return set_scale, Handle()


def scale_python_float(module):  # noqa: ANN001, ANN201 -- one hook, but a Python number dynamo guards on
    state = {"scale": 1.0}

    def set_scale(value):  # noqa: ANN001, ANN202
        state["scale"] = value

    return set_scale, module.register_forward_hook(lambda m, a, o: o * state["scale"])


def scale_never_removed(module):  # noqa: ANN001, ANN201
    scale = torch.ones(())
    module.register_forward_hook(lambda m, a, o: o * scale)
    extra = module.register_forward_hook(lambda m, a, o: None)
    return scale.fill_, extra


# -- 11.8 ------------------------------------------------------------------------------------------------------------
def step_with_unscale_then_clip(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201
    optimizer.zero_grad(set_to_none=True)
    total = len(batches)
    for inputs, targets in batches:
        scaler.scale(F.mse_loss(model(inputs), targets) / total).backward()
    scaler.unscale_(optimizer)
    for param in model.parameters():
        param.grad.clamp_(-limit, limit)
    scaler.step(optimizer)
    scaler.update()


def step_hook_clips(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201 -- the reproduction
    handles = [p.register_hook(lambda g: g.clamp(-limit, limit)) for p in model.parameters()]
    try:
        for inputs, targets in batches:
            scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
        scaler.step(optimizer)
        scaler.update()
    finally:
        for handle in handles:
            handle.remove()


def step_clips_before_unscale(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201
    for inputs, targets in batches:
        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    scaler.step(optimizer)
    scaler.update()


def step_no_clip(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201
    for inputs, targets in batches:
        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
    scaler.step(optimizer)
    scaler.update()



def grad_output_restored_without_finally(model, layer_name, x):  # noqa: ANN001, ANN201 -- not when it raises
    flags = {module: module.inplace for module in model.modules() if hasattr(module, "inplace")}
    for module in flags:
        module.inplace = False
    caught = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gi, go: caught.append(go[0]))
    model(x).sum().backward()
    handle.remove()
    for module, flag in flags.items():
        module.inplace = flag
    return caught[0]


def norms_late_bound(model):  # noqa: ANN001, ANN201 -- every hook reads the loop's last name
    norms, handles = {}, []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            norms[name] = []
            handles.append(module.register_forward_hook(lambda m, a, o: norms[name].append(o.norm().item())))
    return norms, handles


def norms_setdefault_list(model):  # noqa: ANN001, ANN201 -- setdefault's list comes back as the output
    norms, handles = {}, []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            handles.append(module.register_forward_hook(
                lambda m, a, o, name=name: norms.setdefault(name, []).append(o.norm().item())
                or norms[name]))
    return norms, handles


def layer_wider_and_taller(model, x):  # noqa: ANN001, ANN201 -- h > 1 and w > 1: misses a one-row map
    found = []
    hooks = [module.register_forward_hook(lambda m, a, o, name=name: found.append(name)
                                          if o.dim() == 4 and o.shape[-2] > 1 and o.shape[-1] > 1 else None)
             for name, module in model.named_modules() if name]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return found[-1]


def layer_width_only(model, x):  # noqa: ANN001, ANN201 -- w > 1 only: misses a map one column wide
    found = []
    hooks = [module.register_forward_hook(lambda m, a, o, name=name: found.append(name)
                                          if o.dim() == 4 and o.shape[-1] > 1 else None)
             for name, module in model.named_modules() if name]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return found[-1]


def layer_children_only(model, x):  # noqa: ANN001, ANN201 -- hooks the top-level children only
    found = []
    hooks = [module.register_forward_hook(lambda m, a, o, name=name: found.append(name)
                                          if o.dim() == 4 and o.shape[-2] * o.shape[-1] > 1 else None)
             for name, module in model.named_children()]
    try:
        with torch.no_grad():
            model(x)
    finally:
        for hook in hooks:
            hook.remove()
    return found[-1] if found else None


def norms_in_place(model):  # noqa: ANN001, ANN201 -- squares the output in place to take its norm
    norms, handles = {}, []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            norms[name] = []

            def hook(m, a, output, name=name):  # noqa: ANN001, ANN202
                norms[name].append(output.pow_(2).sum().sqrt().item())

            handles.append(module.register_forward_hook(hook))
    return norms, handles


def norms_late_binding(model):  # noqa: ANN001, ANN201 -- every lambda sees the loop's last name (a defaultdict)
    from collections import defaultdict

    norms, handles = defaultdict(list), []
    for name, module in model.named_modules():
        if name and not list(module.children()):
            handles.append(module.register_forward_hook(lambda m, a, o: norms[name].append(o.norm().item())))
    return norms, handles


def grad_output_x_requires_grad(model, layer_name, x):  # noqa: ANN001, ANN201 -- switches on x.requires_grad
    x.requires_grad_(True)
    return grad_output_with_registry(model, layer_name, x)


def step_clips_after_each_backward(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201
    for inputs, targets in batches:  # clips the running (scaled) sum after every micro-batch
        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), limit * scaler.get_scale())
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()


def step_keeps_old_gradients(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201 -- no zero_grad
    for x, y in batches:
        scaler.scale(F.mse_loss(model(x), y) / len(batches)).backward()
    scaler.unscale_(optimizer)
    for p in model.parameters():
        p.grad.clamp_(-limit, limit)
    scaler.step(optimizer)
    scaler.update()


def step_without_update(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201
    for inputs, targets in batches:
        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    scaler.step(optimizer)


def step_clips_the_norm(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201
    for inputs, targets in batches:
        scaler.scale(F.mse_loss(model(inputs), targets) / len(batches)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_norm_(model.parameters(), limit)
    scaler.step(optimizer)
    scaler.update()


def step_undivided(model, optimizer, scaler, batches, limit):  # noqa: ANN001, ANN201 -- sums the losses
    for inputs, targets in batches:
        scaler.scale(F.mse_loss(model(inputs), targets)).backward()
    scaler.unscale_(optimizer)
    torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    scaler.step(optimizer)
    scaler.update()


CASES = {
    "11.1": Cases(
        right=[grad_output_with_registry],
        wrong=[
            (grad_output_naive, "in-place error"),
            (grad_output_flags_left_off, "inplace` flags"),
            (grad_output_all_relus_in_place_after, "inplace` flags"),
            (grad_output_hook_left, "hooks are left"),
            (grad_output_by_tensor_hook, "no full backward hook"),
            (grad_output_restored_without_finally, "When the model raised"),
            (grad_output_x_requires_grad, "x.requires_grad"),
        ],
    ),
    "11.2": Cases(
        right=[keep_with_copy_, keep_clone_then_detach],
        wrong=[
            (keep_raw, "still alive"),
            (keep_clone_only, "still alive"),
            (keep_detached_alias, "shares its memory"),
            (keep_late_binding, "under the same name"),
        ],
    ),
    "11.3": Cases(
        right=[mean_with_context],
        wrong=[
            (mean_never_removed, "hook(s) are left"),
            (mean_removed_without_finally, "finally"),
            (mean_swallows, "not swallow"),
        ],
    ),
    "11.4": Cases(
        right=[{"aux_head_in_eval": False, "under_no_grad": True, "forward_called_directly": False,
                "copied_after_hook": True}],   # the keys in another order
        wrong=[
            ({"copied_after_hook": False, "forward_called_directly": False, "under_no_grad": False,
              "aux_head_in_eval": False}, "2 of 4"),
            ({"copied_after_hook": True, "under_no_grad": True}, "exactly the keys"),
            ({"copied_after_hook": "yes", "forward_called_directly": False, "under_no_grad": True,
              "aux_head_in_eval": False}, "True"),
        ],
    ),
    "11.5": Cases(
        right=[norms_with_registry],
        wrong=[
            (norms_setdefault_returns, "in place of the layer's output"),
            (norms_in_place, "changed a layer's output in place"),
            (norms_late_binding, "loop variable"),
            (norms_returns_detached, "detached from the graph"),
            (norms_late_bound, "loop variable"),
            (norms_setdefault_list, "returned a list, not a tensor"),
            (norms_of_input, "output, per forward"),
            (norms_as_tensors, "Python floats"),
        ],
    ),
    "11.6": Cases(
        right=[layer_with_recorder],
        wrong=[
            (layer_last_4d, "1x1"),
            (layer_first_conv, "last module"),
            (layer_wider_and_taller, "not h > 1 and w > 1"),
            (layer_width_only, "not h > 1 and w > 1"),
            (layer_children_only, "nested ones too"),
        ],
    ),
    "11.7": Cases(
        right=[scale_in_buffer],
        wrong=[
            (scale_reregistered, "graphs"),
            (scale_python_float, "graphs"),
            (scale_never_removed, "hooks are left"),
        ],
    ),
    "11.8": Cases(
        right=[step_with_unscale_then_clip],
        wrong=[
            (step_hook_clips, "each micro-batch"),
            (step_clips_before_unscale, "scaled gradients"),
            (step_no_clip, "without clipping"),
            (step_without_update, "adjusts its scale"),
            (step_clips_the_norm, "by value"),
            (step_undivided, "divided by their number"),
            (step_clips_after_each_backward, "after every micro-batch's backward"),
            (step_keeps_old_gradients, "gradients from before this step"),
        ],
    ),
}
