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


def grad_y_minus_p(logits, targets):
    return (F.one_hot(targets, logits.shape[1]) - logits.softmax(1)) / logits.shape[0]


def grad_no_mean(logits, targets):
    return logits.softmax(1) - F.one_hot(targets, logits.shape[1])


def grad_logits_minus_y(logits, targets):
    return (logits - F.one_hot(targets, logits.shape[1])) / logits.shape[0]


def grad_softmax_wrong_dim(logits, targets):
    return (logits.softmax(0) - F.one_hot(targets, logits.shape[1])) / logits.shape[0]


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
                         grad_softmax_wrong_dim],
    "ch05-bits-per-byte": [bpb_characters, bpb_no_ln2, bpb_per_token, bpb_over_eight_bits],
    "ch05-lm-loss": [lm_loss_counts_padding, lm_loss_mean_of_sequence_means,
                     lm_loss_sum_per_sequence, lm_loss_no_ignore],
}
