"""Neurons, activations, the linear layer, the MLP and the two-layer backward pass by hand.
See chapter 3.

    neuron            a = φ(z),  z = b + Σᵢ wᵢ xᵢ
    linear layer      Y = X Wᵀ + b        (code: weight of shape (out, in), as nn.Linear)
                      Y = X W + b         (math: W ∈ ℝ^{d_in×d_out}, W = linear.weight.T)
    two-layer MLP     Z₁ = XW₁ + b₁,  A₁ = φ(Z₁),  Z₂ = A₁W₂ + b₂,  Ŷ = ψ(Z₂)
    loss              L = (1/N) Σₙ ‖Ŷₙ − Yₙ‖²
    backward          δ₂ = (2/N)(Ŷ − Y) ⊙ ψ′(Z₂),  δ₁ = (δ₂W₂ᵀ) ⊙ φ′(Z₁),
                      ∂L/∂W₂ = A₁ᵀδ₂,  ∂L/∂b₂ = Σₙ δ₂,  ∂L/∂W₁ = Xᵀδ₁,  ∂L/∂b₁ = Σₙ δ₁

Every activation ``f`` has its derivative ``f_grad`` (elementwise, at the pre-activation z).
Weight initializers live elsewhere (chapter 7); ``Linear`` uses PyTorch's default
U(−1/√in, 1/√in) so that it behaves like ``nn.Linear`` out of the box.
"""
import math

import torch
from torch import nn

from mathref.deep import kaiming_, xavier_  # initializers, derived in chapter 7

__all__ = ["identity", "identity_grad", "step", "step_grad", "sigmoid", "sigmoid_grad",
           "tanh", "tanh_grad", "relu", "relu_grad", "gelu", "gelu_grad", "relu2",
           "relu2_grad", "silu", "silu_grad", "glu", "swiglu", "ACTIVATIONS",
           "get_activation", "Linear", "MLP", "mlp_forward", "mlp_backward",
           "count_parameters", "xavier_", "kaiming_"]

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_CUBIC = 0.044715


def _check_tensor(x, name="x"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")


# ---------------------------------------------------------------- activations
def identity(x):
    """φ(x) = x. See chapter 3."""
    _check_tensor(x)
    return x


def identity_grad(x):
    """φ′(x) = 1. See chapter 3."""
    _check_tensor(x)
    return torch.ones_like(x)


def step(x):
    """Heaviside step H(x) = 1 if x > 0, else 0 (so H(0) = 0); NaN stays NaN. See chapter 3."""
    _check_tensor(x)
    return torch.where(x.isnan(), x, (x > 0).to(x.dtype))


def step_grad(x):
    """H′(x) = 0 for x ≠ 0 (undefined at 0; 0 returned): no gradient flows; NaN stays NaN.
    See chapter 3."""
    _check_tensor(x)
    return torch.where(x.isnan(), x, torch.zeros_like(x))


def sigmoid(x):
    """σ(x) = 1 / (1 + e^{−x}), evaluated without overflow for large |x|. See chapter 3."""
    _check_tensor(x)
    e = torch.exp(-x.abs())                      # ≤ 1, never overflows
    return torch.where(x >= 0, 1 / (1 + e), e / (1 + e))


def sigmoid_grad(x):
    """σ′(x) = σ(x)(1 − σ(x)), at most 1/4 (at x = 0). See chapter 3."""
    s = sigmoid(x)
    return s * (1 - s)


def tanh(x):
    """tanh(x) = (e^x − e^{−x}) / (e^x + e^{−x}) = 2σ(2x) − 1. See chapter 3.

    Computed as sign(x)·(1 − e^{−2|x|}) / (1 + e^{−2|x|}) with expm1, accurate near 0 too.
    """
    _check_tensor(x)
    e = torch.exp(-2 * x.abs())
    return torch.sign(x) * (-torch.expm1(-2 * x.abs())) / (1 + e)


def tanh_grad(x):
    """tanh′(x) = 1 − tanh²(x). See chapter 3."""
    t = tanh(x)
    return 1 - t * t


def relu(x):
    """ReLU(x) = max(0, x); NaN stays NaN, as in F.relu (a NaN must not be hidden). See chapter 3."""
    _check_tensor(x)
    return torch.where((x > 0) | x.isnan(), x, torch.zeros_like(x))


def relu_grad(x):
    """ReLU′(x) = 1 if x > 0 else 0 (PyTorch's choice 0 at x = 0); NaN stays NaN. See chapter 3."""
    _check_tensor(x)
    return torch.where(x.isnan(), x, (x > 0).to(x.dtype))


def _normal_cdf(x):
    return 0.5 * (1 + torch.erf(x / math.sqrt(2.0)))


def _normal_pdf(x):
    return torch.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)


def _check_approximate(approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")


def gelu(x, approximate="none"):
    """GELU(x) = x·Φ(x), Φ the standard normal CDF (approximate="none"), or the tanh form
    ½x(1 + tanh(√(2/π)(x + 0.044715x³))) (approximate="tanh"), as F.gelu. See chapter 3.
    """
    _check_tensor(x)
    _check_approximate(approximate)
    if approximate == "none":
        return x * _normal_cdf(x)
    return 0.5 * x * (1 + tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x ** 3)))


def gelu_grad(x, approximate="none"):
    """GELU′(x) = Φ(x) + x·φ(x) (φ the normal density); zero near x ≈ −0.7518. For the tanh
    form, with u = √(2/π)(x + 0.044715x³) and t = tanh u:
    ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3·0.044715x²). See chapter 3.
    """
    _check_tensor(x)
    _check_approximate(approximate)
    if approximate == "none":
        return _normal_cdf(x) + x * _normal_pdf(x)
    t = tanh(_SQRT_2_OVER_PI * (x + _GELU_CUBIC * x ** 3))
    du = _SQRT_2_OVER_PI * (1 + 3 * _GELU_CUBIC * x * x)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * du


def relu2(x):
    """Squared ReLU: ReLU(x)² = max(0, x)². See chapter 3."""
    r = relu(x)
    return r * r


def relu2_grad(x):
    """(ReLU²)′(x) = 2·max(0, x): continuous, unlike ReLU′. See chapter 3."""
    return 2 * relu(x)


def silu(x):
    """SiLU(x) = x·σ(x) (also called swish). See chapter 3."""
    return x * sigmoid(x)


def silu_grad(x):
    """SiLU′(x) = σ(x)(1 + x(1 − σ(x))). See chapter 3."""
    s = sigmoid(x)
    return s * (1 + x * (1 - s))


def _halves(x, dim):
    _check_tensor(x)
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension to be split in halves")
    if x.shape[dim] % 2:
        raise ValueError(f"x must have an even size along dim={dim} to be split in halves, "
                         f"got shape {tuple(x.shape)}")
    return x.chunk(2, dim=dim)


def glu(x, dim=-1):
    """Gated linear unit, as F.glu: split x = [a, b] in halves along ``dim``, return a ⊙ σ(b).

    With a = xW and b = xV this is GLU(x) = (xW) ⊙ σ(xV): the gate σ(xV) ∈ (0, 1) decides,
    per unit, how much of the value xW passes. See chapter 3.
    """
    a, b = _halves(x, dim)
    return a * sigmoid(b)


def swiglu(x, dim=-1):
    """SwiGLU with the same split as ``glu``: x = [a, b], return a ⊙ SiLU(b), i.e.
    (xW) ⊙ SiLU(xV) with a = xW and b = xV (the gate is the second half). See chapters 3, 13.
    """
    a, b = _halves(x, dim)
    return a * silu(b)


ACTIVATIONS = {
    "identity": (identity, identity_grad),
    "step": (step, step_grad),
    "sigmoid": (sigmoid, sigmoid_grad),
    "tanh": (tanh, tanh_grad),
    "relu": (relu, relu_grad),
    "gelu": (gelu, gelu_grad),
    "gelu_tanh": (lambda x: gelu(x, "tanh"), lambda x: gelu_grad(x, "tanh")),
    "relu2": (relu2, relu2_grad),
    "silu": (silu, silu_grad),
}


def get_activation(name):
    """(φ, φ′) for an activation name in ACTIVATIONS. See chapter 3."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation {name!r}; choose one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]


# ---------------------------------------------------------------- layers
class Linear(nn.Module):
    """y = x Wᵀ + b with weight W of shape (out_features, in_features) and bias of shape
    (out_features,), broadcast over every leading dimension of x: the semantics of nn.Linear.
    In the math of the course this is y = xW with W = ``weight.T`` ∈ ℝ^{in×out}. See chapter 3.

    Parameters start uniform in [−1/√in, 1/√in] (PyTorch's default for nn.Linear).
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        for name, n in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise ValueError(f"{name} must be a positive int, got {n!r}")
        self.in_features, self.out_features = in_features, out_features
        bound = 1 / math.sqrt(in_features)
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.empty(out_features, in_features, **kw).uniform_(-bound, bound))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features, **kw).uniform_(-bound, bound))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        _check_tensor(x)
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear({self.in_features}, {self.out_features}) expects inputs "
                             f"with last dimension {self.in_features}, got shape {tuple(x.shape)}")
        y = x @ self.weight.T
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, " \
               f"bias={self.bias is not None}"


class MLP(nn.Module):
    """A feed-forward network f = f_L ∘ … ∘ f_1 with f_l(h) = φ(h W_lᵀ + b_l) for the hidden
    layers and an output layer with ``output_activation`` (identity by default).

    ``sizes`` = [d_0, d_1, …, d_L], e.g. [4, 3, 3, 2]: L Linear layers, Σ (d_{l−1} + 1)·d_l
    parameters. ``activation`` is a name from ACTIVATIONS. See chapter 3.
    """

    def __init__(self, sizes, activation="relu", output_activation="identity", device=None,
                 dtype=None):
        super().__init__()
        sizes = list(sizes)
        if len(sizes) < 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                     for n in sizes):
            raise ValueError(f"sizes must list at least two positive ints, got {sizes!r}")
        self.sizes = sizes
        self.activation_name, self.output_activation_name = activation, output_activation
        self.activation = get_activation(activation)[0]
        self.output_activation = get_activation(output_activation)[0]
        self.layers = nn.ModuleList(Linear(n_in, n_out, device=device, dtype=dtype)
                                    for n_in, n_out in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = self.activation(layer(x))
        return self.output_activation(self.layers[-1](x))


def count_parameters(model_or_sizes):
    """Number of learned numbers. For a module: Σ p.numel() over model.parameters(). For a list
    of layer widths [d_0, …, d_L] of fully connected layers with biases: Σ_l (d_{l−1} + 1)·d_l.
    See chapter 3.
    """
    if isinstance(model_or_sizes, nn.Module):
        return sum(p.numel() for p in model_or_sizes.parameters())
    sizes = list(model_or_sizes)
    if len(sizes) < 2 or not all(isinstance(n, int) and not isinstance(n, bool) and n > 0
                                 for n in sizes):
        raise ValueError(f"expected an nn.Module or at least two positive layer widths, "
                         f"got {model_or_sizes!r}")
    return sum((n_in + 1) * n_out for n_in, n_out in zip(sizes[:-1], sizes[1:]))


# ---------------------------------------------------------------- two-layer forward/backward
_PARAM_NAMES = ("W1", "b1", "W2", "b2")


def _check_params(X, params):
    _check_tensor(X, "X")
    if X.dim() != 2:
        raise ValueError(f"X must have shape (N, d_in), got {tuple(X.shape)}")
    missing = [k for k in _PARAM_NAMES if k not in params]
    if missing:
        raise ValueError(f"params must hold {_PARAM_NAMES}; missing {missing}")
    W1, b1, W2, b2 = (params[k] for k in _PARAM_NAMES)
    for k in _PARAM_NAMES:
        _check_tensor(params[k], k)
    if W1.dim() != 2 or W2.dim() != 2 or b1.dim() != 1 or b2.dim() != 1 \
            or W1.shape[0] != X.shape[1] or b1.shape[0] != W1.shape[1] \
            or W2.shape[0] != W1.shape[1] or b2.shape[0] != W2.shape[1]:
        raise ValueError(
            "shapes must be X (N, d_in), W1 (d_in, d_h), b1 (d_h,), W2 (d_h, d_out), "
            f"b2 (d_out,) [math layout W = linear.weight.T]; got X {tuple(X.shape)}, "
            f"W1 {tuple(W1.shape)}, b1 {tuple(b1.shape)}, W2 {tuple(W2.shape)}, "
            f"b2 {tuple(b2.shape)}")


def mlp_forward(X, params, activation="sigmoid", output_activation="identity"):
    """Forward pass of a two-layer MLP in math layout (W ∈ ℝ^{d_in×d_out}). See chapter 3.

        Z₁ = XW₁ + b₁,  A₁ = φ(Z₁),  Z₂ = A₁W₂ + b₂,  Ŷ = ψ(Z₂)

    ``params`` is a dict with W1, b1, W2, b2. Returns (Ŷ, cache), where cache holds
    X, Z1, A1, Z2 and Y_hat for ``mlp_backward``.
    """
    _check_params(X, params)
    phi = get_activation(activation)[0]
    psi = get_activation(output_activation)[0]
    Z1 = X @ params["W1"] + params["b1"]
    A1 = phi(Z1)
    Z2 = A1 @ params["W2"] + params["b2"]
    Y_hat = psi(Z2)
    return Y_hat, {"X": X, "Z1": Z1, "A1": A1, "Z2": Z2, "Y_hat": Y_hat}


def mlp_backward(Y, params, cache, activation="sigmoid", output_activation="identity"):
    """Gradients of L = (1/N) Σₙ ‖Ŷₙ − Yₙ‖² for ``mlp_forward``, with explicit deltas. See chapter 3.

        δ₂ = ∂L/∂Z₂ = (2/N)(Ŷ − Y) ⊙ ψ′(Z₂)      ∂L/∂W₂ = A₁ᵀδ₂   ∂L/∂b₂ = Σₙ δ₂[n]
        δ₁ = ∂L/∂Z₁ = (δ₂W₂ᵀ) ⊙ φ′(Z₁)            ∂L/∂W₁ = Xᵀδ₁    ∂L/∂b₁ = Σₙ δ₁[n]

    Returns a dict with W1, b1, W2, b2 (each of its parameter's shape) and delta1, delta2.
    Note L sums over output units and averages over the N examples; F.mse_loss averages over
    all N·d_out entries instead.
    """
    _check_tensor(Y, "Y")
    for k in ("X", "Z1", "A1", "Z2", "Y_hat"):
        if k not in cache:
            raise ValueError(f"cache must come from mlp_forward; missing {k!r}")
    if Y.shape != cache["Y_hat"].shape:
        raise ValueError(f"Y must have the shape of the prediction {tuple(cache['Y_hat'].shape)}, "
                         f"got {tuple(Y.shape)}")
    dphi = get_activation(activation)[1]
    dpsi = get_activation(output_activation)[1]
    X, Z1, A1, Z2, Y_hat = (cache[k] for k in ("X", "Z1", "A1", "Z2", "Y_hat"))
    N = X.shape[0]
    delta2 = (2.0 / N) * (Y_hat - Y) * dpsi(Z2)              # (N, d_out)
    delta1 = (delta2 @ params["W2"].T) * dphi(Z1)             # (N, d_h)
    return {"W1": X.T @ delta1, "b1": delta1.sum(0),
            "W2": A1.T @ delta2, "b2": delta2.sum(0),
            "delta1": delta1, "delta2": delta2}
