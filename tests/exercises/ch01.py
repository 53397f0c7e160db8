"""Typical wrong answers to chapter 1's exercises: each must fail its checker."""
import math

import torch


def forward_difference(f, x, h):
    return (f(x + h) - f(x)) / h


def central_without_two(f, x, h):
    return (f(x + h) - f(x - h)) / h


def central_sign_flipped(f, x, h):
    return (f(x - h) - f(x + h)) / (2 * h)


def gd_plus_sign(df, x0, lr, steps):
    xs = [x0]
    for _ in range(steps):
        xs.append(xs[-1] + lr * df(xs[-1]))
    return xs


def gd_missing_start(df, x0, lr, steps):
    xs, x = [], x0
    for _ in range(steps):
        x = x - lr * df(x)
        xs.append(x)
    return xs


def gd_gradient_at_start_only(df, x0, lr, steps):
    g = df(x0)
    return [x0 - k * lr * g for k in range(steps + 1)]


def steps_float_not_ceiled(x0, lr, tol):
    r = abs(1 - 2 * lr)
    if r >= 1:
        return math.inf
    return math.log(tol / abs(x0)) / math.log(r) if r > 0 else 1


def steps_no_divergence_case(x0, lr, tol):
    if abs(x0) <= tol:
        return 0
    r = abs(1 - 2 * lr)
    if r == 0:
        return 1
    return math.ceil(math.log(tol / abs(x0)) / math.log(r))


def steps_off_by_one(x0, lr, tol):
    r = abs(1 - 2 * lr)
    if r >= 1:
        return math.inf
    if r == 0:
        return 1
    return math.floor(math.log(tol / abs(x0)) / math.log(r)) + 1


def _eigenvalues(H):
    lam = torch.linalg.eigvalsh(H)
    return float(lam.min()), float(lam.max())


def step_stability_bound(H):          # 2/λ_max: the edge of divergence, not the best step
    lo, hi = _eigenvalues(H)
    return 2 / hi, abs(1 - 2 / hi * lo)


def step_one_over_lmax(H):            # the safe default 1/λ_max of chapter 2
    lo, hi = _eigenvalues(H)
    return 1 / hi, 1 - lo / hi


def step_from_trace(H):               # 2/tr(H) equals 2/(λ_min + λ_max) only in two dimensions
    lo, hi = _eigenvalues(H)
    return 2 / float(torch.trace(H)), (hi - lo) / (hi + lo)


def step_rate_wrong(H):               # the right step, the factor of 1/λ_max
    lo, hi = _eigenvalues(H)
    return 2 / (lo + hi), (hi - lo) / hi


def step_from_diagonal(H):            # reads curvatures off the diagonal (only right if H is diagonal)
    lo, hi = float(H.diagonal().min()), float(H.diagonal().max())
    return 2 / (lo + hi), (hi - lo) / (hi + lo)


WRONG_ANSWERS = {
    "ch01-central-difference": [forward_difference, central_without_two, central_sign_flipped],
    "ch01-gradient-descent-loop": [gd_plus_sign, gd_missing_start, gd_gradient_at_start_only],
    "ch01-best-constant-step": [step_stability_bound, step_one_over_lmax, step_from_trace,
                                step_rate_wrong, step_from_diagonal],
    "ch01-steps-to-tolerance": [steps_float_not_ceiled, steps_no_divergence_case,
                                steps_off_by_one],
}
