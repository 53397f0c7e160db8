"""Checkers for chapter 8: BatchNorm, LayerNorm, RMSNorm and the BatchNorm backward pass.

Every expected value comes from PyTorch itself (``F.layer_norm``, ``F.rms_norm``,
``Tensor.var`` with ``unbiased=True``, autograd), in float64.
"""
import torch
import torch.nn.functional as F

from mathref.checks.core import rng
from mathref.checks.core import (AUTOGRAD_FUNCTIONAL, exercise, expect, expect_callable,
                                 expect_tensor_close, without_autograd)

__all__ = ["check_ch08_layer_norm", "check_ch08_rms_norm", "check_ch08_running_stats",
           "check_ch08_batch_norm_backward"]

F64 = torch.float64

# Every PyTorch and mathref normalization: any of them does one of this chapter's exercises for
# the student (LayerNorm is BatchNorm of xᵀ, GroupNorm with one group is LayerNorm, ...).
_NORMS = (
    "torch.nn.functional.layer_norm", "torch.layer_norm", "torch.native_layer_norm",
    "torch.nn.functional.rms_norm", "torch.rms_norm",
    "torch.nn.functional.group_norm", "torch.group_norm", "torch.native_group_norm",
    "torch.nn.functional.instance_norm", "torch.instance_norm",
    "torch.nn.functional.batch_norm", "torch.batch_norm", "torch.native_batch_norm",
    "torch._native_batch_norm_legit", "torch.batch_norm_update_stats",
    "torch.ops.aten.native_layer_norm", "torch.ops.aten._fused_rms_norm",
    "torch.ops.aten.native_group_norm", "torch.ops.aten.native_batch_norm",
    "torch.ops.aten._native_batch_norm_legit", "torch.ops.aten._native_batch_norm_legit_functional",
    "torch.ops.aten._batch_norm_with_update", "torch.ops.aten._batch_norm_no_update",
    "torch.ops.aten.batch_norm_update_stats",
    "mathref.norm.layer_norm", "mathref.norm.rms_norm", "mathref.norm.batch_norm",
    "mathref.norm.LayerNormFunction.forward", "mathref.norm.RMSNormFunction.forward",
    "mathref.norm.BatchNormFunction.forward", "mathref.checks.ch08._rms_norm_oracle")
# the backward kernels and hand-derived backward passes a BatchNorm backward could borrow
_NORM_BACKWARDS = (
    "torch.ops.aten.native_batch_norm_backward", "torch.ops.aten.batch_norm_backward",
    "torch.ops.aten._batch_norm_impl_index_backward", "torch.ops.aten.cudnn_batch_norm_backward",
    "torch.ops.aten.miopen_batch_norm_backward", "torch.ops.aten.native_layer_norm_backward",
    "torch.ops.aten.native_group_norm_backward", "torch.ops.aten._fused_rms_norm_backward",
    "mathref.norm.BatchNormFunction.backward", "mathref.norm.LayerNormFunction.backward",
    "mathref.norm.RMSNormFunction.backward")


def _rms_norm_oracle(x, shape, weight, eps):
    """PyTorch's F.rms_norm (torch >= 2.4), or its defining formula on an older torch."""
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, shape, weight, eps=eps)
    y = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return y if weight is None else y * weight


def _expect_tensor_close(got, want, what, rtol=1e-8, atol=1e-10, wrong=()):
    """``got`` against ``want`` (float64); ``wrong`` lists (tensor, why) of the usual mistakes,
    and the message names the one ``got`` equals."""
    if isinstance(got, torch.Tensor) and got.is_floating_point():
        expect(got.dtype == want.dtype, f"{what}: your answer is "
               f"{str(got.dtype).replace('torch.', '')}, but the inputs are float64: compute in "
               "their dtype (do not call .float())")
    hint = ""
    if isinstance(got, torch.Tensor) and got.shape == want.shape:
        g = got.detach().to("cpu", F64)
        for other, why in wrong:
            if other.shape == g.shape and torch.allclose(g, other.to(F64), rtol=1e-8, atol=1e-10,
                                                         equal_nan=True):
                hint = f" ({why})"
                break
    expect_tensor_close(got, want, what + hint, rtol=rtol, atol=atol,
                        nan_hint=" (is ε inside the square root?)")


def _layer_norm_mistakes(x, gamma, beta, eps):
    mu = x.mean(-1, keepdim=True)
    biased = ((x - mu) ** 2).mean(-1, keepdim=True)
    return [(gamma * (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta,
             "that uses the unbiased variance (÷(d − 1)): LayerNorm divides by d"),
            (gamma * (x - mu) / (biased.sqrt() + eps) + beta,
             "ε is added to the standard deviation: it goes inside the square root, √(σ² + ε)"),
            ((x - mu) / torch.sqrt(biased + eps), "γ and β are not applied"),
            (gamma * (x - x.mean(0, keepdim=True))
             / torch.sqrt(((x - x.mean(0, keepdim=True)) ** 2).mean(0, keepdim=True) + eps) + beta,
             "the statistics run over the batch: LayerNorm takes them per token, over the "
             "last axis")]


def _rms_norm_mistakes(x, gamma, eps):
    ms = (x ** 2).mean(-1, keepdim=True)
    return [(gamma * x / torch.sqrt((x ** 2).sum(-1, keepdim=True) + eps),
             "that divides by ‖x‖: the RMS is √(mean(x²)) = ‖x‖/√d"),
            (x / torch.sqrt(ms + eps), "the gain γ is not applied"),
            (gamma * x / (ms.sqrt() + eps),
             "ε is added to the RMS: it goes inside the square root, √(mean(x²) + ε)"),
            (gamma * (x - x.mean(-1, keepdim=True)) / torch.sqrt(ms + eps),
             "RMSNorm does not subtract the mean")]


def _inputs(seed):
    """Tokens of very different scales, one nearly constant token, and small d."""
    gen = rng(seed)
    x = torch.randn(2, 4, 3, generator=gen, dtype=F64) * torch.tensor([1.0, 10.0, 0.1], dtype=F64)
    x[0, 0] = torch.tensor([2.0, 2.001, 1.999], dtype=F64)      # near-constant token: ε matters
    x[1, 3] = torch.tensor([5.0, -3.0, 40.0], dtype=F64)
    gamma = torch.randn(3, generator=gen, dtype=F64)
    beta = torch.randn(3, generator=gen, dtype=F64)
    return x, gamma, beta


@exercise("ch08-layer-norm", forbid=_NORMS,
          because="the exercise is to compute the statistics and normalize yourself")
def check_ch08_layer_norm(layer_norm_rows):
    """layer_norm_rows(x, gamma, beta, eps=1e-5): LayerNorm of every token over its last axis."""
    expect_callable(layer_norm_rows, "layer_norm_rows(x, gamma, beta, eps)")
    for seed in (0, 1):
        x, gamma, beta = _inputs(seed)
        want = F.layer_norm(x, (3,), gamma, beta, eps=1e-5)
        _expect_tensor_close(layer_norm_rows(x.clone(), gamma.clone(), beta.clone(), 1e-5), want,
                             f"tokens of shape {tuple(x.shape)}, eps=1e-5",
                             wrong=_layer_norm_mistakes(x, gamma, beta, 1e-5))
    x = torch.tensor([[3.0, 1.0], [-100.0, 50.0], [1.0, 1.5]], dtype=F64)
    ones, zeros = torch.ones(2, dtype=F64), torch.zeros(2, dtype=F64)
    _expect_tensor_close(layer_norm_rows(x.clone(), ones, zeros, 1e-5),
                         F.layer_norm(x, (2,), eps=1e-5),
                         "three tokens with d = 2 (each should map to about (±1, ∓1))",
                         wrong=_layer_norm_mistakes(x, ones, zeros, 1e-5))
    x = torch.randn(5, 8, generator=rng(3), dtype=F64) * 0.01
    _expect_tensor_close(layer_norm_rows(x.clone(), ones.new_ones(8), zeros.new_zeros(8), 0.1),
                         F.layer_norm(x, (8,), eps=0.1), "small tokens with eps=0.1",
                         wrong=_layer_norm_mistakes(x, ones.new_ones(8), zeros.new_zeros(8), 0.1) + [
                             (F.layer_norm(x, (8,), eps=1e-5),
                              "that ignores the eps argument: use eps, not a fixed 1e-5")])
    # tokens near 1e4 with a spread near 0.1: mean(x²) − μ² loses about (1e4/0.1)² · 1e-16 = 1e-6
    # of the variance to cancellation, mean((x − μ)²) about 1e-11 (section 8.5's numerics)
    gen = rng(4)
    x = (torch.tensor([1e4, -2e4, 3e4, 5e3], dtype=F64)[:, None]
         + 0.1 * torch.randn(4, 3, generator=gen, dtype=F64))
    gamma, beta = torch.randn(3, generator=gen, dtype=F64), torch.randn(3, generator=gen, dtype=F64)
    want = F.layer_norm(x, (3,), gamma, beta, eps=1e-5)
    got = layer_norm_rows(x.clone(), gamma.clone(), beta.clone(), 1e-5)
    centred = x - x.mean(-1, keepdim=True)          # LayerNorm ignores a token's common offset
    what = "tokens near 1e4 with a spread near 0.1, eps=1e-5"
    _expect_no_cancellation(
        got, want, lambda: layer_norm_rows(centred.clone(), gamma.clone(), beta.clone(), 1e-5),
        what, "the same tokens shifted to mean 0")
    _expect_tensor_close(got, want, what)
    return "per token, biased variance, ε inside the square root"


def _expect_no_cancellation(got, want, shifted_answer, what, shifted_what):
    """Fail naming the one-pass variance when ``got`` is off ``want`` but ``shifted_answer()``,
    the answer on the inputs shifted to mean 0 (whose expected output is the same), is not."""
    def close(t):
        return (isinstance(t, torch.Tensor) and t.shape == want.shape and t.dtype == want.dtype
                and bool(torch.isclose(t, want, rtol=1e-8, atol=1e-10).all()))
    if close(got) or not close(shifted_answer()):
        return
    off = ((got.detach() - want).abs().max() / want.abs().max()).item()
    expect(False, f"{what}: off by {off:.1e} relative to the largest entry, but within rounding "
           f"on {shifted_what} (whose answer is the same): the digits are lost to the offset. A "
           "variance computed from the squares, mean(x²) − μ² (or Σx² − nμ²), cancels there, "
           "losing about (offset/spread)² × 1e-16 of itself: subtract the mean first and square "
           "x − μ")


@exercise("ch08-rms-norm", forbid=_NORMS,
          because="the exercise is to compute the root mean square and normalize yourself")
def check_ch08_rms_norm(rms_norm_rows):
    """rms_norm_rows(x, gamma, eps=1e-5): γ ⊙ x / √(mean(x²) + ε) over the last axis."""
    expect_callable(rms_norm_rows, "rms_norm_rows(x, gamma, eps)")
    x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1e-3, -2e-3, 0.0, 1e-3], [1.0, 2.0, 3.0, 4.0]], dtype=F64)
    gamma = torch.tensor([1.0, 2.0, 0.5, -1.0], dtype=F64)
    _expect_tensor_close(rms_norm_rows(x.clone(), gamma.clone(), 1e-5),
                         _rms_norm_oracle(x, (4,), gamma, 1e-5),
                         "a zero token, a tiny token and [1, 2, 3, 4] with d = 4",
                         wrong=_rms_norm_mistakes(x, gamma, 1e-5))
    for seed in (0, 1):
        x, gamma, _ = _inputs(seed)
        _expect_tensor_close(rms_norm_rows(x.clone(), gamma.clone(), 1e-5),
                             _rms_norm_oracle(x, (3,), gamma, 1e-5),
                             f"tokens of shape {tuple(x.shape)}, eps=1e-5",
                             wrong=_rms_norm_mistakes(x, gamma, 1e-5))
    # small tokens with a large ε: an answer that ignores its eps argument fails here
    gen = rng(3)
    x = torch.randn(5, 8, generator=gen, dtype=F64) * 0.01
    gamma = torch.randn(8, generator=gen, dtype=F64)
    ignored = gamma * x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-5)
    _expect_tensor_close(rms_norm_rows(x.clone(), gamma.clone(), 0.1),
                         _rms_norm_oracle(x, (8,), gamma, 0.1), "small tokens with eps=0.1",
                         wrong=_rms_norm_mistakes(x, gamma, 0.1) + [
                             (ignored, "that ignores the eps argument: use eps, not a fixed 1e-5")])
    return "γ ⊙ x/√(mean(x²) + ε): divides by ‖x‖/√d, safe at x = 0"


@exercise("ch08-running-stats", forbid=_NORMS,
          because="the exercise is to write the running averages yourself, not to run "
                  "BatchNorm")
def check_ch08_running_stats(update_running_stats):
    """update_running_stats(x, running_mean, running_var, momentum) for x (N, C): returns the
    new (running_mean, running_var) as nn.BatchNorm1d updates them in training mode."""
    expect_callable(update_running_stats, "update_running_stats(x, running_mean, running_var, momentum)")
    gen = rng(0)
    rm = torch.zeros(3, dtype=F64)
    rv = torch.ones(3, dtype=F64)
    for step, (n, momentum) in enumerate([(4, 0.1), (6, 0.1), (3, 0.5), (8, 0.25)]):
        x = 2.0 + 3.0 * torch.randn(n, 3, generator=gen, dtype=F64)
        want_mean = (1 - momentum) * rm + momentum * x.mean(0)
        want_var = (1 - momentum) * rv + momentum * x.var(0, unbiased=True)
        given = (x.clone(), rm.clone(), rv.clone())
        out = update_running_stats(*given, momentum)
        for name, before, after in zip(("x", "running_mean", "running_var"), (x, rm, rv), given):
            expect(torch.equal(before, after),
                   f"your function changed its argument {name} in place (step {step + 1}); the "
                   "statement asks you not to modify the inputs: compute new tensors, e.g. "
                   "(1 − momentum) * running_mean + momentum * mean, instead of mul_/add_/copy_")
        expect(isinstance(out, (tuple, list)) and len(out) == 2,
               "return a pair (new_running_mean, new_running_var)")
        where = f"after step {step + 1} (N={n}, momentum={momentum})"
        _expect_tensor_close(out[0], want_mean, f"running_mean {where}", wrong=[
            (momentum * rm + (1 - momentum) * x.mean(0),
             "momentum is the weight of the new batch: (1 − m)·running + m·batch"),
            ((1 - momentum) * rm + momentum * x.mean(), "the mean is per feature, over the batch "
                                                        "axis 0, not over all entries")])
        _expect_tensor_close(out[1], want_var, f"running_var {where}", wrong=[
            ((1 - momentum) * rv + momentum * x.var(0, unbiased=False),
             "that is the biased batch variance: the running variance uses the unbiased one, "
             "÷(n − 1)"),
            (momentum * rv + (1 - momentum) * x.var(0),
             "momentum is the weight of the new batch: (1 − m)·running + m·batch"),
            ((1 - momentum) * rv + momentum * x.var(), "the variance is per feature, over the "
                                                       "batch axis 0, not over all entries")])
        rm, rv = want_mean, want_var
    # features near 1e4 with a spread near 0.1: Σx² − nμ² cancels (see ch08-layer-norm)
    x = (torch.tensor([1e4, -2e4, 2.0], dtype=F64)
         + 0.1 * torch.randn(8, 3, generator=gen, dtype=F64))
    rm, rv, momentum = x.mean(0).round(), torch.full((3,), 0.01, dtype=F64), 0.5
    want_var = (1 - momentum) * rv + momentum * x.var(0, unbiased=True)
    out = update_running_stats(x.clone(), rm.clone(), rv.clone(), momentum)
    expect(isinstance(out, (tuple, list)) and len(out) == 2,
           "return a pair (new_running_mean, new_running_var)")
    shift = x.mean(0)
    what = "running_var for features near 1e4 with a spread near 0.1 (N=8, momentum=0.5)"
    _expect_no_cancellation(
        out[1], want_var, lambda: update_running_stats(x - shift, rm - shift, rv.clone(), momentum)[1],
        what, "the same batch shifted to mean 0 per feature")
    _expect_tensor_close(out[0], (1 - momentum) * rm + momentum * x.mean(0),
                         "running_mean for features near 1e4 (N=8, momentum=0.5)")
    _expect_tensor_close(out[1], want_var, what)
    return "EMA with weight momentum on the new batch, unbiased variance"


@exercise("ch08-batch-norm-backward", forbid=_NORMS + _NORM_BACKWARDS + AUTOGRAD_FUNCTIONAL,
          because="derive the gradient by hand, without autograd, a backward kernel or finite "
                  "differences of a normalization")
def check_ch08_batch_norm_backward(batch_norm_backward):
    """batch_norm_backward(dy, x, gamma, eps=1e-5): (∂L/∂x, ∂L/∂γ, ∂L/∂β) of training-mode
    BatchNorm of x of shape (n, C), without autograd."""
    expect_callable(batch_norm_backward, "batch_norm_backward(dy, x, gamma, eps)")
    by_hand = without_autograd(batch_norm_backward)
    # the last case's ε = 0.5 is far from the default: an answer that ignores eps shows
    for seed, (n, C), eps in ((0, (2, 3), 1e-5), (1, (5, 1), 1e-5), (2, (16, 7), 1e-5),
                              (3, (8, 4), 1e-5), (4, (6, 3), 0.5)):
        gen = rng(seed)
        x = (1.0 + 2.0 * torch.randn(n, C, generator=gen, dtype=F64)
             * torch.logspace(-2, 1, C, dtype=F64)).requires_grad_()      # features of very different scales
        gamma = torch.randn(C, generator=gen, dtype=F64).requires_grad_()
        beta = torch.randn(C, generator=gen, dtype=F64).requires_grad_()
        dy = torch.randn(n, C, generator=gen, dtype=F64)
        (F.batch_norm(x, None, None, gamma, beta, training=True, eps=eps) * dy).sum().backward()
        got = by_hand(dy.clone(), x.detach().clone(), gamma.detach().clone(), eps)
        expect(isinstance(got, (tuple, list)) and len(got) == 3,
               f"expected the tuple (dx, dgamma, dbeta), got {type(got).__name__}"
               + (f" of length {len(got)}" if isinstance(got, (tuple, list)) else ""))
        dx, dgamma, dbeta = got
        where = f"x of shape {(n, C)}"
        x0, gamma0 = x.detach(), gamma.detach()
        _expect_tensor_close(dbeta, beta.grad, f"∂L/∂β for {where} (a sum over the batch)",
                             wrong=[(dy.mean(0), "a sum over the batch, not a mean")])
        _expect_tensor_close(dgamma, gamma.grad, f"∂L/∂γ for {where} (Σ over the batch of dy ⊙ x̂)",
                             wrong=[((dy * x0).sum(0), "dγ = Σ dy ⊙ x̂, with the normalized x̂, "
                                                       "not x"),
                                    ((dy * _xhat(x0, eps, unbiased=True)[0]).sum(0),
                                     "BatchNorm normalizes with the biased batch variance (÷ n)"),
                                    ((dy * _xhat(x0, eps, dim=-1)[0]).sum(0),
                                     "x̂ takes BatchNorm's statistics, per feature over the n "
                                     "examples, not LayerNorm's per example"),
                                    ((dy * _xhat(x0, 0.0)[0]).sum(0),
                                     "ε is missing: s = √(σ² + ε), which matters wherever a "
                                     "feature's batch variance is not large against ε"),
                                    ((dy * (x0 - x0.mean(0)) / (_xhat(x0, 0.0)[1] + eps)).sum(0),
                                     "ε is added to the standard deviation: it goes inside the "
                                     "square root, s = √(σ² + ε)")])
        _expect_tensor_close(dx, x.grad, f"∂L/∂x for {where} (statistics per feature, over the "
                                         "n examples)", rtol=1e-7, atol=1e-9,
                             wrong=_batch_norm_dx_mistakes(dy, x0, gamma0, eps))
        # the exact formula is within about 1e-14 of autograd (relative to the largest entry);
        # central differences, even around a hand-written forward pass, stay above 1e-12 here
        wants = (x.grad, gamma.grad, beta.grad)
        for name, mine, want in zip(("∂L/∂x", "∂L/∂γ", "∂L/∂β"), (dx, dgamma, dbeta), wants):
            off = _relative_off(mine, want)
            if off < 1e-12:
                continue
            # BatchNorm forgets each feature's mean, so the batch shifted to mean 0 has the
            # same gradients: an answer exact there loses its digits to the means
            shifted = by_hand(dy.clone(), x0 - x0.mean(0), gamma0.clone(), eps)
            if isinstance(shifted, (tuple, list)) and len(shifted) == 3 and all(
                    _relative_off(m, w) < 1e-12 for m, w in zip(shifted, wants)):
                spread = x0.std(0, unbiased=False)
                c = int((x0.mean(0).abs() / spread).argmax())
                expect(False, f"{name} for {where}: off by {off:.1e} relative to its largest "
                       "entry, but within rounding on the same batch shifted to mean 0 per "
                       "feature (whose gradients are the same): the digits are lost to the "
                       f"features' means (feature {c} has mean {x0[:, c].mean().item():.3g} "
                       f"against a spread of {spread[c].item():.2g}). A variance computed as "
                       "mean(x²) − μ² cancels there: compute it as mean((x − μ)²). (Difference "
                       "quotients lose digits there too; the exercise is the derivation.)")
            expect(False, f"{name} for {where}: off by {off:.1e} relative to its largest entry. "
                   "The exact formula is within float64 rounding (about 1e-14); an error of this "
                   "size is what float64 finite differences leave. Derive the gradient: "
                   "the exact formula is within rounding")
    return "the LayerNorm backward on the batch axis: means over n, per feature; dγ = Σ dy ⊙ x̂, dβ = Σ dy"


def _relative_off(got, want):
    """max |got − want| relative to the largest entry of ``want``."""
    got = got.detach().to("cpu", F64) if isinstance(got, torch.Tensor) else torch.as_tensor(got, dtype=F64)
    return ((got - want).abs().max() / want.abs().max()).item()


def _xhat(x, eps, dim=0, unbiased=False):
    """(x̂, s) with the statistics over ``dim``, the variance biased unless ``unbiased``."""
    mu = x.mean(dim, keepdim=True)
    var = x.var(dim, keepdim=True) if unbiased else ((x - mu) ** 2).mean(dim, keepdim=True)
    s = torch.sqrt(var + eps)
    return (x - mu) / s, s


def _batch_norm_dx_mistakes(dy, x, gamma, eps):
    """∂L/∂x computed the usual wrong ways, each with the reason."""
    def parts(dim=0, unbiased=False):
        return _xhat(x, eps, dim, unbiased)
    xhat, s = parts()
    g = gamma * dy
    n = x.shape[0]
    # at n = 2 a sum is a mean ÷ (n − 1): one tensor, two slips
    mistakes = [((g - g.sum(0) - xhat * (g * xhat).sum(0)) / s,
                 "the two means in ∂L/∂x divide by 1 here, not by n = 2: either sums where the "
                 "formula has means, or n − 1 in place of n (the means are over the n examples; "
                 "n − 1 belongs to the running variance only)" if n == 2 else
                 "sums where the formula has means: the 1/n is missing"),
                ((g - g.sum(0) / (n - 1) - xhat * (g * xhat).sum(0) / (n - 1)) / s,
                 "the two means in ∂L/∂x divide by n − 1: they are means over the n examples, "
                 "÷ n (n − 1 belongs to the running variance only)"),
                ((dy - dy.mean(0) - xhat * (dy * xhat).mean(0)) / s,
                 "γ is missing: the upstream gradient of x̂ is γ ⊙ dy"),
                ((g - g.mean(0)) / s, "σ depends on x too: the term − x̂ · mean(g ⊙ x̂) is missing"),
                ((g - xhat * (g * xhat).mean(0)) / s,
                 "μ depends on x too: the term − mean(g) is missing")]
    xhat_0, s_0 = _xhat(x, 0.0)                         # ε left out of dx's 1/s only
    mistakes.append(((g - g.mean(0) - xhat * (g * xhat).mean(0)) / s_0,
                     "ε is missing from the 1/s of ∂L/∂x: s = √(σ² + ε) there too"))
    mistakes.append(((g - g.mean(0) - xhat_0 * (g * xhat_0).mean(0)) / s_0,
                     "ε is missing: s = √(σ² + ε), which matters wherever a feature's batch "
                     "variance is not large against ε"))
    xhat_u, s_u = parts(unbiased=True)
    mistakes.append(((g - g.mean(0) - xhat_u * (g * xhat_u).mean(0)) / s_u,
                     "BatchNorm normalizes with the biased batch variance (÷ n)"))
    if x.shape[1] > 1:
        xhat_t, s_t = parts(dim=-1)
        mistakes.append(((g - g.mean(-1, keepdim=True)
                          - xhat_t * (g * xhat_t).mean(-1, keepdim=True)) / s_t,
                         "those are LayerNorm's statistics, per example: BatchNorm's run over "
                         "the n examples, per feature"))
    return mistakes
