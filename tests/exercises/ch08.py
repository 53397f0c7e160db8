"""Typical wrong answers to chapter 8's exercises: each must fail its checker."""
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- ch08-layer-norm
def ln_unbiased_variance(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta   # Tensor.var default


def ln_std_plus_eps(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    std = ((x - mu) ** 2).mean(-1, keepdim=True).sqrt()
    return gamma * (x - mu) / (std + eps) + beta


def ln_per_feature(x, gamma, beta, eps=1e-5):
    mu = x.mean(0, keepdim=True)                                  # statistics over the batch
    var = ((x - mu) ** 2).mean(0, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def ln_without_affine(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


# ---------------------------------------------------------------- ch08-rms-norm
def rms_divide_by_norm(x, gamma, eps=1e-5):
    return gamma * x / torch.sqrt((x ** 2).sum(-1, keepdim=True) + eps)


def rms_without_eps(x, gamma, eps=1e-5):
    return gamma * x / torch.sqrt((x ** 2).mean(-1, keepdim=True))


def rms_without_gain(x, gamma, eps=1e-5):
    return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps)


def rms_eps_outside(x, gamma, eps=1e-5):
    return gamma * x / (torch.sqrt((x ** 2).mean(-1, keepdim=True)) + eps)


# ---------------------------------------------------------------- ch08-running-stats
def running_biased_variance(x, running_mean, running_var, momentum):
    mean, var = x.mean(0), x.var(0, unbiased=False)
    return ((1 - momentum) * running_mean + momentum * mean,
            (1 - momentum) * running_var + momentum * var)


def running_momentum_reversed(x, running_mean, running_var, momentum):
    mean, var = x.mean(0), x.var(0)
    return (momentum * running_mean + (1 - momentum) * mean,
            momentum * running_var + (1 - momentum) * var)


def running_per_row(x, running_mean, running_var, momentum):
    return ((1 - momentum) * running_mean + momentum * x.mean(),
            (1 - momentum) * running_var + momentum * x.var())


# ---------------------------------------------------------------- ch08-batch-norm-backward
def _bn(x, eps, unbiased=False):
    mu = x.mean(0)
    var = x.var(0) if unbiased else ((x - mu) ** 2).mean(0)
    s = torch.sqrt(var + eps)
    return (x - mu) / s, s


def _bn_grads(dx, dy, xhat):
    return dx, (dy * xhat).sum(0), dy.sum(0)


def bnb_dropped_one_over_n(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    g = gamma * dy
    return _bn_grads((g - g.sum(0) - xhat * (g * xhat).sum(0)) / s, dy, xhat)


def bnb_forgot_gamma(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    return _bn_grads((dy - dy.mean(0) - xhat * (dy * xhat).mean(0)) / s, dy, xhat)


def bnb_sigma_constant(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    g = gamma * dy
    return _bn_grads((g - g.mean(0)) / s, dy, xhat)          # forgets that σ depends on x


def bnb_layer_norm_axis(dy, x, gamma, eps=1e-5):
    mu = x.mean(-1, keepdim=True)                              # statistics per example, not per feature
    s = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat, g = (x - mu) / s, gamma * dy
    return _bn_grads((g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) / s, dy, xhat)


def bnb_unbiased_variance(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps, unbiased=True)
    g = gamma * dy
    return _bn_grads((g - g.mean(0) - xhat * (g * xhat).mean(0)) / s, dy, xhat)


def bnb_dgamma_without_xhat(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    g = gamma * dy
    dx = (g - g.mean(0) - xhat * (g * xhat).mean(0)) / s
    return dx, (dy * x).sum(0), dy.sum(0)                     # dγ needs x̂, not x


def bnb_by_autograd(dy, x, gamma, eps=1e-5):
    x = x.detach().clone().requires_grad_(True)
    g = gamma.detach().clone().requires_grad_(True)
    b = torch.zeros_like(gamma, requires_grad=True)
    F.batch_norm(x, None, None, g, b, training=True, eps=eps).backward(dy)
    return x.grad, g.grad, b.grad


WRONG_ANSWERS = {
    "ch08-layer-norm": [ln_unbiased_variance, ln_std_plus_eps, ln_per_feature, ln_without_affine],
    "ch08-rms-norm": [rms_divide_by_norm, rms_without_eps, rms_without_gain, rms_eps_outside],
    "ch08-running-stats": [running_biased_variance, running_momentum_reversed, running_per_row],
    "ch08-batch-norm-backward": [bnb_dropped_one_over_n, bnb_forgot_gamma, bnb_sigma_constant,
                                 bnb_layer_norm_axis, bnb_unbiased_variance, bnb_dgamma_without_xhat,
                                 bnb_by_autograd],
}

# answers that ask autograd: refused by the "without autograd" wrapper (tests/test_exercises_without_autograd.py)
AUTOGRAD_CHEATS = {"ch08-batch-norm-backward": [bnb_by_autograd]}
