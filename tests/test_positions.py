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


def test_position_interpolation_keeps_angles_in_the_trained_range(float64_device):
    trained, target, d = 16, 64, 8
    scale = target / trained
    pos = P.position_interpolation(torch.arange(target), scale).to(float64_device)
    assert pos.max().item() < trained
    # against complex multiplication with the angles m·θ_i / s, written out
    g = torch.Generator().manual_seed(2)
    x = torch.randn(target, d, generator=g, dtype=torch.float64).to(float64_device)
    theta = torch.tensor([10000 ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64)
    angles = torch.tensor([[m / scale * t for t in theta.tolist()] for m in range(target)],
                          dtype=torch.float64).to(float64_device)
    z = torch.complex(x[:, : d // 2], x[:, d // 2:]) * torch.polar(torch.ones_like(angles), angles)
    torch.testing.assert_close(P.apply_rope(x, positions=pos), torch.cat([z.real, z.imag], -1),
                               atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="scale"):
        P.position_interpolation(torch.arange(3), 0.0)


def test_ntk_scaled_base_keeps_the_fastest_pair_and_slows_the_slowest_by_s():
    for d, s in [(8, 2.0), (64, 4.0), (128, 8.0)]:
        new = P.rope_frequencies(d, P.ntk_scaled_base(10000.0, s, d))
        old = P.rope_frequencies(d)
        i = torch.arange(d // 2, dtype=torch.float64)
        torch.testing.assert_close(new, old * s ** (-2 * i / (d - 2)), atol=0, rtol=1e-12)
        assert new[0].item() == pytest.approx(1.0)
        assert new[-1].item() == pytest.approx(old[-1].item() / s, rel=1e-12)
    with pytest.raises(ValueError, match="even"):
        P.ntk_scaled_base(10000.0, 2.0, 7)


def _t5_bucket_loop(r, bidirectional, num_buckets, max_distance):
    """T5's bucketing for one offset, written as plain Python arithmetic."""
    out = 0
    if bidirectional:
        num_buckets //= 2
        if r > 0:
            out += num_buckets
        n = abs(r)
    else:
        n = max(-r, 0)
    exact = num_buckets // 2
    if n < exact:
        return out + n
    v = exact + int(math.log(n / exact) / math.log(max_distance / exact) * (num_buckets - exact))
    return out + min(v, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_relative_bucket_matches_a_direct_loop(device, bidirectional):
    r = torch.arange(-300, 301, device=device)
    got = P.t5_relative_bucket(r, bidirectional=bidirectional, num_buckets=32, max_distance=128)
    want = [_t5_bucket_loop(v, bidirectional, 32, 128) for v in range(-300, 301)]
    assert got.cpu().tolist() == want
    assert got.min().item() >= 0 and got.max().item() == 31
    # offsets 0 … 7 (bidirectional) or 0 … 15 (causal) each get a bucket of their own
    exact = 8 if bidirectional else 16
    assert got[300 - torch.arange(exact)].cpu().tolist() == list(range(exact))
    with pytest.raises(TypeError, match="integer"):
        P.t5_relative_bucket(torch.tensor([1.5]))
