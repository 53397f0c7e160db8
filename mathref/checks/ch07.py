"""Checkers for chapter 7: initialization, vanishing gradients, dropout, residuals."""
import functools
import math
import numbers

import numpy as np
import torch

from mathref.checks.core import rng, seed_global, uniform, integer
from mathref.checks.core import (AUTOGRAD_FUNCTIONAL, CheckFailure, exercise, expect,
                                 expect_callable, expect_close, without_autograd)

__all__ = ["check_ch07_leaky_relu_init", "check_ch07_tanh_fixed_point",
           "check_ch07_inverted_dropout", "check_ch07_residual_backward"]


@functools.lru_cache(maxsize=None)
def _hermite_nodes(nodes):
    return np.polynomial.hermite_e.hermegauss(nodes)


def _tanh_second_moment(q, nodes=200):
    """E[tanh(z)²] for z ~ N(0, q), by Gauss–Hermite quadrature (probabilists' weights)."""
    z, w = _hermite_nodes(nodes)
    return float(np.sum(w * np.tanh(math.sqrt(q) * z) ** 2) / math.sqrt(2 * math.pi))


def _tanh_fixed_point(gain, nodes=200, steps=200):
    """The q* > 0 with q* = gain² E[tanh(z)²], z ~ N(0, q*), by bisection; 0 when gain ≤ 1.
    ``nodes`` sets the Gauss–Hermite order (fewer nodes: the answer of a coarser rule)."""
    if gain <= 1:
        return 0.0
    lo, hi = 1e-12, gain ** 2            # f(q) = gain² E[tanh²] − q: positive at lo, negative at hi
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gain ** 2 * _tanh_second_moment(mid, nodes) > mid else (lo, mid)
    return (lo + hi) / 2


@exercise("ch07-leaky-relu-init", forbid=(
    "torch.nn.init.calculate_gain", "mathref.deep.calculate_gain", "mathref.deep.kaiming_",
    "torch.nn.init.kaiming_normal_", "torch.nn.init.kaiming_uniform_"),
    because="the exercise is to derive the gain yourself")
def check_ch07_leaky_relu_init(leaky_relu_std):
    """leaky_relu_std(fan_in, negative_slope): √(2 / ((1 + a²) fan_in)), the std that keeps the
    second moment of the pre-activations constant through leaky-ReLU layers. A float32 answer
    (a 0-D tensor, a NumPy float32) is right: its rounding is far below any formula's error."""
    expect_callable(leaky_relu_std, "leaky_relu_std(fan_in, negative_slope)")
    gen = rng(1)
    drawn = (integer(gen, 2, 4096), uniform(gen, 0.0, 1.0))     # not rounded: no table of slopes holds it
    for fan_in, a in ((64, 0.0), (256, 0.01), (256, 0.2), (1000, 0.5), (576, 1.0), (10, 0.3),
                      drawn):
        gain = torch.nn.init.calculate_gain("leaky_relu", a)          # PyTorch's own gain
        want = gain / math.sqrt(fan_in)
        what = f"leaky_relu_std({fan_in}, negative_slope={a:.6g})"
        got = _number(leaky_relu_std(fan_in, a), what)
        hint = ""
        if abs(got - want ** 2) < 1e-6 * want ** 2:
            hint = " (that is the variance; return the standard deviation)"
        elif abs(got - math.sqrt(2 / fan_in)) < 1e-6 * want and a > 0:
            hint = " (that is He's ReLU value: the negative half is not zeroed any more)"
        elif abs(got - math.sqrt(2 / ((1 + a) * fan_in))) < 1e-6 * want and 0 < a < 1:
            hint = " (E[φ(z)²] has a² from the negative half: (1 + a²)/2 · E[z²], not (1 + a)/2)"
        expect_close(got, want, what + hint, rtol=1e-6)
    # the derivation's claim, measured: 20 layers of width 512 keep E[z²] near its start
    gen = rng(7)
    a, width = 0.2, 512
    std = _number(leaky_relu_std(width, a), f"leaky_relu_std({width}, {a})")
    z = torch.randn(128, width, generator=gen, dtype=torch.float64)
    for _ in range(20):
        h = torch.where(z > 0, z, a * z)
        z = h @ (std * torch.randn(width, width, generator=gen, dtype=torch.float64))
    second = z.pow(2).mean().item()
    expect(0.5 < second < 2.0, f"after 20 leaky-ReLU layers (a = {a}) with your std, E[z²] = "
                               f"{second:.3g} instead of staying near 1")
    return "E[leaky(z)²] = (1 + a²)/2 · E[z²], so Var(w) = 2/((1 + a²) n_in)"


def _number(value, what):
    """A Python, NumPy or one-element torch number as a float; anything else fails the check."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value)
    if isinstance(value, (numbers.Real, np.floating, np.integer)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1:
        return float(value.reshape(()).item())      # a (1,) array too (float() refuses it)
    raise CheckFailure(f"{what}: expected a number, got {type(value).__name__}")


@exercise("ch07-tanh-fixed-point", forbid=(
    "mathref.checks.ch07._tanh_fixed_point", "mathref.checks.ch07._tanh_second_moment"),
    because="the checker's own answer is not yours: compute the expectation and solve for "
            "the fixed point yourself")
def check_ch07_tanh_fixed_point(tanh_fixed_point):
    """tanh_fixed_point(gain): the fixed point q* of q ← gain² E[tanh(z)²], z ~ N(0, q)."""
    expect_callable(tanh_fixed_point, "tanh_fixed_point(gain)")
    for gain in (0.8, 1.0, uniform(rng(3), 0.1, 0.95)):
        got = _number(tanh_fixed_point(gain), f"tanh_fixed_point({gain:.6g})")
        expect(abs(got) < 2e-3, f"tanh_fixed_point({gain:.6g}): for a gain ≤ 1 the only fixed point is "
                                f"q* = 0 (the signal dies out), got {got:.4g}")
    for gain in (1.1, 1.5, 5 / 3, 2.0, 4.0, uniform(rng(2), 1.2, 3.0)):   # not rounded
        want = _tanh_fixed_point(gain)
        got = _number(tanh_fixed_point(gain), f"tanh_fixed_point({gain:.4g})")
        hint = ""
        if abs(got - (gain ** 2 - 1) / (2 * gain ** 2)) < 1e-3 * want:
            hint = " (that is the small-q expansion tanh(z)² ≈ z² − 2z⁴/3, valid only for gains near 1)"
        elif abs(got - want) > 2e-3 * want:
            hint = _not_converged_hint(gain, got, want)
        expect_close(got, want, f"tanh_fixed_point({gain:.4g}){hint}", rtol=2e-3)
        residual = gain ** 2 * _tanh_second_moment(got) - got
        expect(abs(residual) < 2e-3 * want, f"tanh_fixed_point({gain:.4g}) = {got:.4g} is not a "
                                            f"fixed point: gain²·E[tanh²] − q = {residual:.3g}")
    return "q* = gain²·E[tanh(z)²] with z ~ N(0, q*): 0 for gain ≤ 1, positive above"


def _not_converged_hint(gain, got, want):
    """For a q that misses q*: how far it is from being a fixed point, and some usual causes."""
    if math.isfinite(got) and abs(got) < 1e-3 * want:
        return (" (that is the trivial fixed point q = 0, which every gain has: for a gain > 1 "
                "return the positive one. If your search or iteration slid to 0, check that "
                "z ~ N(0, q) is √q·u for u ~ N(0, 1), not q·u)")
    if not math.isfinite(got) or got <= 0:
        return ""
    if abs(got - want / gain ** 2) < 2e-3 * want / gain ** 2:
        return (" (that is E[tanh(z)²] = q*/gain², the variance of the activations h: return the "
                "pre-activation variance q, the one on both sides of q = gain²·E[tanh(z)²])")
    unsquared = _tanh_fixed_point(math.sqrt(gain), steps=60)      # the fixed point of gain·E[tanh²]
    if abs(got - unsquared) < 2e-3 * unsquared:
        return (" (that is the fixed point of q = gain·E[tanh(z)²]: the gain is not squared. "
                "Var(w) = gain²/n_in, so each layer multiplies the variance by gain², not gain)")
    for nodes in range(2, 100):    # a Gauss–Hermite rule of too few nodes, matched to 1e-6
        rule = _tanh_fixed_point(gain, nodes, steps=60)
        if abs(rule - want) > 2e-3 * want and abs(got - rule) < 1e-6 * want:
            return (f" (that is the fixed point a {nodes}-node Gauss–Hermite rule gives: at gain "
                    f"{gain:.4g}, q* = {want:.3g} is large and tanh(√q·u)² is nearly a step in u, "
                    f"which a low-order rule integrates badly. Use about 100 nodes or more, or a "
                    f"fine grid)")
    residual = gain ** 2 * _tanh_second_moment(got) - got
    h = 1e-4 * want                            # the map's slope at q*: how fast iterating closes in
    slope = gain ** 2 * (_tanh_second_moment(want + h) - _tanh_second_moment(want - h)) / (2 * h)
    return (f" (at your q, gain²·E[tanh²] − q = {residual:.3g}: not a fixed point yet. Some causes, "
            f"for example: if you iterate q ← gain²·E[tanh²], each step shrinks the distance to q* "
            f"only by the map's slope there, {slope:.2f} at this gain: iterate until q stops "
            f"changing, or solve gain²·E[tanh²] − q = 0 by bisection. If you sample E[tanh²], near "
            f"gain 1 the fixed point magnifies the sampling error: use a grid or quadrature. If you "
            f"use Gauss–Hermite quadrature, at large gains the integrand is nearly a step: use "
            f"about 100 nodes or more. If you integrate on a grid, cover the tails of the Gaussian (z to ±8 standard deviations or "
            f"more) with a fine enough step. Check too that you return the pre-activation "
            f"variance q)")


@exercise("ch07-inverted-dropout", forbid=(
    "torch.nn.functional.dropout", "torch.dropout", "torch.dropout_", "torch.native_dropout",
    "torch.nn.functional.dropout1d", "torch.nn.functional.dropout2d",
    "torch.nn.functional.dropout3d", "torch.ops.aten.native_dropout", "torch.ops.aten.dropout",
    "mathref.deep.dropout"),
    because="the exercise is to draw the mask and scale the kept entries yourself")
def check_ch07_inverted_dropout(inverted_dropout):
    """inverted_dropout(x, p): keep each entry independently with probability 1 − p and scale
    kept entries by 1/(1 − p). x is float64; the scale must be computed in x's dtype."""
    expect_callable(inverted_dropout, "inverted_dropout(x, p)")
    seed_global(0)
    # a fresh mask on every call: two calls on the same 1000 entries agree by chance with
    # probability 2^-1000 (a generator seeded inside the function repeats its mask)
    x = torch.rand(1000, dtype=torch.float64) + 0.5
    expect(not torch.equal(_dropout_output(inverted_dropout, x, 0.5),
                           _dropout_output(inverted_dropout, x, 0.5)),
           "p=0.5: your mask is the same on every call (two calls on the same x gave the same "
           "output): draw a fresh mask each call from the global generator "
           "(torch.rand(x.shape)), and do not reseed it or create a seeded generator inside the "
           "function")
    # drawn from torch's generator: with the same torch.manual_seed, the same mask (a mask from
    # NumPy's or Python's generator ignores torch.manual_seed, and a run seeded through torch
    # does not repeat)
    state = torch.random.get_rng_state()
    outputs = []
    for _ in range(2):
        torch.random.set_rng_state(state)
        outputs.append(_dropout_output(inverted_dropout, x, 0.5))
    expect(torch.equal(*outputs),
           "p=0.5: after the same torch.manual_seed your two masks differ: the mask is not drawn "
           "from torch's generator (NumPy's np.random or Python's random ignore torch.manual_seed, "
           "so a seeded run does not repeat), or your function keeps state from one call to the "
           "next (a counter, a stored mask). Draw it with torch.rand(x.shape) on every call")
    n = 200_000
    # p: three fixed values and two drawn by the case's generator, a quarter to three quarters of
    # the way between two tenths (a keep probability rounded to tenths is off by 0.025 or more
    # there, four times the zero-fraction tolerance)
    gen = rng(5)
    drawn = ((integer(gen, 1, 5) + uniform(gen, 0.25, 0.75)) / 10,
             (integer(gen, 5, 9) + uniform(gen, 0.25, 0.75)) / 10)
    for p in (0.1, 0.5, 0.8) + drawn:
        # signed entries, |x| in [0.5, 1.5): none is 0, half are negative, as the activations
        # that dropout meets in a network (a mask or a scale that looks at the sign is wrong)
        sign = 2 * torch.randint(0, 2, (n,), dtype=torch.float64) - 1
        x = sign * (torch.rand(n, dtype=torch.float64) + 0.5)
        y = _dropout_output(inverted_dropout, x, p)
        parts = {"positive": x > 0, "negative": x < 0}
        zero = {name: (y[part] == 0).double().mean().item() for name, part in parts.items()}
        overall = (y == 0).double().mean().item()
        # ±6 standard deviations: of a fraction over all n entries, of the difference of two
        # fractions over parts of n₁ and n₂ entries
        sd = lambda *sizes: 6 * math.sqrt(p * (1 - p) * sum(1 / size for size in sizes))
        sizes = {name: part.sum().item() for name, part in parts.items()}
        if abs(zero["positive"] - zero["negative"]) >= sd(*sizes.values()):
            wrong = max(zero, key=lambda name: abs(zero[name] - p))
            other = "negative" if wrong == "positive" else "positive"
            expect(False, f"p={p:.4g}: a fraction p of the {wrong} entries of x should be "
                          f"zeroed too, got {zero[wrong]:.4f} (of the {other} ones "
                          f"{zero[other]:.4f}): the mask must not depend on the sign of x")
        # ... nor on the size of x: the zero fraction in the four quarters of |x|'s range
        edges = (0.5, 0.75, 1.0, 1.25, 1.5)
        bins = [(x.abs() >= a) & (x.abs() < b) for a, b in zip(edges, edges[1:])]
        by_size = [(y[part] == 0).double().mean().item() for part in bins]
        low, high = min(range(4), key=by_size.__getitem__), max(range(4), key=by_size.__getitem__)
        if by_size[high] - by_size[low] >= sd(bins[low].sum().item(), bins[high].sum().item()):
            expect(False, f"p={p:.4g}: a fraction p of the entries should be zeroed whatever their "
                          f"size, got {by_size[low]:.4f} of those with |x| in "
                          f"[{edges[low]:g}, {edges[low + 1]:g}) and {by_size[high]:.4f} of those "
                          f"in [{edges[high]:g}, {edges[high + 1]:g}): the mask must not depend on "
                          "the size of x")
        hint = (" (p is the probability of dropping an entry: keep it when rand ≥ p)"
                if abs(overall - (1 - p)) < sd(n) else "")
        expect(abs(overall - p) < sd(n), f"p={p:.4g}: a fraction p of the entries should be "
                                         f"zeroed (on average), got {overall:.4f}{hint}")
        kept = y != 0
        right = torch.isclose(y, x / (1 - p), rtol=1e-9, atol=0) | ~kept
        first = (~right).nonzero()[:1].flatten().tolist() or [kept.nonzero()[0].item()]
        ratio = (y[first[0]] / x[first[0]]).item()
        by_sign = {name: bool(right[part].all()) for name, part in parts.items()}
        near = torch.allclose(y[kept], x[kept] / (1 - p), rtol=1e-6, atol=0)
        # a scale off by a small relative amount (an ε added to 1 − p): named up to 1e-3, where
        # the four printed digits of the ratio may not show the difference
        close = torch.allclose(y[kept], x[kept] / (1 - p), rtol=1e-3, atol=0)
        hint = (" (that multiplies by 1 − p: divide by it, so that E[y] = x)"
                if abs(ratio - (1 - p)) < 1e-9 else
                " (the kept entries must be scaled up by 1/(1 − p))" if abs(ratio - 1) < 1e-9 and
                not any(by_sign.values()) else
                " (your scale 1/(1 − p) was rounded to float32 (a float32 mask divided by 1 − p, "
                "or torch.tensor without dtype): compute it in x's dtype)"
                if near and _float32_like(y[kept] / x[kept]) else
                f" (your scale differs from 1/(1 − p) by a relative {abs(ratio * (1 - p) - 1):.1e}: "
                "use exactly 1/(1 − p), with nothing added to 1 − p)" if close else "")
        digits = ".4g" if f"{ratio:.4g}" != f"{1 / (1 - p):.4g}" else ".10g"
        if by_sign["positive"] != by_sign["negative"]:
            good, bad = (("positive", "negative") if by_sign["positive"] else
                         ("negative", "positive"))
            hint = (f" on the {bad} entries of x (the {good} ones are right): scale every kept "
                    "entry, whatever its sign")
        expect(bool(right.all()), f"p={p:.4g}: kept entries must be x/(1 − p) = "
               f"x·{1 / (1 - p):{digits}}; got ratios like {ratio:{digits}}{hint}")
        for name, part in parts.items():
            xs, ys = x[part], y[part]
            sd = math.sqrt(xs.pow(2).mean().item() * p / ((1 - p) * xs.numel()))
            expect_close(ys.mean().item(), xs.mean().item(),
                         f"p={p:.4g}: mean of the output over the {name} entries (E[y] = x)",
                         rtol=0, atol=6 * sd)
    # ... nor on anything else about x: 200 calls on one x of about 1000 distinct signed values
    # (the number drawn, 900 … 1100), at every p of the loop above (a mask honest at p = 0.5 only,
    # or at one size of x, passed: chapter 7's ninth read, L2, and its delta read). Each entry's
    # drop count is Binomial(200, p) for a mask that ignores x, so the sum of the standardized
    # squares is about χ² with as many degrees of freedom as entries (1000 ± 45 for 1000); a
    # bound at 6 standard deviations (1268 for 1000). A right answer exceeds it with probability
    # 1.3e-8 at p = 0.5 and at most 2.1e-8 for p in [0.1, 0.875] and 900 … 1100 entries: the exact
    # law of the sum ((k − 200p)²/(200p(1 − p)) per entry, k ~ Binomial(200, p)), by FFT
    # convolution of the pmf of one term. A drop probability p + δ(x) adds about
    # 200·Σδ²/(p(1 − p)) (at p = 0.5 and an r.m.s. δ of 0.02: +320), whatever shape δ has (the
    # bins above see only its averages over four quarters of |x|).
    calls, gen = 200, rng(6)
    entries = integer(gen, 900, 1101)
    x = torch.randn(entries, generator=gen, dtype=torch.float64)
    bound = entries + 6 * math.sqrt(2 * entries)
    for p in (0.1, 0.5, 0.8) + drawn:
        drops = sum((_dropout_output(inverted_dropout, x, p) == 0).double() for _ in range(calls))
        chi2 = ((drops - calls * p) ** 2 / (calls * p * (1 - p))).sum().item()
        worst = (drops - calls * p).abs().argmax().item()
        expect(chi2 < bound,
               f"p={p:.4g}, {calls} calls on the same {entries} entries of x: some entries are "
               f"dropped far more often than others (the entry x = {x[worst].item():.4g} in "
               f"{int(drops[worst])} of {calls} calls; the χ² of the {entries} drop counts is "
               f"{chi2:.0f}, about {entries} ± {math.sqrt(2 * entries):.0f} for a mask that ignores "
               "x): the mask must not look at x; draw it from torch.rand(x.shape) alone")
    # each unit independently: the kept count of 10 units varies from mask to mask, on 10 entries
    # equal to 1 and on 10 equal to −1 (an exact fraction of the negative entries is caught here)
    n_masks = 400                                     # ±6 sd bounds below still hold for a right answer
    for ones in (torch.ones(10, dtype=torch.float64), -torch.ones(10, dtype=torch.float64)):
        masks = torch.stack([_dropout_output(inverted_dropout, ones, 0.5) != 0
                             for _ in range(n_masks)]).double()
        counts = masks.sum(1)
        expect(counts.var().item() > 1.5, f"x = {ones[0].item():g} in each of 10 units: the number "
               "of kept units should be random "
               f"(Binomial(10, 0.5), variance 2.5), got variance {counts.var().item():.3g}: each "
               "unit must be kept independently, not an exact fraction")
        expect(counts.var().item() < 3.5,
               "the number of kept units varies more than Binomial(10, 0.5) allows (variance 2.5), got "
               f"variance {counts.var().item():.3g}: units are kept together (positively correlated); "
               "each unit must be kept independently")
        expect(abs(counts.mean().item() - 5) < 6 * math.sqrt(2.5 / n_masks),
               "kept counts of 10 units at p=0.5 should be Binomial(10, 0.5): mean 5, variance 2.5; "
               f"got mean {counts.mean().item():.3g}, variance {counts.var().item():.3g}")
        # ... and each position on its own: kept half the time (±6 standard deviations of the
        # frequency over the masks), uncorrelated with its neighbour (a sorted or first-k mask has
        # the right counts but keeps unit 0 almost always and units move together)
        freq = masks.mean(0)
        worst = (freq - 0.5).abs().argmax().item()
        expect(((freq - 0.5).abs() < 6 * math.sqrt(0.25 / n_masks)).all(),
               f"at p=0.5 unit {worst} of 10 was kept in {freq[worst].item():.1%} of {n_masks} masks, "
               "not about half: each unit must be kept independently with probability 1 − p (a mask "
               "of uniform draws, not a sorted or first-k pattern)")
        centred = masks - freq
        corr = (centred[:, :-1] * centred[:, 1:]).mean(0) / (centred.std(0)[:-1] * centred.std(0)[1:])
        expect((corr.abs() < 6 / math.sqrt(n_masks)).all(),
               f"at p=0.5 neighbouring units are kept together (correlation up to "
               f"{corr.abs().max().item():.2f} over {n_masks} masks): each unit must be kept independently")
        _expect_uncoupled(masks, "at p=0.5, 10 units")
    # a batch: every entry of every row gets its own draw (not one mask shared by the rows,
    # nor one draw per row)
    for shape in ((2000, 64), (40, 50, 64)):
        x = (2 * torch.randint(0, 2, shape, dtype=torch.float64) - 1) * (torch.rand(shape, dtype=torch.float64) + 0.5)
        zero = _dropout_output(inverted_dropout, x, 0.5) == 0
        for axis in range(len(shape) - 1):
            expect(not (zero == zero.narrow(axis, 0, 1)).all(),
                   f"x of shape {shape}: the mask is the same along dimension {axis}, shared by "
                   "the examples: draw one number per entry, torch.rand(x.shape), not one mask "
                   "that broadcasts")
        rows = zero.reshape(-1, shape[-1])
        per_row = rows.double().sum(1)                    # Binomial(64, ½): variance 16
        expect(4 < per_row.var().item() < 64,
               f"x of shape {shape}: the number of dropped entries per row should be "
               f"Binomial({shape[-1]}, 0.5), variance {shape[-1] / 4:g}; got variance "
               f"{per_row.var().item():.3g}: each entry must be dropped independently "
               "(a mask of shape x.shape, not one draw per row)")
        _expect_uncoupled(rows.double(), f"x of shape {shape}")
    x = torch.randn(100, generator=rng(4), dtype=torch.float64)
    expect(torch.equal(_dropout_output(inverted_dropout, x, 0.0), x), "p=0 must return x unchanged")
    y = _dropout_output(inverted_dropout, x, 1.0)
    expect(torch.equal(y, torch.zeros_like(x)),
           "p=1 drops every entry and must return zeros" +
           (f", got {int(y.isnan().sum())} NaN of 100 (0/0: x·mask/(1 − p) with mask 0 and "
            "1 − p = 0): return zeros for p = 1, or select x/(1 − p) with torch.where"
            if y.isnan().any() else ""))
    return "zero fraction ≈ p, kept entries scaled by 1/(1 − p), mean preserved"


def _expect_uncoupled(masks, what):
    """Entries kept independently: over all pairs of columns of ``masks`` (one row per draw),
    n·mean(corr²) is about 1 (n·corr² is about χ²₁ for each pair, and the pairs are
    uncorrelated); any coupling of pairs, near or far, positive or negative, raises it. The bound
    is 6 standard deviations, 1 + 6·√(2/pairs)."""
    n, units = masks.shape
    centred = masks - masks.mean(0)
    scale = centred.pow(2).mean(0).sqrt().clamp_min(1e-12)
    corr = (centred.T @ centred / n) / (scale[:, None] * scale[None, :])
    pairs = units * (units - 1) // 2
    excess = n * corr.triu(1).pow(2).sum().item() / pairs
    worst = corr.triu(1).abs().max().item()
    expect(excess < 1 + 6 * math.sqrt(2 / pairs),
           f"{what}: the kept/dropped pattern of different units is correlated (over {n} masks, "
           f"n·mean(corr²) over the {pairs} pairs of units is {excess:.3g}, about 1 for independent "
           f"units and independent masks; the largest |corr| is {worst:.2f}). Either units are "
           "coupled, or the masks (rows) are: rows that repeat or mirror one another's draws "
           "raise it too. Draw every entry's mask independently")


def _float32_like(ratios):
    """True when every ratio y/x, or its reciprocal, is a float32 number: the scale 1/(1 − p) or
    the divisor 1 − p was rounded to float32 (an ε added in float64 gives neither)."""
    def representable(v):
        return bool(((v.float().double() - v).abs() <= 1e-12 * v.abs()).all())
    return representable(ratios) or representable(1 / ratios)


def _dropout_output(inverted_dropout, x, p):
    """The student's y for (x, p), checked to be a tensor of x's shape and dtype."""
    y = inverted_dropout(x.clone(), p)
    expect(isinstance(y, torch.Tensor) and tuple(y.shape) == tuple(x.shape),
           f"p={p}: expected a tensor of shape {tuple(x.shape)}, got "
           f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}")
    expect(y.dtype == x.dtype, f"p={p}: your answer is {str(y.dtype).replace('torch.', '')} but x "
           f"is {str(x.dtype).replace('torch.', '')}: keep x's dtype (draw the mask with "
           "dtype=x.dtype, or multiply x by a boolean mask)")
    return y


@exercise("ch07-residual-backward", forbid=AUTOGRAD_FUNCTIONAL,
          because="multiply the (I + J_l) yourself, without autograd")
def check_ch07_residual_backward(residual_backward):
    """residual_backward(jacobians, grad_out): ∂L/∂h_0 (a row vector) through
    h_l = h_{l−1} + F_l(h_{l−1}), with jacobians[l−1] = ∂F_l/∂h_{l−1}, without autograd."""
    expect_callable(residual_backward, "residual_backward(jacobians, grad_out)")
    by_hand = without_autograd(residual_backward)
    gen = rng(0)
    for depth, d in ((1, 3), (3, 4), (6, 5)):
        weights = [0.5 * torch.randn(d, d, dtype=torch.float64, generator=gen)
                   for _ in range(depth)]
        h0 = torch.randn(d, dtype=torch.float64, generator=gen, requires_grad=True)
        g_out = torch.randn(d, dtype=torch.float64, generator=gen)
        # oracle: autograd through a real residual network with branches F_l(h) = tanh(h W_l)
        h, jacobians = h0, []
        for w in weights:
            z = h.detach() @ w
            jacobians.append((1 - torch.tanh(z) ** 2)[:, None] * w.T)  # ∂F_i/∂h_j
            h = h + torch.tanh(h @ w)
        (h * g_out).sum().backward()
        got = by_hand([j.clone() for j in jacobians], g_out.clone())
        expect(isinstance(got, torch.Tensor) and tuple(got.shape) == (d,),
               f"depth {depth}: expected a tensor of shape ({d},), got "
               f"{getattr(got, 'shape', type(got).__name__)}")
        dtype = got.dtype
        got = got.detach().to(torch.float64)
        low_precision = (" (your answer is only float32-accurate" + (f", it is {str(dtype).replace('torch.', '')}"
                                                                       if dtype != torch.float64 else "")
                         + ": compute in the dtype of the inputs (float64))")
        expect(torch.allclose(got, h0.grad, rtol=1e-8, atol=1e-10),
               f"depth {depth}: ∂L/∂h_0 differs from autograd by "
               f"{(got - h0.grad).abs().max().item():.3g}"
               + (low_precision if torch.allclose(got, h0.grad, rtol=1e-5, atol=1e-6)
                  else _residual_hint(got, jacobians, g_out)))
    return "g_0 = g_L (I + J_L) ⋯ (I + J_1): the identity keeps a direct path for the gradient"


def _residual_hint(got, jacobians, g_out):
    """Which usual mistake ``got`` is: the identity left out, the wrong order, J not transposed."""
    eye = torch.eye(len(g_out), dtype=torch.float64)
    def chain(matrices, row=True):
        g = g_out
        for M in matrices:
            g = g @ M if row else M @ g
        return g
    wrong = [(chain([j for j in reversed(jacobians)]),
              "the identity is missing: each block contributes I + J_l, not J_l"),
             (chain([eye + j for j in jacobians]),
              "the product runs from the output back: start with J_L, end with J_1"),
             (chain([eye + j for j in reversed(jacobians)], row=False),
              "∂L/∂h_{l−1} = ∂L/∂h_l · (I + J_l) as a row vector: multiply from the left, "
              "g @ (I + J), not (I + J) @ g")]
    for other, why in wrong:
        if len(jacobians) > 1 or "order" not in why:
            if torch.allclose(got, other, rtol=1e-8, atol=1e-10):
                return f" ({why})"
    return ""
