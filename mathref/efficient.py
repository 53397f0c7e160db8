"""Efficient attention, written to be read: FlashAttention's tiling with the online softmax,
linear attention, and the memory arithmetic of the KV cache. See chapter 15.

Online softmax over a row of scores seen block by block keeps a running max m and a running
sum ℓ of exp(s − m); when a new block raises the max to m', everything accumulated so far is
rescaled by exp(m − m'):

    m' = max(m, max_j s_j),   ℓ' = ℓ·e^(m − m') + Σ_j e^(s_j − m'),   O' = O·e^(m − m') + Σ_j e^(s_j − m') v_j

and the output is O/ℓ at the end. The full T×S score matrix is never stored.

Also here: the FLOP and memory counts of attention and of a Transformer layer, the backward
pass that recomputes the tiles from the row log-sum-exp, and a readable dynamic loss scaler
for float16 mixed precision.
"""
import math

import torch

from mathref.attention import _check_qkv

from mathref._validation import check_int, check_number, check_tensor

__all__ = ["online_softmax", "flash_attention", "flash_attention_backward",
           "FlashAttentionFunction", "linear_attention", "kv_cache_bytes", "attention_flops",
           "layer_flops", "attention_memory_bytes", "DynamicLossScaler"]


def online_softmax(x, block=4):
    """Softmax of a 1-D tensor computed in one streaming pass over blocks (running max and sum),
    then normalized. Equal to ``torch.softmax(x, 0)``; shows the rescaling rule."""
    check_tensor("x", x, kind="float")
    if x.dim() != 1:
        raise ValueError(f"online_softmax takes a 1-D tensor, got shape {tuple(x.shape)}")
    block = check_int("block", block, min=1)
    m = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)
    total = torch.zeros((), dtype=x.dtype, device=x.device)
    for start in range(0, x.numel(), block):
        chunk = x[start:start + block]
        m_new = torch.maximum(m, chunk.max())
        total = total * torch.exp(m - m_new) + torch.exp(chunk - m_new).sum()
        m = m_new
    return torch.exp(x - m) / total


def flash_attention(q, k, v, is_causal=False, block_q=32, block_k=32, scale=None,
                    return_lse=False):
    """Exact attention softmax(QKᵀ·scale + causal)V by tiles of block_q queries × block_k keys,
    with the online softmax: memory O(T·d) instead of O(T·S). Shapes as in
    ``mathref.attention.scaled_dot_product_attention``; causal masks are bottom-right aligned.

    This is FlashAttention's algorithm (forward pass) in plain PyTorch: it shows the math, not
    the speed, which comes from running the loops inside one GPU kernel in fast on-chip memory.
    Autograd differentiates through it (the real kernel recomputes the tiles in its backward,
    see ``flash_attention_backward``). ``return_lse=True`` also returns the row log-sum-exp
    lse_i = m_i + log ℓ_i ([..., T]), the only statistic that backward needs.
    """
    _check_qkv(q, k, v)
    block_q, block_k = check_int("block_q", block_q, min=1), check_int("block_k", block_k, min=1)
    check_number("scale", scale, optional=True)
    T, S = q.shape[-2], k.shape[-2]
    if is_causal and T > S:
        raise ValueError(f"causal attention needs T ≤ S, got T={T}, S={S}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    offset = S - T  # query i sits at position i + offset
    out_blocks, lse_blocks = [], []
    for q0 in range(0, T, block_q):
        qb = q[..., q0:q0 + block_q, :] * scale
        rows = qb.shape[-2]
        m = torch.full(qb.shape[:-1] + (1,), float("-inf"), dtype=q.dtype, device=q.device)
        l = torch.zeros_like(m)
        acc = torch.zeros(qb.shape[:-1] + (v.shape[-1],), dtype=v.dtype, device=v.device)
        last_key = q0 + rows - 1 + offset if is_causal else S - 1
        for k0 in range(0, last_key + 1, block_k):
            s = qb @ k[..., k0:k0 + block_k, :].transpose(-2, -1)
            if is_causal and k0 + s.shape[-1] - 1 > q0 + offset:
                q_pos = torch.arange(q0, q0 + rows, device=q.device)[:, None] + offset
                k_pos = torch.arange(k0, k0 + s.shape[-1], device=q.device)[None, :]
                s = s.masked_fill(k_pos > q_pos, float("-inf"))
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            p = torch.exp(s - m_new)
            correction = torch.exp(m - m_new)
            l = l * correction + p.sum(dim=-1, keepdim=True)
            acc = acc * correction + p @ v[..., k0:k0 + block_k, :]
            m = m_new
        out_blocks.append(acc / l)
        lse_blocks.append((m + torch.log(l)).squeeze(-1))
    out = torch.cat(out_blocks, dim=-2)
    return (out, torch.cat(lse_blocks, dim=-1)) if return_lse else out


def _tile_scores(q, k, q0, k0, block_q, block_k, scale, is_causal, offset):
    """Scaled scores of one tile, with the causal entries set to −∞ (bottom-right aligned)."""
    s = (q[..., q0:q0 + block_q, :] @ k[..., k0:k0 + block_k, :].transpose(-2, -1)) * scale
    if is_causal:
        q_pos = torch.arange(q0, q0 + s.shape[-2], device=q.device)[:, None] + offset
        k_pos = torch.arange(k0, k0 + s.shape[-1], device=q.device)[None, :]
        s = s.masked_fill(k_pos > q_pos, float("-inf"))
    return s


def flash_attention_backward(q, k, v, out, lse, grad_out, is_causal=False, block_q=32,
                             block_k=32, scale=None):
    """Gradients of O = softmax(S)V, S = QKᵀ·scale, recomputing P tile by tile from the saved
    row log-sum-exp (P_ij = exp(S_ij − lse_i)) instead of storing the T×S matrix:

        D_i = Σ_c dO_ic O_ic   (= Σ_j dP_ij P_ij),     dP = dO Vᵀ,     dS = P ⊙ (dP − D),
        dV = Pᵀ dO,    dQ = dS K · scale,    dK = dSᵀ Q · scale.

    Returns (dQ, dK, dV). This is FlashAttention's backward pass, readable. See chapter 15.
    """
    _check_qkv(q, k, v)
    T, S = q.shape[-2], k.shape[-2]
    if out.shape != q.shape[:-1] + (v.shape[-1],) or grad_out.shape != out.shape:
        raise ValueError(f"out and grad_out must have shape {tuple(q.shape[:-1]) + (v.shape[-1],)}, "
                         f"got {tuple(out.shape)} and {tuple(grad_out.shape)}")
    if lse.shape != q.shape[:-1]:
        raise ValueError(f"lse must have shape {tuple(q.shape[:-1])}, got {tuple(lse.shape)}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    offset = S - T
    D = (grad_out * out).sum(-1, keepdim=True)
    lse = lse.unsqueeze(-1)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    for q0 in range(0, T, block_q):
        rows = slice(q0, q0 + block_q)
        for k0 in range(0, S, block_k):
            if is_causal and k0 > q0 + min(block_q, T - q0) - 1 + offset:
                break                       # the whole tile is above the diagonal
            cols = slice(k0, k0 + block_k)
            p = torch.exp(_tile_scores(q, k, q0, k0, block_q, block_k, scale, is_causal, offset)
                          - lse[..., rows, :])
            dv[..., cols, :] += p.transpose(-2, -1) @ grad_out[..., rows, :]
            dp = grad_out[..., rows, :] @ v[..., cols, :].transpose(-2, -1)
            ds = p * (dp - D[..., rows, :])
            dq[..., rows, :] += (ds @ k[..., cols, :]) * scale
            dk[..., cols, :] += (ds.transpose(-2, -1) @ q[..., rows, :]) * scale
    return dq, dk, dv


class FlashAttentionFunction(torch.autograd.Function):
    """``flash_attention`` forward that saves only (Q, K, V, O, lse) and recomputes the tiles
    in its backward. ``FlashAttentionFunction.apply(q, k, v, is_causal, block_q, block_k)``."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False, block_q=32, block_k=32):
        out, lse = flash_attention(q, k, v, is_causal, block_q, block_k, return_lse=True)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.options = (is_causal, block_q, block_k)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        is_causal, block_q, block_k = ctx.options
        dq, dk, dv = flash_attention_backward(q, k, v, out, lse, grad_out, is_causal,
                                              block_q, block_k)
        return dq, dk, dv, None, None, None


def _elu_plus_one(x):
    return torch.nn.functional.elu(x) + 1


def linear_attention(q, k, v, is_causal=False, feature_map=_elu_plus_one, eps=1e-6):
    """Linear attention: out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / (φ(q_i)ᵀ Σ_j φ(k_j)), j ≤ i if causal.

    Computing φ(K)ᵀV first ([d_k, d_v]) costs O(T·d_k·d_v) instead of O(T²·d): linear in T.
    It is a different model from softmax attention (the kernel φ(q)ᵀφ(k) replaces e^(q·k)).
    """
    _check_qkv(q, k, v)
    check_number("eps", eps, min=0.0)
    fq, fk = feature_map(q), feature_map(k)
    if is_causal:
        if q.shape[-2] != k.shape[-2]:
            raise ValueError("causal linear attention needs as many queries as keys")
        kv = torch.cumsum(fk.unsqueeze(-1) * v.unsqueeze(-2), dim=-3)   # [..., T, d_k, d_v]
        z = torch.cumsum(fk, dim=-2)                                    # [..., T, d_k]
        num = (fq.unsqueeze(-2) @ kv).squeeze(-2)
        den = (fq * z).sum(-1, keepdim=True)
    else:
        kv = fk.transpose(-2, -1) @ v                                   # [..., d_k, d_v]
        num = fq @ kv
        den = fq @ fk.sum(dim=-2).unsqueeze(-1)
    return num / (den + eps)


def kv_cache_bytes(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element=2):
    """Memory of a KV cache: 2 (keys and values) · L · B · H_kv · T · d_head · bytes.

    These are cached activations, not parameters; grouped-query attention divides them by
    H / H_kv. E.g. 32 layers, 32 heads of 128, 4096 tokens, fp16, batch 1: 2 GiB.
    """
    for name, value in (("n_layers", n_layers), ("batch", batch), ("n_kv_heads", n_kv_heads),
                        ("seq_len", seq_len), ("d_head", d_head),
                        ("bytes_per_element", bytes_per_element)):
        check_number(name, value, min=0.0, min_open=True)
    return 2 * n_layers * batch * n_kv_heads * seq_len * d_head * bytes_per_element


def attention_flops(T, d, S=None):
    """Forward FLOPs of softmax(QKᵀ)V for T queries, S keys (default T) and total width d:
    QKᵀ and PV each cost T·S·d multiply-adds, 2 FLOPs each, so 4·T·S·d (softmax not counted).
    Summed over heads it is the same, since H·d_k = d. See chapter 15."""
    S = T if S is None else S
    for name, value in (("T", T), ("d", d), ("S", S)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    return 4 * T * S * d


def layer_flops(T, d, d_ff=None):
    """Forward FLOPs of one Transformer layer on T tokens of width d, by part:
    projections Q, K, V, O: 4·(2·T·d²); FFN d → d_ff → d: 2·(2·T·d·d_ff); attention: 4·T²·d.
    With d_ff = 4d the matrices cost 24·T·d² (12Td² multiply-adds) against 4·T²·d for
    attention, so attention dominates only when T > 6d. See chapter 15."""
    d_ff = 4 * d if d_ff is None else d_ff
    if not isinstance(d_ff, int) or d_ff <= 0:
        raise ValueError(f"d_ff must be a positive int, got {d_ff!r}")
    return {"projections": 8 * T * d * d, "ffn": 4 * T * d * d_ff,
            "attention": attention_flops(T, d)}


def attention_memory_bytes(T, d, S=None, n_heads=1, batch=1, bytes_per_element=4, tiled=False):
    """Bytes of the tensors one attention call keeps: Q and O (B·T·d each), K and V (B·S·d
    each), plus the B·H·T·S score matrix, or with ``tiled`` (FlashAttention) only the 2·B·H·T
    row statistics m and ℓ: O(T² + Td) against O(Td). See chapter 15."""
    S = T if S is None else S
    for name, value in (("T", T), ("d", d), ("S", S), ("n_heads", n_heads), ("batch", batch),
                        ("bytes_per_element", bytes_per_element)):
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    inputs_outputs = batch * (2 * T * d + 2 * S * d)
    extra = 2 * batch * n_heads * T if tiled else batch * n_heads * T * S
    return (inputs_outputs + extra) * bytes_per_element


class DynamicLossScaler:
    """Dynamic loss scaling for float16 training, written out (``torch.amp.GradScaler``'s rule).

    Backward runs on ``scale(loss)`` = S·loss, so every gradient is multiplied by S and small
    ones do not flush to zero in float16. Then ``unscale_(params)`` divides the gradients by S
    (do it before clipping) and reports whether any is inf/NaN; ``step(optimizer)`` skips the
    update if so; ``update()`` halves S after an overflow and doubles it after
    ``growth_interval`` overflow-free steps in a row. See chapter 15.
    """

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000):
        if init_scale <= 0 or growth_factor <= 1 or not 0 < backoff_factor < 1:
            raise ValueError(f"need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, "
                             f"got {init_scale}, {growth_factor}, {backoff_factor}")
        if not isinstance(growth_interval, int) or growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive int, got {growth_interval!r}")
        self.scale_value = float(init_scale)
        self.growth_factor, self.backoff_factor = growth_factor, backoff_factor
        self.growth_interval = growth_interval
        self.good_steps = 0
        self.found_inf = False

    def scale(self, loss):
        return loss * self.scale_value

    def unscale_(self, params):
        """g ← g / S for every parameter with a gradient; remember if any entry is inf/NaN."""
        self.found_inf = False
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    p.grad.div_(self.scale_value)
                    self.found_inf |= not bool(torch.isfinite(p.grad).all())
        return self.found_inf

    def step(self, optimizer):
        """Call ``optimizer.step()`` unless the gradients overflowed; True if it stepped."""
        if self.found_inf:
            return False
        optimizer.step()
        return True

    def update(self):
        """After a step: on an overflow, multiply the scale by ``backoff_factor`` (halve it, by
        default) and restart the count; otherwise count the step and, once ``growth_interval``
        clean steps in a row have passed, multiply the scale by ``growth_factor`` (double it).
        Returns the new scale."""
        if self.found_inf:
            self.scale_value *= self.backoff_factor
            self.good_steps = 0
        else:
            self.good_steps += 1
            if self.good_steps == self.growth_interval:
                self.scale_value *= self.growth_factor
                self.good_steps = 0
        return self.scale_value
