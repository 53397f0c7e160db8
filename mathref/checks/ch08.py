"""Checkers for chapter 8: BatchNorm, LayerNorm, RMSNorm and the BatchNorm backward pass.

Every expected value comes from PyTorch itself (``F.layer_norm``, ``F.rms_norm``,
``Tensor.var`` with ``unbiased=True``, autograd), in float64.
"""
import torch
import torch.nn.functional as F

from mathref.checks.core import (exercise, expect, expect_callable, expect_tensor_close,
                                 without_autograd)

__all__ = ["check_ch08_layer_norm", "check_ch08_rms_norm", "check_ch08_running_stats",
           "check_ch08_batch_norm_backward"]

F64 = torch.float64


def _rms_norm_oracle(x, shape, weight, eps):
    """PyTorch's F.rms_norm (torch >= 2.4), or its defining formula on an older torch."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, shape, weight, eps=eps)
    y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def _expect_tensor_close(got, want, what, rtol=1e-8, atol=1e-10):
    expect_tensor_close(got, want, what, rtol=rtol, atol=atol,
                        nan_hint=" (is ε inside the square root?)")


def _inputs(seed):
    """Tokens of very different scales, one nearly constant token, and small d."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 4, 3, generator=gen, dtype=F64) * torch.tensor([1.0, 10.0, 0.1], dtype=F64)
    x[0, 0] = torch.tensor([2.0, 2.001, 1.999], dtype=F64)      # near-constant token: ε matters
    x[1, 3] = torch.tensor([5.0, -3.0, 40.0], dtype=F64)
    gamma = torch.randn(3, generator=gen, dtype=F64)
    beta = torch.randn(3, generator=gen, dtype=F64)
    return x, gamma, beta


@exercise("ch08-layer-norm")
def check_ch08_layer_norm(layer_norm_rows):
    """layer_norm_rows(x, gamma, beta, eps=1e-5): LayerNorm of every token over its last axis."""
    expect_callable(layer_norm_rows, "layer_norm_rows(x, gamma, beta, eps)")
    for seed in (0, 1):
        x, gamma, beta = _inputs(seed)
        want = F.layer_norm(x, (3,), gamma, beta, eps=1e-5)
        _expect_tensor_close(layer_norm_rows(x.clone(), gamma, beta, 1e-5), want,
                             f"tokens of shape {tuple(x.shape)}, eps=1e-5")
    x = torch.tensor([[3.0, 1.0], [-100.0, 50.0], [1.0, 1.5]], dtype=F64)
    ones, zeros = torch.ones(2, dtype=F64), torch.zeros(2, dtype=F64)
    _expect_tensor_close(layer_norm_rows(x, ones, zeros, 1e-5), F.layer_norm(x, (2,), eps=1e-5),
                         "three tokens with d = 2 (each should map to about (±1, ∓1))")
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(3), dtype=F64) * 0.01
    _expect_tensor_close(layer_norm_rows(x, ones.new_ones(8), zeros.new_zeros(8), 0.1),
                         F.layer_norm(x, (8,), eps=0.1), "small tokens with eps=0.1")
    return "per token, biased variance, ε inside the square root"


@exercise("ch08-rms-norm")
def check_ch08_rms_norm(rms_norm_rows):
    """rms_norm_rows(x, gamma, eps=1e-5): γ ⊙ x / √(mean(x²) + ε) over the last axis."""
    expect_callable(rms_norm_rows, "rms_norm_rows(x, gamma, eps)")
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1e-3, -2e-3, 0.0, 1e-3], [1.0, 2.0, 3.0, 4.0]], dtype=F64)
    gamma = torch.tensor([1.0, 2.0, 0.5, -1.0], dtype=F64)
    _expect_tensor_close(rms_norm_rows(x, gamma, 1e-5), _rms_norm_oracle(x, (4,), gamma, 1e-5),
                         "a zero token, a tiny token and [1, 2, 3, 4] with d = 4")
    for seed in (0, 1):
        x, gamma, _ = _inputs(seed)
        _expect_tensor_close(rms_norm_rows(x.clone(), gamma, 1e-5),
                             _rms_norm_oracle(x, (3,), gamma, 1e-5),
                             f"tokens of shape {tuple(x.shape)}, eps=1e-5")
    return "γ ⊙ x/√(mean(x²) + ε): divides by ‖x‖/√d, safe at x = 0"


@exercise("ch08-running-stats")
def check_ch08_running_stats(update_running_stats):
    """update_running_stats(x, running_mean, running_var, momentum) for x (N, C): returns the
    new (running_mean, running_var) as nn.BatchNorm1d updates them in training mode."""
    expect_callable(update_running_stats, "update_running_stats(x, running_mean, running_var, momentum)")
    gen = torch.Generator().manual_seed(0)
    rm = torch.zeros(3, dtype=F64)
    rv = torch.ones(3, dtype=F64)
    for step, (n, momentum) in enumerate([(4, 0.1), (6, 0.1), (3, 0.5), (8, 0.25)]):
        x = 2.0 + 3.0 * torch.randn(n, 3, generator=gen, dtype=F64)
        want_mean = (1 - momentum) * rm + momentum * x.mean(0)
        want_var = (1 - momentum) * rv + momentum * x.var(0, unbiased=True)
        out = update_running_stats(x.clone(), rm.clone(), rv.clone(), momentum)
        expect(isinstance(out, (tuple, list)) and len(out) == 2,
               "return a pair (new_running_mean, new_running_var)")
        _expect_tensor_close(out[0], want_mean, f"running_mean after step {step + 1} (N={n}, momentum={momentum})")
        _expect_tensor_close(out[1], want_var, f"running_var after step {step + 1} (N={n}, momentum={momentum})")
        rm, rv = want_mean, want_var
    return "EMA with weight momentum on the new batch, unbiased variance"


@exercise("ch08-batch-norm-backward")
def check_ch08_batch_norm_backward(batch_norm_backward):
    """batch_norm_backward(dy, x, gamma, eps=1e-5): (∂L/∂x, ∂L/∂γ, ∂L/∂β) of training-mode
    BatchNorm of x of shape (n, C), without autograd."""
    expect_callable(batch_norm_backward, "batch_norm_backward(dy, x, gamma, eps)")
    by_hand = without_autograd(batch_norm_backward)
    for seed, (n, C) in ((0, (2, 3)), (1, (5, 1)), (2, (16, 7)), (3, (8, 4))):
        gen = torch.Generator().manual_seed(seed)
        x = (1.0 + 2.0 * torch.randn(n, C, generator=gen, dtype=F64)
             * torch.logspace(-2, 1, C, dtype=F64)).requires_grad_()      # features of very different scales
        gamma = torch.randn(C, generator=gen, dtype=F64).requires_grad_()
        beta = torch.randn(C, generator=gen, dtype=F64).requires_grad_()
        dy = torch.randn(n, C, generator=gen, dtype=F64)
        (F.batch_norm(x, None, None, gamma, beta, training=True, eps=1e-5) * dy).sum().backward()
        got = by_hand(dy.clone(), x.detach().clone(), gamma.detach().clone(), 1e-5)
        expect(isinstance(got, (tuple, list)) and len(got) == 3,
               f"expected the tuple (dx, dgamma, dbeta), got {type(got).__name__}"
               + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""))
        dx, dgamma, dbeta = got
        where = f"x of shape {(n, C)}"
        _expect_tensor_close(dbeta, beta.grad, f"∂L/∂β for {where} (a sum over the batch)")
        _expect_tensor_close(dgamma, gamma.grad, f"∂L/∂γ for {where} (Σ over the batch of dy ⊙ x̂)")
        _expect_tensor_close(dx, x.grad, f"∂L/∂x for {where} (statistics per feature, over the "
                                         "n examples)", rtol=1e-7, atol=1e-9)
    return "the LayerNorm backward on the batch axis: means over n, per feature; dγ = Σ dy ⊙ x̂, dβ = Σ dy"
