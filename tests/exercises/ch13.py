"""Typical wrong answers to chapter 13's exercises: each must fail its checker."""
import math

import torch


def shift_roll(targets, bos_id):
    return torch.roll(targets, 1, dims=1)            # the last token wraps to the front


def shift_without_dropping(targets, bos_id):
    bos = torch.full_like(targets[:, :1], bos_id)
    return torch.cat([bos, targets], dim=1)          # one position too many


def shift_left(targets, bos_id):
    bos = torch.full_like(targets[:, :1], bos_id)
    return torch.cat([targets[:, 1:], bos], dim=1)


def dff_four_d(d_model, multiple_of):
    return 4 * d_model


def dff_rounded_down(d_model, multiple_of):
    return (8 * d_model // 3) // multiple_of * multiple_of


def dff_not_rounded(d_model, multiple_of):
    return int(8 * d_model / 3)


def dec_params_no_cross(d_model, d_ff):
    d = d_model
    return 4 * d * d + 4 * d + 2 * d * d_ff + d_ff + d + 4 * d


def dec_params_no_biases(d_model, d_ff):
    d = d_model
    return 8 * d * d + 2 * d * d_ff + 6 * d


def dec_params_two_norms(d_model, d_ff):
    d = d_model
    return 8 * d * d + 8 * d + 2 * d * d_ff + d_ff + d + 4 * d


def block_post_norm(x, attn, ffn, norm1, norm2):
    x = norm1(x + attn(x))
    return norm2(x + ffn(x))


def block_no_residual(x, attn, ffn, norm1, norm2):
    x = attn(norm1(x))
    return ffn(norm2(x))


def block_norm_reused(x, attn, ffn, norm1, norm2):
    x = x + attn(norm1(x))
    return x + ffn(norm1(x))


def block_norm_on_stream(x, attn, ffn, norm1, norm2):
    x = norm1(x)
    x = x + attn(x)
    x = norm2(x)
    return x + ffn(x)


def _cross(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed, causal=False, scale_d=False,
           kv_from_y=False, no_mask=False, interleave=False, transposed=""):
    B, T, d = y.shape
    # the nn.Linear convention x Wᵀ for the matrices named in `transposed` ("qkvo")
    W_q, W_k, W_v, W_o = (W.T if name in transposed else W
                          for W, name in zip((W_q, W_k, W_v, W_o), "qkvo"))
    src = y if kv_from_y else memory
    S, d_k = src.shape[1], d // n_heads

    def heads(z, L):
        if interleave:
            return z.view(B, L, d_k, n_heads).permute(0, 3, 1, 2)
        return z.view(B, L, n_heads, d_k).transpose(1, 2)

    q, k, v = heads(y @ W_q, T), heads(src @ W_k, S), heads(src @ W_v, S)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d if scale_d else d_k)
    if not no_mask and not kv_from_y:
        scores = scores.masked_fill(~src_allowed[:, None, None, :], float("-inf"))
    if causal:
        scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(), float("-inf"))
    weights = scores.softmax(dim=-1)
    return (weights @ v).transpose(1, 2).reshape(B, T, d) @ W_o, weights


def cross_causal(*args):
    return _cross(*args, causal=True)            # a causal mask across two sequences


def cross_scale_d(*args):
    return _cross(*args, scale_d=True)           # 1/√d instead of 1/√d_k


def cross_self(*args):
    return _cross(*args, kv_from_y=True)         # keys and values from the decoder stream


def cross_unmasked(*args):
    return _cross(*args, no_mask=True)           # padding keys not masked


def cross_interleaved_heads(*args):
    return _cross(*args, interleave=True)        # view(B, L, d_k, H): heads interleaved


def cross_transposed(*args):
    return _cross(*args, transposed="qkvo")      # x Wᵀ, as nn.Linear stores its weight


def cross_transposed_v_o(*args):
    return _cross(*args, transposed="vo")        # the same for the values and the output only


def cross_transposed_q(*args):
    return _cross(*args, transposed="q")         # the same for the queries only


def cross_transposed_k(*args):
    return _cross(*args, transposed="k")         # the same for the keys only


WRONG_ANSWERS = {
    "ch13-shift-right": [shift_roll, shift_without_dropping, shift_left],
    "ch13-swiglu-width": [dff_four_d, dff_rounded_down, dff_not_rounded],
    "ch13-decoder-params": [dec_params_no_cross, dec_params_no_biases, dec_params_two_norms],
    "ch13-pre-norm-block": [block_post_norm, block_no_residual, block_norm_reused,
                            block_norm_on_stream],
    "ch13-cross-attention": [cross_causal, cross_scale_d, cross_self, cross_unmasked,
                             cross_interleaved_heads, cross_transposed, cross_transposed_v_o,
                             cross_transposed_q, cross_transposed_k],
}


def shift_in_place(targets, bos_id):             # right numbers, but `targets` is overwritten
    targets[:, 1:] = targets[:, :-1].clone()
    targets[:, 0] = bos_id
    return targets


def dff_float_ceil(d_model, multiple_of):         # float division: off for very large d_model
    return math.ceil(8 * d_model / (3 * multiple_of)) * multiple_of


def block_in_place(x, attn, ffn, norm1, norm2):  # right numbers, but the caller's `x` is overwritten
    x += attn(norm1(x))
    x += ffn(norm2(x))
    return x


def shift_as_float(targets, bos_id):             # right numbers, but float token ids
    bos = torch.full((targets.shape[0], 1), float(bos_id))
    return torch.cat([bos, targets[:, :-1].float()], dim=1)


def cross_in_float32(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):   # right formulas, float32
    return _cross(y.float(), memory.float(), W_q.float(), W_k.float(), W_v.float(), W_o.float(),
                  n_heads, src_allowed)


def cross_in_float32_cast_back(*args):           # float32 inside, float64 outside
    return tuple(t.double() for t in cross_in_float32(*args))


WRONG_ANSWERS["ch13-shift-right"].append(shift_in_place)
WRONG_ANSWERS["ch13-shift-right"].append(shift_as_float)
WRONG_ANSWERS["ch13-cross-attention"] += [cross_in_float32, cross_in_float32_cast_back]
WRONG_ANSWERS["ch13-pre-norm-block"].append(block_in_place)


def block_in_float32(x, attn, ffn, norm1, norm2):  # right formula, result cast to float32
    x = x + attn(norm1(x))
    return (x + ffn(norm2(x))).float()


WRONG_ANSWERS["ch13-pre-norm-block"].append(block_in_float32)
WRONG_ANSWERS["ch13-swiglu-width"].append(dff_float_ceil)


def dff_floor_rounded_up(d_model, multiple_of):   # LLaMA's rounding: ⌊8d/3⌋ up to a multiple
    return multiple_of * ((8 * d_model // 3 + multiple_of - 1) // multiple_of)


def dff_as_float(d_model, multiple_of):           # right integer, returned as a float
    return float(-(-8 * d_model // (3 * multiple_of)) * multiple_of)


WRONG_ANSWERS["ch13-swiglu-width"] += [dff_floor_rounded_up, dff_as_float]


class AlwaysEqual(int):                          # an int whose == says yes to anything
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = int.__hash__


def dff_always_equal(d_model, multiple_of):       # the tenth read's L7: accepted before
    return AlwaysEqual(0)


def block_parallel(x, attn, ffn, norm1, norm2):    # the parallel block of 13.11 (the read's L6)
    return x + attn(norm1(x)) + ffn(norm1(x))


def block_parallel_norm2(x, attn, ffn, norm1, norm2):   # the same, each branch with its own norm
    return x + attn(norm1(x)) + ffn(norm2(x))


WRONG_ANSWERS["ch13-swiglu-width"].append(dff_always_equal)
WRONG_ANSWERS["ch13-pre-norm-block"] += [block_parallel, block_parallel_norm2]


def block_norms_swapped(x, attn, ffn, norm1, norm2):    # the fifth read's L4: norm2 first
    h = x + attn(norm2(x))
    return h + ffn(norm1(h))


def block_attention_residual_dropped(x, attn, ffn, norm1, norm2):   # the same read: x, not h
    h = x + attn(norm1(x))
    return x + ffn(norm2(h))


WRONG_ANSWERS["ch13-pre-norm-block"] += [block_norms_swapped, block_attention_residual_dropped]


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
_CROSS_HEADS = (
    "    B, T, d = y.shape\n"
    "    S, d_k = memory.shape[1], d // n_heads\n"
    "    heads = lambda z, L: z.view(B, L, n_heads, d_k).transpose(1, 2)\n"
    "    q, k, v = heads(y @ W_q, T), heads(memory @ W_k, S), heads(memory @ W_v, S)\n"
    "    mask = src_allowed[:, None, None, :]\n")

SHORTCUTS = {
    "ch13-shift-right": [
        "from mathref.transformer import shift_right as sr\n\n"
        "def decoder_input_ids(targets, bos_id):\n"
        "    return sr(targets, bos_id)\n",
        "import mathref.transformer as T\n\n"
        "def decoder_input_ids(targets, bos_id):\n"
        "    return T.shift_right(targets.clone(), bos_id)\n",
    ],
    "ch13-swiglu-width": [
        "from mathref.transformer import default_d_ff\n\n"
        "def swiglu_d_ff(d_model, multiple_of):\n"
        "    width = default_d_ff(d_model, 'swiglu')          # 8d/3 up to a multiple of 8\n"
        "    return -(-width // multiple_of) * multiple_of\n",
        "from mathref.transformer import FeedForward\n\n"
        "def swiglu_d_ff(d_model, multiple_of):\n"
        "    width = FeedForward(d_model, activation='swiglu').fc.out_features\n"
        "    return -(-width // multiple_of) * multiple_of\n",
    ],
    "ch13-decoder-params": [
        "from mathref.transformer import block_parameters\n\n"
        "def decoder_block_parameters(d_model, d_ff):\n"
        "    return block_parameters(d_model, d_ff, kind='decoder')\n",
        "from torch import nn\n\n"
        "def decoder_block_parameters(d_model, d_ff):\n"
        "    layer = nn.TransformerDecoderLayer(d_model, 1, d_ff)\n"
        "    return sum(p.numel() for p in layer.parameters())\n",
        "import torch.nn as nn\n\n"
        "def decoder_block_parameters(d_model, d_ff):\n"
        "    parts = [nn.MultiheadAttention(d_model, 1), nn.MultiheadAttention(d_model, 1),\n"
        "             nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)]\n"
        "    parts += [nn.LayerNorm(d_model) for _ in range(3)]\n"
        "    return sum(p.nelement() for part in parts for p in part.parameters())\n",
        "from mathref.transformer import DecoderBlock\n\n"
        "def decoder_block_parameters(d_model, d_ff):\n"
        "    block = DecoderBlock(d_model, 1, d_ff)\n"
        "    return sum(t.shape.numel() for t in block.state_dict().values())\n",
    ],
    "ch13-pre-norm-block": [
        # first: a form that also runs through the grader, where attn, ffn and the norms are
        # handles to the checker's modules and cannot become children of a new module
        "import types\n"
        "from mathref.transformer import EncoderBlock\n\n"
        "def pre_norm_block(x, attn, ffn, norm1, norm2):\n"
        "    me = types.SimpleNamespace(d_model=x.shape[-1], norm_first=True, self_attn=attn,\n"
        "                               norm1=norm1, norm2=norm2, ffn=ffn, dropout1=lambda t: t)\n"
        "    return EncoderBlock.forward(me, x)\n",
        "from mathref.transformer import EncoderBlock\n\n"
        "def pre_norm_block(x, attn, ffn, norm1, norm2):\n"
        "    block = EncoderBlock(x.shape[-1], 2, norm_first=True).to(x.dtype)\n"
        "    block.self_attn, block.ffn, block.norm1, block.norm2 = attn, ffn, norm1, norm2\n"
        "    return block(x)\n",
        "from torch import nn\n\n"
        "def pre_norm_block(x, attn, ffn, norm1, norm2):\n"
        "    layer = nn.TransformerEncoderLayer(x.shape[-1], 2, 16, dropout=0.0, norm_first=True,\n"
        "                                       batch_first=True).to(x.dtype)\n"
        "    layer.norm1, layer.norm2 = norm1, norm2\n"
        "    return layer(x)\n",
    ],
    "ch13-cross-attention": [
        "import torch\n"
        "from torch import nn\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        "    mha = nn.MultiheadAttention(y.shape[-1], n_heads, bias=False, batch_first=True)\n"
        "    mha = mha.to(y.dtype)\n"
        "    with torch.no_grad():\n"
        "        mha.in_proj_weight.copy_(torch.cat([W_q.T, W_k.T, W_v.T]))\n"
        "        mha.out_proj.weight.copy_(W_o.T)\n"
        "    return mha(y, memory, memory, key_padding_mask=~src_allowed,\n"
        "               average_attn_weights=False)\n",
        "import math\n"
        "from torch.nn.functional import scaled_dot_product_attention as sdpa\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        + _CROSS_HEADS +
        "    scores = q @ k.transpose(-1, -2) / math.sqrt(d_k)\n"
        "    weights = scores.masked_fill(~mask, float('-inf')).softmax(-1)\n"
        "    out = sdpa(q, k, v, attn_mask=mask)\n"
        "    return out.transpose(1, 2).reshape(B, T, d) @ W_o, weights\n",
        "from mathref.attention import scaled_dot_product_attention\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        + _CROSS_HEADS +
        "    out, weights = scaled_dot_product_attention(q, k, v, mask=mask, return_weights=True)\n"
        "    return out.transpose(1, 2).reshape(B, T, d) @ W_o, weights\n",
        "import torch\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        + _CROSS_HEADS +
        "    out, weights = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, attn_mask=mask)\n"
        "    return out.transpose(1, 2).reshape(B, T, d) @ W_o, weights\n",
        "import torch\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        + _CROSS_HEADS +
        "    out = torch.ops.aten.scaled_dot_product_attention.default(q, k, v, attn_mask=mask)\n"
        "    weights = (q @ k.transpose(-1, -2) / d_k ** 0.5).masked_fill(~mask, -1e30).softmax(-1)\n"
        "    return out.transpose(1, 2).reshape(B, T, d) @ W_o, weights\n",
        # chapter 9's soft lookup, softmax(qKᵀ/τ)V, per (batch, head) over the real keys (the
        # twelfth read's M1: the grader scored it 5/5 before its worker applied the gate)
        "import math\n"
        "import torch\n"
        "from mathref.similarity import soft_lookup\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        + _CROSS_HEADS +
        "    out = torch.zeros_like(q)\n"
        "    weights = q.new_zeros(B, n_heads, T, S)\n"
        "    for b in range(B):\n"
        "        m = src_allowed[b]\n"
        "        for h in range(n_heads):\n"
        "            o, w = soft_lookup(q[b, h], k[b, h][m], v[b, h][m], math.sqrt(d_k))\n"
        "            out[b, h], weights[b, h][:, m] = o, w\n"
        "    return out.transpose(1, 2).reshape(B, T, d) @ W_o, weights\n",
    ],
}

# Correct solutions in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch13-shift-right": [
        "import torch.nn.functional as F\n\n"
        "def decoder_input_ids(targets, bos_id):\n"
        "    return F.pad(targets[:, :-1], (1, 0), value=bos_id)\n",
        "def decoder_input_ids(targets, bos_id):\n"
        "    out = targets.new_full(targets.shape, bos_id)\n"
        "    out[:, 1:] = targets[:, :-1]\n"
        "    return out\n",
    ],
    "ch13-swiglu-width": [
        "def swiglu_d_ff(d_model, multiple_of):\n"
        "    step = 3 * multiple_of\n"
        "    return (8 * d_model + step - 1) // step * multiple_of\n",
        "import math\n"
        "from fractions import Fraction\n\n"
        "def swiglu_d_ff(d_model, multiple_of):\n"
        "    return math.ceil(Fraction(8 * d_model, 3 * multiple_of)) * multiple_of\n",
    ],
    "ch13-decoder-params": [
        "def decoder_block_parameters(d_model, d_ff):\n"
        "    d = d_model\n"
        "    return 8 * d * d + 2 * d * d_ff + d_ff + 15 * d\n",
    ],
    "ch13-pre-norm-block": [
        "import torch\n\n"
        "def pre_norm_block(x, attn, ffn, norm1, norm2):\n"
        "    h = torch.add(x, attn(norm1(x)))\n"
        "    return h + ffn(norm2(h))\n",
    ],
    "ch13-cross-attention": [
        "import torch\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        "    B, T, d = y.shape\n"
        "    d_k = d // n_heads\n"
        "    q = torch.einsum('btd,de->bte', y, W_q).unflatten(-1, (n_heads, d_k))\n"
        "    k = torch.einsum('bsd,de->bse', memory, W_k).unflatten(-1, (n_heads, d_k))\n"
        "    v = torch.einsum('bsd,de->bse', memory, W_v).unflatten(-1, (n_heads, d_k))\n"
        "    scores = torch.einsum('bthk,bshk->bhts', q, k) * d_k ** -0.5\n"
        "    allowed = src_allowed[:, None, None, :]\n"
        "    scores = torch.where(allowed, scores, torch.finfo(scores.dtype).min)\n"
        "    weights = torch.nn.functional.softmax(scores, dim=-1)\n"
        "    out = torch.einsum('bhts,bshk->bthk', weights, v).flatten(-2)\n"
        "    return out @ W_o, weights\n",
        # mathref.attention's mask helper is allowed: only its attention computations are not
        "import math\n"
        "from mathref.attention import to_additive_mask\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        + _CROSS_HEADS +
        "    scores = q @ k.transpose(-1, -2) / math.sqrt(d_k) + to_additive_mask(mask, y.dtype)\n"
        "    weights = scores.softmax(-1)\n"
        "    return (weights @ v).transpose(1, 2).reshape(B, T, d) @ W_o, weights\n",
        # F.linear(y, W.T) is y W (a product by another name), and log_softmax's exp is the
        # softmax: both allowed (the fifth read found them refused)
        "import math\n"
        "import torch.nn.functional as F\n\n"
        "def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):\n"
        "    B, T, d = y.shape\n"
        "    S, d_k = memory.shape[1], d // n_heads\n"
        "    heads = lambda z, L: z.view(B, L, n_heads, d_k).transpose(1, 2)\n"
        "    q = heads(F.linear(y, W_q.T), T)\n"
        "    k, v = heads(F.linear(memory, W_k.T), S), heads(F.linear(memory, W_v.T), S)\n"
        "    scores = q @ k.transpose(-1, -2) / math.sqrt(d_k)\n"
        "    scores = scores.masked_fill(~src_allowed[:, None, None, :], float('-inf'))\n"
        "    weights = scores.log_softmax(-1).exp()\n"
        "    out = (weights @ v).transpose(1, 2).reshape(B, T, d)\n"
        "    return F.linear(out, W_o.T), weights\n",
    ],
}
