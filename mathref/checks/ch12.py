"""Checkers for chapter 12: sinusoidal encodings, ALiBi, RoPE's layouts and RoPE itself.

Expected values are written out from the definitions: Python's math module for single entries,
and RoPE as a multiplication of complex numbers (independent of mathref.positions).
"""
import math

import torch

from mathref.checks.core import integer, rng
from mathref.checks.core import CheckFailure, exercise, expect, expect_callable, expect_close

__all__ = ["check_ch12_sinusoidal_entry", "check_ch12_alibi_matrix",
           "check_ch12_adjacent_to_half", "check_ch12_rope_half"]


def _low_precision(value, narrowest=("float32", "float16", "bfloat16")):
    """Whether the student's number is a float32 (or narrower) tensor or numpy scalar."""
    dtype = getattr(value, "dtype", None)
    return str(dtype).replace("torch.", "") in narrowest


@exercise("ch12-sinusoidal-entry",
          forbid=("mathref.positions.sinusoidal_positions", "mathref.positions.rope_cache",
                  "mathref.positions.apply_rope", "mathref.positions.rope_frequencies"),
          because="sinusoidal_entry computes PE(p, j) from its formula (RoPE's cache, rotation "
                  "and frequencies hold the same sines, cosines and exponents)")
def check_ch12_sinusoidal_entry(sinusoidal_entry):
    """sinusoidal_entry(p, j, d) = sin(p/10000^(2i/d)) for even j, cos(...) for odd j, i = j//2."""
    expect_callable(sinusoidal_entry, "sinusoidal_entry(p, j, d)")
    gen = rng(2)
    drawn_d, drawn_p = 2 * integer(gen, 2, 64), integer(gen, 0, 5000)
    for d in (4, 8, 64, drawn_d):
        for p in (0, 1, 2, 3, 7, 50, 999, drawn_p):
            for j in sorted({0, 1, 2, 3, d // 2 - 1, d // 2, d - 2, d - 1}):
                angle = p / 10000 ** (2 * (j // 2) / d)
                want = math.sin(angle) if j % 2 == 0 else math.cos(angle)
                value = sinusoidal_entry(p, j, d)
                what = f"PE(p={p}, j={j}) with d={d}"
                try:
                    got = float(value)
                except (TypeError, ValueError, RuntimeError):
                    raise CheckFailure(f"{what}: expected a number, got {type(value).__name__} "
                                       f"{value!r}") from None
                if abs(got - want) > 1e-12 + 1e-9 * abs(want) and abs(got - want) < 1e-3:
                    low = _low_precision(value)
                    raise CheckFailure(
                        f"{what}: expected {want:.10g}, got {got:.10g}, right only to about "
                        f"{abs(got - want):.1g}: " + (
                            "your answer is float32; " if low else "a float32 step somewhere? ")
                        + "compute the angle and its sine in float64 (math.sin, or torch with "
                        "dtype=torch.float64): at p = 999 a float32 angle is off by about 1e-4")
                expect_close(got, want, what, rtol=1e-9, atol=1e-12)
    return "sin and cos of pair i share the frequency 10000^(−2i/d)"


def _call_alibi_matrix(alibi_matrix, slope, T):
    """alibi_matrix(slope, T), with PyTorch's CausalBias refused by name. Its constructor makes
    a tensor subclass, which fails under the gate's dispatch mode with a RuntimeError about the
    subclass before any Python code of the class runs, so no forbid entry can see it."""
    try:
        return alibi_matrix(slope, T)
    except RuntimeError as error:
        if "Tensor subclass CausalBias" not in str(error):
            raise
        raise CheckFailure("your solution built torch.nn.attention.bias.CausalBias, PyTorch's causal "
                           "mask object, which ch12-alibi-matrix does not allow: alibi_matrix builds "
                           "the bias and its mask from the definition") from None


@exercise("ch12-alibi-matrix",
          forbid=("mathref.positions.alibi_bias",
                  # PyTorch's ready-made causal masks, as in ch11-causal-mask (the causal
                  # bias objects by name, so that the refusal says so rather than what the
                  # gate's modes make of a tensor subclass)
                  "torch.nn.Transformer.generate_square_subsequent_mask",
                  "torch.nn.modules.transformer._generate_square_subsequent_mask",
                  "torch.nn.attention.bias.causal_upper_left",
                  "torch.nn.attention.bias.causal_lower_right",
                  "torch.nn.attention.bias.CausalBias._materialize"),
          because="alibi_matrix builds the bias and its mask from the definition")
def check_ch12_alibi_matrix(alibi_matrix):
    """alibi_matrix(slope, T): [T, T], −slope·(i − j) for j ≤ i and −inf for j > i."""
    expect_callable(alibi_matrix, "alibi_matrix(slope, T)")
    gen = rng(3)
    # powers of 2 (the slopes of H = 4, 8, ...) are exact in every float dtype; the last case,
    # 2^(−k − 1/2) as in ALiBi with H = 16, is not, and is compared to float32's precision (1e-6
    # relative): float32 and float64 pass, bfloat16 (about 3 digits) and float16 do not
    for slope, T in ((0.5, 4), (1 / 16, 6), (0.25, 1), (2.0 ** -integer(gen, 0, 9), integer(gen, 2, 9)),
                     (2.0 ** -(integer(gen, 0, 8) + 0.5), integer(gen, 5, 12))):
        answer = _call_alibi_matrix(alibi_matrix, slope, T)
        expect(isinstance(answer, torch.Tensor) and answer.is_floating_point(),
               f"slope={slope}, T={T}: expected a float tensor, got "
               f"{getattr(answer, 'dtype', type(answer).__name__)}")
        got = answer.to(torch.float64)
        expect(tuple(got.shape) == (T, T), f"slope={slope}, T={T}: expected shape {(T, T)}, "
                                           f"got {tuple(got.shape)}")
        rtol = 1e-12 if math.log2(slope).is_integer() else 1e-6
        for i in range(T):
            for j in range(T):
                want = -slope * (i - j) if j <= i else -math.inf
                what = f"slope={slope}, T={T}: entry [query {i}, key {j}]"
                err = abs(got[i, j].item() - want) if j <= i else 0.0
                if _low_precision(answer, ("float16", "bfloat16")) and rtol * abs(want) < err < 1e-2 * abs(want):
                    raise CheckFailure(f"{what}: expected {want:.8g}, got {got[i, j].item():.8g}, "
                                       f"right only to about {err:.1g}: your tensor is "
                                       f"{str(answer.dtype).replace('torch.', '')}, too coarse for a "
                                       f"slope that is not a power of 2; return float32 or float64")
                expect_close(got[i, j].item(), want, what, rtol=rtol, atol=1e-12)
    return "a penalty growing linearly with distance, and a causal mask"


def _rope_reference(x, positions, layout, base=10000.0):
    """RoPE by complex multiplication: pair i (layout "half": x_i, x_(i+d/2); "adjacent":
    x_2i, x_2i+1) as z = a + ib, times exp(i·m·θ_i), θ_i = base^(−2i/d). x: [..., T, d]."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angle = torch.as_tensor(positions, dtype=torch.float64)[:, None] * theta        # [T, d/2]
    a, b = (x[..., : d // 2], x[..., d // 2:]) if layout == "half" else (x[..., 0::2], x[..., 1::2])
    z = torch.complex(a.double(), b.double()) * torch.polar(torch.ones_like(angle), angle)
    if layout == "half":
        return torch.cat([z.real, z.imag], dim=-1)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


def _heads(y, n_heads):
    T = y.shape[0]
    return y.view(T, n_heads, -1).transpose(0, 1)                                  # [H, T, d_k]


@exercise("ch12-adjacent-to-half",
          forbid=("mathref.positions.apply_rope", "mathref.positions.rope_cache"),
          because="work the row order out from the two layouts' definitions instead of testing "
                  "candidates against mathref's RoPE")
def check_ch12_adjacent_to_half(adjacent_to_half_weights):
    """adjacent_to_half_weights(W, n_heads): W's rows permuted, within each head, so that the
    half-split layout gives the scores the adjacent layout gave with W."""
    expect_callable(adjacent_to_half_weights, "adjacent_to_half_weights(W, n_heads)")
    gen = rng(0)
    for n_heads, d_k, d_in in ((1, 4, 3), (2, 8, 5), (3, 6, 7), (4, 2, 16)):
        W_q = torch.randn(n_heads * d_k, d_in, dtype=torch.float64, generator=gen)
        W_k = torch.randn(n_heads * d_k, d_in, dtype=torch.float64, generator=gen)
        before = W_q.clone()
        got_q = adjacent_to_half_weights(W_q, n_heads)
        expect(isinstance(got_q, torch.Tensor), f"expected a tensor, got {type(got_q).__name__}")
        expect(torch.equal(W_q, before), "your function changed W in place")
        expect(tuple(got_q.shape) == tuple(W_q.shape),
               f"W has shape {tuple(W_q.shape)} (out, in); the result must have the same shape, "
               f"got {tuple(got_q.shape)}")
        expect(got_q.dtype == W_q.dtype, f"W is {W_q.dtype} but your result is {got_q.dtype}: a row "
               f"permutation keeps the dtype (index the rows, W[rows], and convert nothing)")
        got_q = got_q.to(torch.float64)
        for r in range(W_q.shape[0]):          # the intermediate: which row went where
            same = [j for j in range(W_q.shape[0]) if torch.equal(got_q[r], W_q[j])]
            expect(len(same) == 1, f"n_heads={n_heads}, d_k={d_k}: row {r} of your result is not "
                   f"a row of W (permute whole rows of the (out, in) weight)")
            expect(same[0] // d_k == r // d_k, f"n_heads={n_heads}, d_k={d_k}: row {r} (head "
                   f"{r // d_k}) came from row {same[0]}, which belongs to head {same[0] // d_k}; "
                   f"rows must stay inside their head")
        got_k = adjacent_to_half_weights(W_k, n_heads).to(torch.float64)
        x = torch.randn(9, d_in, dtype=torch.float64, generator=gen)
        pos = torch.arange(9)
        want = (_rope_reference(_heads(x @ W_q.T, n_heads), pos, "adjacent")
                @ _rope_reference(_heads(x @ W_k.T, n_heads), pos, "adjacent").transpose(-1, -2))
        have = (_rope_reference(_heads(x @ got_q.T, n_heads), pos, "half")
                @ _rope_reference(_heads(x @ got_k.T, n_heads), pos, "half").transpose(-1, -2))
        err = (have - want).abs().max().item()
        expect(err < 1e-9, f"n_heads={n_heads}, d_k={d_k}: half-split scores with your weights "
               f"differ from the adjacent-layout scores by up to {err:.3g}")
    return "per head, rows (0, 2, 4, …, 1, 3, 5, …): the same scores in the other layout"


def _expect_float64_angles(err, what, tolerance=1e-4):
    """A float64 result that is right only to float32 precision (an error between 1e-9 and
    ``tolerance``; a wrong pairing, sign or frequency is off by far more) has its angles in
    float32: ``torch.arange(d // 2) / d`` and ``2 * torch.arange(...) / d`` are float32."""
    expect(not 1e-9 <= err < tolerance,
           f"{what}: right only to {err:.2g} (float64 needs 1e-9), so your result went through "
           f"float32, most likely the angles: torch.arange(d // 2) / d is float32 by default. "
           f"Build θ_i and m·θ_i in float64 (torch.arange(..., dtype=torch.float64)) and cast "
           f"cos and sin to x.dtype at the end")


@exercise("ch12-rope-half", forbid=("mathref.positions.apply_rope", "mathref.positions.rope_cache",
                                     "mathref.positions.sinusoidal_positions"),
          because="rope_half_split must compute the rotation itself")
def check_ch12_rope_half(rope_half_split):
    """rope_half_split(x, positions, base): RoPE on [B, H, T, d] with half-split pairs, by +m·θ_i,
    without mathref.positions.apply_rope, rope_cache or sinusoidal_positions (its table holds
    sin(m·θ_i) and cos(m·θ_i) already)."""
    expect_callable(rope_half_split, "rope_half_split(x, positions, base)")

    def call(x, positions, base=10000.0):
        out = rope_half_split(x, positions, base)
        expect(isinstance(out, torch.Tensor), f"expected a tensor, got {type(out).__name__}")
        expect(tuple(out.shape) == tuple(x.shape), f"for x of shape {tuple(x.shape)} the "
               f"result must have the same shape, got {tuple(out.shape)}")
        return out.to(torch.float64)

    d = 8
    theta = [10000.0 ** (-2 * i / d) for i in range(d // 2)]
    # intermediates: one basis vector at one position shows the pairing, the sign and θ_i
    for i in range(d // 2):
        for m in (0, 1, 5):
            for first in (True, False):
                x = torch.zeros(1, 1, 1, d, dtype=torch.float64)
                x[..., i if first else i + d // 2] = 1.0
                got = call(x, torch.tensor([m]))[0, 0, 0]
                c, s = math.cos(m * theta[i]), math.sin(m * theta[i])
                want = torch.zeros(d, dtype=torch.float64)
                want[i], want[i + d // 2] = (c, s) if first else (-s, c)
                err = (got - want).abs().max().item()
                _expect_float64_angles(err, f"x = e_{i if first else i + d // 2} (d = {d}) at "
                                            f"position {m}")
                expect(err < 1e-9, f"x = e_{i if first else i + d // 2} (d = {d}) at position {m}: "
                       f"expected {[round(v, 4) for v in want.tolist()]}, got "
                       f"{[round(v, 4) for v in got.tolist()]} (pair i is (x_i, x_(i+d/2)), "
                       f"turned by +m·θ_i with θ_i = 10000^(−2i/d))")
    gen = rng(1)
    for shape, positions, base in (((2, 3, 5, 8), torch.arange(5), 10000.0),
                                   ((1, 2, 4, 16), torch.tensor([7, 3, 100, 1000]), 10000.0),
                                   ((2, 1, 3, 6), torch.tensor([0, 2, 4]), 500.0)):
        x = torch.randn(*shape, dtype=torch.float64, generator=gen)
        before = x.clone()
        got = call(x, positions, base)
        expect(torch.equal(x, before), "your function changed x in place")
        want = _rope_reference(x, positions, "half", base)
        err = (got - want).abs().max().item()
        _expect_float64_angles(err, f"x of shape {shape}, positions {positions.tolist()}, "
                                    f"base {base}", tolerance=2e-3)
        expect(err < 1e-9, f"x of shape {shape}, positions {positions.tolist()}, base {base}: "
               f"largest difference from RoPE is {err:.3g}")
    x32 = torch.randn(1, 2, 3, 4, generator=gen)
    out32 = rope_half_split(x32, torch.arange(3), 10000.0)
    expect(out32.dtype == torch.float32, f"a float32 input must give a float32 result, got {out32.dtype}")
    # the relative property, measured on the student's own function
    q, k = (torch.randn(1, 1, 1, 16, dtype=torch.float64, generator=gen) for _ in range(2))
    score = lambda m, n: (call(q, torch.tensor([m])) * call(k, torch.tensor([n]))).sum().item()
    for m, n, shift in ((0, 3, 50), (9, 2, 1000)):
        expect_close(score(m + shift, n + shift), score(m, n), f"score of q at {m + shift} and k at "
                     f"{n + shift} (should equal the score at {m} and {n}: only n − m matters)",
                     rtol=1e-9, atol=1e-9)
    return "⟨R_m q, R_n k⟩ depends only on n − m, pairs (x_i, x_(i+d/2)) turned by +m·θ_i"
