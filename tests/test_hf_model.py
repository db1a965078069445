"""course_utils.hf_model: notebook 12's weights in transformers' GPT2LMHeadModel compute what the course model computes
-- logits on unseen sequences, notebook 12's head-ablation table through the Hugging Face module names, greedy
generation with the KV cache -- for the shipped model and for other sizes, with either attention implementation."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import transformers

from course_utils.hf_model import gpt2_config, gpt2_state_dict, induction_gpt2, to_gpt2
from course_utils.hooks import assert_no_hooks
from course_utils.machinery.pins import parse_pins, read_pins
from course_utils.transformer import (
    InductionTransformer,
    generate,
    induction_loss,
    induction_transformer,
    repeated_sequences,
)
from tests.test_pins import COLAB, declared

LOGIT_BOUND = 1e-4  # float32 kernels differ (Conv1D's addmm vs F.linear, eager softmax vs SDPA): measured 1.4e-5


@pytest.fixture(scope="module")
def course() -> nn.Module:
    return induction_transformer()


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_the_gpt2_class_gives_the_course_model_s_logits_on_unseen_sequences(course: nn.Module,
                                                                            attn_implementation: str) -> None:
    gpt2 = to_gpt2(course, attn_implementation)
    tokens, _ = repeated_sequences(512, seed=4242)  # seeds the notebooks never use
    with torch.no_grad():
        gap = (gpt2(tokens).logits - course(tokens)).abs().max().item()
    print(f"{attn_implementation}: max |logit difference| {gap:.1e} over 512 x 24 x 64 logits")
    assert gap < LOGIT_BOUND
    assert gpt2.config._attn_implementation == attn_implementation and not gpt2.training


def test_every_detail_of_the_config_is_the_course_model_s_where_gpt2_s_defaults_differ(course: nn.Module) -> None:
    config = gpt2_config(course)
    assert (config.n_layer, config.n_head, config.n_embd, config.n_inner, config.n_positions, config.vocab_size) == \
        (2, 4, 64, 256, 24, 64)
    assert config.activation_function == "gelu" and config.layer_norm_epsilon == 1e-5
    assert config.scale_attn_weights and not config.scale_attn_by_inverse_layer_idx
    assert not config.tie_word_embeddings and config.eos_token_id is None
    assert config.resid_pdrop == config.embd_pdrop == config.attn_pdrop == 0.0
    gpt2 = induction_gpt2()
    assert gpt2.lm_head.weight.data_ptr() != gpt2.transformer.wte.weight.data_ptr()
    weights = gpt2_state_dict(course)
    assert weights["transformer.h.0.attn.c_attn.weight"].shape == (64, 192)   # Conv1D: (in, out)
    assert torch.equal(weights["transformer.h.1.mlp.c_fc.weight"], course.blocks[1].mlp[0].weight.T)
    assert set(weights) == set(gpt2.state_dict())
    # GPT-2's defaults would not be exact: the tanh GELU, the default a hand conversion keeps by mistake
    tokens, _ = repeated_sequences(64, seed=4243)
    config.activation_function = "gelu_new"
    tanh_gelu = transformers.GPT2LMHeadModel(config).eval()
    tanh_gelu.load_state_dict(weights)
    with torch.no_grad():
        assert (tanh_gelu(tokens).logits - course(tokens)).abs().max().item() > 1e-3


def test_other_sizes_and_the_tanh_gelu_convert_exactly() -> None:
    torch.manual_seed(3)
    other = InductionTransformer(vocab=50, d_model=48, n_heads=3, n_layers=3, d_mlp=96, max_len=20).eval()
    for block in other.blocks:
        block.mlp[1] = nn.GELU(approximate="tanh")
    gpt2 = to_gpt2(other)
    assert gpt2.config.activation_function == "gelu_pytorch_tanh"
    tokens = torch.randint(0, 50, (16, 20), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        assert (gpt2(tokens).logits - other(tokens)).abs().max().item() < LOGIT_BOUND
    other.blocks[0].mlp[1] = nn.ReLU()
    with pytest.raises(ValueError, match="Cannot express the MLP's activation"):
        gpt2_config(other)


def _ablation_table(model: nn.Module, out_projections: list[nn.Module], d_head: int, logits_of) -> torch.Tensor:
    """Loss increase when one head's slice of the output projection's input is zeroed (notebook 12, section 2)."""
    tokens, lengths = repeated_sequences(256, seed=1)
    with torch.no_grad():
        base = induction_loss(logits_of(model(tokens)), tokens, lengths).item()
    table = torch.zeros(len(out_projections), 4)
    for layer, projection in enumerate(out_projections):
        for head in range(4):
            def zero(module, args, head=head):
                heads = args[0].clone()
                heads[..., head * d_head:(head + 1) * d_head] = 0
                return (heads,)
            with projection.register_forward_pre_hook(zero), torch.no_grad():
                table[layer, head] = induction_loss(logits_of(model(tokens)), tokens, lengths).item() - base
    assert_no_hooks(model)
    return table


def test_notebook_12_s_head_ablation_table_through_the_hugging_face_names(course: nn.Module) -> None:
    gpt2 = induction_gpt2()
    ours = _ablation_table(course, [b.attn.out_proj for b in course.blocks], 16, lambda out: out)
    theirs = _ablation_table(gpt2, [h.attn.c_proj for h in gpt2.transformer.h], 16, lambda out: out.logits)
    assert (ours - theirs).abs().max().item() < 1e-4
    # notebook 12 prints: layer 0  0.00 0.10 0.00 0.10 | layer 1  0.05 0.02 0.01 0.02
    assert [[round(v, 2) for v in row] for row in theirs.tolist()] == [[0.0, 0.1, 0.0, 0.1], [0.05, 0.02, 0.01, 0.02]]


def test_generate_with_the_kv_cache_continues_the_repeat_as_the_course_model_does(course: nn.Module) -> None:
    gpt2 = induction_gpt2()
    sequences, _ = repeated_sequences(16, seed=4244, block_length=8)
    prompt = sequences[:, :17]
    theirs = gpt2.generate(prompt, max_new_tokens=7, do_sample=False)
    uncached = gpt2.generate(prompt, max_new_tokens=7, do_sample=False, use_cache=False)
    assert torch.equal(theirs, generate(course, prompt, 7)) and torch.equal(theirs, uncached)
    assert torch.equal(theirs, sequences)


def test_the_hf_extra_admits_colab_s_versions_and_the_lock() -> None:
    # a learner's `pip install "course-utils[hf]"` on Colab replaces none of its transformers, accelerate, peft
    extra = declared()["hf"]
    colab = parse_pins(COLAB.read_text(encoding="utf-8").splitlines())
    lock = read_pins()
    for requirement in extra:
        assert requirement.specifier.contains(colab[requirement.name]), (requirement, colab[requirement.name])
        assert requirement.specifier.contains(lock[requirement.name]), (requirement, lock[requirement.name])
    assert sorted(requirement.name for requirement in extra) == ["accelerate", "peft", "transformers"]
