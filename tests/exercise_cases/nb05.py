"""Answers for the checks of notebooks/05_guided_backprop.ipynb."""

from __future__ import annotations

from torch.overrides import TorchFunctionMode

from course_utils.saliency import _GuideFunctionalRelus
from tests.exercise_cases import Cases, answer, mutants

GUIDE = """
def guide_relu6(model):
    return [m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))
            for m in model.modules() if isinstance(m, nn.ReLU6)]
"""
MODE = """
class GuideFunctionalRelus(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func in (F.relu, torch.relu) and result.requires_grad:
            result.register_hook(lambda grad: grad.clamp(min=0))
        return result
"""
MODES = {"TorchFunctionMode": TorchFunctionMode, "Course": _GuideFunctionalRelus}

CASES = {
    "05.1": Cases(
        right=[answer("""
                   def guide_relu6(model):  # a tuple of one registry is fine too
                       registry = HookRegistry(model)
                       for module in model.modules():
                           if isinstance(module, nn.ReLU6):
                               registry.full_backward(module, lambda m, grad_in, grad_out: tuple(F.relu(g) for g in grad_in))
                       return (registry,)
                   """)],
        wrong=[*mutants(
                   GUIDE,
                   ("(gi[0].clamp(min=0),)", "(go[0].clamp(min=0),)", "forward mask is lost"),
                   ("nn.ReLU6)]", "nn.ReLU)]", "Nothing was guided"),  # finds nothing here
                   ("model.modules()", "model.children()", "nested block"),
                   ("    return [", "    _ = [", "Return the list of handles"),
                   ("    return [m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))\n"
                    "            for m in model.modules() if isinstance(m, nn.ReLU6)]",
                    "    handle = None\n    for m in model.modules():\n        if isinstance(m, nn.ReLU6):\n"
                    "            handle = m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))\n"
                    "    return [handle]", "return every handle"),  # overwrites the handle in the loop
                   ("    return [m.register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))",
                    "    def guide(mod, gi, go):\n        for grad in gi:\n            if grad is not None:\n"
                    "                grad.clamp_(min=0)\n\n    return [m.register_full_backward_hook(guide)", "in place"),
                   ("register_full_backward_hook(lambda mod, gi, go: (gi[0].clamp(min=0),))",
                    "register_forward_hook(lambda mod, a, out: out.register_hook(lambda grad: grad.clamp(min=0)) and None)",
                    "full backward hook"),  # another hook kind, same behaviour
                   ("register_full_backward_hook", "register_backward_hook", "deprecated register_backward_hook"),
               ),
               (answer("""
                    class GuidedReLU6(torch.autograd.Function):
                        @staticmethod
                        def forward(ctx, x):
                            ctx.save_for_backward(x)
                            return x.clamp(0, 6)

                        @staticmethod
                        def backward(ctx, grad):
                            (x,) = ctx.saved_tensors
                            return grad.clamp(min=0) * ((x > 0) & (x < 6))

                    def guide_relu6(model):  # the right gradient, but no hook at all
                        for module in model.modules():
                            if isinstance(module, nn.ReLU6):
                                module.forward = GuidedReLU6.apply
                        return []
                    """), "You replaced a ReLU6's forward")],
    ),
    "05.2": Cases(
        right=["b", "(b)", " B "],
        wrong=[("a", "only partly"), ("c", "learned nothing"), ("d", "plain gradient changed the most"),
               ("the map mostly shows the image", "one letter")],
    ),
    "05.3": Cases(
        right=[answer("""
                   class GuideByName(TorchFunctionMode):  # matches the function by name, guides with torch.maximum
                       def __torch_function__(self, func, types, args=(), kwargs=None):
                           result = func(*args, **dict(kwargs or {}))
                           if getattr(func, "__name__", "") == "relu" and getattr(result, "requires_grad", False):
                               result.register_hook(lambda grad: torch.maximum(grad, torch.zeros_like(grad)))
                           return result
                   """, **MODES)],
        wrong=[*mutants(
                   MODE,
                   ("if func in (F.relu, torch.relu) and result.requires_grad:",  # convolutions and linears too
                    "if isinstance(result, torch.Tensor) and result.requires_grad:", "Not the guided map"),
                   (" and result.requires_grad:", ":", "torch.no_grad()"),
                   ("        return result\n", "", "return what"),
                   ("(F.relu, torch.relu)", "(F.relu,)", "Not the guided map"),  # torch.relu missed
                   ("        return result\n", "        return result\n\n    def __exit__(self, *exc):\n        return None\n",
                    "super().__exit__"),  # the mode stays on the stack (the check takes it off)
                   ("**(kwargs or {})", "**kwargs", "kwargs=None"),
                   **MODES),
               (answer("def guide(model):\n    return model"), "TorchFunctionMode"),
               (answer("""
                    class GuideThroughTheCourseMode(Course):  # reuses the mode of guided_backprop(..., functional=True)
                        def __init__(self):
                            super().__init__(HookRegistry(), [0])
                    """, **MODES), "asks for your own"),
               (answer("""
                    class BorrowsTheCourseFunction(TorchFunctionMode):  # and fills in the attributes it uses
                        __torch_function__ = Course.__torch_function__

                        def __init__(self):
                            super().__init__()
                            self.hooks, self.counter = HookRegistry(), [0]
                    """, **MODES), "asks for your own")],
    ),
}
