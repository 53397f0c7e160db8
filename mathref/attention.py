"""Scaled dot-product attention, masks, multi-head attention, and its backward pass by hand.
See chapter 11.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V          Q: [..., T, d_k], K: [..., S, d_k]

Masks follow the course convention: an additive float mask holds 0 where attention is allowed
and −∞ where it is blocked, added after the 1/√d_k scaling; a boolean mask means True =
allowed (as in ``F.scaled_dot_product_attention``). A query row whose keys are all blocked
gets weights 0 and output 0 (as PyTorch's SDPA does), never NaN.
"""
import math

import torch
from torch import nn

from mathref._validation import check_int, check_number, check_probability, check_tensor, \
    resolve_device

__all__ = ["causal_mask", "padding_mask", "to_additive_mask", "attention_weights",
           "scaled_dot_product_attention", "softmax_backward", "attention_backward",
           "AttentionFunction", "MultiHeadAttention", "repeat_kv"]


def causal_mask(T, S=None, device=None, dtype=torch.float32):
    """Additive causal mask of shape [T, S]: query i may see key j iff j ≤ i + (S − T).

    The offset aligns the mask to the bottom right, so T new queries at the end of S cached
    keys see everything before them (for T = S it is the usual lower triangle).
    """
    T = check_int("T", T, min=0)
    S = T if S is None else check_int("S", S, min=0)
    device = resolve_device(device)
    if T > S:
        raise ValueError(f"causal_mask needs T ≤ S (queries are the last T of S positions), "
                         f"got T={T}, S={S}")
    allowed = torch.ones(T, S, dtype=torch.bool, device=device).tril(diagonal=S - T)
    return torch.zeros(T, S, dtype=dtype, device=device).masked_fill(~allowed, float("-inf"))


def padding_mask(lengths, S, device=None, dtype=torch.float32):
    """Additive key-padding mask [B, 1, 1, S] from sequence lengths: keys j ≥ length blocked."""
    S = check_int("S", S, min=0)
    lengths = torch.as_tensor(lengths, device=resolve_device(device))
    if lengths.dim() != 1 or lengths.is_floating_point() or lengths.dtype == torch.bool:
        raise ValueError(f"lengths must be a 1-D sequence of integers, got {lengths.dtype} of "
                         f"shape {tuple(lengths.shape)}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > S):
        raise ValueError(f"lengths must lie in [0, S={S}], got {lengths.tolist()}")
    allowed = torch.arange(S, device=lengths.device) < lengths[:, None]
    return to_additive_mask(allowed[:, None, None, :], dtype=dtype)


def to_additive_mask(mask, dtype=torch.float32):
    """Boolean (True = allowed) → additive float (0 / −∞); a float mask is returned as is."""
    check_tensor("mask", mask)
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(
            ~mask, float("-inf"))
    if not mask.is_floating_point():
        raise TypeError(f"mask must be bool (True = allowed) or float (additive), got {mask.dtype}")
    return mask.to(dtype)


def _check_qkv(q, k, v):
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_tensor(name, x, kind="float")
    if q.dim() < 2 or k.dim() != q.dim() or v.dim() != q.dim():
        raise ValueError(f"q, k, v must have the same number of dims (≥ 2), got shapes "
                         f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] != k.shape[-1]:
        raise ValueError(f"q and k must share the last dim d_k, got {q.shape[-1]} and {k.shape[-1]}")
    if k.shape[-2] != v.shape[-2]:
        raise ValueError(f"k and v must have the same number of keys S, got {k.shape[-2]} and "
                         f"{v.shape[-2]}")


def repeat_kv(x, n_rep):
    """[B, H_kv, S, d] → [B, H_kv·n_rep, S, d]: each key/value head serves n_rep query heads."""
    n_rep = check_int("n_rep", n_rep, min=1)
    check_tensor("x", x, min_dims=3)
    return x if n_rep == 1 else x.repeat_interleave(n_rep, dim=-3)


def _safe_softmax(scores):
    """Row softmax that returns 0 (not NaN) on rows where every score is −∞."""
    row_max = scores.amax(dim=-1, keepdim=True)
    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))
    e = torch.exp(scores - row_max)
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, torch.ones_like(total))


def attention_weights(q, k, mask=None, is_causal=False, scale=None):
    """P = softmax(Q Kᵀ · scale + M) with scale = 1/√d_k by default; shape [..., T, S]."""
    _check_qkv(q, k, k)
    check_number("scale", scale, optional=True)
    T, S = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if is_causal:
        scores = scores + causal_mask(T, S, device=q.device, dtype=scores.dtype)
    if mask is not None:
        scores = scores + to_additive_mask(mask, dtype=scores.dtype)
    return _safe_softmax(scores)


def scaled_dot_product_attention(q, k, v, mask=None, is_causal=False, scale=None,
                                 dropout_p=0.0, training=True, enable_gqa=False,
                                 return_weights=False):
    """softmax(Q Kᵀ/√d_k + M) V, written out. Shapes: q [..., H, T, d_k], k [..., H_kv, S, d_k],
    v [..., H_kv, S, d_v] → [..., H, T, d_v].

    ``mask``: bool (True = allowed) or additive float, broadcastable to [..., H, T, S].
    ``is_causal``: bottom-right aligned causal mask (equal to SDPA's when T = S).
    ``enable_gqa``: H_kv may divide H; each key/value head serves H / H_kv query heads.
    ``dropout_p``: attention dropout on the weights (inverted scaling), only when ``training``.
    Axis −3 is read as heads only when its sizes differ and neither is 1; a size of 1 (a
    3-D call whose batch broadcasts, or one shared key/value head) broadcasts as usual.
    """
    _check_qkv(q, k, v)
    check_probability("dropout_p", dropout_p, allow_one=False)
    if (q.dim() >= 3 and k.dim() >= 3 and k.shape[-3] != q.shape[-3]
            and 1 not in (q.shape[-3], k.shape[-3])):
        if not enable_gqa or q.shape[-3] % k.shape[-3]:
            raise ValueError(f"{q.shape[-3]} query heads and {k.shape[-3]} key/value heads: "
                             f"pass enable_gqa=True with H divisible by H_kv")
        n_rep = q.shape[-3] // k.shape[-3]
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
    weights = attention_weights(q, k, mask=mask, is_causal=is_causal, scale=scale)
    if dropout_p > 0.0 and training:
        weights = torch.nn.functional.dropout(weights, p=dropout_p)
    out = weights @ v
    return (out, weights) if return_weights else out


def softmax_backward(p, grad_p):
    """Backward of p = softmax(s) along the last dim: ∂L/∂s = p ⊙ (g − Σⱼ gⱼ pⱼ).

    From the Jacobian ∂pᵢ/∂sⱼ = pᵢ(δᵢⱼ − pⱼ).
    """
    return p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))


def attention_backward(q, k, v, weights, grad_out, scale=None):
    """Gradients of O = P V with P = softmax(Q Kᵀ·scale + M), by hand:

        G_V = Pᵀ G_O,   G_P = G_O Vᵀ,   G_S = P ⊙ (G_P − rowsum(G_P ⊙ P)),
        G_Q = G_S K · scale,   G_K = G_Sᵀ Q · scale.

    ``weights`` is P from the forward pass (masked entries are 0, so they get no gradient).
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    grad_v = weights.transpose(-2, -1) @ grad_out
    grad_p = grad_out @ v.transpose(-2, -1)
    grad_s = softmax_backward(weights, grad_p)
    grad_q = (grad_s @ k) * scale
    grad_k = (grad_s.transpose(-2, -1) @ q) * scale
    return grad_q, grad_k, grad_v


class AttentionFunction(torch.autograd.Function):
    """Scaled dot-product attention with the hand-written backward above (for gradcheck)."""

    @staticmethod
    def forward(ctx, q, k, v, mask=None, is_causal=False):
        weights = attention_weights(q, k, mask=mask, is_causal=is_causal)
        ctx.save_for_backward(q, k, v, weights)
        return weights @ v

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, weights = ctx.saved_tensors
        grad_q, grad_k, grad_v = attention_backward(q, k, v, weights, grad_out)
        return grad_q, grad_k, grad_v, None, None


class MultiHeadAttention(nn.Module):
    """Multi-head attention with optional grouped-query heads. See chapter 11.

    Q = X W_Q, K = X_kv W_K, V = X_kv W_V are split into H heads of d_k = d_model / H (K and V
    into H_kv heads), attention runs per head, the heads are concatenated and multiplied once
    by W_O. Parameters: 4d² + 4d with biases and H_kv = H.
    """

    def __init__(self, d_model, n_heads, n_kv_heads=None, bias=True, dropout=0.0):
        super().__init__()
        d_model = check_int("d_model", d_model, min=1)
        n_heads = check_int("n_heads", n_heads, min=1)
        n_kv_heads = n_heads if n_kv_heads is None else check_int("n_kv_heads", n_kv_heads, min=1)
        check_probability("dropout", dropout, allow_one=False)
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        if n_heads % n_kv_heads:
            raise ValueError(f"n_heads={n_heads} is not divisible by n_kv_heads={n_kv_heads}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        self.dropout = dropout
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)

    def split_heads(self, x, n_heads):
        """[B, T, n_heads·d_k] → [B, n_heads, T, d_k]."""
        B, T, _ = x.shape
        return x.view(B, T, n_heads, self.d_k).transpose(1, 2)

    def forward(self, x, kv=None, mask=None, is_causal=False, need_weights=False, fused=False):
        """x: [B, T, d_model]; kv: [B, S, d_model] for cross-attention (default: x).

        ``mask`` broadcasts to [B, H, T, S] (bool True = allowed, or additive float).
        ``fused=True`` calls ``F.scaled_dot_product_attention`` instead of the readable path;
        with ``need_weights=True`` it takes the readable path anyway (SDPA returns no weights).
        ``is_causal`` is bottom-right aligned on both paths (query i of T sees keys
        j ≤ i + S − T, ``causal_mask``); SDPA's own ``is_causal`` is top-left when T ≠ S, so
        the fused path passes it only when T = S and no mask is given, and an explicit
        bottom-right mask otherwise.
        """
        check_tensor("x", x, kind="float")
        if x.dim() != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"x must be [B, T, {self.d_model}], got {tuple(x.shape)}")
        if kv is not None and (not isinstance(kv, torch.Tensor) or kv.dim() != 3
                               or kv.shape[0] not in (x.shape[0], 1) or kv.shape[-1] != self.d_model):
            raise ValueError(f"kv must be [{x.shape[0]} or 1, S, {self.d_model}], got "
                             f"{tuple(getattr(kv, 'shape', ())) or type(kv).__name__}")
        kv = x if kv is None else kv
        q = self.split_heads(self.w_q(x), self.n_heads)
        k = self.split_heads(self.w_k(kv), self.n_kv_heads)
        v = self.split_heads(self.w_v(kv), self.n_kv_heads)
        p = self.dropout if self.training else 0.0
        weights = None
        if fused and not need_weights:
            T, S = q.shape[-2], k.shape[-2]
            if is_causal and (T != S or mask is not None):
                causal = causal_mask(T, S, device=q.device, dtype=q.dtype)   # bottom-right
                mask = causal if mask is None else to_additive_mask(mask, dtype=q.dtype) + causal
                is_causal = False
            out = torch.nn.functional.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p, is_causal=is_causal,
                enable_gqa=self.n_kv_heads != self.n_heads)
        else:
            out, weights = scaled_dot_product_attention(
                q, k, v, mask=mask, is_causal=is_causal, dropout_p=p, training=self.training,
                enable_gqa=True, return_weights=True)
        B, _, T, _ = out.shape
        out = self.w_o(out.transpose(1, 2).reshape(B, T, self.d_model))
        return (out, weights) if need_weights else out

    @classmethod
    def from_torch(cls, mha):
        """A copy of an ``nn.MultiheadAttention`` (batch_first), see ``load_torch_weights``."""
        ours = cls(mha.embed_dim, mha.num_heads, bias=mha.in_proj_bias is not None,
                   dropout=mha.dropout)
        ours = ours.to(device=mha.out_proj.weight.device, dtype=mha.out_proj.weight.dtype)
        return ours.load_torch_weights(mha)

    @torch.no_grad()
    def load_torch_weights(self, mha):
        """Copy the weights of an ``nn.MultiheadAttention`` whose in_proj_weight [3d, d] stacks
        [W_Q; W_K; W_V] (each in nn.Linear's (out, in) layout) and whose out_proj is W_O."""
        d = mha.embed_dim
        for i, lin in enumerate((self.w_q, self.w_k, self.w_v)):
            lin.weight.copy_(mha.in_proj_weight[i * d:(i + 1) * d])
            if mha.in_proj_bias is not None:
                lin.bias.copy_(mha.in_proj_bias[i * d:(i + 1) * d])
        self.w_o.weight.copy_(mha.out_proj.weight)
        if mha.out_proj.bias is not None:
            self.w_o.bias.copy_(mha.out_proj.bias)
        return self
