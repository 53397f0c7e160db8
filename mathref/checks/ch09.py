"""Checkers for chapter 9: similarity and high-dimensional geometry."""
import math

import torch
import torch.nn.functional as F

from mathref.checks.core import as_tensor, exercise, expect, expect_callable, expect_close, expect_tensor_close

__all__ = ["check_ch09_cosine_from_dot", "check_ch09_unit_distance", "check_ch09_mips_to_nn",
           "check_ch09_soft_lookup"]


def _expect_tensor_close(got, want, what, rtol=1e-9, atol=1e-12):
    expect_tensor_close(got, want, what, rtol=rtol, atol=atol)


@exercise("ch09-cosine-from-dot")
def check_ch09_cosine_from_dot(cosine):
    """cosine(a, b, eps=1e-8): a·b / (max(‖a‖, ε) max(‖b‖, ε)) along the last dimension."""
    expect_callable(cosine, "cosine(a, b, eps=1e-8)")
    gen = torch.Generator().manual_seed(9)
    a = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    b = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    _expect_tensor_close(cosine(a, b), F.cosine_similarity(a, b, dim=-1),
                         "cosine of six random pairs in ℝ⁵")
    e1 = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    cases = [(3 * e1, torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64), "parallel-ish vectors"),
             (torch.zeros(3, dtype=torch.float64), e1, "a zero vector (expected 0, not nan)"),
             (1e-5 * e1, 1e-5 * e1, "two tiny equal vectors (‖a‖ = ‖b‖ = 1e-5)"),
             (1e-12 * e1, e1, "a vector shorter than ε")]
    for x, y, what in cases:
        got = as_tensor(cosine(x, y), what)
        expect(got.numel() == 1, f"{what}: expected one number for two vectors, got shape "
                                 f"{tuple(got.shape)}")
        expect_close(got.item(), F.cosine_similarity(x, y, dim=0).item(), what, rtol=1e-9,
                     atol=1e-12)
    got = as_tensor(cosine(1e-12 * e1, e1, eps=1e-3), "eps=1e-3")
    expect_close(got.item(), 1e-9, "a vector of norm 1e-12 against e₁ with eps=1e-3",
                 rtol=1e-9, atol=1e-15)
    return "matches F.cosine_similarity, including zero and tiny vectors"


@exercise("ch09-unit-distance")
def check_ch09_unit_distance(unit_distance):
    """unit_distance(c): ‖u − v‖ for unit vectors u, v with cos θ = c, that is √(2 − 2c)."""
    expect_callable(unit_distance, "unit_distance(c)")
    for c in (1.0, 0.0, -1.0, 0.5, -0.3, 0.999):
        expect_close(unit_distance(c), math.sqrt(2 - 2 * c), f"distance when cos θ = {c}",
                     rtol=1e-9, atol=1e-12)
    # and on real unit vectors
    gen = torch.Generator().manual_seed(3)
    u, v = F.normalize(torch.randn(2, 50, generator=gen, dtype=torch.float64), dim=-1)
    c = float(u @ v)
    expect_close(unit_distance(c), float((u - v).norm()), "two random unit vectors in ℝ⁵⁰",
                 rtol=1e-9, atol=1e-12)
    return "‖u − v‖ = √(2 − 2 cos θ): identical rankings for distance and cosine on the sphere"


@exercise("ch09-mips-to-nn")
def check_ch09_mips_to_nn(mips_keys):
    """mips_keys(keys): keys [m, d] → [m, d + 1], each key k_j with the extra coordinate
    √(M² − ‖k_j‖²), M = max_j ‖k_j‖, so that every augmented key has norm M and
    ‖(q, 0) − k̃_j‖² = ‖q‖² + M² − 2 q·k_j: the nearest augmented key is the MIPS winner."""
    expect_callable(mips_keys, "mips_keys(keys)")
    gen = torch.Generator().manual_seed(19)
    for m, d, what in [(5, 2, "five keys in the plane"), (200, 16, "200 keys in ℝ¹⁶")]:
        keys = torch.randn(m, d, generator=gen, dtype=torch.float64)
        keys = keys * (0.2 + 3 * torch.rand(m, 1, generator=gen, dtype=torch.float64))
        original = keys.clone()
        got = as_tensor(mips_keys(keys), f"{what}: mips_keys(keys)")
        expect(torch.equal(keys, original), f"{what}: mips_keys must not modify its input")
        expect(tuple(got.shape) == (m, d + 1),
               f"{what}: expected shape {(m, d + 1)} (one extra coordinate), got {tuple(got.shape)}")
        got = got.to(torch.float64)
        _expect_tensor_close(got[:, :d], keys, f"{what}: the first d coordinates should be the keys "
                                               f"themselves (scaling them changes the dot products)")
        M = keys.norm(dim=-1).max()
        norms = got.norm(dim=-1)
        expect(torch.allclose(norms, M.expand_as(norms), rtol=1e-9, atol=1e-12),
               f"{what}: every augmented key should have the same norm M = max‖k‖ = {M.item():.4g}; "
               f"yours range from {norms.min().item():.4g} to {norms.max().item():.4g}")
        q = torch.randn(500, d, generator=gen, dtype=torch.float64)
        q_aug = torch.cat([q, torch.zeros(500, 1, dtype=torch.float64)], dim=-1)
        dist2 = torch.cdist(q_aug, got) ** 2
        _expect_tensor_close(dist2, (q * q).sum(-1, keepdim=True) + M ** 2 - 2 * q @ keys.T,
                             f"{what}: ‖(q, 0) − k̃_j‖² should equal ‖q‖² + M² − 2q·k_j", rtol=1e-8,
                             atol=1e-9)
        nearest, best = dist2.argmin(-1), (q @ keys.T).argmax(-1)
        expect(torch.equal(nearest, best),
               f"{what}: the nearest augmented key differs from the largest dot product for "
               f"{int((nearest != best).sum())} of 500 queries")
    return "one extra coordinate √(M² − ‖k‖²) puts every key on a sphere: MIPS becomes nearest-neighbour search"


def _soft_lookup(q, K, V, tau):
    return torch.softmax(q @ K.T / tau, dim=-1) @ V


@exercise("ch09-soft-lookup")
def check_ch09_soft_lookup(soft_lookup):
    """soft_lookup(query, keys, values, temperature): softmax(q Kᵀ / τ) V for one query [d]
    or a batch of queries [n, d]."""
    expect_callable(soft_lookup, "soft_lookup(query, keys, values, temperature)")
    gen = torch.Generator().manual_seed(11)
    K = torch.randn(7, 4, generator=gen, dtype=torch.float64)
    V = torch.randn(7, 3, generator=gen, dtype=torch.float64)
    q = torch.randn(4, generator=gen, dtype=torch.float64)
    for tau in (1.0, 0.5, 3.0):
        _expect_tensor_close(soft_lookup(q, K, V, tau), _soft_lookup(q, K, V, tau),
                             f"output for one query with temperature {tau}")
    Q = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    _expect_tensor_close(soft_lookup(Q, K, V, 2.0), _soft_lookup(Q, K, V, 2.0),
                         "output for a batch of 5 queries (softmax over the keys)")
    _expect_tensor_close(soft_lookup(q, K, V, 1e-3), V[(K @ q).argmax()],
                         "a tiny temperature should return the value of the best key",
                         rtol=1e-6, atol=1e-8)
    return "a soft argmax over inner products: attention for one query"
