"""Checkers for chapter 12: sinusoidal encodings, RoPE, ALiBi and NTK-aware scaling.

Expected values are written out from the definitions with Python's math module.
"""
import math

import torch

from mathref.checks.core import exercise, expect, expect_callable, expect_close

__all__ = ["check_ch12_sinusoidal_entry", "check_ch12_rope_pair", "check_ch12_alibi_matrix",
           "check_ch12_ntk_base"]


@exercise("ch12-sinusoidal-entry")
def check_ch12_sinusoidal_entry(sinusoidal_entry):
    """sinusoidal_entry(p, j, d) = sin(p/10000^(2i/d)) for even j, cos(...) for odd j, i = j//2."""
    expect_callable(sinusoidal_entry, "sinusoidal_entry(p, j, d)")
    for d in (4, 8, 64):
        for p in (0, 1, 2, 3, 7, 50, 999):
            for j in sorted({0, 1, 2, 3, d // 2 - 1, d // 2, d - 2, d - 1}):
                angle = p / 10000 ** (2 * (j // 2) / d)
                want = math.sin(angle) if j % 2 == 0 else math.cos(angle)
                expect_close(sinusoidal_entry(p, j, d), want, f"PE(p={p}, j={j}) with d={d}",
                             rtol=1e-9, atol=1e-12)
    return "sin and cos of pair i share the frequency 10000^(−2i/d)"


@exercise("ch12-rope-pair")
def check_ch12_rope_pair(rotate_pair):
    """rotate_pair(x1, x2, m, theta) = (x1 cos mθ − x2 sin mθ, x1 sin mθ + x2 cos mθ)."""
    expect_callable(rotate_pair, "rotate_pair(x1, x2, m, theta)")
    for x1, x2 in ((1.0, 0.0), (0.0, 1.0), (0.3, -1.2)):
        for m, theta in ((0, 1.0), (1, 1.0), (3, 0.5), (7, 0.01), (-2, 0.8)):
            got = rotate_pair(x1, x2, m, theta)
            expect(len(got) == 2, f"expected a pair (y1, y2), got {got!r}")
            a = m * theta
            for name, g, w in (("y1", got[0], x1 * math.cos(a) - x2 * math.sin(a)),
                               ("y2", got[1], x1 * math.sin(a) + x2 * math.cos(a))):
                expect_close(g, w, f"{name} for x=({x1}, {x2}), m={m}, θ={theta} "
                             f"(rotation by +mθ)", rtol=1e-9, atol=1e-12)
    return "a rotation by +mθ with R = [[cos, −sin], [sin, cos]]"


@exercise("ch12-alibi-matrix")
def check_ch12_alibi_matrix(alibi_matrix):
    """alibi_matrix(slope, T): [T, T], −slope·(i − j) for j ≤ i and −inf for j > i."""
    expect_callable(alibi_matrix, "alibi_matrix(slope, T)")
    for slope, T in ((0.5, 4), (1 / 16, 6), (0.25, 1)):
        got = torch.as_tensor(alibi_matrix(slope, T), dtype=torch.float64)
        expect(tuple(got.shape) == (T, T), f"slope={slope}, T={T}: expected shape {(T, T)}, "
                                           f"got {tuple(got.shape)}")
        for i in range(T):
            for j in range(T):
                want = -slope * (i - j) if j <= i else -math.inf
                expect_close(got[i, j].item(), want, f"slope={slope}, T={T}: entry [query {i}, "
                             f"key {j}]", rtol=1e-12, atol=1e-12)
    return "a penalty growing linearly with distance, and a causal mask"


@exercise("ch12-ntk-base")
def check_ch12_ntk_base(ntk_base):
    """ntk_base(base, scale, d_head) = base · scale^(d_head/(d_head − 2))."""
    expect_callable(ntk_base, "ntk_base(base, scale, d_head)")
    for base, scale, d in ((10000.0, 4.0, 64), (10000.0, 2.0, 8), (500000.0, 8.0, 128),
                           (10000.0, 16.0, 4)):
        new = ntk_base(base, scale, d)
        expect_close(new, base * scale ** (d / (d - 2)), f"base', base={base}, s={scale}, "
                     f"d_head={d}", rtol=1e-9)
        slowest_old = base ** (-(d - 2) / d)
        slowest_new = float(new) ** (-(d - 2) / d)
        expect_close(slowest_new, slowest_old / scale, f"θ of the slowest pair with base' "
                     f"(should be the old one divided by s={scale})", rtol=1e-9)
    return "the fastest pair keeps θ_0 = 1, the slowest is slowed by exactly s"
