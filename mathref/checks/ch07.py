"""Checkers for chapter 7: initialization, vanishing gradients, dropout, residuals."""
import math

import numpy as np
import torch

from mathref.checks.core import exercise, expect, expect_callable, expect_close

__all__ = ["check_ch07_leaky_relu_init", "check_ch07_tanh_fixed_point",
           "check_ch07_inverted_dropout", "check_ch07_residual_backward"]


def _tanh_second_moment(q, nodes=200):
    """E[tanh(z)²] for z ~ N(0, q), by Gauss–Hermite quadrature (probabilists' weights)."""
    z, w = np.polynomial.hermite_e.hermegauss(nodes)
    return float(np.sum(w * np.tanh(math.sqrt(q) * z) ** 2) / math.sqrt(2 * math.pi))


def _tanh_fixed_point(gain):
    """The q* > 0 with q* = gain² E[tanh(z)²], z ~ N(0, q*), by bisection; 0 when gain ≤ 1."""
    if gain <= 1:
        return 0.0
    lo, hi = 1e-12, gain ** 2            # f(q) = gain² E[tanh²] − q: positive at lo, negative at hi
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if gain ** 2 * _tanh_second_moment(mid) > mid else (lo, mid)
    return (lo + hi) / 2


@exercise("ch07-leaky-relu-init")
def check_ch07_leaky_relu_init(leaky_relu_std):
    """leaky_relu_std(fan_in, negative_slope): √(2 / ((1 + a²) fan_in)), the std that keeps the
    second moment of the pre-activations constant through leaky-ReLU layers."""
    expect_callable(leaky_relu_std, "leaky_relu_std(fan_in, negative_slope)")
    for fan_in, a in ((64, 0.0), (256, 0.01), (256, 0.2), (1000, 0.5), (576, 1.0), (10, 0.3)):
        gain = torch.nn.init.calculate_gain("leaky_relu", a)          # PyTorch's own gain
        want = gain / math.sqrt(fan_in)
        got = leaky_relu_std(fan_in, a)
        expect(isinstance(got, (int, float)) or (isinstance(got, torch.Tensor) and got.numel() == 1),
               f"leaky_relu_std({fan_in}, {a}): expected a number, got {type(got).__name__}")
        got = float(got)
        hint = ""
        if abs(got - want ** 2) < 1e-12 * max(1.0, want ** 2):
            hint = " (that is the variance; return the standard deviation)"
        elif abs(got - math.sqrt(2 / fan_in)) < 1e-12 and a > 0:
            hint = " (that is He's ReLU value: the negative half is not zeroed any more)"
        expect_close(got, want, f"leaky_relu_std({fan_in}, negative_slope={a}){hint}", rtol=1e-9)
    # the derivation's claim, measured: 20 layers of width 512 keep E[z²] near its start
    gen = torch.Generator().manual_seed(7)
    a, width = 0.2, 512
    std = float(leaky_relu_std(width, a))
    z = torch.randn(128, width, generator=gen, dtype=torch.float64)
    for _ in range(20):
        h = torch.where(z > 0, z, a * z)
        z = h @ (std * torch.randn(width, width, generator=gen, dtype=torch.float64))
    second = z.pow(2).mean().item()
    expect(0.5 < second < 2.0, f"after 20 leaky-ReLU layers (a = {a}) with your std, E[z²] = "
                               f"{second:.3g} instead of staying near 1")
    return "E[leaky(z)²] = (1 + a²)/2 · E[z²], so Var(w) = 2/((1 + a²) n_in)"


@exercise("ch07-tanh-fixed-point")
def check_ch07_tanh_fixed_point(tanh_fixed_point):
    """tanh_fixed_point(gain): the fixed point q* of q ← gain² E[tanh(z)²], z ~ N(0, q)."""
    expect_callable(tanh_fixed_point, "tanh_fixed_point(gain)")
    for gain in (0.8, 1.0):
        got = float(tanh_fixed_point(gain))
        expect(abs(got) < 2e-3, f"tanh_fixed_point({gain}): for a gain ≤ 1 the only fixed point is "
                                f"q* = 0 (the signal dies out), got {got:.4g}")
    for gain in (1.1, 1.5, 5 / 3, 2.0, 4.0):
        want = _tanh_fixed_point(gain)
        got = float(tanh_fixed_point(gain))
        hint = ""
        if abs(got - (gain ** 2 - 1) / (2 * gain ** 2)) < 1e-3 * want:
            hint = " (that is the small-q expansion tanh(z)² ≈ z² − 2z⁴/3, valid only for gains near 1)"
        expect_close(got, want, f"tanh_fixed_point({gain:.4g}){hint}", rtol=2e-3)
        residual = gain ** 2 * _tanh_second_moment(got) - got
        expect(abs(residual) < 2e-3 * want, f"tanh_fixed_point({gain:.4g}) = {got:.4g} is not a "
                                            f"fixed point: gain²·E[tanh²] − q = {residual:.3g}")
    return "q* = gain²·E[tanh(z)²] with z ~ N(0, q*): 0 for gain ≤ 1, positive above"


@exercise("ch07-inverted-dropout")
def check_ch07_inverted_dropout(inverted_dropout):
    """inverted_dropout(x, p): keep each entry independently with probability 1 − p and scale
    kept entries by 1/(1 − p)."""
    expect_callable(inverted_dropout, "inverted_dropout(x, p)")
    torch.manual_seed(0)
    n = 200_000
    for p in (0.1, 0.5, 0.8):
        x = torch.rand(n, dtype=torch.float64) + 0.5   # all entries in [0.5, 1.5): none is 0
        y = inverted_dropout(x, p)
        expect(isinstance(y, torch.Tensor) and y.shape == x.shape,
               f"p={p}: expected a tensor of shape {tuple(x.shape)}, got "
               f"{getattr(y, 'shape', type(y).__name__)}")
        zero = (y == 0).double().mean().item()
        tol = 6 * math.sqrt(p * (1 - p) / n)
        expect(abs(zero - p) < tol, f"p={p}: a fraction p of the entries should be zeroed "
                                    f"(on average), got {zero:.4f}")
        kept = y != 0
        expect(torch.allclose(y[kept], x[kept] / (1 - p), rtol=1e-9, atol=0),
               f"p={p}: kept entries must be x/(1 − p) = x·{1 / (1 - p):.4g}; got ratios like "
               f"{(y[kept][:1] / x[kept][:1]).item():.4g}")
        expect_close(y.mean().item(), x.mean().item(), f"p={p}: mean of the output (E[y] = x)",
                     rtol=6 * math.sqrt(p / ((1 - p) * n)) * 1.5)
    # each unit independently: the kept count of 10 units varies from mask to mask
    counts = torch.tensor([float((inverted_dropout(torch.ones(10, dtype=torch.float64), 0.5) != 0)
                                 .sum()) for _ in range(2000)])
    expect(counts.var().item() > 1.5, "the number of kept units should be random "
           f"(Binomial(10, 0.5), variance 2.5), got variance {counts.var().item():.3g}: each "
           "unit must be kept independently, not an exact fraction")
    expect(1.5 < counts.var().item() < 3.5 and abs(counts.mean().item() - 5) < 0.25,
           "kept counts of 10 units at p=0.5 should be Binomial(10, 0.5): mean 5, variance 2.5; "
           f"got mean {counts.mean().item():.3g}, variance {counts.var().item():.3g}")
    x = torch.randn(100, dtype=torch.float64)
    expect(torch.equal(inverted_dropout(x, 0.0), x), "p=0 must return x unchanged")
    return "zero fraction ≈ p, kept entries scaled by 1/(1 − p), mean preserved"


@exercise("ch07-residual-backward")
def check_ch07_residual_backward(residual_backward):
    """residual_backward(jacobians, grad_out): ∂L/∂h_0 (a row vector) through
    h_l = h_{l−1} + F_l(h_{l−1}), with jacobians[l−1] = ∂F_l/∂h_{l−1}."""
    expect_callable(residual_backward, "residual_backward(jacobians, grad_out)")
    gen = torch.Generator().manual_seed(0)
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
        got = residual_backward([j.clone() for j in jacobians], g_out.clone())
        expect(isinstance(got, torch.Tensor) and tuple(got.shape) == (d,),
               f"depth {depth}: expected a tensor of shape ({d},), got "
               f"{getattr(got, 'shape', type(got).__name__)}")
        expect(torch.allclose(got.to(torch.float64), h0.grad, rtol=1e-8, atol=1e-10),
               f"depth {depth}: ∂L/∂h_0 differs from autograd by "
               f"{(got.to(torch.float64) - h0.grad).abs().max().item():.3g}")
    return "g_0 = g_L (I + J_L) ⋯ (I + J_1): the identity keeps a direct path for the gradient"
