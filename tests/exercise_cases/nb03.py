"""Answers for the checks of notebooks/03_forward_hooks.ipynb."""

from __future__ import annotations

from tests.exercise_cases import Cases, answer, mutants

STANDARDISE = """
def standardise(module, args):
    x = args[0]
    return ((x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True, unbiased=False),) + args[1:]
"""
EXTRACT = """
def extract(model, x, names):
    found, handles = {}, []
    try:
        for name in names:
            handles.append(model.get_submodule(name).register_forward_hook(
                lambda m, a, out, name=name: found.__setitem__(name, out.detach().clone())))
        model(x)
    finally:
        for handle in handles:
            handle.remove()
    return found
"""
TRACER = """
class CallTracer:
    def __init__(self, model):
        self.model, self.calls, self.handles = model, [], []

    def __enter__(self):
        for name, module in self.model.named_modules():
            if not list(module.children()):
                self.handles.append(module.register_forward_hook(
                    lambda m, a, out, name=name: self.calls.append((name, None if out is None else tuple(out.shape))),
                    always_call=True))
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()
"""
ENTRY = "self.calls.append((name, None if out is None else tuple(out.shape)))"

CASES = {
    "03.1": Cases(
        right=[answer("""
                   def standardise(module, args):  # F.layer_norm without affine, eps 0
                       first, *rest = args
                       return (torch.nn.functional.layer_norm(first, first.shape[1:], eps=0.0), *rest)
                   """),
               answer("""
                   def standardise(module, args):
                       var, mean = torch.var_mean(args[0], dim=1, keepdim=True, correction=0)
                       return ((args[0] - mean) * var.rsqrt(),) + tuple(args[1:])
                   """)],
        wrong=mutants(
            STANDARDISE,
            ("    return ((x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True, unbiased=False),) + args[1:]",
             "    x.sub_(x.mean(dim=1, keepdim=True)).div_(x.std(dim=1, keepdim=True, unbiased=False))", "in place"),
            ("x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True,", "x.mean(dim=0)) / x.std(dim=0,", "each sample"),
            (", unbiased=False", "", "unbiased=False"),
            ("    return (", "    _ = (", "raw input"),
            ("    return ((x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True, unbiased=False),) + args[1:]",
             "    return (x - x.mean(dim=1, keepdim=True)) / x.std(dim=1, keepdim=True, unbiased=False)",
             "second positional input"),  # a bare tensor: wrapped as (x,)
            ("x = args[0]", "x = args[0].data", "gradient does not flow"),
        ),
    ),
    "03.2": Cases(
        right=[answer("""
                   def extract(model, x, names):  # HookRegistry owns the hooks; copy via torch.clone
                       found = {}
                       with HookRegistry(model) as hooks:
                           for name in names:
                               hooks.forward(name, lambda m, a, out, name=name: found.__setitem__(name, torch.clone(out).detach()))
                           model(x)
                       return found
                   """),
               answer("""
                   def extract(model, x, names):  # copies via empty_like + copy_ under no_grad
                       found, handles = {}, []
                       modules = dict(model.named_modules())

                       def keep(name):
                           def hook(module, args, output):
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
                   """)],
        wrong=[*mutants(
                   EXTRACT,
                   ("out.detach().clone()", "out.detach()", "rectified"),  # detach() shares memory
                   ("lambda m, a, out, name=name:", "lambda m, a, out:", "loop variable"),
                   ("        model(x)\n", "        try:\n            model(x)\n        except Exception:\n            pass\n",
                    "propagate"),
                   ("out.detach().clone()", "out.clone()", "detached"),
                   ("        for handle in handles:\n            handle.remove()", "        pass", "still on the model"),
                   ("model.get_submodule(name)", "getattr(model, name)", "dotted name"),
               ),
               (answer("""
                    def extract(model, x, names):  # right values, but the hooks stay when forward raises
                        found = {}
                        handles = [model.get_submodule(name).register_forward_hook(
                            lambda m, a, out, name=name: found.__setitem__(name, out.detach().clone())) for name in names]
                        model(x)
                        for handle in handles:
                            handle.remove()
                        return found
                    """), "finally"),
               (answer("""
                    def extract(model, x, names):  # no hook of its own
                        from course_utils.recorder import ActivationRecorder

                        with ActivationRecorder(model, list(names)) as recorder:
                            model(x)
                        return {name: recorder.outputs[name] for name in names}
                    """), "course's own")],
    ),
    "03.3": Cases(
        right=[answer("""
                   class CallTracer:  # a HookRegistry, leaves by their empty _modules, pairs as lists, torch.Size shapes
                       def __init__(self, model):
                           self.model, self.calls = model, []

                       def __enter__(self):
                           self.registry = HookRegistry(self.model)
                           leaves = [name for name, module in self.model.named_modules() if len(module._modules) == 0]
                           for name in leaves:
                               self.registry.forward(name, lambda m, a, out, name=name: self.calls.append(
                                   [name, None if out is None else out.shape]), always_call=True)
                           return self

                       def __exit__(self, *exc):
                           self.registry.remove()
                   """)],
        wrong=mutants(
            TRACER,
            (",\n                    always_call=True", "", "registration option"),
            ("            handle.remove()", "            handle.remove()\n        return True", "swallow"),
            (ENTRY, "self.__dict__.setdefault('seen', {}).update({name: None if out is None else tuple(out.shape)}) "
                    "or setattr(self, 'calls', list(self.seen.items()))", "twice"),  # one entry per module name
            ("            handle.remove()", "            pass", "hook(s) are still on the model"),
            ("        return self\n", "", "__enter__ returns"),
            ("            if not list(module.children()):\n                self", "            if True:\n                self",
             "a module with children"),
            ("tuple(out.shape)", "list(out.shape)", "each shape a tuple"),
            ("self.model, self.calls, self.handles = model, [], []",
             "self.model, self.calls, self.handles = model, [('act', 6)], []", "each shape a tuple"),  # an int shape
            (ENTRY, f"((name, None if out is None else tuple(out.shape)) in self.calls or {ENTRY}) and None",
             "also when it equals an entry"),  # skips an entry equal to one already recorded
        ),
    ),
}
