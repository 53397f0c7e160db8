"""Checkers for chapter 9: similarity and high-dimensional geometry."""
import math

import torch
import torch.nn.functional as F

from mathref.checks.core import (CheckFailure, as_tensor, exercise, expect, expect_callable,
                                 expect_close, expect_tensor_close)

__all__ = ["check_ch09_cosine_from_dot", "check_ch09_unit_distance", "check_ch09_mips_to_nn",
           "check_ch09_soft_lookup"]


def _expect_tensor_close(got, want, what, rtol=1e-9, atol=1e-12):
    expect_tensor_close(got, want, what, rtol=rtol, atol=atol)


_COSINE_BUILTINS = ("torch.nn.functional.cosine_similarity", "torch.cosine_similarity",
                    "torch.nn.functional.normalize", "mathref.similarity.cosine_similarity",
                    "mathref.similarity.pairwise_cosine_similarity",
                    "torch.ops.aten.cosine_similarity")


@exercise("ch09-cosine-from-dot", forbid=_COSINE_BUILTINS,
          because="cosine builds the cosine from the dot product and the clamped norms itself")
def check_ch09_cosine_from_dot(cosine):
    """cosine(a, b, eps=1e-8): a·b / (max(‖a‖, ε) max(‖b‖, ε)) along the last dimension."""
    expect_callable(cosine, "cosine(a, b, eps=1e-8)")
    gen = torch.Generator().manual_seed(9)
    a = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    b = torch.randn(6, 5, generator=gen, dtype=torch.float64)
    got = cosine(a, b)
    eps_added = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1) + 1e-8)
    expect(not (isinstance(got, torch.Tensor) and got.shape == eps_added.shape
                and torch.allclose(got.double(), eps_added, rtol=1e-13, atol=0)),
           "cosine of six random pairs in ℝ⁵: your denominator is ‖a‖‖b‖ + ε, which shifts every "
           "result slightly; clamp each norm from below instead (.clamp_min(eps))")
    _expect_tensor_close(got, F.cosine_similarity(a, b, dim=-1), "cosine of six random pairs in ℝ⁵")
    e1 = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    cases = [(3 * e1, torch.tensor([1.0, 1.0, 0.0], dtype=torch.float64), "parallel-ish vectors"),
             (torch.zeros(3, dtype=torch.float64), e1, "a zero vector (expected 0, not nan)"),
             (1e-5 * e1, 1e-5 * e1, "two tiny equal vectors (‖a‖ = ‖b‖ = 1e-5 is above ε, but "
              "‖a‖‖b‖ = 1e-10 is below it: clamp each norm, not their product)"),
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


_DISTANCES = ("torch.norm", "torch.Tensor.norm", "torch.linalg.norm", "torch.linalg.vector_norm",
              "torch.dist", "torch.Tensor.dist", "torch.cdist", "torch.nn.functional.pairwise_distance",
              "torch.hypot", "torch.Tensor.hypot", "mathref.similarity.euclidean_distance",
              "mathref.similarity.pairwise_euclidean_distance")


def _unit_distance_diagnosis(got, c):
    """The likely mistake behind a wrong distance ``got`` for the cosine ``c``."""
    for formula, value, why in [
            ("2 − 2c", 2 - 2 * c, "that is the squared distance ‖u − v‖²: take its square root"),
            ("√(2 + 2c)", math.sqrt(2 + 2 * c), "the cross term of ‖u − v‖² = ‖u‖² + ‖v‖² − 2u·v "
                                                 "has a minus sign"),
            ("√(1 − c)", math.sqrt(max(1 - c, 0.0)), "both ‖u‖² and ‖v‖² are 1, so the constant "
                                                     "is 2, and the cross term is −2c"),
            ("1 − c", 1 - c, "expand ‖u − v‖² = ‖u‖² + ‖v‖² − 2u·v with ‖u‖ = ‖v‖ = 1, then take "
                             "the square root")]:
        if abs(got - value) <= 1e-6 * max(1.0, abs(value)):
            return f" (your value is {formula}: {why})"
    return " (expand ‖u − v‖² = ‖u‖² + ‖v‖² − 2u·v with ‖u‖ = ‖v‖ = 1, then take the square root)"


@exercise("ch09-unit-distance", forbid=_DISTANCES,
          because="derive ‖u − v‖ from c with the expansion of equation (ch09-expand) instead "
                  "of measuring two vectors")
# The check compares values only: PyTorch's and mathref's norm and distance functions are refused,
# but a distance measured by hand between two vectors built from c (((u - v) ** 2).sum().sqrt(),
# math.hypot, a C builtin no rule can intercept) gives the same numbers and cannot be told apart
# from the closed form. The statement says so.
def check_ch09_unit_distance(unit_distance):
    """unit_distance(c): ‖u − v‖ for unit vectors u, v with cos θ = c, that is √(2 − 2c), to
    float32 precision (a float32 computation is a right answer)."""
    expect_callable(unit_distance, "unit_distance(c)")
    gen = torch.Generator().manual_seed(3)
    u, v = F.normalize(torch.randn(2, 50, generator=gen, dtype=torch.float64), dim=-1)
    random_c = float(u @ v)
    cases = [(c, math.sqrt(2 - 2 * c), f"distance when cos θ = {c}")
             for c in (1.0, -0.3, 0.0, -1.0, 0.5, 0.999)]
    cases.append((random_c, float((u - v).norm()), "two random unit vectors in ℝ⁵⁰"))
    for c, want, what in cases:
        got = as_tensor(unit_distance(c), what)
        expect(got.numel() == 1, f"{what}: expected one number, got shape {tuple(got.shape)}")
        got = got.item()
        # float32 is fine: about 1e-7 relative, plus what rounding c to float32 costs near
        # c = 1, where 2 − 2c cancels digits (at c = 0.999 about 3e-7 absolute)
        if not (math.isfinite(got) and abs(got - want) <= 2e-6 + 1e-5 * abs(want)):
            raise CheckFailure(f"{what}: expected {want:.10g}, got {got:.10g}"
                               f"{_unit_distance_diagnosis(got, c)}")
    return "‖u − v‖ = √(2 − 2 cos θ): identical rankings for distance and cosine on the sphere"


@exercise("ch09-mips-to-nn",
          forbid=("mathref.similarity.max_inner_product_search", "torch.topk", "torch.Tensor.topk",
                  "torch.cdist", "mathref.similarity.pairwise_euclidean_distance"),
          because="mips_keys only builds the augmented keys; the searches that test them are the "
                  "check's job")
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


_SOFT_LOOKUP_BUILTINS = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.ops.aten.scaled_dot_product_attention",
    "torch.ops.aten._scaled_dot_product_attention_math",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.ops.aten._scaled_dot_product_flash_attention",
    "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.ops.aten._scaled_dot_product_cudnn_attention",
    "mathref.similarity.soft_lookup", "mathref.attention.scaled_dot_product_attention",
    "mathref.attention.attention_weights", "mathref.attention.AttentionFunction.forward")

_OVERFLOW = (" (exp(score / τ) overflows for a small τ: subtract the largest score of each row "
             "before exp, as in equation (ch09-soft-argmax-limit), or use torch.softmax)")


@exercise("ch09-soft-lookup", forbid=_SOFT_LOOKUP_BUILTINS,
          because="soft_lookup writes the softmax-weighted average itself (torch.softmax is "
                  "allowed)")
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
    expect_tensor_close(soft_lookup(q, K, V, 1e-3), V[(K @ q).argmax()],
                        "a tiny temperature (τ = 1e-3) should return the value of the best key",
                        rtol=1e-6, atol=1e-8, nan_hint=_OVERFLOW)
    return "a soft argmax over inner products: attention for one query"
