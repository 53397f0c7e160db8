"""mathref.losses against PyTorch's own functions, autograd and closed forms, in float64."""
import math

import pytest
import torch
import torch.nn.functional as F

from mathref import losses


def randn(*shape, device, seed=0, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (scale * torch.randn(*shape, generator=gen, dtype=torch.float64)).to(device)


def distribution(*shape, device, seed=0):
    gen = torch.Generator().manual_seed(seed)
    r = torch.rand(*shape, generator=gen, dtype=torch.float64) + 0.05
    return (r / r.sum(-1, keepdim=True)).to(device)


@pytest.mark.parametrize("dim", [-1, 0, 1])
@pytest.mark.parametrize("temperature", [1.0, 0.3, 4.0])
def test_softmax_matches_torch(float64_device, dim, temperature):
    x = randn(4, 5, 6, device=float64_device, scale=3.0)
    torch.testing.assert_close(losses.softmax(x, dim=dim, temperature=temperature),
                               F.softmax(x / temperature, dim=dim), rtol=1e-12, atol=1e-14)


def test_softmax_huge_logits_stay_finite(float64_device):
    x = torch.tensor([[1000.0, 999.0, -1000.0]], dtype=torch.float32, device=float64_device)
    p = losses.softmax(x)
    assert torch.isfinite(p).all()
    torch.testing.assert_close(p, torch.softmax(x, -1))
    torch.testing.assert_close(losses.log_softmax(x), F.log_softmax(x, -1))


def test_softmax_shift_invariance_and_limits(float64_device):
    x = randn(3, 7, device=float64_device)
    torch.testing.assert_close(losses.softmax(x + 123.0), losses.softmax(x), rtol=1e-12, atol=1e-14)
    cold = losses.softmax(x, temperature=1e-3)
    torch.testing.assert_close(cold, F.one_hot(x.argmax(-1), 7).to(x.dtype), rtol=0, atol=1e-12)
    hot = losses.softmax(x, temperature=1e6)
    torch.testing.assert_close(hot, torch.full_like(x, 1 / 7), rtol=0, atol=1e-5)


@pytest.mark.parametrize("dim", [-1, 0])
def test_log_softmax_and_logsumexp_match_torch(float64_device, dim):
    x = randn(5, 9, device=float64_device, scale=30.0)
    torch.testing.assert_close(losses.log_softmax(x, dim=dim), F.log_softmax(x, dim=dim),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(losses.logsumexp(x, dim=dim), torch.logsumexp(x, dim=dim),
                               rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(losses.logsumexp(x, dim=dim, keepdim=True),
                               torch.logsumexp(x, dim=dim, keepdim=True), rtol=1e-12, atol=1e-12)


def test_logsumexp_extremes(float64_device):
    x = torch.tensor([[1e308, 1e308], [-1e308, -1e308], [-math.inf, -math.inf]],
                     dtype=torch.float64, device=float64_device)
    torch.testing.assert_close(losses.logsumexp(x), torch.logsumexp(x, -1))


def test_logsumexp_gradient_is_softmax(float64_device):
    x = randn(4, 6, device=float64_device, scale=5.0).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda t: losses.logsumexp(t), (x,))
    losses.logsumexp(x).sum().backward()
    torch.testing.assert_close(x.grad, F.softmax(x.detach(), -1), rtol=1e-12, atol=1e-14)


def test_softmax_jacobian_matches_autograd(float64_device):
    x = randn(3, 5, device=float64_device, scale=2.0)
    J = losses.softmax_jacobian(x)
    assert J.shape == (3, 5, 5)
    for n in range(3):
        auto = torch.autograd.functional.jacobian(lambda z: F.softmax(z, -1), x[n])
        torch.testing.assert_close(J[n], auto, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(J.sum(-1), torch.zeros(3, 5, dtype=x.dtype, device=x.device),
                               rtol=0, atol=1e-14)


def integer_targets(n, v, device, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, v, (n,), generator=gen).to(device)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.1, 0.5])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_torch(float64_device, label_smoothing, reduction):
    logits = randn(12, 7, device=float64_device, scale=3.0)
    targets = integer_targets(12, 7, float64_device)
    ours = losses.cross_entropy(logits, targets, label_smoothing=label_smoothing,
                                reduction=reduction)
    ref = F.cross_entropy(logits, targets, label_smoothing=label_smoothing, reduction=reduction)
    torch.testing.assert_close(ours, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("label_smoothing", [0.0, 0.2])
def test_cross_entropy_ignore_index_matches_torch(float64_device, label_smoothing):
    logits = randn(10, 6, device=float64_device, scale=2.0)
    targets = integer_targets(10, 6, float64_device)
    targets[[1, 4, 5]] = -100
    for kwargs in ({}, {"ignore_index": -100}):
        torch.testing.assert_close(
            losses.cross_entropy(logits, targets, label_smoothing=label_smoothing, **kwargs),
            F.cross_entropy(logits, targets, label_smoothing=label_smoothing),
            rtol=1e-12, atol=1e-12)
    targets[targets == -100] = 0  # a padding id that is also a real class index
    torch.testing.assert_close(
        losses.cross_entropy(logits, targets, ignore_index=0, label_smoothing=label_smoothing),
        F.cross_entropy(logits, targets, ignore_index=0, label_smoothing=label_smoothing),
        rtol=1e-12, atol=1e-12)


def test_language_model_reshape_matches_per_token_mean(float64_device):
    B, T, V = 2, 5, 11
    logits = randn(B, T, V, device=float64_device)
    targets = integer_targets(B * T, V, float64_device).reshape(B, T)
    ours = losses.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T))
    # the closed form −(1/BT) Σ_b Σ_t log p_bt(y_bt), written with explicit loops
    total = sum(-F.log_softmax(logits[b, t], -1)[targets[b, t]] for b in range(B) for t in range(T))
    torch.testing.assert_close(ours, total / (B * T), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"reshape"):
        losses.cross_entropy(logits, targets)


def test_cross_entropy_gradient_is_p_minus_y(float64_device):
    N, V = 6, 5
    logits = randn(N, V, device=float64_device).requires_grad_(True)
    targets = integer_targets(N, V, float64_device)
    losses.cross_entropy(logits, targets).backward()
    closed = (F.softmax(logits.detach(), -1) - F.one_hot(targets, V).to(logits.dtype)) / N
    torch.testing.assert_close(logits.grad, closed, rtol=1e-12, atol=1e-14)
    assert torch.autograd.gradcheck(
        lambda z: losses.cross_entropy(z, targets, label_smoothing=0.1), (logits.detach().requires_grad_(),))


def test_cross_entropy_rejects_bad_input():
    logits = torch.zeros(3, 4, dtype=torch.float64)
    with pytest.raises(TypeError, match="integer"):
        losses.cross_entropy(logits, torch.zeros(3))
    with pytest.raises(ValueError, match=r"\(3, 4\)"):
        losses.cross_entropy(logits, torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        losses.cross_entropy(logits, torch.tensor([0, 1, 4]))
    with pytest.raises(ValueError, match="label_smoothing"):
        losses.cross_entropy(logits, torch.zeros(3, dtype=torch.long), label_smoothing=1.5)
    with pytest.raises(TypeError, match="floating-point"):
        losses.cross_entropy(torch.zeros(3, 4, dtype=torch.long), torch.zeros(3, dtype=torch.long))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits_matches_torch(float64_device, reduction):
    z = randn(20, device=float64_device, scale=30.0)
    y = torch.rand(20, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(z.device)
    torch.testing.assert_close(losses.binary_cross_entropy_with_logits(z, y, reduction),
                               F.binary_cross_entropy_with_logits(z, y, reduction=reduction),
                               rtol=1e-12, atol=1e-12)


def test_binary_cross_entropy_gradient_is_sigmoid_minus_y(float64_device):
    z = randn(8, device=float64_device, scale=4.0).requires_grad_(True)
    y = (randn(8, device=float64_device, seed=5) > 0).to(z.dtype)
    losses.binary_cross_entropy_with_logits(z, y, "sum").backward()
    torch.testing.assert_close(z.grad, torch.sigmoid(z.detach()) - y, rtol=1e-12, atol=1e-14)


def test_mse_matches_torch(float64_device):
    a, b = randn(4, 3, device=float64_device), randn(4, 3, device=float64_device, seed=9)
    for reduction in ("mean", "sum", "none"):
        torch.testing.assert_close(losses.mse(a, b, reduction), F.mse_loss(a, b, reduction=reduction))
    with pytest.raises(ValueError, match="same shape"):
        losses.mse(a, b.T)


def test_entropy_closed_forms(float64_device):
    uniform = torch.full((8,), 1 / 8, dtype=torch.float64, device=float64_device)
    assert losses.entropy(uniform).item() == pytest.approx(math.log(8), rel=1e-12)
    onehot = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64, device=float64_device)
    assert losses.entropy(onehot).item() == 0.0
    p = distribution(4, 6, device=float64_device)
    torch.testing.assert_close(losses.entropy(p), torch.distributions.Categorical(probs=p).entropy(),
                               rtol=1e-12, atol=1e-12)


def test_kl_divergence_matches_torch_and_decomposes_cross_entropy(float64_device):
    p = distribution(5, 7, device=float64_device, seed=1)
    q = distribution(5, 7, device=float64_device, seed=2)
    ref = F.kl_div(q.log(), p, reduction="none").sum(-1)
    torch.testing.assert_close(losses.kl_divergence(p, q), ref, rtol=1e-12, atol=1e-12)
    cross = -(p * q.log()).sum(-1)
    torch.testing.assert_close(losses.entropy(p) + losses.kl_divergence(p, q), cross,
                               rtol=1e-12, atol=1e-12)
    assert (losses.kl_divergence(p, p).abs() < 1e-14).all()
    p0 = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    q0 = torch.tensor([0.25, 0.25, 0.5], dtype=torch.float64)
    assert losses.kl_divergence(p0, q0).item() == pytest.approx(math.log(2), rel=1e-12)
    assert losses.kl_divergence(q0, p0).item() == math.inf
    with pytest.raises(ValueError, match="non-negative"):
        losses.kl_divergence(-p, q)


def test_perplexity_and_bits_per_byte_closed_forms():
    assert losses.perplexity(math.log(65)) == pytest.approx(65, rel=1e-12)
    assert losses.perplexity(torch.tensor(0.0, dtype=torch.float64)).item() == 1.0
    # a uniform model over 256 byte values spends exactly 8 bits on every byte
    n = 1000
    assert losses.bits_per_byte(n * math.log(256), n) == pytest.approx(8.0, rel=1e-12)
    assert losses.bits_per_byte(torch.tensor(math.log(2) * 12), 4).item() == pytest.approx(3.0)
    with pytest.raises(ValueError, match="n_bytes"):
        losses.bits_per_byte(1.0, 0)
    with pytest.raises(TypeError, match="mean_nll"):
        losses.perplexity("2.0")


def test_expected_calibration_error_against_a_direct_loop(float64_device):
    gen = torch.Generator().manual_seed(4)
    probs = torch.softmax(3 * torch.randn(200, 4, generator=gen, dtype=torch.float64), -1)
    labels = torch.randint(0, 4, (200,), generator=gen)
    n_bins = 10
    conf, pred = probs.max(1)
    expected = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        sel = [i for i in range(200) if lo < conf[i].item() <= hi]
        if sel:
            acc = sum(float(pred[i] == labels[i]) for i in sel) / len(sel)
            avg = sum(conf[i].item() for i in sel) / len(sel)
            expected += len(sel) / 200 * abs(acc - avg)
    got = losses.expected_calibration_error(probs.to(float64_device), labels.to(float64_device),
                                            n_bins=n_bins)
    assert got.item() == pytest.approx(expected, rel=1e-12, abs=1e-15)
    perfect = torch.eye(4, dtype=torch.float64)
    assert losses.expected_calibration_error(perfect, torch.arange(4)).item() == 0.0


def test_softmax_rejects_bad_temperature_and_input():
    with pytest.raises(ValueError, match="temperature"):
        losses.softmax(torch.zeros(3), temperature=0.0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        losses.softmax([1.0, 2.0])
    with pytest.raises(TypeError, match="floating-point"):
        losses.logsumexp(torch.arange(3))


def test_softmax_temperature_figure_and_widget_draw_softmax():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from mathref import viz, widgets

    z = [2.0, 1.0, 0.5, -1.0]
    fig = viz.softmax_temperature_grid(z, [0.5, 2.0])
    for ax, t in zip(fig.axes, [0.5, 2.0]):
        heights = [bar.get_height() for bar in ax.patches]
        ref = F.softmax(torch.tensor(z, dtype=torch.float64) / t, -1)
        torch.testing.assert_close(torch.tensor(heights, dtype=torch.float64), ref)
    plt.close("all")
    explorer = widgets.softmax_temperature_explorer(z, temperature=1.0)
    explorer.children[0].value = 4.0  # re-draws through viz.plot_softmax_temperature
    heights = [bar.get_height() for bar in plt.gcf().axes[0].patches]
    torch.testing.assert_close(torch.tensor(heights, dtype=torch.float64),
                               F.softmax(torch.tensor(z, dtype=torch.float64) / 4.0, -1))
    plt.close("all")
