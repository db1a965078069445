"""Exercises of notebooks/13_hooks_on_library_models.ipynb: a hook right during generate(), gradients that stay right
under gradient checkpointing, a watcher beside accelerate's hook, attribution patching per head.

Each check builds GPT-2 models of its own (``to_gpt2`` of a random ``InductionTransformer``) and computes the truth
another way than the notebook: without the KV cache, without checkpointing, before offloading, by autograd.grad.
Usage: ``check("13.1", steer_generation)`` in the notebook.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import torch

from course_utils.machinery.exercise_kit import *
from course_utils.transformer import InductionTransformer

# where a hook is left is named from the model down (``model._forward_hooks``)
_require_no_hooks = functools.partial(require_no_hooks, prefix="model.")


def _gpt2(n_layers: int, n_heads: int, seed: int, d_model: int = 32):
    """A GPT2LMHeadModel with random weights, larger than the default initialisation so that every part matters."""
    from course_utils.hf_model import to_gpt2  # transformers is imported when a check of notebook 13 runs

    torch.manual_seed(seed)
    model = InductionTransformer(vocab=40, d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_mlp=2 * d_model)
    return to_gpt2(seeded(model, seed, 1.5, matrices_only=True))


def _tokens(batch: int, length: int, seed: int) -> torch.Tensor:
    return torch.randint(0, 40, (batch, length), generator=generator(seed))


# -- 13.1: steer generate() from an absolute position on ---------------------------------------------------------
def _generated(model, prompt: torch.Tensor, layer: int, vector: torch.Tensor, start: int, *,
               cache: bool = False, by_index: bool = False) -> torch.Tensor:
    """Generation steered from ``start`` on: the truth (no cache), or the slice mistake (``by_index`` with the
    cache)."""
    done = [0]

    def hook(module: torch.nn.Module, args: Any, output: torch.Tensor) -> torch.Tensor:
        first = 0 if by_index else done[0]
        done[0] += output.shape[1] if cache else 0
        where = torch.arange(first, first + output.shape[1]) >= start
        return output + where[:, None].to(output.dtype) * vector

    with model.transformer.h[layer].register_forward_hook(hook), torch.no_grad():
        return model.generate(prompt, max_new_tokens=6, do_sample=False, use_cache=cache)


@exercise("13.1")
def _steer_test(steer_generation: Callable[..., Any]) -> Verdict:
    for n_layers, n_heads, layer, start, seed in ((3, 2, 1, 4, 1), (2, 4, 0, 9, 2), (4, 2, 3, 0, 3), (3, 2, 2, 11, 1)):
        model, prompt, vector = _gpt2(n_layers, n_heads, seed), _tokens(3, 7, seed), randn(seed, 32) * 3
        lengths: list[int] = []
        with model.transformer.h[0].register_forward_pre_hook(
                lambda m, args, lengths=lengths: lengths.append(args[0].shape[1])):
            got = steer_generation(model, prompt, 6, layer, vector.clone(), start)
        _require_no_hooks(model)
        require(max(lengths[1:], default=1) == 1, N_("Your generation ran the whole sequence at every step: generate "
                                                     "with the KV cache (generate()'s default), as the exercise asks."))
        truth = _generated(model, prompt, layer, vector, start)
        require(isinstance(got, torch.Tensor) and got.shape == truth.shape,
                N_("Return the tokens generate() returns, a tensor of shape {shape}; got {type}."),
                shape=tuple(truth.shape), type=type_name(got))
        if torch.equal(got, truth):
            continue
        name_the_mistake(got, [
            (functools.partial(_generated, model, prompt, layer, vector, start, cache=True, by_index=True),
             N_("Your hook picks positions by their index in the output: with the KV cache each call after the prompt "
                "holds one position, so it steers nothing there.")),
            (functools.partial(_generated, model, prompt, layer, vector, 0),
             N_("Every position was steered: add the vector only from position start on."))], compare=torch.equal)
        fail(N_("Not the tokens of a generation steered at every absolute position >= start (start was {start}, the "
                "prompt {length} long)."), start=start, length=prompt.shape[1])
    failing = _gpt2(2, 2, 12)
    failing.transformer.h[1].mlp = FailsOnPurpose()
    the_error_gets_out(lambda: steer_generation(failing, _tokens(2, 5, 1), 3, 1, randn(1, 32), 2))
    _require_no_hooks(failing, N_("When generation fails, your hook stays on the model ({where}): register it in a "
                                  "with block or remove it in a finally block."))
    return Verdict(True)


# -- 13.2: attention-output gradients under gradient checkpointing ------------------------------------------------
def _loss(model, batch: torch.Tensor) -> torch.Tensor:
    logits = model(batch, use_cache=False).logits
    return torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), batch[:, 1:].flatten())


def _attention_grads(model, batches: list[torch.Tensor]) -> dict[str, list[list[torch.Tensor]]]:
    """Per training step of ``batches``, without checkpointing: each block's attention output ("outputs"), the
    gradients there ("grads", the truth in the last step) and at attn.c_proj's input ("c_proj inputs")."""
    found: dict[str, list[list[torch.Tensor]]] = {"outputs": [], "grads": [], "c_proj inputs": []}
    outputs: list[torch.Tensor] = []
    inputs: list[torch.Tensor] = []
    handles = [block.attn.register_forward_hook(lambda m, args, output: outputs.append(output[0]))
               for block in model.transformer.h]
    handles += [block.attn.c_proj.register_forward_pre_hook(lambda m, args: inputs.append(args[0]))
                for block in model.transformer.h]
    with removing(handles):
        for batch in batches:
            outputs.clear()
            inputs.clear()
            grads = torch.autograd.grad(_loss(model, batch), outputs + inputs)
            found["outputs"].append([output.detach() for output in outputs])
            found["grads"].append(list(grads[:len(outputs)]))
            found["c_proj inputs"].append(list(grads[len(outputs):]))
    return found


def _kept_gradient(value: Any) -> Any:
    """What the learner kept for a block: a tensor's ``.grad`` where it has one, else the value itself."""
    if isinstance(value, torch.Tensor) and (value.is_leaf or value.retains_grad) and value.grad is not None:
        return value.grad
    return value


def _name_the_wrong_gradient(value: Any, layer: int, truth: dict[str, list[list[torch.Tensor]]], mode: Text) -> None:
    """:func:`fail` with what ``value``, kept for block ``layer``, is instead of its last step's gradient."""
    if isinstance(value, torch.Tensor) and value.retains_grad and value.grad is None:
        fail(N_("Layer {layer}'s tensor never received a gradient ({mode}): the tensor you kept is not the one "
                "backward reaches. Which tensors does backward reach, and when?"), layer=layer, mode=mode)
    grad = _kept_gradient(value)

    def near(expected: torch.Tensor) -> bool:
        return grad.shape == expected.shape and torch.allclose(grad, expected, atol=1e-6)

    first, last = truth["grads"][0][layer], truth["grads"][-1][layer]
    require(not any(near(outputs[layer]) for outputs in truth["outputs"]),
            N_("Layer {layer}'s value is the attention output itself, not a gradient ({mode}): a gradient arrives "
               "only during backward."), layer=layer, mode=mode)
    require(not near(first + last), N_("Layer {layer}'s gradient adds up the training steps ({mode}): the dict must "
                                       "hold the last step's gradient alone."), layer=layer, mode=mode)
    require(not near(first), N_("Layer {layer}'s gradient is the first training step's ({mode}): the dict must hold "
                                "the last step's."), layer=layer, mode=mode)
    require(not near(truth["c_proj inputs"][-1][layer]),
            N_("Layer {layer}'s gradient is the one at attn.c_proj's input ({mode}): the exercise asks for the "
               "gradient at attn's output, the first element of what it returns."), layer=layer, mode=mode)
    fail(N_("Layer {layer}'s gradient is not the one at attn's first output in the last training step ({mode}): which "
            "tensor does your hook catch, and when?"), layer=layer, mode=mode)


@exercise("13.2")
def _gradients_test(attention_gradients: Callable[..., Any]) -> Verdict:
    for n_layers, reentrant, seed in ((3, False, 4), (2, None, 5), (4, True, 6)):
        model = _gpt2(n_layers, 2, seed).train()
        batches = [_tokens(4, 12, seed), _tokens(4, 12, seed + 10)]
        truth = _attention_grads(copy.deepcopy(model), batches)
        mode = Text(N_("no checkpointing")) if reentrant is None else Text(
            N_("checkpointing with use_reentrant={value}"), value=reentrant)
        if reentrant is not None:
            (getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable)(
                {"use_reentrant": reentrant})
        result = attention_gradients(model)
        require(isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], dict),
                N_("Return (grads, handles): the dict, and the list of the handles you registered."))
        kept, handles = result
        with removing(handles):
            try:
                for batch in batches:
                    _loss(model, batch).backward()
            except RuntimeError as error:
                fail(N_("Training failed with your hooks ({mode}): {error}."), mode=mode,
                     error=str(error).rstrip(". "))
        if hasattr(model, "_require_grads_hook"):  # transformers' own, from reentrant checkpointing
            model.disable_input_require_grads()
        _require_no_hooks(model)
        require(sorted(kept, key=str) == list(range(n_layers))
                and all(isinstance(v, torch.Tensor) for v in kept.values()),
                N_("Expected one gradient per layer index 0..{last} ({mode}); got the keys {keys}."),
                last=n_layers - 1, mode=mode, keys=sorted(kept, key=str)[:8])
        for layer, value in kept.items():
            grad, expected = _kept_gradient(value), truth["grads"][-1][layer]
            if not (grad.shape == expected.shape and torch.allclose(grad, expected, atol=1e-6)):
                _name_the_wrong_gradient(value, layer, truth, mode)
    return Verdict(True)


# -- 13.3: watch an offloaded module's weight, leave accelerate's hook ----------------------------------------------
@exercise("13.3")
def _watch_test(watch_weight_norms: Callable[..., Any]) -> Verdict:
    from accelerate import cpu_offload

    for n_layers, seed, pick in ((3, 7, lambda m: m.transformer.h[1].mlp.c_fc), (2, 8, lambda m: m.lm_head)):
        model, tokens = _gpt2(n_layers, 2, seed), _tokens(2, 10, seed)
        with torch.no_grad():
            truth = model(tokens).logits
        norm = pick(model).weight.detach().norm().item()
        offloaded = cpu_offload(model, execution_device=torch.device("cpu"))
        module = pick(offloaded)
        theirs = module._hf_hook
        norms: list[float] = []
        remove = watch_weight_norms(module, norms)
        try:
            with torch.no_grad():
                offloaded(tokens)
        except (RuntimeError, NotImplementedError, ValueError, TypeError) as error:
            now = getattr(module, "_hf_hook", None)
            require(theirs in getattr(now, "hooks", [now]) or "meta" not in str(error),
                    N_("accelerate's hook is gone: add_hook_to_module put yours in its place, and nobody loaded the "
                       "weight ({error})."), error=error)
            fail(N_("The offloaded model failed with your watcher: {error}. Where is the weight when your code reads "
                    "it?"), error=f"{type(error).__name__}: {error}")
        try:
            got = [float(value) for value in norms]
        except (RuntimeError, NotImplementedError, TypeError, ValueError):
            fail(N_("Your watcher kept something that is not a number: was the weight on the meta device when you "
                    "read it?"))
        require(bool(got), N_("Your watcher recorded nothing while the offloaded module ran (expected one norm, "
                              "{norm:.3f}): does your hook run when this module runs? Section 5 shows who runs when."),
                norm=norm)
        require(len(got) == 1 and abs(got[0] - norm) <= 1e-4 * max(1.0, norm),
                N_("Expected one norm per call, {norm:.3f}; got {got}."), norm=norm, got=[round(v, 3) for v in got][:4])
        require(callable(remove), N_("Return a function remove() that takes your watcher off."))
        remove()
        with torch.no_grad():
            after = offloaded(tokens).logits
        require(len(norms) == 1, N_("Your watcher still records after remove()."))
        require(getattr(module, "_hf_hook", None) is theirs and module.weight.device.type == "meta",
                N_("remove() took accelerate's hook off too: the module no longer offloads its weight. Leave "
                   "accelerate's hook as it was."))
        require(torch.allclose(after, truth, atol=1e-5), N_("After remove() the offloaded model computes something "
                                                            "else."))
    plain, norms = seeded(torch.nn.Linear(5, 3), 9), []
    remove = watch_weight_norms(plain, norms)
    plain(torch.ones(2, 5))
    remove()
    plain(torch.ones(2, 5))
    require(len(norms) == 1 and abs(float(norms[0]) - plain.weight.detach().norm().item()) <= 1e-5,
            N_("On a module that accelerate never touched, expected one norm, then silence after remove(); got "
               "{got}."), got=[round(float(v), 3) for v in norms][:4])
    require_no_hooks(plain)
    return Verdict(True)


# -- 13.4: attribution patching per head ---------------------------------------------------------------------------
def _attribution(model, clean: torch.Tensor, corrupted: torch.Tensor, metric: Callable) -> torch.Tensor:
    """The truth, by torch.autograd.grad at the inputs of every attn.c_proj (no backward hook, no .grad)."""
    taken: dict[bool, list[torch.Tensor]] = {True: [], False: []}
    for is_clean, tokens in ((True, clean), (False, corrupted)):
        handles = [block.attn.c_proj.register_forward_pre_hook(lambda m, args, k=is_clean: taken[k].append(args[0]))
                   for block in model.transformer.h]
        with removing(handles):
            logits = model(tokens).logits
    grads = torch.autograd.grad(metric(logits), taken[False])
    n_head = model.config.n_head
    return torch.stack([((a - b).detach() * g).reshape(-1, n_head, a.shape[-1] // n_head).sum(dim=(0, 2))
                        for a, b, g in zip(taken[True], taken[False], grads)])


def _log_prob_of(target: torch.Tensor) -> Callable[[torch.Tensor], torch.Tensor]:
    """The metric: the mean log-probability of ``target`` at the second-to-last position."""
    return lambda logits: logits[:, -2].log_softmax(-1).gather(1, target[:, None]).mean()


def _mark_grads(model, marked: bool) -> dict[str, tuple[torch.Tensor | None, torch.Tensor | None]]:
    """Give every parameter a ``.grad`` of 0.5s (``marked``) or none; return each one's tensor and a copy."""
    given = {}
    for name, parameter in model.named_parameters():
        parameter.grad = torch.full_like(parameter, 0.5) if marked else None
        given[name] = (parameter.grad, None if parameter.grad is None else parameter.grad.clone())
    return given


def _grads_untouched(model, given: dict[str, tuple[torch.Tensor | None, torch.Tensor | None]]) -> bool:
    return all(p.grad is None if given[n][1] is None else p.grad is not None and torch.equal(p.grad, given[n][1])
               for n, p in model.named_parameters())


@exercise("13.4")
def _attribution_test(head_attribution: Callable[..., Any]) -> Verdict:
    for n_layers, n_heads, length, seed, marked in ((2, 4, 12, 9, False), (3, 2, 16, 10, True)):
        model, clean = _gpt2(n_layers, n_heads, seed).train(not marked), _tokens(5, length, seed)
        corrupted = clean.clone()
        corrupted[:, length // 2] = (clean[:, length // 2] + 7) % 40
        target = clean[:, -1]
        metric = _log_prob_of(target)
        truth = _attribution(model, clean, corrupted, metric)
        given, modes = _mark_grads(model, marked), [module.training for module in model.modules()]
        got = head_attribution(model, clean, corrupted, metric)
        _require_no_hooks(model)
        require([module.training for module in model.modules()] == modes,
                N_("Your function changed the model's training mode (model.training was {was}): leave it as you found "
                   "it, since a hidden model.eval() or model.train() changes what the caller's next forward does."),
                was=modes[0])
        if not _grads_untouched(model, given):
            require(not all(p.grad is given[n][0] for n, p in model.named_parameters()),
                    N_("Your function changed the values in the parameters' .grad tensors: backward adds into an "
                       "existing .grad in place, so the tensors you kept hold the new sum too. Where does backward put "
                       "the parameters' gradients, and can you keep it from doing so?"))
            fail(N_("Your function changed the parameters' .grad: take the gradients for the heads only, and leave "
                    "the model's as they were."))
        got = tensor_result(got, tuple(truth.shape), Text(N_("the scores (n_layer, n_head)")))
        close = lambda value, expected: torch.allclose(  # noqa: E731
            value, expected, atol=1e-4 * expected.abs().max().item() + 1e-7, rtol=1e-3)
        if close(got, truth):
            continue
        name_the_mistake(got, [(-truth, N_("The signs are flipped: the change is clean minus corrupted."))],
                         compare=close)
        fail(N_("Not the first-order estimates: each is the sum over the head's features of (clean - corrupted) times "
                "the gradient at attn.c_proj's input, on the corrupted run."))

    def failing(logits: torch.Tensor) -> torch.Tensor:
        raise FailedOnPurpose("the metric fails on purpose")

    model = _gpt2(2, 2, 11)
    given = _mark_grads(model, True)
    the_error_gets_out(lambda: head_attribution(model, _tokens(2, 8, 1), _tokens(2, 8, 2), failing))
    _require_no_hooks(model, N_("When the metric fails, a hook stays on the model ({where}): remove your hooks in a "
                                "finally block."))
    require(_grads_untouched(model, given), N_("When the metric fails, the parameters' .grad must stay as they were."))
    return Verdict(True)


EXERCISES = (_steer_test, _gradients_test, _watch_test, _attribution_test)
