"""Typical wrong answers to chapter 14's exercises: each must fail its checker."""
import math

import torch


def pairs_no_shift(ids):
    return ids, ids


def pairs_swapped(ids):
    return ids[:, 1:], ids[:, :-1]


def pairs_batch_axis(ids):
    return ids[:-1], ids[1:]


def bpb_over_log2_256(total, n_tokens, n_bytes):
    mean = total / n_tokens
    return math.exp(mean), (mean / math.log(2)) / math.log2(256)


def bpb_per_token(total, n_tokens, n_bytes):
    return math.exp(total / n_tokens), total / (math.log(2) * n_tokens)


def ppl_base_two(total, n_tokens, n_bytes):
    return 2 ** (total / n_tokens), total / (math.log(2) * n_bytes)


def bpb_without_ln2(total, n_tokens, n_bytes):
    return math.exp(total / n_tokens), total / n_bytes


def top_k_zero_fill(logits, k):
    kth = torch.topk(logits, k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits < kth, 0.0)


def top_k_smallest(logits, k):
    kth = torch.topk(logits, k, dim=-1, largest=False).values[:, -1:]
    return logits.masked_fill(logits > kth, float("-inf"))


def top_k_whole_batch(logits, k):
    kth = torch.topk(logits.flatten(), k).values[-1]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_k_strict(logits, k):          # off by one: drops the k-th largest too
    kth = torch.topk(logits, k, dim=-1).values[:, -1:]
    return logits.masked_fill(logits <= kth, float("-inf"))


def top_p_inclusive(probs, top_p):    # drops the token that makes the mass reach top_p
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    sorted_probs = sorted_probs.masked_fill(sorted_probs.cumsum(-1) > top_p, 0.0)
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum(-1, keepdim=True).clamp_min(1e-30)


def top_p_not_renormalized(probs, top_p):
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(before >= top_p, 0.0)
    return torch.zeros_like(probs).scatter(-1, order, sorted_probs)


def top_p_unsorted(probs, top_p):     # cumulative mass in vocabulary order
    before = probs.cumsum(-1) - probs
    kept = probs.masked_fill(before >= top_p, 0.0)
    return kept / kept.sum(-1, keepdim=True)


WRONG_ANSWERS = {
    "ch14-next-token-pairs": [pairs_no_shift, pairs_swapped, pairs_batch_axis],
    "ch14-perplexity-bpb": [bpb_over_log2_256, bpb_per_token, ppl_base_two, bpb_without_ln2],
    "ch14-top-k": [top_k_zero_fill, top_k_smallest, top_k_whole_batch, top_k_strict],
    "ch14-top-p": [top_p_inclusive, top_p_not_renormalized, top_p_unsorted],
}
