"""Typical wrong answers to chapter 11's exercises: each must fail its checker."""
import math

import torch


# ---- ch11-causal-mask
def mask_reversed(T):
    return torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).tril(), -math.inf)


def mask_strict(T):  # also blocks the diagonal: the first query sees nothing
    return torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(), -math.inf)


def mask_boolean(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def mask_large_negative_wrong_side(T):
    return torch.zeros(T, T).masked_fill(torch.ones(T, T, dtype=torch.bool).tril(-1), -1e9)


# ---- ch11-mha-param-count
def count_ignores_gqa(d, h, h_kv, bias):
    return 4 * d * d + (4 * d if bias else 0)


def count_always_bias(d, h, h_kv, bias):
    d_kv = h_kv * (d // h)
    return 2 * (d * d + d) + 2 * (d * d_kv + d_kv)


def count_wo_per_head(d, h, h_kv, bias):
    d_k, d_kv = d // h, h_kv * (d // h)
    n = 2 * d * d + 2 * d * d_kv - d * d + h * d_k * d_k   # W_O as H blocks of d_k × d_k
    return n + ((2 * d + 2 * d_kv) if bias else 0)


# ---- ch11-attention
def attention_unscaled(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1)
    return torch.softmax(s if mask is None else s + mask, dim=-1) @ v


def attention_scaled_by_dk(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / q.shape[-1]
    return torch.softmax(s if mask is None else s + mask, dim=-1) @ v


def attention_mask_before_scaling(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1)
    s = s if mask is None else s + mask
    return torch.softmax(s / math.sqrt(q.shape[-1]), dim=-1) @ v


def attention_softmax_over_queries(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(s if mask is None else s + mask, dim=-2) @ v


# ---- ch11-softmax-backward
def softmax_bw_missing_term(P, G_P):
    return P * G_P


def softmax_bw_column_sum(P, G_P):  # δ misplaced: sums over queries instead of keys
    return P * (G_P - (G_P * P).sum(dim=-2, keepdim=True))


def softmax_bw_missing_p(P, G_P):
    return G_P - (G_P * P).sum(dim=-1, keepdim=True)


def softmax_bw_transposed_jacobian_row(P, G_P):  # uses p_j (δ_ij − p_i): the wrong index
    return P * G_P - P * (G_P.sum(dim=-1, keepdim=True)) * P


# ---- ch11-multi-head
def _mha(x, W_Q, W_K, W_V, W_O, n_heads, scale_dim=None, bad_split=False, wo_per_head=False):
    B, T, d = x.shape
    d_k = d // n_heads

    def split(y):
        if bad_split:  # reshapes [B, T, d] straight into [B, H, T, d_k]: mixes positions
            return y.reshape(B, n_heads, T, d_k)
        return y.view(B, T, n_heads, d_k).transpose(1, 2)

    q, k, v = split(x @ W_Q), split(x @ W_K), split(x @ W_V)
    s = q @ k.transpose(-2, -1) / math.sqrt(scale_dim or d_k)
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    heads = torch.softmax(s, dim=-1) @ v                       # [B, H, T, d_k]
    if wo_per_head:  # a d_k × d_k block of W_O per head: heads never mix
        blocks = [heads[:, i] @ W_O[i * d_k:(i + 1) * d_k, i * d_k:(i + 1) * d_k]
                  for i in range(n_heads)]
        return torch.cat(blocks, dim=-1)
    return heads.transpose(1, 2).reshape(B, T, d) @ W_O


def mha_scaled_by_sqrt_dmodel(x, W_Q, W_K, W_V, W_O, n_heads):
    return _mha(x, W_Q, W_K, W_V, W_O, n_heads, scale_dim=x.shape[-1])


def mha_bad_head_split(x, W_Q, W_K, W_V, W_O, n_heads):
    return _mha(x, W_Q, W_K, W_V, W_O, n_heads, bad_split=True)


def mha_wo_per_head(x, W_Q, W_K, W_V, W_O, n_heads):
    return _mha(x, W_Q, W_K, W_V, W_O, n_heads, wo_per_head=True)


# ---- ch11-gqa-backward
def _gqa_bw(q, k, v, G_O, reduce="sum", interleave=False, scale=True, autograd=False):
    B, H, T, d = q.shape
    H_kv = k.shape[1]
    rep = H // H_kv
    index = torch.arange(H) % H_kv if interleave else torch.arange(H) // rep
    K, V = k[:, index], v[:, index]
    c = 1 / math.sqrt(d) if scale else 1.0
    S = c * q @ K.transpose(-2, -1)
    S = S.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
    P = torch.softmax(S, -1)
    G_V = P.transpose(-2, -1) @ G_O
    G_P = G_O @ V.transpose(-2, -1)
    G_S = P * (G_P - (G_P * P).sum(-1, keepdim=True))
    G_Q = c * G_S @ K
    G_K = c * G_S.transpose(-2, -1) @ q

    def fold(g):
        out = torch.zeros(B, H_kv, *g.shape[2:], dtype=g.dtype)
        if reduce == "first":
            return g[:, ::rep] if not interleave else g[:, :H_kv]
        out.index_add_(1, index, g)
        return out / rep if reduce == "mean" else out
    return G_Q, fold(G_K), fold(G_V)


def gqa_bw_mean_over_group(q, k, v, G_O):
    return _gqa_bw(q, k, v, G_O, reduce="mean")


def gqa_bw_first_head_only(q, k, v, G_O):
    return _gqa_bw(q, k, v, G_O, reduce="first")


def gqa_bw_interleaved_groups(q, k, v, G_O):
    return _gqa_bw(q, k, v, G_O, interleave=True)


def gqa_bw_no_scale(q, k, v, G_O):
    return _gqa_bw(q, k, v, G_O, scale=False)


def gqa_bw_by_autograd(q, k, v, G_O):
    # the shortcut the statement forbids: refused by without_autograd
    import torch.nn.functional as F
    qa, ka, va = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    F.scaled_dot_product_attention(qa, ka, va, is_causal=True, enable_gqa=True).backward(G_O)
    return qa.grad, ka.grad, va.grad


WRONG_ANSWERS = {
    "ch11-causal-mask": [mask_reversed, mask_strict, mask_boolean, mask_large_negative_wrong_side],
    "ch11-mha-param-count": [count_ignores_gqa, count_always_bias, count_wo_per_head],
    "ch11-attention": [attention_unscaled, attention_scaled_by_dk, attention_mask_before_scaling,
                       attention_softmax_over_queries],
    "ch11-softmax-backward": [softmax_bw_missing_term, softmax_bw_column_sum, softmax_bw_missing_p,
                              softmax_bw_transposed_jacobian_row],
    "ch11-multi-head": [mha_scaled_by_sqrt_dmodel, mha_bad_head_split, mha_wo_per_head],
    "ch11-gqa-backward": [gqa_bw_mean_over_group, gqa_bw_first_head_only, gqa_bw_interleaved_groups,
                          gqa_bw_no_scale, gqa_bw_by_autograd],
}
