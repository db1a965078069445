"""Answers for the checks of notebooks/07_hooks_in_training.ipynb."""

from __future__ import annotations

from course_utils.regularize import clip_grad_value_hooks, dropout2d
from tests.exercise_cases import Cases, answer, mutants

DROPOUT = """
def attach_dropout2d(model, layer_name, p):
    def hook(module, args):
        if module.training:
            return (F.dropout2d(args[0], p=p, training=True),)

    return model.get_submodule(layer_name).register_forward_pre_hook(hook)
"""
DROP = "            return (F.dropout2d(args[0], p=p, training=True),)"
NORM = """
def clip_norm_per_parameter(model, max_norm):
    def hook(param):
        norm = param.grad.norm()
        if norm > max_norm:
            param.grad.mul_(max_norm / norm)

    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]
"""
COUNTER = """
class DeadUnitCounter:  # a HookRegistry owns the hooks; per ReLU it keeps the units never seen non-zero
    def __init__(self, model):
        self.model, self.fractions, self.silent = model, {}, {}

    def _hook(self, name):
        def hook(module, args, out):
            silent_here = ~(out != 0).any(dim=0)
            self.silent[name] = silent_here & self.silent.get(name, silent_here)
            self.fractions[name] = self.silent[name].double().mean().item()
        return hook

    def __enter__(self):
        self.registry = HookRegistry(self.model).__enter__()
        for name, module in self.model.named_modules():
            if isinstance(module, nn.ReLU):
                self.registry.forward(module, self._hook(name))
        return self

    def __exit__(self, *exc):
        self.registry.__exit__(*exc)
"""
UPDATE = ("            silent_here = ~(out != 0).any(dim=0)\n"
          "            self.silent[name] = silent_here & self.silent.get(name, silent_here)\n"
          "            self.fractions[name] = self.silent[name].double().mean().item()")

CASES = {
    "07.1": Cases(
        right=[answer("""
                   def attach_dropout2d(model, layer_name, p):  # nn.Dropout2d, returns a bare tensor
                       drop = nn.Dropout2d(p)
                       layer = dict(model.named_modules())[layer_name]

                       def hook(module, args):
                           return drop(args[0]) if module.training else args  # a bare tensor or the tuple: both replace

                       return layer.register_forward_pre_hook(hook)
                   """),
               answer("""
                   def attach_dropout2d(model, layer_name, p):  # the with_kwargs form of the pre-hook
                       def hook(module, args, kwargs):
                           if not module.training:
                               return None
                           return (F.dropout2d(args[0], p, True),) + tuple(args[1:]), kwargs

                       return model.get_submodule(layer_name).register_forward_pre_hook(hook, with_kwargs=True)
                   """)],
        wrong=[(lambda model, name, p: dropout2d(model, name, p), "forward pre-hook"),  # the course's: on the output
               *mutants(
                   DROPOUT,
                   ("register_forward_pre_hook(hook)", "register_forward_hook(\n"
                    "        lambda m, a, out: F.dropout2d(out, p=p, training=True) if m.training else None)",
                    "forward pre-hook"),  # notebook 07's forward hook, copied
                   ("model.get_submodule(layer_name)", "model[int(layer_name) - 1]", "on layer '2' only"),
                   (DROP, "            F.dropout2d(args[0], p=p, training=True, inplace=True)", "change nothing in place"),
                   ("if module.training:", "if True:", "eval mode"),
                   ("p=p", "p=0.5", "with the p the caller passed"),
                   ("    return model", "    model", "Return the handle"),
                   (DROP, "            F.dropout2d(args[0], p=p, training=True)", "return the new input"),
                   ("model.get_submodule(layer_name)", "model[0]", "on layer '2' only"),
               )],
    ),
    "07.2": Cases(
        right=[answer("""
                   def clip_norm_per_parameter(model, max_norm):  # torch's own function inside the hook
                       def hook(param):
                           torch.nn.utils.clip_grad_norm_([param], max_norm)  # returns the norm: the hook returns None

                       return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]
                   """)],
        wrong=[(lambda model, max_norm: [clip_grad_value_hooks(model, max_norm)], "instead of clamping entries"),
               (lambda model, max_norm: [], "unchanged"),
               *mutants(
                   NORM,
                   ("        if norm > max_norm:\n            param", "        param", "scale only when the norm is above"),
                   ("register_post_accumulate_grad_hook(hook)", "register_post_accumulate_grad_hook(lambda q: q.grad.mul_(0.5))",
                    "returned a value"),  # a post-accumulate hook must return None
                   ("register_post_accumulate_grad_hook(hook)",
                    "register_post_accumulate_grad_hook(lambda q: torch.nn.utils.clip_grad_norm_([q], max_norm))",
                    "returned a value"),  # the lambda returns clip_grad_norm_'s norm
                   ("    return [p.register_post_accumulate_grad_hook(hook) for p in model.parameters()]",
                    "    handles = []\n    for p in model.parameters():\n"
                    "        handles.append(p.register_post_accumulate_grad_hook(lambda _: hook(p)))\n    return handles",
                    "loop variable"),  # every lambda clips the loop's last parameter
               )],
    ),
    "07.3": Cases(
        right=[answer(COUNTER),
               answer(COUNTER.replace(UPDATE, "            active = (out > 0).sum(dim=0)\n"  # counts active samples
                                              "            self.silent[name] = active + self.silent.get(name, "
                                              "torch.zeros_like(active))\n            self.fractions[name] = "
                                              "(self.silent[name] == 0).sum().item() / self.silent[name].numel()"))],
        wrong=mutants(
            COUNTER,
            (UPDATE, "            self.fractions[name] = (out == 0).all(dim=0).float().mean().item()",
             "only the last batch"),  # the section's monitor copied: earlier batches forgotten
            (UPDATE, "            self.silent.setdefault(name, []).append((out == 0).all(dim=0).float().mean().item())\n"
                     "            self.fractions[name] = sum(self.silent[name]) / len(self.silent[name])",
             "average over batches"),
            ("silent_here & self.silent", "silent_here | self.silent", "it is dead only if every batch did"),
            (("self.registry.forward(module, self._hook(name))", "        self.registry.__exit__(*exc)"),
             ("module.register_forward_hook(self._hook(name))", "        return False"), "remove them in __exit__"),
            ("~(out != 0).any(dim=0)", "(args[0] == 0).all(dim=0)", "output"),  # wrong for a ReLU not in-place
            ("        self.registry.__exit__(*exc)", "        self.registry.__exit__(*exc)\n        return True",
             "must not swallow"),
            ("        return self\n", "", "returned None"),
        ),
    ),
}
