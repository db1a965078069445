"""Exercises of notebooks/05_guided_backprop.ipynb: a ReLU6 guide from full backward hooks, what the sanity check
shows, and a guide for functional ReLUs (``F.relu``) that module hooks cannot see.

Every check builds its own models and computes its ground truth without hooks: the same network run with a
hand-written guided activation (a ``torch.autograd.Function`` whose backward is the guided rule).

Usage: ``catalogue()["05.1"]`` (through ``course_utils.machinery.exercises``); ``check("05.1", guide_relu6)`` in a notebook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from course_utils.machinery.messages import _, N_
from course_utils.machinery.exercise_kit import Exercise, Verdict, expect_callable
from course_utils.hooks import hook_report


# -- hand-written activations for the ground truth -------------------------------------------------------------
class _GuidedReLU6(torch.autograd.Function):
    """ReLU6 whose backward is the guided rule: max(g, 0) where 0 < x < 6."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(0.0, 6.0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad.clamp(min=0) * ((x > 0) & (x < 6))


class _DeconvReLU6(torch.autograd.Function):
    """The 'deconvnet' rule on ReLU6: max(g, 0) everywhere, the forward mask forgotten (a typical mistake)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clamp(0.0, 6.0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad.clamp(min=0)


class _GuidedReLU(torch.autograd.Function):
    """ReLU whose backward is the guided rule: max(g, 0) where x > 0."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad.clamp(min=0) * (x > 0)


def _seeded(module: nn.Module, seed: int, scale: float = 0.5) -> nn.Module:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator) * scale)
    return module.eval()


def _input_gradient(model: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    inputs = x.clone().requires_grad_(True)
    logits = model(inputs)
    (gradient,) = torch.autograd.grad(logits.gather(1, targets[:, None]).sum(), inputs)
    return gradient


# -- 05.1: a ReLU6 guide from full backward hooks ----------------------------------------------------------------
class _ReLU6Net(nn.Module):
    """One ReLU6 module used twice, another inside a nested block; values above 6 occur."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 5, 3, padding=1)
        self.act = nn.ReLU6()
        self.conv2 = nn.Conv2d(5, 5, 3, padding=1)
        self.block = nn.Sequential(nn.Conv2d(5, 4, 3, padding=1), nn.ReLU6())
        self.fc = nn.Linear(4, 6)

    def forward(self, x: torch.Tensor, activation: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
        act = self.act if activation is None else activation
        last = self.block[1] if activation is None else activation
        h = act(self.conv1(x) * 4)
        h = act(self.conv2(h))
        h = last(self.block[0](h))
        return self.fc(h.mean(dim=(2, 3)))


def _relu6_test(guide_relu6: Callable[[nn.Module], Any]) -> Verdict:
    model = _seeded(_ReLU6Net(), 51)
    x = torch.randn(3, 3, 6, 6, generator=torch.Generator().manual_seed(52))
    targets = torch.tensor([4, 0, 2])
    plain = _input_gradient(model, x, targets)  # before anything is attached
    truth = _input_gradient(lambda t: model(t, _GuidedReLU6.apply), x, targets)
    deconv = _input_gradient(lambda t: model(t, _DeconvReLU6.apply), x, targets)
    handles = guide_relu6(model)
    if handles is None or not isinstance(handles, (list, tuple)):
        return Verdict(False, _("Return the list of handles (got {kind}), so the caller can remove the hooks.").format(
            kind=type(handles).__name__))
    if not all(callable(getattr(handle, "remove", None)) for handle in handles):
        return Verdict(False, _("Return the handles that register_full_backward_hook gave you (objects with .remove())."))
    got = _input_gradient(model, x, targets)
    if torch.allclose(got, plain, atol=1e-6):
        return Verdict(False, _("Nothing was guided: the gradient is the plain one. Hook every nn.ReLU6 module of the "
                                "model (model.modules() also finds the one inside the nested block)."))
    if torch.allclose(got, deconv, atol=1e-6):
        return Verdict(False, _("The forward mask is lost: grad_output is the gradient before the ReLU6's own backward. "
                                "Clamp grad_input, which already carries the mask."))
    relu6s = [module for module in model.modules() if isinstance(module, nn.ReLU6)]
    if not torch.allclose(got, truth, atol=1e-6) and not all(hook_report(module) for module in relu6s):
        return Verdict(False, _("Not the guided map: some nn.ReLU6 modules carry no hook -- the model has one inside "
                                "a nested block, which model.children() does not reach (model.modules() does)."))
    if not torch.allclose(got, truth, atol=1e-6):
        return Verdict(False, _("Not the guided map: at each ReLU6 only positive gradients may pass, where 0 < x < 6 "
                                "(check that you hooked the ReLU6 modules and nothing else)."))
    if any("forward" in vars(module) for module in relu6s):
        return Verdict(False, _("You replaced a ReLU6's forward: the exercise asks for a hook (the module's own code "
                                "stays as it is)."))
    if not all(hook_report(module) for module in relu6s):
        return Verdict(False, _("The gradient is guided, but not every nn.ReLU6 module has a hook: register one on "
                                "each (register_full_backward_hook)."))
    if not all(module._backward_hooks for module in relu6s):
        return Verdict(False, _("The gradient is guided, but not by a full backward hook on every nn.ReLU6 "
                                "({found}): the exercise asks for register_full_backward_hook, whose grad_input "
                                "already carries the ReLU6's mask.").format(
                                    found=", ".join(sorted({key for module in relu6s for key in hook_report(module)}))))
    if not all(getattr(module, "_is_full_backward_hook", None) is True for module in relu6s):
        return Verdict(False, _("The gradient is guided, but by the deprecated register_backward_hook: it sees the "
                                "last autograd node of the module, not the module's input (here they agree only "
                                "because ReLU6 is one operation), and a module that has one cannot take a full "
                                "backward hook. The exercise asks for register_full_backward_hook."))
    # each hook called on its own, on gradients it has not seen: its arguments must come back as they were
    generator = torch.Generator().manual_seed(53)
    for module in relu6s:
        for hook in list(module._backward_hooks.values()):
            grad_input, grad_output = (torch.randn(2, 4, 3, 3, generator=generator),), \
                (torch.randn(2, 4, 3, 3, generator=generator),)
            before = [grad_input[0].clone(), grad_output[0].clone()]
            hook(module, grad_input, grad_output)
            if not (torch.equal(grad_input[0], before[0]) and torch.equal(grad_output[0], before[1])):
                return Verdict(False, _("Your hook changed its argument in place (called on its own, grad_input or "
                                        "grad_output came back changed). PyTorch can hand that very tensor to other "
                                        "parts of the graph, where the change lands too: return a new grad_input "
                                        "tuple instead."))
    for handle in handles:
        handle.remove()
    if not torch.allclose(_input_gradient(model, x, targets), plain, atol=1e-6):
        return Verdict(False, _("After removing the handles you returned, the model is still guided: return every handle."))
    return Verdict(True)


_EXERCISE_05_1 = Exercise(
    "05.1",
    N_("Write guide_relu6(model): a full backward hook on every nn.ReLU6 that applies the guided rule; return the handles."),
    expect_callable(_relu6_test, N_("a function guide_relu6(model) returning a list of handles")),
    hints=(
        N_("A full backward hook receives (module, grad_input, grad_output) and may return a new grad_input tuple."),
        N_("grad_input has already been through the ReLU6's own backward (its mask 0 < x < 6): keep its positive part."),
    ),
    kind="write",
    praise=N_("grad_input already carries the ReLU6's mask, so clamping it is the whole guided rule -- and the handles "
              "give the model back its plain gradient."),
)


# -- 05.2: what the sanity check shows ------------------------------------------------------------------------------
_SANITY_FEEDBACK = {
    "a": N_("Not entirely: the random network's map ranks the pixels only partly like the trained one's (section 4). "
            "What does that partial agreement, and the class making no difference, tell you?"),
    "c": N_("A random network has learned nothing. Where else can a shared picture come from?"),
    "d": N_("The plain gradient changed the most when the weights were randomised: that is the behaviour the test "
            "asks for. Which method barely reacted to the class?"),
}


def _sanity_choice(answer: Any) -> Verdict:
    if not isinstance(answer, str) or answer.strip().lower().strip("()") not in ("a", "b", "c", "d"):
        return Verdict(False, _("Answer with one letter, e.g. answer = \"a\"; got {answer!r}.").format(answer=answer))
    letter = answer.strip().lower().strip("()")
    if letter == "b":
        return Verdict(True)
    return Verdict(False, _(_SANITY_FEEDBACK[letter]))


_EXERCISE_05_2 = Exercise(
    "05.2",
    N_("What do section 4's rank correlations (trained vs random weights, cat vs espresso) support? Answer a letter."),
    _sanity_choice,
    hints=(
        N_("Compare the three numbers: how much did each map move when the weights, or the class, changed?"),
        N_("A method that explains the model's decision must change when the decision changes."),
    ),
    kind="choice",
    praise=N_("Adebayo et al. (2018): a map that reacts little to the weights and not at all to the class shows the "
              "image through the architecture, not the model's reasons."),
)


# -- 05.3 (stretch): a guide for functional ReLUs ---------------------------------------------------------------------
class _FunctionalNet(nn.Module):
    """ReLUs as F.relu, torch.relu, an in-place F.relu and an nn.ReLU module (which calls F.relu itself); one ReLU
    follows two convolutions in a row."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.conv2 = nn.Conv2d(6, 6, 3, padding=1)
        self.mix = nn.Conv2d(6, 6, 1)  # two linear layers in a row: a guide on every output would show here
        self.conv3 = nn.Conv2d(6, 5, 3, padding=1)
        self.fc1 = nn.Linear(5, 7)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(7, 4)

    def forward(self, x: torch.Tensor, guided: bool = False) -> torch.Tensor:
        if guided:  # the ground truth: every ReLU replaced by the hand-written guided one
            h = _GuidedReLU.apply(self.conv1(x))
            h = _GuidedReLU.apply(self.mix(self.conv2(h)))
            h = _GuidedReLU.apply(self.conv3(h))
            return self.fc2(_GuidedReLU.apply(self.fc1(h.mean(dim=(2, 3)))))
        h = F.relu(self.conv1(x))
        h = torch.relu(self.mix(self.conv2(h)))
        h = F.relu(self.conv3(h), inplace=True)
        return self.fc2(self.act(self.fc1(h.mean(dim=(2, 3)))))


def _reuses_the_course_mode(mode_class: type) -> bool:
    """True when the class is, or borrows the __torch_function__ of, the mode inside guided_backprop(...,
    functional=True): the exercise asks for the learner's own."""
    from course_utils.saliency import _GuideFunctionalRelus

    return issubclass(mode_class, _GuideFunctionalRelus) or any(
        vars(klass).get("__torch_function__") is vars(_GuideFunctionalRelus)["__torch_function__"]
        for klass in mode_class.__mro__)


def _functional_test(mode_class: Any) -> Verdict:
    if not (isinstance(mode_class, type) and issubclass(mode_class, TorchFunctionMode)):
        return Verdict(False, _("Define a class that subclasses torch.overrides.TorchFunctionMode."))
    if _reuses_the_course_mode(mode_class):
        return Verdict(False, _("Your class reuses course_utils.saliency's own mode (the one guided_backprop(..., "
                                "functional=True) runs), where this exercise asks for your own: subclass "
                                "TorchFunctionMode and write __torch_function__ yourself."))
    model = _seeded(_FunctionalNet(), 53)
    x = torch.randn(3, 3, 5, 5, generator=torch.Generator().manual_seed(54))
    targets = torch.tensor([1, 3, 0])
    plain = _input_gradient(model, x, targets)
    truth = _input_gradient(lambda t: model(t, guided=True), x, targets)
    inputs = x.clone().requires_grad_(True)
    depth = torch._C._len_torch_function_stack()
    try:
        with mode_class() as mode:
            logits = model(inputs)
        if torch._C._len_torch_function_stack() != depth:
            TorchFunctionMode.__exit__(mode, None, None, None)  # take it off for the learner
            return Verdict(False, _("Your mode is still active after the with block: if your class overrides "
                                    "__exit__, call super().__exit__(...) in it (that is what takes the mode off)."))
    except TypeError as error:
        if "must be a mapping" in str(error):
            return Verdict(False, _("The model failed inside your mode ({error}): PyTorch calls __torch_function__ "
                                    "with kwargs=None when a call has no keyword arguments, and `**None` fails. "
                                    "Look at how you pass kwargs on to func.").format(error=error))
        return Verdict(False, _("The model failed inside your mode ({error}). __torch_function__ must return what "
                                "func(*args, **kwargs) returned.").format(error=error))
    if not isinstance(logits, torch.Tensor) or logits.shape != (3, 4):
        return Verdict(False, _("The model's output changed inside your mode: return func's result unchanged."))
    with torch.no_grad():
        expected_logits = model(x)
    if not torch.allclose(logits.detach(), expected_logits, atol=1e-6):
        return Verdict(False, _("The forward values changed inside your mode: only the gradients may be guided."))
    (got,) = torch.autograd.grad(logits.gather(1, targets[:, None]).sum(), inputs)
    if torch.allclose(got, plain, atol=1e-6):
        return Verdict(False, _("Nothing was guided: register the guide on the output of each F.relu / torch.relu call."))
    if not torch.allclose(got, truth, atol=1e-6):
        return Verdict(False, _("Not the guided map. Guide only ReLU outputs (F.relu and torch.relu -- an nn.ReLU module "
                                "calls F.relu itself), with a tensor hook that keeps the positive gradient."))
    try:
        with mode_class(), torch.no_grad():
            model(x)
    except RuntimeError as error:
        return Verdict(False, _("Under torch.no_grad() your mode fails ({error}). Outputs that do not require grad "
                                "cannot take a tensor hook: skip them.").format(error=error))
    if not torch.allclose(_input_gradient(model, x, targets), plain, atol=1e-6):
        return Verdict(False, _("Outside the with block the model must give its plain gradient again."))
    return Verdict(True)


_EXERCISE_05_3 = Exercise(
    "05.3",
    N_("Write a TorchFunctionMode that guides the output of every F.relu / torch.relu call made while it is active."),
    expect_callable(_functional_test, N_("a class (a TorchFunctionMode subclass)")),
    hints=(
        N_("__torch_function__ sees every torch function call: run func, look at which function it was, return the result."),
        N_("On a result of F.relu or torch.relu that requires grad, register a tensor hook with the guided rule."),
    ),
    kind="write",
    stretch=True,
    praise=N_("A function mode sees the calls module hooks cannot: this is how guided_backprop(..., functional=True) works."),
)

EXERCISES = (_EXERCISE_05_1, _EXERCISE_05_2, _EXERCISE_05_3)
