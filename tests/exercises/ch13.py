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
           kv_from_y=False, no_mask=False, interleave=False):
    B, T, d = y.shape
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


WRONG_ANSWERS = {
    "ch13-shift-right": [shift_roll, shift_without_dropping, shift_left],
    "ch13-swiglu-width": [dff_four_d, dff_rounded_down, dff_not_rounded],
    "ch13-decoder-params": [dec_params_no_cross, dec_params_no_biases, dec_params_two_norms],
    "ch13-pre-norm-block": [block_post_norm, block_no_residual, block_norm_reused,
                            block_norm_on_stream],
    "ch13-cross-attention": [cross_causal, cross_scale_d, cross_self, cross_unmasked,
                             cross_interleaved_heads],
}
