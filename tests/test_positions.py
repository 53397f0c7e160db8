"""mathref.positions against direct loops, complex multiplication and closed forms."""
import math

import pytest
import torch

from mathref import positions as P


def test_sinusoidal_matches_a_direct_loop(device):
    T, d = 7, 6
    pe = P.sinusoidal_positions(T, d, device=device, dtype=torch.float64)
    for p in range(T):
        for j in range(d):
            i = j // 2
            angle = p / 10000 ** (2 * i / d)
            expected = math.sin(angle) if j % 2 == 0 else math.cos(angle)
            assert pe[p, j].item() == pytest.approx(expected, abs=1e-12)
    with pytest.raises(ValueError, match="even"):
        P.sinusoidal_positions(3, 5)


def test_sinusoidal_dot_products_depend_only_on_offset():
    pe = P.sinusoidal_positions(64, 16, dtype=torch.float64)
    gram = pe @ pe.T
    for k in (1, 5, 13):
        diag = torch.diagonal(gram, offset=k)
        torch.testing.assert_close(diag, diag[0].expand_as(diag), atol=1e-10, rtol=0)


def test_rope_matches_complex_multiplication(float64_device):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 5, 8, generator=g, dtype=torch.float64).to(float64_device)
    rotated = P.apply_rope(x)
    theta = 10000 ** (-torch.arange(4, dtype=torch.float64) * 2 / 8)
    m = torch.arange(5, dtype=torch.float64)[:, None]
    z = torch.complex(x[..., :4], x[..., 4:]) * torch.polar(torch.ones(5, 4, dtype=torch.float64),
                                                           m * theta).to(float64_device)
    torch.testing.assert_close(rotated, torch.cat([z.real, z.imag], dim=-1), atol=1e-12, rtol=0)
    # adjacent layout: pairs (x_2i, x_2i+1) as complex numbers (the RoFormer form)
    adj = P.apply_rope(x, layout="adjacent")
    za = torch.view_as_complex(x.reshape(2, 3, 5, 4, 2).contiguous())
    za = za * torch.polar(torch.ones(5, 4, dtype=torch.float64), m * theta).to(float64_device)
    torch.testing.assert_close(adj, torch.view_as_real(za).flatten(-2), atol=1e-12, rtol=0)


def test_rope_preserves_norms_and_dot_products_depend_on_offset(float64_device):
    g = torch.Generator().manual_seed(1)
    q = torch.randn(16, generator=g, dtype=torch.float64).to(float64_device)
    k = torch.randn(16, generator=g, dtype=torch.float64).to(float64_device)

    def at(v, m):
        return P.apply_rope(v[None, :], positions=torch.tensor([m], device=float64_device))[0]

    torch.testing.assert_close(at(q, 11).norm(), q.norm())
    for m, n in [(0, 3), (5, 8), (20, 23), (100, 103)]:
        torch.testing.assert_close(at(q, m) @ at(k, n), at(q, 0) @ at(k, 3), atol=1e-10, rtol=0)
    # ⟨R_m q, R_n k⟩ = ⟨q, R_(n−m) k⟩
    torch.testing.assert_close(at(q, 4) @ at(k, 9), q @ at(k, 5), atol=1e-10, rtol=0)


def test_rope_rotates_by_plus_angle_with_the_stated_matrix():
    x = torch.tensor([[1.0, 0.0]], dtype=torch.float64)  # d_head = 2: θ_0 = 1
    out = P.apply_rope(x, positions=torch.tensor([1]))
    torch.testing.assert_close(out[0], torch.tensor([math.cos(1.0), math.sin(1.0)],
                                                    dtype=torch.float64))


def test_rope_cache_and_bad_input():
    x = torch.randn(4, 6, dtype=torch.float64)
    cache = P.rope_cache(torch.arange(4), 6, dtype=torch.float64)
    torch.testing.assert_close(P.apply_rope(x, cache=cache), P.apply_rope(x))
    with pytest.raises(ValueError, match="even"):
        P.apply_rope(torch.randn(4, 5))
    with pytest.raises(ValueError, match="layout"):
        P.apply_rope(x, layout="interleaved")


def test_alibi_slopes_and_bias():
    torch.testing.assert_close(P.alibi_slopes(8), torch.tensor([2.0 ** -(k + 1) for k in range(8)],
                                                               dtype=torch.float64))
    assert len(P.alibi_slopes(6)) == 6
    bias = P.alibi_bias(2, 3, dtype=torch.float64)
    slope = 2.0 ** -4
    assert bias[0].tolist() == [[0.0, -math.inf, -math.inf], [-slope, 0.0, -math.inf],
                                [-2 * slope, -slope, 0.0]]
    decode = P.alibi_bias(2, 1, 4, dtype=torch.float64)
    assert decode[0, 0].tolist() == [-3 * slope, -2 * slope, -slope, 0.0]
