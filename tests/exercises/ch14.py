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


def _decode(q_new, k_new, v_new, k_cache, v_cache, q_pos, k_pos, rotate_v=False, scale=True,
            prepend=False):
    from mathref.positions import apply_rope
    q_rot = apply_rope(q_new, positions=torch.tensor([q_pos]))
    k_rot = apply_rope(k_new, positions=torch.tensor([k_pos]))
    v_add = apply_rope(v_new, positions=torch.tensor([k_pos])) if rotate_v else v_new
    pair = ((k_rot, k_cache), (v_add, v_cache)) if prepend else ((k_cache, k_rot), (v_cache, v_add))
    k_cache, v_cache = (torch.cat(p, dim=-2) for p in pair)
    scores = q_rot @ k_cache.transpose(-2, -1) / (q_new.shape[-1] ** 0.5 if scale else 1.0)
    return torch.softmax(scores, dim=-1) @ v_cache, k_cache, v_cache


def decode_without_offset(q_new, k_new, v_new, k_cache, v_cache):      # every new row at position 0
    return _decode(q_new, k_new, v_new, k_cache, v_cache, 0, 0)


def decode_offset_one_too_far(q_new, k_new, v_new, k_cache, v_cache):  # position S + 1
    S = k_cache.shape[-2]
    return _decode(q_new, k_new, v_new, k_cache, v_cache, S + 1, S + 1)


def decode_query_not_rotated(q_new, k_new, v_new, k_cache, v_cache):   # only the key is rotated
    S = k_cache.shape[-2]
    return _decode(q_new, k_new, v_new, k_cache, v_cache, 0, S)


def decode_values_rotated(q_new, k_new, v_new, k_cache, v_cache):
    S = k_cache.shape[-2]
    return _decode(q_new, k_new, v_new, k_cache, v_cache, S, S, rotate_v=True)


def decode_without_scale(q_new, k_new, v_new, k_cache, v_cache):
    S = k_cache.shape[-2]
    return _decode(q_new, k_new, v_new, k_cache, v_cache, S, S, scale=False)


def decode_prepends(q_new, k_new, v_new, k_cache, v_cache):           # new entries at the front
    S = k_cache.shape[-2]
    return _decode(q_new, k_new, v_new, k_cache, v_cache, S, S, prepend=True)


WRONG_ANSWERS = {
    "ch14-next-token-pairs": [pairs_no_shift, pairs_swapped, pairs_batch_axis],
    "ch14-perplexity-bpb": [bpb_over_log2_256, bpb_per_token, ppl_base_two, bpb_without_ln2],
    "ch14-top-k": [top_k_zero_fill, top_k_smallest, top_k_whole_batch, top_k_strict],
    "ch14-top-p": [top_p_inclusive, top_p_not_renormalized, top_p_unsorted],
    "ch14-rope-decode-step": [decode_without_offset, decode_offset_one_too_far,
                              decode_query_not_rotated, decode_values_rotated, decode_without_scale,
                              decode_prepends],
}
