"""Typical wrong answers to chapter 7's exercises: each must fail its checker."""
import math

import torch


def he_without_two(fan_in):
    return math.sqrt(1.0 / fan_in)


def he_variance_not_std(fan_in):
    return 2.0 / fan_in


def he_xavier_like(fan_in):
    return math.sqrt(2.0 / (fan_in + fan_in))


def depth_strict_off_by_one(threshold):
    return math.floor(math.log(threshold) / math.log(0.25)) + 1 if threshold < 1 else 0


def depth_not_ceiled(threshold):
    return math.log(threshold) / math.log(0.25) if threshold < 1 else 0


def depth_with_half(threshold):
    return max(0, math.ceil(math.log(threshold) / math.log(0.5)))


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
    "ch07-he-std": [he_without_two, he_variance_not_std, he_xavier_like],
    "ch07-sigmoid-depth": [depth_strict_off_by_one, depth_not_ceiled, depth_with_half],
    "ch07-inverted-dropout": [dropout_without_scaling, dropout_scaled_by_keep,
                              dropout_keeps_with_p, dropout_exact_fraction],
    "ch07-residual-backward": [residual_no_identity, residual_wrong_order, residual_transposed],
}
