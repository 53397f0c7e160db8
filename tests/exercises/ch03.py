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
    return X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_derivative_at_activation(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = (d2 @ W2.T) * (1 - torch.tanh(A1) ** 2)   # φ′ evaluated at A1 instead of Z1
    return X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_forgot_activation_derivative(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = d2 @ W2.T
    return X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_bias_mean(X, Y, W1, b1, W2, b2):
    Z1, A1, Y_hat = _forward(X, W1, b1, W2, b2)
    d2 = 2 / X.shape[0] * (Y_hat - Y)
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    return X.T @ d1, d1.mean(0), A1.T @ d2, d2.mean(0)


WRONG_ANSWERS = {
    "ch03-sigmoid-derivative": [sigmoid_derivative_of_activation, sigmoid_itself,
                                sigmoid_derivative_tanh_style],
    "ch03-parameter-count": [count_without_biases, count_units, count_bias_on_inputs],
    "ch03-output-delta": [delta_without_factor, delta_sign_flipped, delta_mean_over_all_entries],
    "ch03-two-layer-backward": [backward_missing_two_over_n, backward_derivative_at_activation,
                                backward_forgot_activation_derivative, backward_bias_mean],
}
