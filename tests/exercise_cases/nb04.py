"""Answers for the checks of notebooks/04_backward_hooks.ipynb."""

from __future__ import annotations

import torch

from tests.exercise_cases import Cases, answer, mutants

CLIP = """
def clip(module, grad_input, grad_output):
    return tuple(None if g is None else g.clamp(-1, 1) for g in grad_input)
"""
CAP = """
def cap(module, grad_output):
    g = grad_output[0]
    return (g / g.flatten(1).norm(dim=1).clamp(min=1).reshape(-1, *([1] * (g.dim() - 1))),)
"""
RECORD = """
def record_output_grads(model, names, store):
    handles = []
    try:
        for name in names:
            def watch(module, args, output, name=name):
                if output.requires_grad:
                    output.register_hook(lambda grad: store.__setitem__(name, grad))
            handles.append(model.get_submodule(name).register_forward_hook(watch))
    except Exception:
        for handle in handles:
            handle.remove()
        raise
    return handles
"""

CASES = {
    "04.1": Cases(
        right=[[[3, 5], [5, 2]], (torch.Size([3, 5]), torch.Size([5, 2])), ((3.0, 5.0), (5.0, 2.0))],
        wrong=[(((2,), (3, 5), (5, 2)), "how many inputs"), (((3, 5), (2, 5)), "orientation"),
               (((3, 5),), "full backward hook"), ("(3, 5), (5, 2)", "tuple of shapes"),
               (((3, None), (None, 2)), "whole numbers"), (((3.7, 5.2), (5.9, 2.4)), "whole numbers")],
    ),
    "04.2": Cases(
        right=[answer("""
                   def clip(module, grad_input, grad_output):
                       out = []
                       for g in grad_input:
                           out.append(g if g is None else torch.minimum(torch.maximum(g, -torch.ones_like(g)), torch.ones_like(g)))
                       return tuple(out)
                   """)],
        wrong=mutants(
            CLIP,
            ("return tuple", "_ = tuple", "unchanged"),  # computes, never returns
            ("None if g is None else ", "", "None"),
            ("clamp(-1, 1)", "clamp(0, 1)", "clamped to [-1, 1]"),
            ("g.clamp(-1, 1)", "g / g.norm().clamp(min=1)", "entry by entry"),  # rescales instead of clamping
            ("    return tuple(None if g is None else g.clamp(-1, 1) for g in grad_input)",
             "    for g in grad_input:\n        if g is not None:\n            g.clamp_(-1, 1)", "in place"),
            ("in grad_input", "in grad_output", "Which of the hook's arguments"),  # clamps the wrong one
            ("    return tuple(None if g is None else g.clamp(-1, 1) for g in grad_input)",
             "    return grad_input[0].clamp(-1, 1)", "return a tuple"),  # one tensor, not a tuple
        ),
    ),
    "04.3": Cases(
        right=[answer("""
                   def cap(module, grad_output):  # one sample at a time
                       grad = grad_output[0]
                       rows = []
                       for sample in grad:
                           norm = torch.linalg.vector_norm(sample)
                           rows.append(sample / norm if norm > 1 else sample)
                       return (torch.stack(rows),) + tuple(grad_output[1:])
                   """)],
        wrong=mutants(
            CAP,
            ("g / g.flatten(1).norm(dim=1).clamp(min=1).reshape(-1, *([1] * (g.dim() - 1)))",
             "grad_output[0].clamp(-1, 1)", "rescale"),
            (".clamp(min=1)", "", "NaN"),  # also scales small ones up (0 -> NaN)
            ("g.flatten(1).norm(dim=1).clamp(min=1).reshape(-1, *([1] * (g.dim() - 1)))", "g.norm().clamp(min=1)",
             "max(1, its L2 norm)"),  # one norm for the whole batch
            ("g.flatten(1).norm(dim=1).clamp(min=1).reshape(-1, *([1] * (g.dim() - 1)))",
             "g.norm(dim=-1, keepdim=True).clamp(min=1)", "Conv2d"),  # right for 2-D, wrong for conv outputs
            ("    return (", "    _ = (", "unchanged"),
            ("    return (g /", "    g.div_(", "in place"),  # divides grad_output itself, returns None
        ),
    ),
    "04.4": Cases(
        right=[answer("""
                   def record_output_grads(model, names, store):  # a HookRegistry is the returned handle
                       registry = HookRegistry(model)
                       try:
                           for name in names:
                               def watch(module, args, output, name=name):
                                   if torch.is_grad_enabled() and output.requires_grad:
                                       registry.tensor(output, lambda grad: store.update({name: grad.detach()}))
                               registry.forward(name, watch)
                       except BaseException:
                           registry.remove()
                           raise
                       return registry
                   """)],
        wrong=[*mutants(
                   RECORD,
                   (", name=name):", "):", "loop variable"),  # every gradient stored under the last name
                   ("store.__setitem__(name, grad)", "store.setdefault(name, grad)", "every backward"),
                   ("        for handle in handles:\n            handle.remove()\n        raise",
                    "        raise", "bad layer name"),  # a bad name leaves the hooks already attached
                   ("                if output.requires_grad:\n                    output", "                output",
                    "no_grad"),
                   ("            def watch(module, args, output, name=name):\n                if output.requires_grad:\n"
                    "                    output.register_hook(lambda grad: store.__setitem__(name, grad))\n"
                    "            handles.append(model.get_submodule(name).register_forward_hook(watch))",
                    "            handles.append(model.get_submodule(name).register_forward_hook(\n"
                    "                lambda m, a, out, name=name: out.register_hook(lambda grad: store.__setitem__(name, grad))"
                    "\n                if out.requires_grad else None))", "RemovableHandle, not a tensor"),
               ),
               (answer("""
                    def record_output_grads(model, names, store):  # breaks on the in-place ReLU after it
                        return [model.get_submodule(name).register_full_backward_hook(
                            lambda m, gi, go, name=name: store.__setitem__(name, go[0])) for name in names]
                    """), "in-place ReLU")],
    ),
}
