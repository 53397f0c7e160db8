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


def attention_fixed_4d_axes(q, k, v, mask=None):  # works only on [B, H, T, d] tensors
    s = q @ k.transpose(2, 3) / math.sqrt(q.shape[-1])
    return torch.softmax(s if mask is None else s + mask, dim=3) @ v


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


# ---- numerical differentiation of a hand-written forward pass: close, but outside 1e-13
def _softmax_by_hand(S):
    E = (S - S.amax(-1, keepdim=True)).exp()
    return E / E.sum(-1, keepdim=True)


def _softmax_bw_by_stencil(P, G_P, h, stencil, denominator):
    """∂L/∂S from finite differences of the by-hand softmax: Σ_t c_t·softmax(S + t·h·e_n) / (denominator·h)."""
    S = P.log()
    G_S = torch.zeros_like(P)
    for n in range(P.shape[-1]):
        e = torch.zeros_like(P)
        e[..., n] = h
        diff = sum(c * _softmax_by_hand(S + t * e) for t, c in stencil)
        G_S[..., n] = (G_P * diff).sum(-1) / (denominator * h)
    return torch.nan_to_num(G_S)


def softmax_bw_central_difference(P, G_P, h=1e-5):
    return _softmax_bw_by_stencil(P, G_P, h, ((1, 1), (-1, -1)), 2)


def softmax_bw_fourth_order_stencil(P, G_P, h=1e-3):
    return _softmax_bw_by_stencil(P, G_P, h, ((2, -1), (1, 8), (-1, -8), (-2, 1)), 12)


def softmax_bw_sixteenth_order_stencil(P, G_P, h=0.1, chunk=256):
    """The tenth read's M1: a 16th-order central difference (8 points each side) of the
    by-hand softmax, one column of every row perturbed at a time, vectorised over 256 columns.
    It meets rtol 1e-13 / atol 1e-14 on every case, the 4096-wide one too, and passed the
    notebook's check and the grader; it is off by about 1e-9 of the size of the terms where
    P_n is small, which the check now refuses."""
    p = 8
    c = [(-1) ** (k + 1) * math.factorial(p) ** 2 / (k * math.factorial(p - k) * math.factorial(p + k))
         for k in range(1, p + 1)]
    S = P.log().reshape(-1, P.shape[-1])
    G = G_P.reshape(-1, P.shape[-1])
    N = S.shape[-1]
    out = torch.zeros_like(S)
    for n0 in range(0, N, chunk):
        cols = torch.arange(n0, min(N, n0 + chunk))
        E = torch.zeros(len(cols), 1, N, dtype=S.dtype)
        E[torch.arange(len(cols)), 0, cols] = 1.0
        acc = torch.zeros(len(cols), S.shape[0], dtype=S.dtype)
        for k, ck in enumerate(c, start=1):
            acc += ck * ((_softmax_by_hand(S + k * h * E) * G).sum(-1)
                         - (_softmax_by_hand(S - k * h * E) * G).sum(-1))
        out[:, cols] = (acc / h).T
    return torch.nan_to_num(out).reshape(P.shape)


def softmax_bw_jvp_along_g(P, G_P, p=32, h=0.05, stable=False):
    """The chapter 11 delta read's N1: softmax's Jacobian diag(p) − ppᵀ is symmetric, so the
    vector–Jacobian product G_S equals the Jacobian–vector product, the derivative of
    softmax(S + t G_P) at t = 0: a 64th-order central difference of a hand-written softmax
    (P e^{tG} / Σ P e^{tG}) along G_P, one difference of whole rows, no loop over entries. Its
    rounding error is relative to P_n, so it passed every case (notebook and grader). The case
    where G_P is about 10⁶ on keys of weight below 1e-5 refuses it: there t·10⁶ must stay small
    (here e^{tG} overflows; ``stable`` subtracts the row's largest tG first, and is off instead)."""
    c = [(-1) ** (k + 1) * math.factorial(p) ** 2 / (k * math.factorial(p - k) * math.factorial(p + k))
         for k in range(1, p + 1)]

    def f(t):
        x = t * G_P
        E = P * (x - x.amax(-1, keepdim=True)).exp() if stable else P * x.exp()
        return E / E.sum(-1, keepdim=True)
    return sum(ck * (f(k * h) - f(-k * h)) for k, ck in enumerate(c, 1)) / h


def softmax_bw_jvp_along_g_stable(P, G_P):
    return softmax_bw_jvp_along_g(P, G_P, p=12, h=0.05, stable=True)


def gqa_bw_fourth_order_stencil(q, k, v, G_O, h=1e-3):
    def loss(q, k, v):
        B, H, T, d = q.shape
        g = H // k.shape[1]
        K, V = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
        S = (q @ K.transpose(-2, -1) / math.sqrt(d)).masked_fill(
            torch.ones(T, T, dtype=torch.bool).triu(1), -math.inf)
        return (_softmax_by_hand(S) @ V * G_O).sum()
    grads = []
    for which in range(3):
        xs = [q, k, v]
        G = torch.zeros_like(xs[which])
        for idx in range(G.numel()):
            def at(t):
                ys = [x.clone() for x in xs]
                ys[which].view(-1)[idx] += t
                return loss(*ys)
            G.view(-1)[idx] = (-at(2 * h) + 8 * at(h) - 8 * at(-h) + at(-2 * h)) / (12 * h)
        grads.append(G)
    return tuple(grads)


# ---- right numbers by a forbidden route: each is refused
def mask_library(T):
    from mathref.attention import causal_mask
    return causal_mask(T)


def count_by_building_the_layer(d, h, h_kv, bias):
    from mathref.attention import MultiHeadAttention
    return sum(p.numel() for p in MultiHeadAttention(d, h, h_kv, bias=bias).parameters())


def attention_sdpa(q, k, v, mask=None):
    import torch.nn.functional as F
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def softmax_bw_autograd(P, G_P):
    S = P.log().detach().requires_grad_()        # softmax(log P) = P
    return torch.autograd.grad(torch.softmax(S, -1), S, G_P)[0]


def softmax_bw_builtin(P, G_P):
    return torch._softmax_backward_data(G_P, P, -1, P.dtype)


def softmax_bw_log_softmax_builtin(P, G_P):
    return torch.ops.aten._log_softmax_backward_data(G_P * P, P.log(), -1, P.dtype)


def softmax_bw_library(P, G_P):
    import mathref.attention as A
    return A.softmax_backward(P, G_P)


def gqa_bw_library(q, k, v, G_O):
    from mathref.attention import attention_backward, attention_weights, repeat_kv
    H, H_kv = q.shape[1], k.shape[1]
    K, V = repeat_kv(k, H // H_kv), repeat_kv(v, H // H_kv)
    P = attention_weights(q, K, is_causal=True)
    G_Q, G_K, G_V = attention_backward(q, K, V, P, G_O)
    B, _, T, d = k.shape
    return (G_Q, G_K.view(B, H_kv, H // H_kv, T, d).sum(2),
            G_V.view(B, H_kv, H // H_kv, T, -1).sum(2))



# numerical derivatives in Python's own numbers, entry by entry: no tensor operation sees them
# (the third read of chapter 11 found both passing, and the first one passing the grader); the
# line budget stops them on the case of 16 rows of 4096 scores, and on T = 256 for GQA
def softmax_bw_python_complex_step(P, G_P, h=1e-20):
    # S_n + ih multiplies P_n by e^{ih} and renormalizes the row; Im L / h = ∂L/∂S_n
    rows_P, rows_G = (t.reshape(-1, P.shape[-1]).tolist() for t in (P, G_P))
    out = []
    for p, g in zip(rows_P, rows_G):
        row = []
        for n in range(len(p)):
            w = [complex(1.0, h) if j == n else 1.0 for j in range(len(p))]
            z = sum(pj * wj for pj, wj in zip(p, w))
            row.append(sum(gj * pj * wj / z for gj, pj, wj in zip(g, p, w)).imag / h)
        out.append(row)
    return torch.tensor(out, dtype=P.dtype).reshape(P.shape)


def softmax_bw_python_int_fixed_point(P, G_P):
    # central differences with h = 1e-25 in fixed point on Python ints (60 digits)
    one, h = 10 ** 60, 10 ** 35
    fx = lambda x: x.as_integer_ratio()[0] * one // x.as_integer_ratio()[1]   # noqa: E731
    out = []
    for prow, grow in zip(*(t.reshape(-1, P.shape[-1]).tolist() for t in (P, G_P))):
        p, g = [fx(x) for x in prow], [fx(x) for x in grow]
        row = []
        for n in range(len(p)):
            vals = []
            for step in (h, -h):
                e = one + step + step * step // (2 * one) + step ** 3 // (6 * one * one)
                z = one + p[n] * (e - one) // one
                vals.append(sum(g[j] * ((p[j] * e // one if j == n else p[j]) * one // z) // one
                                for j in range(len(p))))
            row.append((vals[0] - vals[1]) * one // (2 * h) / one)
        out.append(row)
    return torch.tensor(out, dtype=P.dtype).reshape(P.shape)


def gqa_bw_python_complex_step(q, k, v, G_O, h=1e-20):
    # a hand-written causal GQA forward pass on nested lists, complex(e) ** score for exp, and
    # each input entry perturbed by ih
    B, H, T, d = q.shape
    g, d_v, c = H // k.shape[1], v.shape[-1], 1 / math.sqrt(d)
    Q, K, V, G = q.tolist(), k.tolist(), v.tolist(), G_O.tolist()

    def loss(b, Qb, Kb, Vb):
        total = 0
        for hh in range(H):
            for i in range(T):
                e = [complex(math.e) ** (c * sum(Qb[hh][i][a] * Kb[hh // g][j][a] for a in range(d)))
                     for j in range(i + 1)]
                for m in range(d_v):
                    total += G[b][hh][i][m] * sum(e[j] * Vb[hh // g][j][m]
                                                  for j in range(i + 1)) / sum(e)
        return total

    def grad(which):
        out = []
        for b in range(B):
            base = [[[complex(x) for x in row] for row in head] for head in (Q, K, V)[which][b]]
            out.append([])
            for head in base:
                out[-1].append([])
                for row in head:
                    out[-1][-1].append([])
                    for a in range(len(row)):
                        row[a] += complex(0, h)
                        args = [Q[b], K[b], V[b]]
                        args[which] = base
                        out[-1][-1][-1].append(loss(b, *args).imag / h)
                        row[a] -= complex(0, h)
        return torch.tensor(out, dtype=q.dtype)

    return grad(0), grad(1), grad(2)


WRONG_ANSWERS = {
    "ch11-causal-mask": [mask_reversed, mask_strict, mask_boolean, mask_large_negative_wrong_side,
                         mask_library],
    "ch11-mha-param-count": [count_ignores_gqa, count_always_bias, count_wo_per_head,
                             count_by_building_the_layer],
    "ch11-attention": [attention_unscaled, attention_scaled_by_dk, attention_mask_before_scaling,
                       attention_softmax_over_queries, attention_fixed_4d_axes, attention_sdpa],
    "ch11-softmax-backward": [softmax_bw_missing_term, softmax_bw_column_sum, softmax_bw_missing_p,
                              softmax_bw_transposed_jacobian_row, softmax_bw_autograd,
                              softmax_bw_builtin, softmax_bw_log_softmax_builtin, softmax_bw_library,
                              softmax_bw_central_difference, softmax_bw_fourth_order_stencil,
                              softmax_bw_sixteenth_order_stencil,
                              softmax_bw_python_complex_step, softmax_bw_python_int_fixed_point,
                              softmax_bw_jvp_along_g, softmax_bw_jvp_along_g_stable],
    "ch11-multi-head": [mha_scaled_by_sqrt_dmodel, mha_bad_head_split, mha_wo_per_head],
    "ch11-gqa-backward": [gqa_bw_mean_over_group, gqa_bw_first_head_only, gqa_bw_interleaved_groups,
                          gqa_bw_no_scale, gqa_bw_by_autograd, gqa_bw_library,
                          gqa_bw_fourth_order_stencil, gqa_bw_python_complex_step],
}


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch11-causal-mask": [
        "from mathref.attention import causal_mask\n\n"
        "def causal_additive_mask(T):\n"
        "    return causal_mask(T)\n",
        "import torch\n\n"
        "def causal_additive_mask(T):\n"
        "    return torch.nn.Transformer.generate_square_subsequent_mask(T)\n",
        "import torch\n"
        "import mathref.attention as A\n\n"
        "def causal_additive_mask(T):\n"
        "    return A.to_additive_mask(torch.ones(T, T, dtype=torch.bool).tril())\n",
        "import torch\n"
        "import mathref.positions as P\n\n"
        "def causal_additive_mask(T):\n"
        "    return torch.where(P.alibi_bias(1, T)[0].isinf(), float('-inf'), 0.0)\n",
        # PyTorch's causal bias object, materialized (the third read: refused, but as a
        # RuntimeError of the gate's modes, not by name)
        "import torch\n"
        "from torch.nn.attention.bias import causal_upper_left\n\n"
        "def causal_additive_mask(T):\n"
        "    keep = causal_upper_left(T, T)._materialize()\n"
        "    return torch.zeros(T, T).masked_fill(~keep, float('-inf'))\n",
    ],
    "ch11-mha-param-count": [
        "from mathref.attention import MultiHeadAttention as MHA\n\n"
        "def mha_param_count(d_model, n_heads, n_kv_heads, bias):\n"
        "    layer = MHA(d_model, n_heads, n_kv_heads, bias=bias)\n"
        "    return sum(p.numel() for p in layer.parameters())\n",
        "from torch import nn\n\n"
        "def mha_param_count(d_model, n_heads, n_kv_heads, bias):\n"
        "    d_kv = n_kv_heads * (d_model // n_heads)\n"
        "    layers = [nn.Linear(d_model, w, bias=bias) for w in (d_model, d_kv, d_kv, d_model)]\n"
        "    return sum(p.numel() for layer in layers for p in layer.parameters())\n",
        "from torch import nn\n\n"
        "def mha_param_count(d_model, n_heads, n_kv_heads, bias):\n"
        "    mha = nn.MultiheadAttention(d_model, n_heads, bias=bias)\n"
        "    return sum(p.numel() for p in mha.parameters())\n",
    ],
    "ch11-attention": [
        "import torch.nn.functional as F\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n",
        "from torch.nn.functional import scaled_dot_product_attention as sdpa\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    return sdpa(q, k, v, mask)\n",
        "from mathref import attention as A\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    return A.scaled_dot_product_attention(q, k, v, mask=mask)\n",
        "from mathref.attention import attention_weights\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    return attention_weights(q, k, mask=mask) @ v\n",
        # FlexAttention with the mask as a score modification: refused by name, not reported as
        # an unwritten stub (the HOP raises NotImplementedError under the checker's modes)
        "from torch.nn.attention.flex_attention import flex_attention\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    mod = None if mask is None else (lambda s, b, h, i, j: s + mask[i, j])\n"
        "    return flex_attention(q, k, v, score_mod=mod)\n",
        # mathref's FlashAttention where there is no mask (chapter 9's tenth read: under the
        # grader only the refused names reach the worker, and this one was not among them)
        "import math\nimport torch\nfrom mathref.efficient import flash_attention\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    if mask is None:\n"
        "        return flash_attention(q, k, v, scale=1 / math.sqrt(q.shape[-1]))\n"
        "    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + mask\n"
        "    return torch.softmax(s, -1) @ v\n",
    ],
    "ch11-softmax-backward": [
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    S = P.log().detach().requires_grad_()\n"
        "    torch.softmax(S, dim=-1).backward(G_P)\n"
        "    return S.grad\n",
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    return torch._softmax_backward_data(G_P, P, -1, P.dtype)\n",
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    return torch.ops.aten._softmax_backward_data(G_P, P, -1, P.dtype)\n",
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    return torch.ops.aten._log_softmax_backward_data(G_P * P, P.log(), -1, P.dtype)\n",
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    return torch._log_softmax_backward_data(G_P * P, P.log(), -1, P.dtype)\n",
        "from mathref.attention import softmax_backward\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    return softmax_backward(P, G_P)\n",
        # autograd through a softmax written out: refused as autograd
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    S = P.log().detach().requires_grad_()\n"
        "    E = S.exp()\n"
        "    (E / E.sum(-1, keepdim=True)).backward(G_P)\n"
        "    return S.grad\n",
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    def f(S):\n"
        "        E = S.exp()\n"
        "        return E / E.sum(-1, keepdim=True)\n"
        "    return torch.func.vjp(f, P.log())[1](G_P)[0]\n",
        # finite differences of the forward softmax at S = log P
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P, h=1e-6):\n"
        "    S = P.log()\n"
        "    G_S = torch.zeros_like(P)\n"
        "    for n in range(P.shape[-1]):\n"
        "        e = torch.zeros_like(P)\n"
        "        e[..., n] = h\n"
        "        dP = (S + e).softmax(-1) - (S - e).softmax(-1)\n"
        "        G_S[..., n] = (G_P * dP).sum(-1) / (2 * h)\n"
        "    return G_S\n",
        # the Jacobian diag(p) − ppᵀ ready-made, at S = log P
        "import torch\n"
        "from mathref.losses import softmax_jacobian\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    return torch.einsum('...j,...jn->...n', G_P, softmax_jacobian(P.log()))\n",
        "import mathref\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    J = mathref.losses.softmax_jacobian(P.log())\n"
        "    return (G_P.unsqueeze(-2) @ J).squeeze(-2)\n",
    ],
    "ch11-multi-head": [
        # FlexAttention per head with a causal score_mod (the third read: refused, but named
        # as a torch.distributions helper it runs)
        "import torch\n"
        "from torch.nn.attention.flex_attention import flex_attention\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    B, T, d = x.shape\n"
        "    heads = lambda y: y.view(B, T, n_heads, d // n_heads).transpose(1, 2)\n"
        "    causal = lambda s, b, h, i, j: torch.where(i >= j, s, -float('inf'))\n"
        "    o = flex_attention(heads(x @ W_Q), heads(x @ W_K), heads(x @ W_V), score_mod=causal)\n"
        "    return o.transpose(1, 2).reshape(B, T, d) @ W_O\n",
        "import torch\n"
        "from torch import nn\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    d, T = x.shape[-1], x.shape[1]\n"
        "    mha = nn.MultiheadAttention(d, n_heads, bias=False, batch_first=True).to(x.dtype)\n"
        "    with torch.no_grad():\n"
        "        mha.in_proj_weight.copy_(torch.cat([W_Q.T, W_K.T, W_V.T]))\n"
        "        mha.out_proj.weight.copy_(W_O.T)\n"
        "    blocked = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
        "    return mha(x, x, x, attn_mask=blocked, need_weights=False)[0].detach()\n",
        "import torch\n"
        "from mathref.attention import MultiHeadAttention\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    layer = MultiHeadAttention(x.shape[-1], n_heads, bias=False).to(x.dtype)\n"
        "    with torch.no_grad():\n"
        "        layer.w_q.weight.copy_(W_Q.T)\n"
        "        layer.w_k.weight.copy_(W_K.T)\n"
        "        layer.w_v.weight.copy_(W_V.T)\n"
        "        layer.w_o.weight.copy_(W_O.T)\n"
        "    return layer(x, is_causal=True).detach()\n",
        "import torch\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    d, T = x.shape[-1], x.shape[1]\n"
        "    w = torch.cat([W_Q.T, W_K.T, W_V.T])\n"
        "    mask = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
        "    return torch._native_multi_head_attention(\n"
        "        x, x, x, d, n_heads, w, torch.zeros(3 * d, dtype=x.dtype), W_O.T,\n"
        "        torch.zeros(d, dtype=x.dtype), mask, False, True, 0)[0]\n",
        # the quantizable MultiheadAttention (F.linear and softmax) with the weights copied in
        "import torch\nfrom torch.ao.nn.quantizable import MultiheadAttention\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    T, d = x.shape[1], x.shape[-1]\n"
        "    m = MultiheadAttention(d, n_heads, bias=False).double()   # (time, batch, d)\n"
        "    with torch.no_grad():\n"
        "        for lin, W in ((m.linear_Q, W_Q), (m.linear_K, W_K), (m.linear_V, W_V),\n"
        "                       (m.out_proj, W_O)):\n"
        "            lin.weight.copy_(W.T)\n"
        "    blocked = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
        "    xs = x.transpose(0, 1)\n"
        "    return m(xs, xs, xs, attn_mask=blocked, need_weights=False)[0].transpose(0, 1)\n",
    ],
    "ch11-gqa-backward": [
        "import math\n"
        "import torch\n\n"
        "def gqa_attention_backward(q, k, v, G_O):\n"
        "    B, H, T, d = q.shape\n"
        "    g = H // k.shape[1]\n"
        "    K, V = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)\n"
        "    c = 1 / math.sqrt(d)\n"
        "    future = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
        "    P = torch.softmax((c * q @ K.transpose(-2, -1)).masked_fill(future, -math.inf), -1)\n"
        "    G_S = torch._log_softmax_backward_data((G_O @ V.transpose(-2, -1)) * P, P.log(), -1, P.dtype)\n"
        "    G_K = (c * G_S.transpose(-2, -1) @ q).view(B, -1, g, T, d).sum(2)\n"
        "    G_V = (P.transpose(-2, -1) @ G_O).view(B, -1, g, T, G_O.shape[-1]).sum(2)\n"
        "    return c * G_S @ K, G_K, G_V\n",
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def gqa_attention_backward(q, k, v, G_O):\n"
        "    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))\n"
        "    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)\n"
        "    return torch.autograd.grad(out, (q, k, v), G_O)\n",
        "from mathref.attention import attention_backward, attention_weights, repeat_kv\n\n"
        "def gqa_attention_backward(q, k, v, G_O):\n"
        "    B, H, T, d = q.shape\n"
        "    g = H // k.shape[1]\n"
        "    K, V = repeat_kv(k, g), repeat_kv(v, g)\n"
        "    P = attention_weights(q, K, is_causal=True)\n"
        "    G_Q, G_K, G_V = attention_backward(q, K, V, P, G_O)\n"
        "    return (G_Q, G_K.view(B, -1, g, T, d).sum(2),\n"
        "            G_V.view(B, -1, g, T, G_V.shape[-1]).sum(2))\n",
        "import math\n"
        "import torch\n\n"
        "def gqa_attention_backward(q, k, v, G_O):\n"
        "    B, H, T, d = q.shape\n"
        "    g = H // k.shape[1]\n"
        "    K, V = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)\n"
        "    c = 1 / math.sqrt(d)\n"
        "    future = torch.ones(T, T, dtype=torch.bool).triu(1)\n"
        "    P = torch.softmax((c * q @ K.transpose(-2, -1)).masked_fill(future, -math.inf), -1)\n"
        "    G_S = torch._softmax_backward_data(G_O @ V.transpose(-2, -1), P, -1, P.dtype)\n"
        "    G_K = (c * G_S.transpose(-2, -1) @ q).view(B, -1, g, T, d).sum(2)\n"
        "    G_V = (P.transpose(-2, -1) @ G_O).view(B, -1, g, T, G_O.shape[-1]).sum(2)\n"
        "    return c * G_S @ K, G_K, G_V\n",
    ],
}

# Right answers in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch11-causal-mask": [
        "import torch\n\n"
        "def causal_additive_mask(T):\n"
        "    return torch.full((T, T), float('-inf')).triu(1)\n",
        "import torch\n\n"
        "def causal_additive_mask(T):\n"
        "    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]\n"
        "    return torch.where(j > i, float('-inf'), 0.0).to(torch.float64)\n",
        # the (row, column) pairs above the diagonal by index (the seventh read's L3: refused)
        "import torch\n\n"
        "def causal_additive_mask(T):\n"
        "    m = torch.zeros(T, T)\n"
        "    i, j = torch.triu_indices(T, T, 1)\n"
        "    m[i, j] = float('-inf')\n"
        "    return m\n",
    ],
    "ch11-mha-param-count": [
        "def mha_param_count(d_model, n_heads, n_kv_heads, bias):\n"
        "    d_k = d_model // n_heads\n"
        "    shapes = [(d_model, d_model), (d_model, n_kv_heads * d_k),\n"
        "              (d_model, n_kv_heads * d_k), (d_model, d_model)]\n"
        "    return sum(a * b + (b if bias else 0) for a, b in shapes)\n",
    ],
    "ch11-attention": [
        "import math\n"
        "import torch\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    s = torch.einsum('...td,...sd->...ts', q / math.sqrt(q.shape[-1]), k)\n"
        "    if mask is not None:\n"
        "        s = s + mask\n"
        "    e = torch.exp(s - s.amax(-1, keepdim=True))\n"
        "    return (e / e.sum(-1, keepdim=True)) @ v\n",
        "import math\n"
        "import torch.nn.functional as F\n\n"
        "def attention(q, k, v, mask=None):\n"
        "    s = q @ k.mT * q.shape[-1] ** -0.5\n"
        "    return F.softmax(s if mask is None else s + mask, dim=-1) @ v\n",
    ],
    "ch11-softmax-backward": [
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    # G_S = G_P J with the Jacobian J = diag(p) − p pᵀ of each row\n"
        "    J = torch.diag_embed(P) - P.unsqueeze(-1) * P.unsqueeze(-2)\n"
        "    return (G_P.unsqueeze(-2) @ J).squeeze(-2)\n",
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    return P * G_P - P * torch.einsum('...j,...j->...', G_P, P).unsqueeze(-1)\n",
        # exact forms that first subtract a constant from each row of G_P (Σ_j P_j = 1, so G_S does
        # not change): the chapter 11 delta read found the row-mean form refused by its proposed
        # case; where G_P is uneven their rounding is up to 6 ε P_n max_j |G_j|, which is allowed
        "def softmax_backward_rows(P, G_P):\n"
        "    G = G_P - G_P.mean(-1, keepdim=True)\n"
        "    return P * (G - (G * P).sum(-1, keepdim=True))\n",
        "def softmax_backward_rows(P, G_P):\n"
        "    G = G_P - G_P.amax(-1, keepdim=True)\n"
        "    return P * (G - (G * P).sum(-1, keepdim=True))\n",
        # (and G_P − its row minimum times each row's Jacobian, one row at a time)
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    n = P.shape[-1]\n"
        "    G = (G_P - G_P.amin(-1, keepdim=True)).reshape(-1, n)\n"
        "    rows = [g @ (torch.diag(p) - p[:, None] * p[None, :]) for p, g in zip(P.reshape(-1, n), G)]\n"
        "    return torch.stack(rows).reshape(P.shape)\n",
        # G_S_n = P_n Σ_j P_j (G_n − G_j), row by row
        "import torch\n\n"
        "def softmax_backward_rows(P, G_P):\n"
        "    n = P.shape[-1]\n"
        "    Pr, Gr = P.reshape(-1, n), G_P.reshape(-1, n)\n"
        "    rows = [p * ((g[:, None] - g[None, :]) * p[None, :]).sum(-1) for p, g in zip(Pr, Gr)]\n"
        "    return torch.stack(rows).reshape(P.shape)\n",
    ],
    "ch11-multi-head": [
        "import torch.nn.functional as F\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    B, T, d = x.shape\n"
        "    heads = lambda y: y.view(B, T, n_heads, d // n_heads).transpose(1, 2)\n"
        "    o = F.scaled_dot_product_attention(heads(x @ W_Q), heads(x @ W_K), heads(x @ W_V),\n"
        "                                       is_causal=True)\n"
        "    return o.transpose(1, 2).reshape(B, T, d) @ W_O\n",
        "import math\n"
        "import torch\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    B, T, d = x.shape\n"
        "    h, d_k = n_heads, d // n_heads\n"
        "    q, k, v = (torch.einsum('btd,dhk->bhtk', x, W.view(d, h, d_k)) for W in (W_Q, W_K, W_V))\n"
        "    s = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"
        "    s = s + torch.full((T, T), -math.inf, dtype=x.dtype).triu(1)\n"
        "    o = torch.softmax(s, -1) @ v\n"
        "    return torch.einsum('bhtk,hkd->btd', o, W_O.view(h, d_k, d))\n",
        # SDPA on each head's 3-D slice (B, T, d_k), which takes its math path and
        # aten._safe_softmax (the seventh read's M1: refused)
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    B, T, d = x.shape\n"
        "    q, k, v = (y.view(B, T, n_heads, d // n_heads).transpose(1, 2)\n"
        "               for y in (x @ W_Q, x @ W_K, x @ W_V))\n"
        "    o = [F.scaled_dot_product_attention(q[:, h], k[:, h], v[:, h], is_causal=True)\n"
        "         for h in range(n_heads)]\n"
        "    return torch.cat(o, dim=-1) @ W_O\n",
        # the same on each head's block of columns of x W
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
        "    d_k = x.shape[-1] // n_heads\n"
        "    q, k, v = x @ W_Q, x @ W_K, x @ W_V\n"
        "    cols = lambda y, h: y[..., h * d_k:(h + 1) * d_k]\n"
        "    o = [F.scaled_dot_product_attention(cols(q, h), cols(k, h), cols(v, h), is_causal=True)\n"
        "         for h in range(n_heads)]\n"
        "    return torch.cat(o, dim=-1) @ W_O\n",
    ],
    "ch11-gqa-backward": [
        "from mathref.attention import attention_weights, repeat_kv\n\n"
        "def gqa_attention_backward(q, k, v, G_O):\n"
        "    B, H, T, d = q.shape\n"
        "    H_kv = k.shape[1]\n"
        "    g = H // H_kv\n"
        "    K, V = repeat_kv(k, g), repeat_kv(v, g)\n"
        "    P = attention_weights(q, K, is_causal=True)\n"
        "    G_P = G_O @ V.transpose(-2, -1)\n"
        "    G_S = P * (G_P - (G_P * P).sum(-1, keepdim=True))\n"
        "    c = d ** -0.5\n"
        "    G_K = torch.zeros_like(k).index_add_(1, torch.arange(H) // g,\n"
        "                                         c * G_S.transpose(-2, -1) @ q)\n"
        "    G_V = torch.zeros_like(v).index_add_(1, torch.arange(H) // g, P.transpose(-2, -1) @ G_O)\n"
        "    return c * G_S @ K, G_K, G_V\n",
    ],
}
