"""mathref.similarity against PyTorch (F.cosine_similarity, torch.cdist, softmax, topk) and
closed forms, in float64 on every available device."""
import math

import pytest
import torch
import torch.nn.functional as F

from mathref import similarity as sim


def randn(*shape, seed=0, device="cpu"):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device)


def test_dot_matches_einsum_and_law_of_cosines(float64_device):
    a, b = randn(5, 7, seed=1, device=float64_device), randn(5, 7, seed=2, device=float64_device)
    torch.testing.assert_close(sim.dot(a, b), torch.einsum("nd,nd->n", a, b))
    # a·b = ‖a‖‖b‖cos θ with θ from F.cosine_similarity
    torch.testing.assert_close(sim.dot(a, b), a.norm(dim=-1) * b.norm(dim=-1)
                               * F.cosine_similarity(a, b, dim=-1))
    # broadcasting and another dim
    q = randn(7, seed=3, device=float64_device)
    torch.testing.assert_close(sim.dot(a, q), a @ q)
    torch.testing.assert_close(sim.dot(a.T, b.T, dim=0), torch.einsum("nd,nd->n", a, b))


@pytest.mark.parametrize("shape_a, shape_b, dim", [((4, 6), (4, 6), -1), ((3, 1, 5), (4, 5), -1),
                                                   ((6, 4), (6, 4), 0), ((2, 3, 8), (2, 3, 8), 1)])
def test_cosine_similarity_matches_pytorch(float64_device, shape_a, shape_b, dim):
    a, b = randn(*shape_a, seed=4, device=float64_device), randn(*shape_b, seed=5,
                                                                   device=float64_device)
    torch.testing.assert_close(sim.cosine_similarity(a, b, dim=dim),
                               F.cosine_similarity(a, b, dim=dim), rtol=1e-12, atol=1e-14)


def test_cosine_similarity_clamps_each_norm_like_pytorch(float64_device):
    d = float64_device
    zero, e1 = torch.zeros(3, dtype=torch.float64, device=d), torch.tensor([1.0, 0, 0], dtype=torch.float64, device=d)
    tiny = 1e-5 * e1  # ‖tiny‖² = 1e-10 < ε = 1e-8 < ‖tiny‖: clamping the product would differ
    cases = [(zero, e1), (zero, zero), (tiny, tiny), (tiny, e1), (1e-12 * e1, e1), (e1, -e1)]
    for a, b in cases:
        for eps in (1e-8, 1e-3):
            ours = sim.cosine_similarity(a, b, eps=eps)
            torch.testing.assert_close(ours, F.cosine_similarity(a, b, dim=-1, eps=eps),
                                       rtol=1e-12, atol=1e-15)
    assert sim.cosine_similarity(zero, e1).item() == 0.0
    assert sim.cosine_similarity(tiny, tiny).item() == pytest.approx(1.0, rel=1e-12)
    assert sim.cosine_similarity(1e-12 * e1, e1).item() == pytest.approx(1e-4, rel=1e-9)


def test_cosine_similarity_gradient_matches_pytorch(float64_device):
    a = randn(3, 5, seed=6, device=float64_device).requires_grad_(True)
    b = randn(3, 5, seed=7, device=float64_device).requires_grad_(True)
    w = randn(3, seed=8, device=float64_device)
    ga = torch.autograd.grad((sim.cosine_similarity(a, b) * w).sum(), (a, b))
    gb = torch.autograd.grad((F.cosine_similarity(a, b) * w).sum(), (a, b))
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, rtol=1e-10, atol=1e-12)
    assert torch.autograd.gradcheck(lambda a, b: sim.cosine_similarity(a, b), (a, b))


def test_euclidean_distance_and_unit_vector_identity(float64_device):
    a, b = randn(6, 9, seed=9, device=float64_device), randn(6, 9, seed=10, device=float64_device)
    torch.testing.assert_close(sim.euclidean_distance(a, b), torch.linalg.vector_norm(a - b, dim=-1))
    torch.testing.assert_close(sim.euclidean_distance(a, b), F.pairwise_distance(a, b, eps=0.0))
    u, v = F.normalize(a, dim=-1), F.normalize(b, dim=-1)
    # ‖u − v‖² = 2 − 2 cos θ, with cos θ from PyTorch
    torch.testing.assert_close(sim.euclidean_distance(u, v) ** 2,
                               2 - 2 * F.cosine_similarity(u, v, dim=-1), rtol=1e-12, atol=1e-13)


def test_pairwise_functions_match_pytorch(float64_device):
    A, B = randn(2, 7, 5, seed=11, device=float64_device), randn(2, 4, 5, seed=12, device=float64_device)
    torch.testing.assert_close(sim.pairwise_dot(A, B), torch.einsum("bnd,bmd->bnm", A, B))
    cos = F.cosine_similarity(A.unsqueeze(-2), B.unsqueeze(-3), dim=-1)
    torch.testing.assert_close(sim.pairwise_cosine_similarity(A, B), cos, rtol=1e-12, atol=1e-13)
    ref = torch.cdist(A, B, compute_mode="donot_use_mm_for_euclid_dist")
    torch.testing.assert_close(sim.pairwise_euclidean_distance(A, B), ref)
    torch.testing.assert_close(sim.pairwise_euclidean_distance(A, B, method="expand"), ref,
                               rtol=1e-10, atol=1e-10)
    # a point against itself: the direct form is exactly 0, the expanded one is clamped to ≥ 0
    assert (sim.pairwise_euclidean_distance(A, A).diagonal(dim1=-2, dim2=-1) == 0).all()
    assert (sim.pairwise_euclidean_distance(A, A, method="expand") >= 0).all()


def test_random_unit_vectors_are_unit_and_isotropic():
    gen = torch.Generator().manual_seed(13)
    U = sim.random_unit_vectors(20000, 3, generator=gen, dtype=torch.float64)
    assert U.shape == (20000, 3) and U.dtype == torch.float64
    torch.testing.assert_close(U.norm(dim=-1), torch.ones(20000, dtype=torch.float64))
    # uniform on the sphere: mean 0 and E[u uᵀ] = I/3 (tolerance ≈ 6 standard errors)
    assert U.mean(0).abs().max() < 6 / math.sqrt(3 * 20000)
    torch.testing.assert_close(U.T @ U / 20000, torch.eye(3, dtype=torch.float64) / 3,
                               atol=0.02, rtol=0)
    # Archimedes: on the sphere in ℝ³ each coordinate is uniform on [-1, 1]
    assert (U[:, 2] < 0.5).double().mean().item() == pytest.approx(0.75, abs=0.02)


def test_cosine_density_is_a_density_with_variance_one_over_d():
    for d in (2, 3, 5, 50, 768):
        t = torch.linspace(-1, 1, 200001, dtype=torch.float64)
        p = sim.cosine_density(t, d)
        dt = t[1] - t[0]
        if d > 2:  # d = 2 has integrable singularities at ±1
            assert torch.trapezoid(p, dx=dt).item() == pytest.approx(1.0, abs=1e-4)
            assert torch.trapezoid(t ** 2 * p, dx=dt).item() == pytest.approx(1 / d, rel=1e-4)
    # d = 3: uniform on [-1, 1] (Archimedes), density 1/2
    torch.testing.assert_close(sim.cosine_density(torch.tensor([-0.5, 0.0, 0.7]), 3),
                               torch.full((3,), 0.5, dtype=torch.float64))


def test_concentration_experiment_matches_closed_forms():
    gen = torch.Generator().manual_seed(14)
    dims, n = [2, 16, 256], 20000
    out = sim.concentration_experiment(dims, n, gen)
    assert out["dims"].tolist() == dims
    for i, d in enumerate(dims):
        se = 1 / math.sqrt(d * n)  # standard error of the mean cosine
        assert abs(out["cos_mean"][i].item()) < 5 * se
        assert out["cos_std"][i].item() == pytest.approx(1 / math.sqrt(d), rel=0.03)
        # ‖x − y‖²/2 ~ χ²_d  ⇒  E‖x − y‖ = 2 Γ((d+1)/2) / Γ(d/2)
        mean = 2 * math.exp(math.lgamma((d + 1) / 2) - math.lgamma(d / 2))
        std = math.sqrt(2 * d - mean ** 2)
        assert out["dist_mean"][i].item() == pytest.approx(mean, rel=0.01)
        assert out["dist_std"][i].item() == pytest.approx(std, rel=0.03)
        assert out["relative_spread"][i].item() == pytest.approx(std / mean, rel=0.03)
    assert (out["relative_contrast"].diff() < 0).all()


def test_max_inner_product_search_is_brute_force_argmax(float64_device):
    Q, K = randn(6, 4, seed=15, device=float64_device), randn(30, 4, seed=16, device=float64_device)
    scores, idx = sim.max_inner_product_search(Q, K, k=3)
    for i in range(6):
        s = [float(Q[i] @ K[j]) for j in range(30)]
        order = sorted(range(30), key=lambda j: -s[j])[:3]
        assert idx[i].tolist() == order
        torch.testing.assert_close(scores[i].cpu(), torch.tensor([s[j] for j in order], dtype=torch.float64))
    s1, i1 = sim.max_inner_product_search(Q[0], K)
    assert i1.item() == idx[0, 0].item()


def test_soft_lookup_is_softmax_attention_and_tends_to_hard_lookup(float64_device):
    q, K, V = (randn(4, seed=17, device=float64_device), randn(8, 4, seed=18, device=float64_device),
               randn(8, 3, seed=19, device=float64_device))
    out, w = sim.soft_lookup(q, K, V, temperature=0.7)
    ref_w = F.softmax((K @ q) / 0.7, dim=-1)
    torch.testing.assert_close(w, ref_w)
    torch.testing.assert_close(out, ref_w @ V)
    # batch of queries equals one-by-one, and equals SDPA with scale 1/τ
    Q = randn(5, 4, seed=20, device=float64_device)
    outs, _ = sim.soft_lookup(Q, K, V, temperature=2.0)
    torch.testing.assert_close(outs, F.scaled_dot_product_attention(Q, K, V, scale=0.5))
    # τ → 0: the value of the best key; τ → ∞: the mean of the values
    best = (K @ q).argmax()
    torch.testing.assert_close(sim.soft_lookup(q, K, V, 1e-4)[0], V[best])
    torch.testing.assert_close(sim.soft_lookup(q, K, V, 1e8)[0], V.mean(0), rtol=1e-6, atol=1e-7)


def test_bad_inputs_raise_clear_errors():
    a = torch.randn(3, 4)
    with pytest.raises(ValueError, match="same size"):
        sim.cosine_similarity(a, torch.randn(3, 5))
    with pytest.raises(TypeError, match="floating-point"):
        sim.dot(torch.arange(4), torch.arange(4))
    z = torch.tensor([1 + 1j, 2 - 1j])                  # no conjugation in these formulas: refused
    with pytest.raises(TypeError, match="real floating-point"):
        sim.cosine_similarity(z, z)
    with pytest.raises(TypeError, match="torch.Tensor"):
        sim.euclidean_distance([1.0, 2.0], a)
    with pytest.raises(ValueError, match="out of range"):
        sim.dot(a, a, dim=2)
    with pytest.raises(ValueError, match="eps"):
        sim.cosine_similarity(a, a, eps=-1.0)
    with pytest.raises(ValueError, match="same vector size"):
        sim.pairwise_dot(a, torch.randn(2, 5))
    with pytest.raises(ValueError, match="method"):
        sim.pairwise_euclidean_distance(a, a, method="fast")
    with pytest.raises(ValueError, match="k must be"):
        sim.max_inner_product_search(a, a, k=4)
    with pytest.raises(ValueError, match="temperature"):
        sim.soft_lookup(a[0], a, a, temperature=0.0)
    with pytest.raises(ValueError, match="values"):
        sim.soft_lookup(a[0], a, torch.randn(2, 4))
    with pytest.raises(ValueError, match="positive integers"):
        sim.random_unit_vectors(0, 3)
    with pytest.raises(ValueError, match="dims"):
        sim.concentration_experiment([], 10)


def test_soft_lookup_plot_and_its_explorer_draw_the_softmax_weights():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from mathref import viz, widgets

    scores = torch.tensor([1.0, 2.5, 0.3, 2.0])
    fig = viz.soft_lookup_grid(scores, [0.1, 1.0, 10.0])
    assert len(fig.axes) == 3
    heights = [p.get_height() for p in fig.axes[1].patches]
    np.testing.assert_allclose(heights, F.softmax(scores.double(), -1).numpy(), rtol=1e-12)
    plt.close("all")
    explorer = widgets.temperature_explorer(scores, temperature=1.0)
    plt.close("all")
    explorer.children[0].value = 0.5  # τ = 10^0.5
    heights = [p.get_height() for p in plt.gcf().axes[0].patches]
    np.testing.assert_allclose(heights, F.softmax(scores.double() / 10 ** 0.5, -1).numpy(),
                               rtol=1e-12)
    plt.close("all")


def test_cosine_can_round_past_one_so_angles_need_a_clamp():
    """The docstring's warning, against F.cosine_similarity: both exceed 1 for some vectors
    by a few ulp only, and acos of the clamped value is always finite."""
    g = torch.Generator().manual_seed(0)
    for dtype, ulp in [(torch.float32, 2.0 ** -23), (torch.float64, 2.0 ** -52)]:
        X = torch.randn(5000, 64, generator=g, dtype=dtype)
        ours = sim.cosine_similarity(X, X)
        ref = F.cosine_similarity(X, X, dim=-1)
        torch.testing.assert_close(ours, ref, rtol=0, atol=4 * ulp)
        assert (ours - 1).abs().max() <= 8 * ulp
        assert torch.acos(ours.clamp(-1, 1)).isfinite().all()
