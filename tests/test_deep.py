"""mathref.deep: initializers and dropout against PyTorch's by statistics; per-layer statistics
against autograd."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mathref import deep

SHAPES = [(600, 400), (128, 64, 3, 3)]  # a Linear weight and a conv kernel (receptive field 9)


def _gen(device, seed=0):
    return torch.Generator(device=device).manual_seed(seed)


@pytest.mark.parametrize("shape", SHAPES)
def test_fans_match_pytorch(shape):
    w = torch.empty(shape)
    assert deep.fan_in_and_fan_out(w) == nn.init._calculate_fan_in_and_fan_out(w)


@pytest.mark.parametrize("name, param", [("linear", None), ("sigmoid", None), ("tanh", None),
                                         ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2)])
def test_gains_match_pytorch(name, param):
    assert deep.calculate_gain(name, param) == pytest.approx(nn.init.calculate_gain(name, param),
                                                             rel=1e-12)


def _assert_std(sample, std, what):
    # the sample std of N normal/uniform draws has relative error ~ 1/sqrt(2N) (< 1e-3 here)
    assert abs(sample.mean().item()) < 5 * std / math.sqrt(sample.numel()), what
    assert sample.std().item() == pytest.approx(std, rel=0.01), what


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("gain", [1.0, 5 / 3])
def test_xavier_normal_and_uniform_match_pytorch(float64_device, shape, gain):
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))  # Glorot & Bengio's closed form
    ours = deep.xavier_(torch.empty(shape, dtype=torch.float64, device=float64_device), gain,
                        "normal", _gen(float64_device))
    theirs = nn.init.xavier_normal_(torch.empty(shape, dtype=torch.float64), gain)
    _assert_std(ours, std, "xavier normal")
    _assert_std(theirs, std, "torch xavier normal (oracle sanity)")
    assert ours.device.type == float64_device.type and ours.dtype == torch.float64

    ours = deep.xavier_(torch.empty(shape, dtype=torch.float64, device=float64_device), gain,
                        "uniform", _gen(float64_device))
    theirs = nn.init.xavier_uniform_(torch.empty(shape, dtype=torch.float64), gain)
    bound = math.sqrt(3.0) * std
    for w in (ours, theirs):
        assert w.abs().max().item() <= bound
        assert w.abs().max().item() > 0.999 * bound  # the support really reaches the bound
        _assert_std(w, std, "xavier uniform")


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("nonlinearity, mode", [("relu", "fan_in"), ("relu", "fan_out"),
                                                ("linear", "fan_in"), ("tanh", "fan_out"),
                                                ("leaky_relu", "fan_in")])
def test_kaiming_normal_and_uniform_match_pytorch(float64_device, shape, nonlinearity, mode):
    a = 0.1 if nonlinearity == "leaky_relu" else 0.0
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    gain = nn.init.calculate_gain(nonlinearity, a)
    std = gain / math.sqrt(fan_in if mode == "fan_in" else fan_out)
    ours = deep.kaiming_(torch.empty(shape, dtype=torch.float64, device=float64_device),
                         nonlinearity, mode, "normal", a=a, generator=_gen(float64_device))
    theirs = nn.init.kaiming_normal_(torch.empty(shape, dtype=torch.float64), a=a, mode=mode,
                                     nonlinearity=nonlinearity)
    _assert_std(ours, std, "kaiming normal")
    _assert_std(theirs, std, "torch kaiming normal (oracle sanity)")

    ours = deep.kaiming_(torch.empty(shape, dtype=torch.float64, device=float64_device),
                         nonlinearity, mode, "uniform", a=a, generator=_gen(float64_device))
    theirs = nn.init.kaiming_uniform_(torch.empty(shape, dtype=torch.float64), a=a, mode=mode,
                                      nonlinearity=nonlinearity)
    bound = math.sqrt(3.0) * std
    for w in (ours, theirs):
        assert bound * 0.999 < w.abs().max().item() <= bound
        _assert_std(w, std, "kaiming uniform")


def test_he_std_for_relu_is_sqrt_two_over_fan_in():
    w = deep.kaiming_(torch.empty(1000, 500, dtype=torch.float64), generator=_gen("cpu"))
    assert w.var().item() == pytest.approx(2 / 500, rel=0.01)


def test_initializers_reject_bad_input():
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        deep.xavier_(torch.empty(5))
    with pytest.raises(ValueError, match="distribution"):
        deep.kaiming_(torch.empty(3, 3), distribution="gaussian")
    with pytest.raises(ValueError, match="mode"):
        deep.kaiming_(torch.empty(3, 3), mode="fan_avg")
    with pytest.raises(ValueError, match="nonlinearity"):
        deep.kaiming_(torch.empty(3, 3), nonlinearity="swish")
    with pytest.raises(TypeError, match="torch.Tensor"):
        deep.xavier_([[1.0, 2.0]])
    with pytest.raises(TypeError, match="floating-point"):
        deep.xavier_(torch.zeros(3, 3, dtype=torch.long))


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.8])
def test_dropout_statistics_match_f_dropout(float64_device, p):
    n = 1_000_000
    x = torch.ones(n, dtype=torch.float64, device=float64_device)
    ours = deep.dropout(x, p, generator=_gen(float64_device, 1))
    torch.manual_seed(1)
    theirs = F.dropout(x, p, training=True)
    tol = 6 * math.sqrt(p * (1 - p) / n)  # six binomial standard deviations
    for y in (ours, theirs):
        assert (y == 0).double().mean().item() == pytest.approx(p, abs=tol)
        # E[y] = x: the mean of m/(1 − p) is 1 within the same sampling error, rescaled
        assert y.mean().item() == pytest.approx(1.0, abs=tol / (1 - p))
    # kept values are scaled by exactly 1/(1 − p), like F.dropout's
    kept_ours, kept_theirs = ours[ours != 0], theirs[theirs != 0]
    torch.testing.assert_close(kept_ours, torch.full_like(kept_ours, 1 / (1 - p)),
                               rtol=1e-15, atol=0)
    torch.testing.assert_close(kept_theirs.unique().cpu(), kept_ours.unique().cpu(),
                               rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_dropout_low_precision_keeps_f_dropout_statistics(device, dtype):
    # a mask drawn with rand in bfloat16 would zero about 0.102 of the entries at p = 0.1
    # (9 standard deviations off at this n); the zero fraction must be p like F.dropout's
    p, n = 0.1, 2_000_000
    x = torch.ones(n, dtype=dtype, device=device)
    ours = deep.dropout(x, p, generator=_gen(device, 5))
    torch.manual_seed(5)
    theirs = F.dropout(x, p, training=True)
    tol = 6 * math.sqrt(p * (1 - p) / n)
    for y in (ours, theirs):
        assert y.dtype == dtype
        assert (y == 0).double().mean().item() == pytest.approx(p, abs=tol)
    # the kept value is 1/(1 − p) rounded to the dtype, the same one F.dropout keeps
    assert torch.equal(ours[ours != 0].unique().cpu(), theirs[theirs != 0].unique().cpu())
    assert ours.double().mean().item() == pytest.approx(theirs.double().mean().item(), abs=2 * tol)


def test_dropout_scales_each_kept_value(float64_device):
    gen = _gen(float64_device, 2)
    x = torch.randn(300, 200, dtype=torch.float64, device=float64_device, generator=gen)
    y = deep.dropout(x, 0.25, generator=gen)
    kept = y != 0
    torch.testing.assert_close(y[kept], x[kept] / 0.75, rtol=1e-15, atol=0)


def test_dropout_units_are_independent(device):
    # each unit is kept independently: the kept count of n units is Binomial(n, 1 − p),
    # whose variance n·p·(1 − p) is far from 0 (a fixed fraction would give variance 0)
    p, n, rows = 0.5, 10, 20000
    y = deep.dropout(torch.ones(rows, n, device=device), p, generator=_gen(device, 3))
    kept = (y != 0).sum(dim=1).double()
    assert kept.mean().item() == pytest.approx(n * (1 - p), abs=0.05)
    assert kept.var().item() == pytest.approx(n * p * (1 - p), rel=0.05)
    corr = torch.corrcoef((y != 0).double().T.cpu())
    off_diagonal = corr[~torch.eye(n, dtype=torch.bool)]
    assert off_diagonal.abs().max().item() < 0.05


def test_dropout_eval_zero_and_one(device):
    x = torch.randn(50, 7, device=device)
    assert torch.equal(deep.dropout(x, 0.5, training=False), x)
    assert torch.equal(deep.dropout(x, 0.0), x)
    assert torch.equal(deep.dropout(x, 1.0), torch.zeros_like(x))
    assert torch.equal(F.dropout(x, 1.0), deep.dropout(x, 1.0))


def test_dropout_gradient_is_mask_over_keep_probability(float64_device):
    x = torch.randn(40, 30, dtype=torch.float64, device=float64_device, requires_grad=True)
    y = deep.dropout(x, 0.4, generator=_gen(float64_device, 4))
    y.sum().backward()
    expected = (y != 0).to(x.dtype) / 0.6
    torch.testing.assert_close(x.grad, expected, rtol=1e-15, atol=0)


def test_dropout_module_train_and_eval(device):
    layer = deep.Dropout(0.5)
    x = torch.ones(1000, device=device)
    assert (layer(x) == 0).any()
    layer.eval()
    assert torch.equal(layer(x), x)


def test_dropout_rejects_bad_p():
    for p in (-0.1, 1.5, "0.5", True):
        with pytest.raises(ValueError, match="p must be"):
            deep.dropout(torch.ones(3), p)
    with pytest.raises(ValueError, match="p must be"):
        deep.Dropout(2.0)
    with pytest.raises(TypeError, match="torch.Tensor"):
        deep.dropout([1.0], 0.5)


def test_residual_block_jacobian_is_identity_plus_branch(float64_device):
    torch.manual_seed(0)
    block = deep.ResidualBlock(5, "tanh", residual=True, alpha=0.5).double().to(float64_device)
    plain = deep.ResidualBlock(5, "tanh", residual=False).double().to(float64_device)
    plain.load_state_dict(block.state_dict())
    h = torch.randn(5, dtype=torch.float64, device=float64_device)
    jac_res = torch.autograd.functional.jacobian(block, h)
    jac_branch = torch.autograd.functional.jacobian(plain, h)
    eye = torch.eye(5, dtype=torch.float64, device=float64_device)
    torch.testing.assert_close(jac_res, eye + 0.5 * jac_branch, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("residual, norm", [(False, False), (True, True)])
def test_layer_statistics_match_autograd(float64_device, residual, norm):
    torch.manual_seed(0)
    model = deep.deep_mlp(3, 8, 5, 2, "tanh", residual, norm, init="xavier").double()
    model = model.to(float64_device)
    x = torch.randn(16, 3, dtype=torch.float64, device=float64_device)
    y = torch.randn(16, 2, dtype=torch.float64, device=float64_device)
    stats = deep.layer_statistics(model, x, y, F.mse_loss)

    # oracle: run the blocks by hand and ask autograd for every gradient
    hs, h = [], model.inp(x)
    for block in model.blocks:
        h = block(h)
        hs.append(h)
    loss = F.mse_loss(model.out(h), y)
    grads_h = torch.autograd.grad(loss, hs, retain_graph=True)
    weights = [p for block in model.blocks for p in block.parameters()]
    grads_w = torch.autograd.grad(loss, weights)
    per_block = len(list(model.blocks[0].parameters()))
    assert stats["loss"] == pytest.approx(loss.item(), rel=1e-12)
    for i, block in enumerate(model.blocks):
        assert stats["activation_std"][i] == pytest.approx(hs[i].std().item(), rel=1e-12)
        assert stats["activation_grad"][i] == pytest.approx(grads_h[i].norm().item(), rel=1e-10)
        g = grads_w[i * per_block:(i + 1) * per_block]
        norm = math.sqrt(sum(t.pow(2).sum().item() for t in g))
        assert stats["weight_grad"][i] == pytest.approx(norm, rel=1e-10)


def test_deep_mlp_init_variances():
    torch.manual_seed(0)
    he = deep.deep_mlp(4, 512, 3, 1, "relu", init="he")
    xavier = deep.deep_mlp(4, 512, 3, 1, "tanh", init="xavier")
    fixed = deep.deep_mlp(4, 512, 3, 1, "relu", init=0.01)
    for block in he.blocks:
        assert block.linear.weight.var().item() == pytest.approx(2 / 512, rel=0.02)
        assert torch.equal(block.linear.bias, torch.zeros(512))
    for block in xavier.blocks:
        assert block.linear.weight.var().item() == pytest.approx((5 / 3) ** 2 / 512, rel=0.02)
    for block in fixed.blocks:
        assert block.linear.weight.std().item() == pytest.approx(0.01, rel=0.02)
    with pytest.raises(ValueError, match="init"):
        deep.deep_mlp(4, 8, 2, 1, init="orthogonal")


@pytest.mark.parametrize("activation, gain", [("relu", math.sqrt(2)), ("tanh", 5 / 3),
                                              ("sigmoid", 1.0), ("linear", 1.0)])
def test_deep_mlp_he_uses_the_activations_gain(activation, gain):
    # "he" is std = gain/√fan_in with the activation's gain (tanh: 5/3, not 1)
    torch.manual_seed(0)
    model = deep.deep_mlp(4, 512, 3, 1, activation, init="he")
    assert gain == pytest.approx(nn.init.calculate_gain(activation))
    for block in model.blocks:
        assert block.linear.weight.std().item() == pytest.approx(gain / math.sqrt(512), rel=0.01)
    with pytest.raises(ValueError, match="depth"):
        deep.deep_mlp(4, 8, 0, 1)
    with pytest.raises(ValueError, match="activation"):
        deep.deep_mlp(4, 8, 2, 1, activation="swish")


def test_plot_init_depth_and_its_widget():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from mathref import viz, widgets
    # oracle: the same forward pass written out here, He-scaled ReLU layers times `scale`
    ax = viz.plot_init_depth(1.2, depth=6, width=64, batch=32, seed=3)
    gen = torch.Generator().manual_seed(3)
    h, want = torch.randn(32, 64, generator=gen), []
    for _ in range(6):
        h = torch.relu(h @ (torch.randn(64, 64, generator=gen) * 1.2 * math.sqrt(2 / 64)).T)
        want.append(h.std().item())
    np.testing.assert_allclose(ax.lines[0].get_data()[1], want, rtol=1e-6)
    plt.close("all")
    explorer = widgets.init_scale_explorer(depth=5, width=32, scale=0.8)
    assert explorer.children[0].value == pytest.approx(0.8)
    explorer.children[0].value = 1.1
    assert plt.gcf().axes[0].get_title().startswith("5 relu layers")
    plt.close("all")
    with pytest.raises(ValueError, match="activation"):
        viz.plot_init_depth(1.0, activation="gelu")


def test_initializers_are_also_mathref_nn_names():
    from mathref import nn as mnn
    assert mnn.xavier_ is deep.xavier_ and mnn.kaiming_ is deep.kaiming_


def test_deep_mlp_composes_input_blocks_and_read_out():
    torch.manual_seed(0)
    model = deep.DeepMLP(3, 8, 4, 2, activation="tanh", residual=True)
    assert isinstance(deep.deep_mlp(3, 8, 4, 2), deep.DeepMLP) and len(model.blocks) == 4
    x = torch.randn(5, 3)
    h = model.inp(x)
    for block in model.blocks:               # residual block: h + tanh(h Wᵀ + b)
        h = h + torch.tanh(F.linear(h, block.linear.weight, block.linear.bias))
    torch.testing.assert_close(model(x), model.out(h))
