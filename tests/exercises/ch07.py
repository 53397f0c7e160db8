"""Typical wrong answers to chapter 7's exercises: each must fail its checker."""
import math

import torch


def leaky_he_ignores_slope(fan_in, negative_slope):
    return math.sqrt(2.0 / fan_in)


def leaky_one_plus_a(fan_in, negative_slope):
    return math.sqrt(2.0 / ((1 + negative_slope) * fan_in))


def leaky_variance_not_std(fan_in, negative_slope):
    return 2.0 / ((1 + negative_slope ** 2) * fan_in)


def leaky_linear_value(fan_in, negative_slope):
    return math.sqrt(1.0 / fan_in)


def _e_tanh2(q, n=200_001):
    z = torch.linspace(-12, 12, n, dtype=torch.float64)
    density = torch.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi)
    return torch.trapezoid(torch.tanh(math.sqrt(q) * z) ** 2 * density, z).item()


def _iterate(update, steps=3000):
    q = 1.0
    for _ in range(steps):
        q = update(q)
    return q


def tanh_gain_not_squared(gain):
    return _iterate(lambda q: gain * _e_tanh2(q), steps=300) if gain > 1 else 0.0


def tanh_small_q_expansion(gain):
    return max(0.0, (gain ** 2 - 1) / (2 * gain ** 2))


def tanh_mean_squared(gain):
    # E[tanh(z)]² instead of E[tanh(z)²]: the mean of an odd function is 0
    return 0.0


def tanh_linear_map(gain):
    return gain ** 2 - 1 if gain > 1 else 0.0


def dropout_without_scaling(x, p):
    return x * (torch.rand(x.shape, dtype=x.dtype) >= p)


def dropout_scaled_by_keep(x, p):
    return x * (torch.rand(x.shape, dtype=x.dtype) >= p) * (1 - p)


def dropout_keeps_with_p(x, p):
    return x * (torch.rand(x.shape, dtype=x.dtype) < p) / (1 - p)


def dropout_exact_fraction(x, p):
    flat = x.reshape(-1)
    keep = torch.zeros(flat.numel(), dtype=torch.bool)
    keep[torch.randperm(flat.numel())[:round((1 - p) * flat.numel())]] = True
    return (flat * keep / (1 - p)).reshape(x.shape)


def residual_no_identity(jacobians, grad_out):
    g = grad_out
    for jac in reversed(jacobians):
        g = g @ jac
    return g


def residual_wrong_order(jacobians, grad_out):
    g = grad_out
    for jac in jacobians:  # multiplies J_1 first: the chain rule runs from the output backwards
        g = g @ (torch.eye(len(g), dtype=jac.dtype) + jac)
    return g


def residual_transposed(jacobians, grad_out):
    g = grad_out
    for jac in reversed(jacobians):
        g = (torch.eye(len(g), dtype=jac.dtype) + jac) @ g
    return g


WRONG_ANSWERS = {
    "ch07-leaky-relu-init": [leaky_he_ignores_slope, leaky_one_plus_a, leaky_variance_not_std,
                             leaky_linear_value],
    "ch07-tanh-fixed-point": [tanh_gain_not_squared, tanh_small_q_expansion, tanh_mean_squared,
                              tanh_linear_map],
    "ch07-inverted-dropout": [dropout_without_scaling, dropout_scaled_by_keep,
                              dropout_keeps_with_p, dropout_exact_fraction],
    "ch07-residual-backward": [residual_no_identity, residual_wrong_order, residual_transposed],
}
