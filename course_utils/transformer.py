"""A small decoder-only transformer that has learned to continue repeated random sequences (notebook 12).

A sequence is distinct random tokens whose last ``L`` (4 to 10) are then repeated: from the repeat's first token on,
the next token is predictable only by finding the current token's earlier occurrence and copying its successor --
*induction heads* in layer 1 reading what *previous-token heads* in layer 0 wrote (Olsson et al., 2022). The weights
ship in the package (``course_utils/weights/``, written by ``python -m tools.train_induction``).

Usage: ``model = induction_transformer(); tokens, lengths = repeated_sequences(64, seed=1)``
"""

from __future__ import annotations

import importlib.resources
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["VOCAB", "SEQ_LEN", "BLOCK_LENGTHS", "WEIGHTS", "Attention", "Block", "InductionTransformer", "KVCache",
           "induction_transformer", "repeated_sequences", "predictable", "induction_accuracy", "induction_loss",
           "generate"]

VOCAB, SEQ_LEN = 64, 24
BLOCK_LENGTHS = range(4, 11)
"""The lengths ``L`` of the repeated block in training: the repeat starts at ``SEQ_LEN - L``, so no head can find it
by position. ``repeated_sequences(..., block_length=L)`` also makes the untrained lengths 1 to ``SEQ_LEN // 2``."""
WEIGHTS = "induction_2l4h.pt"


# -- the model: one screen ----------------------------------------------------------------------------------------
class Attention(nn.Module):
    """Causal multi-head self-attention. ``in_proj`` makes every head's query, key and value; the heads' outputs are
    concatenated (head ``h`` owns features ``h*d_head:(h+1)*d_head``) and then read by ``out_proj``, a module call."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.in_proj = nn.Linear(d_model, 3 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kv: dict | None = None,
                need_weights: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        batch, length, d_model = x.shape
        q, k, v = (t.view(batch, length, self.n_heads, self.d_head).transpose(1, 2)
                   for t in self.in_proj(x).chunk(3, dim=-1))                     # each (batch, heads, length, d_head)
        if kv is not None:                          # incremental decoding: earlier keys and values come from the cache
            if kv:
                k, v = torch.cat([kv["k"], k], dim=2), torch.cat([kv["v"], v], dim=2)
            kv["k"], kv["v"] = k, v
        allowed = torch.arange(k.shape[2], device=x.device) <= positions[:, None]   # causal mask (queries, keys)
        if need_weights:                            # the slow path: the attention pattern is formed and returned
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_head)
            weights = scores.masked_fill(~allowed, float("-inf")).softmax(dim=-1)  # (batch, heads, queries, keys)
            z = weights @ v
        else:                                       # the fast path: a fused kernel that never forms the pattern
            z, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed), None
        z = z.transpose(1, 2).reshape(batch, length, d_model)                      # the heads, concatenated
        return self.out_proj(z), weights


class Block(nn.Module):
    """Pre-LayerNorm transformer block: ``x + attn(ln1(x))``, then ``+ mlp(ln2(x))``; returns the residual stream."""

    def __init__(self, d_model: int, n_heads: int, d_mlp: int) -> None:
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d_model), Attention(d_model, n_heads)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, d_mlp), nn.GELU(), nn.Linear(d_mlp, d_model))

    def forward(self, x: torch.Tensor, positions: torch.Tensor, kv: dict | None = None) -> torch.Tensor:
        attended, _ = self.attn(self.ln1(x), positions=positions, kv=kv, need_weights=False)  # as nn.Transformer* do
        x = x + attended
        return x + self.mlp(self.ln2(x))


class InductionTransformer(nn.Module):
    """Token and learned position embeddings, ``n_layers`` blocks, a final LayerNorm and the unembedding.

    ``forward(tokens)`` -> logits ``(batch, length, VOCAB)``; with a :class:`KVCache`, only the new tokens are run."""

    def __init__(self, vocab: int = VOCAB, d_model: int = 64, n_heads: int = 4, n_layers: int = 2,
                 d_mlp: int = 256, max_len: int = SEQ_LEN) -> None:
        super().__init__()
        self.embed, self.pos_embed = nn.Embedding(vocab, d_model), nn.Embedding(max_len, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_heads, d_mlp) for _ in range(n_layers))
        self.ln_final, self.unembed = nn.LayerNorm(d_model), nn.Linear(d_model, vocab, bias=False)

    def forward(self, tokens: torch.Tensor, kv_cache: KVCache | None = None) -> torch.Tensor:
        start = 0 if kv_cache is None else kv_cache.length
        positions = torch.arange(start, start + tokens.shape[1], device=tokens.device)   # absolute positions
        x = self.embed(tokens) + self.pos_embed(positions)
        for index, block in enumerate(self.blocks):
            x = block(x, positions=positions, kv=None if kv_cache is None else kv_cache.layer(index))
        return self.unembed(self.ln_final(x))


# -- around the model -------------------------------------------------------------------------------------------
class KVCache:
    """The keys and values of the positions run so far, one ``{"k", "v"}`` dict per layer (filled by Attention)."""

    def __init__(self) -> None:
        self.layers: dict[int, dict] = {}

    def layer(self, index: int) -> dict:
        return self.layers.setdefault(index, {})

    @property
    def length(self) -> int:
        """How many positions are cached (0 before the first forward)."""
        first = self.layers.get(0, {})
        return first["k"].shape[2] if "k" in first else 0


def induction_transformer() -> InductionTransformer:
    """The trained model (109,824 parameters), its weights read from the package (``importlib.resources``)."""
    model = InductionTransformer()
    source = importlib.resources.files("course_utils") / "weights" / WEIGHTS
    with importlib.resources.as_file(source) as path:
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    return model


def repeated_sequences(batch: int, seed: int, block_length: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` sequences of ``SEQ_LEN`` tokens: distinct random tokens, the last ``L`` of them repeated once more.

    Returns ``(tokens (batch, SEQ_LEN), L (batch,))``; ``L`` is drawn from ``BLOCK_LENGTHS`` (the trained lengths)
    unless ``block_length`` fixes it, to any length from 1 to ``SEQ_LEN // 2`` (a sequence holds the block twice).
    Usage: ``tokens, lengths = repeated_sequences(8, seed=0)``"""
    if block_length is not None and not 1 <= block_length <= SEQ_LEN // 2:
        raise ValueError(f"block_length must lie in 1..{SEQ_LEN // 2} (the model was trained on "
                         f"{BLOCK_LENGTHS.start}..{BLOCK_LENGTHS.stop - 1}), got {block_length}.")
    generator = torch.Generator().manual_seed(seed)
    rows, lengths = [], []
    for _ in range(batch):
        length = block_length or int(torch.randint(BLOCK_LENGTHS.start, BLOCK_LENGTHS.stop, (1,), generator=generator))
        distinct = torch.randperm(VOCAB, generator=generator)[: SEQ_LEN - length]
        rows.append(torch.cat([distinct, distinct[-length:]]))
        lengths.append(length)
    return torch.stack(rows), torch.tensor(lengths)


def predictable(lengths: torch.Tensor) -> torch.Tensor:
    """Boolean mask ``(batch, SEQ_LEN - 1)`` of the predictions that the sequence determines: position ``t``
    predicts token ``t + 1``, determined from the repeat's first token on (``t >= SEQ_LEN - L``)."""
    return torch.arange(SEQ_LEN - 1)[None, :] >= (SEQ_LEN - lengths)[:, None]


def induction_accuracy(logits: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> float:
    """Share of the predictable next tokens that ``logits`` ranks first."""
    mask = predictable(lengths)
    return (logits[:, :-1].argmax(dim=-1) == tokens[:, 1:])[mask].float().mean().item()


def induction_loss(logits: torch.Tensor, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of the predictable next tokens (a scalar tensor)."""
    mask = predictable(lengths)
    return F.cross_entropy(logits[:, :-1][mask], tokens[:, 1:][mask])


@torch.no_grad()
def generate(model: nn.Module, prompt: torch.Tensor, new_tokens: int, use_cache: bool = True) -> torch.Tensor:
    """Greedy decoding: ``prompt (batch, t)`` followed by ``new_tokens`` tokens. ``use_cache=False`` reruns the
    whole sequence at every step; with the cache, each step runs the newest token only."""
    tokens, cache = prompt, (KVCache() if use_cache else None)
    step_input = prompt
    for _ in range(new_tokens):
        logits = model(step_input, kv_cache=cache) if cache is not None else model(tokens)
        chosen = logits[:, -1].argmax(dim=-1, keepdim=True)
        tokens = torch.cat([tokens, chosen], dim=1)
        step_input = chosen
    return tokens
