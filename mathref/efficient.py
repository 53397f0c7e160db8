"""Efficient attention, written to be read: FlashAttention's tiling with the online softmax,
linear attention, and the memory arithmetic of the KV cache. See chapter 15.

Online softmax over a row of scores seen block by block keeps a running max m and a running
sum ℓ of exp(s − m); when a new block raises the max to m', everything accumulated so far is
rescaled by exp(m − m'):

    m' = max(m, max_j s_j),   ℓ' = ℓ·e^(m − m') + Σ_j e^(s_j − m'),   O' = O·e^(m − m') + Σ_j e^(s_j − m') v_j

and the output is O/ℓ at the end. The full T×S score matrix is never stored.
"""
import math

import torch

from mathref.attention import _check_qkv

__all__ = ["online_softmax", "flash_attention", "linear_attention", "kv_cache_bytes"]


def online_softmax(x, block=4):
    """Softmax of a 1-D tensor computed in one streaming pass over blocks (running max and sum),
    then normalized. Equal to ``torch.softmax(x, 0)``; shows the rescaling rule."""
    if x.dim() != 1:
        raise ValueError(f"online_softmax takes a 1-D tensor, got shape {tuple(x.shape)}")
    m = torch.tensor(float("-inf"), dtype=x.dtype, device=x.device)
    total = torch.zeros((), dtype=x.dtype, device=x.device)
    for start in range(0, x.numel(), block):
        chunk = x[start:start + block]
        m_new = torch.maximum(m, chunk.max())
        total = total * torch.exp(m - m_new) + torch.exp(chunk - m_new).sum()
        m = m_new
    return torch.exp(x - m) / total


def flash_attention(q, k, v, is_causal=False, block_q=32, block_k=32, scale=None):
    """Exact attention softmax(QKᵀ·scale + causal)V by tiles of block_q queries × block_k keys,
    with the online softmax: memory O(T·d) instead of O(T·S). Shapes as in
    ``mathref.attention.scaled_dot_product_attention``; causal masks are bottom-right aligned.

    This is FlashAttention's algorithm (forward pass) in plain PyTorch: it shows the math, not
    the speed, which comes from running the loops inside one GPU kernel in fast on-chip memory.
    Autograd differentiates through it (the real kernel recomputes the tiles in its backward).
    """
    _check_qkv(q, k, v)
    if block_q < 1 or block_k < 1:
        raise ValueError(f"block sizes must be positive, got {block_q}, {block_k}")
    T, S = q.shape[-2], k.shape[-2]
    if is_causal and T > S:
        raise ValueError(f"causal attention needs T ≤ S, got T={T}, S={S}")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    offset = S - T  # query i sits at position i + offset
    out_blocks = []
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
    return torch.cat(out_blocks, dim=-2)


def _elu_plus_one(x):
    return torch.nn.functional.elu(x) + 1


def linear_attention(q, k, v, is_causal=False, feature_map=_elu_plus_one, eps=1e-6):
    """Linear attention: out_i = φ(q_i)ᵀ (Σ_j φ(k_j) v_jᵀ) / (φ(q_i)ᵀ Σ_j φ(k_j)), j ≤ i if causal.

    Computing φ(K)ᵀV first ([d_k, d_v]) costs O(T·d_k·d_v) instead of O(T²·d): linear in T.
    It is a different model from softmax attention (the kernel φ(q)ᵀφ(k) replaces e^(q·k)).
    """
    _check_qkv(q, k, v)
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
        if not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be positive, got {value!r}")
    return 2 * n_layers * batch * n_kv_heads * seq_len * d_head * bytes_per_element
