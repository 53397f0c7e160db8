"""Positional information: sinusoidal encodings, RoPE and ALiBi. See chapter 12.

Conventions (fixed once for the course): dimension index j, pair index i = ⌊j/2⌋, base 10000.

    sinusoidal   PE[p, 2i] = sin(p / base^(2i/d)),   PE[p, 2i+1] = cos(p / base^(2i/d))
    RoPE         θ_i = base^(−2i/d_head); position m rotates pair i by the angle +m·θ_i with
                 R(θ) = [[cos θ, −sin θ], [sin θ, cos θ]]. The "half" layout pairs x_i with
                 x_(i + d/2) (GPT-NeoX, the Hugging Face Llama port), "adjacent" pairs x_(2i)
                 with x_(2i+1) (RoFormer, Meta's reference Llama).
    ALiBi        bias[h, i, j] = −m_h · (i − j) for keys j ≤ i, slopes m_h = 2^(−8h/H).
    T5 bias      a learned scalar per (head, bucket of the offset key − query).
    Extension    position interpolation m → m/s; NTK-aware base → base·s^(d/(d−2)).
"""
import math

import torch

from mathref._validation import (check_choice, check_int, check_number, check_tensor,
                                resolve_device)

__all__ = ["sinusoidal_positions", "rope_frequencies", "rope_cache", "apply_rope",
           "alibi_slopes", "alibi_bias", "position_interpolation", "ntk_scaled_base",
           "t5_relative_bucket"]


def sinusoidal_positions(T, d, base=10000.0, device=None, dtype=torch.float32):
    """The [T, d] table of sinusoidal encodings; sin and cos of pair i share the exponent 2i/d."""
    T, d = check_int("T", T, min=0), check_int("d", d, min=2)
    check_number("base", base, min=1.0, min_open=True)
    device = resolve_device(device)
    if d % 2:
        raise ValueError(f"d must be even for sinusoidal positions, got d={d}")
    p = torch.arange(T, device=device, dtype=torch.float64)[:, None]
    inv_freq = base ** (-torch.arange(0, d, 2, device=device, dtype=torch.float64) / d)
    pe = torch.zeros(T, d, device=device, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(p * inv_freq)
    pe[:, 1::2] = torch.cos(p * inv_freq)
    return pe.to(dtype)


def rope_frequencies(d_head, base=10000.0, device=None, dtype=torch.float64):
    """θ_i = base^(−2i/d_head) for i = 0 … d_head/2 − 1."""
    d_head = check_int("d_head", d_head, min=2)
    check_number("base", base, min=1.0, min_open=True)
    if d_head % 2:
        raise ValueError(f"RoPE needs an even head dimension, got d_head={d_head}")
    i = torch.arange(d_head // 2, device=device, dtype=torch.float64)
    return (base ** (-2 * i / d_head)).to(dtype)


def rope_cache(positions, d_head, base=10000.0, device=None, dtype=torch.float32):
    """cos(m·θ_i) and sin(m·θ_i) for each position m: two tensors of shape [T, d_head/2]."""
    positions = torch.as_tensor(positions, device=resolve_device(device))
    if positions.dim() > 1 or positions.is_complex() or positions.dtype == torch.bool:
        raise ValueError(f"positions must be a number or a 1-D tensor of positions, got "
                         f"{positions.dtype} of shape {tuple(positions.shape)}")
    if positions.dim() == 0:
        positions = positions[None]
    angles = positions.to(torch.float64)[:, None] * rope_frequencies(d_head, base,
                                                                     device=positions.device)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rope(x, positions=None, base=10000.0, layout="half", cache=None):
    """Rotate each pair of x's last dimension by +m·θ_i, m the position. x: [..., T, d_head].

    ``positions``: [T] integer positions (default 0 … T−1). ``cache``: a precomputed
    ``rope_cache`` (cos, sin), each [T, d_head/2]. Apply to queries and keys only, per head;
    then ⟨R_m q, R_n k⟩ = ⟨q, R_(n−m) k⟩ depends only on n − m.
    """
    check_tensor("x", x, kind="float")
    if x.dim() < 2:
        raise ValueError(f"x must be [..., T, d_head], got shape {tuple(x.shape)}")
    check_number("base", base, min=1.0, min_open=True)
    T, d = x.shape[-2], x.shape[-1]
    if d % 2:
        raise ValueError(f"RoPE needs an even head dimension, got d_head={d}")
    if layout not in ("half", "adjacent"):
        raise ValueError(f"layout must be 'half' or 'adjacent', got {layout!r}")
    if cache is None:
        positions = torch.arange(T, device=x.device) if positions is None else positions
        cache = rope_cache(positions, d, base, device=x.device, dtype=x.dtype)
    cos, sin = cache
    if cos.shape != (T, d // 2):
        raise ValueError(f"rope cache has shape {tuple(cos.shape)}, expected {(T, d // 2)}")
    if layout == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    r1 = x1 * cos - x2 * sin
    r2 = x1 * sin + x2 * cos
    if layout == "half":
        return torch.cat([r1, r2], dim=-1)
    return torch.stack([r1, r2], dim=-1).flatten(-2)


def alibi_slopes(n_heads):
    """ALiBi's head slopes: the geometric sequence 2^(−8/H), 2^(−16/H), … for H a power of two;
    otherwise the slopes of the nearest lower power of two, then every other one of the next."""
    def power_of_two(n):
        start = 2.0 ** (-8.0 / n)
        return [start ** (h + 1) for h in range(n)]

    n_heads = check_int("n_heads", n_heads, min=1)
    if math.log2(n_heads).is_integer():
        return torch.tensor(power_of_two(n_heads), dtype=torch.float64)
    lower = 2 ** math.floor(math.log2(n_heads))
    extra = power_of_two(2 * lower)[0::2][: n_heads - lower]
    return torch.tensor(power_of_two(lower) + extra, dtype=torch.float64)


def alibi_bias(n_heads, T, S=None, device=None, dtype=torch.float32):
    """[H, T, S] additive bias −m_h·(distance to the key), bottom-right aligned like the causal
    mask (query i sits at position i + S − T). Future keys get −∞ (ALiBi is causal)."""
    n_heads = check_int("n_heads", n_heads, min=1)
    T = check_int("T", T, min=0)
    S = T if S is None else check_int("S", S, min=T)
    device = resolve_device(device)
    q_pos = torch.arange(S - T, S, device=device)[:, None]
    k_pos = torch.arange(S, device=device)[None, :]
    distance = (q_pos - k_pos).to(torch.float64)
    slopes = alibi_slopes(n_heads).to(device)[:, None, None]
    bias = -slopes * distance
    bias = bias.masked_fill(distance < 0, float("-inf"))
    return bias.to(dtype)


def position_interpolation(positions, scale):
    """Position interpolation (Chen et al. 2023): m → m / s, with s = L_new / L_trained ≥ 1.

    Feeding these fractional positions to ``apply_rope`` keeps every angle m·θ_i / s inside the
    range seen in training: positions 0 … L_new − 1 land in [0, L_trained).
    """
    check_number("scale", scale, min=0.0, min_open=True)
    return torch.as_tensor(positions).to(torch.float64) / scale


def ntk_scaled_base(base, scale, d_head):
    """NTK-aware RoPE scaling: base' = base · s^(d_head/(d_head − 2)).

    With θ'_i = base'^(−2i/d_head) = θ_i · s^(−2i/(d_head − 2)), the fastest pair (i = 0) is
    unchanged and the slowest (i = d_head/2 − 1) is slowed by exactly s, like interpolation.
    """
    check_number("base", base, min=1.0, min_open=True)
    check_number("scale", scale, min=0.0, min_open=True)
    d_head = check_int("d_head", d_head)
    if d_head % 2 or d_head < 4:
        raise ValueError(f"NTK scaling needs an even head dimension ≥ 4, got d_head={d_head}")
    return base * scale ** (d_head / (d_head - 2))


def t5_relative_bucket(relative_position, bidirectional=True, num_buckets=32, max_distance=128):
    """T5's bucket for an offset r = key position − query position (an integer tensor).

    Each direction has n_b buckets (n_b = num_buckets/2 when bidirectional, num_buckets when
    causal), and the first half of them are exact: |r| < n_exact = n_b/2 gets bucket |r|; larger
    |r| get n_exact + ⌊log(|r|/n_exact) / log(max_distance/n_exact) · (n_b − n_exact)⌋, capped at
    n_b − 1, so buckets grow logarithmically and everything beyond max_distance shares one.
    Bidirectional: keys after the query use the upper half of the buckets. Causal: offsets
    r > 0 (future keys) fall in bucket 0 with r = 0.
    """
    r = torch.as_tensor(relative_position)
    if r.is_floating_point() or r.is_complex():
        raise TypeError(f"relative_position must be an integer tensor, got {r.dtype}")
    num_buckets = check_int("num_buckets", num_buckets, min=4 if bidirectional else 2)
    n_exact = (num_buckets // 2 if bidirectional else num_buckets) // 2
    max_distance = check_int("max_distance", max_distance, min=n_exact + 1)
    bucket = torch.zeros_like(r)
    if bidirectional:
        num_buckets //= 2
        bucket = bucket + (r > 0).long() * num_buckets
        n = r.abs()
    else:
        n = (-r).clamp(min=0)
    n_exact = num_buckets // 2
    ratio = torch.log(n.clamp(min=1).to(torch.float64) / n_exact) / math.log(max_distance / n_exact)
    large = n_exact + (ratio * (num_buckets - n_exact)).floor().long()
    large = large.clamp(max=num_buckets - 1)
    return bucket + torch.where(n < n_exact, n, large)
