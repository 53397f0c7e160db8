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


def top_k_first_row(logits, k):       # one threshold, taken from row 0, for every row
    return logits.masked_fill(logits < torch.topk(logits[0], k).values[-1], float("-inf"))


def top_k_whole_batch_kB(logits, k):  # the k·B largest of the whole batch
    kth = torch.topk(logits.flatten(), k * logits.shape[0]).values[-1]
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
    "ch14-top-k": [top_k_zero_fill, top_k_smallest, top_k_whole_batch, top_k_strict,
                   top_k_first_row, top_k_whole_batch_kB],
    "ch14-top-p": [top_p_inclusive, top_p_not_renormalized, top_p_unsorted],
    "ch14-rope-decode-step": [decode_without_offset, decode_offset_one_too_far,
                              decode_query_not_rotated, decode_values_rotated, decode_without_scale,
                              decode_prepends],
}


def top_p_strict_boundary(probs, top_p):   # `>`: keeps a token whose mass above is exactly top_p
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    before = sorted_probs.cumsum(-1) - sorted_probs
    sorted_probs = sorted_probs.masked_fill(before > top_p, 0.0)
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return kept / kept.sum(-1, keepdim=True)


WRONG_ANSWERS["ch14-top-p"].append(top_p_strict_boundary)


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
_SAMPLED_SUPPORT = (                      # which tokens sample_next can draw: the filtered set
    "    g = torch.Generator().manual_seed(0)\n"
    "    seen = torch.zeros(x.shape, dtype=torch.bool)\n"
    "    rows = torch.arange(x.shape[0])\n"
    "    for _ in range(2000):\n"
    "        seen[rows, draw(x, generator=g)] = True\n")

SHORTCUTS = {
    "ch14-next-token-pairs": [
        "import torch\n"
        "from mathref.data import get_batch\n\n"
        "def next_token_pairs(ids):\n"
        "    pairs = [get_batch(row, 1, ids.shape[1] - 1) for row in ids]   # one window: start 0\n"
        "    return torch.cat([x for x, _ in pairs]), torch.cat([y for _, y in pairs])\n",
    ],
    "ch14-perplexity-bpb": [
        "from mathref.losses import perplexity, bits_per_byte as bpb\n\n"
        "def perplexity_and_bpb(total_nll_nats, n_tokens, n_bytes):\n"
        "    return perplexity(total_nll_nats / n_tokens), bpb(total_nll_nats, n_bytes)\n",
        "import math\n"
        "import mathref.losses as L\n\n"
        "def perplexity_and_bpb(total_nll_nats, n_tokens, n_bytes):\n"
        "    return math.exp(total_nll_nats / n_tokens), L.bits_per_byte(total_nll_nats, n_bytes)\n",
    ],
    "ch14-top-k": [
        "import torch\n"
        "from mathref.gpt import sample_next\n\n"
        "def top_k_filter(logits, k):\n"
        "    x = logits\n"
        "    draw = lambda x, generator: sample_next(x, top_k=k, generator=generator)\n"
        + _SAMPLED_SUPPORT +
        "    return logits.masked_fill(~seen, float('-inf'))\n",
        "import torch\n"
        "import mathref.gpt as G\n\n"
        "def top_k_filter(logits, k):\n"
        "    x = logits\n"
        "    draw = lambda x, generator: G.sample_next(x, temperature=1.0, top_k=k, generator=generator)\n"
        + _SAMPLED_SUPPORT +
        "    return torch.where(seen, logits, float('-inf'))\n",
    ],
    "ch14-top-p": [
        "import torch\n"
        "from mathref.gpt import sample_next as draw_nucleus\n\n"
        "def top_p_probs(probs, top_p):\n"
        "    x = probs.log()\n"
        "    draw = lambda x, generator: draw_nucleus(x, top_p=top_p, generator=generator)\n"
        + _SAMPLED_SUPPORT +
        "    kept = probs * seen\n"
        "    return kept / kept.sum(-1, keepdim=True)\n",
    ],
    "ch14-rope-decode-step": [
        "import torch\n"
        "import torch.nn.functional as F\n"
        "from mathref.positions import apply_rope\n\n"
        "def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):\n"
        "    position = torch.tensor([k_cache.shape[-2]])\n"
        "    k_cache = torch.cat([k_cache, apply_rope(k_new, positions=position)], dim=-2)\n"
        "    v_cache = torch.cat([v_cache, v_new], dim=-2)\n"
        "    out = F.scaled_dot_product_attention(apply_rope(q_new, positions=position), k_cache, v_cache)\n"
        "    return out, k_cache, v_cache\n",
        "import torch\n"
        "from mathref.attention import scaled_dot_product_attention as attend\n"
        "from mathref.gpt import KVCache\n"
        "from mathref.positions import apply_rope\n\n"
        "def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):\n"
        "    position = torch.tensor([k_cache.shape[-2]])\n"
        "    cache = KVCache(1)\n"
        "    cache.update(0, k_cache, v_cache)\n"
        "    k, v = cache.update(0, apply_rope(k_new, positions=position), v_new)\n"
        "    return attend(apply_rope(q_new, positions=position), k, v, is_causal=True), k, v\n",
        "import torch\n"
        "from mathref.efficient import flash_attention\n"
        "from mathref.positions import apply_rope\n\n"
        "def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):\n"
        "    position = torch.tensor([k_cache.shape[-2]])\n"
        "    k = torch.cat([k_cache, apply_rope(k_new, positions=position)], dim=-2)\n"
        "    v = torch.cat([v_cache, v_new], dim=-2)\n"
        "    return flash_attention(apply_rope(q_new, positions=position), k, v), k, v\n",
    ],
}

# Correct solutions in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch14-next-token-pairs": [
        "def next_token_pairs(ids):\n"
        "    T = ids.shape[1] - 1\n"
        "    return ids.narrow(1, 0, T).clone(), ids.narrow(1, 1, T).clone()\n",
    ],
    "ch14-perplexity-bpb": [
        "import torch\n\n"
        "def perplexity_and_bpb(total_nll_nats, n_tokens, n_bytes):\n"
        "    total = torch.tensor(total_nll_nats)             # float32\n"
        "    return torch.exp(total / n_tokens), total / n_bytes / torch.log(torch.tensor(2.0))\n",
        "import math\n\n"
        "def perplexity_and_bpb(total_nll_nats, n_tokens, n_bytes):\n"
        "    bits = total_nll_nats * math.log2(math.e)\n"
        "    return 2 ** (bits / n_tokens), bits / n_bytes\n",
    ],
    "ch14-top-k": [
        "import torch\n\n"
        "def top_k_filter(logits, k):\n"
        "    kth = torch.kthvalue(logits, logits.shape[-1] - k + 1, dim=-1, keepdim=True).values\n"
        "    return torch.where(logits >= kth, logits, float('-inf'))\n",
        "import torch\n\n"
        "def top_k_filter(logits, k):\n"
        "    top = logits.topk(k, dim=-1)\n"
        "    out = torch.full_like(logits, float('-inf'))\n"
        "    return out.scatter(-1, top.indices, top.values)\n",
        "def top_k_filter(logits, k):\n"
        "    kth = logits.sort(dim=-1, descending=True).values[:, k - 1:k]\n"
        "    return logits.masked_fill(logits < kth, float('-inf'))\n",
    ],
    "ch14-top-p": [
        "import torch\n\n"
        "def top_p_probs(probs, top_p):\n"
        "    order = probs.argsort(dim=-1, descending=True)\n"
        "    sorted_probs = probs.gather(-1, order)\n"
        "    keep_sorted = sorted_probs.cumsum(-1) - sorted_probs < top_p   # mass above < top_p\n"
        "    keep = keep_sorted.gather(-1, order.argsort(dim=-1))\n"
        "    kept = torch.where(keep, probs, torch.zeros_like(probs))\n"
        "    return kept / kept.sum(-1, keepdim=True)\n",
    ],
    "ch14-rope-decode-step": [
        "import math\n"
        "import torch\n\n"
        "def rotate(x, position):\n"
        "    d = x.shape[-1]\n"
        "    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
        "    cos, sin = torch.cos(position * theta), torch.sin(position * theta)\n"
        "    x1, x2 = x[..., : d // 2], x[..., d // 2:]\n"
        "    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).to(x.dtype)\n\n"
        "def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):\n"
        "    S = k_cache.shape[-2]\n"
        "    k_cache = torch.cat([k_cache, rotate(k_new, S)], dim=-2)\n"
        "    v_cache = torch.cat([v_cache, v_new], dim=-2)\n"
        "    scores = torch.einsum('bhqd,bhkd->bhqk', rotate(q_new, S), k_cache)\n"
        "    weights = torch.nn.functional.softmax(scores / math.sqrt(q_new.shape[-1]), dim=-1)\n"
        "    return torch.einsum('bhqk,bhkd->bhqd', weights, v_cache), k_cache, v_cache\n",
    ],
}


def pairs_as_float(ids):
    return ids[:, :-1].float(), ids[:, 1:].float()


def rope_decode_adjacent(q_new, k_new, v_new, k_cache, v_cache):
    import math

    def rot(x, pos):
        d = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
        z = torch.complex(x[..., 0::2], x[..., 1::2]) * torch.polar(
            torch.ones(d // 2, dtype=torch.float64), pos * theta)
        return torch.stack([z.real, z.imag], dim=-1).flatten(-2)
    S = k_cache.shape[-2]
    q, k = rot(q_new, S), rot(k_new, S)
    k_cache, v_cache = torch.cat([k_cache, k], -2), torch.cat([v_cache, v_new], -2)
    w = torch.softmax(q @ k_cache.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
    return w @ v_cache, k_cache, v_cache


WRONG_ANSWERS["ch14-next-token-pairs"] = WRONG_ANSWERS["ch14-next-token-pairs"] + [pairs_as_float]
WRONG_ANSWERS["ch14-rope-decode-step"] = WRONG_ANSWERS["ch14-rope-decode-step"] + [rope_decode_adjacent]
RIGHT_ANSWERS["ch14-rope-decode-step"] = RIGHT_ANSWERS["ch14-rope-decode-step"] + [
    "import math\nimport torch\n\n"
    "def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):\n"
    "    d = q_new.shape[-1]\n"
    "    S = k_cache.shape[-2]\n"
    "    theta = 10000 ** (-torch.arange(0, d // 2) * 2 / d)      # float32 angles\n"
    "    c, s = torch.cos(S * theta).double(), torch.sin(S * theta).double()\n"
    "    def rot(x):\n"
    "        a, b = x[..., : d // 2], x[..., d // 2:]\n"
    "        return torch.cat([a * c - b * s, a * s + b * c], -1)\n"
    "    k_cache = torch.cat([k_cache, rot(k_new)], -2)\n"
    "    v_cache = torch.cat([v_cache, v_new], -2)\n"
    "    w = torch.softmax(rot(q_new) @ k_cache.transpose(-2, -1) / math.sqrt(d), -1)\n"
    "    return w @ v_cache, k_cache, v_cache\n"]
RIGHT_ANSWERS["ch14-top-k"] = RIGHT_ANSWERS["ch14-top-k"] + [
    "import torch\n\n"
    "def top_k_filter(logits, k):\n"
    "    logits = logits.float()                       # as mathref.gpt.sample_next does\n"
    "    kth = torch.topk(logits, k, dim=-1).values[:, -1:]\n"
    "    return logits.masked_fill(logits < kth, float('-inf'))\n"]

# the softmax under its other names, the chapter's own included (the sixth read found both
# refused although the statement forbids neither)
_BASE_DECODE = RIGHT_ANSWERS["ch14-rope-decode-step"][0]
RIGHT_ANSWERS["ch14-rope-decode-step"] = RIGHT_ANSWERS["ch14-rope-decode-step"] + [
    _BASE_DECODE.replace("torch.nn.functional.softmax(", "torch.special.softmax("),
    "import mathref.losses\n" + _BASE_DECODE.replace("torch.nn.functional.softmax(",
                                                     "mathref.losses.softmax("),
    # log_softmax(...).exp() is the softmax (the seventh read found it refused)
    _BASE_DECODE.replace("torch.nn.functional.softmax(scores / math.sqrt(q_new.shape[-1]), dim=-1)",
                         "torch.nn.functional.log_softmax(scores / math.sqrt(q_new.shape[-1]), "
                         "dim=-1).exp()"),
]
# thresholding the probabilities: the softmax is increasing, so the k most probable tokens are
# the k largest logits (the seventh read found both forms refused)
RIGHT_ANSWERS["ch14-top-k"] = RIGHT_ANSWERS["ch14-top-k"] + [
    "import torch\n\n"
    "def top_k_filter(logits, k):\n"
    f"    p = torch.{name}(logits, -1)\n"
    "    return logits.masked_fill(p < torch.topk(p, k).values[:, -1:], float('-inf'))\n"
    for name in ("softmax", "log_softmax")]


def rope_decode_backwards(q_new, k_new, v_new, k_cache, v_cache):
    """RoPE by −Sθ on both q and k (the sine's sign flipped): the sixth read's L6, whose message
    named the position; the check now names the sign."""
    def rotate(x, position):
        d = x.shape[-1]
        theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
        cos, sin = torch.cos(position * theta), -torch.sin(position * theta)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    S = k_cache.shape[-2]
    k_cache = torch.cat([k_cache, rotate(k_new, S)], dim=-2)
    v_cache = torch.cat([v_cache, v_new], dim=-2)
    weights = torch.softmax(rotate(q_new, S) @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1]), -1)
    return weights @ v_cache, k_cache, v_cache


WRONG_ANSWERS["ch14-rope-decode-step"] = WRONG_ANSWERS["ch14-rope-decode-step"] + [rope_decode_backwards]


# RoPE as a complex product, the way chapter 12 teaches it (cell 31, rope_complex_adjacent) and
# the checker's own reference writes it. The eighth read (M1) found both forms refused, in the
# notebook and under the grader ("ran the PyTorch operator aten.complex", "… aten.polar",
# "… aten.view_as_complex"), though the statement restricts only the attention step.
_ROTATE_COS_SIN = _BASE_DECODE[_BASE_DECODE.index("def rotate"):_BASE_DECODE.index("def rope_decode_step")]
_ROTATE_POLAR = (
    "def rotate(x, position):\n"
    "    d = x.shape[-1]\n"
    "    theta = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)\n"
    "    z = torch.complex(x[..., : d // 2], x[..., d // 2:]) * torch.polar(torch.ones_like(theta),\n"
    "                                                                      position * theta)\n"
    "    return torch.cat([z.real, z.imag], dim=-1)\n\n")
_ROTATE_VIEW_AS_COMPLEX = (
    "def rotate(x, position):\n"
    "    d = x.shape[-1]\n"
    "    theta = 10000.0 ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)\n"
    "    pairs = torch.stack([x[..., : d // 2], x[..., d // 2:]], dim=-1).contiguous()\n"
    "    z = torch.view_as_complex(pairs) * torch.exp(1j * position * theta)\n"
    "    parts = torch.view_as_real(z)\n"
    "    return torch.cat([parts[..., 0], parts[..., 1]], dim=-1)\n\n")
COMPLEX_ROPE_DECODE = _BASE_DECODE.replace(_ROTATE_COS_SIN, _ROTATE_POLAR)
VIEW_AS_COMPLEX_ROPE_DECODE = _BASE_DECODE.replace(_ROTATE_COS_SIN, _ROTATE_VIEW_AS_COMPLEX)
assert COMPLEX_ROPE_DECODE != _BASE_DECODE != VIEW_AS_COMPLEX_ROPE_DECODE
RIGHT_ANSWERS["ch14-rope-decode-step"] += [COMPLEX_ROPE_DECODE, VIEW_AS_COMPLEX_ROPE_DECODE]
# The parts taken by function, not by attribute: the delta read (N-M1) found torch.imag(z)
# refused ("ran torch imag") while z.imag and torch.real(z) passed, and z.angle() and
# z.conj_physical() refused too
IMAG_ROPE_DECODE = COMPLEX_ROPE_DECODE.replace("torch.cat([z.real, z.imag]",
                                               "torch.cat([torch.real(z), torch.imag(z)]")
ANGLE_ROPE_DECODE = COMPLEX_ROPE_DECODE.replace(
    "    return torch.cat([z.real, z.imag], dim=-1)\n",
    "    z = z.conj_physical().conj_physical()\n"
    "    r, a = z.abs(), torch.angle(z)\n"
    "    return torch.cat([r * torch.cos(a), r * torch.sin(a)], dim=-1)\n")
assert COMPLEX_ROPE_DECODE != IMAG_ROPE_DECODE and COMPLEX_ROPE_DECODE != ANGLE_ROPE_DECODE
RIGHT_ANSWERS["ch14-rope-decode-step"] += [IMAG_ROPE_DECODE, ANGLE_ROPE_DECODE]
# complex numbers allowed for the rotation: the attention step is still the student's to write
COMPLEX_ROPE_SDPA = (
    "import torch\n"
    "import torch.nn.functional as F\n\n" + _ROTATE_POLAR +
    "def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):\n"
    "    S = k_cache.shape[-2]\n"
    "    k_cache = torch.cat([k_cache, rotate(k_new, S)], dim=-2)\n"
    "    v_cache = torch.cat([v_cache, v_new], dim=-2)\n"
    "    return F.scaled_dot_product_attention(rotate(q_new, S), k_cache, v_cache), k_cache, v_cache\n")
SHORTCUTS["ch14-rope-decode-step"].append(COMPLEX_ROPE_SDPA)


def decode_caches_unrotated_keys(q_new, k_new, v_new, k_cache, v_cache):
    """Keys cached as they came and the whole cache rotated at use: the output is right, the
    cache is not (the eighth read's L4: its hint named the position, which was right)."""
    from mathref.positions import apply_rope
    S = k_cache.shape[-2]
    k_cache, v_cache = torch.cat([k_cache, k_new], -2), torch.cat([v_cache, v_new], -2)
    q = apply_rope(q_new, positions=torch.tensor([S]))
    k = apply_rope(k_cache, positions=torch.arange(S + 1))
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v_cache, k_cache, v_cache


def decode_rerotates_the_cache(q_new, k_new, v_new, k_cache, v_cache):
    """The new key appended unrotated, then the whole cache rotated at 0…S: the cached keys
    are rotated twice (L4 too)."""
    from mathref.positions import apply_rope
    S = k_cache.shape[-2]
    k_cache = apply_rope(torch.cat([k_cache, k_new], -2), positions=torch.arange(S + 1))
    v_cache = torch.cat([v_cache, v_new], -2)
    q = apply_rope(q_new, positions=torch.tensor([S]))
    return torch.softmax(q @ k_cache.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1) @ v_cache, k_cache, v_cache


WRONG_ANSWERS["ch14-rope-decode-step"] += [decode_caches_unrotated_keys, decode_rerotates_the_cache]


def _decode_rotated_by(rotate):
    """A decode step right but for its rotation, rotate(x, S) (the delta read's N-L2: each of
    these was told '(the new key is at position S = 1)', though the position was right)."""
    def rope_decode_step(q_new, k_new, v_new, k_cache, v_cache):
        S = k_cache.shape[-2]
        k_cache = torch.cat([k_cache, rotate(k_new, S)], -2)
        v_cache = torch.cat([v_cache, v_new], -2)
        scores = rotate(q_new, S) @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
        return torch.softmax(scores, -1) @ v_cache, k_cache, v_cache
    return rope_decode_step


def _rotate_with(exponent, base=10000.0):
    def rotate(x, S):
        d = x.shape[-1]
        theta = base ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)
        cos, sin = torch.cos(S * theta), torch.sin(S * theta)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)
    return rotate


decode_base_1000 = _decode_rotated_by(_rotate_with(2, base=1000.0))
decode_theta_without_2 = _decode_rotated_by(_rotate_with(1))           # θ_i = 10000^(−i/d)
decode_rotated_twice = _decode_rotated_by(lambda x, S: _rotate_with(2)(_rotate_with(2)(x, S), S))
WRONG_ANSWERS["ch14-rope-decode-step"] += [decode_base_1000, decode_theta_without_2,
                                           decode_rotated_twice]


# Beam search (the delta read's missing depth, item 3): the student writes what mathref.gpt.beam_search
# does, for a step function that plays the model
def _beam(step, prompt, n, width):
    beams, scores = prompt[None], torch.zeros(1, dtype=torch.float64)
    for _ in range(n):
        logp = step(beams)
        V = logp.shape[-1]
        scores, flat = (scores[:, None] + logp).flatten().topk(min(width, V * len(beams)))
        beams = torch.cat([beams[flat // V], (flat % V)[:, None]], 1)
    return beams[0], scores[0].item()


def beam_greedy(step, prompt, max_new_tokens, beam_width):        # the width ignored
    return _beam(step, prompt, max_new_tokens, 1)


def beam_exhaustive(step, prompt, max_new_tokens, beam_width):    # every prefix kept
    return _beam(step, prompt, max_new_tokens, 10 ** 6)


def beam_ranked_by_last_token(step, prompt, max_new_tokens, beam_width):
    beams, total = prompt[None], torch.zeros(1, dtype=torch.float64)
    for _ in range(max_new_tokens):
        logp = step(beams)
        V = logp.shape[-1]
        last, flat = logp.flatten().topk(min(beam_width, logp.numel()))   # the new token alone
        total = total[flat // V] + last
        beams = torch.cat([beams[flat // V], (flat % V)[:, None]], 1)
    best = int(total.argmax())
    return beams[best], float(total[best])


def beam_probability_score(step, prompt, max_new_tokens, beam_width):   # p, not log p
    seq, score = _beam(step, prompt, max_new_tokens, beam_width)
    return seq, math.exp(score)


def beam_without_prompt(step, prompt, max_new_tokens, beam_width):
    seq, score = _beam(step, prompt, max_new_tokens, beam_width)
    return seq[len(prompt):], score


def beam_last_kept(step, prompt, max_new_tokens, beam_width):    # the worst of the final beams
    beams, scores = prompt[None], torch.zeros(1, dtype=torch.float64)
    for _ in range(max_new_tokens):
        logp = step(beams)
        V = logp.shape[-1]
        scores, flat = (scores[:, None] + logp).flatten().topk(min(beam_width, V * len(beams)))
        beams = torch.cat([beams[flat // V], (flat % V)[:, None]], 1)
    return beams[-1], scores[-1].item()


WRONG_ANSWERS["ch14-beam-search"] = [beam_greedy, beam_exhaustive, beam_ranked_by_last_token,
                                     beam_probability_score, beam_without_prompt, beam_last_kept]
SHORTCUTS["ch14-beam-search"] = [
    # the course's beam search, handed a module that plays the model
    "import types\n"
    "import torch\n"
    "from mathref.gpt import beam_search as course_beam_search\n\n"
    "class Steps(torch.nn.Module):\n"
    "    config = types.SimpleNamespace(block_size=10 ** 6)\n\n"
    "    def __init__(self, step):\n"
    "        super().__init__()\n"
    "        self.step = step\n\n"
    "    def forward(self, idx):\n"
    "        return self.step(idx)[:, None, :], None\n\n"
    "def beam_search(step, prompt, max_new_tokens, beam_width):\n"
    "    seq, score = course_beam_search(Steps(step), prompt[None], max_new_tokens, beam_width)\n"
    "    return seq[0], score\n",
]
RIGHT_ANSWERS["ch14-beam-search"] = [
    # Python lists and sorted(), one step call per step
    "import torch\n\n"
    "def beam_search(step, prompt, max_new_tokens, beam_width):\n"
    "    beams = [(0.0, prompt.tolist())]\n"
    "    for _ in range(max_new_tokens):\n"
    "        logp = step(torch.tensor([seq for _, seq in beams]))\n"
    "        candidates = [(score + float(logp[i, t]), seq + [t]) for i, (score, seq) in enumerate(beams)\n"
    "                      for t in range(logp.shape[1])]\n"
    "        beams = sorted(candidates, key=lambda c: c[0], reverse=True)[:beam_width]\n"
    "    return torch.tensor(beams[0][1]), beams[0][0]\n",
    # each beam's own best k first (the global best k are among them), one step call per beam
    "import torch\n\n"
    "def beam_search(step, prompt, max_new_tokens, beam_width):\n"
    "    beams = [(prompt, torch.tensor(0.0, dtype=torch.float64))]\n"
    "    for _ in range(max_new_tokens):\n"
    "        candidates = []\n"
    "        for seq, score in beams:\n"
    "            logp = step(seq[None])[0]\n"
    "            top = torch.topk(logp, min(beam_width, logp.numel()))\n"
    "            candidates += [(torch.cat([seq, t[None]]), score + v) for v, t in zip(top.values, top.indices)]\n"
    "        candidates.sort(key=lambda c: float(c[1]), reverse=True)\n"
    "        beams = candidates[:beam_width]\n"
    "    return beams[0][0], beams[0][1]\n",
    # step's output normalized again with log_softmax, which leaves log-probabilities unchanged
    # (chapter 14's second delta read, L-A: refused)
    "import torch\n\n"
    "def beam_search(step, prompt, max_new_tokens, beam_width):\n"
    "    beams = [(0.0, prompt.tolist())]\n"
    "    for _ in range(max_new_tokens):\n"
    "        logp = torch.log_softmax(step(torch.tensor([seq for _, seq in beams])), dim=-1)\n"
    "        candidates = [(score + float(logp[i, t]), seq + [t]) for i, (score, seq) in enumerate(beams)\n"
    "                      for t in range(logp.shape[1])]\n"
    "        beams = sorted(candidates, key=lambda c: c[0], reverse=True)[:beam_width]\n"
    "    return torch.tensor(beams[0][1]), beams[0][0]\n",
]
