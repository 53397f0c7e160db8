"""Checkers for chapter 2: vectors, matrices and gradients; linear regression."""
import torch

from mathref.checks.core import (as_tensor, exercise, expect, expect_callable, expect_tensor_close,
                                 without_autograd)

__all__ = ["check_ch02_steepest_descent", "check_ch02_mse_gradient",
           "check_ch02_least_squares", "check_ch02_max_stable_lr"]


def _close(got, want, what, rtol=1e-8, atol=1e-10):
    expect_tensor_close(got, want, what, rtol=rtol, atol=atol, tensor_only=True,
                        shape_hint=" (the shape of the parameter)")


@exercise("ch02-steepest-descent")
def check_ch02_steepest_descent(steepest_descent_direction):
    """steepest_descent_direction(g) returns the unit vector −g/‖g‖."""
    expect_callable(steepest_descent_direction, "steepest_descent_direction(grad)")
    gen = torch.Generator().manual_seed(0)
    cases = [torch.tensor([3.0, 4.0], dtype=torch.float64),
             torch.tensor([0.0, -2.0], dtype=torch.float64),
             torch.randn(5, generator=gen, dtype=torch.float64),
             torch.randn(2, 3, generator=gen, dtype=torch.float64)]
    for g in cases:
        u = steepest_descent_direction(g.clone())
        _close(u, -g / g.norm(), f"direction for gradient {g.flatten().tolist()[:3]}...")
        # and no random unit direction decreases f faster to first order
        others = torch.randn(200, g.numel(), generator=gen, dtype=torch.float64)
        others = others / others.norm(dim=1, keepdim=True)
        expect(float((u.flatten() * g.flatten()).sum()) <= float((others @ g.flatten()).min()),
               "some unit direction has a smaller directional derivative than yours")
    return "u = −∇f/‖∇f‖, the unit vector with the most negative directional derivative"


def _autograd_mse(X, W, b, Y):
    Wg, bg = W.clone().requires_grad_(True), b.clone().requires_grad_(True)
    loss = ((X @ Wg + bg - Y) ** 2).sum() / X.shape[0]
    return torch.autograd.grad(loss, [Wg, bg])


@exercise("ch02-mse-gradient")
def check_ch02_mse_gradient(mse_gradient):
    """mse_gradient(X, W, b, Y) returns (∂L/∂W, ∂L/∂b) for L = (1/N)‖XW + b − Y‖²."""
    expect_callable(mse_gradient, "mse_gradient(X, W, b, Y)")
    by_hand = without_autograd(mse_gradient)   # the statement says "no autograd"
    gen = torch.Generator().manual_seed(1)
    for N, d, m in ((8, 3, 2), (25, 4, 1), (5, 2, 3)):
        X = torch.randn(N, d, generator=gen, dtype=torch.float64)
        W = torch.randn(d, m, generator=gen, dtype=torch.float64)
        b = torch.randn(m, generator=gen, dtype=torch.float64)
        Y = torch.randn(N, m, generator=gen, dtype=torch.float64)
        got = by_hand(X, W, b, Y)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "expected a pair (grad_W, grad_b)")
        want_W, want_b = _autograd_mse(X, W, b, Y)
        _close(got[0], want_W, f"grad_W for N={N}, d={d}, m={m}")
        _close(got[1], want_b, f"grad_b for N={N}, d={d}, m={m}")
    return "(2/N)Xᵀ(Ŷ − Y) and (2/N)Σₙ(Ŷ − Y)ₙ agree with autograd"


@exercise("ch02-least-squares")
def check_ch02_least_squares(solve_least_squares):
    """solve_least_squares(X, y) returns (w, b) minimizing ‖Xw + b − y‖²."""
    expect_callable(solve_least_squares, "solve_least_squares(X, y)")
    gen = torch.Generator().manual_seed(2)
    # a well-conditioned problem with noise, checked against the normal equations in float64
    X = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    y = X @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64) + 3.0 \
        + 0.1 * torch.randn(40, generator=gen, dtype=torch.float64)
    Xt = torch.cat([X, torch.ones(40, 1, dtype=X.dtype)], dim=1)
    theta = torch.linalg.solve(Xt.T @ Xt, Xt.T @ y)
    got = solve_least_squares(X, y)
    expect(isinstance(got, (tuple, list)) and len(got) == 2, "expected a pair (w, b)")
    _close(got[0], theta[:3], "w on a noisy problem", rtol=1e-7)
    _close(got[1], theta[3], "b on a noisy problem", rtol=1e-7)
    # an ill-conditioned problem in float32 (two nearly equal features, cond(X̃) ≈ 2e3):
    # least squares recovers the exact weights, forming X̃ᵀX̃ squares the condition number
    t = torch.randn(100, generator=gen, dtype=torch.float64)
    X = torch.stack([t, t + 1e-3 * torch.randn(100, generator=gen, dtype=torch.float64)], 1)
    y = X @ torch.tensor([1.0, 2.0], dtype=torch.float64) + 0.5
    w, b = solve_least_squares(X.float(), y.float())
    _close(as_tensor(w, "w", tensor_only=True), torch.tensor([1.0, 2.0], dtype=torch.float64),
           "w on an ill-conditioned float32 problem (did you form XᵀX?)", rtol=0, atol=2e-3)
    _close(as_tensor(b, "b", tensor_only=True), torch.tensor(0.5, dtype=torch.float64),
           "b on an ill-conditioned float32 problem", rtol=0, atol=2e-3)
    return "least squares on [X, 1], accurate even when XᵀX is badly conditioned"


@exercise("ch02-max-stable-lr")
def check_ch02_max_stable_lr(max_stable_lr):
    """max_stable_lr(X): the learning rate above which full-batch gradient descent on
    L(w, b) = (1/N)‖Xw + b − y‖² diverges."""
    expect_callable(max_stable_lr, "max_stable_lr(X)")
    gen = torch.Generator().manual_seed(3)
    for N, scales in ((50, (1.0, 1.0)), (80, (1.0, 5.0, 0.3)), (30, (3.0,))):
        X = torch.randn(N, len(scales), generator=gen, dtype=torch.float64) \
            * torch.tensor(scales, dtype=torch.float64) + 1.0
        Xt = torch.cat([X, torch.ones(N, 1, dtype=X.dtype)], dim=1)
        want = 2.0 / torch.linalg.eigvalsh((2.0 / N) * Xt.T @ Xt).max().item()
        got = float(max_stable_lr(X))
        expect(abs(got - want) <= 1e-6 * want,
               f"N={N}, {len(scales)} features: expected {want:.6g}, got {got:.6g}")
        y = torch.randn(N, generator=gen, dtype=torch.float64)
        for lr, converges in ((0.98 * got, True), (1.02 * got, False)):
            w, b = torch.zeros(X.shape[1], dtype=X.dtype), torch.zeros((), dtype=X.dtype)
            for _ in range(3000):
                r = X @ w + b - y
                w, b = w - lr * (2 / N) * X.T @ r, b - lr * (2 / N) * r.sum()
            finite = bool(torch.isfinite(w).all()) and w.abs().max().item() < 1e6
            expect(finite == converges, f"η = {lr:.4g} should make gradient descent "
                                        f"{'converge' if converges else 'diverge'}")
    return "η < 2/λ_max((2/N)X̃ᵀX̃), bias column included"
