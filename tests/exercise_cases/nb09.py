"""Answers for the checks of notebooks/09_state_and_optimizer_hooks.ipynb."""

from __future__ import annotations

import torch

from tests.exercise_cases import Cases


def rename_with_replace(model, renames):  # noqa: ANN001, ANN201 -- rebuilds the dict from a comprehension
    def hook(module, state_dict, prefix, *unused):  # noqa: ANN001, ANN002, ANN202
        renamed = {}
        for key, value in state_dict.items():
            rest = key[len(prefix):] if key.startswith(prefix) else None
            match = next((old for old in renames if rest is not None and rest.startswith(old)), None)
            renamed[prefix + renames[match] + rest[len(match):] if match else key] = value
        state_dict.clear()
        state_dict.update(renamed)

    return model.register_load_state_dict_pre_hook(hook)


def rename_ignoring_prefix(model, renames):  # noqa: ANN001, ANN201 -- works on the root only
    def hook(module, state_dict, prefix, *unused):  # noqa: ANN001, ANN002, ANN202
        for key in list(state_dict):
            for old, new in renames.items():
                if key.startswith(old):
                    state_dict[new + key[len(old):]] = state_dict.pop(key)

    return model.register_load_state_dict_pre_hook(hook)


def rename_drops_unknown(model, renames):  # noqa: ANN001, ANN201 -- throws away keys it does not know
    def hook(module, state_dict, prefix, *unused):  # noqa: ANN001, ANN002, ANN202
        for key in list(state_dict):
            value = state_dict.pop(key)
            for old, new in renames.items():
                if key.startswith(prefix + old):
                    state_dict[prefix + new + key[len(prefix + old):]] = value

    return model.register_load_state_dict_pre_hook(hook)


def rename_no_handle(model, renames):  # noqa: ANN001, ANN201
    rename_with_replace(model, renames)


def skip_by_raising_flag(optimizer):  # noqa: ANN001, ANN201 -- a different test for finiteness, grads dropped
    def hook(opt, args, kwargs):  # noqa: ANN001, ANN202
        grads = [p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None]
        if torch.stack([g.isnan().any() | g.isinf().any() for g in grads]).any():
            for g in opt.param_groups:
                for p in g["params"]:
                    p.grad = None

    return optimizer.register_step_pre_hook(hook)


def skip_by_zeroing(optimizer):  # noqa: ANN001, ANN201 -- zero gradients still move momentum and Adam
    def hook(opt, args, kwargs):  # noqa: ANN001, ANN202
        params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
        if not all(torch.isfinite(p.grad).all() for p in params):
            for p in params:
                p.grad.zero_()

    return optimizer.register_step_pre_hook(hook)


def skip_checks_first_only(optimizer):  # noqa: ANN001, ANN201
    def hook(opt, args, kwargs):  # noqa: ANN001, ANN202
        first = opt.param_groups[0]["params"][0]
        if not torch.isfinite(first.grad).all():
            for p in opt.param_groups[0]["params"]:
                p.grad = None

    return optimizer.register_step_pre_hook(hook)


def skip_no_handle(optimizer):  # noqa: ANN001, ANN201
    skip_by_raising_flag(optimizer)


def fused_with_dict(model, make_optimizer):  # noqa: ANN001, ANN201 -- optimizers in a dict, zero_grad frees
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}

    def hook(p):  # noqa: ANN001, ANN202
        optimizers[p].step()
        optimizers[p].zero_grad(set_to_none=True)

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def fused_keeps_grads(model, make_optimizer):  # noqa: ANN001, ANN201 -- steps, but the gradients stay
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}
    return [p.register_post_accumulate_grad_hook(lambda q: optimizers[q].step()) for p in model.parameters()]


def fused_fresh_optimizer(model, make_optimizer):  # noqa: ANN001, ANN201 -- a new optimizer each time: state lost
    def hook(p):  # noqa: ANN001, ANN202
        make_optimizer([p]).step()
        p.grad = None

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def fused_frees_late(model, make_optimizer):  # noqa: ANN001, ANN201 -- grads freed only after the last one
    params = list(model.parameters())
    optimizers = {p: make_optimizer([p]) for p in params}
    ready = []

    def hook(p):  # noqa: ANN001, ANN202
        ready.append(p)
        if len(ready) == len(params):
            for q in ready:
                optimizers[q].step()
                q.grad = None
            ready.clear()

    return [p.register_post_accumulate_grad_hook(hook) for p in params]


CASES = {
    "09.1": Cases(
        right=[rename_with_replace],
        wrong=[
            (rename_ignoring_prefix, "prefix"),
            (rename_drops_unknown, "leave other keys alone"),
            (rename_no_handle, "Return the handle"),
        ],
    ),
    "09.2": Cases(
        right=[skip_by_raising_flag],
        wrong=[
            (skip_by_zeroing, "zero gradients are not"),
            (skip_checks_first_only, "every parameter"),
            (skip_no_handle, "Return the handle"),
        ],
    ),
    "09.3": Cases(
        right=[fused_with_dict],
        wrong=[
            (fused_keeps_grads, "still hold a .grad"),
            (fused_fresh_optimizer, "created once"),
            (fused_frees_late, "bytes of gradients existed at once"),
        ],
    ),
}
