"""GPT: a decoder-only Transformer language model, in a classic (GPT-2) or a modern style.
See chapter 14.

    p(x) = Π_t p(x_t | x_<t),   logits = LM_head(LN_f(blocks(embed(x))))
    block: x ← x + Attn(Norm(x));  x ← x + FFN(Norm(x))          (pre-norm, causal attention)

classic: learned positions, LayerNorm, GELU (tanh approximation), tied embeddings, biases.
modern:  RoPE, RMSNorm, ReLU² (or SwiGLU), QK-norm, untied head, no biases.
"""
import math
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from mathref.attention import MultiHeadAttention, scaled_dot_product_attention
from mathref.losses import cross_entropy
from mathref.norm import LayerNorm, RMSNorm
from mathref.positions import apply_rope, rope_cache
from mathref.transformer import FeedForward
from mathref._validation import check_int, check_number, check_probability, check_tensor, \
    check_token_ids

__all__ = ["GPTConfig", "GPT", "CausalSelfAttention", "Block", "KVCache", "sample_next", "generate",
           "sequence_log_prob", "beam_search"]

_STYLES = {
    "classic": dict(positions="learned", norm="layer", activation="gelu_tanh", qk_norm=False,
                    tie_embeddings=True, bias=True),
    "modern": dict(positions="rope", norm="rms", activation="relu2", qk_norm=True,
                   tie_embeddings=False, bias=False),
}


def _check_config_fields(config):
    """Sizes, rates and switches of a GPTConfig, each named with the value received."""
    for name in ("vocab_size", "block_size", "n_layer", "n_head", "d_model"):
        check_int(name, getattr(config, name), min=1)
    check_int("n_kv_head", config.n_kv_head, min=1, optional=True)
    check_int("d_ff", config.d_ff, min=1, optional=True)
    check_probability("dropout", config.dropout, allow_one=False)
    check_number("rope_base", config.rope_base, min=1.0, min_open=True)
    check_number("norm_eps", config.norm_eps, min=0.0, min_open=True)
    for name in ("qk_norm", "tie_embeddings", "bias", "fused"):
        value = getattr(config, name)
        if value is not None and not isinstance(value, bool):
            raise TypeError(f"{name} must be True, False or None, got {value!r}")


@dataclass
class GPTConfig:
    """Sizes and choices of a GPT. Fields left as None take the defaults of ``style``."""
    vocab_size: int = 65
    block_size: int = 256          # the longest context, T_max
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int = None          # None: = n_head; fewer: grouped-query attention
    d_model: int = 128
    d_ff: int = None               # None: 4·d_model (8d/3 for swiglu)
    dropout: float = 0.0
    style: str = "classic"
    positions: str = None          # "learned" | "rope"
    norm: str = None               # "layer" | "rms"
    activation: str = None         # "gelu_tanh" | "gelu" | "relu" | "relu2" | "swiglu"
    qk_norm: bool = None
    tie_embeddings: bool = None
    bias: bool = None
    rope_base: float = 10000.0
    rope_layout: str = "half"     # RoPE pairs: "half" (x_i, x_(i+d/2): GPT-NeoX, Hugging Face
                                   # Llama) or "adjacent" (x_2i, x_2i+1: RoFormer, Meta's Llama)
    norm_eps: float = 1e-5
    fused: bool = True             # PyTorch's fused kernels (SDPA, layer_norm, rms_norm), else
                                   # mathref's readable paths (tested equal)

    def __post_init__(self):
        _check_config_fields(self)
        if self.style not in _STYLES:
            raise ValueError(f"style must be one of {sorted(_STYLES)}, got {self.style!r}")
        for name, value in _STYLES[self.style].items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        if self.n_kv_head is None:
            self.n_kv_head = self.n_head
        if self.d_model % self.n_head:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_head={self.n_head}")
        if self.n_head % self.n_kv_head:
            raise ValueError(f"n_head={self.n_head} is not divisible by n_kv_head={self.n_kv_head}")
        if self.activation not in ("gelu_tanh", "gelu", "relu", "relu2", "swiglu", "silu"):
            raise ValueError(f"activation must be one of 'gelu_tanh', 'gelu', 'relu', 'relu2', "
                             f"'swiglu', 'silu', got {self.activation!r}")
        if self.positions not in ("learned", "rope"):
            raise ValueError(f"positions must be 'learned' or 'rope', got {self.positions!r}")
        if self.norm not in ("layer", "rms"):
            raise ValueError(f"norm must be 'layer' or 'rms', got {self.norm!r}")
        if self.rope_layout not in ("half", "adjacent"):
            raise ValueError(f"rope_layout must be 'half' or 'adjacent', got {self.rope_layout!r}")
        if self.positions == "rope" and (self.d_model // self.n_head) % 2:
            raise ValueError("RoPE needs an even head dimension d_model / n_head")

    def to_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _norm(config, dim=None):
    dim = config.d_model if dim is None else dim
    if config.norm == "layer":
        return LayerNorm(dim, eps=config.norm_eps, bias=config.bias, fused=config.fused)
    return RMSNorm(dim, eps=config.norm_eps, fused=config.fused)


class KVCache:
    """Keys and values of every layer for the tokens processed so far ([B, H_kv, S, d_k] each).

    Each decoding step appends one position per layer; past entries never change. Memory:
    2·L·B·H_kv·S·d_k numbers (``mathref.efficient.kv_cache_bytes``).
    """

    def __init__(self, n_layer):
        self.keys = [None] * n_layer
        self.values = [None] * n_layer

    def __len__(self):
        return 0 if self.keys[0] is None else self.keys[0].shape[-2]

    def update(self, layer, k, v):
        if self.keys[layer] is not None:
            k = torch.cat([self.keys[layer], k], dim=-2)
            v = torch.cat([self.values[layer], v], dim=-2)
        self.keys[layer], self.values[layer] = k, v
        return k, v


class CausalSelfAttention(MultiHeadAttention):
    """Masked multi-head self-attention (mathref.attention.MultiHeadAttention's projections)
    with optional RoPE on q and k, QK-norm, and a KV cache."""

    def __init__(self, config):
        super().__init__(config.d_model, config.n_head, config.n_kv_head, bias=config.bias,
                         dropout=config.dropout)
        self.fused = config.fused
        self.rope_layout = config.rope_layout
        self.q_norm = _norm(config, self.d_k) if config.qk_norm else None
        self.k_norm = _norm(config, self.d_k) if config.qk_norm else None
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x, rope=None, cache=None, layer=0):
        B, T, _ = x.shape
        q = self.split_heads(self.w_q(x), self.n_heads)
        k = self.split_heads(self.w_k(x), self.n_kv_heads)
        v = self.split_heads(self.w_v(x), self.n_kv_heads)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            cos, sin = (t.to(q.dtype) for t in rope)
            q = apply_rope(q, cache=(cos, sin), layout=self.rope_layout)
            k = apply_rope(k, cache=(cos, sin), layout=self.rope_layout)
        if cache is not None:
            k, v = cache.update(layer, k, v)
        S = k.shape[-2]
        p = self.dropout if self.training else 0.0
        if self.fused:
            # SDPA's is_causal aligns the mask top-left; new queries after S − T cached keys
            # need it bottom-right, so pass that mask explicitly (a single query sees all).
            mask = None
            if 1 < T < S:
                mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                                 is_causal=(T == S and T > 1),
                                                 enable_gqa=self.n_kv_heads != self.n_heads)
        else:
            out = scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p,
                                               training=self.training, enable_gqa=True)
        out = out.transpose(1, 2).reshape(B, T, self.d_model)
        return self.resid_dropout(self.w_o(out))


class Block(nn.Module):
    """Pre-norm Transformer block: x + Attn(Norm(x)), then x + FFN(Norm(x))."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = _norm(config)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = _norm(config)
        self.mlp = FeedForward(config.d_model, config.d_ff, config.activation, bias=config.bias,
                               dropout=config.dropout)

    def forward(self, x, rope=None, cache=None, layer=0):
        x = x + self.attn(self.ln_1(x), rope=rope, cache=cache, layer=layer)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """The language model. ``forward(idx, targets)`` returns (logits [B, T, V], mean loss)."""

    def __init__(self, config):
        super().__init__()
        if not isinstance(config, GPTConfig):
            raise TypeError(f"config must be a GPTConfig, got {type(config).__name__}")
        self.config = config
        d = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, d)
        self.pos_emb = nn.Embedding(config.block_size, d) if config.positions == "learned" else None
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = _norm(config)
        self.lm_head = nn.Linear(d, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight     # logits = h Eᵀ
        if config.positions == "rope":
            cos, sin = rope_cache(torch.arange(config.block_size), d // config.n_head,
                                  config.rope_base)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.apply(self._init_weights)
        for block in self.blocks:   # GPT-2: residual projections scaled by 1/√(2L)
            for proj in (block.attn.w_o, block.mlp.proj):
                nn.init.normal_(proj.weight, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None, cache=None):
        if not torch.compiler.is_compiling():     # (data-dependent checks break a graph)
            check_tensor("idx", idx)
            if idx.dim() != 2:
                raise ValueError(f"idx must be [B, T] token ids, got shape {tuple(idx.shape)}")
            check_token_ids("idx", idx, self.config.vocab_size)
            if targets is not None:
                check_token_ids("targets", targets, self.config.vocab_size, allow=(-100,))
                if targets.shape != idx.shape:
                    raise ValueError(f"targets must have the shape of idx {tuple(idx.shape)}, "
                                     f"got {tuple(targets.shape)}")
        B, T = idx.shape
        start = len(cache) if cache is not None else 0
        if start + T > self.config.block_size:
            raise ValueError(f"{start + T} positions exceed block_size={self.config.block_size}")
        x = self.tok_emb(idx)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(start, start + T, device=idx.device))
        x = self.drop(x)
        rope = None
        if self.config.positions == "rope":
            rope = (self.rope_cos[start:start + T], self.rope_sin[start:start + T])
        for i, block in enumerate(self.blocks):
            x = block(x, rope=rope, cache=cache, layer=i)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            flat = logits.reshape(-1, logits.shape[-1])
            if flat.dtype in (torch.float16, torch.bfloat16):
                flat = flat.float()     # the softmax of a mixed-precision model in float32
            loss = cross_entropy(flat, targets.reshape(-1), ignore_index=-100)
        return logits, loss

    # ---- counting -------------------------------------------------------------------------
    def num_parameters(self):
        """All parameters, a tied matrix counted once."""
        return sum(p.numel() for p in self.parameters())

    def matmul_parameters(self):
        """Parameters used in matrix products per token: all but the lookup tables (the token
        table still counts when it is tied to the head, which multiplies by it). The norms'
        gains and biases, elementwise, are counted too: a small overestimate."""
        n = self.num_parameters()
        if self.pos_emb is not None:
            n -= self.pos_emb.weight.numel()
        if not self.config.tie_embeddings:
            n -= self.tok_emb.weight.numel()
        return n

    def flops_per_token(self, T=None):
        """Training FLOPs per token ≈ 6N + 12·L·d·T (forward 2N + 4LdT for the attention
        scores and the weighted values, backward twice the forward)."""
        T = self.config.block_size if T is None else check_int("T", T, min=1)
        c = self.config
        return 6 * self.matmul_parameters() + 12 * c.n_layer * c.d_model * T

    def mfu(self, tokens_per_second, peak_flops, T=None):
        """Model FLOPs utilization: achieved training FLOP/s over the hardware's peak."""
        check_number("tokens_per_second", tokens_per_second, min=0.0)
        check_number("peak_flops", peak_flops, min=0.0, min_open=True)
        return self.flops_per_token(T) * tokens_per_second / peak_flops

    # ---- loading GPT-2 --------------------------------------------------------------------
    @classmethod
    def from_gpt2_state_dict(cls, state_dict, n_head=None, **overrides):
        """Build a classic-style GPT from a Hugging Face GPT-2 state dict (``GPT2LMHeadModel``
        or ``GPT2Model``). GPT-2's Conv1D stores weights as (in, out), nn.Linear as (out, in),
        so every matrix is transposed; c_attn's [d, 3d] splits into W_Q, W_K, W_V. ``n_head``
        cannot be read off the shapes; GPT-2 uses heads of 64 dimensions, the default."""
        sd = {k.removeprefix("transformer."): v for k, v in state_dict.items()}
        vocab, d = sd["wte.weight"].shape
        n_layer = 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("h."))
        config = GPTConfig(vocab_size=vocab, block_size=sd["wpe.weight"].shape[0],
                           n_layer=n_layer, n_head=n_head or d // 64, d_model=d,
                           d_ff=sd["h.0.mlp.c_fc.weight"].shape[1], style="classic", **overrides)
        model = cls(config).to(dtype=sd["wte.weight"].dtype)
        with torch.no_grad():
            model.tok_emb.weight.copy_(sd["wte.weight"])
            model.pos_emb.weight.copy_(sd["wpe.weight"])
            for i, block in enumerate(model.blocks):
                p = f"h.{i}."
                for ours, theirs in ((block.ln_1, "ln_1"), (block.ln_2, "ln_2")):
                    ours.weight.copy_(sd[p + theirs + ".weight"])
                    ours.bias.copy_(sd[p + theirs + ".bias"])
                w, b = sd[p + "attn.c_attn.weight"], sd[p + "attn.c_attn.bias"]
                for j, lin in enumerate((block.attn.w_q, block.attn.w_k, block.attn.w_v)):
                    lin.weight.copy_(w[:, j * d:(j + 1) * d].T)
                    lin.bias.copy_(b[j * d:(j + 1) * d])
                for lin, name in ((block.attn.w_o, "attn.c_proj"), (block.mlp.fc, "mlp.c_fc"),
                                  (block.mlp.proj, "mlp.c_proj")):
                    lin.weight.copy_(sd[p + name + ".weight"].T)
                    lin.bias.copy_(sd[p + name + ".bias"])
            model.ln_f.weight.copy_(sd["ln_f.weight"])
            model.ln_f.bias.copy_(sd["ln_f.bias"])
        return model


# ---- sampling -----------------------------------------------------------------------------
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None, *, min_p=None,
                repetition_penalty=None, previous=None):
    """Next token ids [B] from logits [B, V]. In order:

    1. repetition_penalty θ (CTRL's, with the sign rule of common libraries): the logit z of every
       token in ``previous`` [B, n] becomes z/θ if z > 0 and z·θ if not, so θ > 1 lowers each one;
    2. divide by the temperature (temperature=0 means greedy: the argmax, after step 1);
    3. keep the top_k largest logits, softmax, keep the smallest set whose probability reaches
       top_p, and keep the tokens with p_i ≥ min_p · max_j p_j;
    4. renormalize and sample.

    Step 3 filters in this order, each on what the one before kept, as transformers does. Top-p
    sums the top-k distribution renormalized, so it can keep fewer tokens than either filter
    alone: p = (0.4, 0.3, 0.2, 0.1) with top_k=2, top_p=0.5 keeps token 0 only, while each alone
    keeps {0, 1}. Min-p keeps exactly the intersection with its own set: both earlier filters keep
    the most likely token, and renormalizing rescales the kept probabilities alike, so the ratio
    p_i / max_j p_j does not change."""
    check_tensor("logits", logits, dims=2, kind="float")
    temperature = check_number("temperature", temperature, min=0.0)
    check_int("top_k", top_k, min=1, optional=True)
    if top_p is not None:
        check_number("top_p", top_p, min=0.0, max=1.0, min_open=True)
    if min_p is not None:
        check_number("min_p", min_p, min=0.0, max=1.0, min_open=True)
    if previous is not None and repetition_penalty is None:
        raise ValueError("previous is read only by the repetition penalty: pass "
                         "repetition_penalty too, or leave previous out")
    if repetition_penalty is not None:
        check_number("repetition_penalty", repetition_penalty, min=0.0, min_open=True)
        check_tensor("previous", previous, dims=2, kind="int")
        if previous.shape[0] != logits.shape[0]:
            raise ValueError(f"previous must be [B, n] with B = {logits.shape[0]} (one row per row "
                             f"of logits), got shape {tuple(previous.shape)}")
        check_token_ids("previous", previous, logits.shape[-1])
    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise ValueError("logits contain NaN or +inf: the model's output is not finite "
                         "(check the weights and the training loss)")
    logits = logits.float()
    if repetition_penalty is not None:
        seen = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, previous, True)
        penalized = torch.where(logits > 0, logits / repetition_penalty, logits * repetition_penalty)
        logits = torch.where(seen, penalized, logits)
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        before = sorted_probs.cumsum(dim=-1) - sorted_probs   # mass of the tokens ranked above
        sorted_probs = sorted_probs.masked_fill(before >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if min_p is not None:
        probs = probs.masked_fill(probs < min_p * probs.amax(dim=-1, keepdim=True), 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, top_p=None,
             use_cache=True, generator=None, *, min_p=None, repetition_penalty=None,
             penalty_window=None):
    """Append ``max_new_tokens`` sampled tokens to idx [B, T]. With ``use_cache`` the prompt is
    processed once and each new token costs one position per layer; once the context is full
    the window slides and is recomputed, exactly as without the cache. ``repetition_penalty``
    applies to the tokens of the last ``penalty_window`` positions (all of idx, the prompt
    included, when None); see ``sample_next`` for the rules and their order."""
    check_tensor("idx", idx, dims=2, kind="int")
    check_int("max_new_tokens", max_new_tokens, min=0)
    check_int("penalty_window", penalty_window, min=1, optional=True)
    if penalty_window is not None and repetition_penalty is None:
        raise ValueError("penalty_window is read only by the repetition penalty: pass "
                         "repetition_penalty too, or leave penalty_window out")
    was_training = model.training
    model.eval()
    block = model.config.block_size
    cache = None
    try:
        for _ in range(max_new_tokens):
            if not use_cache:
                logits, _ = model(idx[:, -block:])
            elif cache is None or len(cache) + 1 > block:
                cache = KVCache(model.config.n_layer)
                logits, _ = model(idx[:, -block:], cache=cache)
            else:
                logits, _ = model(idx[:, -1:], cache=cache)
            previous = None
            if repetition_penalty is not None:
                previous = idx if penalty_window is None else idx[:, -penalty_window:]
            next_id = sample_next(logits[:, -1], temperature, top_k, top_p, generator,
                                  min_p=min_p, repetition_penalty=repetition_penalty,
                                  previous=previous)
            idx = torch.cat([idx, next_id[:, None]], dim=1)
    finally:
        model.train(was_training)
    return idx


@torch.no_grad()
def sequence_log_prob(model, idx, n_prompt):
    """Σ_{t ≥ n_prompt} log p(x_t | x_<t) for each row of idx [B, T]: the log-probability the
    model gives to the continuation after the first n_prompt tokens (in nats)."""
    check_tensor("idx", idx, dims=2, kind="int")
    n_prompt = check_int("n_prompt", n_prompt)
    if idx.dim() != 2 or not 1 <= n_prompt < idx.shape[1]:
        raise ValueError(f"need idx [B, T] and 1 ≤ n_prompt < T, got shape {tuple(idx.shape)} "
                         f"and n_prompt={n_prompt}")
    was_training = model.training
    model.eval()
    logits, _ = model(idx[:, :-1])
    model.train(was_training)
    if logits.dtype in (torch.float16, torch.bfloat16):
        logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    picked = logp.gather(-1, idx[:, 1:, None]).squeeze(-1)      # log p(x_t | x_<t), t ≥ 1
    return picked[:, n_prompt - 1:].sum(dim=-1)


@torch.no_grad()
def beam_search(model, idx, max_new_tokens, beam_width=4):
    """Beam search from one prompt idx [1, T]: keep the beam_width continuations with the
    highest total log-probability Σ log p(x_t | x_<t), extend each by every token, keep the best
    beam_width again. Returns (best sequence [1, T + max_new_tokens], its log-probability).
    beam_width=1 is greedy decoding; a beam as wide as V^(n−1) is exhaustive search."""
    check_tensor("idx", idx, dims=2, kind="int")
    if idx.shape[0] != 1:
        raise ValueError(f"beam_search takes one prompt: idx must be [1, T], got shape "
                         f"{tuple(idx.shape)}")
    beam_width = check_int("beam_width", beam_width, min=1)
    max_new_tokens = check_int("max_new_tokens", max_new_tokens, min=1)
    was_training = model.training
    model.eval()
    block = model.config.block_size
    beams = idx                                             # [k, T + t]
    scores = 0.0                                            # total log-probability of each beam
    try:
        for _ in range(max_new_tokens):
            logits, _ = model(beams[:, -block:])
            last = logits[:, -1]
            if last.dtype in (torch.float16, torch.bfloat16):
                last = last.float()
            logp = torch.log_softmax(last, dim=-1)                         # [k, V]
            V = logp.shape[-1]
            candidates = (logp + (scores[:, None] if torch.is_tensor(scores) else 0.0)).flatten()
            scores, flat = candidates.topk(min(beam_width, candidates.numel()))
            beams = torch.cat([beams[flat // V], (flat % V)[:, None]], dim=1)
    finally:
        model.train(was_training)
    return beams[:1], scores[0].item()
