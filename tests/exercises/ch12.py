"""Typical wrong answers to chapter 12's exercises: each must fail its checker."""
import math

import torch


def pe_cos_own_exponent(p, j, d):
    i = j // 2
    if j % 2 == 0:
        return math.sin(p / 10000 ** (2 * i / d))
    return math.cos(p / 10000 ** (2 * (i + 1) / d))


def pe_exponent_j(p, j, d):
    angle = p / 10000 ** (j / d)
    return math.sin(angle) if j % 2 == 0 else math.cos(angle)


def pe_alternate_over_positions(p, j, d):
    angle = p / 10000 ** (2 * (j // 2) / d)
    return math.sin(angle) if p % 2 == 0 else math.cos(angle)


def to_half_whole_matrix(W, n_heads):
    d = W.shape[0]                                   # permutes across heads
    return W[torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])]


def to_half_inverse(W, n_heads):
    d_k = W.shape[0] // n_heads                      # the inverse permutation (half → adjacent)
    within = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)]).argsort()
    return W[torch.cat([h * d_k + within for h in range(n_heads)])]


def to_half_columns(W, n_heads):
    d_in = W.shape[1]                                # permutes the input dimension instead
    return W[:, torch.cat([torch.arange(0, d_in, 2), torch.arange(1, d_in, 2)])]


def _rope(x, positions, base=10000.0, sign=1.0, exponent=2.0, layout="half"):
    d = x.shape[-1]
    theta = base ** (-exponent * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = sign * positions.to(torch.float64)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    if layout == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).flatten(-2)


def rope_adjacent_pairs(x, positions, base=10000.0):
    return _rope(x, positions, base, layout="adjacent")


def rope_minus_theta(x, positions, base=10000.0):
    return _rope(x, positions, base, sign=-1.0)


def rope_exponent_i_over_d(x, positions, base=10000.0):
    return _rope(x, positions, base, exponent=1.0)


def rope_ignores_positions(x, positions, base=10000.0):
    return _rope(x, torch.arange(x.shape[-2]), base)


def rope_calls_mathref(x, positions, base=10000.0):
    from mathref.positions import apply_rope
    return apply_rope(x, positions, base)


def alibi_positive(slope, T):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (slope * (i - j)).double().masked_fill(j > i, -math.inf)


def alibi_no_mask(slope, T):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (-slope * (i - j).abs()).double()


def alibi_transposed(slope, T):
    return alibi_positive(-slope, T).T.contiguous()


def pe_library(p, j, d):
    import torch
    from mathref.positions import sinusoidal_positions
    return sinusoidal_positions(p + 1, d, dtype=torch.float64)[p, j].item()


def pe_float32(p, j, d):
    # the right formula in float32: about 1e-4 off at p = 999
    angle = torch.tensor(p, dtype=torch.float32) / 10000 ** (2 * (j // 2) / d)
    return angle.sin() if j % 2 == 0 else angle.cos()


def alibi_bfloat16(slope, T):
    # the right matrix in bfloat16 (about 3 digits): exact for slopes 2^-k, not for 2^(-k-1/2)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (-slope * (i - j)).bfloat16().masked_fill(j > i, -math.inf)


def alibi_float16(slope, T):
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (-slope * (i - j)).half().masked_fill(j > i, -math.inf)


def alibi_library(slope, T):
    import mathref.positions as P
    return P.alibi_bias(1, T, dtype=torch.float64)[0] * (slope / P.alibi_slopes(1)[0].item())


def to_half_by_probing(W, n_heads):
    # tries candidate orders against mathref's RoPE (section 12.6's identity): refused
    from mathref.positions import apply_rope
    d_k = W.shape[0] // n_heads
    x = torch.randn(1, 5, d_k, dtype=torch.float64)
    for order in (torch.cat([torch.arange(1, d_k, 2), torch.arange(0, d_k, 2)]),
                  torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])):
        if torch.allclose(apply_rope(x[..., order]), apply_rope(x, layout="adjacent")[..., order]):
            return W[torch.cat([h * d_k + order for h in range(n_heads)])]
    return W


def rope_float32_angles(x, positions, base=10000.0):
    # right rotation, angles in float32 (torch.arange(d // 2) / d is float32)
    d = x.shape[-1]
    theta = base ** (-2 * torch.arange(d // 2) / d)
    angle = positions[:, None] * theta
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * angle.cos() - x2 * angle.sin(), x1 * angle.sin() + x2 * angle.cos()], -1)


WRONG_ANSWERS = {
    "ch12-sinusoidal-entry": [pe_cos_own_exponent, pe_exponent_j, pe_alternate_over_positions,
                              pe_library, pe_float32],
    "ch12-adjacent-to-half": [to_half_whole_matrix, to_half_inverse, to_half_columns,
                              to_half_by_probing],
    "ch12-rope-half": [rope_adjacent_pairs, rope_minus_theta, rope_exponent_i_over_d,
                       rope_ignores_positions, rope_calls_mathref, rope_float32_angles],
    "ch12-alibi-matrix": [alibi_positive, alibi_no_mask, alibi_transposed, alibi_library,
                          alibi_bfloat16, alibi_float16],
}


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch12-sinusoidal-entry": [
        "import torch\n"
        "from mathref.positions import sinusoidal_positions as table\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    return table(p + 1, d, dtype=torch.float64)[p, j].item()\n",
        "import torch\n"
        "import mathref.positions as P\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    return float(P.sinusoidal_positions(1000, d, dtype=torch.float64)[p, j])\n",
        # RoPE's tables hold the same numbers: cos/sin of p·θ_i, θ_i = 10000^(−2i/d)
        "import torch\n"
        "import mathref.positions as P\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    cos, sin = P.rope_cache(p, d, dtype=torch.float64)\n"
        "    return float((sin if j % 2 == 0 else cos)[0, j // 2])\n",
        "import torch\n"
        "from mathref.positions import apply_rope\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    e = torch.zeros(1, d, dtype=torch.float64)\n"
        "    e[0, j // 2] = 1.0                        # x1 = 1, x2 = 0: r2 = sin, r1 = cos\n"
        "    r = apply_rope(e, positions=torch.tensor([p]))[0]\n"
        "    return float(r[d // 2 + j // 2] if j % 2 == 0 else r[j // 2])\n",
        "import math\n"
        "from mathref.positions import rope_frequencies\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    angle = p * float(rope_frequencies(d)[j // 2])\n"
        "    return math.sin(angle) if j % 2 == 0 else math.cos(angle)\n",
    ],
    "ch12-alibi-matrix": [
        "import torch\n"
        "import mathref.positions as P\n\n"
        "def alibi_matrix(slope, T):\n"
        "    # one head's slope is 2^-8: rescale it to the slope asked for\n"
        "    return P.alibi_bias(1, T, dtype=torch.float64)[0] * (slope / 2 ** -8)\n",
        "import torch\n"
        "from mathref.positions import alibi_bias\n\n"
        "def alibi_matrix(slope, T):\n"
        "    distance = -alibi_bias(1, T, dtype=torch.float64)[0] / 2 ** -8\n"
        "    return -slope * distance\n",
        # PyTorch's ready-made causal mask (refused as in ch11-causal-mask)
        "import torch\n\n"
        "def alibi_matrix(slope, T):\n"
        "    pos = torch.arange(T, dtype=torch.float64)\n"
        "    mask = torch.nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)\n"
        "    return -slope * (pos[:, None] - pos[None, :]) + mask\n",
    ],
    # no library function permutes the rows: the shortcut is probing candidate orders with
    # mathref's RoPE, which section 12.6's identity suggests
    "ch12-adjacent-to-half": [
        "import torch\n"
        "from mathref.positions import apply_rope\n\n"
        "def adjacent_to_half_weights(W, n_heads):\n"
        "    d_k = W.shape[0] // n_heads\n"
        "    x = torch.randn(1, 5, d_k, dtype=torch.float64)\n"
        "    for order in (torch.arange(d_k).flip(0),\n"
        "                  torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])):\n"
        "        if torch.allclose(apply_rope(x[..., order]),\n"
        "                          apply_rope(x, layout='adjacent')[..., order]):\n"
        "            break\n"
        "    return W[torch.cat([h * d_k + order for h in range(n_heads)])]\n",
    ],
    "ch12-rope-half": [
        "from mathref.positions import apply_rope as rotate\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    return rotate(x, positions=positions, base=base)\n",
        "import mathref.positions as P\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    cos, sin = P.rope_cache(x.shape[-1], int(positions.max()) + 1, base=base)\n"
        "    return P.apply_rope(x, positions=positions, base=base)\n",
        "import torch\n"
        "import mathref.positions as P\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    cos, sin = P.rope_cache(positions, x.shape[-1], base, dtype=x.dtype)\n"
        "    h = x.shape[-1] // 2\n"
        "    x1, x2 = x[..., :h], x[..., h:]\n"
        "    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)\n",
        # chapter 12's sinusoidal table interleaves sin(m·θ_i) and cos(m·θ_i): RoPE's angles
        "import torch\n"
        "import mathref.positions as P\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    d = x.shape[-1]\n"
        "    table = P.sinusoidal_positions(int(positions.max()) + 1, d, base, dtype=torch.float64)[positions]\n"
        "    sin, cos = table[:, 0::2].to(x.dtype), table[:, 1::2].to(x.dtype)\n"
        "    x1, x2 = x[..., : d // 2], x[..., d // 2:]\n"
        "    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)\n",
    ],
}

# Right answers in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch12-sinusoidal-entry": [
        "import math\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    angle = p * math.exp(-math.log(10000.0) * (j - j % 2) / d)\n"
        "    return math.cos(angle) if j % 2 else math.sin(angle)\n",
        "import torch\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    angle = torch.tensor(p / 10000 ** (2 * (j // 2) / d), dtype=torch.float64)\n"
        "    return (angle.sin() if j % 2 == 0 else angle.cos()).item()\n",
    ],
    "ch12-alibi-matrix": [
        "import torch\n\n"
        "def alibi_matrix(slope, T):                 # float32, the default dtype\n"
        "    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]\n"
        "    return torch.where(j <= i, -slope * (i - j).float(), float('-inf'))\n",
        "import torch\n\n"
        "def alibi_matrix(slope, T):\n"
        "    pos = torch.arange(T, dtype=torch.float64)\n"
        "    bias = -slope * (pos[:, None] - pos[None, :])\n"
        "    return bias + torch.full((T, T), float('-inf'), dtype=torch.float64).triu(1)\n",
        # all in float32, the slope rounded to float32 first (2^(-k-1/2) is not exact there)
        "import torch\n\n"
        "def alibi_matrix(slope, T):\n"
        "    s = torch.tensor(slope, dtype=torch.float32)\n"
        "    d = torch.arange(T, dtype=torch.float32)\n"
        "    bias = -s * (d[:, None] - d[None, :])\n"
        "    return bias.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float('-inf'))\n",
    ],
    "ch12-adjacent-to-half": [
        # the Meta → Hugging Face conversion of Llama's W_Q and W_K
        "def adjacent_to_half_weights(W, n_heads):\n"
        "    out, d_in = W.shape\n"
        "    return W.view(n_heads, out // n_heads // 2, 2, d_in).transpose(1, 2).reshape(out, d_in)\n",
    ],
    "ch12-rope-half": [
        # pairs as complex numbers z = x_i + i·x_(i+d/2), times e^(i·m·θ_i)
        "import torch\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    d = x.shape[-1]\n"
        "    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)\n"
        "    angle = positions.double()[:, None] * theta\n"
        "    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2:].double())\n"
        "    z = z * torch.polar(torch.ones_like(angle), angle)\n"
        "    return torch.cat([z.real, z.imag], dim=-1).to(x.dtype)\n",
        # the same, the parts taken by torch.real and torch.imag (chapter 14's delta read, N-M1:
        # torch.imag was refused, the allowance for complex numbers lacking it)
        "import torch\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    d = x.shape[-1]\n"
        "    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)\n"
        "    angle = positions.double()[:, None] * theta\n"
        "    z = torch.view_as_complex(torch.stack([x[..., : d // 2].double(),\n"
        "                                           x[..., d // 2:].double()], -1).contiguous())\n"
        "    z = z * torch.exp(1j * angle)\n"
        "    return torch.cat([torch.real(z), torch.imag(z)], dim=-1).to(x.dtype)\n",
        # rotate_half, as in the Hugging Face Llama code, with angles in x's dtype
        "import torch\n"
        "import mathref.positions as P\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    d = x.shape[-1]\n"
        "    theta = P.rope_frequencies(d, base).to(x.dtype)\n"
        "    angle = positions.to(x.dtype)[:, None] * theta\n"
        "    cos, sin = torch.cat([angle.cos()] * 2, -1), torch.cat([angle.sin()] * 2, -1)\n"
        "    rotated = torch.cat([-x[..., d // 2:], x[..., : d // 2]], dim=-1)\n"
        "    return x * cos + rotated * sin\n",
    ],
}
