"""Checkers for chapter 5: probability, information theory and losses."""
import math

import torch
import torch.nn.functional as F

from mathref.checks.core import (as_tensor, exercise, expect, expect_callable, expect_close,
                                 without_autograd)

__all__ = ["check_ch05_logsumexp", "check_ch05_perplexity", "check_ch05_ce_gradient",
           "check_ch05_bits_per_byte", "check_ch05_lm_loss"]


@exercise("ch05-logsumexp")
def check_ch05_logsumexp(stable_logsumexp):
    """stable_logsumexp(x) = log Σ exp(x_i) for a 1-D float tensor, without overflow."""
    expect_callable(stable_logsumexp, "stable_logsumexp(x)")
    gen = torch.Generator().manual_seed(5)
    cases = [torch.randn(7, generator=gen, dtype=torch.float64),
             torch.tensor([1000.0, 1000.0], dtype=torch.float64),
             torch.tensor([-1000.0, -1001.0, -1002.0], dtype=torch.float64),
             torch.tensor([800.0, 0.0, -5.0], dtype=torch.float64),
             torch.tensor([3.0], dtype=torch.float64),
             torch.tensor([100.0, 90.0, 95.0], dtype=torch.float32)]
    for x in cases:
        got = stable_logsumexp(x.clone())
        want = torch.logsumexp(x.double(), 0).item()
        tol = 1e-6 if x.dtype == torch.float32 else 1e-12
        expect_close(got, want, f"logsumexp of {[round(v, 4) for v in x.tolist()]}", rtol=tol, atol=tol)
    return "finite for ±1000, equal to log Σ exp elsewhere"


@exercise("ch05-perplexity")
def check_ch05_perplexity(perplexity_from_nlls):
    """perplexity_from_nlls(nlls): exp of the mean per-token NLL in nats."""
    expect_callable(perplexity_from_nlls, "perplexity_from_nlls(nlls)")
    uniform = torch.full((10,), math.log(65), dtype=torch.float64)
    expect_close(perplexity_from_nlls(uniform), 65.0,
                 "a uniform model over 65 tokens (every NLL = ln 65)", rtol=1e-9)
    gen = torch.Generator().manual_seed(2)
    for n in (5, 40):
        nlls = 3 * torch.rand(n, generator=gen, dtype=torch.float64)
        expect_close(perplexity_from_nlls(nlls.clone()), math.exp(nlls.mean().item()),
                     f"perplexity of {n} NLLs with mean {nlls.mean().item():.4f} nats", rtol=1e-9)
    return "PPL = exp(mean NLL in nats), the geometric mean of 1/p"


@exercise("ch05-ce-gradient")
def check_ch05_ce_gradient(ce_gradient):
    """ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100): ∂/∂logits of
    F.cross_entropy with the same options, computed without autograd."""
    expect_callable(ce_gradient, "ce_gradient(logits, targets, label_smoothing, ignore_index)")
    by_hand = without_autograd(ce_gradient)
    gen = torch.Generator().manual_seed(3)
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
        expect(err < 1e-10, f"{where}: max |yours − autograd| = {err:.3g} (the gradient of one row "
                            "is p − q with the smoothed target q, divided by the number of rows "
                            "that are not ignored)")
    return "(softmax(z) − q) / #real rows, q = (1 − ε)·onehot(y) + ε/V, zero on ignored rows"


@exercise("ch05-bits-per-byte")
def check_ch05_bits_per_byte(bits_per_byte_of):
    """bits_per_byte_of(token_nlls, text): Σ NLL in nats / (ln 2 · UTF-8 bytes of text)."""
    expect_callable(bits_per_byte_of, "bits_per_byte_of(token_nlls, text)")
    gen = torch.Generator().manual_seed(4)
    texts = ["To be, or not to be", "naïve café — 東京", "ab"]
    for text in texts:
        n_tokens = max(1, len(text) // 3)
        nlls = 4 * torch.rand(n_tokens, generator=gen, dtype=torch.float64)
        want = nlls.sum().item() / (math.log(2) * len(text.encode("utf-8")))
        expect_close(bits_per_byte_of(nlls.clone(), text), want,
                     f"{n_tokens} tokens covering {text!r} ({len(text)} characters, "
                     f"{len(text.encode('utf-8'))} UTF-8 bytes)", rtol=1e-9)
    return "total code length in bits over UTF-8 bytes, whatever the tokenizer"


@exercise("ch05-lm-loss")
def check_ch05_lm_loss(lm_loss):
    """lm_loss(logits, targets, pad_id): mean NLL over the non-padding tokens of a batch."""
    expect_callable(lm_loss, "lm_loss(logits, targets, pad_id)")
    gen = torch.Generator().manual_seed(6)
    for B, T, V, pad_id, lengths in ((2, 5, 7, 0, (5, 2)), (3, 4, 6, 5, (4, 1, 3)),
                                     (1, 3, 4, 1, (3,))):
        logits = torch.randn(B, T, V, generator=gen, dtype=torch.float64)
        targets = torch.randint(0, V, (B, T), generator=gen)
        for b, length in enumerate(lengths):
            targets[b, :length][targets[b, :length] == pad_id] = (pad_id + 1) % V
            targets[b, length:] = pad_id
        want = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id)
        got = lm_loss(logits.clone(), targets.clone(), pad_id)
        expect_close(got, want.item(), f"B={B}, T={T}, V={V}, sequence lengths {lengths}, "
                     f"pad_id={pad_id}", rtol=1e-9)
    return "−(1/#tokens) Σ log p over real tokens, as F.cross_entropy(ignore_index=pad_id)"
