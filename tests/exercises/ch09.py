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


def cosine_squared_product_clamped(a, b, eps=1e-8):
    # clamps the product of the squared norms at ε (the read at 81f456b, L2): for two tiny
    # vectors the denominator is √ε, not ‖a‖‖b‖
    return (a * b).sum(-1) / ((a * a).sum(-1) * (b * b).sum(-1)).clamp_min(eps).sqrt()


def cosine_squared_norms_clamped(a, b, eps=1e-8):
    # clamps each squared norm at ε instead of ε²: a norm below √ε is raised to √ε
    return (a * b).sum(-1) / ((a * a).sum(-1).clamp_min(eps).sqrt()
                              * (b * b).sum(-1).clamp_min(eps).sqrt())


def cosine_eps_added_to_each_norm(a, b, eps=1e-8):
    # adds ε to each norm (the read at 81f456b, L3): every result shifts by about 1e-8
    return (a * b).sum(-1) / ((a.norm(dim=-1) + eps) * (b.norm(dim=-1) + eps))


def cosine_eps_under_the_root(a, b, eps=1e-8):
    # ε added under each square root (the delta read of chapter 9, N2): results shift by ~1e-9
    return (a * b).sum(-1) / (((a * a).sum(-1) + eps).sqrt() * ((b * b).sum(-1) + eps).sqrt())


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


def soft_lookup_global_max(query, keys, values, temperature):
    # subtracts the largest score of the whole batch, not of each row: rows whose best score is
    # far below it underflow to 0 / 0 at a small τ
    s = query @ keys.T / temperature
    e = torch.exp(s - s.max())
    return (e / e.sum(-1, keepdim=True)) @ values


def unit_distances_squared(U, V):
    # forgets the square root
    return (2 - 2 * U @ V.T).clamp_min(0)


def unit_distances_plus(U, V):
    # the wrong sign on the cross term
    return (2 + 2 * U @ V.T).clamp_min(0).sqrt()


def unit_distances_no_clamp(U, V):
    # a cosine rounded above 1 makes 2 − 2c negative: nan on the diagonal
    return (2 - 2 * U @ V.T).sqrt()


def unit_distances_direct(U, V):
    # measures every pair through an [n, m, d] difference: accurate, but not the matrix product
    return (U[:, None, :] - V[None, :, :]).pow(2).sum(-1).sqrt()


def unit_distances_row_loop(U, V):
    # one row of distances at a time: a loop whose length grows with n
    return torch.stack([(2 - 2 * V @ u).clamp_min(0).sqrt() for u in U])


def unit_distances_coordinate_loop(U, V):
    # a loop over the d coordinates, nothing larger than [n, m], no matrix product
    D2 = torch.zeros(U.shape[0], V.shape[0], dtype=U.dtype)
    for k in range(U.shape[1]):
        D2 = D2 + (U[:, k, None] - V[None, :, k]) ** 2
    return D2.sqrt()


def unit_distances_math_dist(U, V):
    # every pair measured in Python on the entries read out with .tolist()
    rows, cols = U.tolist(), V.tolist()
    return torch.tensor([[math.dist(u, v) for v in cols] for u in rows], dtype=U.dtype)


def unit_distances_python_sum(U, V):
    # the entries read out without .tolist() (one float per entry: a loop whose length grows
    # with n), then a Python sum of squares
    rows = [[float(x) for x in u] for u in U]
    cols = [[float(x) for x in v] for v in V]
    return torch.tensor([[math.sqrt(sum((a - b) ** 2 for a, b in zip(u, v))) for v in cols]
                         for u in rows], dtype=U.dtype)


def unit_distances_from_bytes(U, V):
    # the entries read from the tensors' bytes (no .tolist(), no per-entry operation), the
    # distances computed in Python and put back with torch.tensor
    import struct
    n, m, d = U.shape[0], V.shape[0], U.shape[1]
    u = struct.unpack(f"{n * d}d", bytes(U.double().contiguous().untyped_storage())[:8 * n * d])
    v = struct.unpack(f"{m * d}d", bytes(V.double().contiguous().untyped_storage())[:8 * m * d])
    return torch.tensor([[math.sqrt(sum((u[i * d + k] - v[j * d + k]) ** 2 for k in range(d)))
                          for j in range(m)] for i in range(n)], dtype=U.dtype)


def cosine_normalizes_in_place(a, b, eps=1e-8):
    # divides its inputs by their norms in place
    a /= a.norm(dim=-1, keepdim=True).clamp_min(eps)
    b /= b.norm(dim=-1, keepdim=True).clamp_min(eps)
    return (a * b).sum(-1)


def cosine_then_zeroes_input(a, b, eps=1e-8):
    # a right answer that then zeroes its first argument
    out = (a * b).sum(-1) / (a.norm(dim=-1).clamp_min(eps) * b.norm(dim=-1).clamp_min(eps))
    a.zero_()
    return out


def unit_distances_then_zeroes_input(U, V):
    out = (2 - 2 * U @ V.T).clamp_min(0).sqrt()
    U.zero_()
    return out


def unit_distances_out_buffer(U, V):
    # the broadcast difference written into a buffer with out= (the read at 81f456b, L1: the
    # meter skipped every output that aliases an argument, in-place and out= writes included)
    buf = U.new_empty(0)
    torch.sub(U[:, None], V[None], out=buf)
    buf.pow_(2)
    return buf.sum(-1).sqrt()


def unit_distances_resized_buffer(U, V):
    # the same difference built in place in a buffer resized to [n, m, d]
    buf = U.new_empty(0)
    buf.resize_(U.shape[0], V.shape[0], U.shape[1])
    buf.copy_(U[:, None])
    buf.sub_(V[None])
    buf.mul_(buf)
    return buf.sum(-1).sqrt()


def unit_distances_products_out(U, V):
    # every product u_ik v_jk written with out=, then summed: [n, m, d] numbers, no matrix product
    buf = U.new_empty(0)
    torch.mul(U[:, None], V[None], out=buf)
    return (2 - 2 * buf.sum(-1)).clamp_min(0).sqrt()


WRONG_ANSWERS = {
    "ch09-cosine-from-dot": [cosine_product_clamped, cosine_eps_added, cosine_no_eps,
                             cosine_squared_norms, cosine_builtin, cosine_normalizes_in_place,
                             cosine_then_zeroes_input, cosine_squared_product_clamped,
                             cosine_squared_norms_clamped, cosine_eps_added_to_each_norm,
                             cosine_eps_under_the_root],
    "ch09-unit-distance": [unit_distances_squared, unit_distances_plus, unit_distances_no_clamp,
                           unit_distances_direct, unit_distances_row_loop,
                           unit_distances_coordinate_loop, unit_distances_math_dist,
                           unit_distances_python_sum, unit_distances_from_bytes,
                           unit_distances_then_zeroes_input, unit_distances_out_buffer,
                           unit_distances_resized_buffer, unit_distances_products_out],
    "ch09-mips-to-nn": [mips_keys_no_sqrt, mips_keys_normalized, mips_keys_own_norm,
                        mips_keys_mean_norm],
    "ch09-soft-lookup": [soft_lookup_times_temperature, soft_lookup_wrong_axis,
                         soft_lookup_no_softmax, soft_lookup_sqrt_d, soft_lookup_sdpa,
                         soft_lookup_exp_without_max, soft_lookup_global_max],
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
        "import torch\n\n"
        "def unit_distances(U, V):\n"
        "    return torch.cdist(U, V)\n",
        "from mathref import similarity as sim\n\n"
        "def unit_distances(U, V):\n"
        "    return sim.pairwise_euclidean_distance(U, V, method='expand')\n",
        "import torch.nn.functional as F\n\n"
        "def unit_distances(U, V):\n"
        "    return F.pairwise_distance(U[:, None, :], V[None, :, :], eps=0)\n",
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
        "from torch.nn.attention.flex_attention import flex_attention\n\n"
        "def soft_lookup(query, keys, values, temperature):\n"
        "    q = query if query.dim() == 2 else query[None]\n"
        "    out = flex_attention(q[None, None], keys[None, None], values[None, None],\n"
        "                         scale=1 / temperature)[0, 0]\n"
        "    return out if query.dim() == 2 else out[0]\n",
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
        "def unit_distances(U, V):\n"
        "    cos = torch.einsum('nd,md->nm', U, V)\n"
        "    return torch.sqrt(torch.clamp(2 - 2 * cos, min=0))\n",
        "def unit_distances(U, V):                    # the general expansion, norms included\n"
        "    sq = (U * U).sum(-1)[:, None] + (V * V).sum(-1)[None, :] - 2 * U @ V.T\n"
        "    return sq.clamp_min(0).sqrt()\n",
        "def unit_distances(U, V):                    # float64 inside: more accurate, also right\n"
        "    return (2 - 2 * U.double() @ V.double().T).clamp_min(0).sqrt()\n",
        "def unit_distances(U, V):\n"
        "    return (2 - 2 * U @ V.T).abs().sqrt()      # |x| of a tiny negative x: also tiny\n",
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

# U Vᵀ under its other names (the fourth read found torch.inner refused)
RIGHT_ANSWERS["ch09-unit-distance"] += [
    "import torch\n\n"
    "def unit_distances(U, V):\n"
    "    return (2 - 2 * torch.inner(U, V)).clamp_min(0).sqrt()\n",
    "import torch.nn.functional as F\n\n"
    "def unit_distances(U, V):\n"
    "    return (2 - 2 * F.linear(U, V)).clamp_min(0).sqrt()\n",
]
