"""Typical wrong answers to chapter 8's exercises: each must fail its checker."""
import torch


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


# ---------------------------------------------------------------- ch08-layer-norm-backward
def _xhat(x, eps):
    mu = x.mean(-1, keepdim=True)
    s = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    return (x - mu) / s, s


def lnb_dropped_one_over_d(dy, x, gamma, eps=1e-5):
    xhat, s = _xhat(x, eps)
    g = gamma * dy
    return (g - g.sum(-1, keepdim=True) - xhat * (g * xhat).sum(-1, keepdim=True)) / s


def lnb_forgot_gamma(dy, x, gamma, eps=1e-5):
    xhat, s = _xhat(x, eps)
    g = dy
    return (g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) / s


def lnb_mean_only(dy, x, gamma, eps=1e-5):
    xhat, s = _xhat(x, eps)
    g = gamma * dy
    return (g - g.mean(-1, keepdim=True)) / s          # forgets that σ depends on x


WRONG_ANSWERS = {
    "ch08-layer-norm": [ln_unbiased_variance, ln_std_plus_eps, ln_per_feature, ln_without_affine],
    "ch08-rms-norm": [rms_divide_by_norm, rms_without_eps, rms_without_gain, rms_eps_outside],
    "ch08-running-stats": [running_biased_variance, running_momentum_reversed, running_per_row],
    "ch08-layer-norm-backward": [lnb_dropped_one_over_d, lnb_forgot_gamma, lnb_mean_only],
}
