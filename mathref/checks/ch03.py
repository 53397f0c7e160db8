"""Checkers for chapter 3: neurons, activations, the MLP and backprop by hand."""
import torch
from torch import nn

from mathref.checks.core import (exercise, expect, expect_callable, expect_close, expect_tensor_close,
                                 without_autograd)

__all__ = ["check_ch03_sigmoid_derivative", "check_ch03_parameter_count",
           "check_ch03_output_delta", "check_ch03_two_layer_backward"]


def _expect_tensor_close(got, want, what, rtol=1e-7, atol=1e-10):
    expect_tensor_close(got, want, what, rtol=rtol, atol=atol, tensor_only=True,
                        shape_hint=" (a gradient has its parameter's shape)")


def _autograd_grad(f, *inputs):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    return torch.autograd.grad(f(*leaves), leaves)


@exercise("ch03-sigmoid-derivative")
def check_ch03_sigmoid_derivative(sigmoid_derivative):
    """sigmoid_derivative(z) returns σ′(z) = σ(z)(1 − σ(z)) elementwise."""
    expect_callable(sigmoid_derivative, "sigmoid_derivative(z)")
    expect_close(sigmoid_derivative(torch.tensor(0.0, dtype=torch.float64)), 0.25, "σ′(0)")
    z = torch.linspace(-12, 12, 97, dtype=torch.float64)
    (want,) = _autograd_grad(lambda t: torch.sigmoid(t).sum(), z)
    _expect_tensor_close(sigmoid_derivative(z.clone()), want, "σ′(z) on [−12, 12]")
    return "σ′ = σ(1 − σ), at most 1/4"


@exercise("ch03-parameter-count")
def check_ch03_parameter_count(count_mlp_parameters):
    """count_mlp_parameters(sizes) = number of weights and biases of Linear layers
    sizes[0] → sizes[1] → … → sizes[-1]."""
    expect_callable(count_mlp_parameters, "count_mlp_parameters(sizes)")
    for sizes in ([4, 3, 3, 2], [2, 1], [784, 128, 64, 10], [3, 5, 1], [10, 10]):
        torch.manual_seed(0)
        model = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])
        want = sum(p.numel() for p in model.parameters())
        got = count_mlp_parameters(list(sizes))
        expect(got == want, f"sizes {sizes}: nn.Linear layers hold {want} parameters, got {got}")
    return "Σ (n_in + 1)·n_out, as sum(p.numel() for p in model.parameters())"


@exercise("ch03-output-delta")
def check_ch03_output_delta(output_delta):
    """output_delta(Y_hat, Y) = ∂L/∂Ŷ for L = (1/N) Σₙ ‖Ŷₙ − Yₙ‖² (identity output, so also
    δ₂ = ∂L/∂Z₂)."""
    expect_callable(output_delta, "output_delta(Y_hat, Y)")
    by_hand = without_autograd(output_delta)
    gen = torch.Generator().manual_seed(3)
    for n, d in ((5, 3), (8, 1), (2, 4)):
        Y_hat = torch.randn(n, d, generator=gen, dtype=torch.float64)
        Y = torch.randn(n, d, generator=gen, dtype=torch.float64)
        (want,) = _autograd_grad(lambda yh: ((yh - Y) ** 2).sum(dim=1).mean(), Y_hat)
        _expect_tensor_close(by_hand(Y_hat.clone(), Y.clone()), want,
                             f"δ₂ for N={n} examples with {d} outputs")
    return "δ₂ = (2/N)(Ŷ − Y)"


@exercise("ch03-two-layer-backward")
def check_ch03_two_layer_backward(two_layer_backward):
    """two_layer_backward(X, Y, W1, b1, W2, b2) returns (delta1, dW1, db1, dW2, db2) for
    Ŷ = tanh(XW₁ + b₁)W₂ + b₂ and L = (1/N) Σₙ ‖Ŷₙ − Yₙ‖², without autograd; δ₁ = ∂L/∂Z₁ is
    checked on its own, so a wrong hidden delta is named as such."""
    expect_callable(two_layer_backward, "two_layer_backward(X, Y, W1, b1, W2, b2)")
    by_hand = without_autograd(two_layer_backward)
    gen = torch.Generator().manual_seed(4)
    for n, d_in, d_h, d_out in ((6, 3, 4, 2), (10, 2, 5, 1)):
        def r(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float64)
        X, Y = r(n, d_in), r(n, d_out)
        W1, b1, W2, b2 = r(d_in, d_h), r(d_h), r(d_h, d_out), r(d_out)

        def loss(W1, b1, W2, b2):
            Y_hat = torch.tanh(X @ W1 + b1) @ W2 + b2
            return ((Y_hat - Y) ** 2).sum(dim=1).mean()

        want = _autograd_grad(loss, W1, b1, W2, b2)
        # δ₁ = ∂L/∂Z₁, the intermediate: autograd's gradient with respect to Z₁ itself
        (want_delta1,) = _autograd_grad(
            lambda Z1: (((torch.tanh(Z1) @ W2 + b2 - Y) ** 2).sum(dim=1).mean()), X @ W1 + b1)
        got = by_hand(X.clone(), Y.clone(), W1.clone(), b1.clone(), W2.clone(), b2.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 5,
               "expected a tuple (delta1, dW1, db1, dW2, db2) of five tensors")
        # check from the output layer back, so the first wrong quantity is the one reported
        for name, g, w in (("dW2", got[3], want[2]), ("db2", got[4], want[3]),
                           ("delta1 = ∂L/∂Z1", got[0], want_delta1),
                           ("dW1", got[1], want[0]), ("db1", got[2], want[1])):
            _expect_tensor_close(g, w, f"{name} (N={n}, d_in={d_in}, d_h={d_h}, d_out={d_out})")
    return "δ₁ and all four gradients match autograd in float64, computed without it"
