"""Typical wrong answers to chapter 9's exercises: each must fail its checker."""
import math

import torch


def cosine_product_clamped(a, b, eps=1e-8):
    # clamps the product of the norms instead of each norm
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)


def cosine_eps_added(a, b, eps=1e-8):
    # adds ε to the denominator instead of clamping
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1) + eps)


def cosine_no_eps(a, b, eps=1e-8):
    # divides by the raw norms: nan for a zero vector
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def cosine_squared_norms(a, b, eps=1e-8):
    # forgets the square roots
    return (a * b).sum(-1) / ((a * a).sum(-1).clamp_min(eps) * (b * b).sum(-1).clamp_min(eps))


def soft_lookup_times_temperature(query, keys, values, temperature):
    return torch.softmax(query @ keys.T * temperature, dim=-1) @ values


def soft_lookup_wrong_axis(query, keys, values, temperature):
    scores = (query @ keys.T / temperature).reshape(-1, keys.shape[0])
    out = torch.softmax(scores, dim=0) @ values
    return out.reshape(*query.shape[:-1], values.shape[-1])


def soft_lookup_no_softmax(query, keys, values, temperature):
    return (query @ keys.T / temperature) @ values


def soft_lookup_sqrt_d(query, keys, values, temperature):
    # scales by 1/√d as well: that is attention's convention, not this exercise's τ
    return torch.softmax(query @ keys.T / (temperature * math.sqrt(keys.shape[-1])), -1) @ values


def mips_keys_no_sqrt(keys):
    # appends M² − ‖k‖² instead of its square root: the norms are not equal
    sq = (keys * keys).sum(-1, keepdim=True)
    return torch.cat([keys, sq.max() - sq], dim=-1)


def mips_keys_normalized(keys):
    # normalizes the keys: nearest neighbours then rank by cosine, not by dot product
    unit = keys / keys.norm(dim=-1, keepdim=True)
    return torch.cat([unit, torch.zeros_like(unit[:, :1])], dim=-1)


def mips_keys_own_norm(keys):
    # appends ‖k‖: the augmented norms are √2‖k‖, still different
    return torch.cat([keys, keys.norm(dim=-1, keepdim=True)], dim=-1)


def mips_keys_mean_norm(keys):
    # uses the mean norm for M and clamps the negative square: longer keys break the sphere
    sq = (keys * keys).sum(-1, keepdim=True)
    return torch.cat([keys, (sq.mean() - sq).clamp_min(0).sqrt()], dim=-1)


WRONG_ANSWERS = {
    "ch09-cosine-from-dot": [cosine_product_clamped, cosine_eps_added, cosine_no_eps,
                             cosine_squared_norms],
    "ch09-unit-distance": [lambda c: 2 - 2 * c, lambda c: math.sqrt(2 + 2 * c),
                           lambda c: math.sqrt(1 - c), lambda c: 1 - c],
    "ch09-mips-to-nn": [mips_keys_no_sqrt, mips_keys_normalized, mips_keys_own_norm,
                        mips_keys_mean_norm],
    "ch09-soft-lookup": [soft_lookup_times_temperature, soft_lookup_wrong_axis,
                         soft_lookup_no_softmax, soft_lookup_sqrt_d],
}
