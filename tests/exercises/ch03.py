"""Typical wrong answers to chapter 3's exercises: each must fail its checker."""
import torch


def sigmoid_derivative_of_activation(z):
    return z * (1 - z)                     # a(1 − a) applied to z instead of to a = σ(z)


def sigmoid_itself(z):
    return torch.sigmoid(z)


def sigmoid_derivative_tanh_style(z):
    return 1 - torch.sigmoid(z) ** 2


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
                                sigmoid_derivative_tanh_style],
    "ch03-parameter-count": [count_without_biases, count_units, count_bias_on_inputs],
    "ch03-output-delta": [delta_without_factor, delta_sign_flipped, delta_mean_over_all_entries],
    "ch03-two-layer-backward": [backward_missing_two_over_n, backward_derivative_at_activation,
                                backward_forgot_activation_derivative, backward_bias_mean,
                                backward_delta1_before_derivative, backward_four_gradients_only],
}
