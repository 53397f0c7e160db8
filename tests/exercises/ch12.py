"""Typical wrong answers to chapter 12's exercises: each must fail its checker."""
import math

import torch


def pe_cos_own_exponent(p, j, d):
    i = j // 2
    if j % 2 == 0:
        return math.sin(p / 10000 ** (2 * i / d))
    return math.cos(p / 10000 ** (2 * (i + 1) / d))


def pe_exponent_j(p, j, d):
    angle = p / 10000 ** (j / d)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


def pe_alternate_over_positions(p, j, d):
    angle = p / 10000 ** (2 * (j // 2) / d)
    return math.sin(angle) if p % 2 == 0 else math.cos(angle)


def to_half_whole_matrix(W, n_heads):
    d = W.shape[0]                                   # permutes across heads
    return W[torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])]


def to_half_inverse(W, n_heads):
    d_k = W.shape[0] // n_heads                      # the inverse permutation (half → adjacent)
    within = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)]).argsort()
    return W[torch.cat([h * d_k + within for h in range(n_heads)])]


def to_half_columns(W, n_heads):
    d_in = W.shape[1]                                # permutes the input dimension instead
    return W[:, torch.cat([torch.arange(0, d_in, 2), torch.arange(1, d_in, 2)])]


def _rope(x, positions, base=10000.0, sign=1.0, exponent=2.0, layout="half"):
    d = x.shape[-1]
    theta = base ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = sign * positions.to(torch.float64)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    if layout == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def rope_adjacent_pairs(x, positions, base=10000.0):
    return _rope(x, positions, base, layout="adjacent")


def rope_minus_theta(x, positions, base=10000.0):
    return _rope(x, positions, base, sign=-1.0)


def rope_exponent_i_over_d(x, positions, base=10000.0):
    return _rope(x, positions, base, exponent=1.0)


def rope_ignores_positions(x, positions, base=10000.0):
    return _rope(x, torch.arange(x.shape[-2]), base)


def rope_calls_mathref(x, positions, base=10000.0):
    from mathref.positions import apply_rope
    return apply_rope(x, positions, base)


def alibi_positive(slope, T):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (slope * (i - j)).double().masked_fill(j > i, -math.inf)


def alibi_no_mask(slope, T):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (-slope * (i - j).abs()).double()


def alibi_transposed(slope, T):
    return alibi_positive(-slope, T).T.contiguous()


WRONG_ANSWERS = {
    "ch12-sinusoidal-entry": [pe_cos_own_exponent, pe_exponent_j, pe_alternate_over_positions],
    "ch12-adjacent-to-half": [to_half_whole_matrix, to_half_inverse, to_half_columns],
    "ch12-rope-half": [rope_adjacent_pairs, rope_minus_theta, rope_exponent_i_over_d,
                       rope_ignores_positions, rope_calls_mathref],
    "ch12-alibi-matrix": [alibi_positive, alibi_no_mask, alibi_transposed],
}


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch12-rope-half": [
        "from mathref.positions import apply_rope as rotate\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    return rotate(x, positions=positions, base=base)\n",
        "import mathref.positions as P\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    cos, sin = P.rope_cache(x.shape[-1], int(positions.max()) + 1, base=base)\n"
        "    return P.apply_rope(x, positions=positions, base=base)\n",
    ],
}
