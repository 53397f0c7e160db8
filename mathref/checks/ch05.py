"""Checkers for chapter 5: probability, information theory and losses."""
import math

import torch
import torch.nn.functional as F

from mathref.checks.core import rng
from mathref.checks.core import (AUTOGRAD_FUNCTIONAL, CheckFailure, as_tensor, exercise, expect,
                                 expect_callable, expect_close, without_autograd)

__all__ = ["check_ch05_logsumexp", "check_ch05_perplexity", "check_ch05_ce_gradient",
           "check_ch05_bits_per_byte", "check_ch05_lm_loss"]


_LOGSUMEXP_BUILTINS = (
    "torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp",
    "torch.ops.aten.logsumexp", "mathref.losses.logsumexp",
    # log-softmax is log-sum-exp in disguise: x_i − log_softmax(x)_i = LSE(x)
    "torch.log_softmax", "torch.Tensor.log_softmax", "torch.nn.functional.log_softmax",
    "torch.special.log_softmax", "mathref.losses.log_softmax",
    # and these compute it inside too: a cumulative LSE's last entry, x_0 + CE(x, 0), softmax's
    # normalizer
    "torch.logcumsumexp", "torch.Tensor.logcumsumexp", "torch.ops.aten.logcumsumexp",
    "torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax",
    "torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss",
    # and a fold of the pairwise log-sum-exp over the entries is log-sum-exp done by PyTorch
    "torch.logaddexp", "torch.Tensor.logaddexp", "torch.ops.aten.logaddexp",
    # or by NumPy (np.logaddexp.reduce, scipy's logsumexp): the tensor may not become an array
    # (.tolist() and plain Python floats stay allowed)
    "torch.Tensor.numpy", "torch.Tensor.__array__")


@exercise("ch05-logsumexp", forbid=_LOGSUMEXP_BUILTINS,
          because="the exercise is to subtract the maximum yourself")
def check_ch05_logsumexp(stable_logsumexp):
    """stable_logsumexp(x) = log Σ exp(x_i) for a 1-D float tensor, without overflow."""
    expect_callable(stable_logsumexp, "stable_logsumexp(x)")
    gen = rng(5)
    cases = [torch.randn(7, generator=gen, dtype=torch.float64),
             torch.tensor([1000.0, 1000.0], dtype=torch.float64),
             torch.tensor([-1000.0, -1001.0, -1002.0], dtype=torch.float64),
             torch.tensor([800.0, 0.0, -5.0], dtype=torch.float64),
             torch.tensor([0.0, 1000.0], dtype=torch.float64),       # the maximum is not x[0]
             torch.tensor([3.0], dtype=torch.float64),
             torch.tensor([100.0, 90.0, 95.0], dtype=torch.float32),
             torch.tensor([300.0, 0.0, -5.0], dtype=torch.float32)]  # e^(300 − mean) overflows
    for x in cases:
        got = stable_logsumexp(x.clone())
        what = (f"logsumexp of {str(x.dtype).replace('torch.', '')} "
                f"{[round(v, 4) for v in x.tolist()]}")
        if isinstance(got, torch.Tensor):
            expect(got.numel() == 1, f"{what}: expected a number or a 0-D tensor, got a tensor "
                                     f"of shape {tuple(got.shape)} (sum over all entries of x)")
        expect(not (x.dtype == torch.float64 and isinstance(got, torch.Tensor)
                    and got.dtype in (torch.float32, torch.float16, torch.bfloat16)),
               f"{what}: your answer is {str(getattr(got, 'dtype', '')).replace('torch.', '')} "
               "but x is float64: compute in x's own dtype (do not call .float())")
        value = _as_number(got, what)
        want = torch.logsumexp(x.double(), 0).item()
        expect(math.isfinite(value), f"{what}: expected {want:.10g}, got {value} — an exp "
               "overflowed: subtract the maximum of x (not its mean or its first entry) so "
               "that the largest exponent is e^0 = 1")
        tol = 1e-6 if x.dtype == torch.float32 else 1e-12
        hint = ""
        if len(x) > 1 and abs(want - value) > tol:
            if abs(value - x.max().item()) < 1e-9:
                hint = " (that is max(x) alone: add log Σ exp(x_i − max))"
            elif abs(value - (want - x.max().item())) < 1e-6 * max(1.0, abs(want)):
                hint = (" (that is log Σ exp(x_i − m) without m: add the maximum m back "
                        "outside the log)")
            elif x.dtype == torch.float64 and abs(want - value) < 1e-6 * max(1.0, abs(want)):
                hint = (" (close but not exact: compute in x's dtype (float64), not "
                        "float32)")
        expect_close(value, want, what + hint, rtol=tol, atol=tol)
    return "finite for ±1000, equal to log Σ exp elsewhere"


def _as_number(value, what):
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailure(f"{what}: expected a number, got {type(value).__name__}") from None


@exercise("ch05-perplexity", forbid=("mathref.losses.perplexity",),
          because="the exercise is to write the formula yourself")
def check_ch05_perplexity(perplexity_from_nlls):
    """perplexity_from_nlls(nlls): exp of the mean per-token NLL in nats."""
    expect_callable(perplexity_from_nlls, "perplexity_from_nlls(nlls)")
    uniform = torch.full((10,), math.log(65), dtype=torch.float64)
    expect_close(perplexity_from_nlls(uniform), 65.0,
                 "a uniform model over 65 tokens (every NLL = ln 65)", rtol=1e-9)
    gen = rng(2)
    # 2000 tokens: Σ NLL is far above 709, so a product of exp(NLL)s overflows to inf
    for n in (5, 40, 2000):
        nlls = 3 * torch.rand(n, generator=gen, dtype=torch.float64)
        expect_close(perplexity_from_nlls(nlls.clone()), math.exp(nlls.mean().item()),
                     f"perplexity of {n} NLLs with mean {nlls.mean().item():.4f} nats", rtol=1e-9)
    return "PPL = exp(mean NLL in nats), the geometric mean of 1/p"


@exercise("ch05-ce-gradient", forbid=AUTOGRAD_FUNCTIONAL + (
    "torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss",
    "mathref.losses.cross_entropy", "torch.ops.aten.nll_loss_backward", "torch.ops.aten.nll_loss2d_backward",
    "torch.ops.aten._log_softmax_backward_data", "torch.ops.aten._softmax_backward_data"),
    because="derive the gradient by hand: autograd and the library's cross-entropy, whose "
            "finite differences would do it for you, are refused")
def check_ch05_ce_gradient(ce_gradient):
    """ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100): ∂/∂logits of
    F.cross_entropy with the same options, computed without autograd."""
    expect_callable(ce_gradient, "ce_gradient(logits, targets, label_smoothing, ignore_index)")
    by_hand = without_autograd(ce_gradient)
    gen = rng(3)
    cases = [(1, 4, 0.0, 0), (5, 3, 0.0, 0), (8, 10, 0.0, 0),     # plain mean cross-entropy
             (6, 5, 0.1, 0), (7, 4, 0.3, 0),                      # label smoothing
             (9, 6, 0.0, 3), (10, 5, 0.2, 4)]                     # ignored rows (± smoothing)
    for N, V, eps, n_ignored in cases:
        logits = 2 * torch.randn(N, V, generator=gen, dtype=torch.float64)
        targets = torch.randint(0, V, (N,), generator=gen)
        ignore_index = -100 if N % 2 else V + 1                   # the default and another id
        targets[torch.randperm(N, generator=gen)[:n_ignored]] = ignore_index
        z = logits.clone().requires_grad_(True)
        F.cross_entropy(z, targets, label_smoothing=eps, ignore_index=ignore_index).backward()
        got = as_tensor(by_hand(logits.clone(), targets.clone(), eps, ignore_index), "ce_gradient")
        where = (f"N={N}, V={V}, label_smoothing={eps}, {n_ignored} rows with target "
                 f"ignore_index={ignore_index}")
        expect(tuple(got.shape) == (N, V),
               f"{where}: expected a gradient of shape {(N, V)}, got {tuple(got.shape)}")
        if n_ignored:
            ignored = targets == ignore_index
            expect(bool((got[ignored] == 0).all()),
                   f"{where}: the rows of ignored targets must get a zero gradient")
            expect(got.sum().abs().item() < 1e-10, f"{where}: every row of the gradient sums to 0")
        err = (got - z.grad).abs().max().item()
        n_real = int((targets != ignore_index).sum())
        expect(err < 1e-10, f"{where}: max |yours − autograd| = {err:.3g} "
                            + _ce_gradient_hint(got, z.grad, N, n_real))
    return "(softmax(z) − q) / #real rows, q = (1 − ε)·onehot(y) + ε/V, zero on ignored rows"


def _ce_gradient_hint(got, want, N, n_real):
    """The likeliest reason a cross-entropy gradient is off, from how it relates to the right one."""
    def near(other):
        return torch.allclose(got, other, rtol=1e-6, atol=1e-9)
    err = (got - want).abs().max().item()
    if err < 1e-5:
        return ("(close but not exact: compute in the dtype of logits (float64), not float32)")
    if near(-want):
        return "(the sign is flipped: the gradient is p − q, not q − p)"
    if n_real > 1 and near(want * n_real):
        return "(not divided by the number of rows: the loss is a mean over the real rows)"
    if n_real != N and near(want * n_real / N):
        return ("(divided by all N rows: the mean runs over the rows whose target is not "
                "ignore_index)")
    return ("(the gradient of one row is p − q with the smoothed target q = (1 − ε)·onehot(y) "
            "+ ε/V, divided by the number of rows that are not ignored)")


@exercise("ch05-bits-per-byte", forbid=("mathref.losses.bits_per_byte",),
          because="the exercise is to write the formula yourself")
def check_ch05_bits_per_byte(bits_per_byte_of):
    """bits_per_byte_of(token_nlls, text): Σ NLL in nats / (ln 2 · UTF-8 bytes of text)."""
    expect_callable(bits_per_byte_of, "bits_per_byte_of(token_nlls, text)")
    gen = rng(4)
    texts = ["To be, or not to be", "naïve café — 東京", "ab"]
    for text in texts:
        n_tokens = max(1, len(text) // 3)
        nlls = 4 * torch.rand(n_tokens, generator=gen, dtype=torch.float64)
        want = nlls.sum().item() / (math.log(2) * len(text.encode("utf-8")))
        expect_close(bits_per_byte_of(nlls.clone(), text), want,
                     f"{n_tokens} tokens covering {text!r} ({len(text)} characters, "
                     f"{len(text.encode('utf-8'))} UTF-8 bytes)", rtol=1e-9)
    return "total code length in bits over UTF-8 bytes, whatever the tokenizer"


@exercise("ch05-lm-loss", forbid=(
    "torch.nn.functional.cross_entropy", "torch.nn.functional.nll_loss",
    "mathref.losses.cross_entropy", "torch.ops.aten.nll_loss_forward", "torch.ops.aten.nll_loss"),
    because="the exercise is to pick the log-probabilities of the targets and leave out the "
            "padding yourself, with log_softmax and indexing")
def check_ch05_lm_loss(lm_loss):
    """lm_loss(logits, targets, pad_id): mean NLL over the non-padding tokens of a batch."""
    expect_callable(lm_loss, "lm_loss(logits, targets, pad_id)")
    gen = rng(6)
    # the last case has logits in the hundreds: log(softmax) underflows to log 0 = −inf there
    for B, T, V, pad_id, lengths, scale in ((2, 5, 7, 0, (5, 2), 1), (3, 4, 6, 5, (4, 1, 3), 1),
                                            (1, 3, 4, 1, (3,), 1), (2, 4, 6, 0, (4, 3), 400)):
        logits = scale * torch.randn(B, T, V, generator=gen, dtype=torch.float64)
        targets = torch.randint(0, V, (B, T), generator=gen)
        for b, length in enumerate(lengths):
            targets[b, :length][targets[b, :length] == pad_id] = (pad_id + 1) % V
            targets[b, length:] = pad_id
        want = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id)
        got = lm_loss(logits.clone(), targets.clone(), pad_id)
        what = f"B={B}, T={T}, V={V}, sequence lengths {lengths}, pad_id={pad_id}"
        value = _as_number(got, what)
        expect_close(value, want.item(), what + _lm_loss_hint(value, logits, targets, pad_id),
                     rtol=1e-9)
    return "−(1/#tokens) Σ log p over real tokens, as F.cross_entropy(ignore_index=pad_id)"


def _lm_loss_hint(value, logits, targets, pad_id):
    """Which of the usual wrong reductions ``value`` is, if any (section 5.10's pitfall)."""
    nll = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != pad_id
    wrong = [((nll * real).sum() / nll.numel(),
              "you divided by all B·T positions: divide by the number of real tokens"),
             (((nll * real).sum(1) / real.sum(1)).mean(),
              "that is the mean of per-sequence means: every real token must weigh the same"),
             ((nll * real).sum(1).mean(), "that is a sum per sequence: take the mean per token"),
             (nll.mean(), "the padded positions are counted: leave out targets equal to pad_id"),
             (-(nll.neg().exp() * real).sum() / real.sum(),
              "that is minus the mean probability: take the log")]
    for other, why in wrong:
        if abs(value - other.item()) < 1e-9 * max(1.0, abs(other.item())):
            return f" ({why})"
    right = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=pad_id)
    if abs(value - right.item()) < 1e-5 * max(1.0, abs(right.item())):
        return (" (right to about 7 digits only: the logits are float64 and the check compares 9 "
                "digits; keep float64 throughout, no .float())")
    return ""
