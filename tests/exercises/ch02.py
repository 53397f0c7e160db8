"""Typical wrong answers to chapter 2's exercises: each must fail its checker."""
import torch


def ascent_direction(g):
    return g / g.norm()


def unnormalized_direction(g):
    return -g


def l1_normalized_direction(g):
    return -g / g.abs().sum()


def grad_sign_slip(X, W, b, Y):
    r = Y - (X @ W + b)          # (y − f) without the minus sign of the chain rule
    return (2 / X.shape[0]) * X.T @ r, (2 / X.shape[0]) * r.sum(0)


def grad_sse(X, W, b, Y):
    r = X @ W + b - Y            # the SSE gradient: no 1/N
    return 2 * X.T @ r, 2 * r.sum(0)


def grad_missing_two(X, W, b, Y):
    r = X @ W + b - Y
    return X.T @ r / X.shape[0], r.mean(0)


def grad_bias_not_summed(X, W, b, Y):
    r = X @ W + b - Y            # grad_b left with one row per example: wrong shape
    return (2 / X.shape[0]) * X.T @ r, (2 / X.shape[0]) * r


def lstsq_without_bias(X, y):
    w = torch.linalg.lstsq(X, y.unsqueeze(1)).solution.squeeze(1)
    return w, torch.zeros((), dtype=X.dtype)


def lstsq_bias_row_kept(X, y):
    Xt = torch.cat([X, torch.ones_like(X[:, :1])], dim=1)
    theta = torch.linalg.lstsq(Xt, y.unsqueeze(1)).solution.squeeze(1)
    return theta, theta[-1]


def normal_equations_inverse(X, y):
    Xt = torch.cat([X, torch.ones_like(X[:, :1])], dim=1)
    theta = torch.linalg.inv(Xt.T @ Xt) @ (Xt.T @ y)
    return theta[:-1], theta[-1]


def lr_without_bias_column(X):
    return 2.0 / torch.linalg.eigvalsh((2.0 / X.shape[0]) * X.T @ X).max().item()


def lr_sse_curvature(X):
    Xt = torch.cat([X, torch.ones_like(X[:, :1])], dim=1)
    return 2.0 / torch.linalg.eigvalsh(2.0 * Xt.T @ Xt).max().item()


def lr_one_over_lambda(X):
    Xt = torch.cat([X, torch.ones_like(X[:, :1])], dim=1)
    return 1.0 / torch.linalg.eigvalsh((2.0 / X.shape[0]) * Xt.T @ Xt).max().item()


def lr_smallest_eigenvalue(X):
    Xt = torch.cat([X, torch.ones_like(X[:, :1])], dim=1)
    return 2.0 / torch.linalg.eigvalsh((2.0 / X.shape[0]) * Xt.T @ Xt).min().item()


# A right answer that uses autograd, which the statement forbids: it must fail.
def grad_by_autograd(X, W, b, Y):
    W, b = W.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
    loss = ((X @ W + b - Y) ** 2).sum() / X.shape[0]
    return tuple(torch.autograd.grad(loss, [W, b]))


def grad_by_backward_with_enable_grad(X, W, b, Y):
    with torch.enable_grad():
        W, b = W.detach().clone().requires_grad_(True), b.detach().clone().requires_grad_(True)
        (((X @ W + b - Y) ** 2).sum() / X.shape[0]).backward()
        return W.grad, b.grad


AUTOGRAD_CHEATS = {"ch02-mse-gradient": [grad_by_autograd, grad_by_backward_with_enable_grad]}

WRONG_ANSWERS = {
    "ch02-steepest-descent": [ascent_direction, unnormalized_direction, l1_normalized_direction],
    "ch02-mse-gradient": [grad_sign_slip, grad_sse, grad_missing_two, grad_bias_not_summed],
    "ch02-least-squares": [lstsq_without_bias, lstsq_bias_row_kept, normal_equations_inverse],
    "ch02-max-stable-lr": [lr_without_bias_column, lr_sse_curvature, lr_one_over_lambda,
                           lr_smallest_eigenvalue],
}
