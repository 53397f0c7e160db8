"""Checkers for chapter 7: initialization, vanishing gradients, dropout, residuals."""
import math

import torch

from mathref.checks.core import exercise, expect, expect_callable, expect_close

__all__ = ["check_ch07_he_std", "check_ch07_sigmoid_depth", "check_ch07_inverted_dropout",
           "check_ch07_residual_backward"]


@exercise("ch07-he-std")
def check_ch07_he_std(he_std):
    """he_std(fan_in): the He standard deviation √(2 / fan_in) for ReLU layers."""
    expect_callable(he_std, "he_std(fan_in)")
    for fan_in in (1, 2, 64, 256, 3 * 3 * 64, 4096):
        expect_close(he_std(fan_in), math.sqrt(2.0 / fan_in), f"he_std({fan_in})", rtol=1e-9)
    return "Var(w) = 2/n_in keeps E[h²] constant through ReLU layers"


@exercise("ch07-sigmoid-depth")
def check_ch07_sigmoid_depth(layers_until_below):
    """layers_until_below(threshold): the smallest n ≥ 0 with 0.25**n ≤ threshold."""
    expect_callable(layers_until_below, "layers_until_below(threshold)")
    for threshold in (2.0, 1.0, 0.5, 0.25, 0.2, 0.1, 0.0625, 1e-3, 1e-6, 1e-10, 3e-20):
        n = 0
        while 0.25 ** n > threshold:
            n += 1
        got = layers_until_below(threshold)
        expect(isinstance(got, int) or (isinstance(got, float) and got.is_integer()),
               f"threshold {threshold:g}: expected a whole number of layers, got {got!r}")
        expect(got == n, f"threshold {threshold:g}: expected {n} layers "
                         f"(0.25^{n} = {0.25 ** n:.3g}), got {got}")
    return "0.25ⁿ falls below 10⁻⁶ after only 10 sigmoid layers"


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
