"""Deep networks: initialization, dropout, and per-layer statistics. See chapter 7.

    Xavier/Glorot   Var(w) = gain² · 2 / (n_in + n_out)       (normal: std; uniform: ±√3·std)
    He/Kaiming      Var(w) = gain² / n_fan,  gain² = 2 for ReLU, so Var(w) = 2 / n_in
    inverted dropout  y = m ⊙ x / (1 − p),  m_i ~ Bernoulli(1 − p) independently,  E[y] = x
    residual block    h_{l+1} = h_l + α F(h_l),  ∂h_{l+1}/∂h_l = I + α ∂F/∂h_l

``mathref.nn`` re-exports ``xavier_`` and ``kaiming_`` (the course's contract names them
``mathref.nn.xavier_`` / ``mathref.nn.kaiming_``).
"""
import math

import torch
from torch import nn

from mathref._validation import check_int, check_number

__all__ = ["fan_in_and_fan_out", "calculate_gain", "xavier_", "kaiming_", "dropout", "Dropout",
           "ResidualBlock", "DeepMLP", "deep_mlp", "layer_statistics"]

_DISTRIBUTIONS = ("normal", "uniform")


def _check_tensor(tensor, name="tensor"):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if not tensor.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {tensor.dtype}")


def fan_in_and_fan_out(tensor):
    """(n_in, n_out) of a weight of shape [out, in, *kernel], as PyTorch counts them. See chapter 7.

    n_in = in · prod(kernel) and n_out = out · prod(kernel): the number of inputs that feed one
    output unit, and the number of outputs one input unit feeds (``nn.Linear.weight`` is [out, in]).
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dim() < 2:
        raise ValueError(f"fan in and fan out need a tensor with at least 2 dimensions, "
                         f"got shape {tuple(tensor.shape)}")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def calculate_gain(nonlinearity, param=None):
    """The gain g with Var(w) = g²/n that keeps activation variance constant. See chapter 7.

    linear, sigmoid: 1;  tanh: 5/3;  relu: √2 (half of the units are zeroed, E[relu(z)²] = Var(z)/2);
    leaky_relu with slope a: √(2 / (1 + a²)). These are PyTorch's values (``nn.init.calculate_gain``).
    """
    if nonlinearity in ("linear", "identity", "sigmoid"):
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3.0
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else param
        if not isinstance(slope, (int, float)) or isinstance(slope, bool):
            raise ValueError(f"param (the leaky_relu slope) must be a number, got {param!r}")
        return math.sqrt(2.0 / (1 + slope ** 2))
    raise ValueError(f"nonlinearity must be one of linear, sigmoid, tanh, relu, leaky_relu, "
                     f"got {nonlinearity!r}")


def _fill(tensor, std, distribution, generator):
    if distribution not in _DISTRIBUTIONS:
        raise ValueError(f"distribution must be 'normal' or 'uniform', got {distribution!r}")
    with torch.no_grad():
        if distribution == "normal":
            return tensor.normal_(0.0, std, generator=generator)
        bound = math.sqrt(3.0) * std  # U(−b, b) has variance b²/3
        return tensor.uniform_(-bound, bound, generator=generator)


def xavier_(tensor, gain=1.0, distribution="normal", generator=None):
    """Xavier/Glorot initialization, in place. See chapter 7.

    std = gain · √(2 / (n_in + n_out)); "uniform" draws from U(−√3·std, √3·std), the same
    variance. Matches ``nn.init.xavier_normal_`` / ``nn.init.xavier_uniform_``.
    """
    _check_tensor(tensor)
    check_number("gain", gain, min=0.0)
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / (fan_in + fan_out))
    return _fill(tensor, std, distribution, generator)


def kaiming_(tensor, nonlinearity="relu", mode="fan_in", distribution="normal", a=0.0,
             generator=None):
    """He/Kaiming initialization, in place. See chapter 7.

    std = gain / √n with n = n_in (mode="fan_in", preserves activations in the forward pass) or
    n_out (mode="fan_out", preserves gradients in the backward pass); for ReLU gain² = 2, so
    Var(w) = 2 / n_in. ``a`` is the leaky_relu slope. Matches ``nn.init.kaiming_normal_`` /
    ``nn.init.kaiming_uniform_``.
    """
    _check_tensor(tensor)
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode must be 'fan_in' or 'fan_out', got {mode!r}")
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    fan = fan_in if mode == "fan_in" else fan_out
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return _fill(tensor, std, distribution, generator)


def dropout(x, p, training=True, generator=None):
    """Inverted dropout. See chapter 7.

    Training: y_i = m_i x_i / (1 − p) with m_i ~ Bernoulli(1 − p), each unit independently, so
    E[y_i] = x_i and the kept fraction is random (Binomial), not exactly 1 − p. Evaluation
    (training=False) and p = 0: y = x. p = 1: y = 0. Same statistics as ``F.dropout``.
    """
    _check_tensor(x, "x")
    if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability p must be a number in [0, 1], got {p!r}")
    if not training or p == 0:
        return x
    if p == 1:
        return x * 0.0
    # uniforms in float32 at least: in bfloat16 or float16 rand takes so few values that
    # P(rand >= p) is visibly off 1 − p (about 0.898 at p = 0.1 in bfloat16)
    draw = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
    keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=draw) >= p
    return x * keep / (1.0 - p)


class Dropout(nn.Module):
    """Inverted dropout as a module: active in ``train()`` mode, the identity in ``eval()``. See chapter 7."""

    def __init__(self, p=0.5):
        super().__init__()
        if not isinstance(p, (int, float)) or isinstance(p, bool) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability p must be a number in [0, 1], got {p!r}")
        self.p = p

    def forward(self, x):
        return dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


_ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "linear": nn.Identity}


class ResidualBlock(nn.Module):
    """One block of a deep MLP. See chapter 7.

    plain:     h ↦ φ(W · norm(h) + b)
    residual:  h ↦ h + α · φ(W · norm(h) + b)     (Jacobian I + α ∂F/∂h)
    norm is LayerNorm (pre-norm, as in GPT) when ``norm=True``, else the identity.

    The activation comes after the Linear, so zeroing W and b makes a residual block the
    identity but untrainable: the pre-activation is 0, relu′(0) = 0 in PyTorch, and W and b get
    exactly zero gradient (chapter 7 measures it). Identity-at-start schemes zero the last
    layer of a longer branch (Fixup) or gate the branch with a trainable scalar at 0 (ReZero).
    """

    def __init__(self, width, activation="relu", residual=False, norm=False, alpha=1.0):
        super().__init__()
        width = check_int("width", width, min=1)
        check_number("alpha", alpha)
        if activation not in _ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(_ACTIVATIONS)}, got {activation!r}")
        self.norm = nn.LayerNorm(width) if norm else nn.Identity()
        self.linear = nn.Linear(width, width)
        self.act = _ACTIVATIONS[activation]()
        self.residual = residual
        self.alpha = alpha

    def forward(self, h):
        f = self.act(self.linear(self.norm(h)))
        return h + self.alpha * f if self.residual else f


class DeepMLP(nn.Module):
    """Input layer, ``depth`` blocks of equal width, linear read-out. See chapter 7."""

    def __init__(self, in_features, width, depth, out_features, activation="relu",
                 residual=False, norm=False, alpha=1.0):
        super().__init__()
        for name, value in (("in_features", in_features), ("width", width),
                            ("out_features", out_features)):
            check_int(name, value, min=1)
        check_int("depth", depth, min=0)
        self.inp = nn.Linear(in_features, width)
        self.blocks = nn.ModuleList(ResidualBlock(width, activation, residual, norm, alpha)
                                    for _ in range(depth))
        self.out = nn.Linear(width, out_features)

    def forward(self, x):
        h = self.inp(x)
        for block in self.blocks:
            h = block(h)
        return self.out(h)


def deep_mlp(in_features, width, depth, out_features, activation="relu", residual=False,
             norm=False, alpha=1.0, init="default"):
    """Build a DeepMLP and initialize its blocks' weights. See chapter 7.

    ``depth`` must be at least 1 here (``DeepMLP`` itself accepts 0: input and read-out only).
    init: "default" (PyTorch's nn.Linear init, Var(w) = 1/(3 n_in)), "xavier", "he", or a number
    used as the standard deviation of every block weight. Biases of the blocks start at zero
    except with "default".

    "xavier": std = gain · √(2 / (n_in + n_out));  "he": std = gain / √n_in (fan_in mode), both
    with the activation's gain (``calculate_gain``): √2 for relu, 5/3 for tanh, 1 for sigmoid
    and linear, as ``nn.init.kaiming_normal_(w, nonlinearity=activation)`` does. He's derivation
    (Var(w) = 2/n_in) is for ReLU; for the other activations "he" is the same fan_in rule with
    their gain.
    """
    for name, value in (("in_features", in_features), ("width", width),
                        ("depth", depth), ("out_features", out_features)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    model = DeepMLP(in_features, width, depth, out_features, activation, residual, norm, alpha)
    if init == "default":
        return model
    for block in model.blocks:
        w = block.linear.weight
        if init == "xavier":
            xavier_(w, gain=calculate_gain(activation))
        elif init == "he":
            kaiming_(w, nonlinearity=activation)      # gain of the activation, not always 1
        elif isinstance(init, (int, float)) and not isinstance(init, bool) and init >= 0:
            with torch.no_grad():
                w.normal_(0.0, float(init))
        else:
            raise ValueError(f"init must be 'default', 'xavier', 'he' or a std >= 0, got {init!r}")
        nn.init.zeros_(block.linear.bias)
    return model


def layer_statistics(model, x, y, loss_fn, layers=None):
    """Forward and backward once; per-layer statistics of activations and gradients. See chapter 7.

    ``layers`` (default: ``model.blocks``) is a list of modules; for each, with h_l its output:
      "activation_std":   std(h_l) over the batch and features
      "activation_grad":  ‖∂L/∂h_l‖ (Frobenius norm over the batch)
      "weight_grad":      ‖∂L/∂θ_l‖, the norm of the gradients of the layer's parameters
    Returns a dict of lists (one entry per layer, first layer first) and "loss". The model's
    ``.grad`` fields are overwritten.
    """
    if layers is None:
        if not hasattr(model, "blocks"):
            raise ValueError("pass layers=[...] for a model without a .blocks attribute")
        layers = list(model.blocks)
    layers = list(layers)
    if not layers:
        raise ValueError("layers is empty")
    outputs = []

    def keep(module, inputs, output):
        output.retain_grad()
        outputs.append(output)

    handles = [layer.register_forward_hook(keep) for layer in layers]
    try:
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        if loss.dim() != 0:
            raise ValueError(f"loss_fn must return a scalar, got shape {tuple(loss.shape)}")
        loss.backward()
    finally:
        for handle in handles:
            handle.remove()
    if len(outputs) != len(layers):
        raise ValueError(f"each layer must be called exactly once, got {len(outputs)} outputs "
                         f"for {len(layers)} layers")

    def grad_norm(layer):
        grads = [p.grad for p in layer.parameters() if p.grad is not None]
        return math.sqrt(sum(float(g.pow(2).sum()) for g in grads)) if grads else 0.0

    return {
        "loss": loss.item(),
        "activation_std": [float(h.detach().std()) for h in outputs],
        "activation_grad": [float(h.grad.norm()) for h in outputs],
        "weight_grad": [grad_norm(layer) for layer in layers],
    }
