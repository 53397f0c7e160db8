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


def rope_minus_theta(x1, x2, m, theta):
    a = m * theta
    return x1 * math.cos(a) + x2 * math.sin(a), -x1 * math.sin(a) + x2 * math.cos(a)


def rope_forgets_m(x1, x2, m, theta):
    return x1 * math.cos(theta) - x2 * math.sin(theta), x1 * math.sin(theta) + x2 * math.cos(theta)


def rope_swapped(x1, x2, m, theta):
    a = m * theta
    return x1 * math.sin(a) + x2 * math.cos(a), x1 * math.cos(a) - x2 * math.sin(a)


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
    "ch12-rope-pair": [rope_minus_theta, rope_forgets_m, rope_swapped],
    "ch12-alibi-matrix": [alibi_positive, alibi_no_mask, alibi_transposed],
    "ch12-ntk-base": [lambda base, s, d: base * s, lambda base, s, d: base * s ** ((d - 2) / d),
                      lambda base, s, d: base * s ** (2 / d)],
}
