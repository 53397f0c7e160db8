"""Typical wrong answers to chapter 5's exercises: each must fail its checker."""
import math

import torch
import torch.nn.functional as F


def lse_naive(x):
    return torch.log(torch.exp(x).sum())


def lse_forgets_max(x):
    m = x.max()
    return torch.log(torch.exp(x - m).sum())


def lse_just_max(x):
    return x.max()


def ppl_two_to_nats(nlls):
    return 2 ** nlls.mean()


def ppl_mean_of_exp(nlls):
    return torch.exp(nlls).mean()


def ppl_exp_of_sum(nlls):
    return torch.exp(nlls.sum())


def _onehot(targets, V, ignore_index):
    return F.one_hot(torch.where(targets == ignore_index, 0, targets), V).double()


def grad_y_minus_p(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return (F.one_hot(targets, logits.shape[1]) - logits.softmax(1)) / logits.shape[0]


def grad_no_mean(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return logits.softmax(1) - F.one_hot(targets, logits.shape[1])


def grad_logits_minus_y(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return (logits - F.one_hot(targets, logits.shape[1])) / logits.shape[0]


def grad_softmax_wrong_dim(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return (logits.softmax(0) - F.one_hot(targets, logits.shape[1])) / logits.shape[0]


def grad_ignores_smoothing(logits, targets, label_smoothing=0.0, ignore_index=-100):
    real = (targets != ignore_index).double()[:, None]
    y = _onehot(targets, logits.shape[1], ignore_index)
    return (logits.softmax(1) - y) * real / real.sum()


def grad_smoothing_over_v_minus_1(logits, targets, label_smoothing=0.0, ignore_index=-100):
    V = logits.shape[1]
    real = (targets != ignore_index).double()[:, None]
    y = _onehot(targets, V, ignore_index)
    q = (1 - label_smoothing) * y + label_smoothing / (V - 1) * (1 - y)   # ε spread over the others
    return (logits.softmax(1) - q) * real / real.sum()


def grad_divides_by_all_rows(logits, targets, label_smoothing=0.0, ignore_index=-100):
    real = (targets != ignore_index).double()[:, None]
    q = (1 - label_smoothing) * _onehot(targets, logits.shape[1], ignore_index) + label_smoothing / logits.shape[1]
    return (logits.softmax(1) - q) * real / len(targets)                  # counts ignored rows


def grad_keeps_ignored_rows(logits, targets, label_smoothing=0.0, ignore_index=-100):
    real = (targets != ignore_index).double()[:, None]
    q = (1 - label_smoothing) * _onehot(targets, logits.shape[1], ignore_index) + label_smoothing / logits.shape[1]
    return (logits.softmax(1) - q) / real.sum()                           # ignored rows not zeroed


def grad_by_autograd(logits, targets, label_smoothing=0.0, ignore_index=-100):
    z = logits.detach().clone().requires_grad_(True)
    F.cross_entropy(z, targets, label_smoothing=label_smoothing, ignore_index=ignore_index).backward()
    return z.grad


def bpb_characters(token_nlls, text):
    return token_nlls.sum().item() / (math.log(2) * len(text))


def bpb_no_ln2(token_nlls, text):
    return token_nlls.sum().item() / len(text.encode("utf-8"))


def bpb_per_token(token_nlls, text):
    return token_nlls.mean().item() / math.log(2)


def bpb_over_eight_bits(token_nlls, text):
    return token_nlls.mean().item() / math.log(2) / math.log2(256)


def lm_loss_counts_padding(logits, targets, pad_id):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), reduction="none")
    return (nll * (targets.reshape(-1) != pad_id)).mean()


def lm_loss_mean_of_sequence_means(logits, targets, pad_id):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                          reduction="none").reshape(targets.shape)
    keep = targets != pad_id
    return ((nll * keep).sum(1) / keep.sum(1)).mean()


def lm_loss_sum_per_sequence(logits, targets, pad_id):
    V = logits.shape[-1]
    nll = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1),
                          reduction="none").reshape(targets.shape)
    return (nll * (targets != pad_id)).sum(1).mean()


def lm_loss_no_ignore(logits, targets, pad_id):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


WRONG_ANSWERS = {
    "ch05-logsumexp": [lse_naive, lse_forgets_max, lse_just_max],
    "ch05-perplexity": [ppl_two_to_nats, ppl_mean_of_exp, ppl_exp_of_sum],
    "ch05-ce-gradient": [grad_y_minus_p, grad_no_mean, grad_logits_minus_y,
                         grad_softmax_wrong_dim, grad_ignores_smoothing,
                         grad_smoothing_over_v_minus_1, grad_divides_by_all_rows,
                         grad_keeps_ignored_rows, grad_by_autograd],
    "ch05-bits-per-byte": [bpb_characters, bpb_no_ln2, bpb_per_token, bpb_over_eight_bits],
    "ch05-lm-loss": [lm_loss_counts_padding, lm_loss_mean_of_sequence_means,
                     lm_loss_sum_per_sequence, lm_loss_no_ignore],
}

# answers that ask autograd: refused by the "without autograd" wrapper (tests/test_exercises_without_autograd.py)
AUTOGRAD_CHEATS = {"ch05-ce-gradient": [grad_by_autograd]}
