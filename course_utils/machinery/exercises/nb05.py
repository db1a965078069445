"""Exercises of notebooks/05_guided_backprop.ipynb: a ReLU6 guide, the sanity check, a functional-ReLU guide.

The ground truth: the same network with a hand-written guided activation (:func:`_guided`), no hooks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from course_utils._torch_internals import function_modes
from course_utils.machinery.exercise_kit import *


class _Guided(torch.autograd.Function):
    """``x.clamp(0, upper)`` whose backward is the guided rule, max(g, 0) where 0 < x < upper; ``mask=False``: the
    'deconvnet' rule, max(g, 0) everywhere (the forward mask forgotten, a typical mistake)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, upper: float, mask: bool) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.rule = (upper, mask)
        return x.clamp(0.0, upper)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (x,), (upper, mask) = ctx.saved_tensors, ctx.rule
        return grad.clamp(min=0) * (((x > 0) & (x < upper)) if mask else 1), None, None


def _guided(x: torch.Tensor, upper: float = float("inf"), mask: bool = True) -> torch.Tensor:
    return _Guided.apply(x, upper, mask)


def _input_gradient(model: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, targets: torch.Tensor
                    ) -> torch.Tensor:
    inputs = x.clone().requires_grad_(True)
    return torch.autograd.grad(model(inputs).gather(1, targets[:, None]).sum(), inputs)[0]


def _relu6_net() -> nn.Module:
    """One ReLU6 module used twice, another inside a nested block; values above 6 occur. ``model(x, activation)``
    runs ``activation`` where the ReLU6 modules run."""

    def forward(m: nn.Module, x: torch.Tensor, activation: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
        act, last = (m.act, m.block[1]) if activation is None else (activation, activation)
        return m.fc(last(m.block[0](act(m.conv2(act(m.conv1(x) * 4))))).mean(dim=(2, 3)))

    return seeded(Net(forward, conv1=nn.Conv2d(3, 5, 3, padding=1), act=nn.ReLU6(), conv2=nn.Conv2d(5, 5, 3, padding=1),
                      block=nn.Sequential(nn.Conv2d(5, 4, 3, padding=1), nn.ReLU6()), fc=nn.Linear(4, 6)), 51)


@exercise("05.1")
def _relu6_test(guide_relu6: Callable[[nn.Module], Any]) -> Verdict:
    model = _relu6_net()
    x, targets = torch.randn(3, 3, 6, 6, generator=generator(52)), torch.tensor([4, 0, 2])
    plain = _input_gradient(model, x, targets)  # before anything is attached
    truth = _input_gradient(lambda t: model(t, lambda h: _guided(h, 6.0)), x, targets)
    deconv = _input_gradient(lambda t: model(t, lambda h: _guided(h, 6.0, False)), x, targets)
    handles = guide_relu6(model)
    require(isinstance(handles, (list, tuple)), N_("Return the list of handles (got {kind}), so the caller can remove "
                                                   "the hooks."), kind=type(handles).__name__)
    require(all(map(is_handle, handles)), N_("Return the handles that register_full_backward_hook gave you (objects "
                                             "with .remove())."))
    got = _input_gradient(model, x, targets)
    require(not torch.allclose(got, plain, atol=1e-6),
            N_("Nothing was guided: the gradient is the plain one. Hook every nn.ReLU6 module of the model "
               "(model.modules() also finds the one inside the nested block)."))
    require(not torch.allclose(got, deconv, atol=1e-6),
            N_("The forward mask is lost: grad_output is the gradient before the ReLU6's own backward. Clamp "
               "grad_input, which already carries the mask."))
    relu6s = [module for module in model.modules() if isinstance(module, nn.ReLU6)]
    guided = torch.allclose(got, truth, atol=1e-6)
    require(guided or all(hook_report(module) for module in relu6s),
            N_("Not the guided map: some nn.ReLU6 modules carry no hook -- the model has one inside a nested block, "
               "which model.children() does not reach (model.modules() does)."))
    require(guided, N_("Not the guided map: at each ReLU6 only positive gradients may pass, where 0 < x < 6 (check "
                       "that you hooked the ReLU6 modules and nothing else)."))
    require(not any("forward" in vars(module) for module in relu6s),
            N_("You replaced a ReLU6's forward: the exercise asks for a hook (the module's own code stays as it is)."))
    require(all(hook_report(module) for module in relu6s),
            N_("The gradient is guided, but not every nn.ReLU6 module has a hook: register one on each "
               "(register_full_backward_hook)."))
    require(all(module._backward_hooks for module in relu6s),
            N_("The gradient is guided, but not by a full backward hook on every nn.ReLU6 ({found}): the exercise asks "
               "for register_full_backward_hook, whose grad_input already carries the ReLU6's mask."),
            found=", ".join(sorted({key for module in relu6s for key in hook_report(module)})))
    require(all(getattr(module, "_is_full_backward_hook", None) is True for module in relu6s),
            N_("The gradient is guided, but by the deprecated register_backward_hook: it sees the last autograd node "
               "of the module, not the module's input (here they agree only because ReLU6 is one operation), and a "
               "module that has one cannot take a full backward hook. The exercise asks for "
               "register_full_backward_hook."))
    draw = generator(53)  # each hook called on its own, on gradients it has not seen: its arguments must stay as given
    for module in relu6s:
        for hook in list(module._backward_hooks.values()):
            grad_input, grad_output = (randn(draw, 2, 4, 3, 3),), (randn(draw, 2, 4, 3, 3),)
            before = [grad_input[0].clone(), grad_output[0].clone()]
            hook(module, grad_input, grad_output)
            require(torch.equal(grad_input[0], before[0]) and torch.equal(grad_output[0], before[1]),
                    N_("Your hook changed its argument in place (called on its own, grad_input or grad_output came "
                       "back changed). PyTorch can hand that very tensor to other parts of the graph, where the change "
                       "lands too: return a new grad_input tuple instead."))
    for handle in handles:
        handle.remove()
    require(torch.allclose(_input_gradient(model, x, targets), plain, atol=1e-6),
            N_("After removing the handles you returned, the model is still guided: return every handle."))
    return Verdict(True)


_SANITY_FEEDBACK = {
    "a": N_("Not entirely: the random network's map ranks the pixels only partly like the trained one's (section 4). "
            "What does that partial agreement, and the class making no difference, tell you?"),
    "c": N_("A random network has learned nothing. Where else can a shared picture come from?"),
    "d": N_("The plain gradient changed the most when the weights were randomised: that is the behaviour the test "
            "asks for. Which method barely reacted to the class?"),
}


@exercise("05.2")
def _sanity_choice(answer: Any) -> Verdict:
    letter = answer.strip().lower().strip("()") if isinstance(answer, str) else None
    require(letter in ("a", "b", "c", "d"), N_("Answer with one letter, e.g. answer = \"a\"; got {answer!r}."),
            answer=answer)
    if letter == "b":
        return Verdict(True)
    fail(_SANITY_FEEDBACK[letter])


def _functional_net() -> nn.Module:
    """ReLUs as F.relu, torch.relu, an in-place F.relu and an nn.ReLU module (which calls F.relu itself); one ReLU
    follows two convolutions in a row. ``model(x, guided=True)``: the ground truth, every ReLU the guided one."""

    def forward(m: nn.Module, x: torch.Tensor, guided: bool = False) -> torch.Tensor:
        if guided:
            h = _guided(m.mix(m.conv2(_guided(m.conv1(x)))))
            return m.fc2(_guided(m.fc1(_guided(m.conv3(h)).mean(dim=(2, 3)))))
        h = torch.relu(m.mix(m.conv2(F.relu(m.conv1(x)))))
        return m.fc2(m.act(m.fc1(F.relu(m.conv3(h), inplace=True).mean(dim=(2, 3)))))

    # mix: two linear layers in a row, where a guide on every output would show
    return seeded(Net(forward, conv1=nn.Conv2d(3, 6, 3, padding=1), conv2=nn.Conv2d(6, 6, 3, padding=1),
                      mix=nn.Conv2d(6, 6, 1), conv3=nn.Conv2d(6, 5, 3, padding=1), fc1=nn.Linear(5, 7), act=nn.ReLU(),
                      fc2=nn.Linear(7, 4)), 53)


def _reuses_the_course_mode(mode_class: type) -> bool:
    """True when the class is, or borrows the __torch_function__ of, the course's own guided mode."""
    from course_utils.saliency import _GuideFunctionalRelus

    course_own = vars(_GuideFunctionalRelus)["__torch_function__"]  # a subclass has it in its __mro__ too
    return any(vars(klass).get("__torch_function__") is course_own for klass in mode_class.__mro__)


@exercise("05.3")
def _functional_test(mode_class: Any) -> Verdict:
    require(isinstance(mode_class, type) and issubclass(mode_class, TorchFunctionMode),
            N_("Define a class that subclasses torch.overrides.TorchFunctionMode."))
    require(not _reuses_the_course_mode(mode_class),
            N_("Your class reuses course_utils.saliency's own mode (the one guided_backprop(..., functional=True) "
               "runs), where this exercise asks for your own: subclass TorchFunctionMode and write __torch_function__ "
               "yourself."))
    model = _functional_net()
    x, targets = torch.randn(3, 3, 5, 5, generator=generator(54)), torch.tensor([1, 3, 0])
    plain = _input_gradient(model, x, targets)
    truth = _input_gradient(lambda t: model(t, guided=True), x, targets)
    inputs, depth = x.clone().requires_grad_(True), len(function_modes())
    try:
        with mode_class() as mode:
            logits = model(inputs)
        if len(function_modes()) != depth:
            TorchFunctionMode.__exit__(mode, None, None, None)  # take it off for the learner
            fail(N_("Your mode is still active after the with block: if your class overrides __exit__, call "
                    "super().__exit__(...) in it (that is what takes the mode off)."))
    except TypeError as error:
        require("must be a mapping" not in str(error),
                N_("The model failed inside your mode ({error}): PyTorch calls __torch_function__ with kwargs=None "
                   "when a call has no keyword arguments, and `**None` fails. Look at how you pass kwargs on to "
                   "func."), error=error)
        fail(N_("The model failed inside your mode ({error}). __torch_function__ must return what func(*args, "
                "**kwargs) returned."), error=error)
    require(isinstance(logits, torch.Tensor) and logits.shape == (3, 4),
            N_("The model's output changed inside your mode: return func's result unchanged."))
    with torch.no_grad():
        require(torch.allclose(logits.detach(), model(x), atol=1e-6),
                N_("The forward values changed inside your mode: only the gradients may be guided."))
    got = torch.autograd.grad(logits.gather(1, targets[:, None]).sum(), inputs)[0]
    require(not torch.allclose(got, plain, atol=1e-6),
            N_("Nothing was guided: register the guide on the output of each F.relu / torch.relu call."))
    require(torch.allclose(got, truth, atol=1e-6),
            N_("Not the guided map. Guide only ReLU outputs (F.relu and torch.relu -- an nn.ReLU module calls F.relu "
               "itself), with a tensor hook that keeps the positive gradient."))
    try:
        with mode_class(), torch.no_grad():
            model(x)
    except RuntimeError as error:
        fail(N_("Under torch.no_grad() your mode fails ({error}). Outputs that do not require grad cannot take a "
                "tensor hook: skip them."), error=error)
    require(torch.allclose(_input_gradient(model, x, targets), plain, atol=1e-6),
            N_("Outside the with block the model must give its plain gradient again."))
    return Verdict(True)


EXERCISES = (_relu6_test, _sanity_choice, _functional_test)
