"""course_utils.transformer: the shipped weights give what notebook 12 states, the KV cache changes nothing, and
nnsight (the library notebook 12 matches) gives the same cache, ablation and patch as raw hooks."""

from __future__ import annotations

import copy
import importlib.resources
from pathlib import Path

import pytest
import torch

from course_utils.hooks import assert_no_hooks
from course_utils.transformer import (
    BLOCK_LENGTHS,
    SEQ_LEN,
    VOCAB,
    WEIGHTS,
    KVCache,
    generate,
    induction_accuracy,
    induction_loss,
    induction_transformer,
    predictable,
    repeated_sequences,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return induction_transformer()


def test_the_shipped_weights_are_small_package_data_and_give_the_accuracy_notebook_12_states(
        model: torch.nn.Module) -> None:
    source = importlib.resources.files("course_utils") / "weights" / WEIGHTS
    assert source.is_file() and len(source.read_bytes()) <= 2_000_000
    # notebook 12, section 0: 109,824 parameters; 256 sequences of seed 1; accuracy 100%, loss < 0.01
    tokens, lengths = repeated_sequences(256, seed=1)
    with torch.no_grad():
        logits = model(tokens)
    assert sum(p.numel() for p in model.parameters()) == 109_824
    assert int(predictable(lengths).sum()) == 1573
    assert induction_accuracy(logits, tokens, lengths) == 1.0
    assert induction_loss(logits, tokens, lengths).item() < 0.01


def test_sequences_repeat_their_last_block_and_hold_distinct_tokens() -> None:
    tokens, lengths = repeated_sequences(32, seed=5)
    assert tokens.shape == (32, SEQ_LEN) and int(tokens.max()) < VOCAB
    for row, length in zip(tokens.tolist(), lengths.tolist()):
        assert row[-length:] == row[-2 * length:-length]
        assert len(set(row[:-length])) == SEQ_LEN - length
    with pytest.raises(ValueError, match=r"block_length must lie in 1\.\.12 \(the model was trained on 4\.\.10\)"):
        repeated_sequences(2, seed=0, block_length=13)
    tokens, lengths = repeated_sequences(4, seed=5, block_length=12)   # an untrained length: the block fills half
    assert lengths.tolist() == [12] * 4 and tokens[:, :12].tolist() == tokens[:, 12:].tolist()


def test_the_induction_works_at_the_trained_lengths_only(model: torch.nn.Module) -> None:
    # notebook 12, section 0: trained on repeats of 4..10 tokens; 11 and 12, or 2 and 3, fail on many tokens
    accuracy = {}
    for length in range(2, SEQ_LEN // 2 + 1):
        tokens, lengths = repeated_sequences(256, seed=100 + length, block_length=length)
        with torch.no_grad():
            accuracy[length] = induction_accuracy(model(tokens), tokens, lengths)
    assert min(accuracy[length] for length in BLOCK_LENGTHS) > 0.99
    assert max(accuracy[2], accuracy[3], accuracy[11], accuracy[12]) < 0.8, accuracy


def test_the_kv_cache_and_the_pattern_path_change_nothing(model: torch.nn.Module) -> None:
    tokens, _ = repeated_sequences(8, seed=6, block_length=7)
    prompt = tokens[:, :15]
    assert torch.equal(generate(model, prompt, 9, use_cache=True), generate(model, prompt, 9, use_cache=False))
    cache = KVCache()
    with torch.no_grad():
        model(prompt, kv_cache=cache)
        assert cache.length == 15
        x = model.blocks[0].ln1(model.embed(tokens) + model.pos_embed(torch.arange(SEQ_LEN)))
        fused, none = model.blocks[0].attn(x, positions=torch.arange(SEQ_LEN))
        formed, weights = model.blocks[0].attn(x, positions=torch.arange(SEQ_LEN), need_weights=True)
    assert none is None and torch.allclose(fused, formed, atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(()), atol=1e-5) and (weights.triu(1) == 0).all()


def test_nnsight_gives_the_same_cache_ablation_and_patch_as_raw_hooks(model: torch.nn.Module) -> None:
    import nnsight  # in the lock (requirements.txt) and in the [interp] extra

    tokens, _ = repeated_sequences(16, seed=7)
    corrupted = tokens.clone()
    corrupted[:, 5] = (corrupted[:, 5] + 1) % VOCAB
    wrapped = copy.deepcopy(model)
    traced = nnsight.NNsight(wrapped)
    kept: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        with traced.trace(tokens):
            after_block_1 = traced.blocks[1].output.save()
        with traced.trace(tokens):
            traced.blocks[1].attn.out_proj.input[..., 16:32] = 0
            ablated = traced.output.save()
        with traced.trace(tokens):
            clean_stream = traced.blocks[0].output.save()
        with traced.trace(corrupted):
            traced.blocks[0].output[:, 5] = clean_stream[:, 5]
            patched = traced.output.save()

        with model.blocks[1].register_forward_hook(lambda m, a, output: kept.__setitem__("stream", output)):
            ours_clean = model(tokens)

        def zero_head_1(module: torch.nn.Module, args: tuple) -> tuple:
            heads = args[0].clone()
            heads[..., 16:32] = 0
            return (heads,)

        with model.blocks[1].attn.out_proj.register_forward_pre_hook(zero_head_1):
            ours_ablated = model(tokens)
        with model.blocks[0].register_forward_hook(lambda m, a, output: kept.__setitem__("block 0", output)):
            model(tokens)

        def patch(module: torch.nn.Module, args: tuple, output: torch.Tensor) -> torch.Tensor:
            fixed = output.clone()
            fixed[:, 5] = kept["block 0"][:, 5]
            return fixed

        with model.blocks[0].register_forward_hook(patch):
            ours_patched = model(corrupted)
    assert (after_block_1 - kept["stream"]).abs().max() < 1e-5
    assert (ablated - ours_ablated).abs().max() < 1e-5 and (ablated - ours_clean).abs().max() > 0.01
    assert (patched - ours_patched).abs().max() < 1e-5
    assert_no_hooks(model, wrapped)  # nnsight replaces forward in each module's __dict__; it registers no hook


def test_the_training_script_prints_its_curve_and_writes_loadable_weights(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tools.train_induction import main  # `python -m tools.train_induction` runs this main()

    out = tmp_path / "weights.pt"
    main(["--steps", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "accuracy (predictable)" in printed and "held out" in printed and "109,824 parameters" in printed
    assert set(torch.load(out, weights_only=True)) == set(induction_transformer().state_dict())
