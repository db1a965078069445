"""Answers for the checks of notebooks/03_forward_hooks.ipynb."""

from __future__ import annotations

import torch
import torch.nn as nn

from course_utils.hooks import HookRegistry
from tests.exercise_cases import Cases


# -- 03.1 ---------------------------------------------------------------------------------------------------
def standardise_with_layer_norm(module, args):  # noqa: ANN001, ANN201 -- F.layer_norm without affine, eps 0
    first, *rest = args
    return (torch.nn.functional.layer_norm(first, first.shape[1:], eps=0.0), *rest)


def standardise_with_var_mean(module, args):  # noqa: ANN001, ANN201
    var, mean = torch.var_mean(args[0], dim=1, keepdim=True, correction=0)
    return ((args[0] - mean) * var.rsqrt(),) + tuple(args[1:])


def standardise_in_place(module, args):  # noqa: ANN001, ANN201 -- edits the caller's tensor, returns nothing
    x = args[0]
    x.sub_(x.mean(dim=1, keepdim=True)).div_(x.std(dim=1, keepdim=True, unbiased=False))


def standardise_over_batch(module, args):  # noqa: ANN001, ANN201
    x = args[0]
    return ((x - x.mean(dim=0)) / x.std(dim=0, unbiased=False),) + args[1:]


def standardise_unbiased(module, args):  # noqa: ANN001, ANN201
    x = args[0]
    return ((x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True),) + args[1:]


def standardise_forgets_return(module, args):  # noqa: ANN001, ANN201
    x = args[0]
    _ = (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True, unbiased=False)


def standardise_drops_other_inputs(module, args):  # noqa: ANN001, ANN201 -- a bare tensor: wrapped as (x,)
    x = args[0]
    return (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True, unbiased=False)


def standardise_detached(module, args):  # noqa: ANN001, ANN201 -- .data cuts the graph
    x = args[0].data
    return ((x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True, unbiased=False),) + args[1:]


# -- 03.2 ---------------------------------------------------------------------------------------------------
def extract_with_registry(model, x, names):  # noqa: ANN001, ANN201 -- HookRegistry owns the hooks; copy via torch.clone
    found = {}
    with HookRegistry(model) as hooks:
        for name in names:
            hooks.forward(name, lambda m, a, out, name=name: found.__setitem__(name, torch.clone(out).detach()))
        model(x)
    return found


def extract_with_pre_and_post(model, x, names):  # noqa: ANN001, ANN201 -- copies via empty_like + copy_ under no_grad
    found, handles = {}, []
    modules = dict(model.named_modules())

    def keep(name):  # noqa: ANN001, ANN202
        def hook(module, args, output):  # noqa: ANN001, ANN202
            with torch.no_grad():
                found[name] = torch.empty_like(output).copy_(output)
        return hook

    try:
        handles = [modules[name].register_forward_hook(keep(name)) for name in names]
        model(x)
    finally:
        while handles:
            handles.pop().remove()
    return found


def extract_with_the_course_recorder(model, x, names):  # noqa: ANN001, ANN201 -- no hook of its own
    from course_utils.recorder import ActivationRecorder

    with ActivationRecorder(model, list(names)) as recorder:
        model(x)
    return {name: recorder.outputs[name] for name in names}


def extract_late_binding(model, x, names):  # noqa: ANN001, ANN201 -- every lambda stores under the last name
    out, handles = {}, []
    try:
        for name in names:
            handles.append(model.get_submodule(name).register_forward_hook(
                lambda m, a, o: out.__setitem__(name, o.detach().clone())))
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return out


def extract_aliases(model, x, names):  # noqa: ANN001, ANN201 -- the naive hook: detach() shares memory
    found = {}
    with HookRegistry(model) as hooks:
        for name in names:
            hooks.forward(name, lambda m, a, out, name=name: found.__setitem__(name, out.detach()))
        model(x)
    return found


def extract_without_finally(model, x, names):  # noqa: ANN001, ANN201 -- right values, hooks stay when forward raises
    found = {}
    handles = [model.get_submodule(name).register_forward_hook(
        lambda m, a, out, name=name: found.__setitem__(name, out.detach().clone())) for name in names]
    model(x)
    for handle in handles:
        handle.remove()
    return found


def extract_swallowing(model, x, names):  # noqa: ANN001, ANN201 -- hides the model's error
    found = {}
    with HookRegistry(model) as hooks:
        for name in names:
            hooks.forward(name, lambda m, a, out, name=name: found.__setitem__(name, out.detach().clone()))
        try:
            model(x)
        except Exception:  # noqa: BLE001
            pass
    return found


def extract_not_detached(model, x, names):  # noqa: ANN001, ANN201
    found = {}
    with HookRegistry(model) as hooks:
        for name in names:
            hooks.forward(name, lambda m, a, out, name=name: found.__setitem__(name, out.clone()))
        model(x)
    return found


def extract_hooks_left(model, x, names):  # noqa: ANN001, ANN201
    found = {}
    for name in names:
        model.get_submodule(name).register_forward_hook(
            lambda m, a, out, name=name: found.__setitem__(name, out.detach().clone()))
    model(x)
    return found


# -- 03.3 ---------------------------------------------------------------------------------------------------
class TracerWithRegistry:
    """A different design: a HookRegistry, leaves found by their empty _modules, pairs as lists, shapes as
    torch.Size (a tuple)."""

    def __init__(self, model):  # noqa: ANN001
        self.model, self.calls = model, []

    def __enter__(self):  # noqa: ANN204
        self.registry = HookRegistry(self.model)
        leaves = [name for name, module in self.model.named_modules() if len(module._modules) == 0]
        for name in leaves:
            self.registry.forward(name, lambda m, a, out, name=name: self.calls.append(
                [name, None if out is None else out.shape]), always_call=True)
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        self.registry.remove()


class TracerWithoutAlwaysCall:
    def __init__(self, model):  # noqa: ANN001
        self.model, self.calls, self.handles = model, [], []

    def __enter__(self):  # noqa: ANN204
        for name, module in self.model.named_modules():
            if not list(module.children()):
                self.handles.append(module.register_forward_hook(
                    lambda m, a, out, name=name: self.calls.append((name, tuple(out.shape)))))
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        for handle in self.handles:
            handle.remove()


class TracerSwallowing(TracerWithRegistry):
    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        self.registry.remove()
        return True


class TracerByName(TracerWithRegistry):
    """Keeps one entry per module name: the second call of a reused module replaces the first."""

    def __enter__(self):  # noqa: ANN204
        self.registry = HookRegistry(self.model)
        self.seen = {}
        for name, module in self.model.named_modules():
            if not list(module.children()):
                self.registry.forward(module, lambda m, a, out, name=name: self._keep(name, out), always_call=True)
        return self

    def _keep(self, name, out):  # noqa: ANN001, ANN202
        self.seen[name] = None if out is None else tuple(out.shape)
        self.calls = list(self.seen.items())


class TracerNeverRemoves:
    def __init__(self, model):  # noqa: ANN001
        self.model, self.calls = model, []

    def __enter__(self):  # noqa: ANN204
        for name, module in self.model.named_modules():
            if not list(module.children()):
                module.register_forward_hook(lambda m, a, out, name=name: self.calls.append(
                    (name, None if out is None else tuple(out.shape))), always_call=True)
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        return None



def extract_by_attribute(model, x, names):  # noqa: ANN001, ANN201 -- getattr finds top-level layers only
    found, handles = {}, []
    try:
        for name in names:
            handles.append(getattr(model, name).register_forward_hook(
                lambda m, a, out, name=name: found.__setitem__(name, out.detach().clone())))
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found


class TracerForgetsSelf:
    """__enter__ registers everything and returns nothing: `as tracer` binds None."""

    def __init__(self, model):  # noqa: ANN001
        self.model, self.calls, self.handles = model, [], []

    def __enter__(self):  # noqa: ANN204
        for name, module in self.model.named_modules():
            if not list(module.children()):
                self.handles.append(module.register_forward_hook(
                    lambda m, a, out, name=name: self.calls.append((name, None if out is None else tuple(out.shape))),
                    always_call=True))

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        for handle in self.handles:
            handle.remove()


class TracerOfEveryModule:
    """Hooks every module, the containers and the model itself too."""

    def __init__(self, model):  # noqa: ANN001
        self.model, self.calls, self.handles = model, [], []

    def __enter__(self):  # noqa: ANN204
        for name, module in self.model.named_modules():
            self.handles.append(module.register_forward_hook(
                lambda m, a, out, name=name: self.calls.append((name, None if out is None else tuple(out.shape))),
                always_call=True))
        return self

    def __exit__(self, *exc):  # noqa: ANN002, ANN204
        for handle in self.handles:
            handle.remove()


class TracerOfListShapes(TracerWithRegistry):
    """Shapes as lists, where the task asks for the tuple shape."""

    def __enter__(self):  # noqa: ANN204
        self.registry = HookRegistry(self.model)
        for name, module in self.model.named_modules():
            if not list(module.children()):
                self.registry.forward(module, lambda m, a, out, name=name: self.calls.append(
                    (name, None if out is None else list(out.shape))), always_call=True)
        return self


class TracerOncePerEntry(TracerOfListShapes):
    """Skips an entry equal to one already recorded: a reused layer with the same shape appears once."""

    def __enter__(self):  # noqa: ANN204
        self.registry = HookRegistry(self.model)
        for name, module in self.model.named_modules():
            if not list(module.children()):
                self.registry.forward(module, lambda m, a, out, name=name: self._keep(
                    (name, None if out is None else tuple(out.shape))), always_call=True)
        return self

    def _keep(self, entry):  # noqa: ANN001, ANN202
        if entry not in self.calls:
            self.calls.append(entry)


CASES = {
    "03.1": Cases(
        right=[standardise_with_layer_norm, standardise_with_var_mean],
        wrong=[
            (standardise_in_place, "in place"),
            (standardise_over_batch, "each sample"),
            (standardise_unbiased, "unbiased=False"),
            (standardise_forgets_return, "raw input"),
            (standardise_drops_other_inputs, "second positional input"),
            (standardise_detached, "gradient does not flow"),
        ],
    ),
    "03.2": Cases(
        right=[extract_with_registry, extract_with_pre_and_post],
        wrong=[
            (extract_aliases, "rectified"),
            (extract_late_binding, "loop variable"),
            (extract_without_finally, "finally"),
            (extract_swallowing, "propagate"),
            (extract_not_detached, "detached"),
            (extract_hooks_left, "still on the model"),
            (extract_with_the_course_recorder, "course's own"),
            (extract_by_attribute, "dotted name"),
        ],
    ),
    "03.3": Cases(
        right=[TracerWithRegistry],
        wrong=[
            (TracerWithoutAlwaysCall, "registration option"),
            (TracerSwallowing, "swallow"),
            (TracerByName, "twice"),
            (TracerNeverRemoves, "hook(s) are still on the model"),
            (TracerForgetsSelf, "__enter__ returns"),
            (TracerOfEveryModule, "a module with children"),
            (TracerOfListShapes, "each shape a tuple"),
            (TracerOncePerEntry, "also when it equals an entry"),
        ],
    ),
}
