"""Checkers for chapter 9: similarity and high-dimensional geometry."""
import math

import torch
import torch.nn.functional as F

from mathref.checks.core import as_tensor, exercise, expect, expect_callable, expect_close, expect_tensor_close

__all__ = ["check_ch09_cosine_from_dot", "check_ch09_unit_distance", "check_ch09_cosine_std",
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


@exercise("ch09-cosine-std")
def check_ch09_cosine_std(expected_cosine_std):
    """expected_cosine_std(d): the standard deviation of cos(u, v) for independent uniform unit
    vectors in ℝᵈ, which is exactly 1/√d (E[cos] = 0 and E[cos²] = E[u₁²] = 1/d)."""
    expect_callable(expected_cosine_std, "expected_cosine_std(d)")
    for d in (1, 2, 3, 10, 64, 768, 4096):
        expect_close(expected_cosine_std(d), 1 / math.sqrt(d), f"std of the cosine in d = {d}",
                     rtol=1e-9)
    return "1/√d: at d = 768 a typical cosine of unrelated vectors is about ±0.036"


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
