"""Typical wrong answers to chapter 10's exercises: each must fail its checker."""
from collections import Counter

import torch
import torch.nn.functional as F


def merge_first_only(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return ids[:i] + [new_id] + ids[i + 2:]
    return ids


def merge_overlapping(ids, pair, new_id):
    # advances by one after a match: [4, 4, 4] with (4, 4) becomes [300, 300]
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 1
            if i == len(ids) - 1:
                i += 1
        else:
            out.append(ids[i])
            i += 1
    return out


def merge_right_to_left(ids, pair, new_id):
    out, i = [], len(ids) - 1
    while i >= 0:
        if i >= 1 and (ids[i - 1], ids[i]) == tuple(pair):
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


def pair_across_chunks(chunks):
    flat = [t for c in chunks for t in c]
    counts = Counter(zip(flat, flat[1:]))
    return max(counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]


def pair_first_seen(chunks):
    counts = Counter()
    for c in chunks:
        counts.update(zip(c, c[1:]))
    return counts.most_common(1)[0][0]  # ties go to the pair seen first


def pair_distinct_per_chunk(chunks):
    counts = Counter()
    for c in chunks:
        counts.update(set(zip(c, c[1:])))
    return max(counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]


WRONG_ANSWERS = {
    "ch10-merge-pair": [merge_first_only, merge_overlapping, merge_right_to_left],
    "ch10-most-frequent-pair": [pair_across_chunks, pair_first_seen, pair_distinct_per_chunk],
    "ch10-one-hot-embedding": [
        lambda ids, E: F.one_hot(ids).to(E.dtype) @ E,        # width from the ids, not from E
        lambda ids, E: E[ids - 1],                             # off by one
        lambda ids, E: E[ids].detach(),                        # no gradient reaches E
        lambda ids, E: F.one_hot(ids, E.shape[0]).to(E.dtype) @ E / E.shape[0],
    ],
    "ch10-tied-logits": [
        lambda h, E: h @ E,                                    # shapes do not even match
        lambda h, E: E @ h.transpose(-1, -2) if h.dim() > 1 else E @ h,   # [V, T], not [T, V]
        lambda h, E: torch.softmax(h @ E.T, dim=-1),           # probabilities, not logits
        lambda h, E: h @ E.T / E.shape[1] ** 0.5,              # attention's scale does not belong here
    ],
}
