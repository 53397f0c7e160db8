"""Typical wrong answers to chapter 6's exercises: each must fail its checker."""
import math

import torch


def lr_no_floor(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    p = min(step - warmup_steps, total_steps - warmup_steps) / (total_steps - warmup_steps)
    return 0.5 * lr_max * (1 + math.cos(math.pi * p))          # decays to 0, not to lr_min


def lr_warmup_from_zero(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * step / warmup_steps                      # first step has lr = 0
    p = min(step - warmup_steps, total_steps - warmup_steps) / (total_steps - warmup_steps)
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * p))


def lr_progress_over_total(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    p = min(step, total_steps) / total_steps                     # ignores the warm-up shift
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * p))


def clip_per_tensor(grads, max_norm):
    return [g * min(1.0, max_norm / float(g.norm())) for g in grads]


def clip_always_rescale(grads, max_norm):
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    return [g * max_norm / norm for g in grads]                  # scales small gradients up


def clip_sum_of_norms(grads, max_norm):
    norm = sum(float(g.norm()) for g in grads)                   # ‖a‖ + ‖b‖, not √(‖a‖² + ‖b‖²)
    return [g * min(1.0, max_norm / norm) for g in grads]


def adam_no_bias_correction(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    return theta - lr * m / (v.sqrt() + eps), m, v


def adam_eps_inside_sqrt(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    return theta - lr * m_hat / (v_hat + eps).sqrt(), m, v


def adam_abs_not_square(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad.abs()                      # |g| instead of g²
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    return theta - lr * m_hat / (v_hat.sqrt() + eps), m, v


def _adam_core(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    return lr * m_hat / (v_hat.sqrt() + eps), m, v


def adamw_decay_without_lr(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    step, m, v = _adam_core(theta, grad, m, v, t, lr, beta1, beta2, eps)
    return (1 - weight_decay) * theta - step, m, v               # (1 − λ)θ


def adamw_as_l2(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    step, m, v = _adam_core(theta, grad + weight_decay * theta, m, v, t, lr, beta1, beta2, eps)
    return theta - step, m, v                                     # Adam + L2, coupled


def adamw_decay_after_step(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    step, m, v = _adam_core(theta, grad, m, v, t, lr, beta1, beta2, eps)
    return (1 - lr * weight_decay) * (theta - step), m, v         # decays the updated θ


def _quintic(X, gram_term):
    a, b, c = 3.4445, -4.7750, 2.0315
    A = X @ X.T
    return a * X + gram_term(A, b, c) @ X


def ns_without_normalizing(G, steps):
    X = G.clone()                                                 # X₀ = G: σ may exceed 1
    for _ in range(steps):
        X = _quintic(X, lambda A, b, c: b * A + c * A @ A)
    return X


def ns_elementwise_square(G, steps):
    X = G / G.norm()
    for _ in range(steps):
        X = _quintic(X, lambda A, b, c: b * A + c * A * A)        # A², elementwise
    return X


def ns_swapped_coefficients(G, steps):
    X = G / G.norm()
    for _ in range(steps):
        X = _quintic(X, lambda A, b, c: c * A + b * A @ A)        # b and c exchanged
    return X


WRONG_ANSWERS = {
    "ch06-warmup-cosine": [lr_no_floor, lr_warmup_from_zero, lr_progress_over_total],
    "ch06-clip-global-norm": [clip_per_tensor, clip_always_rescale, clip_sum_of_norms],
    "ch06-adam-step": [adam_no_bias_correction, adam_eps_inside_sqrt, adam_abs_not_square],
    "ch06-adamw-step": [adamw_decay_without_lr, adamw_as_l2, adamw_decay_after_step],
    "ch06-newton-schulz": [ns_without_normalizing, ns_elementwise_square, ns_swapped_coefficients],
}
