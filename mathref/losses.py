"""Softmax, cross-entropy and the information-theory quantities behind every loss. See chapter 5.

    softmax          p_i = exp(z_i / τ) / Σ_j exp(z_j / τ)      (computed as exp(z_i − m) / Σ, m = max z)
    log-sum-exp      LSE(z) = m + log Σ_j exp(z_j − m)
    Jacobian         ∂p_i/∂z_j = p_i (δ_ij − p_j),  J = diag(p) − p pᵀ
    cross-entropy    CE = −(1/N) Σ_n log p_n(y_n),  ∂CE/∂z_n = (p_n − onehot(y_n)) / N
    entropy, KL      H(p) = −Σ p log p,  KL(p‖q) = Σ p log(p/q),  H(p, q) = H(p) + KL(p‖q)
    perplexity       PPL = exp(mean NLL in nats)
    bits per byte    BPB = Σ NLL (nats) / (ln 2 · number of bytes)

Everything is in nats (natural logarithm) unless a name says bits. Functions follow the
device and dtype of their inputs.
"""
import math

import torch

from mathref._validation import check_int, check_probability, check_tensor

__all__ = ["softmax", "log_softmax", "logsumexp", "softmax_jacobian", "cross_entropy",
           "binary_cross_entropy_with_logits", "mse", "entropy", "kl_divergence",
           "perplexity", "bits_per_byte", "expected_calibration_error"]

_REDUCTIONS = ("mean", "sum", "none")


def _float_tensor(x, name):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if x.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension, got a scalar")
    return x


def _check_dim(x, dim):
    if isinstance(dim, bool) or not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
        raise ValueError(f"dim must be an int in [{-x.dim()}, {x.dim() - 1}] for a tensor of "
                         f"shape {tuple(x.shape)}, got {dim!r}")


def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")


def _reduce(values, reduction):
    if reduction == "mean":
        return values.mean()
    if reduction == "sum":
        return values.sum()
    return values


def logsumexp(x, dim=-1, keepdim=False):
    """log Σ_j exp(x_j) along dim, stable: m + log Σ_j exp(x_j − m) with m = max_j x_j. See chapter 5.

    Subtracting the maximum makes the largest exponent exp(0) = 1, so nothing overflows and
    the sum is at least 1, so its log is finite. Rows that are all −∞ give −∞.
    """
    _float_tensor(x, "x")
    _check_dim(x, dim)
    m = x.amax(dim=dim, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))  # all −∞ (or +∞) rows
    out = m + torch.log(torch.exp(x - m).sum(dim=dim, keepdim=True))
    return out if keepdim else out.squeeze(dim)


def softmax(x, dim=-1, temperature=1.0):
    """p_i = exp(x_i / τ) / Σ_j exp(x_j / τ) along dim, with τ = temperature > 0. See chapter 5.

    Computed as exp(x_i/τ − m) / Σ_j exp(x_j/τ − m) with m the maximum: the same numbers
    (softmax(x + c) = softmax(x)), without overflow.
    """
    _float_tensor(x, "x")
    if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) \
            or not temperature > 0 or math.isinf(temperature):
        raise ValueError(f"temperature must be a positive finite number, got {temperature!r}")
    _check_dim(x, dim)
    z = x / temperature
    e = torch.exp(z - z.amax(dim=dim, keepdim=True).detach())
    return e / e.sum(dim=dim, keepdim=True)


def log_softmax(x, dim=-1):
    """log p_i = x_i − LSE(x) along dim, never log of a rounded-to-zero probability. See chapter 5.

    Computed as (x_i − m) − log Σ_j exp(x_j − m): subtracting m first keeps the small
    difference exact even when x_i and LSE(x) are both large.
    """
    _float_tensor(x, "x")
    _check_dim(x, dim)
    shifted = x - x.amax(dim=dim, keepdim=True).detach()
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def softmax_jacobian(x):
    """The Jacobian of p = softmax(x) over the last dimension: J = diag(p) − p pᵀ. See chapter 5.

    J[..., i, j] = ∂p_i/∂x_j = p_i (δ_ij − p_j). For x of shape (..., V) the result has shape
    (..., V, V); it is symmetric and every row and column sums to zero.
    """
    p = softmax(x, dim=-1)
    return torch.diag_embed(p) - p.unsqueeze(-1) * p.unsqueeze(-2)


def cross_entropy(logits, targets, label_smoothing=0.0, ignore_index=-100, reduction="mean"):
    """Cross-entropy of class logits (N, V) against integer targets (N,), in nats. See chapter 5.

    Per row:  ℓ_n = −Σ_i q_i log p_i  with p = softmax(z_n) and q = (1 − ε)·onehot(y_n) + ε/V,
    which is −log p(y_n) when ε = label_smoothing = 0. Rows whose target is ignore_index are
    skipped: "mean" divides by the number of rows kept, as F.cross_entropy does. For a
    language model, reshape logits (B, T, V) to (B·T, V) and targets (B, T) to (B·T,) first.
    reduction="none" returns ℓ_n for every row (0 where ignored).
    """
    _float_tensor(logits, "logits")
    if not isinstance(targets, torch.Tensor) or targets.dtype not in (torch.int64, torch.int32):
        raise TypeError("targets must be an integer tensor of class indices, got "
                        f"{type(targets).__name__} {getattr(targets, 'dtype', '')}".rstrip())
    if logits.dim() != 2 or targets.dim() != 1 or targets.shape[0] != logits.shape[0]:
        raise ValueError(f"expected logits (N, V) and targets (N,), got logits "
                         f"{tuple(logits.shape)} and targets {tuple(targets.shape)}; for a "
                         "language model use logits.reshape(-1, V) and targets.reshape(-1)")
    check_probability("label_smoothing", label_smoothing)
    check_int("ignore_index", ignore_index)
    _check_reduction(reduction)
    V = logits.shape[1]
    keep = targets != ignore_index
    safe = torch.where(keep, targets, torch.zeros_like(targets)).long()
    if ((safe < 0) | (safe >= V)).any():
        raise ValueError(f"targets must lie in [0, {V}) or equal ignore_index={ignore_index}")
    logp = log_softmax(logits, dim=-1)
    nll = -logp.gather(1, safe.unsqueeze(1)).squeeze(1)
    losses = (1 - label_smoothing) * nll + label_smoothing * (-logp.mean(dim=1))
    losses = torch.where(keep, losses, torch.zeros_like(losses))
    if reduction == "mean":
        return losses.sum() / keep.sum()
    return _reduce(losses, reduction)


def binary_cross_entropy_with_logits(logits, targets, reduction="mean"):
    """Binary cross-entropy of a logit z against y ∈ [0, 1], stable form. See chapter 5.

    −y log σ(z) − (1 − y) log(1 − σ(z)) = log(1 + e^z) − y z = max(z, 0) − y z + log(1 + e^−|z|),
    finite for every finite z (the naive form gives log 0 = −∞ once σ(z) rounds to 0 or 1).
    """
    _float_tensor(logits, "logits")
    _float_tensor(targets, "targets")
    if logits.shape != targets.shape:
        raise ValueError(f"logits and targets must have the same shape, got "
                         f"{tuple(logits.shape)} and {tuple(targets.shape)}")
    _check_reduction(reduction)
    if ((targets < 0) | (targets > 1)).any() or targets.isnan().any():
        raise ValueError(f"targets must be probabilities in [0, 1], got values from "
                         f"{targets.min().item()} to {targets.max().item()}")
    losses = logits.clamp(min=0) - logits * targets + torch.log1p(torch.exp(-logits.abs()))
    return _reduce(losses, reduction)


def mse(predictions, targets, reduction="mean"):
    """Mean squared error (1/N) Σ (ŷ − y)², N = number of elements. See chapters 2 and 5."""
    _float_tensor(predictions, "predictions")
    _float_tensor(targets, "targets")
    if predictions.shape != targets.shape:
        raise ValueError(f"predictions and targets must have the same shape, got "
                         f"{tuple(predictions.shape)} and {tuple(targets.shape)}")
    _check_reduction(reduction)
    return _reduce((predictions - targets) ** 2, reduction)


def _check_distribution(p, name):
    _float_tensor(p, name)
    if (p < 0).any() or p.isnan().any():
        raise ValueError(f"{name} must be a probability distribution (non-negative entries)")


def entropy(p, dim=-1):
    """H(p) = −Σ_i p_i log p_i in nats (divide by ln 2 for bits), with 0 log 0 = 0. See chapter 5."""
    _check_distribution(p, "p")
    _check_dim(p, dim)
    plogp = torch.where(p > 0, p * torch.log(torch.where(p > 0, p, torch.ones_like(p))),
                        torch.zeros_like(p))
    return -plogp.sum(dim=dim)


def kl_divergence(p, q, dim=-1):
    """KL(p‖q) = Σ_i p_i log(p_i / q_i) in nats, ≥ 0, zero iff p = q. See chapter 5.

    Terms with p_i = 0 contribute 0; a p_i > 0 where q_i = 0 gives +∞. Note the order: F.kl_div
    takes (log q, p) and computes the same Σ p (log p − log q).
    """
    _check_distribution(p, "p")
    _check_distribution(q, "q")
    if p.shape != q.shape:
        raise ValueError(f"p and q must have the same shape, got {tuple(p.shape)} and "
                         f"{tuple(q.shape)}")
    _check_dim(p, dim)
    pos = p > 0
    ratio = torch.where(pos, p, torch.ones_like(p)) / torch.where(pos, q, torch.ones_like(q))
    return torch.where(pos, p * torch.log(ratio), torch.zeros_like(p)).sum(dim=dim)


def perplexity(mean_nll):
    """PPL = exp(mean NLL per token, in nats) = 2^(mean NLL in bits). See chapters 5 and 14."""
    if isinstance(mean_nll, torch.Tensor):
        return torch.exp(mean_nll)
    if isinstance(mean_nll, float) and math.isnan(mean_nll):
        raise ValueError("mean_nll is NaN: the loss it came from is not finite")
    if not isinstance(mean_nll, (int, float)) or isinstance(mean_nll, bool):
        raise TypeError(f"mean_nll must be a number or a tensor, got {type(mean_nll).__name__}")
    return math.exp(mean_nll)


def bits_per_byte(total_nll_nats, n_bytes):
    """BPB = Σ NLL (nats, over all predicted tokens) / (ln 2 · number of UTF-8 bytes they cover).

    Independent of the tokenizer: the total code length of a text is divided by its size in
    bytes, not by a token count. See chapters 5 and 14.
    """
    if not isinstance(n_bytes, int) or isinstance(n_bytes, bool) or n_bytes <= 0:
        raise ValueError(f"n_bytes must be a positive int, got {n_bytes!r}")
    if isinstance(total_nll_nats, torch.Tensor):
        return total_nll_nats / (math.log(2) * n_bytes)
    if not isinstance(total_nll_nats, (int, float)) or isinstance(total_nll_nats, bool):
        raise TypeError("total_nll_nats must be a number or a tensor, got "
                        f"{type(total_nll_nats).__name__}")
    return total_nll_nats / (math.log(2) * n_bytes)


def expected_calibration_error(probs, labels, n_bins=15):
    """ECE = Σ_b (n_b / N) |accuracy_b − confidence_b| over equal-width confidence bins. See chapter 5.

    probs (N, V) are predicted probabilities, labels (N,) the true classes; the confidence of
    a prediction is its largest probability, bin b holds confidences in ((b−1)/B, b/B].
    """
    _check_distribution(probs, "probs")
    if probs.dim() != 2 or not isinstance(labels, torch.Tensor) or labels.shape != probs.shape[:1]:
        raise ValueError(f"expected probs (N, V) and labels (N,), got probs "
                         f"{tuple(probs.shape)} and labels {tuple(getattr(labels, 'shape', ()))}")
    n_bins = check_int("n_bins", n_bins, min=1)
    check_tensor("labels", labels, kind="int")
    confidence, predicted = probs.max(dim=1)
    correct = (predicted == labels).to(probs.dtype)
    bins = torch.clamp(torch.ceil(confidence * n_bins).long() - 1, 0, n_bins - 1)
    ece = probs.new_zeros(())
    for b in range(n_bins):
        in_bin = bins == b
        if in_bin.any():
            gap = (correct[in_bin].mean() - confidence[in_bin].mean()).abs()
            ece = ece + in_bin.sum().to(probs.dtype) / len(labels) * gap
    return ece
