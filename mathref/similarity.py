"""Similarity of vectors: dot product, cosine, Euclidean distance, and what high dimension
does to them. See chapter 9.

Vectors live along the last dimension (``dim=-1``) and batch dimensions broadcast, as in
``torch.nn.functional.cosine_similarity``. Every function follows the device and dtype of
its inputs.
"""
import math

import torch

from mathref._validation import check_int, check_number, resolve_device

__all__ = ["dot", "cosine_similarity", "euclidean_distance", "pairwise_dot",
           "pairwise_cosine_similarity", "pairwise_euclidean_distance", "random_unit_vectors",
           "cosine_density", "concentration_experiment", "max_inner_product_search",
           "soft_lookup"]


def _check_tensor(x, name):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():           # complex too: these formulas do not conjugate
        raise TypeError(f"{name} must be a real floating-point tensor, got dtype {x.dtype}")
    if x.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension (the vector), got a scalar")


def _check_pair(a, b, dim):
    _check_tensor(a, "a")
    _check_tensor(b, "b")
    for x, name in ((a, "a"), (b, "b")):
        if not -x.dim() <= dim < x.dim():
            raise ValueError(f"dim={dim} is out of range for {name} of shape {tuple(x.shape)}")
    if a.shape[dim] != b.shape[dim]:
        raise ValueError(f"a and b must have the same size along dim={dim}, got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}")
    try:
        torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        raise ValueError(f"a and b must broadcast, got shapes {tuple(a.shape)} and "
                         f"{tuple(b.shape)}") from None


def dot(a, b, dim=-1):
    """Dot product a·b = Σᵢ aᵢbᵢ = ‖a‖‖b‖cos θ along ``dim`` (batch dims broadcast).
    See chapter 9."""
    _check_pair(a, b, dim)
    return (a * b).sum(dim)


def cosine_similarity(a, b, dim=-1, eps=1e-8):
    """cos θ = a·b / (max(‖a‖, ε) · max(‖b‖, ε)), as ``F.cosine_similarity``. See chapter 9.

    Each norm is clamped by ε separately (not their product), so a zero vector gives 0, not
    NaN. Like PyTorch, each vector is divided by its clamped norm before the dot product.
    Rounding can still leave the result a few ulp outside [-1, 1] (the cosine of a vector with
    itself exceeds 1 in about a fifth of random cases): clamp before ``acos``.
    """
    _check_pair(a, b, dim)
    if eps < 0:
        raise ValueError(f"eps must be non-negative, got {eps}")
    a_unit = a / a.norm(dim=dim, keepdim=True).clamp_min(eps)
    b_unit = b / b.norm(dim=dim, keepdim=True).clamp_min(eps)
    return (a_unit * b_unit).sum(dim)


def euclidean_distance(a, b, dim=-1):
    """‖a − b‖ = √(Σᵢ (aᵢ − bᵢ)²) along ``dim``. For unit vectors ‖u − v‖² = 2 − 2 cos θ.
    See chapter 9."""
    _check_pair(a, b, dim)
    return (a - b).pow(2).sum(dim).sqrt()


def _check_matrices(A, B):
    _check_tensor(A, "A")
    _check_tensor(B, "B")
    if A.dim() < 2 or B.dim() < 2:
        raise ValueError(f"A and B must be [..., n, d] and [..., m, d], got shapes "
                         f"{tuple(A.shape)} and {tuple(B.shape)}")
    if A.shape[-1] != B.shape[-1]:
        raise ValueError(f"A and B must have the same vector size d (last dim), got shapes "
                         f"{tuple(A.shape)} and {tuple(B.shape)}")


def pairwise_dot(A, B):
    """All dot products S[i, j] = A[i]·B[j], that is S = A Bᵀ; A: [..., n, d], B: [..., m, d]
    give [..., n, m]. See chapter 9."""
    _check_matrices(A, B)
    return A @ B.transpose(-2, -1)


def pairwise_cosine_similarity(A, B, eps=1e-8):
    """All cosines C[i, j] = cos(A[i], B[j]): normalize rows (norms clamped by ε), then
    multiply, C = Â B̂ᵀ. See chapter 9."""
    _check_matrices(A, B)
    A_unit = A / A.norm(dim=-1, keepdim=True).clamp_min(eps)
    B_unit = B / B.norm(dim=-1, keepdim=True).clamp_min(eps)
    return A_unit @ B_unit.transpose(-2, -1)


def pairwise_euclidean_distance(A, B, method="direct"):
    """All distances D[i, j] = ‖A[i] − B[j]‖, like ``torch.cdist(A, B)``. See chapter 9.

    ``method="direct"`` forms every difference (memory n·m·d, exact); ``method="expand"``
    uses ‖a − b‖² = ‖a‖² + ‖b‖² − 2a·b, one matrix product (fast, but it cancels digits when
    a ≈ b, so the square is clamped at 0 before the root).
    """
    _check_matrices(A, B)
    if method == "direct":
        return (A.unsqueeze(-2) - B.unsqueeze(-3)).pow(2).sum(-1).sqrt()
    if method == "expand":
        squared = (A.pow(2).sum(-1, keepdim=True) + B.pow(2).sum(-1).unsqueeze(-2)
                   - 2 * A @ B.transpose(-2, -1))
        return squared.clamp_min(0).sqrt()
    raise ValueError(f"method must be 'direct' or 'expand', got {method!r}")


def random_unit_vectors(n, d, generator=None, dtype=torch.float32, device=None):
    """n vectors drawn uniformly on the unit sphere of ℝᵈ, shape [n, d]: Gaussian vectors
    divided by their norms (the Gaussian is rotation invariant). See chapter 9."""
    if any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in (n, d)):
        raise ValueError(f"n and d must be positive integers, got n={n!r}, d={d!r}")
    device = resolve_device(device)
    x = torch.randn(n, d, generator=generator, dtype=dtype)
    x = x / x.norm(dim=-1, keepdim=True)
    return x if device is None else x.to(device)


def cosine_density(t, d):
    """Density of the cosine between two independent uniform unit vectors in ℝᵈ (d ≥ 2):
    p(t) = Γ(d/2) / (√π Γ((d−1)/2)) · (1 − t²)^((d−3)/2) on (−1, 1). Mean 0, variance 1/d.
    See chapter 9."""
    if not isinstance(d, int) or d < 2:
        raise ValueError(f"d must be an integer ≥ 2, got {d!r}")
    t = torch.as_tensor(t, dtype=torch.float64)
    log_c = math.lgamma(d / 2) - 0.5 * math.log(math.pi) - math.lgamma((d - 1) / 2)
    inside = (t.abs() < 1)
    base = (1 - t.pow(2)).clamp_min(1e-300)
    return torch.where(inside, torch.exp(log_c + (d - 3) / 2 * torch.log(base)),
                       torch.zeros_like(t))


def concentration_experiment(dims, n, generator=None, dtype=torch.float64):
    """Measure concentration of measure for each dimension d in ``dims``. See chapter 9.

    For each d, draw n independent pairs of Gaussian vectors x, y ~ N(0, I_d) and measure
    - the cosines cos(x, y) (the same as between uniform unit vectors): mean 0 and
      E[cos²] = 1/d exactly, so std ≈ 1/√d;
    - the distances ‖x − y‖ (‖x − y‖²/2 is χ² with d degrees of freedom): mean ≈ √(2d)
      grows while the std tends to 1, so the *relative* spread std/mean ≈ 1/√(2d) and the
      relative contrast (max − min)/min both shrink as d grows.

    Returns a dict of float64 tensors indexed like ``dims``: ``dims``, ``cos_mean``,
    ``cos_std``, ``dist_mean``, ``dist_std``, ``relative_spread``, ``relative_contrast``.
    """
    dims = [check_int(f"dims[{i}]", d, min=1) for i, d in enumerate(dims)]
    if not dims:
        raise ValueError("dims must be a non-empty list of positive integers, got []")
    n = check_int("n", n, min=2)
    keys = ["cos_mean", "cos_std", "dist_mean", "dist_std", "relative_spread",
            "relative_contrast"]
    out = {k: [] for k in keys}
    for d in dims:
        x = torch.randn(n, d, generator=generator, dtype=dtype)
        y = torch.randn(n, d, generator=generator, dtype=dtype)
        cos = cosine_similarity(x, y)
        dist = euclidean_distance(x, y)
        out["cos_mean"].append(cos.mean())
        out["cos_std"].append(cos.std())
        out["dist_mean"].append(dist.mean())
        out["dist_std"].append(dist.std())
        out["relative_spread"].append(dist.std() / dist.mean())
        out["relative_contrast"].append((dist.max() - dist.min()) / dist.min())
    result = {k: torch.stack(v).to(torch.float64) for k, v in out.items()}
    result["dims"] = torch.tensor(dims)
    return result


def max_inner_product_search(queries, keys, k=1):
    """The k keys with the largest inner product q·kⱼ for each query (exact, brute force).
    See chapter 9.

    queries: [d] or [n, d]; keys: [m, d]. Returns (scores, indices), each [k] or [n, k],
    best first, as ``torch.topk`` of S = Q Kᵀ.
    """
    _check_tensor(queries, "queries")
    _check_tensor(keys, "keys")
    if keys.dim() != 2 or queries.dim() not in (1, 2) or queries.shape[-1] != keys.shape[-1]:
        raise ValueError(f"queries must be [d] or [n, d] and keys [m, d] with the same d, got "
                         f"shapes {tuple(queries.shape)} and {tuple(keys.shape)}")
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= keys.shape[0]:
        raise ValueError(f"k must be an integer between 1 and the number of keys "
                         f"{keys.shape[0]}, got {k!r}")
    scores = queries @ keys.T
    return torch.topk(scores, k, dim=-1)


def soft_lookup(query, keys, values, temperature=1.0):
    """The soft version of maximum inner product search: attention for one query.
    See chapter 9.

    w = softmax(q Kᵀ / τ), output = w V. As τ → 0 the weights become one-hot on the best key
    (hard lookup); as τ → ∞ they become uniform (the average of the values).
    query: [d] or [n, d]; keys: [m, d]; values: [m, d_v]. Returns (output, weights).
    """
    _check_tensor(query, "query")
    _check_tensor(keys, "keys")
    _check_tensor(values, "values")
    if keys.dim() != 2 or query.dim() not in (1, 2) or query.shape[-1] != keys.shape[-1]:
        raise ValueError(f"query must be [d] or [n, d] and keys [m, d] with the same d, got "
                         f"shapes {tuple(query.shape)} and {tuple(keys.shape)}")
    if values.dim() != 2 or values.shape[0] != keys.shape[0]:
        raise ValueError(f"values must be [m, d_v] with m = {keys.shape[0]} rows like keys, "
                         f"got shape {tuple(values.shape)}")
    check_number("temperature", temperature, min=0.0, min_open=True)
    scores = query @ keys.T / temperature
    weights = torch.softmax(scores, dim=-1)
    return weights @ values, weights
