"""Exercises of notebooks/01_tensor_hooks.ipynb: a hook that changes a gradient, a hook that keeps one, and a
gradient reversal made from a tensor hook -- each run on graphs the learner has not seen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable
from course_utils.machinery.messages import N_, _
from course_utils.hooks import count_hooks


# -- 01.1 clamp_hook -------------------------------------------------------------------------------------
def _clamp_test(hook: Callable[[torch.Tensor], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(1)
    # 1. called on its own: the argument must be left as it was (a hook should not modify its argument)
    probe = torch.randn(3, 5, generator=generator) * 3
    original = probe.clone()
    hook(probe)
    if not torch.equal(probe, original):
        return Verdict(False, _("Your hook changed `grad` in place. That is unsupported (section 5): return a new "
                                "tensor instead."))
    # 2. on a batch graph whose intermediate gradient has entries inside and outside [-1, 1]
    x = torch.randn(3, 5, generator=generator, requires_grad=True)
    upstream = torch.randn(3, 5, generator=generator) * 3
    upstream[0, :4] = torch.tensor([-1.0, 1.0, 0.25, -0.5])  # on and inside the bounds: must pass unchanged
    z = x * 1.5
    z.register_hook(hook)  # z dies with this function: nothing to remove
    (z * upstream).sum().backward()
    expected = 1.5 * upstream.clamp(-1.0, 1.0)  # by hand: dz = upstream, clamped, times dz/dx = 1.5
    if torch.allclose(x.grad, 1.5 * upstream):
        return Verdict(False, _("The gradient reached x unchanged: does your hook return the clamped tensor (not only compute it)?"))
    if torch.allclose(x.grad, expected):
        return Verdict(True)
    inside = upstream.abs() <= 1.0
    if not torch.allclose(x.grad[inside], expected[inside]):
        return Verdict(False, _("Values already inside [-1, 1] must pass unchanged; yours were altered."))
    return Verdict(False, _("Values outside [-1, 1] must become -1 (below) or 1 (above), keeping their sign."))


_EXERCISE_01_1 = Exercise(
    "01.1",
    N_("Write a tensor hook clamp_hook(grad) that limits the gradient to [-1, 1]."),
    expect_callable(_clamp_test, N_("a hook function clamp_hook(grad)")),
    hints=(
        N_("A tensor hook that returns a tensor replaces the gradient; one that returns None changes nothing."),
        N_("torch has an elementwise function that limits values to a range and returns a new tensor."),
    ),
    kind="write",
    praise=N_("Returning a new tensor is the supported way to change a gradient, on every graph."),
)


# -- 01.2 watch_grad -------------------------------------------------------------------------------------
def _watch_test(watch: Callable[[torch.Tensor, dict, str], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(4, 3, generator=generator, requires_grad=True)
    a = torch.randn(4, 3, generator=generator)
    b = torch.randn(4, 3, generator=generator)

    def forward(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.tanh(x)  # the intermediate, used twice: its gradient is the sum of two paths
        return h, (h * a).sum() + (h ** 2 * b).sum()

    # ground truth without hooks: plain autograd on a twin graph
    h0, loss0 = forward(x)
    dh_true, dx_true = torch.autograd.grad(loss0, (h0, x))

    store: dict = {}
    h, loss = forward(x)
    handle = watch(h, store, "tanh")
    if not callable(getattr(handle, "remove", None)):
        return Verdict(False, _("watch_grad returned {type}: return the handle register_hook gave you.").format(
            type=type(handle).__name__))
    if count_hooks(h) != 1:
        handle.remove()
        return Verdict(False, _("Expected one hook on the tensor, found {count}.").format(count=count_hooks(h)))
    if store:
        handle.remove()
        return Verdict(False, _("store was filled before backward(): save the gradient inside the hook."))
    loss.backward(retain_graph=True)
    kept = store.get("tanh")
    if kept is None:
        handle.remove()
        if store:
            return Verdict(False, _("Nothing under the name you were given ('tanh'); store has {keys}.").format(
                keys=sorted(store)))
        return Verdict(False, _("store is empty (or holds None) after backward: the hook must put the gradient "
                                "it receives into store[name]."))
    if not torch.allclose(x.grad, dx_true):
        handle.remove()
        return Verdict(False, _("The gradient that reached x changed: a hook that only keeps must return None."))
    if not isinstance(kept, torch.Tensor) or kept.shape != dh_true.shape:
        handle.remove()
        return Verdict(False, _("store[name] should be the whole gradient (shape {expected}), "
                                "got {type} {shape}.").format(expected=tuple(dh_true.shape), type=type(kept).__name__,
                                                              shape=tuple(getattr(kept, 'shape', ()))))
    if not torch.allclose(kept, dh_true):
        handle.remove()
        return Verdict(False, _("store[name] is not the gradient that reached the tensor."))
    # a second backward, from another loss on the same graph: the store holds its gradient, x.grad is untouched
    c = torch.randn(4, 3, generator=generator)
    x.grad = None
    (h * c).sum().backward(retain_graph=True)
    if not torch.allclose(x.grad, (1 - h.detach() ** 2) * c, atol=1e-6):  # d tanh = 1 - tanh², by hand
        handle.remove()
        return Verdict(False, _("On a second backward (another loss) the gradient that reached x changed: your hook "
                                "returned a tensor, which replaces the gradient -- a lambda returns the value of its "
                                "expression. A hook that only keeps returns None."))
    if not isinstance(store.get("tanh"), torch.Tensor) or not torch.allclose(store["tanh"], c):
        handle.remove()
        return Verdict(False, _("After a second backward (another loss) store[name] does not hold that backward's "
                                "gradient: keep the gradient of every backward, the latest replacing the earlier."))
    handle.remove()
    if count_hooks(h):
        return Verdict(False, _("handle.remove() left a hook on the tensor: return the handle of the hook you "
                                "registered."))
    store.clear()
    x.grad = None
    loss.backward()
    if store:
        return Verdict(False, _("After handle.remove() the hook still stored a gradient."))
    return Verdict(True)


_EXERCISE_01_2 = Exercise(
    "01.2",
    N_("Write watch_grad(tensor, store, name): a hook that keeps the gradient reaching tensor in store[name], "
       "unchanged; return the handle."),
    expect_callable(_watch_test, N_("a function watch_grad(tensor, store, name)")),
    hints=(
        N_("This is what retain_grad() does, written as a tensor hook: the hook receives the gradient as its "
           "argument."),
        N_("Define the hook inside watch_grad (so it sees store and name), let it assign into the dict and return "
           "None, and return what tensor.register_hook gave you."),
    ),
    kind="write",
    praise=N_("A retain_grad you control: it keeps what you choose, under the name you choose, until you remove it."),
)


# -- 01.3 (stretch) reverse_grad --------------------------------------------------------------------------
def _reversal_test(reverse: Callable[[torch.Tensor, float], Any]) -> Verdict:
    generator = torch.Generator().manual_seed(3)
    # x used directly and through the reversal; in the last case through `y + x`, whose backward hands the very same
    # gradient tensor to both paths: a hook that changes it in place would flip the direct path's gradient too
    for lam, intermediate, shared in ((0.5, False, False), (2.0, True, False), (1.5, True, True)):
        leaf = torch.randn(5, 3, generator=generator, requires_grad=True)
        x = leaf * 1.0 if intermediate else leaf
        a = torch.randn(5, 3, generator=generator)
        b = torch.randn(5, 3, generator=generator)
        y = reverse(x, lam)
        if not isinstance(y, torch.Tensor):
            return Verdict(False, _("reverse_grad returned {type}: return a tensor.").format(type=type(y).__name__))
        if y is x:
            return Verdict(False, _("reverse_grad returned x itself: return a new tensor (with the same values), so "
                                    "the hook acts only on the gradient that flows through it."))
        if y.shape != x.shape or not torch.equal(y.detach(), x.detach()):
            return Verdict(False, _("The values changed: in the forward pass the result must equal x."))
        if not y.requires_grad:
            return Verdict(False, _("The result does not require grad (detached?): no gradient can flow back "
                                    "through it."))
        if count_hooks(x):
            return Verdict(False, _("You put the hook on x itself: it would also flip the gradient of every other "
                                    "use of x. Hook the new tensor."))
        if shared:  # x is used twice, through one sum: ((x + y) * b), the same gradient b for both uses
            a = b
            ((x + y) * b).sum().backward()
        else:  # x is used twice: directly (weights a) and through the reversal (weights b)
            ((x * a).sum() + (y * b).sum()).backward()
        expected = a - lam * b  # by hand
        if torch.allclose(leaf.grad, a + lam * b):
            return Verdict(False, _("The gradient through your tensor is multiplied by lam: reverse its sign "
                                    "(-lam)."))
        if torch.allclose(leaf.grad, a + b):
            return Verdict(False, _("The gradient through your tensor arrives unchanged: register a hook that "
                                    "returns the new gradient."))
        if shared and not torch.allclose(leaf.grad, expected, atol=1e-6):
            return Verdict(False, _("In `(x + y) * b` the sum hands the very same gradient tensor to x and to your "
                                    "tensor, and the gradient that reached x directly changed too: does your hook "
                                    "change `grad` in place? Compute a new tensor and return it."))
        if torch.allclose(leaf.grad, -lam * (a + b)):
            return Verdict(False, _("Every gradient reaching x was flipped, also the one that does not pass "
                                    "through your tensor: hook the new tensor, not x."))
        if not torch.allclose(leaf.grad, expected, atol=1e-6):
            return Verdict(False, _("With lam = {lam}, the gradient through your tensor should be -lam times what "
                                    "arrives; x.grad does not match that.").format(lam=lam))
    return Verdict(True)


_EXERCISE_01_3 = Exercise(
    "01.3",
    N_("Write reverse_grad(x, lam): a tensor equal to x whose gradient, on the way back, is multiplied by -lam "
       "(other uses of x unaffected)."),
    expect_callable(_reversal_test, N_("a function reverse_grad(x, lam)")),
    hints=(
        N_("A hook on x itself would change every gradient that reaches x, not only the one that passes through "
           "your result."),
        N_("Make a new tensor from x with an operation that keeps the values (and the graph), hook that one, and "
           "return it."),
    ),
    kind="write",
    stretch=True,
    praise=N_("That is the gradient reversal layer of domain-adversarial training (Ganin & Lempitsky, 2015): "
              "identity forward, -lam backward."),
)

EXERCISES = (_EXERCISE_01_1, _EXERCISE_01_2, _EXERCISE_01_3)
