"""Answers for the checks of notebooks/09_state_and_optimizer_hooks.ipynb."""

from __future__ import annotations

from tests.exercise_cases import Cases, answer, mutants

SPLIT = """
def split_qkv_on_load(attention):
    def hook(module, state_dict, prefix, *unused):
        for kind in ("weight", "bias"):
            key = f"{prefix}qkv.{kind}"
            if key in state_dict:
                fused = state_dict.pop(key)
                for name, part in zip(("q", "k", "v"), fused.chunk(3, dim=0)):
                    state_dict[f"{prefix}{name}.{kind}"] = part

    return attention.register_load_state_dict_pre_hook(hook)
"""
UNDO = """
import copy

def undo_bad_steps(optimizer, max_change):
    saved = {}

    def pre(opt, args, kwargs):
        saved["state"] = copy.deepcopy(opt.state_dict())
        saved["weights"] = [p.detach().clone() for group in opt.param_groups for p in group["params"]]

    def post(opt, args, kwargs):
        pairs = list(zip([p for group in opt.param_groups for p in group["params"]], saved["weights"]))
        bad = any((p.detach() - w).abs().max() > max_change for p, w in pairs)
        bad = bad or any(not torch.isfinite(p).all() for p, _ in pairs)
        if bad:
            with torch.no_grad():
                for p, w in pairs:
                    p.copy_(w)
            opt.load_state_dict(saved["state"])

    return [optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)]
"""
SAVE_WEIGHTS = '        saved["weights"] = [p.detach().clone() for group in opt.param_groups for p in group["params"]]\n'
RESTORE_STATE = '            opt.load_state_dict(saved["state"])\n'
ACCUMULATE = """
def attach_optimizer_in_backward(model, make_optimizer, every):  # dicts keyed by parameter
    optimizers = {p: make_optimizer([p]) for p in model.parameters()}
    seen = {p: 0 for p in model.parameters()}

    def hook(p):
        seen[p] += 1
        if seen[p] == every:
            seen[p] = 0
            optimizers[p].step()
            optimizers[p].zero_grad(set_to_none=True)

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]
"""
IN_LOOP = """
def attach_optimizer_in_backward(model, make_optimizer, every):  # late binding avoided with default arguments
    handles = []
    for param in model.parameters():
        def hook(p, opt=make_optimizer([param]), count=[0]):
            count[0] += 1
            if count[0] % every == 0:
                opt.step()
                p.grad = None

        handles.append(param.register_post_accumulate_grad_hook(hook))
    return handles
"""
STEP = ("        seen[p] += 1\n        if seen[p] == every:\n            seen[p] = 0\n            optimizers[p].step()\n"
        "            optimizers[p].zero_grad(set_to_none=True)")

CASES = {
    "09.1": Cases(
        right=[answer("""
                   def split_qkv_on_load(attention):  # rebuilds the dict, slices by hand, names from the module
                       def hook(module, state_dict, prefix, *unused):
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
                   """)],
        wrong=mutants(
            SPLIT,
            ("{prefix}", "", "hook's prefix"),
            ("dim=0", "dim=-1", "dim 0"),
            ('("weight", "bias")', '("weight",)', "bias"),
            ('("q", "k", "v")', '("k", "q", "v")', "q's rows first"),
            ("state_dict.pop(key)", "state_dict[key]", "is still in the checkpoint"),
            ("    return attention", "    attention", "Return the handle"),
        ),
    ),
    "09.2": Cases(
        right=[answer(UNDO),
               answer("""
                   def undo_bad_steps(optimizer, max_change):  # copies opt.state by hand, one flag for the step
                       saved = {}

                       def params(opt):
                           return [p for group in opt.param_groups for p in group["params"]]

                       def pre(opt, args, kwargs):
                           saved["weights"] = {p: p.detach().clone() for p in params(opt)}
                           saved["state"] = {p: {k: v.clone() if torch.is_tensor(v) else v for k, v in opt.state[p].items()}
                                             for p in params(opt) if p in opt.state}

                       def post(opt, args, kwargs):
                           changes = [(p.detach() - saved["weights"][p]).abs() for p in params(opt)]
                           if all(torch.isfinite(c).all() and c.max() <= max_change for c in changes):
                               return
                           with torch.no_grad():
                               for p in params(opt):
                                   p.copy_(saved["weights"][p])
                                   if p in saved["state"]:
                                       opt.state[p] = saved["state"][p]
                                   else:
                                       opt.state.pop(p, None)

                       return (optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post))
                   """)],
        wrong=mutants(
            UNDO,
            (RESTORE_STATE, "", "optimizer's state"),
            ("copy.deepcopy(opt.state_dict())", "opt.state_dict()", "which step() changes in place -- a copy of a dict"),
            ("p.detach().clone()", "p.detach()", "shares memory with a weight"),
            ("        bad = bad or any(not torch.isfinite(p).all() for p, _ in pairs)\n", "", "comparison with nan"),
            ((SAVE_WEIGHTS, "        if bad:"),  # O5's guard: looks at the gradients only, never undoes a step
             (SAVE_WEIGHTS + "        grads = [p.grad for group in opt.param_groups for p in group['params']]\n"
                             "        if not all(torch.isfinite(g).all() for g in grads if g is not None):\n"
                             "            for group in opt.param_groups:\n                for p in group['params']:\n"
                             "                    p.grad = None\n", "        if False:"), "was kept"),
            (("p.detach().clone() for", "(p.detach() - w).abs().max()", "                    p.copy_(w)"),
             ("float(p.detach().abs().max()) for", "abs(float(p.detach().abs().max()) - w)", "                    pass"),
             "no copy of some weights"),  # keeps only what tells a bad step: the largest weight, a number
            ("    return [", "    _ = [", "both handles"),
            ("(p.detach() - w).abs().max()", "(p.detach() - w).norm()", "a normal step was undone"),  # not one element
            (('        saved["state"] = copy.deepcopy(opt.state_dict())\n', RESTORE_STATE), ("", ""),
             "hold no copy of it"),  # never saves the optimizer's state
            (("copy.deepcopy(opt.state_dict())", 'opt.load_state_dict(saved["state"])'),
             ("copy.deepcopy(opt.state)", 'opt.state = saved["state"]'), "copies of them as its keys"),
        ),
    ),
    "09.3": Cases(
        right=[answer(ACCUMULATE), answer(IN_LOOP)],
        wrong=[*mutants(
                   ACCUMULATE,
                   (STEP, "        optimizers[p].step()\n        p.grad = None",
                    "freed it at call 1, before"),  # O8's hook
                   (("seen = {p: 0 for p in model.parameters()}", "seen[p]"), ("seen = [0]", "seen[0]"),
                    "per parameter"),  # one counter for all
                   ("            optimizers[p].zero_grad(set_to_none=True)", "        p.grad = None",
                    "freed it at call 1, before"),  # the sum is lost
                   ("optimizers[p].step()", "make_optimizer([p]).step()", "created once"),
                   ("if seen[p] == every:\n            seen[p] = 0", "if (seen[p] - 1) % every == 0:",
                    "freed it at call 1, before"),  # steps on calls 1, every + 1, ...: not "every call"
                   ("            optimizers[p].zero_grad(set_to_none=True)\n", "", "still hold a .grad"),
               ),
               *mutants(
                   IN_LOOP,
                   ("        def hook(p, opt=make_optimizer([param]), count=[0]):",
                    "        opt, count = make_optimizer([param]), [0]\n\n        def hook(p):", "late binding"),
                   ("                p.grad = None", "                param.grad = None", "`param`"),
                   (("    handles = []", "opt=make_optimizer([param]), ", "opt.step()"),
                    ("    handles, optimizer = [], make_optimizer(model.parameters())", "", "optimizer.step()"),
                    "hold that parameter alone"),  # one optimizer for all
               )],
    ),
}
