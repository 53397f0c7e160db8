"""mathref.nn against PyTorch's activations, nn.Linear and autograd, in float64."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mathref import nn as mnn

# (mathref function, mathref derivative, PyTorch oracle)
ELEMENTWISE = {
    "identity": (mnn.identity, mnn.identity_grad, lambda x: x * 1),
    "sigmoid": (mnn.sigmoid, mnn.sigmoid_grad, torch.sigmoid),
    "tanh": (mnn.tanh, mnn.tanh_grad, torch.tanh),
    "relu": (mnn.relu, mnn.relu_grad, F.relu),
    "gelu": (mnn.gelu, mnn.gelu_grad, F.gelu),
    "gelu_tanh": (lambda x: mnn.gelu(x, "tanh"), lambda x: mnn.gelu_grad(x, "tanh"),
                  lambda x: F.gelu(x, approximate="tanh")),
    "relu2": (mnn.relu2, mnn.relu2_grad, lambda x: F.relu(x) ** 2),
    "silu": (mnn.silu, mnn.silu_grad, F.silu),
}


def _inputs(device, n=401):
    # a grid through 0 plus large magnitudes (overflow of e^{-x}) and tiny ones (cancellation)
    x = torch.linspace(-8, 8, n, dtype=torch.float64)
    extra = torch.tensor([-800.0, -60.0, -1e-12, 1e-12, 60.0, 800.0], dtype=torch.float64)
    return torch.cat([x, extra]).to(device)


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_activation_values_match_torch(name, float64_device):
    ours, _, oracle = ELEMENTWISE[name]
    x = _inputs(float64_device)
    got = ours(x)
    assert got.device == x.device and got.dtype == torch.float64 and torch.isfinite(got).all()
    torch.testing.assert_close(got, oracle(x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_activation_derivatives_match_autograd(name, float64_device):
    _, ours_grad, oracle = ELEMENTWISE[name]
    x = _inputs(float64_device).requires_grad_(True)
    (auto,) = torch.autograd.grad(oracle(x).sum(), x)
    torch.testing.assert_close(ours_grad(x.detach()), auto, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_activations_propagate_nan_like_torch(name, device):
    # a NaN in must come out as NaN (F.relu(nan) is nan), so that a NaN in a network is not
    # silently turned into 0 by a mathref activation; the derivative is NaN there or autograd's value
    ours, ours_grad, oracle = ELEMENTWISE[name]
    x = torch.tensor([-1.0, float("nan"), 2.0], dtype=torch.float64, device=device)
    assert torch.equal(ours(x).isnan(), oracle(x).isnan()) and bool(ours(x)[1].isnan())
    xg = x.clone().requires_grad_(True)
    (auto,) = torch.autograd.grad(oracle(xg).sum(), xg)
    g = ours_grad(x)
    assert not g[[0, 2]].isnan().any()
    assert bool(g[1].isnan()) or g[1] == auto[1]        # NaN, or autograd's own value there


def test_step_propagates_nan(device):
    x = torch.tensor([-1.0, float("nan"), 1.0], device=device)
    assert mnn.step(x).isnan().tolist() == [False, True, False]
    assert mnn.step_grad(x).isnan().tolist() == [False, True, False]


def test_activations_follow_float32(device):
    x = torch.linspace(-3, 3, 11, device=device)
    for name, (ours, ours_grad, oracle) in ELEMENTWISE.items():
        assert ours(x).dtype == torch.float32 and ours_grad(x).dtype == torch.float32
        torch.testing.assert_close(ours(x), oracle(x), rtol=1e-5, atol=1e-6)


def test_step_is_heaviside_with_zero_at_zero(device):
    x = torch.tensor([-2.0, -1e-9, 0.0, 1e-9, 3.0], device=device)
    assert mnn.step(x).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]
    assert mnn.step_grad(x).tolist() == [0.0] * 5
    torch.testing.assert_close(mnn.step(x), torch.heaviside(x, torch.zeros((), device=device)))


def test_sigmoid_derivative_closed_form_and_gelu_zero(float64_device):
    x = torch.linspace(-5, 5, 101, dtype=torch.float64, device=float64_device)
    s = torch.sigmoid(x)
    torch.testing.assert_close(mnn.sigmoid_grad(x), s * (1 - s))
    assert mnn.sigmoid_grad(x).max().item() == pytest.approx(0.25)
    # GELU′ changes sign near −0.7518 (a root of Φ(x) + xφ(x))
    g = mnn.gelu_grad(torch.tensor([-0.76, -0.74], dtype=torch.float64, device=float64_device))
    assert g[0] < 0 < g[1]


@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_glu_and_swiglu_match_torch(dim, float64_device):
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 8, generator=gen, dtype=torch.float64).to(float64_device)
    torch.testing.assert_close(mnn.glu(x, dim), F.glu(x, dim), rtol=1e-12, atol=1e-14)
    a, b = x.chunk(2, dim=dim)
    torch.testing.assert_close(mnn.swiglu(x, dim), a * F.silu(b), rtol=1e-12, atol=1e-14)


def test_glu_rejects_odd_size():
    with pytest.raises(ValueError, match="even size"):
        mnn.glu(torch.randn(3, 5))
    with pytest.raises(ValueError, match="even size"):
        mnn.swiglu(torch.randn(5))


def test_activations_reject_bad_input():
    with pytest.raises(TypeError, match="torch.Tensor"):
        mnn.sigmoid([1.0, 2.0])
    with pytest.raises(TypeError, match="floating-point"):
        mnn.relu(torch.arange(3))
    with pytest.raises(ValueError, match="approximate"):
        mnn.gelu(torch.zeros(2), approximate="erf")
    with pytest.raises(ValueError, match="unknown activation"):
        mnn.get_activation("softplus")


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_nn_linear_with_copied_weights(bias, float64_device):
    torch.manual_seed(0)
    ref = nn.Linear(5, 3, bias=bias, dtype=torch.float64, device=float64_device)
    ours = mnn.Linear(5, 3, bias=bias, dtype=torch.float64, device=float64_device)
    assert ours.weight.shape == ref.weight.shape == (3, 5)
    with torch.no_grad():
        ours.weight.copy_(ref.weight)
        if bias:
            ours.bias.copy_(ref.bias)
    x = torch.randn(2, 4, 5, dtype=torch.float64, device=float64_device)  # bias broadcasts
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-13, atol=1e-14)
    ours(x).pow(2).sum().backward()
    ref(x).pow(2).sum().backward()
    torch.testing.assert_close(ours.weight.grad, ref.weight.grad, rtol=1e-12, atol=1e-13)
    if bias:
        torch.testing.assert_close(ours.bias.grad, ref.bias.grad, rtol=1e-12, atol=1e-13)
    assert mnn.count_parameters(ours) == mnn.count_parameters(ref) == 15 + 3 * bias


def test_linear_default_init_range_and_errors():
    torch.manual_seed(0)
    layer = mnn.Linear(16, 200)
    bound = 1 / 4
    assert layer.weight.abs().max() <= bound and layer.weight.abs().max() > 0.9 * bound
    with pytest.raises(ValueError, match="last dimension 16"):
        layer(torch.randn(3, 15))
    with pytest.raises(ValueError, match="in_features"):
        mnn.Linear(0, 3)


def test_mlp_matches_an_nn_sequential_and_counts_parameters(float64_device):
    torch.manual_seed(0)
    ours = mnn.MLP([4, 3, 3, 2], activation="tanh", dtype=torch.float64, device=float64_device)
    ref = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 3), nn.Tanh(),
                        nn.Linear(3, 2)).to(dtype=torch.float64, device=float64_device)
    with torch.no_grad():
        for mine, theirs in zip(ours.layers, [ref[0], ref[2], ref[4]]):
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    x = torch.randn(7, 4, dtype=torch.float64, device=float64_device)
    torch.testing.assert_close(ours(x), ref(x), rtol=1e-13, atol=1e-14)
    n_ref = sum(p.numel() for p in ref.parameters())
    assert mnn.count_parameters(ours) == mnn.count_parameters([4, 3, 3, 2]) == n_ref == 35


def test_count_parameters_formula_on_other_shapes():
    for sizes in ([2, 1], [784, 128, 10], [3, 7, 7, 7, 1]):
        layers = [nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
        assert mnn.count_parameters(sizes) == sum(p.numel() for l in layers for p in l.parameters())
    with pytest.raises(ValueError):
        mnn.count_parameters([5])
    with pytest.raises(ValueError):
        mnn.MLP([3, 0, 1])


def _problem(device, d_in=3, d_h=5, d_out=2, n=7, seed=0):
    gen = torch.Generator().manual_seed(seed)
    def r(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device)
    X, Y = r(n, d_in), r(n, d_out)
    params = {"W1": r(d_in, d_h), "b1": r(d_h), "W2": r(d_h, d_out), "b2": r(d_out)}
    return X, Y, params


HIDDEN = ["sigmoid", "tanh", "relu", "gelu", "gelu_tanh", "silu", "relu2", "identity"]


@pytest.mark.parametrize("output_activation", ["identity", "sigmoid"])
@pytest.mark.parametrize("activation", HIDDEN)
def test_mlp_backward_matches_autograd(activation, output_activation, float64_device):
    X, Y, params = _problem(float64_device)
    Y_hat, cache = mnn.mlp_forward(X, params, activation, output_activation)
    grads = mnn.mlp_backward(Y, params, cache, activation, output_activation)

    # oracle: the same network written with PyTorch's own layers and functions
    leaves = {k: v.clone().requires_grad_(True) for k, v in params.items()}
    phi = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": F.relu, "gelu": F.gelu,
           "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"), "silu": F.silu,
           "relu2": lambda z: F.relu(z) ** 2, "identity": lambda z: z}
    h = phi[activation](F.linear(X, leaves["W1"].T, leaves["b1"]))
    out = phi[output_activation](F.linear(h, leaves["W2"].T, leaves["b2"]))
    torch.testing.assert_close(Y_hat, out.detach(), rtol=1e-13, atol=1e-14)
    loss = ((out - Y) ** 2).sum(dim=1).mean()
    loss.backward()
    for k in ("W1", "b1", "W2", "b2"):
        assert grads[k].shape == params[k].shape
        torch.testing.assert_close(grads[k], leaves[k].grad, rtol=1e-12, atol=1e-13)
    assert grads["delta1"].shape == cache["Z1"].shape
    assert grads["delta2"].shape == cache["Z2"].shape


class _TwoLayerMSE(torch.autograd.Function):
    """L(W1, b1, W2, b2) whose backward is mathref's hand-written one (for gradcheck)."""

    @staticmethod
    def forward(ctx, X, Y, W1, b1, W2, b2):
        params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}
        Y_hat, cache = mnn.mlp_forward(X, params, "tanh", "sigmoid")
        ctx.save_for_backward(X, Y, W1, b1, W2, b2)
        return ((Y_hat - Y) ** 2).sum() / X.shape[0]

    @staticmethod
    def backward(ctx, grad_out):
        X, Y, W1, b1, W2, b2 = ctx.saved_tensors
        params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}
        _, cache = mnn.mlp_forward(X, params, "tanh", "sigmoid")
        g = mnn.mlp_backward(Y, params, cache, "tanh", "sigmoid")
        return None, None, *(grad_out * g[k] for k in ("W1", "b1", "W2", "b2"))


def test_mlp_backward_passes_gradcheck(float64_device):
    X, Y, params = _problem(float64_device, n=5)
    inputs = (X, Y) + tuple(params[k].requires_grad_(True) for k in ("W1", "b1", "W2", "b2"))
    assert torch.autograd.gradcheck(_TwoLayerMSE.apply, inputs, eps=1e-6, atol=1e-8)


def test_mlp_forward_backward_reject_bad_shapes():
    X, Y, params = _problem("cpu")
    bad = dict(params, W1=params["W1"].T)  # PyTorch layout (out, in) instead of math layout
    with pytest.raises(ValueError, match="W1"):
        mnn.mlp_forward(X, bad)
    with pytest.raises(ValueError, match="missing"):
        mnn.mlp_forward(X, {"W1": params["W1"]})
    _, cache = mnn.mlp_forward(X, params)
    with pytest.raises(ValueError, match="shape of the prediction"):
        mnn.mlp_backward(Y[:, :1], params, cache)
