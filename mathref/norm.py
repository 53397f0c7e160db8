"""Normalization layers: BatchNorm, LayerNorm and RMSNorm, with hand-derived backward passes,
and GroupNorm, the family that holds LayerNorm and InstanceNorm.

Conventions (chapter 8): the variance used to normalize is the *biased* one (divide by n),
ε sits inside the square root, √(σ² + ε), and ε = 1e-5 by default. BatchNorm's running
variance, like PyTorch's, stores the *unbiased* batch variance (divide by n − 1).

Each functional form is written with plain tensor operations, so autograd differentiates it;
``manual_backward=True`` routes the same computation through a ``torch.autograd.Function``
whose backward pass is the one derived in chapter 8:

    ∂L/∂xᵢ = (1/s) [gᵢ − mean(g) − x̂ᵢ · mean(g ⊙ x̂)],   g = γ ⊙ ∂L/∂y,   s = √(σ² + ε)

(the means run over the normalized axis; RMSNorm drops the mean(g) term and uses
s = √(mean(x²) + ε)). See chapter 8.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

from mathref._validation import check_number, check_probability

__all__ = ["batch_norm", "layer_norm", "rms_norm", "group_norm", "BatchNorm1d", "LayerNorm", "RMSNorm",
           "BatchNormFunction", "LayerNormFunction", "RMSNormFunction"]


# ---------------------------------------------------------------------------- input checks
def _check_tensor(x, name="x"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


def _check_eps(eps):
    check_number("eps", eps, min=0.0)


def _shape_tuple(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    try:
        shape = tuple(int(n) for n in normalized_shape)
    except TypeError:
        raise TypeError(f"normalized_shape must be an int or a sequence of ints, got "
                        f"{normalized_shape!r}") from None
    if not shape or any(n <= 0 for n in shape):
        raise ValueError(f"normalized_shape must hold positive sizes, got {normalized_shape!r}")
    return shape


def _check_trailing(x, shape, what):
    _check_tensor(x)
    if x.dim() < len(shape) or tuple(x.shape[x.dim() - len(shape):]) != shape:
        raise ValueError(f"{what}: x of shape {tuple(x.shape)} does not end with "
                         f"normalized_shape {shape}")


def _check_param(p, shape, name):
    if p is None:
        return
    _check_tensor(p, name)
    if tuple(p.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(p.shape)}")


# ---------------------------------------------------------------------------- LayerNorm
def layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5, manual_backward=False,
               fused=False):
    """LayerNorm over the trailing ``normalized_shape`` dimensions of each token:

        y = γ ⊙ (x − μ)/√(σ² + ε) + β,   μ = mean(x),  σ² = mean((x − μ)²)   (biased)

    with μ and σ² computed per token over its d features. Same signature and result as
    ``torch.nn.functional.layer_norm``; ``fused=True`` calls that kernel (the fast path, tested
    equal). See chapter 8.
    """
    shape = _shape_tuple(normalized_shape)
    _check_trailing(x, shape, "layer_norm")
    _check_param(weight, shape, "weight")
    _check_param(bias, shape, "bias")
    _check_eps(eps)
    if fused:
        return F.layer_norm(x, shape, weight, bias, eps)
    if manual_backward:
        d = math.prod(shape)
        flat = x.reshape(*x.shape[:x.dim() - len(shape)], d)
        w = None if weight is None else weight.reshape(d)
        b = None if bias is None else bias.reshape(d)
        return LayerNormFunction.apply(flat, w, b, eps).reshape(x.shape)
    dims = tuple(range(-len(shape), 0))
    mu = x.mean(dim=dims, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=dims, keepdim=True)       # biased: divide by d
    y = (x - mu) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y


class LayerNormFunction(torch.autograd.Function):
    """LayerNorm over the last dimension with the hand-derived backward pass (chapter 8):

        ∂L/∂x = (1/s) [g − mean(g) − x̂ · mean(g ⊙ x̂)],  g = γ ⊙ ∂L/∂y,  s = √(σ² + ε)
        ∂L/∂γ = Σ_tokens ∂L/∂y ⊙ x̂,   ∂L/∂β = Σ_tokens ∂L/∂y

    Call as ``LayerNormFunction.apply(x, weight, bias, eps)``; weight and bias may be None.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mu = x.mean(dim=-1, keepdim=True)
        s = torch.sqrt(((x - mu) ** 2).mean(dim=-1, keepdim=True) + eps)
        xhat = (x - mu) / s
        ctx.save_for_backward(xhat, s, weight)
        ctx.has_bias = bias is not None
        y = xhat if weight is None else xhat * weight
        return y if bias is None else y + bias

    @staticmethod
    def backward(ctx, dy):
        xhat, s, weight = ctx.saved_tensors
        g = dy if weight is None else dy * weight
        dx = (g - g.mean(dim=-1, keepdim=True)
              - xhat * (g * xhat).mean(dim=-1, keepdim=True)) / s
        tokens = tuple(range(dy.dim() - 1))
        dw = (dy * xhat).sum(dim=tokens) if weight is not None else None
        db = dy.sum(dim=tokens) if ctx.has_bias else None
        return dx, dw, db, None


class LayerNorm(nn.Module):
    """Module form of :func:`layer_norm` with learnable γ (ones) and β (zeros), like
    ``torch.nn.LayerNorm`` (same parameter names). See chapter 8."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 manual_backward=False, fused=False, device=None, dtype=None):
        super().__init__()
        _check_eps(eps)
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.manual_backward, self.fused = eps, manual_backward, fused
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(self.normalized_shape, **kw)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(self.normalized_shape, **kw)) if elementwise_affine and bias else None

    def forward(self, x):
        return layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps,
                          self.manual_backward, self.fused)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


# ---------------------------------------------------------------------------- RMSNorm
def rms_norm(x, normalized_shape, weight=None, eps=1e-5, manual_backward=False, fused=False):
    """RMSNorm over the trailing ``normalized_shape`` dimensions of each token:

        y = γ ⊙ x / √(mean(x²) + ε)      (no centering, no β; γ optional)

    Note mean(x²) = ‖x‖²/d: the divisor is ‖x‖/√d, not ‖x‖. Same result as
    ``torch.nn.functional.rms_norm`` with the same eps (PyTorch's default eps=None means
    the dtype's machine epsilon; the course uses 1e-5); ``fused=True`` calls that kernel.
    See chapter 8.
    """
    shape = _shape_tuple(normalized_shape)
    _check_trailing(x, shape, "rms_norm")
    _check_param(weight, shape, "weight")
    _check_eps(eps)
    if fused:   # the kernel needs one dtype: under autocast, x may be bf16 and γ float32
        return F.rms_norm(x, shape, None if weight is None else weight.to(x.dtype), eps)
    if manual_backward:
        d = math.prod(shape)
        flat = x.reshape(*x.shape[:x.dim() - len(shape)], d)
        w = None if weight is None else weight.reshape(d)
        return RMSNormFunction.apply(flat, w, eps).reshape(x.shape)
    dims = tuple(range(-len(shape), 0))
    y = x / torch.sqrt((x ** 2).mean(dim=dims, keepdim=True) + eps)
    return y if weight is None else y * weight


class RMSNormFunction(torch.autograd.Function):
    """RMSNorm over the last dimension with the hand-derived backward pass (chapter 8):

        ∂L/∂x = (1/r) [g − x̂ · mean(g ⊙ x̂)],  g = γ ⊙ ∂L/∂y,  r = √(mean(x²) + ε),  x̂ = x/r
        ∂L/∂γ = Σ_tokens ∂L/∂y ⊙ x̂

    Call as ``RMSNormFunction.apply(x, weight, eps)``; weight may be None.
    """

    @staticmethod
    def forward(ctx, x, weight, eps):
        r = torch.sqrt((x ** 2).mean(dim=-1, keepdim=True) + eps)
        xhat = x / r
        ctx.save_for_backward(xhat, r, weight)
        return xhat if weight is None else xhat * weight

    @staticmethod
    def backward(ctx, dy):
        xhat, r, weight = ctx.saved_tensors
        g = dy if weight is None else dy * weight
        dx = (g - xhat * (g * xhat).mean(dim=-1, keepdim=True)) / r
        dw = (dy * xhat).sum(dim=tuple(range(dy.dim() - 1))) if weight is not None else None
        return dx, dw, None


class RMSNorm(nn.Module):
    """Module form of :func:`rms_norm`; ``elementwise_affine=False`` gives the parameter-free
    variant. Parameter name ``weight`` as in ``torch.nn.RMSNorm``. See chapter 8."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True,
                 manual_backward=False, fused=False, device=None, dtype=None):
        super().__init__()
        _check_eps(eps)
        self.normalized_shape = _shape_tuple(normalized_shape)
        self.eps, self.manual_backward, self.fused = eps, manual_backward, fused
        self.weight = (nn.Parameter(torch.ones(self.normalized_shape, device=device, dtype=dtype))
                       if elementwise_affine else None)

    def forward(self, x):
        return rms_norm(x, self.normalized_shape, self.weight, self.eps, self.manual_backward,
                        self.fused)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


# ---------------------------------------------------------------------------- BatchNorm
def _bn_dims(x):
    return (0,) if x.dim() == 2 else (0, 2)


def _per_feature(t, x):
    """Reshape a (C,) tensor so that it broadcasts against x of shape (N, C) or (N, C, L)."""
    return t if x.dim() == 2 else t[:, None]


def batch_norm(x, running_mean=None, running_var=None, weight=None, bias=None, training=True,
               momentum=0.1, eps=1e-5, manual_backward=False):
    """BatchNorm for x of shape (N, C) or (N, C, L): statistics per feature c over the batch
    (and length) axes, as ``torch.nn.functional.batch_norm`` (same argument order).

    training:  y = γ ⊙ (x − μ_B)/√(σ²_B + ε) + β  with the biased batch variance σ²_B, and,
               if running buffers are given, in place
               running_mean ← (1 − m)·running_mean + m·μ_B,
               running_var  ← (1 − m)·running_var + m·σ²_B·n/(n − 1)   (unbiased), n = N·L;
    eval:      y = γ ⊙ (x − running_mean)/√(running_var + ε) + β.
    See chapter 8.
    """
    _check_tensor(x)
    if x.dim() not in (2, 3):
        raise ValueError(f"batch_norm expects x of shape (N, C) or (N, C, L), got {tuple(x.shape)}")
    C = x.shape[1]
    for t, name in ((running_mean, "running_mean"), (running_var, "running_var"),
                    (weight, "weight"), (bias, "bias")):
        _check_param(t, (C,), name)
    _check_eps(eps)
    if not training and (running_mean is None or running_var is None):
        raise ValueError("batch_norm in eval mode (training=False) needs running_mean and running_var")
    dims = _bn_dims(x)
    n = x.numel() // C
    if training:
        if n < 2:
            raise ValueError(f"batch_norm in training mode needs more than one value per feature, "
                             f"got x of shape {tuple(x.shape)}")
        check_probability("momentum", momentum)
        mu = x.mean(dim=dims)
        var = ((x - _per_feature(mu, x).unsqueeze(0)) ** 2).mean(dim=dims)   # biased
        if running_mean is not None:
            with torch.no_grad():
                running_mean.mul_(1 - momentum).add_(momentum * mu.detach())
        if running_var is not None:
            with torch.no_grad():
                running_var.mul_(1 - momentum).add_(momentum * var.detach() * n / (n - 1))
        if manual_backward:
            return BatchNormFunction.apply(x, weight, bias, eps)
    else:
        mu, var = running_mean, running_var
    shape = (1, C) if x.dim() == 2 else (1, C, 1)
    y = (x - mu.reshape(shape)) / torch.sqrt(var.reshape(shape) + eps)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """GroupNorm for x of shape (N, C, *), as ``torch.nn.functional.group_norm``: the C channels
    are split into G = ``num_groups`` groups of C/G, and each example's group is normalized over
    its channels and all positions,

        y[n, c, ...] = γ_c (x[n, c, ...] − μ_{n,g})/√(σ²_{n,g} + ε) + β_c,   g = the group of c,

    with the biased variance. G = 1 is LayerNorm over (C, *), G = C is InstanceNorm; BatchNorm
    pools over (N, *) per channel instead, so only it mixes the examples of a batch. See chapter 8.
    """
    _check_tensor(x)
    if x.dim() < 2:
        raise ValueError(f"group_norm expects x of shape (N, C, *), got {tuple(x.shape)}")
    if isinstance(num_groups, bool) or not isinstance(num_groups, int) or num_groups < 1:
        raise ValueError(f"num_groups must be a positive int, got {num_groups!r}")
    N, C = x.shape[:2]
    if C % num_groups:
        raise ValueError(f"num_groups = {num_groups} must divide the {C} channels of x")
    for t, name in ((weight, "weight"), (bias, "bias")):
        _check_param(t, (C,), name)
    _check_eps(eps)
    groups = x.reshape(N, num_groups, -1)
    mu = groups.mean(dim=-1, keepdim=True)
    var = ((groups - mu) ** 2).mean(dim=-1, keepdim=True)                  # biased
    y = ((groups - mu) / torch.sqrt(var + eps)).reshape(x.shape)
    shape = (1, C) + (1,) * (x.dim() - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


class BatchNormFunction(torch.autograd.Function):
    """Training-mode BatchNorm of x (N, C) or (N, C, L) with the hand-derived backward pass:
    the LayerNorm formula with the means taken over the batch (and length) axes per feature,

        ∂L/∂x = (1/s) [g − mean_B(g) − x̂ · mean_B(g ⊙ x̂)],  g = γ ⊙ ∂L/∂y,  s = √(σ²_B + ε).

    Call as ``BatchNormFunction.apply(x, weight, bias, eps)``. See chapter 8.
    """

    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        dims = _bn_dims(x)
        mu = x.mean(dim=dims, keepdim=True)
        s = torch.sqrt(((x - mu) ** 2).mean(dim=dims, keepdim=True) + eps)
        xhat = (x - mu) / s
        ctx.save_for_backward(xhat, s, weight)
        ctx.has_bias = bias is not None
        y = xhat if weight is None else xhat * _per_feature(weight, x)
        return y if bias is None else y + _per_feature(bias, x)

    @staticmethod
    def backward(ctx, dy):
        xhat, s, weight = ctx.saved_tensors
        dims = _bn_dims(dy)
        g = dy if weight is None else dy * _per_feature(weight, dy)
        dx = (g - g.mean(dim=dims, keepdim=True)
              - xhat * (g * xhat).mean(dim=dims, keepdim=True)) / s
        dw = (dy * xhat).sum(dim=dims) if weight is not None else None
        db = dy.sum(dim=dims) if ctx.has_bias else None
        return dx, dw, db, None


class BatchNorm1d(nn.Module):
    """Module form of :func:`batch_norm` with the state of ``torch.nn.BatchNorm1d`` (weight,
    bias, running_mean, running_var, num_batches_tracked; ``momentum=None`` gives the
    cumulative average 1/t). ``.train()`` uses batch statistics, ``.eval()`` the running ones.
    See chapter 8."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, manual_backward=False, device=None, dtype=None):
        super().__init__()
        if not isinstance(num_features, int) or num_features <= 0:
            raise ValueError(f"num_features must be a positive int, got {num_features!r}")
        _check_eps(eps)
        if momentum is not None:
            check_probability("momentum", momentum)
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.manual_backward = manual_backward
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(num_features, **kw)) if affine else None
        self.bias = nn.Parameter(torch.zeros(num_features, **kw)) if affine else None
        self.track_running_stats = track_running_stats
        if track_running_stats:
            self.register_buffer("running_mean", torch.zeros(num_features, **kw))
            self.register_buffer("running_var", torch.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", torch.tensor(0, dtype=torch.long,
                                                                     device=device))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, x):
        _check_tensor(x)
        if x.dim() not in (2, 3) or x.shape[1] != self.num_features:
            raise ValueError(f"x must be (N, {self.num_features}) or (N, {self.num_features}, L) "
                             f"for BatchNorm1d({self.num_features}), got shape {tuple(x.shape)}")
        use_batch_stats = self.training or not self.track_running_stats
        momentum = 0.0
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            momentum = (1.0 / float(self.num_batches_tracked) if self.momentum is None
                        else self.momentum)
        stats = ((self.running_mean, self.running_var)
                 if self.track_running_stats and self.training or not use_batch_stats
                 else (None, None))
        return batch_norm(x, *stats, self.weight, self.bias, use_batch_stats, momentum,
                          self.eps, self.manual_backward)

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"
