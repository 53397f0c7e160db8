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


def pair_skipping_overlaps(chunks):
    # counts a run of equal ids like a merge would, without overlaps: [3, 3, 3] gives one (3, 3)
    counts = Counter()
    for c in chunks:
        i = 0
        while i + 1 < len(c):
            counts[(c[i], c[i + 1])] += 1
            i += 2 if c[i] == c[i + 1] else 1
    return max(counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]


def pair_as_list(chunks):
    # the right pair, returned as a list [a, b] instead of the tuple (a, b) the statement asks for
    counts = Counter(p for c in chunks for p in zip(c, c[1:]))
    return list(max(counts, key=lambda p: (counts[p], -p[0], -p[1])))


def pair_tie_by_first_id(chunks):
    # ties broken on the first id only: pairs sharing it are left in the order they were seen
    counts = Counter(p for c in chunks for p in zip(c, c[1:]))
    best = max(counts.values())
    return min((p for p in counts if counts[p] == best), key=lambda p: p[0])


def pair_tie_by_sum(chunks):
    # ties go to the smallest sum a + b instead of the smallest pair in lexicographic order
    counts = Counter(p for c in chunks for p in zip(c, c[1:]))
    best = max(counts.values())
    return min((p for p in counts if counts[p] == best), key=lambda p: p[0] + p[1])


def merge_as_tuple(ids, pair, new_id):
    # the right ids, returned as a tuple instead of a new list
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return tuple(out)


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


def _bpe_by_rank(text, merges, pick, merge):
    """BPE's loop with the pair to merge chosen by ``pick`` (min: the earliest-learned merge,
    as BPE does) and its occurrences replaced by ``merge``."""
    ranks = {tuple(m): r for r, m in enumerate(merges)}
    out = []
    for ids in _chunks(text):
        while True:
            pairs = [p for p in zip(ids, ids[1:]) if p in ranks]
            if not pairs:
                break
            best = pick(pairs, key=ranks.get)
            ids = merge(ids, best, 256 + ranks[best])
        out += ids
    return out


def bpe_latest_first(text, merges):
    # applies the latest-learned merge first
    return _bpe_by_rank(text, merges, max, _merge)


def _merges_in_training_order(text, merges, merge, first_id):
    """Each chunk's merges applied once each, in training order, by ``merge``, merge r making
    the id first_id + r."""
    out = []
    for ids in _chunks(text):
        for r, m in enumerate(merges):
            ids = merge(ids, tuple(m), first_id + r)
        out += ids
    return out


def bpe_off_by_one(text, merges):
    return _merges_in_training_order(text, merges, _merge, 255)


def bpe_library(text, merges):
    # calls mathref's encoder instead of writing one: refused by the checker
    from mathref.tokenizers import BPETokenizer
    return BPETokenizer(merges).encode(text)


def merge_library(ids, pair, new_id):
    # mathref's merge step: right ids, refused by the check
    from mathref.tokenizers import merge_pair
    return merge_pair(ids, pair, new_id)


def merge_in_place(ids, pair, new_id):
    # right ids, but the list it was given is rewritten (the statement asks for a new list)
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            ids[i:i + 2] = [new_id]
        i += 1
    return ids


def pair_library(chunks):
    # mathref's counting and tie rule: right pair, refused by the check
    from mathref import tokenizers as T
    return T.most_frequent_pair(T.pair_counts(chunks))


def one_hot_library(ids, E):
    from mathref.tokenizers import embed_one_hot
    return embed_one_hot(ids, E)


def one_hot_double(ids, E):
    # a hard-coded float64: right for float64 tables only
    return F.one_hot(ids, E.shape[0]).double() @ E.double()


def one_hot_double_one_side(ids, E):
    return F.one_hot(ids, E.shape[0]).double() @ E


def _merge_first_occurrence(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2:]
    return ids


def bpe_once_per_merge(text, merges):
    # every merge in training order, but each applied once, to its first occurrence only
    return _merges_in_training_order(text, merges, _merge_first_occurrence, 256)


def bpe_right_to_left(text, merges):
    # the earliest-learned merge first, but its occurrences replaced from the right
    return _bpe_by_rank(text, merges, min, merge_right_to_left)


def bpe_greedy_longest(text, merges):
    # the longest known piece from the left (a WordPiece-style match), read off the merges'
    # token bytes: not BPE when an early merge sits inside a later, longer-matching piece
    from mathref.tokenizers import BPETokenizer
    tok = BPETokenizer(merges)
    vocab = {tok.token_bytes(i): i for i in range(256 + len(merges))}
    out = []
    for ids in _chunks(text):
        data, i = bytes(ids), 0
        while i < len(data):
            j = max(k for k in range(i + 1, len(data) + 1) if data[i:k] in vocab)
            out.append(vocab[data[i:j]])
            i = j
    return out


def _bpe_with_split(split):
    """A right BPE encoder after a home-made pre-tokenization ``split(text)``."""
    def bpe_encode(text, merges):
        ranks = {tuple(m): r for r, m in enumerate(merges)}
        out = []
        for chunk in split(text):
            ids = list(chunk.encode("utf-8"))
            while len(ids) >= 2:
                pair = min(zip(ids, ids[1:]), key=lambda p: ranks.get(p, float("inf")))
                if pair not in ranks:
                    break
                ids = _merge(ids, pair, 256 + ranks[pair])
            out += ids
        return out
    return bpe_encode


def _regex_split(pattern):
    import re
    return lambda text: re.findall(pattern, text)


def _space_split(text):
    words = text.split(" ")
    return [words[0]] + [" " + w for w in words[1:]]


bpe_split_words_punct = _bpe_with_split(_regex_split(r" ?\w+| ?[^\s\w]+|\s+"))
bpe_split_nonspace = _bpe_with_split(_regex_split(r"\S+|\s+"))
bpe_split_on_spaces = _bpe_with_split(_space_split)
bpe_split_no_lookahead = _bpe_with_split(_regex_split(      # runs of spaces stay together
    r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+"))
bpe_split_no_contractions = _bpe_with_split(_regex_split(
    r" ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"))
bpe_split_letters_with_digits = _bpe_with_split(_regex_split(
    r"'(?:[sdmt]|ll|ve|re)| ?\w+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"))
bpe_split_single_punctuation = _bpe_with_split(_regex_split(
    r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)|\s+(?!\S)|\s+"))
bpe_split_no_underscore = _bpe_with_split(_regex_split(
    r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+"))
bpe_split_digits_without_space = _bpe_with_split(_regex_split(
    r"'(?:[sdmt]|ll|ve|re)| ?[^\W\d_]+|\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"))


WRONG_ANSWERS = {
    "ch10-merge-pair": [merge_first_only, merge_overlapping, merge_right_to_left, merge_library,
                        merge_in_place, merge_as_tuple],
    "ch10-most-frequent-pair": [pair_across_chunks, pair_first_seen, pair_distinct_per_chunk,
                                pair_library, pair_skipping_overlaps, pair_as_list,
                                pair_tie_by_first_id, pair_tie_by_sum],
    "ch10-one-hot-embedding": [
        lambda ids, E: F.one_hot(ids).to(E.dtype) @ E,        # width from the ids, not from E
        lambda ids, E: E[ids - 1],                             # off by one
        lambda ids, E: E[ids].detach(),                        # no gradient reaches E
        lambda ids, E: F.one_hot(ids, E.shape[0]).to(E.dtype) @ E / E.shape[0],
        lambda ids, E: E[ids],                                 # right values, but by indexing
        lambda ids, E: F.embedding(ids, E),                    # indexing: refused by the check
        lambda ids, E: E.index_select(0, ids.flatten()).reshape(*ids.shape, E.shape[1]),
        one_hot_library, one_hot_double, one_hot_double_one_side,
        lambda ids, E: (F.one_hot(ids, E.shape[0]).to(E.dtype) @ E).detach(),   # no gradient
        lambda ids, E: torch.ops.aten._unsafe_index(E, [ids]),    # E[ids] by a private name
        lambda ids, E: torch.ops.aten._unsafe_masked_index(
            E, torch.ones(*ids.shape, 1, dtype=torch.bool), [ids], 0.0),
        lambda ids, E: F.one_hot(ids, E.shape[0]).to(E.dtype) @ E.T,   # the transposed table
        lambda ids, E: (F.one_hot(ids, E.shape[0]).float() @ E.float()).to(E.dtype),  # in float32
    ],
    "ch10-bpe-encode": [bpe_first_position, bpe_no_pretokenization, bpe_latest_first,
                        bpe_off_by_one, bpe_library, bpe_split_words_punct, bpe_split_nonspace,
                        bpe_split_on_spaces, bpe_split_no_lookahead, bpe_split_no_contractions,
                        bpe_split_letters_with_digits, bpe_split_single_punctuation,
                        bpe_split_no_underscore, bpe_split_digits_without_space,
                        bpe_greedy_longest, bpe_once_per_merge, bpe_right_to_left],
}


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch10-merge-pair": [
        "from mathref.tokenizers import merge_pair as merge\n\n"
        "def replace_pair(ids, pair, new_id):\n"
        "    return merge(ids, pair, new_id)\n",
        "import mathref.tokenizers as T\n\n"
        "def replace_pair(ids, pair, new_id):\n"
        "    return T.merge_pair(list(ids), tuple(pair), new_id)\n",
    ],
    "ch10-most-frequent-pair": [
        "from mathref.tokenizers import most_frequent_pair, pair_counts\n\n"
        "def top_pair(chunks):\n"
        "    return most_frequent_pair(pair_counts(chunks))\n",
        "from collections import Counter\n"
        "import mathref.tokenizers as T\n\n"
        "def top_pair(chunks):\n"
        "    counts = Counter()\n"
        "    for ids in chunks:\n"
        "        counts.update(zip(ids, ids[1:]))\n"
        "    return T.most_frequent_pair(counts)\n",
    ],
    "ch10-one-hot-embedding": [
        "from mathref.tokenizers import embed_one_hot\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return embed_one_hot(ids, E)\n",
        "import torch.nn.functional as F\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return F.embedding(ids, E)\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return E.index_select(0, ids.reshape(-1)).reshape(*ids.shape, E.shape[-1])\n",
        "def one_hot_lookup(ids, E):\n"
        "    return E[ids]\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    # rows of the identity are one-hot vectors, but picking them is indexing too\n"
        "    return torch.eye(E.shape[0], dtype=E.dtype)[ids] @ E\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return E.as_subclass(torch.Tensor)[ids]\n",
        # one row at a time: aten.select (and aten.unbind for the loop over ids)
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    rows = [E[int(i)] for i in ids.flatten()]\n"
        "    return torch.stack(rows).reshape(*ids.shape, E.shape[1])\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    rows = [E[i] for i in ids.flatten().tolist()]\n"
        "    return torch.stack(rows).reshape(*ids.shape, E.shape[1])\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    rows = E.unbind(0)\n"
        "    return torch.stack([rows[i] for i in ids.flatten().tolist()]).reshape(*ids.shape, -1)\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    rows = [E.narrow(0, i, 1) for i in ids.flatten().tolist()]\n"
        "    return torch.cat(rows).reshape(*ids.shape, E.shape[1])\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    rows = [E[i:i + 1] for i in ids.flatten().tolist()]\n"
        "    return torch.cat(rows).reshape(*ids.shape, E.shape[1])\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    rows = E.split(1)\n"
        "    return torch.cat([rows[i] for i in ids.flatten().tolist()]).reshape(*ids.shape, -1)\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    d = E.shape[1]\n"
        "    rows = [E.as_strided((d,), (1,), i * d) for i in ids.flatten().tolist()]\n"
        "    return torch.stack(rows).reshape(*ids.shape, d)\n",
        # the private operators behind E[ids] (torch.compile's decompositions)
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return torch.ops.aten._unsafe_index(E, [ids])\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    mask = torch.ones(*ids.shape, 1, dtype=torch.bool)\n"
        "    return torch.ops.aten._unsafe_masked_index(E, mask, [ids], 0.0)\n",
        # a negative pad crops: row i as F.pad(E, (0, 0, -i, -(V - 1 - i))) (the fourth read's
        # L4; the ids read without tolist, each by a product with a position one-hot)
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    flat, V = ids.reshape(-1), E.shape[0]\n"
        "    n = flat.numel()\n"
        "    ints = [int((flat * (torch.arange(n) == k)).sum().item()) for k in range(n)]\n"
        "    rows = [F.pad(E, (0, 0, -i, -(V - 1 - i))) for i in ints]\n"
        "    return torch.cat(rows).reshape(*ids.shape, E.shape[1])\n",
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    V = E.shape[0]\n"
        "    rows = [F.pad(torch.roll(E, -i, 0), (0, 0, 0, -(V - 1))) for i in ids.reshape(-1).tolist()]\n"
        "    return torch.cat(rows).reshape(*ids.shape, E.shape[1])\n",
        # the table as Python lists inside an autograd.Function with a hand-written backward
        # (the fourth read's L5: it passes the values and the gradient test)
        "import torch\n\n"
        "class Rows(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, E, ids):\n"
        "        ctx.save_for_backward(ids)\n"
        "        ctx.V = E.shape[0]\n"
        "        rows = E.detach().tolist()\n"
        "        flat = [rows[i] for i in ids.reshape(-1).tolist()]\n"
        "        return torch.tensor(flat, dtype=E.dtype).reshape(*ids.shape, E.shape[1])\n\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        ids, = ctx.saved_tensors\n"
        "        flat_g = g.reshape(-1, g.shape[-1])\n"
        "        return g.new_zeros(ctx.V, g.shape[-1]).index_add_(0, ids.reshape(-1), flat_g), None\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return Rows.apply(E, ids)\n",
    ],
    "ch10-bpe-encode": [
        "from mathref.tokenizers import BPETokenizer\n\n"
        "def bpe_encode(text, merges):\n"
        "    return BPETokenizer(merges).encode(text, allowed_special=False)\n",
        "import re\n"
        "from mathref import tokenizers as T\n\n"
        "def bpe_encode(text, merges):\n"
        "    tok = T.BPETokenizer(merges)\n"
        "    ids = []\n"
        "    for chunk in re.findall(T.GPT2_SPLIT_PATTERN, text):\n"
        "        ids += tok._encode_chunk(chunk.encode('utf-8'))\n"
        "    return ids\n",
        "from mathref.tokenizers import BPETokenizer as BPE\n\n"
        "def bpe_encode(text, merges):\n"
        "    return BPE(merges).encode_bytes(text.encode('utf-8'))\n",
        # a copy of the encoder's code, made before the check
        "import re\n"
        "import types\n"
        "from mathref.tokenizers import BPETokenizer, GPT2_SPLIT_PATTERN\n\n"
        "chunk = types.FunctionType(BPETokenizer._encode_chunk.__code__,\n"
        "                           BPETokenizer._encode_chunk.__globals__, 'chunk')\n\n"
        "def bpe_encode(text, merges):\n"
        "    tok = BPETokenizer(merges)\n"
        "    return [i for c in re.findall(GPT2_SPLIT_PATTERN, text)\n"
        "            for i in chunk(tok, c.encode('utf-8'))]\n",
        # a reload inside the answer: a fresh copy of the module and its encoder
        "import importlib\n"
        "import mathref.tokenizers as T\n\n"
        "def bpe_encode(text, merges):\n"
        "    return importlib.reload(T).BPETokenizer(merges).encode(text, allowed_special=False)\n",
    ],
}

# Right answers in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch10-merge-pair": [
        "def replace_pair(ids, pair, new_id):\n"
        "    out, i = [], 0\n"
        "    while i < len(ids):\n"
        "        if tuple(ids[i:i + 2]) == tuple(pair):\n"
        "            out.append(new_id)\n"
        "            i += 2\n"
        "        else:\n"
        "            out.append(ids[i])\n"
        "            i += 1\n"
        "    return out\n",
        "def replace_pair(ids, pair, new_id):\n"
        "    out, skip = [], False\n"
        "    for a, b in zip(ids, list(ids[1:]) + [None]):\n"
        "        if skip:\n"
        "            skip = False\n"
        "        elif (a, b) == tuple(pair):\n"
        "            out.append(new_id)\n"
        "            skip = True\n"
        "        else:\n"
        "            out.append(a)\n"
        "    return out\n",
    ],
    "ch10-most-frequent-pair": [
        "from collections import Counter\n\n"
        "def top_pair(chunks):\n"
        "    counts = Counter(p for ids in chunks for p in zip(ids, ids[1:]))\n"
        "    return max(counts, key=lambda p: (counts[p], -p[0], -p[1]))\n",
        "def top_pair(chunks):\n"
        "    counts = {}\n"
        "    for ids in chunks:\n"
        "        for a, b in zip(ids, ids[1:]):\n"
        "            counts[(a, b)] = counts.get((a, b), 0) + 1\n"
        "    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]\n",
    ],
    "ch10-one-hot-embedding": [
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    one_hot = (ids.unsqueeze(-1) == torch.arange(E.shape[0])).to(E.dtype)\n"
        "    return one_hot @ E\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    one_hot = torch.zeros(*ids.shape, E.shape[0], dtype=E.dtype)\n"
        "    return one_hot.scatter_(-1, ids[..., None], 1.0) @ E\n",
        "import torch.nn.functional as F\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return torch.einsum('...v,vd->...d', F.one_hot(ids, len(E)).to(E), E)\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    flat = ids.reshape(-1)[:, None]                   # a full slice: no aten.slice\n"
        "    one_hot = (flat == torch.arange(E.shape[0])).to(E.dtype)\n"
        "    return torch.matmul(one_hot, E).reshape(*ids.shape, E.shape[1])\n",
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    mask = (ids[..., None] == torch.arange(len(E))).to(E.dtype)   # [..., V]\n"
        "    return (mask[..., None] * E).sum(-2)               # Σ_j (1_i)_j E_j\n",
        # one-hot vectors written with index_put (a write, not a selection of rows of E)
        "import torch\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    flat = ids.reshape(-1)\n"
        "    one_hot = torch.zeros(flat.numel(), E.shape[0], dtype=E.dtype)\n"
        "    one_hot[torch.arange(flat.numel()), flat] = 1\n"
        "    return (one_hot @ E).reshape(*ids.shape, E.shape[1])\n",
        # section 10.5: an embedding is a linear layer without bias on one-hot inputs
        "import torch.nn.functional as F\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return F.linear(F.one_hot(ids, E.shape[0]).to(E.dtype), E.T)\n",
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def one_hot_lookup(ids, E):\n"
        "    return torch.inner(F.one_hot(ids, E.shape[0]).to(E.dtype), E.T)\n",
    ],
    "ch10-bpe-encode": [
        # every merge in training order, as section 10.2 shows is the same
        "import re\n"
        "from mathref.tokenizers import GPT2_SPLIT_PATTERN, merge_pair\n\n"
        "def bpe_encode(text, merges):\n"
        "    out = []\n"
        "    for chunk in re.findall(GPT2_SPLIT_PATTERN, text):\n"
        "        ids = list(chunk.encode('utf-8'))\n"
        "        for r, pair in enumerate(merges):\n"
        "            ids = merge_pair(ids, tuple(pair), 256 + r)\n"
        "        out.extend(ids)\n"
        "    return out\n",
        # a right answer with a sanity check through BPETokenizer's token_bytes
        "import re\n"
        "from mathref.tokenizers import BPETokenizer, GPT2_SPLIT_PATTERN, merge_pair\n\n"
        "def bpe_encode(text, merges):\n"
        "    tok = BPETokenizer(merges)\n"
        "    assert all(len(tok.token_bytes(256 + r)) >= 2 for r in range(len(merges)))\n"
        "    out = []\n"
        "    for chunk in re.findall(GPT2_SPLIT_PATTERN, text):\n"
        "        ids = list(chunk.encode('utf-8'))\n"
        "        for r, pair in enumerate(merges):\n"
        "            ids = merge_pair(ids, tuple(pair), 256 + r)\n"
        "        out.extend(ids)\n"
        "    return out\n",
        # GPT-2's own spelling of the contractions: the same chunks
        "import re\n\n"
        "PATTERN = r\"'s|'t|'re|'ve|'m|'ll|'d| ?[^\\W\\d_]+| ?\\d+| ?(?:[^\\s\\w]|_)+|\\s+(?!\\S)|\\s+\"\n\n"
        "def bpe_encode(text, merges):\n"
        "    rank = {tuple(p): r for r, p in enumerate(merges)}\n"
        "    out = []\n"
        "    for chunk in re.findall(PATTERN, text):\n"
        "        ids = list(chunk.encode('utf-8'))\n"
        "        while True:\n"
        "            pairs = [p for p in zip(ids, ids[1:]) if p in rank]\n"
        "            if not pairs:\n"
        "                break\n"
        "            best = min(pairs, key=rank.get)\n"
        "            merged, i = [], 0\n"
        "            while i < len(ids):\n"
        "                if tuple(ids[i:i + 2]) == best:\n"
        "                    merged.append(256 + rank[best])\n"
        "                    i += 2\n"
        "                else:\n"
        "                    merged.append(ids[i])\n"
        "                    i += 1\n"
        "            ids = merged\n"
        "        out += ids\n"
        "    return out\n",
    ],
}
