"""Checkers for chapter 8: BatchNorm, LayerNorm, RMSNorm and the LayerNorm backward pass.

Every expected value comes from PyTorch itself (``F.layer_norm``, ``F.rms_norm``,
``Tensor.var`` with ``unbiased=True``, autograd), in float64.
"""
import torch
import torch.nn.functional as F

from mathref.checks.core import exercise, expect, expect_callable, expect_tensor_close

__all__ = ["check_ch08_layer_norm", "check_ch08_rms_norm", "check_ch08_running_stats",
           "check_ch08_layer_norm_backward"]

F64 = torch.float64


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
    _expect_tensor_close(rms_norm_rows(x, gamma, 1e-5), F.rms_norm(x, (4,), gamma, eps=1e-5),
                         "a zero token, a tiny token and [1, 2, 3, 4] with d = 4")
    for seed in (0, 1):
        x, gamma, _ = _inputs(seed)
        _expect_tensor_close(rms_norm_rows(x.clone(), gamma, 1e-5),
                             F.rms_norm(x, (3,), gamma, eps=1e-5),
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


@exercise("ch08-layer-norm-backward")
def check_ch08_layer_norm_backward(layer_norm_backward):
    """layer_norm_backward(dy, x, gamma, eps=1e-5): ∂L/∂x for y = LayerNorm(x) over the last
    axis, given the upstream gradient dy = ∂L/∂y."""
    expect_callable(layer_norm_backward, "layer_norm_backward(dy, x, gamma, eps)")
    for seed, shape in ((0, (4, 5)), (1, (2, 3, 8)), (2, (3, 2))):
        gen = torch.Generator().manual_seed(seed)
        d = shape[-1]
        x = (1.0 + 2.0 * torch.randn(*shape, generator=gen, dtype=F64)).requires_grad_()
        gamma = torch.randn(d, generator=gen, dtype=F64)
        dy = torch.randn(*shape, generator=gen, dtype=F64)
        (F.layer_norm(x, (d,), gamma, None, eps=1e-5) * dy).sum().backward()
        got = layer_norm_backward(dy.clone(), x.detach().clone(), gamma.clone(), 1e-5)
        _expect_tensor_close(got, x.grad, f"∂L/∂x for x of shape {shape} (d = {d})",
                             rtol=1e-7, atol=1e-9)
    return "matches autograd through F.layer_norm"
