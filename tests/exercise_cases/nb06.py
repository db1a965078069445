"""Answers for the checks of notebooks/06_grad_cam.ipynb."""

from __future__ import annotations

import torch
import torch.nn as nn

from course_utils.hooks import HookRegistry
from tests.exercise_cases import Cases


def _scores(logits, targets):  # noqa: ANN001, ANN202
    return logits[torch.arange(len(targets)), torch.as_tensor(targets)].sum()


# -- 06.1 ---------------------------------------------------------------------------------------------------------
def weights_with_autograd_grad(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- registry, autograd.grad
    seen = []
    inputs = x.detach().clone().requires_grad_(True)
    with HookRegistry(model) as hooks:
        hooks.full_backward(layer_name, lambda module, gin, gout: seen.append(gout[0]))
        torch.autograd.grad(_scores(model(inputs), targets), inputs)
    return torch.stack([g.flatten(2).mean(-1) for g in seen])[0]


def weights_from_grad_input(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- the input's gradient
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gin[0]))
    try:
        _scores(model(x), targets).backward()
    finally:
        handle.remove()
    return seen[0].mean(dim=(2, 3))


def weights_summed(model, layer_name, x, targets):  # noqa: ANN001, ANN201
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    try:
        _scores(model(x), targets).backward()
    finally:
        handle.remove()
    return seen[0].sum(dim=(2, 3))


def weights_hook_left(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- never removes its hook
    seen = []
    model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    _scores(model(x), targets).backward()
    return seen[0].mean(dim=(2, 3))


def weights_top_class(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- ignores targets
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    try:
        logits = model(x)
        _scores(logits, logits.argmax(dim=1).tolist()).backward()
    finally:
        handle.remove()
    return seen[0].mean(dim=(2, 3))


def weights_every_target_column(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- logits[:, targets]
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    try:
        model(x)[:, targets].sum().backward()
    finally:
        handle.remove()
    return seen[0].mean(dim=(2, 3))


def weights_from_the_course_helper(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- no hook of its own
    from course_utils.saliency import layer_activation_and_gradient

    _, gradient = layer_activation_and_gradient(model, layer_name, x, list(targets))
    return gradient.mean(dim=(2, 3))


def weights_on_the_callers_x(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- x.requires_grad_() on x
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    try:
        torch.autograd.grad(_scores(model(x.requires_grad_()), targets), x)
    finally:
        handle.remove()
    return seen[0].mean(dim=(2, 3))


def weights_one_sample_at_a_time(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- N backwards, `with` handle
    rows = []
    for sample, target in enumerate(targets):
        seen = []
        with model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0])):
            model(x[sample : sample + 1])[0, target].backward()
        rows.append(seen[0].mean(dim=(2, 3))[0])
    return torch.stack(rows)


def weights_removed_outside_finally(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- lost when forward raises
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    _scores(model(x), targets).backward()
    handle.remove()
    return seen[0].mean(dim=(2, 3))


def weights_swallowing_the_error(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- except: return None
    seen = []
    handle = model.get_submodule(layer_name).register_full_backward_hook(lambda m, gin, gout: seen.append(gout[0]))
    try:
        _scores(model(x), targets).backward()
    except Exception:  # noqa: BLE001 -- the mistake under test
        return None
    finally:
        handle.remove()
    return seen[0].mean(dim=(2, 3))

# -- 06.2 ---------------------------------------------------------------------------------------------------------
def cam_from_the_course_helper(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- the finished function
    from course_utils.saliency import grad_cam

    return grad_cam(model, layer_name, x, list(targets), upsample=False, normalize=False)


def cam_from_the_recorder(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- the course's recorder
    from course_utils.recorder import ActivationRecorder

    with ActivationRecorder(model, [layer_name], gradients=True) as rec:
        _scores(model(x), targets).backward()
    a, g = rec.output(layer_name), rec.gradient(layer_name)
    return (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)


def cam_returning_a_clone(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- hands the model a clone
    kept = {}

    def hook(module, args, output):  # noqa: ANN001, ANN202
        kept["a"] = output
        output.register_hook(lambda grad: kept.__setitem__("g", grad))
        return output.clone()

    layer = dict(model.named_modules())[layer_name]
    handle = layer.register_forward_hook(hook)
    try:
        _scores(model(x), targets).backward()
    finally:
        handle.remove()
    weights = kept["g"].sum(dim=(2, 3), keepdim=True) / (kept["g"].shape[2] * kept["g"].shape[3])
    return torch.relu((weights * kept["a"].detach()).sum(dim=1))


def _two_hooks(model, layer_name, x, targets, *, copy, combine, remove=True):  # noqa: ANN001, ANN202
    kept = []

    def hook(module, args, output):  # noqa: ANN001, ANN202
        kept.append(output.detach().clone() if copy else output.detach())
        output.register_hook(kept.append)

    handle = model.get_submodule(layer_name).register_forward_hook(hook)
    try:
        _scores(model(x), targets).backward()
    finally:
        if remove:
            handle.remove()
    activation, gradient = kept
    return combine(activation, gradient)


def cam_alias(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- keeps the output itself
    return _two_hooks(model, layer_name, x, targets, copy=False,
                      combine=lambda a, g: (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0))


def cam_element_wise(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- article 003's description
    return _two_hooks(model, layer_name, x, targets, copy=True, combine=lambda a, g: (a * g).sum(dim=1).clamp(min=0))


def cam_without_relu(model, layer_name, x, targets):  # noqa: ANN001, ANN201
    return _two_hooks(model, layer_name, x, targets, copy=True,
                      combine=lambda a, g: (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1))


def cam_hook_left(model, layer_name, x, targets):  # noqa: ANN001, ANN201
    return _two_hooks(model, layer_name, x, targets, copy=True, remove=False,
                      combine=lambda a, g: (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0))


def _correct_cam(a, g):  # noqa: ANN001, ANN202
    return (g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0)


def cam_upsampled(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- grad_cam's display step done too
    maps = _two_hooks(model, layer_name, x, targets, copy=True, combine=_correct_cam)
    return torch.nn.functional.interpolate(maps[:, None], size=x.shape[-2:], mode="bilinear", align_corners=False)[:, 0]


def cam_scaled(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- scaled to [0, 1] for display
    maps = _two_hooks(model, layer_name, x, targets, copy=True, combine=_correct_cam)
    low, high = maps.amin(dim=(1, 2), keepdim=True), maps.amax(dim=(1, 2), keepdim=True)
    return (maps - low) / (high - low)


def _cam_for_scores(model, layer_name, x, score):  # noqa: ANN001, ANN202 -- the two hooks, any score
    kept = []

    def hook(module, args, output):  # noqa: ANN001, ANN202
        kept.append(output.detach().clone())
        output.register_hook(kept.append)

    handle = model.get_submodule(layer_name).register_forward_hook(hook)
    try:
        score(model(x)).backward()
    finally:
        handle.remove()
    return _correct_cam(*kept)


def cam_one_class_for_the_batch(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- targets[0] for every image
    return _cam_for_scores(model, layer_name, x, lambda logits: logits[:, targets[0]].sum())


def cam_every_target_column(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- logits[:, targets]: N x N scores
    return _cam_for_scores(model, layer_name, x, lambda logits: logits[:, targets].sum())


def cam_top_class(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- ignores targets
    return _cam_for_scores(model, layer_name, x, lambda logits: logits.max(dim=1).values.sum())


def cam_of_the_layer_input(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- args[0] instead of output
    kept = []

    def hook(module, args, output):  # noqa: ANN001, ANN202
        kept.append(args[0].detach().clone())
        args[0].register_hook(kept.append)

    handle = model.get_submodule(layer_name).register_forward_hook(hook)
    try:
        _scores(model(x), targets).backward()
    finally:
        handle.remove()
    return _correct_cam(*kept)


def cam_tensor_hook_after_the_forward(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- after the ReLU ran
    kept = {}

    def hook(module, args, output):  # noqa: ANN001, ANN202
        kept["output"], kept["a"] = output, output.detach().clone()

    handle = model.get_submodule(layer_name).register_forward_hook(hook)
    try:
        logits = model(x)
        kept["output"].register_hook(lambda grad: kept.__setitem__("g", grad))
        _scores(logits, targets).backward()
    finally:
        handle.remove()
    return _correct_cam(kept["a"], kept["g"])


def cam_spatial_sum(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- weights summed over positions
    return _two_hooks(model, layer_name, x, targets, copy=True,
                      combine=lambda a, g: (g.sum(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0))


def cam_channel_mean(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- averaged over channels
    return _two_hooks(model, layer_name, x, targets, copy=True,
                      combine=lambda a, g: (g.mean(dim=(2, 3), keepdim=True) * a).mean(dim=1).clamp(min=0))


def cam_full_backward_hook(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- 06.1's hook
    kept = {}
    layer = model.get_submodule(layer_name)
    handles = [layer.register_forward_hook(lambda m, args, output: kept.__setitem__("a", output.detach().clone())),
               layer.register_full_backward_hook(lambda m, gin, gout: kept.__setitem__("g", gout[0]))]
    try:
        _scores(model(x), targets).backward()
    finally:
        for handle in handles:
            handle.remove()
    return _correct_cam(kept["a"], kept["g"])

# -- 06.3 ---------------------------------------------------------------------------------------------------------
def per_call_with_default_argument(model, module, x, targets):  # noqa: ANN001, ANN201 -- dicts keyed by call
    acts, grads = {}, {}

    def hook(mod, args, output):  # noqa: ANN001, ANN202
        call = len(acts)
        acts[call] = output.clone().detach()
        output.register_hook(lambda grad, call=call: grads.__setitem__(call, grad))

    with HookRegistry(model) as hooks:
        hooks.forward(module, hook)
        _scores(model(x), targets).backward()
    return [torch.relu(torch.einsum("nc,nchw->nhw", grads[i].mean(dim=(2, 3)), acts[i])) for i in sorted(acts)]


def _per_call(model, module, x, targets, *, copy, pair_in_firing_order, keep_last_only=False):  # noqa: ANN001, ANN202
    acts, grads = [], []

    def hook(mod, args, output):  # noqa: ANN001, ANN202
        acts.append(output.detach().clone() if copy else output.detach())
        output.register_hook(grads.append)

    handle = module.register_forward_hook(hook)
    try:
        _scores(model(x), targets).backward()
    finally:
        handle.remove()
    if not pair_in_firing_order:
        grads.reverse()
    maps = [(g.mean(dim=(2, 3), keepdim=True) * a).sum(dim=1).clamp(min=0) for a, g in zip(acts, grads)]
    return maps[-1:] if keep_last_only else maps


def per_call_paired_in_firing_order(model, module, x, targets):  # noqa: ANN001, ANN201 -- the backward runs last call first
    return _per_call(model, module, x, targets, copy=True, pair_in_firing_order=True)


def per_call_alias(model, module, x, targets):  # noqa: ANN001, ANN201 -- keeps outputs an in-place ReLU rewrites
    return _per_call(model, module, x, targets, copy=False, pair_in_firing_order=False)


def per_call_last_only(model, module, x, targets):  # noqa: ANN001, ANN201 -- one map, as for a layer that runs once
    return _per_call(model, module, x, targets, copy=True, pair_in_firing_order=False, keep_last_only=True)


def per_call_reversed(model, module, x, targets):  # noqa: ANN001, ANN201
    return list(reversed(_per_call(model, module, x, targets, copy=True, pair_in_firing_order=False)))



def cam_returning_the_handle(model, layer_name, x, targets):  # noqa: ANN001, ANN201 -- the hook returns a handle
    kept = {}

    def hook(module, args, output):  # noqa: ANN001, ANN202
        kept["a"] = output.detach().clone()
        return output.register_hook(lambda grad: kept.__setitem__("g", grad))

    handle = model.get_submodule(layer_name).register_forward_hook(hook)
    try:
        _scores(model(x), targets).backward()
    finally:
        handle.remove()
    return (kept["g"].mean(dim=(2, 3), keepdim=True) * kept["a"]).sum(dim=1).clamp(min=0)


CASES = {
    "06.1": Cases(
        right=[weights_with_autograd_grad, weights_one_sample_at_a_time],
        wrong=[
            (weights_from_grad_input, "grad_output[0]"),
            (weights_summed, "spatial sum"),
            (weights_hook_left, "left behind"),
            (weights_removed_outside_finally, "When the model raises, your hook stays behind"),
            (weights_swallowing_the_error, "let the error through"),
            (weights_top_class, "top class"),
            (weights_every_target_column, "logits[:, targets]"),
            (weights_from_the_course_helper, "no full backward hook"),
            (weights_on_the_callers_x, "requires_grad"),
        ],
    ),
    "06.2": Cases(
        right=[cam_returning_a_clone],
        wrong=[
            (cam_alias, "Keep a copy"),
            (cam_element_wise, "element-wise product"),
            (cam_without_relu, "positive part"),
            (cam_hook_left, "left behind"),
            (cam_from_the_course_helper, "course's own"),
            (cam_from_the_recorder, "course's own"),
            (cam_upsampled, "input's size"),
            (cam_scaled, "maps are scaled"),
            (cam_one_class_for_the_batch, "its own class"),
            (cam_every_target_column, "logits[:, targets]"),
            (cam_top_class, "top class"),
            (cam_of_the_layer_input, "layer's input"),
            (cam_tensor_hook_after_the_forward, "inside the forward hook"),
            (cam_spatial_sum, "not its sum"),
            (cam_channel_mean, "not their mean"),
            (cam_full_backward_hook, "full backward hook"),
            (cam_returning_the_handle, "in place of the layer's output"),
        ],
    ),
    "06.3": Cases(
        right=[per_call_with_default_argument],
        wrong=[
            (per_call_paired_in_firing_order, "wrong way round"),
            (per_call_alias, "Keep a copy"),
            (per_call_last_only, "list of 2 maps"),
            (per_call_reversed, "reverse order"),
        ],
    ),
}
