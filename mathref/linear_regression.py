"""Linear regression: the loss, its hand-derived gradient, and three ways to fit. See chapter 2.

Conventions (row vectors, batch first): X ∈ ℝ^{N×d} holds one example per row, W ∈ ℝ^{d×m},
b ∈ ℝ^m, Y ∈ ℝ^{N×m}; with a single output, W, b and Y may also be given as shapes (d,), ()
and (N,). The loss sums over outputs and averages over examples:

    L(W, b) = (1/N) ‖XW + 1bᵀ − Y‖²_F            (MSE = SSE / N)
    ∂L/∂W  = (2/N) Xᵀ(XW + 1bᵀ − Y)               (shape of W)
    ∂L/∂b  = (2/N) (XW + 1bᵀ − Y)ᵀ 1              (shape of b)
    Hessian of L in w̃ = (W; bᵀ):  H = (2/N) X̃ᵀX̃  with X̃ = [X, 1]

The closed form solves the normal equations X̃ᵀX̃ W̃ = X̃ᵀY by least squares
(``torch.linalg.lstsq``), never through an explicit inverse.
"""
import torch

from mathref._validation import check_number

__all__ = ["design_matrix", "mse_loss", "mse_gradient", "mse_hessian", "fit_least_squares",
           "fit_gradient_descent", "minibatch_sgd"]


def _check_tensor(t, name, ndims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if t.dim() not in ndims:
        raise ValueError(f"{name} must have {' or '.join(map(str, ndims))} dimensions, "
                         f"got shape {tuple(t.shape)}")


def _check_problem(X, W, b, Y):
    """Validate shapes of X (N, d), W (d, m) or (d,), b (m,) or (), Y (N, m) or (N,)."""
    _check_tensor(X, "X", (2,))
    _check_tensor(W, "W", (1, 2))
    _check_tensor(b, "b", (0, 1))
    _check_tensor(Y, "Y", (1, 2))
    N, d = X.shape
    if W.shape[0] != d:
        raise ValueError(f"W must have {d} rows to multiply X of shape {tuple(X.shape)}, "
                         f"got W of shape {tuple(W.shape)}")
    out = tuple(W.shape[1:])  # () for one output, (m,) for m outputs
    if tuple(b.shape) != out:
        raise ValueError(f"b must have shape {out} for W of shape {tuple(W.shape)}, "
                         f"got {tuple(b.shape)}")
    if tuple(Y.shape) != (N,) + out:
        raise ValueError(f"Y must have shape {(N,) + out} for X of shape {tuple(X.shape)} and "
                         f"W of shape {tuple(W.shape)}, got {tuple(Y.shape)}")


def design_matrix(x):
    """X̃ = [X, 1]: append a column of ones so that X̃ (W; bᵀ) = XW + 1bᵀ. See chapter 2.

    ``x`` of shape (N,) is treated as N examples with one feature; the result has shape
    (N, d + 1) with the ones in the last column.
    """
    _check_tensor(x, "x", (1, 2))
    X = x.unsqueeze(1) if x.dim() == 1 else x
    return torch.cat([X, torch.ones_like(X[:, :1])], dim=1)


def mse_loss(X, W, b, Y):
    """L = (1/N) ‖XW + b − Y‖²_F: squared errors summed over outputs, averaged over the N
    examples (for one output it is the usual mean squared error). See chapter 2."""
    _check_problem(X, W, b, Y)
    residual = X @ W + b - Y
    return residual.pow(2).sum() / X.shape[0]


def mse_gradient(X, W, b, Y):
    """(∂L/∂W, ∂L/∂b) = ((2/N) Xᵀ(XW + b − Y), (2/N) Σₙ (XW + b − Y)ₙ), derived by hand.

    Each gradient has the shape of its parameter. See chapter 2.
    """
    _check_problem(X, W, b, Y)
    N = X.shape[0]
    residual = X @ W + b - Y            # Ŷ − Y, shape (N, m) or (N,)
    grad_W = (2 / N) * X.T @ residual   # (d, N) @ (N, m) -> (d, m)
    grad_b = (2 / N) * residual.sum(dim=0)
    return grad_W, grad_b


def mse_hessian(X):
    """H = (2/N) X̃ᵀX̃ with X̃ = [X, 1]: the (constant) Hessian of the loss in (w, b) for one
    output. Gradient descent converges iff 0 < η < 2/λ_max(H). See chapter 2."""
    _check_tensor(X, "X", (2,))
    Xt = design_matrix(X)
    return (2 / X.shape[0]) * Xt.T @ Xt


def fit_least_squares(X, Y):
    """Minimize ‖XW + b − Y‖² exactly: solve the normal equations X̃ᵀX̃ W̃ = X̃ᵀY by least
    squares, ``torch.linalg.lstsq(X̃, Y)``, with no explicit inverse. Returns (W, b).
    See chapter 2."""
    _check_tensor(X, "X", (2,))
    _check_tensor(Y, "Y", (1, 2))
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got X {tuple(X.shape)} "
                         f"and Y {tuple(Y.shape)}")
    Xt = design_matrix(X)
    Yc = Y.unsqueeze(1) if Y.dim() == 1 else Y
    solution = torch.linalg.lstsq(Xt, Yc).solution   # (d + 1, m)
    if Y.dim() == 1:
        solution = solution.squeeze(1)
    return solution[:-1], solution[-1]


def _initial(X, Y, W0, b0):
    d = X.shape[1]
    out = tuple(Y.shape[1:])
    W = torch.zeros((d,) + out, dtype=X.dtype, device=X.device) if W0 is None else W0.detach().clone()
    b = torch.zeros(out, dtype=X.dtype, device=X.device) if b0 is None else b0.detach().clone()
    _check_problem(X, W, b, Y)
    return W, b


def _check_run(lr, steps):
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    check_number("lr", lr, min=0.0, min_open=True)      # NaN and inf refused


def fit_gradient_descent(X, Y, lr, steps, W0=None, b0=None):
    """Full-batch gradient descent W ← W − η ∂L/∂W, b ← b − η ∂L/∂b with the hand-derived
    gradient of ``mse_gradient``, from zeros unless W0, b0 are given.

    Returns (W, b, losses) where losses[k] is L after k steps (length steps + 1).
    See chapter 2.
    """
    _check_run(lr, steps)
    W, b = _initial(X, Y, W0, b0)
    losses = [mse_loss(X, W, b, Y)]
    for _ in range(steps):
        grad_W, grad_b = mse_gradient(X, W, b, Y)
        W, b = W - lr * grad_W, b - lr * grad_b
        losses.append(mse_loss(X, W, b, Y))
    return W, b, torch.stack(losses)


def minibatch_sgd(X, Y, lr, steps, batch_size, generator=None, W0=None, b0=None):
    """Mini-batch stochastic gradient descent on the MSE. See chapter 2.

    At every step, ``batch_size`` distinct examples are drawn at random (``torch.randperm``
    with ``generator``) and the parameters move against the gradient of the loss on that
    batch, (2/B) X_Bᵀ(X_B W + b − Y_B). batch_size = 1 is plain SGD; batch_size = N is
    full-batch gradient descent. Returns (W, b, losses) where losses[k] is the loss on the
    *whole* data set after k steps (length steps + 1), so that runs with different batch
    sizes can be compared on one axis.
    """
    _check_run(lr, steps)
    W, b = _initial(X, Y, W0, b0)
    N = X.shape[0]
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or not 1 <= batch_size <= N:
        raise ValueError(f"batch_size must be an int between 1 and N = {N}, got {batch_size!r}")
    losses = [mse_loss(X, W, b, Y)]
    for _ in range(steps):
        idx = torch.randperm(N, generator=generator)[:batch_size].to(X.device)
        grad_W, grad_b = mse_gradient(X[idx], W, b, Y[idx])
        W, b = W - lr * grad_W, b - lr * grad_b
        losses.append(mse_loss(X, W, b, Y))
    return W, b, torch.stack(losses)
