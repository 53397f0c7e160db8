"""Transformer building blocks: the position-wise FFN, encoder and decoder blocks, a small
encoder–decoder model, greedy decoding and beam search, parameter and FLOP counts.
See chapter 13.

    FFN(x) = φ(x W₁ + b₁) W₂ + b₂                 (position-wise: each token on its own)
    SwiGLU(x) = (SiLU(x W₁) ⊙ x W₃) W₂             (gated, d_ff ≈ 8d/3 keeps the parameter count)

    post-norm sub-layer:  x ← Norm(x + Sublayer(x))          (Vaswani et al., torch's default)
    pre-norm sub-layer:   x ← x + Sublayer(Norm(x))          (GPT-2 and later; final Norm at the end)

    encoder block: self-attention (padding mask only), then FFN
    decoder block: causal self-attention, cross-attention (Q from the decoder, K and V from the
                   encoder output through the decoder's own W_K, W_V; only encoder padding is
                   masked), then FFN

Masks follow chapter 11: bool True = allowed, or additive float (0 / −∞), broadcast to
[B, H, T, S].
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from mathref import nn as mnn
from mathref.attention import MultiHeadAttention
from mathref.norm import LayerNorm, RMSNorm
from mathref.positions import sinusoidal_positions

from mathref._validation import check_int, check_probability, check_tensor

__all__ = ["ACTIVATIONS", "FUSED_ACTIVATIONS", "default_d_ff", "FeedForward", "EncoderBlock",
           "DecoderBlock", "Seq2SeqTransformer", "shift_right", "key_padding_mask",
           "greedy_decode", "beam_search", "block_parameters", "block_flops"]

# The course's own activations (chapter 3), written with plain tensor operations.
ACTIVATIONS = {
    "relu": mnn.relu,
    "gelu": mnn.gelu,                                        # x·Φ(x), exact
    "gelu_tanh": lambda x: mnn.gelu(x, approximate="tanh"),  # GPT-2's approximation
    "relu2": mnn.relu2,                                      # squared ReLU
    "silu": mnn.silu,
}
# PyTorch's built-in kernels for the same functions (equal to float64 rounding, one operation
# instead of several): the default of FeedForward, so that the GPT of chapter 14 trains at full speed.
FUSED_ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu2": lambda x: F.relu(x).square(),
    "silu": F.silu,
}


def default_d_ff(d_model, activation):
    """4d, or for SwiGLU 8d/3 rounded up to a multiple of 8 (same parameters as a 4d FFN)."""
    if activation == "swiglu":
        return 8 * -(-8 * d_model // 24)                  # ⌈8d/3 / 8⌉ · 8 in integer arithmetic
    return 4 * d_model


class FeedForward(nn.Module):
    """Position-wise feed-forward network with activation relu | gelu | gelu_tanh | relu2 | silu,
    or the gated "swiglu". Acts on the last dimension only, so tokens never mix here.

        FFN(x) = φ(x W₁ + b₁) W₂ + b₂,  W₁ = fc.weight.T,  W₂ = proj.weight.T
        SwiGLU(x) = (SiLU(x W₁) ⊙ x W₃) W₂,  W₁ = gate.weight.T (gate), W₃ = fc.weight.T (value)

    ``fused=False`` uses mathref.nn's activations (ACTIVATIONS, chapter 3), ``fused=True``
    (default) PyTorch's kernels (FUSED_ACTIVATIONS); both give the same numbers. Dropout, when
    asked for, acts on the output (as the paper's residual dropout). See chapter 13.
    """

    def __init__(self, d_model, d_ff=None, activation="gelu", bias=True, dropout=0.0, fused=True):
        super().__init__()
        d_model = check_int("d_model", d_model, min=1)
        check_int("d_ff", d_ff, min=1, optional=True)
        check_probability("dropout", dropout, allow_one=False)
        if activation != "swiglu" and activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS) + ['swiglu']}, "
                             f"got {activation!r}")
        self.activation, self.fused = activation, fused
        d_ff = default_d_ff(d_model, activation) if d_ff is None else d_ff
        self.fc = nn.Linear(d_model, d_ff, bias=bias)
        if activation == "swiglu":
            self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        if self.activation == "swiglu":
            if self.fused:
                h = F.silu(self.gate(x)) * self.fc(x)
            else:   # mathref.nn.swiglu([a, b]) = a ⊙ SiLU(b): value first, gate second
                h = mnn.swiglu(torch.cat([self.fc(x), self.gate(x)], dim=-1))
        else:
            table = FUSED_ACTIVATIONS if self.fused else ACTIVATIONS
            h = table[self.activation](self.fc(x))
        return self.dropout(self.proj(h))


# ------------------------------------------------------------------------------- blocks
def _make_norm(norm, d_model, eps, bias=True):
    if norm == "layer":
        return LayerNorm(d_model, eps=eps, bias=bias)
    if norm == "rms":
        return RMSNorm(d_model, eps=eps)
    raise ValueError(f"norm must be 'layer' or 'rms', got {norm!r}")


def _check_x(x, d_model, name="x"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name} must have shape [B, T, {d_model}], got {tuple(x.shape)}")


def _activation_name(fn):
    """Name of the activation a torch Transformer layer stores (a function or a module)."""
    if fn is F.relu or isinstance(fn, nn.ReLU):
        return "relu"
    if fn is F.gelu or (isinstance(fn, nn.GELU) and fn.approximate == "none"):
        return "gelu"
    if isinstance(fn, nn.GELU) and fn.approximate == "tanh":
        return "gelu_tanh"
    raise ValueError(f"cannot copy a layer with activation {fn!r}: use relu or gelu")


def _copy_linear(ours, theirs):
    ours.weight.copy_(theirs.weight)
    if theirs.bias is not None:
        ours.bias.copy_(theirs.bias)


def _copy_norm(ours, theirs):
    ours.weight.copy_(theirs.weight)
    if getattr(theirs, "bias", None) is not None:
        ours.bias.copy_(theirs.bias)


@torch.no_grad()
def _from_torch_layer(cls, layer, norms):
    """Build a ``cls`` block shaped like a torch Transformer layer and copy what both block
    kinds share: self-attention, the FFN's two Linears and the named norms."""
    attn = layer.self_attn
    if not attn.batch_first:
        raise ValueError(f"{cls.__name__}.from_torch needs a layer built with batch_first=True")
    if layer.norm1.normalized_shape != (attn.embed_dim,):
        raise ValueError("the layer's norms must act on the last dimension d_model")
    ours = cls(attn.embed_dim, attn.num_heads, layer.linear1.out_features,
               dropout=layer.dropout.p, activation=_activation_name(layer.activation),
               norm_first=layer.norm_first, bias=layer.linear1.bias is not None,
               eps=layer.norm1.eps)
    ours = ours.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    ours.self_attn.load_torch_weights(attn)
    _copy_linear(ours.ffn.fc, layer.linear1)
    _copy_linear(ours.ffn.proj, layer.linear2)
    for name in norms:
        _copy_norm(getattr(ours, name), getattr(layer, name))
    return ours


class EncoderBlock(nn.Module):
    """One encoder layer: self-attention and FFN, each wrapped in a residual connection with a
    norm after the addition (``norm_first=False``, post-norm, the paper and torch's default)

        x ← Norm₁(x + Dropout(SelfAttn(x)));   x ← Norm₂(x + FFN(x))

    or before the sub-layer (``norm_first=True``, pre-norm)

        x ← x + Dropout(SelfAttn(Norm₁(x)));   x ← x + FFN(Norm₂(x)).

    Parameters: 4d² + 4d (attention) + 2·d·d_ff + d_ff + d (FFN) + 4d (two LayerNorms).
    Dropout acts on attention weights and on each sub-layer output; ``nn.TransformerEncoderLayer``
    also drops inside the FFN, after the activation (the same in eval mode). See chapter 13.
    """

    def __init__(self, d_model, n_heads, d_ff=None, dropout=0.0, activation="relu",
                 norm_first=True, norm="layer", bias=True, eps=1e-5):
        super().__init__()
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout)
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout)
        self.norm1 = _make_norm(norm, d_model, eps, bias)
        self.norm2 = _make_norm(norm, d_model, eps, bias)
        self.dropout1 = nn.Dropout(dropout)

    def forward(self, x, mask=None, need_weights=False):
        """x: [B, T, d_model]; mask: bool (True = allowed) or additive, broadcast to
        [B, H, T, T] (for padding: ``key_padding_mask(src, pad_id)``, shape [B, 1, 1, T])."""
        _check_x(x, self.d_model)
        if self.norm_first:
            a, w = self.self_attn(self.norm1(x), mask=mask, need_weights=True)
            x = x + self.dropout1(a)
            x = x + self.ffn(self.norm2(x))
        else:
            a, w = self.self_attn(x, mask=mask, need_weights=True)
            x = self.norm1(x + self.dropout1(a))
            x = self.norm2(x + self.ffn(x))
        return (x, w) if need_weights else x

    @classmethod
    def from_torch(cls, layer):
        """Copy an ``nn.TransformerEncoderLayer(batch_first=True)`` (relu or gelu, either
        norm placement). Its ``src_key_padding_mask`` (True = padding) corresponds to our
        ``mask=key_padding_mask(...)`` (True = allowed)."""
        return _from_torch_layer(cls, layer, ("norm1", "norm2"))


class DecoderBlock(nn.Module):
    """One decoder layer: causal self-attention, cross-attention, FFN (post- or pre-norm)

        pre-norm:  y ← y + SelfAttn(Norm₁(y), causal);  y ← y + CrossAttn(Norm₂(y), m);
                   y ← y + FFN(Norm₃(y))
        cross-attention:  Q = Norm₂(y) W_Q^c,  K = m W_K^c,  V = m W_V^c

    m is the encoder output ("memory"); W_K^c, W_V^c belong to this block, and only the
    encoder's padding is masked (every target position may look at the whole source).
    ``cross_attention=False`` drops the middle sub-layer: the decoder-only (GPT) block.
    Parameters: 8d² + 8d (two attentions) + 2·d·d_ff + d_ff + d (FFN) + 6d (three LayerNorms).
    See chapter 13.
    """

    def __init__(self, d_model, n_heads, d_ff=None, dropout=0.0, activation="relu",
                 norm_first=True, norm="layer", bias=True, eps=1e-5, cross_attention=True):
        super().__init__()
        self.d_model, self.norm_first = d_model, norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout)
        self.norm1 = _make_norm(norm, d_model, eps, bias)
        self.dropout1 = nn.Dropout(dropout)
        if cross_attention:
            self.cross_attn = MultiHeadAttention(d_model, n_heads, bias=bias, dropout=dropout)
            self.norm2 = _make_norm(norm, d_model, eps, bias)
            self.dropout2 = nn.Dropout(dropout)
        else:
            self.cross_attn = None
        self.ffn = FeedForward(d_model, d_ff, activation, bias=bias, dropout=dropout)
        self.norm3 = _make_norm(norm, d_model, eps, bias)

    def forward(self, y, memory=None, self_mask=None, memory_mask=None, is_causal=True,
                need_weights=False):
        """y: [B, T, d] decoder stream; memory: [B, S, d] encoder output (None for a block
        without cross-attention). ``self_mask`` adds to the causal mask (e.g. target padding);
        ``memory_mask`` masks keys of the memory, normally ``key_padding_mask(src, pad_id)``.
        With ``need_weights`` also returns (self-attention, cross-attention) weights."""
        _check_x(y, self.d_model, "y")
        if self.cross_attn is not None:
            if memory is None:
                raise ValueError("this block has cross-attention: pass memory [B, S, d_model]")
            _check_x(memory, self.d_model, "memory")
            if memory.shape[0] != y.shape[0]:
                raise ValueError(f"y and memory must have the same batch size, got "
                                 f"{tuple(y.shape)} and {tuple(memory.shape)}")
        elif memory is not None:
            raise ValueError("this block has no cross-attention (cross_attention=False)")
        pre = self.norm_first
        h = self.norm1(y) if pre else y
        a, w_self = self.self_attn(h, mask=self_mask, is_causal=is_causal, need_weights=True)
        y = y + self.dropout1(a) if pre else self.norm1(y + self.dropout1(a))
        w_cross = None
        if self.cross_attn is not None:
            h = self.norm2(y) if pre else y
            a, w_cross = self.cross_attn(h, kv=memory, mask=memory_mask, need_weights=True)
            y = y + self.dropout2(a) if pre else self.norm2(y + self.dropout2(a))
        y = y + self.ffn(self.norm3(y)) if pre else self.norm3(y + self.ffn(y))
        return (y, (w_self, w_cross)) if need_weights else y

    @classmethod
    def from_torch(cls, layer):
        """Copy an ``nn.TransformerDecoderLayer(batch_first=True)``: self_attn, multihead_attn
        (the cross-attention), linear1/linear2, norm1/norm2/norm3."""
        ours = _from_torch_layer(cls, layer, ("norm1", "norm2", "norm3"))
        with torch.no_grad():
            ours.cross_attn.load_torch_weights(layer.multihead_attn)
        return ours


# ------------------------------------------------------------------------------- model
def key_padding_mask(ids, pad_id):
    """Boolean mask [B, 1, 1, S], True where ``ids`` [B, S] is a real token (not ``pad_id``):
    broadcast over heads and queries, it blocks padded keys only."""
    check_tensor("ids", ids, kind="int")
    if ids.dim() != 2:
        raise ValueError(f"ids must be [B, S] token ids, got shape {tuple(ids.shape)}")
    pad_id = check_int("pad_id", pad_id)
    return (ids != pad_id)[:, None, None, :]


def shift_right(targets, bos_id):
    """Teacher forcing input: (⟨bos⟩, y₁, …, y_{T−1}) from targets (y₁, …, y_T), shape [B, T].
    Position t of the decoder reads y_{<t} (with ⟨bos⟩ in front) and is trained to output y_t."""
    check_tensor("targets", targets, kind="int")
    if targets.dim() != 2:
        raise ValueError(f"targets must be [B, T] token ids, got shape {tuple(targets.shape)}")
    bos_id = check_int("bos_id", bos_id)
    bos = torch.full_like(targets[:, :1], bos_id)
    return torch.cat([bos, targets[:, :-1]], dim=1)


class Seq2SeqTransformer(nn.Module):
    """A small encoder–decoder Transformer (the 2017 architecture, in pre- or post-norm):

        memory = Encoder(E_src[x] + PE),   logits = Decoder(E_tgt[y_in] + PE, memory) W_head

    PE: sinusoidal positions (chapter 12). With ``norm_first`` both stacks end with a final
    norm. Two parts of the 2017 recipe are left out: the embeddings are not multiplied by
    √d_model, and the embedding and output matrices are not shared. ``forward(src, tgt_in)`` returns logits [B, T, V_tgt]. See chapter 13.
    """

    def __init__(self, src_vocab, tgt_vocab, d_model=64, n_heads=4, n_enc_layers=2,
                 n_dec_layers=2, d_ff=None, dropout=0.0, activation="relu", norm_first=True,
                 norm="layer", max_len=128, pad_id=0):
        super().__init__()
        for name, value in (("src_vocab", src_vocab), ("tgt_vocab", tgt_vocab),
                            ("d_model", d_model), ("n_heads", n_heads), ("max_len", max_len)):
            check_int(name, value, min=1)
        check_int("n_enc_layers", n_enc_layers, min=0)
        check_int("n_dec_layers", n_dec_layers, min=0)
        check_int("pad_id", pad_id)
        self.d_model, self.pad_id, self.max_len = d_model, pad_id, max_len
        self.src_emb = nn.Embedding(src_vocab, d_model)
        self.tgt_emb = nn.Embedding(tgt_vocab, d_model)
        self.register_buffer("pe", sinusoidal_positions(max_len, d_model), persistent=False)
        self.drop = nn.Dropout(dropout)
        kw = dict(d_ff=d_ff, dropout=dropout, activation=activation, norm_first=norm_first,
                  norm=norm)
        self.encoder = nn.ModuleList(EncoderBlock(d_model, n_heads, **kw)
                                     for _ in range(n_enc_layers))
        self.decoder = nn.ModuleList(DecoderBlock(d_model, n_heads, **kw)
                                     for _ in range(n_dec_layers))
        self.enc_norm = _make_norm(norm, d_model, 1e-5) if norm_first else nn.Identity()
        self.dec_norm = _make_norm(norm, d_model, 1e-5) if norm_first else nn.Identity()
        self.lm_head = nn.Linear(d_model, tgt_vocab)

    def _embed(self, table, ids):
        if ids.dim() != 2:
            raise ValueError(f"token ids must be [B, T], got shape {tuple(ids.shape)}")
        if ids.shape[1] > self.max_len:
            raise ValueError(f"sequence of length {ids.shape[1]} exceeds max_len={self.max_len}")
        return self.drop(table(ids) + self.pe[:ids.shape[1]].to(table.weight.dtype))

    def encode(self, src):
        """memory [B, S, d] and the source padding mask [B, 1, 1, S] (True = real token)."""
        mask = key_padding_mask(src, self.pad_id)
        x = self._embed(self.src_emb, src)
        for block in self.encoder:
            x = block(x, mask=mask)
        return self.enc_norm(x), mask

    def decode(self, tgt_in, memory, memory_mask, need_weights=False):
        """Logits [B, T, V] for decoder input ``tgt_in`` [B, T]; with ``need_weights`` also the
        list of cross-attention weights [B, H, T, S], one per decoder block."""
        y = self._embed(self.tgt_emb, tgt_in)
        cross = []
        for block in self.decoder:
            y, (_, w) = block(y, memory, memory_mask=memory_mask, need_weights=True)
            cross.append(w)
        logits = self.lm_head(self.dec_norm(y))
        return (logits, cross) if need_weights else logits

    def forward(self, src, tgt_in):
        memory, mask = self.encode(src)
        return self.decode(tgt_in, memory, mask)


@torch.no_grad()
def greedy_decode(model, src, bos_id, eos_id, max_len):
    """Greedy decoding: start from ⟨bos⟩, append argmax_v p(v | y_<t, x) until ⟨eos⟩ or
    ``max_len`` tokens. Returns [B, ≤ max_len] ids (after ⟨bos⟩; ⟨eos⟩ included, then pad)."""
    check_tensor("src", src, dims=2, kind="int")
    max_len = check_int("max_len", max_len, min=0)
    memory, mask = model.encode(src)
    out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
    for _ in range(max_len):
        nxt = model.decode(out, memory, mask)[:, -1].argmax(dim=-1)
        nxt = torch.where(done, torch.full_like(nxt, model.pad_id), nxt)
        out = torch.cat([out, nxt[:, None]], dim=1)
        done |= nxt == eos_id
        if done.all():
            break
    return out[:, 1:]


@torch.no_grad()
def beam_search(model, src, bos_id, eos_id, max_len, beam_size=4):
    """Beam search for one source sequence ``src`` [S]: keep the ``beam_size`` prefixes with the
    largest log-probability Σ_t log p(y_t | y_<t, x); a prefix ending in ⟨eos⟩ is finished.
    Stops when the best finished score beats every open prefix (scores only decrease).
    The best ``beam_size`` candidates are kept each step and the finished ones among them are
    set aside, so the open beam shrinks when a candidate finishes (it is not refilled to
    ``beam_size`` open prefixes, as fairseq-style searches do).
    Returns (ids, score): the best sequence (⟨eos⟩ included if produced) and its log-prob."""
    if src.dim() != 1:
        raise ValueError(f"beam_search decodes one sequence: src must be [S], got {tuple(src.shape)}")
    check_tensor("src", src, kind="int")
    beam_size = check_int("beam_size", beam_size, min=1)
    max_len = check_int("max_len", max_len, min=0)
    memory, mask = model.encode(src[None])
    beams, finished = [([bos_id], 0.0)], []
    for _ in range(max_len):
        seqs = torch.tensor([s for s, _ in beams], device=src.device)
        n = len(beams)
        logp = F.log_softmax(model.decode(seqs, memory.expand(n, -1, -1),
                                          mask.expand(n, -1, -1, -1))[:, -1].double(), dim=-1)
        top = logp.topk(min(beam_size, logp.shape[-1]), dim=-1)
        candidates = [(seq + [tok], score + lp)
                      for (seq, score), lps, toks in zip(beams, top.values.tolist(),
                                                         top.indices.tolist())
                      for lp, tok in zip(lps, toks)]
        candidates.sort(key=lambda c: -c[1])
        beams = []
        for seq, score in candidates[:beam_size]:
            (finished if seq[-1] == eos_id else beams).append((seq, score))
        if not beams or (finished and max(f[1] for f in finished) >= beams[0][1]):
            break
    best = max(finished + beams, key=lambda c: c[1])
    return best[0][1:], best[1]


# ------------------------------------------------------------------------------- counting
def block_parameters(d_model, d_ff=None, kind="encoder", activation="relu", bias=True,
                     norm="layer"):
    """Parameters of one block, by formula. With biases and LayerNorm, d_ff = 4d:

        attention  4d² + 4d        FFN  2·d·d_ff + d_ff + d   (SwiGLU: 3·d·d_ff + 2·d_ff + d)
        LayerNorm  2d (RMSNorm d)
        encoder = attention + FFN + 2 norms      = 12d² + 13d
        decoder = 2 attentions + FFN + 3 norms   = 16d² + 19d
        decoder_only = encoder's count (GPT block)
    """
    if kind not in ("encoder", "decoder", "decoder_only"):
        raise ValueError(f"kind must be 'encoder', 'decoder' or 'decoder_only', got {kind!r}")
    if norm not in ("layer", "rms"):
        raise ValueError(f"norm must be 'layer' or 'rms', got {norm!r}")
    d = d_model
    d_ff = default_d_ff(d, activation) if d_ff is None else d_ff
    b = 1 if bias else 0
    attn = 4 * d * d + 4 * d * b
    n_mat = 3 if activation == "swiglu" else 2
    ffn = n_mat * d * d_ff + b * ((n_mat - 1) * d_ff + d)
    per_norm = 2 * d if (norm == "layer" and bias) else d
    n_attn, n_norm = (2, 3) if kind == "decoder" else (1, 2)
    return n_attn * attn + ffn + n_norm * per_norm


def block_flops(d_model, T, d_ff=None, kind="encoder", S=None, activation="relu"):
    """Forward FLOPs of the matrix products of one block on one sequence (2 per multiply–add;
    biases and norms, O(T·d), and the softmax, O(H·T²) for H heads (O(H·T·S) across), are left
    out). T tokens in, S memory tokens (decoder):

        projections      2·T·4d²            (W_Q, W_K, W_V, W_O)
        scores, mixing   2·T·T·d + 2·T·T·d  (Q Kᵀ and P V, all heads together; a causal mask
                                            still computes the full T×T here)
        FFN              2·T·2·d·d_ff       (SwiGLU: 2·T·3·d·d_ff)
        cross-attention  2·T·2d² + 2·S·2d² + 4·T·S·d   (Q, O on T tokens; K, V on S)
    """
    if kind not in ("encoder", "decoder", "decoder_only"):
        raise ValueError(f"kind must be 'encoder', 'decoder' or 'decoder_only', got {kind!r}")
    d = d_model
    d_ff = default_d_ff(d, activation) if d_ff is None else d_ff
    n_mat = 3 if activation == "swiglu" else 2
    flops = 2 * T * 4 * d * d + 4 * T * T * d + 2 * T * n_mat * d * d_ff
    if kind == "decoder":
        if S is None:
            raise ValueError("a decoder block needs S, the number of memory (source) tokens")
        flops += 2 * T * 2 * d * d + 2 * S * 2 * d * d + 4 * T * S * d
    return flops
