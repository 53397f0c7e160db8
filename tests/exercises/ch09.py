"""Typical wrong answers to chapter 9's exercises: each must fail its checker."""
import math

import torch


def cosine_product_clamped(a, b, eps=1e-8):
    # clamps the product of the norms instead of each norm
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)


def cosine_eps_added(a, b, eps=1e-8):
    # adds ε to the denominator instead of clamping
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1) + eps)


def cosine_no_eps(a, b, eps=1e-8):
    # divides by the raw norms: nan for a zero vector
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def cosine_squared_norms(a, b, eps=1e-8):
    # forgets the square roots
    return (a * b).sum(-1) / ((a * a).sum(-1).clamp_min(eps) * (b * b).sum(-1).clamp_min(eps))


def soft_lookup_times_temperature(query, keys, values, temperature):
    return torch.softmax(query @ keys.T * temperature, dim=-1) @ values


def soft_lookup_wrong_axis(query, keys, values, temperature):
    scores = (query @ keys.T / temperature).reshape(-1, keys.shape[0])
    out = torch.softmax(scores, dim=0) @ values
    return out.reshape(*query.shape[:-1], values.shape[-1])


def soft_lookup_no_softmax(query, keys, values, temperature):
    return (query @ keys.T / temperature) @ values


def soft_lookup_sqrt_d(query, keys, values, temperature):
    # scales by 1/√d as well: that is attention's convention, not this exercise's τ
    return torch.softmax(query @ keys.T / (temperature * math.sqrt(keys.shape[-1])), -1) @ values


def mips_keys_no_sqrt(keys):
    # appends M² − ‖k‖² instead of its square root: the norms are not equal
    sq = (keys * keys).sum(-1, keepdim=True)
    return torch.cat([keys, sq.max() - sq], dim=-1)


def mips_keys_normalized(keys):
    # normalizes the keys: nearest neighbours then rank by cosine, not by dot product
    unit = keys / keys.norm(dim=-1, keepdim=True)
    return torch.cat([unit, torch.zeros_like(unit[:, :1])], dim=-1)


def mips_keys_own_norm(keys):
    # appends ‖k‖: the augmented norms are √2‖k‖, still different
    return torch.cat([keys, keys.norm(dim=-1, keepdim=True)], dim=-1)


def mips_keys_mean_norm(keys):
    # uses the mean norm for M and clamps the negative square: longer keys break the sphere
    sq = (keys * keys).sum(-1, keepdim=True)
    return torch.cat([keys, (sq.mean() - sq).clamp_min(0).sqrt()], dim=-1)


def cosine_builtin(a, b, eps=1e-8):
    # the built-in the statement forbids: right numbers, refused by the check
    import torch.nn.functional as F
    return F.cosine_similarity(a, b, dim=-1, eps=eps)


def soft_lookup_sdpa(query, keys, values, temperature):
    # the fused attention: right numbers, refused by the check
    import torch.nn.functional as F
    q = query if query.dim() == 2 else query[None]
    out = F.scaled_dot_product_attention(q, keys, values, scale=1 / temperature)
    return out if query.dim() == 2 else out[0]


def soft_lookup_exp_without_max(query, keys, values, temperature):
    # the chapter's by-hand softmax: exp overflows at τ = 1e-3 (inf / inf = nan)
    e = torch.exp(query @ keys.T / temperature)
    return (e / e.sum(-1, keepdim=True)) @ values


def unit_distance_by_vectors(c):
    # measures two unit vectors with cosine c instead of deriving: refused by the check
    u = torch.tensor([1.0, 0.0], dtype=torch.float64)
    v = torch.tensor([c, math.sqrt(max(1 - c * c, 0.0))], dtype=torch.float64)
    return float(torch.dist(u, v))


WRONG_ANSWERS = {
    "ch09-cosine-from-dot": [cosine_product_clamped, cosine_eps_added, cosine_no_eps,
                             cosine_squared_norms, cosine_builtin],
    "ch09-unit-distance": [lambda c: 2 - 2 * c, lambda c: math.sqrt(2 + 2 * c),
                           lambda c: math.sqrt(1 - c), lambda c: 1 - c, unit_distance_by_vectors],
    "ch09-mips-to-nn": [mips_keys_no_sqrt, mips_keys_normalized, mips_keys_own_norm,
                        mips_keys_mean_norm],
    "ch09-soft-lookup": [soft_lookup_times_temperature, soft_lookup_wrong_axis,
                         soft_lookup_no_softmax, soft_lookup_sqrt_d, soft_lookup_sdpa,
                         soft_lookup_exp_without_max],
}


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch09-cosine-from-dot": [
        "import torch.nn.functional as F\n\n"
        "def cosine(a, b, eps=1e-8):\n"
        "    return F.cosine_similarity(a, b, dim=-1, eps=eps)\n",
        "import torch\n\n"
        "def cosine(a, b, eps=1e-8):\n"
        "    return torch.cosine_similarity(a, b, -1, eps)\n",
        "from torch.nn.functional import normalize as unit\n\n"
        "def cosine(a, b, eps=1e-8):\n"
        "    return (unit(a, dim=-1, eps=eps) * unit(b, dim=-1, eps=eps)).sum(-1)\n",
        "from mathref.similarity import cosine_similarity as cos\n\n"
        "def cosine(a, b, eps=1e-8):\n"
        "    return cos(a, b, eps=eps)\n",
        "import torch\n\n"
        "def cosine(a, b, eps=1e-8):\n"
        "    return torch.nn.CosineSimilarity(dim=-1, eps=eps)(a, b)\n",
        "import torch\n\n"
        "def cosine(a, b, eps=1e-8):\n"
        "    return torch.ops.aten.cosine_similarity(a, b, -1, eps)\n",
    ],
    "ch09-unit-distance": [
        "import math\n"
        "import torch\n\n"
        "def unit_distance(c):\n"
        "    u = torch.tensor([1.0, 0.0], dtype=torch.float64)\n"
        "    v = torch.tensor([c, math.sqrt(max(1 - c * c, 0.0))], dtype=torch.float64)\n"
        "    return (u - v).norm().item()\n",
        "import math\n"
        "import torch\n"
        "from mathref import similarity as sim\n\n"
        "def unit_distance(c):\n"
        "    u = torch.tensor([1.0, 0.0], dtype=torch.float64)\n"
        "    v = torch.tensor([c, math.sqrt(max(1 - c * c, 0.0))], dtype=torch.float64)\n"
        "    return float(sim.euclidean_distance(u, v))\n",
        "import math\n"
        "import torch\n\n"
        "def unit_distance(c):\n"
        "    u = torch.tensor([1.0, 0.0], dtype=torch.float64)\n"
        "    v = torch.tensor([c, math.sqrt(max(1 - c * c, 0.0))], dtype=torch.float64)\n"
        "    return torch.linalg.vector_norm(u - v).item()\n",
    ],
    # no library function builds the augmented keys: the probe a student might reach for is
    # the search itself (M² = the largest of all k_i·k_j, by Cauchy–Schwarz)
    "ch09-mips-to-nn": [
        "import torch\n"
        "from mathref.similarity import max_inner_product_search\n\n"
        "def mips_keys(keys):\n"
        "    M2 = max_inner_product_search(keys, keys)[0].max()\n"
        "    sq = (keys * keys).sum(-1, keepdim=True)\n"
        "    return torch.cat([keys, (M2 - sq).clamp_min(0).sqrt()], dim=-1)\n",
    ],
    "ch09-soft-lookup": [
        "import torch.nn.functional as F\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    q = query if query.dim() == 2 else query[None]\n"
        "    out = F.scaled_dot_product_attention(q, keys, values, scale=1 / temperature)\n"
        "    return out if query.dim() == 2 else out[0]\n",
        "import mathref.similarity as S\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    return S.soft_lookup(query, keys, values, temperature=temperature)[0]\n",
        "from mathref.attention import scaled_dot_product_attention as attend\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    return attend(query[..., None, :], keys, values, scale=1 / temperature)[..., 0, :]\n",
        "import torch\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    q = query if query.dim() == 2 else query[None]\n"
        "    out = torch.ops.aten.scaled_dot_product_attention(q, keys, values, scale=1 / temperature)\n"
        "    return out if query.dim() == 2 else out[0]\n",
    ],
}

# Right answers in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch09-cosine-from-dot": [
        "def cosine(a, b, eps=1e-8):\n"
        "    a_unit = a / a.norm(dim=-1, keepdim=True).clamp_min(eps)\n"
        "    b_unit = b / b.norm(dim=-1, keepdim=True).clamp_min(eps)\n"
        "    return (a_unit * b_unit).sum(dim=-1)\n",
        "import torch\n\n"
        "def cosine(a, b, eps=1e-8):\n"
        "    na = torch.linalg.vector_norm(a, dim=-1).clamp(min=eps)\n"
        "    nb = torch.maximum(b.pow(2).sum(-1).sqrt(), torch.tensor(eps, dtype=b.dtype))\n"
        "    return torch.einsum('...i,...i->...', a, b) / (na * nb)\n",
    ],
    "ch09-unit-distance": [
        "import torch\n\n"
        "def unit_distance(c):\n"
        "    return torch.sqrt(torch.tensor(2 - 2 * c))          # a float32 tensor\n",
        "import torch\n\n"
        "def unit_distance(c):\n"
        "    c = torch.tensor(c)                                 # float32 from the start\n"
        "    return (2 - 2 * c).clamp_min(0).sqrt().item()\n",
        "def unit_distance(c):\n"
        "    return abs(2 - 2 * c) ** 0.5\n",
        "import numpy as np\n\n"
        "def unit_distance(c):\n"
        "    return np.sqrt(np.float32(2 - 2 * c))\n",
    ],
    "ch09-mips-to-nn": [
        "import torch\n\n"
        "def mips_keys(keys):\n"
        "    norms = torch.linalg.vector_norm(keys, dim=-1, keepdim=True)\n"
        "    M = norms.max()\n"
        "    return torch.cat([keys, (M * M - norms * norms).clamp_min(0).sqrt()], dim=-1)\n",
        "import torch\n\n"
        "def mips_keys(keys):                                     # the other root: also norm M\n"
        "    sq = keys.pow(2).sum(-1, keepdim=True)\n"
        "    return torch.cat([keys, -(sq.max() - sq).clamp_min(0).sqrt()], dim=-1)\n",
    ],
    "ch09-soft-lookup": [
        "import torch\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    s = query @ keys.T / temperature\n"
        "    e = torch.exp(s - s.max(dim=-1, keepdim=True).values)   # the max cancels\n"
        "    return (e / e.sum(dim=-1, keepdim=True)) @ values\n",
        "import torch\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    s = torch.einsum('...d,md->...m', query, keys) / temperature\n"
        "    return (s - s.logsumexp(-1, keepdim=True)).exp() @ values\n",
        "import torch.nn.functional as F\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    return F.softmax(query @ keys.T / temperature, dim=-1) @ values\n",
    ],
}
SHORTCUTS["ch09-unit-distance"] = SHORTCUTS["ch09-unit-distance"] + [
    "import math\nimport torch\n\ndef unit_distance(c):\n"
    "    return torch.tensor([1.0, 0.0]).dist(torch.tensor([c, math.sqrt(1 - c * c)])).item()\n",
    "import math\nimport torch\n\ndef unit_distance(c):\n"
    "    c = torch.tensor(c, dtype=torch.float64)\n"
    "    return torch.hypot(1 - c, (1 - c * c).clamp_min(0).sqrt()).item()\n"]
