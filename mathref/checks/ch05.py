"""Checkers for chapter 5: probability, information theory and losses."""
import math

import torch
import torch.nn.functional as F

from mathref.checks.core import integer, rng, uniform
from mathref.checks.numpy_use import refuse_named_numpy
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
    # NumPy scalars compute where the gate does not look (np.exp of an np.longdouble reaches
    # e^11356 on x86, so the naive formula would pass): the answer's code may not name NumPy
    refuse_named_numpy(stable_logsumexp, "ch05-logsumexp",
                        "the exercise is to subtract the maximum yourself")
    gen = rng(5)
    cases = [torch.randn(7, generator=gen, dtype=torch.float64),
             torch.tensor([1000.0, 1000.0], dtype=torch.float64),
             torch.tensor([-1000.0, -1001.0, -1002.0], dtype=torch.float64),
             torch.tensor([800.0, 0.0, -5.0], dtype=torch.float64),
             torch.tensor([0.0, 1000.0], dtype=torch.float64),       # the maximum is not x[0]
             torch.tensor([3.0], dtype=torch.float64),
             torch.tensor([100.0, 90.0, 95.0], dtype=torch.float32),
             torch.tensor([300.0, 0.0, -5.0], dtype=torch.float32)]  # e^(300 − mean) overflows
    cases += [_overflow_case(gen, dtype, kind) for dtype in (torch.float64, torch.float32)
              for kind in ("near", "wide", "peak")]
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
        expect(math.isfinite(value), f"{what}: expected {want:.10g}, got {value} — "
               + _non_finite_cause(value) + ": subtract the maximum of x (not its mean or any "
               "other number) so that the largest exponent is e^0 = 1")
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


def _non_finite_cause(value):
    """Why a log-sum-exp came out as ``value`` (inf, −inf or nan): the sign tells which way."""
    if value == math.inf:
        return "an exp overflowed to inf"
    if value == -math.inf:
        return ("every exp underflowed to 0 and log 0 = −inf (the exponents were all far "
                "below 0: no shift, or a shift by a number above the maximum)")
    return "an exp overflowed or underflowed (inf − inf, inf/inf and 0/0 give nan)"


# e^x overflows above these; it underflows to 0 below −745.2 (float64) and −103.98 (float32)
_EXP_OVERFLOW = {torch.float64: 709.79, torch.float32: 88.73}


def _overflow_case(gen, dtype, kind):
    """Inputs drawn from ``gen`` (so no table of answers knows them) that break the shortcuts.

    "near": 2–12 entries of spread at most 9 around ±(800–1000) in float64 or ±(120–300) in
    float32, so that e^x overflows (or underflows to 0 for every entry). "wide": 3–12 entries,
    the maximum at a random position other than the first, one or more entries at random
    positions (the last included) so far below it that shifting by the mean overflows, the rest
    within 5 of the maximum. "peak": 4–12 entries, the maximum at a random position that is not
    among the first two nor the last, every other entry at least 2.1 overflow thresholds below
    it: a shift by any entry but the maximum, by the mean or by the mean of x[1:] overflows."""
    big = _EXP_OVERFLOW[dtype]
    if kind == "near":
        n = integer(gen, 2, 13)
        magnitude = uniform(gen, 800, 1000) if dtype == torch.float64 else uniform(gen, 120, 300)
        sign = 1 if integer(gen, 0, 2) else -1
        spread = 3 * torch.randn(n, generator=gen, dtype=torch.float64).clamp(-3, 3)
        return (sign * magnitude + spread).to(dtype)           # |entries| ≥ 791 or ≥ 111
    top = uniform(gen, -50, 50)
    if kind == "peak":
        n = integer(gen, 4, 13)
        x = top - uniform(gen, 2.1, 3) * big - uniform(gen, 0, 5) * torch.rand(
            n, generator=gen, dtype=torch.float64)
        x[integer(gen, 2, n - 1)] = top       # top − x_j > 2.1·big, top − mean(x[1:]) > 1.05·big
        return x.to(dtype)
    n = integer(gen, 3, 13)
    x = top - uniform(gen, 0, 5) * torch.rand(n, generator=gen, dtype=torch.float64)
    at = integer(gen, 1, n)
    x[at] = top                                          # the maximum, never x[0]
    others = [i for i in range(n) if i != at]
    far = [others[i] for i in torch.randperm(n - 1, generator=gen)[:integer(gen, 1, n)].tolist()]
    for i in far:                                        # top − mean(x) ≥ 1.05·big
        x[i] = top - n * uniform(gen, 1.05, 1.3) * big
    return x.to(dtype)


def _as_number(value, what):
    try:
        return float(value)
    except (TypeError, ValueError, RuntimeError):
        raise CheckFailure(f"{what}: expected a number, got {type(value).__name__}") from None


# the grader refuses NumPy in this solution cell by its text too (mathref.grade.policy), where the
# answer runs in another process and the name scan above does not reach
check_ch05_logsumexp.refused_modules = ("numpy", "scipy")


@exercise("ch05-perplexity", forbid=("mathref.losses.perplexity",),
          because="the exercise is to write the formula yourself")
def check_ch05_perplexity(perplexity_from_nlls):
    """perplexity_from_nlls(nlls): exp of the mean per-token NLL in nats."""
    expect_callable(perplexity_from_nlls, "perplexity_from_nlls(nlls)")
    uniform = torch.full((10,), math.log(65), dtype=torch.float64)
    got = perplexity_from_nlls(uniform)
    expect_close(got, 65.0, "a uniform model over 65 tokens (every NLL = ln 65)"
                 + _float32_hint(got, 65.0) + _perplexity_hint(got, uniform), rtol=1e-9)
    gen = rng(2)
    # 2000 tokens: Σ NLL is far above 709, so a product of exp(NLL)s overflows to inf
    for n in (5, 40, 2000):
        nlls = 3 * torch.rand(n, generator=gen, dtype=torch.float64)
        got, want = perplexity_from_nlls(nlls.clone()), math.exp(nlls.mean().item())
        expect_close(got, want, f"perplexity of {n} NLLs with mean {nlls.mean().item():.4f} nats"
                     + _float32_hint(got, want) + _perplexity_hint(got, nlls), rtol=1e-9)
    return "PPL = exp(mean NLL in nats), the geometric mean of 1/p"


def _perplexity_hint(got, nlls):
    """Which of section 5.11's two classic wrong perplexities ``got`` is, if any. A slip whose
    value equals the right one on these NLLs (every e^NLL the same: the mean of e^NLL is e^mean)
    is not named: the answer's error lies elsewhere (float32 rounding, say)."""
    try:
        value = float(got)
    except (TypeError, ValueError, RuntimeError):
        return ""
    right = math.exp(nlls.mean().item())
    wrong = [(2 ** nlls.mean().item(), "that is 2 to the mean NLL, but the NLLs are in nats: "
                                       "e^H with H in nats (or 2^H with H in bits)"),
             (nlls.exp().mean().item(), "that is the mean of the per-token e^NLL: average the "
                                        "NLLs first, then take exp once")]
    for other, why in wrong:
        if abs(other - right) <= 1e-9 * right:
            continue
        if math.isfinite(value) and abs(value - other) <= 1e-6 * abs(other):
            return f" ({why})"
    return ""


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
                            + _ce_gradient_hint(got, z.grad, N, n_real, logits, targets, eps,
                                                ignore_index))
    return "(softmax(z) − q) / #real rows, q = (1 − ε)·onehot(y) + ε/V, zero on ignored rows"


def _ce_gradient_hint(got, want, N, n_real, logits, targets, eps, ignore_index):
    """The likeliest reason a cross-entropy gradient is off, from how it relates to the right one."""
    def near(other):
        return torch.allclose(got, other, rtol=1e-6, atol=1e-9)
    err = (got - want).abs().max().item()
    # the right gradient with the softmax taken down the columns (over the N rows) instead
    real = (targets != ignore_index)[:, None]
    p = torch.softmax(logits, 1)
    q = p - want * n_real                                # on real rows, want · n_real = p − q
    if near(torch.where(real, torch.softmax(logits, 0) - q, 0.0) / n_real):
        return ("(your softmax runs down the columns (dim=0, over the N rows): each row's "
                "softmax runs over its V classes, dim=1)")
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
    texts = ["To be, or not to be", "naïve café — 東京", "ab", _random_text(gen)]
    for text in texts:
        n_tokens = max(1, len(text) // 3)
        nlls = 4 * torch.rand(n_tokens, generator=gen, dtype=torch.float64)
        want = nlls.sum().item() / (math.log(2) * len(text.encode("utf-8")))
        got = bits_per_byte_of(nlls.clone(), text)
        what = (f"{n_tokens} tokens covering {text!r} ({len(text)} characters, "
                f"{len(text.encode('utf-8'))} UTF-8 bytes)")
        expect_close(got, want, what + _float32_hint(got, want), rtol=1e-9)
    return "total code length in bits over UTF-8 bytes, whatever the tokenizer"


# characters of 1, 2, 3 and 4 bytes in UTF-8
_ALPHABETS = ("abcdefghijklmnopqrstuvwxyz ,.", "éèüñßçøΩπжλ", "東京字語—€…", "😀🐍𝄞🚀")


def _random_text(gen):
    """A text drawn from ``gen``: 8–30 characters mixing 1-, 2-, 3- and 4-byte ones (at least one
    of 4 bytes), so its UTF-8 length is in no table."""
    n = integer(gen, 8, 31)
    chars = []
    for _ in range(n):
        alphabet = _ALPHABETS[integer(gen, 0, 4)]
        chars.append(alphabet[integer(gen, 0, len(alphabet))])
    four = _ALPHABETS[3]
    chars[integer(gen, 0, n)] = four[integer(gen, 0, len(four))]
    return "".join(chars)


def _float32_hint(got, want):
    """A hint when a result that is not a float32 tensor (expect_close names that dtype itself) is
    off by float32 rounding only: a Python float computed in float32."""
    if isinstance(got, torch.Tensor) and got.dtype != torch.float64:
        return ""
    try:
        value = float(got)
    except (TypeError, ValueError, RuntimeError):
        return ""
    if math.isfinite(value) and 1e-9 * abs(want) < abs(value - want) <= 1e-5 * abs(want):
        return (" (right to about 7 digits only, float32's precision: keep the float64 inputs "
                "in float64 until the end, no .float())")
    return ""


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
        if scale > 1:   # one real target 1000 below the largest of its row's other entries:
            # its softmax is 0 in float64 by construction, on every draw (left to chance,
            # log(softmax) passed the grader's fresh inputs about one run in eleven: the fifth
            # read's delta, N-M1). The maximum is over the others: below the row's own maximum,
            # a target that was that maximum ended only 1000 − (the gap to the runner-up) below
            # the new one, often a normal float64 (the fifth read, M1: 1 run in 150 passed)
            t = targets[0, 0]
            others = logits[0, 0].clone()
            others[t] = -math.inf
            logits[0, 0, t] = others.max() - 1000
        want = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id)
        got = lm_loss(logits.clone(), targets.clone(), pad_id)
        what = f"B={B}, T={T}, V={V}, sequence lengths {lengths}, pad_id={pad_id}"
        value = _as_number(got, what)
        expect_close(value, want.item(), what + _lm_loss_hint(value, logits, targets, pad_id),
                     rtol=1e-9)
    return "−(1/#tokens) Σ log p over real tokens, as F.cross_entropy(ignore_index=pad_id)"


def _lm_loss_hint(value, logits, targets, pad_id):
    """Which of the usual wrong reductions ``value`` is, if any (section 5.10's pitfall)."""
    if not math.isfinite(value):       # the last case's logits are in the hundreds
        return (" (the logits reach the hundreds here: a probability underflows to 0, whose log "
                "is −inf (and 0 · −inf is nan), and an exp without the max shift overflows; "
                "compute log_softmax(logits, -1) = z − logsumexp(z), not log(softmax))")
    nll = -torch.log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    real = targets != pad_id
    wrong = [((nll * real).sum() / nll.numel(),
              "you divided by all B·T positions: divide by the number of real tokens"),
             (((nll * real).sum(1) / real.sum(1)).mean(),
              "that is the mean of per-sequence means: every real token must weigh the same"),
             ((nll * real).sum(1).mean(), "that is a sum per sequence: take the mean per token"),
             ((nll * real).sum(), "that is the total over all real tokens: divide it by their "
                                  "number"),
             (nll.mean(), "the padded positions are counted: leave out targets equal to pad_id"),
             (-(nll.neg().exp() * real).sum() / real.sum(),
              "that is minus the mean probability: take the log")]
    for dim, name in ((1, "the T positions (dim=1)"), (0, "the batch (dim=0)")):
        nll_dim = -torch.log_softmax(logits, dim).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        wrong.append(((nll_dim * real).sum() / real.sum(),
                      f"your log_softmax normalizes over {name}: it must run over the V "
                      "vocabulary entries, the last dimension (dim=-1)"))
    for other, why in wrong:
        if abs(value - other.item()) < 1e-9 * max(1.0, abs(other.item())):
            return f" ({why})"
    right = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=pad_id)
    if abs(value - right.item()) < 1e-5 * max(1.0, abs(right.item())):
        return (" (right to about 7 digits only: the logits are float64 and the check compares 9 "
                "digits; keep float64 throughout, no .float())")
    return ""
