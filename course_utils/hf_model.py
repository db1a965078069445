"""Notebook 12's transformer as a Hugging Face ``GPT2LMHeadModel``, the same weights (notebook 13).

GPT-2's architecture is the course model's; what a faithful copy must set, because ``GPT2Config``'s defaults differ:
``activation_function="gelu"`` (the exact GELU of ``nn.GELU()``; GPT-2's ``"gelu_new"`` is the tanh approximation),
``tie_word_embeddings=False`` (the unembedding is its own matrix), dropout 0, ``layer_norm_epsilon`` 1e-5, no
per-layer attention scaling, ``n_inner`` the MLP's width, and no special tokens (GPT-2's ``bos``/``eos`` id 50256
lies outside the 64-token vocabulary and ``generate()`` would look for it). The causal mask needs nothing:
transformers 5 builds it from the positions at every call. GPT-2's ``Conv1D`` computes ``x @ W + b``, so every
``nn.Linear`` weight goes in transposed; ``c_attn`` holds query, key and value side by side, as ``in_proj`` does.
Nothing is downloaded: the weights are the package's, the tokens integers (no tokenizer).

Usage: ``model = induction_gpt2()`` (``attn_implementation="sdpa"`` for the fused kernel);
``to_gpt2(InductionTransformer(n_layers=3))`` for another size
"""

from __future__ import annotations

from typing import cast

import torch
import torch.nn as nn

from course_utils.transformer import InductionTransformer, induction_transformer

__all__ = ["gpt2_config", "gpt2_state_dict", "induction_gpt2", "to_gpt2"]

_ACTIVATIONS = {"none": "gelu", "tanh": "gelu_pytorch_tanh"}
"""``nn.GELU(approximate=...)`` -> the ``transformers`` activation that computes exactly the same function."""


def _require_transformers():
    try:
        import transformers
    except ImportError as error:  # pragma: no cover - the lock installs it
        raise ImportError("Notebook 13 needs transformers, accelerate and peft: "
                          "pip install \"course-utils[hf]\" (Colab has all three already).") from error
    return transformers


def gpt2_config(model: InductionTransformer, attn_implementation: str = "eager"):
    """The ``GPT2Config`` that describes ``model`` exactly (any size of :class:`InductionTransformer`).

    Usage: ``gpt2_config(induction_transformer()).n_layer`` -> 2"""
    transformers = _require_transformers()
    block = model.blocks[0]
    gelu = block.mlp[1]
    if not isinstance(gelu, nn.GELU) or gelu.approximate not in _ACTIVATIONS:
        raise ValueError(f"Cannot express the MLP's activation {gelu!r} in GPT2Config.")
    return transformers.GPT2Config(
        vocab_size=model.embed.num_embeddings, n_positions=model.pos_embed.num_embeddings,
        n_embd=model.embed.embedding_dim, n_layer=len(model.blocks), n_head=block.attn.n_heads,
        n_inner=block.mlp[0].out_features, activation_function=_ACTIVATIONS[gelu.approximate],
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=block.ln1.eps,
        scale_attn_weights=True, scale_attn_by_inverse_layer_idx=False, reorder_and_upcast_attn=False,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        attn_implementation=attn_implementation,
    )


def gpt2_state_dict(model: InductionTransformer) -> dict[str, torch.Tensor]:
    """``model``'s weights under ``GPT2LMHeadModel``'s names: every ``nn.Linear`` weight transposed for ``Conv1D``.

    Usage: ``gpt2_state_dict(model)["transformer.h.0.attn.c_attn.weight"].shape`` -> ``(64, 192)``"""
    weights = {"transformer.wte.weight": model.embed.weight, "transformer.wpe.weight": model.pos_embed.weight,
               "transformer.ln_f.weight": model.ln_final.weight, "transformer.ln_f.bias": model.ln_final.bias,
               "lm_head.weight": model.unembed.weight}
    for index, block in enumerate(model.blocks):
        modules = {"ln_1": block.ln1, "ln_2": block.ln2, "attn.c_attn": block.attn.in_proj,
                   "attn.c_proj": block.attn.out_proj, "mlp.c_fc": block.mlp[0], "mlp.c_proj": block.mlp[2]}
        for name, module in modules.items():
            conv1d = isinstance(module, nn.Linear)  # Conv1D keeps (in_features, out_features)
            weight, bias = cast(torch.Tensor, module.weight), cast(torch.Tensor, module.bias)
            weights[f"transformer.h.{index}.{name}.weight"] = weight.T if conv1d else weight
            weights[f"transformer.h.{index}.{name}.bias"] = bias
    return {name: tensor.detach().clone().contiguous() for name, tensor in weights.items()}


def to_gpt2(model: InductionTransformer, attn_implementation: str = "eager"):
    """A ``GPT2LMHeadModel`` (in eval mode) that computes what ``model`` computes; every key must match.

    Usage: ``to_gpt2(induction_transformer()).config.n_layer`` -> 2"""
    transformers = _require_transformers()
    gpt2 = transformers.GPT2LMHeadModel(gpt2_config(model, attn_implementation)).eval()
    gpt2.load_state_dict(gpt2_state_dict(model), strict=True)
    return gpt2


def induction_gpt2(attn_implementation: str = "eager"):
    """Notebook 12's trained model (the package's weights) as a ``GPT2LMHeadModel``.

    Usage: ``induction_gpt2().transformer.h[1].attn.c_proj``"""
    return to_gpt2(induction_transformer(), attn_implementation)
