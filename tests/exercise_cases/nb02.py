"""Answers for the checks of notebooks/02_hook_lifecycle.ipynb."""

from __future__ import annotations

import torch

from tests.exercise_cases import Cases, answer, mutants

MEASURE = """
def measure(w, x):  # the code the exercise gives: the hook leaks
    received = []
    handle = w.register_hook(lambda grad: received.append(grad))
    loss = (w * x).sum() ** 2
    loss.backward()
    return received[0]
"""
ONCE = """
def on_next_backward(tensor, fn):
    box = []

    def hook(grad):
        box[0].remove()
        fn(grad)

    box.append(tensor.register_hook(hook))
    return box[0]
"""
FLAG = "        box[0].remove()\n        fn(grad)"

CASES = {
    "02.1": Cases(
        right=[answer("""
                   def measure(w, x):
                       received = []
                       handle = w.register_hook(received.append)
                       try:
                           ((w * x).sum() ** 2).backward()
                       finally:
                           handle.remove()
                       return received[0]
                   """),
               lambda w, x: torch.autograd.grad((w * x).sum() ** 2, w)[0]],  # also right: no hook needed
        wrong=[*mutants(
                   MEASURE,
                   ("    handle = w", "    w", "still registered"),
                   ("    loss.backward()\n", "    loss.backward()\n    handle.remove()\n", "When the forward raises"),
               ),
               (answer("""
                    def measure(w, x):  # no leak, but the error disappears
                        received = []
                        with w.register_hook(lambda grad: received.append(grad)):
                            try:
                                ((w * x).sum() ** 2).backward()
                            except RuntimeError:
                                return None
                        return received[0]
                    """), "propagate"),
               (answer("""
                    def measure(w, x):  # .grad also holds earlier backward passes
                        with w.register_hook(lambda grad: None):
                            ((w * x).sum() ** 2).backward()
                        return w.grad
                    """), "already holds a gradient"),
               (lambda w, x: torch.autograd.grad((w * x).sum() ** 2, w)[0].long(), "a float tensor")],  # wrong type
    ),
    "02.2": Cases(
        right=[(11, 22), torch.tensor([11.0, 22.0])],
        wrong=[([11.0, 33.0], "only the new contribution"), ([10.0, 20.0], "first number is off"), (22, "two numbers"),
               ("11, 22", "Answer with a list of two numbers"),  # a string, not the kit's type error
               (None, "Answer with a list of two numbers")],  # not 'is that .grad still empty?'
    ),
    "02.3": Cases(
        right=[answer(ONCE),
               answer("""
                   class Once:  # a different design: a callable object that holds its handle
                       def __init__(self, tensor, fn):
                           self.fn = fn
                           self.handle = tensor.register_hook(self)

                       def __call__(self, grad):
                           self.handle.remove()
                           self.fn(grad)

                   def on_next_backward(tensor, fn):
                       return Once(tensor, fn).handle
                   """)],
        wrong=mutants(
            ONCE,
            ("        box[0].remove()\n", "", "remove itself"),
            ("    box.append(tensor.register_hook(hook))", "    box.append(tensor.register_hook(hook))\n    box[0].remove()",
             "expected one hook"),
            (FLAG, "        if box[1:]:\n            return grad * 0\n        box.append(True)\n        fn(grad)\n"
                   "        return grad * 0", "must return None"),  # a flag instead of removal, and returns grad * 0
            (FLAG, "        if not box[1:]:\n            box.append(True)\n            fn(grad)", "still registered"),
            ("        fn(grad)", "        return fn(grad)", "whatever fn returns"),
            (FLAG, "        fn(grad)\n        tensor._backward_hooks.clear()", "another hook"),  # others' hooks too
        ),
    ),
}
