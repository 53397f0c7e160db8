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


def _chunks(text):
    import re

    from mathref.tokenizers import GPT2_SPLIT_PATTERN
    return [list(c.encode("utf-8")) for c in re.findall(GPT2_SPLIT_PATTERN, text)]


def _merge(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def bpe_first_position(text, merges):
    # merges the leftmost pair that is in the list, whatever its rank
    ranks = {tuple(m): r for r, m in enumerate(merges)}
    out = []
    for ids in _chunks(text):
        while True:
            pairs = [p for p in zip(ids, ids[1:]) if p in ranks]
            if not pairs:
                break
            ids = _merge(ids, pairs[0], 256 + ranks[pairs[0]])
        out += ids
    return out


def bpe_no_pretokenization(text, merges):
    # merges run over the whole text: pairs across word boundaries get merged
    ids = list(text.encode("utf-8"))
    for r, m in enumerate(merges):
        ids = _merge(ids, tuple(m), 256 + r)
    return ids


def bpe_latest_first(text, merges):
    # applies the latest-learned merge first
    ranks = {tuple(m): r for r, m in enumerate(merges)}
    out = []
    for ids in _chunks(text):
        while True:
            pairs = [p for p in zip(ids, ids[1:]) if p in ranks]
            if not pairs:
                break
            best = max(pairs, key=ranks.get)
            ids = _merge(ids, best, 256 + ranks[best])
        out += ids
    return out


def bpe_off_by_one(text, merges):
    out = []
    for ids in _chunks(text):
        for r, m in enumerate(merges):
            ids = _merge(ids, tuple(m), 255 + r)
        out += ids
    return out


def bpe_library(text, merges):
    # calls mathref's encoder instead of writing one: refused by the checker
    from mathref.tokenizers import BPETokenizer
    return BPETokenizer(merges).encode(text)


WRONG_ANSWERS = {
    "ch10-merge-pair": [merge_first_only, merge_overlapping, merge_right_to_left],
    "ch10-most-frequent-pair": [pair_across_chunks, pair_first_seen, pair_distinct_per_chunk],
    "ch10-one-hot-embedding": [
        lambda ids, E: F.one_hot(ids).to(E.dtype) @ E,        # width from the ids, not from E
        lambda ids, E: E[ids - 1],                             # off by one
        lambda ids, E: E[ids].detach(),                        # no gradient reaches E
        lambda ids, E: F.one_hot(ids, E.shape[0]).to(E.dtype) @ E / E.shape[0],
        lambda ids, E: E[ids],                                 # right values, but by indexing
        lambda ids, E: F.embedding(ids, E),                    # indexing: refused by the check
        lambda ids, E: E.index_select(0, ids.flatten()).reshape(*ids.shape, E.shape[1]),
    ],
    "ch10-bpe-encode": [bpe_first_position, bpe_no_pretokenization, bpe_latest_first,
                        bpe_off_by_one, bpe_library],
}
