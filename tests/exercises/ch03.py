"""Typical wrong answers to chapter 3's exercises: each must fail its checker."""
import math

import torch


def sigmoid_derivative_of_activation(z):
    return z * (1 - z)                     # a(1 − a) applied to z instead of to a = σ(z)


def sigmoid_itself(z):
    return torch.sigmoid(z)


def sigmoid_derivative_tanh_style(z):
    return 1 - torch.sigmoid(z) ** 2


def sigmoid_derivative_from_exp(z):
    e = torch.exp(-z)                      # overflows for large −z: inf / inf = NaN
    return e / (1 + e) ** 2


def sigmoid_derivative_in_float64(z):
    s = torch.sigmoid(z.double())          # right values, but float64 for a float32 z
    return s * (1 - s)


def count_without_biases(sizes):
    return sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))


def count_units(sizes):
    return sum(sizes)


def count_bias_on_inputs(sizes):
    return sum(a * (b + 1) for a, b in zip(sizes[:-1], sizes[1:]))


def delta_without_factor(Y_hat, Y):
    return Y_hat - Y


def delta_sign_flipped(Y_hat, Y):
    return 2 / Y.shape[0] * (Y - Y_hat)


def delta_mean_over_all_entries(Y_hat, Y):
    return 2 * (Y_hat - Y) / Y.numel()     # F.mse_loss's normalization, not (1/N) Σ ‖·‖²


def _forward(X, W1, b1, W2, b2):
    Z1 = X @ W1 + b1
    A1 = torch.tanh(Z1)
    return Z1, A1, A1 @ W2 + b2


def backward_missing_two_over_n(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = Y_hat - Y
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_derivative_at_activation(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = (d2 @ W2.T) * (1 - torch.tanh(A1) ** 2)   # φ′ evaluated at A1 instead of Z1
    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_forgot_activation_derivative(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = d2 @ W2.T
    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_bias_mean(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    return d1, X.T @ d1, d1.mean(0), A1.T @ d2, d2.mean(0)


def backward_delta1_before_derivative(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    return d2 @ W2.T, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)   # ∂L/∂A1 returned as δ₁


def backward_four_gradients_only(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    return X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)               # the old four-tuple, no δ₁


# Answers that are right but use autograd, which the statement forbids: each must fail.
def delta_by_autograd(Y_hat, Y):
    Y_hat = Y_hat.detach().clone().requires_grad_(True)
    ((Y_hat - Y) ** 2).sum(dim=1).mean().backward()
    return Y_hat.grad


def backward_by_autograd(X, Y, W1, b1, W2, b2):
    Z1 = (X @ W1 + b1).detach().requires_grad_(True)
    params = [p.detach().clone().requires_grad_(True) for p in (W1, b1, W2, b2)]
    loss = ((torch.tanh(X @ params[0] + params[1]) @ params[2] + params[3] - Y) ** 2).sum(1).mean()
    grads = torch.autograd.grad(loss, params)
    (delta1,) = torch.autograd.grad(((torch.tanh(Z1) @ W2 + b2 - Y) ** 2).sum(1).mean(), Z1)
    return (delta1, *grads)


AUTOGRAD_CHEATS = {
    "ch03-output-delta": [delta_by_autograd],
    "ch03-two-layer-backward": [backward_by_autograd],
}

WRONG_ANSWERS = {
    "ch03-sigmoid-derivative": [sigmoid_derivative_of_activation, sigmoid_itself,
                                sigmoid_derivative_tanh_style, sigmoid_derivative_from_exp,
                                sigmoid_derivative_in_float64],
    "ch03-parameter-count": [count_without_biases, count_units, count_bias_on_inputs],
    "ch03-output-delta": [delta_without_factor, delta_sign_flipped, delta_mean_over_all_entries],
    "ch03-two-layer-backward": [backward_missing_two_over_n, backward_derivative_at_activation,
                                backward_forgot_activation_derivative, backward_bias_mean,
                                backward_delta1_before_derivative, backward_four_gradients_only],
}


# The one-line mathref calls and PyTorch built-ins: each must fail (they are shortcuts too).
def sigmoid_derivative_by_mathref(z):
    from mathref.nn import sigmoid_grad
    return sigmoid_grad(z)


def count_by_mathref(sizes):
    from mathref.nn import count_parameters
    return count_parameters(sizes)


def count_by_building_layers(sizes):
    layers = [torch.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    return sum(p.numel() for layer in layers for p in layer.parameters())


def backward_by_mathref(X, Y, W1, b1, W2, b2):
    from mathref.nn import mlp_backward, mlp_forward
    params = {"W1": W1, "b1": b1, "W2": W2, "b2": b2}
    _, cache = mlp_forward(X, params, activation="tanh")
    g = mlp_backward(Y, params, cache, activation="tanh")
    return g["delta1"], g["W1"], g["b1"], g["W2"], g["b2"]


def backward_by_finite_differences(X, Y, W1, b1, W2, b2, h=1e-5):
    def fd(f, x):
        g = torch.zeros_like(x)
        flat, gflat = x.view(-1), g.view(-1)
        for i in range(flat.numel()):
            old = flat[i].item()
            flat[i] = old + h
            up = float(f())
            flat[i] = old - h
            down = float(f())
            flat[i] = old
            gflat[i] = (up - down) / (2 * h)
        return g
    Z1 = X @ W1 + b1
    loss = lambda: ((torch.tanh(X @ W1 + b1) @ W2 + b2 - Y) ** 2).sum(1).mean()
    d1 = fd(lambda: ((torch.tanh(Z1) @ W2 + b2 - Y) ** 2).sum(1).mean(), Z1)
    return d1, fd(loss, W1), fd(loss, b1), fd(loss, W2), fd(loss, b2)


def sigmoid_derivative_by_autograd(z):
    z = z.detach().clone().requires_grad_(True)
    torch.sigmoid(z).sum().backward()
    return z.grad


WRONG_ANSWERS["ch03-sigmoid-derivative"].append(sigmoid_derivative_by_mathref)
WRONG_ANSWERS["ch03-parameter-count"] += [count_by_mathref, count_by_building_layers]
WRONG_ANSWERS["ch03-two-layer-backward"] += [backward_by_mathref, backward_by_finite_differences]
AUTOGRAD_CHEATS["ch03-sigmoid-derivative"] = [sigmoid_derivative_by_autograd]


# Solutions written as a student would, calling what the exercise asks them to write (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch03-sigmoid-derivative": [
        "from mathref import nn as mnn\n\n"
        "def sigmoid_derivative(z):\n"
        "    return mnn.sigmoid_grad(z)\n",
        "from mathref.nn import get_activation\n\n"
        "def sigmoid_derivative(z):\n"
        "    sigma, dsigma = get_activation('sigmoid')\n"
        "    return dsigma(z)\n",
        "import torch\n\n"
        "def sigmoid_derivative(z):\n"
        "    return torch.ops.aten.sigmoid_backward(torch.ones_like(z), torch.sigmoid(z))\n",
        "import torch\n\n"
        "def sigmoid_derivative(z):\n"
        "    return torch.vmap(torch.func.grad(torch.sigmoid))(z.reshape(-1)).reshape(z.shape)\n",
    ],
    "ch03-parameter-count": [
        "import mathref\n\n"
        "def count_mlp_parameters(sizes):\n"
        "    return mathref.nn.count_parameters(sizes)\n",
        "from torch import nn\n\n"
        "def count_mlp_parameters(sizes):\n"
        "    model = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])\n"
        "    return sum(p.numel() for p in model.parameters())\n",
        "from mathref.nn import MLP\n\n"
        "def count_mlp_parameters(sizes):\n"
        "    return sum(p.numel() for p in MLP(sizes).parameters())\n",
    ],
    "ch03-output-delta": [
        "import torch\n\n"
        "def output_delta(Y_hat, Y):\n"
        "    g = torch.ops.aten.mse_loss_backward(torch.tensor(1.0, dtype=Y.dtype), Y_hat, Y, 1)\n"
        "    return g * Y.shape[1]\n",
        "import torch\n"
        "from mathref.linear_regression import mse_gradient\n\n"
        "def output_delta(Y_hat, Y):\n"
        "    N, m = Y_hat.shape\n"
        "    return mse_gradient(torch.eye(N, dtype=Y.dtype), Y_hat, torch.zeros(m, dtype=Y.dtype), Y)[0]\n",
        "import torch.nn.functional as F\n"
        "from mathref.calculus import numerical_gradient\n\n"
        "def output_delta(Y_hat, Y):\n"
        "    return numerical_gradient(lambda P: F.mse_loss(P, Y, reduction='sum') / len(Y), Y_hat)\n",
        "import torch\n\n"
        "def output_delta(Y_hat, Y):\n"
        "    with torch.enable_grad():\n"
        "        P = Y_hat.detach().clone().requires_grad_()\n"
        "        ((P - Y) ** 2).sum(1).mean().backward()\n"
        "    return P.grad\n",
    ],
    "ch03-two-layer-backward": [
        "from mathref.nn import mlp_backward, mlp_forward\n\n"
        "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
        "    params = dict(W1=W1, b1=b1, W2=W2, b2=b2)\n"
        "    _, cache = mlp_forward(X, params, activation='tanh')\n"
        "    g = mlp_backward(Y, params, cache, activation='tanh')\n"
        "    return g['delta1'], g['W1'], g['b1'], g['W2'], g['b2']\n",
        "import torch\n"
        "from mathref.calculus import numerical_gradient as ng\n\n"
        "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
        "    L = lambda W1, b1, W2, b2: ((torch.tanh(X @ W1 + b1) @ W2 + b2 - Y) ** 2).sum(1).mean()\n"
        "    Z1 = X @ W1 + b1\n"
        "    d1 = ng(lambda Z: ((torch.tanh(Z) @ W2 + b2 - Y) ** 2).sum(1).mean(), Z1)\n"
        "    return (d1, ng(lambda W: L(W, b1, W2, b2), W1), ng(lambda b: L(W1, b, W2, b2), b1),\n"
        "            ng(lambda W: L(W1, b1, W, b2), W2), ng(lambda b: L(W1, b1, W2, b), b2))\n",
        "import torch\n\n"
        "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
        "    def loss(Z1, W1, b1, W2, b2):\n"
        "        return ((torch.tanh(Z1) @ W2 + b2 - Y) ** 2).sum(1).mean()\n"
        "    L = lambda W1, b1, W2, b2: loss(X @ W1 + b1, W1, b1, W2, b2)\n"
        "    d1 = torch.func.grad(loss)(X @ W1 + b1, W1, b1, W2, b2)\n"
        "    return (d1, *torch.func.grad(L, argnums=(0, 1, 2, 3))(W1, b1, W2, b2))\n",
    ],
}

# Right answers in other forms than the reference solution: each must pass.
RIGHT_ANSWERS = {
    "ch03-sigmoid-derivative": [
        "import torch\n\n"
        "def sigmoid_derivative(z):\n"
        "    return torch.sigmoid(z) * torch.sigmoid(-z)\n",
        # σ′ is even, so exp(−|z|) gives it without overflow (exp(−z) alone overflows: a wrong answer)
        "import torch\n\n"
        "def sigmoid_derivative(z):\n"
        "    e = torch.exp(-z.abs())\n"
        "    return e / (1 + e) ** 2\n",
        "import torch\n\n"
        "def sigmoid_derivative(z):\n"
        "    return 0.25 / torch.cosh(z / 2) ** 2\n",
        "from mathref import nn as mnn\n\n"
        "def sigmoid_derivative(z):\n"
        "    s = mnn.sigmoid(z)\n"
        "    return s - s * s\n",
    ],
    "ch03-parameter-count": [
        "def count_mlp_parameters(sizes):\n"
        "    total = 0\n"
        "    for n_in, n_out in zip(sizes, sizes[1:]):\n"
        "        total += n_in * n_out + n_out\n"
        "    return total\n",
        "import numpy as np\n\n"
        "def count_mlp_parameters(sizes):\n"
        "    s = np.array(sizes)\n"
        "    return int(((s[:-1] + 1) * s[1:]).sum())\n",
    ],
    "ch03-output-delta": [
        "def output_delta(Y_hat, Y):\n"
        "    return 2 * (Y_hat - Y) / len(Y_hat)\n",
        "def output_delta(Y_hat, Y):\n"
        "    return (Y_hat - Y).mul(2 / Y_hat.size(0))\n",
    ],
    "ch03-two-layer-backward": [
        # mathref's forward pass and tanh′ are building blocks; the deltas are written out
        "import torch\n"
        "from mathref import nn as mnn\n\n"
        "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
        "    params = dict(W1=W1, b1=b1, W2=W2, b2=b2)\n"
        "    Y_hat, cache = mnn.mlp_forward(X, params, activation='tanh')\n"
        "    d2 = 2 * (Y_hat - Y) / X.shape[0]\n"
        "    d1 = d2 @ W2.T * mnn.tanh_grad(cache['Z1'])\n"
        "    return d1, X.T @ d1, d1.sum(0), cache['A1'].T @ d2, d2.sum(0)\n",
        "import torch\n\n"
        "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
        "    Z1 = torch.addmm(b1, X, W1)\n"
        "    A1 = torch.tanh(Z1)\n"
        "    d2 = (A1 @ W2 + b2 - Y) * (2.0 / len(X))\n"
        "    d1 = torch.einsum('no,ho->nh', d2, W2) / torch.cosh(Z1) ** 2\n"
        "    return (d1, torch.einsum('ni,nh->ih', X, d1), d1.sum(dim=0),\n"
        "            torch.einsum('nh,no->ho', A1, d2), d2.sum(dim=0))\n",
    ],
}


def delta_by_complex_step(Y_hat, Y):   # a numerical derivative, exact to the last digit
    N = Y_hat.shape[0]
    z = Y_hat.to(torch.complex128) + 1e-30j
    return (((z - Y) ** 2).imag / 1e-30 / N).to(Y_hat.dtype)


WRONG_ANSWERS["ch03-output-delta"].append(delta_by_complex_step)


# Numerical derivatives that a float64 check at rounding accuracy refuses (a third read, 2026-11-29)
def _sigmoid_stencil6(z, h):
    s = torch.sigmoid
    return (45 * (s(z + h) - s(z - h)) - 9 * (s(z + 2 * h) - s(z - 2 * h))
            + (s(z + 3 * h) - s(z - 3 * h))) / (60 * h)


def sigmoid_derivative_by_central_difference(z, h=1e-5):
    zd = z.double()
    return ((torch.sigmoid(zd + h) - torch.sigmoid(zd - h)) / (2 * h)).to(z.dtype)


def sigmoid_derivative_by_richardson(z):           # one Richardson step, h = 1e-2
    zd, h = z.double(), 1e-2
    d = lambda h: (torch.sigmoid(zd + h) - torch.sigmoid(zd - h)) / (2 * h)
    return ((4 * d(h / 2) - d(h)) / 3).to(z.dtype)


def sigmoid_derivative_by_richardson_levels(z):    # chapter 4's: h0 = 0.25, 5 levels
    zd = z.double()
    d = lambda h: (torch.sigmoid(zd + h) - torch.sigmoid(zd - h)) / (2 * h)
    table = [d(0.25 / 2 ** k) for k in range(5)]
    for j in range(1, 5):
        table = [(4 ** j * table[k + 1] - table[k]) / (4 ** j - 1) for k in range(len(table) - 1)]
    return table[0].to(z.dtype)


def sigmoid_derivative_by_sixth_order_stencil(z):  # its best step on [−12, 12]
    return _sigmoid_stencil6(z.double(), 3e-2).to(z.dtype)


def _stencil6(f, P, h):
    """A sixth-order central difference of the scalar f(P) in every entry of P."""
    g = torch.empty_like(P)
    for i in range(P.numel()):
        def at(s):
            Q = P.clone()
            Q.view(-1)[i] += s
            return f(Q)
        g.view(-1)[i] = (45 * (at(h) - at(-h)) - 9 * (at(2 * h) - at(-2 * h))
                         + (at(3 * h) - at(-3 * h))) / (60 * h)
    return g


def _backward_by_stencil6(X, Y, W1, b1, W2, b2, h):
    L = lambda W1, b1, W2, b2: ((torch.tanh(X @ W1 + b1) @ W2 + b2 - Y) ** 2).sum(1).mean()
    LZ = lambda Z: ((torch.tanh(Z) @ W2 + b2 - Y) ** 2).sum(1).mean()
    return (_stencil6(LZ, X @ W1 + b1, h), _stencil6(lambda P: L(P, b1, W2, b2), W1, h),
            _stencil6(lambda P: L(W1, P, W2, b2), b1, h), _stencil6(lambda P: L(W1, b1, P, b2), W2, h),
            _stencil6(lambda P: L(W1, b1, W2, P), b2, h))


def backward_by_sixth_order_stencil(X, Y, W1, b1, W2, b2):       # h = 1e-2
    return _backward_by_stencil6(X, Y, W1, b1, W2, b2, 1e-2)


def backward_by_sixth_order_stencil_fine(X, Y, W1, b1, W2, b2):  # h = 3e-3, its best step
    return _backward_by_stencil6(X, Y, W1, b1, W2, b2, 3e-3)


def backward_delta1_by_stencil(X, Y, W1, b1, W2, b2):
    # δ₁ by a difference quotient, everything else from it by the chain rule
    A1 = torch.tanh(X @ W1 + b1)
    d2 = 2 / X.shape[0] * (A1 @ W2 + b2 - Y)
    d1 = _stencil6(lambda Z: ((torch.tanh(Z) @ W2 + b2 - Y) ** 2).sum(1).mean(), X @ W1 + b1, 1e-2)
    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_in_float32(X, Y, W1, b1, W2, b2):
    X, Y, W1, b1, W2, b2 = (t.float() for t in (X, Y, W1, b1, W2, b2))
    A1 = torch.tanh(X @ W1 + b1)
    d2 = 2 / X.shape[0] * (A1 @ W2 + b2 - Y)
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    return tuple(t.double() for t in (d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)))


def count_by_conv1d_state_dict(sizes):              # a layer by another name
    return sum(v.numel() for a, b in zip(sizes, sizes[1:])
               for v in torch.nn.Conv1d(a, b, 1).state_dict().values())


def count_as_float(sizes):
    return float(sum((a + 1) * b for a, b in zip(sizes, sizes[1:])))


def count_as_tensor(sizes):
    return torch.tensor(sum((a + 1) * b for a, b in zip(sizes, sizes[1:])))


def count_as_numpy_int(sizes):
    import numpy as np
    return np.int64(sum((a + 1) * b for a, b in zip(sizes, sizes[1:])))


def delta_in_float32(Y_hat, Y):
    return (2 / Y_hat.shape[0] * (Y_hat - Y)).float()


WRONG_ANSWERS["ch03-sigmoid-derivative"] += [
    sigmoid_derivative_by_central_difference, sigmoid_derivative_by_richardson,
    sigmoid_derivative_by_richardson_levels, sigmoid_derivative_by_sixth_order_stencil]
WRONG_ANSWERS["ch03-two-layer-backward"] += [
    backward_by_sixth_order_stencil, backward_by_sixth_order_stencil_fine,
    backward_delta1_by_stencil, backward_in_float32]
WRONG_ANSWERS["ch03-parameter-count"] += [count_by_conv1d_state_dict, count_as_float,
                                          count_as_tensor, count_as_numpy_int]
WRONG_ANSWERS["ch03-output-delta"].append(delta_in_float32)

RIGHT_ANSWERS["ch03-sigmoid-derivative"] += [
    # PyTorch's own name for the logistic sigmoid
    "import torch\n\n"
    "def sigmoid_derivative(z):\n"
    "    s = torch.special.expit(z)\n"
    "    return s * (1 - s)\n",
    "import torch\n\n"
    "def sigmoid_derivative(z):\n"
    "    return 0.25 * (1 - torch.tanh(z / 2) ** 2)\n",
]


def backward_by_richardson(X, Y, W1, b1, W2, b2):
    # per entry, five levels from h0 = 0.25 (chapter 4's extrapolation; the closest step tried)
    def richardson(f, h0=0.25, levels=5):
        d = lambda h: (f(h) - f(-h)) / (2 * h)
        table = [d(h0 / 2 ** k) for k in range(levels)]
        for j in range(1, levels):
            table = [(4 ** j * table[k + 1] - table[k]) / (4 ** j - 1) for k in range(len(table) - 1)]
        return table[0]

    def grad(P, loss):
        g = torch.zeros_like(P)
        for i in range(P.numel()):
            e = torch.zeros_like(P)
            e.view(-1)[i] = 1
            g.view(-1)[i] = richardson(lambda t: loss(P + t * e))
        return g
    L = lambda W1, b1, W2, b2: ((torch.tanh(X @ W1 + b1) @ W2 + b2 - Y) ** 2).sum(1).mean().item()
    LZ = lambda Z: ((torch.tanh(Z) @ W2 + b2 - Y) ** 2).sum(1).mean().item()
    return (grad(X @ W1 + b1, LZ), grad(W1, lambda P: L(P, b1, W2, b2)),
            grad(b1, lambda P: L(W1, P, W2, b2)), grad(W2, lambda P: L(W1, b1, P, b2)),
            grad(b2, lambda P: L(W1, b1, W2, P)))


WRONG_ANSWERS["ch03-two-layer-backward"].append(backward_by_richardson)


# Found by the fifth read (2026-11-29): a one-sided difference quotient of the loss, and the
# 1 − Z₁² slip for tanh′ (now named by the checker)
def _delta_by_forward_difference(Y_hat, Y, h):
    loss = lambda P: ((P - Y) ** 2).sum(1).mean()
    g = torch.empty_like(Y_hat)
    for i in range(Y_hat.numel()):
        P = Y_hat.clone()
        P.view(-1)[i] += h
        g.view(-1)[i] = (loss(P) - loss(Y_hat)) / h
    return g


def delta_by_forward_difference(Y_hat, Y):           # h = 1e-7
    return _delta_by_forward_difference(Y_hat, Y, 1e-7)


def delta_by_forward_difference_best_step(Y_hat, Y):  # h = 1e-8 ≈ √ε, its best step
    return _delta_by_forward_difference(Y_hat, Y, 1e-8)


def delta_by_central_difference_small_step(Y_hat, Y):   # the read's attack: h = 1e-7
    loss = lambda P: ((P - Y) ** 2).sum(1).mean()
    g = torch.empty_like(Y_hat)
    for i in range(Y_hat.numel()):
        up, down = Y_hat.clone(), Y_hat.clone()
        up.view(-1)[i] += 1e-7
        down.view(-1)[i] -= 1e-7
        g.view(-1)[i] = (loss(up) - loss(down)) / 2e-7
    return g


def backward_one_minus_z_squared(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = (d2 @ W2.T) * (1 - Z1 ** 2)                # tanh′ as 1 − Z₁², not 1 − A₁²
    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


WRONG_ANSWERS["ch03-output-delta"] += [delta_by_forward_difference,
                                       delta_by_forward_difference_best_step,
                                       delta_by_central_difference_small_step]
WRONG_ANSWERS["ch03-two-layer-backward"].append(backward_one_minus_z_squared)


# The eighth read (2026-11-29): σ′ taken out of mathref's SiLU derivative, directly or through
# get_activation, is refused; a count that drops the last layer fails without being blamed on
# the biases (on [4, 3, 3, 2] it equals the weights alone, 27)
def sigmoid_derivative_from_silu_grad(z):
    from mathref import nn as mnn
    s = torch.sigmoid(z)                   # SiLU′ = σ + zσ′, so σ′ = (SiLU′ − σ)/z, 1/4 at 0
    safe = torch.where(z == 0, torch.ones_like(z), z)
    return torch.where(z == 0, torch.full_like(z, 0.25), (mnn.silu_grad(z) - s) / safe)


def sigmoid_derivative_from_silu_activation(z):
    from mathref import nn as mnn
    s = torch.sigmoid(z)
    safe = torch.where(z == 0, torch.ones_like(z), z)
    dsilu = mnn.get_activation("silu")[1]
    return torch.where(z == 0, torch.full_like(z, 0.25), (dsilu(z) - s) / safe)


def count_dropping_last_layer(sizes):
    return sum((a + 1) * b for a, b in zip(sizes, sizes[1:-1]))


WRONG_ANSWERS["ch03-sigmoid-derivative"] += [sigmoid_derivative_from_silu_grad,
                                             sigmoid_derivative_from_silu_activation]
WRONG_ANSWERS["ch03-parameter-count"].append(count_dropping_last_layer)

# The eighth read: σ′ out of mathref's SiLU derivative is a shortcut (named silu_grad); out of
# tanh's, σ′(z) = tanh′(z/2)/4, it is allowed, as the statement says
SHORTCUTS["ch03-sigmoid-derivative"].append(
    "import torch\n"
    "from mathref import nn as mnn\n\n"
    "def sigmoid_derivative(z):\n"
    "    safe = torch.where(z == 0, torch.ones_like(z), z)\n"
    "    return torch.where(z == 0, torch.full_like(z, 0.25), (mnn.silu_grad(z) - torch.sigmoid(z)) / safe)\n")
RIGHT_ANSWERS["ch03-sigmoid-derivative"].append(
    "from mathref import nn as mnn\n\n"
    "def sigmoid_derivative(z):\n"
    "    return mnn.tanh_grad(z / 2) / 4\n")


# The ninth read (2026-11-30): float32 arithmetic cast back to float64 is named as such
def sigmoid_derivative_in_float32(z):
    s = torch.sigmoid(z.float())           # σ in float32: 1 − σ keeps few digits for large z
    return (s * (1 - s)).to(z.dtype)


WRONG_ANSWERS["ch03-sigmoid-derivative"].append(sigmoid_derivative_in_float32)


# The tenth read (2026-11-30, L2): a stabilising constant added in float64 is neither float32
# arithmetic nor a difference quotient; it is refused as close but not exact, with no cause named
def sigmoid_derivative_plus_eps(z):
    s = torch.sigmoid(z)
    return s * (1 - s) + 1e-8


def sigmoid_derivative_plus_tiny_eps(z):
    s = torch.sigmoid(z)
    return s * (1 - s) + 1e-12


WRONG_ANSWERS["ch03-sigmoid-derivative"] += [sigmoid_derivative_plus_eps, sigmoid_derivative_plus_tiny_eps]


# The ninth read (2026-11-30, M1): a complex step taken in Python's own complex numbers, not in
# torch's, is a numerical derivative exact to the last digit. What runs cannot refuse it (the
# refusal of complex steps sees torch tensors only; Python's complex arithmetic never reaches
# torch), so the three statements say it is not refused and is not a derivation. These forms
# pass, as the statements disclose (tests/test_checks_ch03.py keeps that true); the same step
# in torch's complex tensors (delta_by_complex_step above) stays refused.
_H = 1e-30


def _sigmoid_c(c):                          # σ of a Python complex, overflow-free on either side
    return 1 / (1 + math.e ** -c) if c.real >= 0 else math.e ** c / (1 + math.e ** c)


def sigmoid_derivative_by_python_complex_step(z):
    return torch.tensor([_sigmoid_c(complex(v, _H)).imag / _H for v in z.reshape(-1).tolist()],
                        dtype=z.dtype).reshape(z.shape)


def delta_by_python_complex_step(Y_hat, Y):
    N = Y_hat.shape[0]
    return torch.tensor([[((complex(a, _H) - b) ** 2).imag / _H / N for a, b in zip(ra, rb)]
                         for ra, rb in zip(Y_hat.tolist(), Y.tolist())], dtype=Y_hat.dtype)


def backward_by_python_complex_step(X, Y, W1, b1, W2, b2):
    # the loss in Python complex arithmetic; each entry of Z1, W1, b1, W2, b2 stepped by ih
    Xl, Yl = X.tolist(), Y.tolist()

    def tanh_c(c):                          # (1 − e^{−2c})/(1 + e^{−2c}), odd for Re c < 0
        if c.real < 0:
            return -tanh_c(-c)
        e = math.e ** (-2 * c)
        return (1 - e) / (1 + e)

    def loss_from_Z1(Z1, W2l, b2l):
        total = 0
        for z_row, y_row in zip(Z1, Yl):
            a = [tanh_c(z) for z in z_row]
            for k, y in enumerate(y_row):
                total += (sum(a_j * w[k] for a_j, w in zip(a, W2l)) + b2l[k] - y) ** 2
        return total / len(Xl)

    def Z1_of(W1l, b1l):
        return [[sum(x * w[j] for x, w in zip(row, W1l)) + b1l[j] for j in range(len(b1l))]
                for row in Xl]

    def complex_step(entries, f):           # entries: a list of lists or a list, stepped in place
        rows = entries if isinstance(entries[0], list) else [entries]
        grad = []
        for row in rows:
            g = []
            for j in range(len(row)):
                row[j] += 1j * _H
                g.append(f().imag / _H)
                row[j] -= 1j * _H
            grad.append(g)
        return grad if isinstance(entries[0], list) else grad[0]

    W1l, W2l = [[complex(v) for v in r] for r in W1.tolist()], [[complex(v) for v in r] for r in W2.tolist()]
    b1l, b2l = [complex(v) for v in b1.tolist()], [complex(v) for v in b2.tolist()]
    f = lambda: loss_from_Z1(Z1_of(W1l, b1l), W2l, b2l)
    Z1 = Z1_of(W1l, b1l)
    grads = (complex_step(Z1, lambda: loss_from_Z1(Z1, W2l, b2l)), complex_step(W1l, f),
             complex_step(b1l, f), complex_step(W2l, f), complex_step(b2l, f))
    return tuple(torch.tensor(g, dtype=X.dtype) for g in grads)


DISCLOSED = {"ch03-sigmoid-derivative": [sigmoid_derivative_by_python_complex_step],
             "ch03-output-delta": [delta_by_python_complex_step],
             "ch03-two-layer-backward": [backward_by_python_complex_step]}


# The twelfth read (2026-11-30, L3): the matrix products by another name, as chapter 4 allows
# them: F.linear(X, W1.T, b1) = XW₁ + b₁, F.linear(δ₂, W2) = torch.inner(δ₂, W2) = δ₂W₂ᵀ
def backward_by_f_linear(X, Y, W1, b1, W2, b2):
    F = torch.nn.functional
    A1 = torch.tanh(F.linear(X, W1.T, b1))
    d2 = 2 / X.shape[0] * (F.linear(A1, W2.T, b2) - Y)
    d1 = F.linear(d2, W2) * (1 - A1 ** 2)
    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_by_torch_inner(X, Y, W1, b1, W2, b2):
    A1 = torch.tanh(X @ W1 + b1)
    d2 = 2 / X.shape[0] * (A1 @ W2 + b2 - Y)
    d1 = torch.inner(d2, W2) * (1 - A1 ** 2)
    return d1, torch.inner(X.T, d1.T), d1.sum(0), A1.T @ d2, d2.sum(0)


RIGHT_ANSWERS["ch03-two-layer-backward"] += [
    "import torch\n"
    "import torch.nn.functional as F\n\n"
    "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
    "    A1 = torch.tanh(F.linear(X, W1.T, b1))\n"
    "    d2 = 2 / X.shape[0] * (F.linear(A1, W2.T, b2) - Y)\n"
    "    d1 = F.linear(d2, W2) * (1 - A1 ** 2)\n"
    "    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)\n",
    "import torch\n\n"
    "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
    "    A1 = torch.tanh(X @ W1 + b1)\n"
    "    d2 = 2 / X.shape[0] * (A1 @ W2 + b2 - Y)\n"
    "    d1 = torch.inner(d2, W2) * (1 - A1 ** 2)\n"
    "    return d1, torch.inner(X.T, d1.T), d1.sum(0), A1.T @ d2, d2.sum(0)\n"]


# The twelfth read (L2): δ₂ in float32 arithmetic, cast back to float64 (the dtype is kept, so
# only the values show it)
def delta_in_float32_cast_back(Y_hat, Y):
    return (2 / Y_hat.shape[0] * (Y_hat.float() - Y.float())).double()
