"""Checkers for chapter 1: derivatives and gradient descent on x²."""
import math

import torch

from mathref.checks.core import exercise, expect, expect_callable, expect_close

__all__ = ["check_ch01_central_difference", "check_ch01_gradient_descent_loop",
           "check_ch01_best_constant_step", "check_ch01_steps_to_tolerance"]


@exercise("ch01-central-difference")
def check_ch01_central_difference(central_difference):
    """central_difference(f, x, h) must return (f(x + h) − f(x − h)) / (2h)."""
    expect_callable(central_difference, "central_difference(f, x, h)")
    # On x³ the central difference is exactly 3x² + h², whatever x: it tells forward
    # differences (3x² + 3xh + h²) and a missing factor 2 apart even with a large h.
    for x in (-1.5, 0.0, 2.0):
        for h in (0.1, 0.01):
            got = central_difference(lambda t: t ** 3, x, h)
            expect_close(got, 3 * x * x + h * h, f"d/dx x³ at x={x} with h={h}", rtol=1e-9)
    for f, df, x in ((math.sin, math.cos, 0.7), (math.exp, math.exp, -1.0),
                     (lambda t: 1 / t, lambda t: -1 / t ** 2, 2.0)):
        expect_close(central_difference(f, x, 1e-5), df(x), f"derivative at x={x}",
                     rtol=1e-8, atol=1e-9)
    return "exact on x³, O(h²) accurate elsewhere"


def _descent(df, x0, lr, steps):
    xs = [float(x0)]
    for _ in range(steps):
        xs.append(xs[-1] - lr * df(xs[-1]))
    return xs


@exercise("ch01-gradient-descent-loop")
def check_ch01_gradient_descent_loop(gradient_descent_1d):
    """gradient_descent_1d(df, x0, lr, steps) returns [x_0, x_1, ..., x_steps]."""
    expect_callable(gradient_descent_1d, "gradient_descent_1d(df, x0, lr, steps)")
    cases = [(lambda x: 2 * x, 3.0, 0.1, 10),                      # x²
             (lambda x: 4 * (x - 2) ** 3 + 2 * x, 0.5, 0.02, 25),   # (x − 2)⁴ + x²
             (lambda x: math.cos(x), 1.0, 0.5, 15)]                 # sin x
    for df, x0, lr, steps in cases:
        got = list(gradient_descent_1d(df, x0, lr, steps))
        want = _descent(df, x0, lr, steps)
        expect(len(got) == steps + 1,
               f"with steps={steps} expected {steps + 1} iterates (x_0 included), got {len(got)}")
        for k, (g, w) in enumerate(zip(got, want)):
            expect_close(g, w, f"x_{k} for x0={x0}, lr={lr}", rtol=1e-9, atol=1e-12)
    return "matches x_(k+1) = x_k − η f′(x_k) on three functions"


def _quadratic_cases():
    """Symmetric positive definite Hessians H = Q diag(λ) Qᵀ with known eigenvalues, in 2, 3 and
    5 dimensions (random rotations Q, so the answer cannot be read off the diagonal)."""
    gen = torch.Generator().manual_seed(11)
    cases = []
    for eigenvalues in ((1.0, 25.0), (0.5, 2.0), (3.0, 4.0), (0.2, 1.0, 7.0), (1.0, 2.0, 3.0, 5.0, 40.0)):
        lam = torch.tensor(eigenvalues, dtype=torch.float64)
        Q, _ = torch.linalg.qr(torch.randn(len(lam), len(lam), generator=gen, dtype=torch.float64))
        cases.append((Q @ torch.diag(lam) @ Q.T, lam, Q))
    return cases


def _worst_distance(H, Q, lr, steps):
    """Largest |θ_steps| over the starts θ_0 = each unit eigenvector, gradient descent on θᵀHθ/2."""
    worst = 0.0
    for j in range(Q.shape[1]):
        theta = Q[:, j].clone()
        for _ in range(steps):
            theta = theta - lr * (H @ theta)
        worst = max(worst, float(theta.norm()))
    return worst


@exercise("ch01-best-constant-step")
def check_ch01_best_constant_step(best_constant_step):
    """best_constant_step(H) returns (η*, ρ): the constant step that minimizes the worst
    per-step contraction max_i |1 − η λ_i| of gradient descent on θᵀHθ/2, and that factor."""
    expect_callable(best_constant_step, "best_constant_step(H)")
    for H, lam, Q in _quadratic_cases():
        lo, hi = float(lam.min()), float(lam.max())
        got = best_constant_step(H.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "expected a pair (eta, rate) of two numbers")
        eta, rate = float(got[0]), float(got[1])
        where = f"H with eigenvalues {[round(v, 3) for v in lam.tolist()]}"
        expect_close(eta, 2 / (lo + hi), f"η* for {where}", rtol=1e-8)
        expect_close(rate, (hi - lo) / (hi + lo), f"the contraction factor ρ for {where}",
                     rtol=1e-8, atol=1e-12)
        # the step really is best: nearby steps contract the worst direction more slowly
        steps = 40
        best = _worst_distance(H, Q, eta, steps)
        expect_close(best, rate ** steps, f"|θ_{steps}| from the worst start with your η ({where})",
                     rtol=1e-6, atol=1e-300)
        for other in (0.9 * eta, 0.97 * eta, 1.03 * eta, 1.1 * eta):
            expect(_worst_distance(H, Q, other, steps) > best,
                   f"η = {other:.4g} converges at least as fast as your η = {eta:.4g} ({where})")
    return "η* = 2/(λ_min + λ_max), ρ = (κ − 1)/(κ + 1), faster than any nearby η"


@exercise("ch01-steps-to-tolerance")
def check_ch01_steps_to_tolerance(steps_to_tolerance):
    """steps_to_tolerance(x0, lr, tol): smallest k with |x_k| ≤ tol for gradient descent on x²,
    or math.inf if that never happens."""
    expect_callable(steps_to_tolerance, "steps_to_tolerance(x0, lr, tol)")
    cases = [(3.0, 0.1, 1e-3), (3.0, 0.01, 1e-2), (-2.0, 0.3, 1e-6), (3.0, 0.9, 1e-4),
             (5.0, 0.45, 0.51), (3.0, 0.5, 1e-9), (0.01, 0.1, 0.1), (3.0, 1.0, 1e-3),
             (3.0, 1.2, 1e-3)]
    for x0, lr, tol in cases:
        expected = math.inf
        x = x0
        for k in range(100000):
            if abs(x) <= tol:
                expected = k
                break
            x = x - lr * 2 * x
            if abs(x) > 1e6:
                break
        got = steps_to_tolerance(x0, lr, tol)
        if math.isinf(expected):
            expect(got == math.inf, f"x0={x0}, η={lr}, tol={tol}: |x_k| never reaches tol "
                                    f"(|1 − 2η| ≥ 1), so expected math.inf, got {got!r}")
        else:
            expect(isinstance(got, int) or (isinstance(got, float) and got.is_integer()),
                   f"x0={x0}, η={lr}, tol={tol}: expected a whole number of steps, got {got!r}")
            expect(got == expected, f"x0={x0}, η={lr}, tol={tol}: expected {expected} steps, "
                                    f"got {got}")
    return "including η = 0.5 (one step), η = 1 (never) and η > 1 (never)"
