"""Answers for the checks of notebooks/09_state_and_optimizer_hooks.ipynb."""

from __future__ import annotations

import copy

import torch

from tests.exercise_cases import Cases


# -- 09.1 ----------------------------------------------------------------------------------------------------------
def split_with_slices(attention):  # noqa: ANN001, ANN201 -- rebuilds the dict, slices by hand, names from the module
    def hook(module, state_dict, prefix, *unused):  # noqa: ANN001, ANN002, ANN202
        rebuilt = {}
        for key, value in state_dict.items():
            local = key[len(prefix):] if key.startswith(prefix) else None
            if local is not None and local.startswith("qkv.") and local.count(".") == 1:
                third = value.shape[0] // 3
                for index, name in enumerate(("q", "k", "v")):
                    rebuilt[f"{prefix}{name}.{local[4:]}"] = value[index * third:(index + 1) * third]
            else:
                rebuilt[key] = value
        state_dict.clear()
        state_dict.update(rebuilt)

    return attention.register_load_state_dict_pre_hook(hook)


def _splitter(*, use_prefix=True, dim=0, order=("q", "k", "v"), kinds=("weight", "bias"), pop=True):  # noqa: ANN001, ANN202
    def attach(attention):  # noqa: ANN001, ANN202
        def hook(module, state_dict, prefix, *unused):  # noqa: ANN001, ANN002, ANN202
            start = prefix if use_prefix else ""
            for kind in kinds:
                key = f"{start}qkv.{kind}"
                if key in state_dict:
                    fused = state_dict.pop(key) if pop else state_dict[key]
                    for name, part in zip(order, fused.chunk(3, dim=dim)):
                        state_dict[f"{start}{name}.{kind}"] = part

        return attention.register_load_state_dict_pre_hook(hook)

    return attach


def split_no_handle(attention):  # noqa: ANN001, ANN201
    _splitter()(attention)


CASES_09_1 = Cases(
    right=[split_with_slices],
    wrong=[
        (_splitter(use_prefix=False), "hook's prefix"),
        (_splitter(dim=-1), "dim 0"),
        (_splitter(kinds=("weight",)), "bias"),
        (_splitter(order=("k", "q", "v")), "q's rows first"),
        (_splitter(pop=False), "is still in the checkpoint"),
        (split_no_handle, "Return the handle"),
    ],
)


# -- 09.2 ----------------------------------------------------------------------------------------------------------
def _all_params(opt):  # noqa: ANN001, ANN202
    return [p for group in opt.param_groups for p in group["params"]]


def undo_by_hand(optimizer, max_change):  # noqa: ANN001, ANN201 -- copies opt.state by hand, one flag for the step
    saved = {}

    def pre(opt, args, kwargs):  # noqa: ANN001, ANN202
        saved["weights"] = {p: p.detach().clone() for p in _all_params(opt)}
        saved["state"] = {p: {k: v.clone() if torch.is_tensor(v) else v for k, v in opt.state[p].items()}
                          for p in _all_params(opt) if p in opt.state}

    def post(opt, args, kwargs):  # noqa: ANN001, ANN202
        changes = [(p.detach() - saved["weights"][p]).abs() for p in _all_params(opt)]
        if all(torch.isfinite(c).all() and c.max() <= max_change for c in changes):
            return
        with torch.no_grad():
            for p in _all_params(opt):
                p.copy_(saved["weights"][p])
                if p in saved["state"]:
                    opt.state[p] = saved["state"][p]
                else:
                    opt.state.pop(p, None)

    return (optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post))


def _undoer(*, state=True, deep=True, clone=True, finite=True, after=True, weights=True):  # noqa: ANN001, ANN202
    def attach(optimizer, max_change):  # noqa: ANN001, ANN202
        saved = {}

        def pre(opt, args, kwargs):  # noqa: ANN001, ANN202
            saved["state"] = copy.deepcopy(opt.state_dict()) if deep else opt.state_dict()
            if weights:
                saved["weights"] = [p.detach().clone() if clone else p.detach() for p in _all_params(opt)]
            else:  # keeps only what it needs to tell a bad step: the largest weight, a number
                saved["weights"] = [float(p.detach().abs().max()) for p in _all_params(opt)]
            if not after and not all(torch.isfinite(p.grad).all() for p in _all_params(opt) if p.grad is not None):
                for p in _all_params(opt):  # O5's guard: looks at the gradients only
                    p.grad = None

        def post(opt, args, kwargs):  # noqa: ANN001, ANN202
            if not after:
                return
            pairs = list(zip(_all_params(opt), saved["weights"]))
            if weights:
                bad = any((p.detach() - w).abs().max() > max_change for p, w in pairs)
            else:
                bad = any(abs(float(p.detach().abs().max()) - w) > max_change for p, w in pairs)
            if finite:
                bad = bad or any(not torch.isfinite(p).all() for p, _ in pairs)
            if bad:
                with torch.no_grad():
                    for p, w in pairs:
                        if weights:
                            p.copy_(w)
                if state:
                    opt.load_state_dict(saved["state"])

        return [optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)]

    return attach


def undo_weights_only(optimizer, max_change):  # noqa: ANN001, ANN201 -- never saves the optimizer's state
    saved = {}

    def pre(opt, args, kwargs):  # noqa: ANN001, ANN202
        saved["weights"] = [p.detach().clone() for p in _all_params(opt)]

    def post(opt, args, kwargs):  # noqa: ANN001, ANN202
        pairs = list(zip(_all_params(opt), saved["weights"]))
        if any(not torch.isfinite(p).all() or (p.detach() - w).abs().max() > max_change for p, w in pairs):
            with torch.no_grad():
                for p, w in pairs:
                    p.copy_(w)

    return [optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)]


def undo_deepcopied_state(optimizer, max_change):  # noqa: ANN001, ANN201 -- deepcopy(opt.state) copies its keys too
    saved = {}

    def pre(opt, args, kwargs):  # noqa: ANN001, ANN202
        saved["weights"] = [p.detach().clone() for p in _all_params(opt)]
        saved["state"] = copy.deepcopy(opt.state)

    def post(opt, args, kwargs):  # noqa: ANN001, ANN202
        pairs = list(zip(_all_params(opt), saved["weights"]))
        if any(not torch.isfinite(p).all() or (p.detach() - w).abs().max() > max_change for p, w in pairs):
            with torch.no_grad():
                for p, w in pairs:
                    p.copy_(w)
            opt.state = saved["state"]

    return [optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)]


def undo_no_handles(optimizer, max_change):  # noqa: ANN001, ANN201
    _undoer()(optimizer, max_change)


CASES_09_2 = Cases(
    right=[undo_by_hand],
    wrong=[
        (_undoer(state=False), "optimizer's state"),
        (_undoer(deep=False), "which step() changes in place -- a copy of a dict"),
        (_undoer(clone=False), "shares memory with a weight"),
        (_undoer(finite=False), "comparison with nan"),
        (_undoer(after=False), "was kept"),
        (_undoer(weights=False), "no copy of some weights"),
        (undo_no_handles, "both handles"),
        (undo_weights_only, "hold no copy of it"),
        (undo_deepcopied_state, "copies of them as its keys"),
    ],
)


# -- 09.3 ----------------------------------------------------------------------------------------------------------
def accumulate_with_dicts(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- dicts keyed by parameter
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}
    seen = {p: 0 for p in model.parameters()}

    def hook(p):  # noqa: ANN001, ANN202
        seen[p] += 1
        if seen[p] == every:
            seen[p] = 0
            optimizers[p].step()
            optimizers[p].zero_grad(set_to_none=True)

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def accumulate_never(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- O8's hook: steps after every backward
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}

    def hook(p):  # noqa: ANN001, ANN202
        optimizers[p].step()
        p.grad = None

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def accumulate_shared_counter(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- one counter for all
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}
    calls = [0]

    def hook(p):  # noqa: ANN001, ANN202
        calls[0] += 1
        if calls[0] % every == 0:
            optimizers[p].step()
            p.grad = None

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def accumulate_frees_each_time(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- the sum is lost
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}
    seen = {p: 0 for p in model.parameters()}

    def hook(p):  # noqa: ANN001, ANN202
        seen[p] += 1
        if seen[p] % every == 0:
            optimizers[p].step()
        p.grad = None

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def accumulate_fresh_optimizer(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- state lost at every step
    seen = {p: 0 for p in model.parameters()}

    def hook(p):  # noqa: ANN001, ANN202
        seen[p] += 1
        if seen[p] % every == 0:
            make_optimizer([p]).step()
            p.grad = None

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def accumulate_keeps_grads(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- steps, never frees
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}
    seen = {p: 0 for p in model.parameters()}

    def hook(p):  # noqa: ANN001, ANN202
        seen[p] += 1
        if seen[p] % every == 0:
            optimizers[p].step()

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]


def accumulate_late_bound(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- the loop's variables, read late
    handles = []
    for param in model.parameters():
        opt, count = make_optimizer([param]), [0]

        def hook(p):  # noqa: ANN001, ANN202 -- opt and count are looked up when the hook runs: the last ones
            count[0] += 1
            if count[0] % every == 0:
                opt.step()
                p.grad = None

        handles.append(param.register_post_accumulate_grad_hook(hook))
    return handles


def accumulate_late_bound_param(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- frees the loop's last param
    handles = []
    for param in model.parameters():
        def hook(p, opt=make_optimizer([param]), count=[0]):  # noqa: ANN001, ANN202, B006, B008
            count[0] += 1
            if count[0] % every == 0:
                opt.step()
                param.grad = None                         # the loop variable, read when the hook runs

        handles.append(param.register_post_accumulate_grad_hook(hook))
    return handles


def accumulate_bound_by_defaults(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- late binding avoided
    handles = []
    for param in model.parameters():
        def hook(p, opt=make_optimizer([param]), count=[0]):  # noqa: ANN001, ANN202, B006, B008
            count[0] += 1
            if count[0] % every == 0:
                opt.step()
                p.grad = None

        handles.append(param.register_post_accumulate_grad_hook(hook))
    return handles


def accumulate_one_optimizer(model, make_optimizer, every):  # noqa: ANN001, ANN201 -- one optimizer for all
    optimizer, handles = make_optimizer(model.parameters()), []
    for param in model.parameters():
        calls = [0]

        def hook(p, calls=calls):  # noqa: ANN001, ANN202
            calls[0] += 1
            if calls[0] % every == 0:
                optimizer.step()
                p.grad = None

        handles.append(param.register_post_accumulate_grad_hook(hook))
    return handles


CASES = {
    "09.1": CASES_09_1,
    "09.2": CASES_09_2,
    "09.3": Cases(
        right=[accumulate_with_dicts, accumulate_bound_by_defaults],
        wrong=[
            (accumulate_never, "freed it at every call"),
            (accumulate_shared_counter, "per parameter"),
            (accumulate_frees_each_time, "freed it at every call"),
            (accumulate_fresh_optimizer, "created once"),
            (accumulate_keeps_grads, "still hold a .grad"),
            (accumulate_late_bound, "late binding"),
            (accumulate_late_bound_param, "`param`"),
            (accumulate_one_optimizer, "hold that parameter alone"),
        ],
    ),
}
