"""mathref.linear_regression against autograd, closed forms and independent solvers."""
import pytest
import torch

from mathref import linear_regression as lr_mod
from mathref.calculus import numerical_gradient


def problem(device, N=40, d=3, m=None, seed=0):
    gen = torch.Generator().manual_seed(seed)
    X = torch.randn(N, d, generator=gen, dtype=torch.float64)
    wshape = (d,) if m is None else (d, m)
    W = torch.randn(wshape, generator=gen, dtype=torch.float64)
    b = torch.randn(wshape[1:], generator=gen, dtype=torch.float64)
    Y = X @ W + b + 0.3 * torch.randn((N,) + wshape[1:], generator=gen, dtype=torch.float64)
    return [t.to(device) for t in (X, W, b, Y)]


@pytest.mark.parametrize("m", [None, 1, 4])
def test_mse_loss_matches_torch(float64_device, m):
    X, W, b, Y = problem(float64_device, m=m)
    pred = X @ W + b
    # (1/N)‖·‖²_F is the summed squared error over N, whatever the number of outputs
    expected = torch.nn.functional.mse_loss(pred, Y, reduction="sum") / X.shape[0]
    torch.testing.assert_close(lr_mod.mse_loss(X, W, b, Y), expected)


@pytest.mark.parametrize("m", [None, 1, 4])
def test_mse_gradient_matches_autograd_and_keeps_shapes(float64_device, m):
    X, W, b, Y = problem(float64_device, m=m)
    Wg, bg = W.clone().requires_grad_(True), b.clone().requires_grad_(True)
    loss = ((X @ Wg + bg - Y) ** 2).sum() / X.shape[0]
    auto_W, auto_b = torch.autograd.grad(loss, [Wg, bg])
    grad_W, grad_b = lr_mod.mse_gradient(X, W, b, Y)
    assert grad_W.shape == W.shape and grad_b.shape == b.shape
    torch.testing.assert_close(grad_W, auto_W, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(grad_b, auto_b, rtol=1e-12, atol=1e-12)


def test_mse_gradient_matches_finite_differences():
    X, W, b, Y = problem("cpu", N=7, d=2, m=2)
    grad_W, grad_b = lr_mod.mse_gradient(X, W, b, Y)
    torch.testing.assert_close(numerical_gradient(lambda w: ((X @ w + b - Y) ** 2).sum() / 7, W),
                               grad_W, rtol=1e-7, atol=1e-8)
    torch.testing.assert_close(numerical_gradient(lambda c: ((X @ W + c - Y) ** 2).sum() / 7, b),
                               grad_b, rtol=1e-7, atol=1e-8)


def test_hand_gradient_passes_gradcheck():
    X, W, b, Y = problem("cpu", N=6, d=2, m=3)

    class MSE(torch.autograd.Function):
        @staticmethod
        def forward(ctx, W, b):
            ctx.save_for_backward(W, b)
            return lr_mod.mse_loss(X, W, b, Y)

        @staticmethod
        def backward(ctx, g):
            W, b = ctx.saved_tensors
            grad_W, grad_b = lr_mod.mse_gradient(X, W, b, Y)
            return g * grad_W, g * grad_b

    assert torch.autograd.gradcheck(MSE.apply, (W.requires_grad_(True), b.requires_grad_(True)))


def test_mse_hessian_matches_autograd(float64_device):
    X, W, b, Y = problem(float64_device, N=30, d=3)

    def loss(theta):
        return ((X @ theta[:-1] + theta[-1] - Y) ** 2).mean()

    theta = torch.cat([W, b.reshape(1)])
    expected = torch.autograd.functional.hessian(loss, theta)
    torch.testing.assert_close(lr_mod.mse_hessian(X), expected, rtol=1e-12, atol=1e-12)


def test_design_matrix():
    x = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(lr_mod.design_matrix(x),
                               torch.tensor([[1.0, 1.0], [2.0, 1.0], [3.0, 1.0]]))
    assert lr_mod.design_matrix(torch.zeros(5, 3)).shape == (5, 4)


@pytest.mark.parametrize("m", [None, 2])
def test_least_squares_solves_the_normal_equations(float64_device, m):
    X, _, _, Y = problem(float64_device, N=50, d=4, m=m)
    W, b = lr_mod.fit_least_squares(X, Y)
    assert W.shape == (4,) + (() if m is None else (m,))
    # independent oracle: Cholesky solve of X̃ᵀX̃ θ = X̃ᵀY
    Xt = torch.cat([X, torch.ones(50, 1, dtype=X.dtype, device=X.device)], dim=1)
    Yc = Y.reshape(50, -1)
    theta = torch.cholesky_solve(Xt.T @ Yc, torch.linalg.cholesky(Xt.T @ Xt)).reshape(
        (5,) + tuple(Y.shape[1:]))
    torch.testing.assert_close(W, theta[:-1], rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(b, theta[-1], rtol=1e-10, atol=1e-10)
    # the gradient vanishes at the least-squares solution
    grad_W, grad_b = lr_mod.mse_gradient(X, W, b, Y)
    assert grad_W.abs().max() < 1e-10 and grad_b.abs().max() < 1e-10


def test_least_squares_recovers_noise_free_weights():
    X = torch.randn(20, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    W_true, b_true = torch.tensor([1.5, -2.0, 0.25], dtype=torch.float64), torch.tensor(0.7, dtype=torch.float64)
    W, b = lr_mod.fit_least_squares(X, X @ W_true + b_true)
    torch.testing.assert_close(W, W_true)
    torch.testing.assert_close(b, b_true)


def test_gradient_descent_converges_to_least_squares(float64_device):
    X, _, _, Y = problem(float64_device, N=60, d=3, m=2)
    lam_max = torch.linalg.eigvalsh(lr_mod.mse_hessian(X)).max().item()
    W, b, losses = lr_mod.fit_gradient_descent(X, Y, lr=1.0 / lam_max, steps=600)
    W_ls, b_ls = lr_mod.fit_least_squares(X, Y)
    torch.testing.assert_close(W, W_ls, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(b, b_ls, rtol=1e-9, atol=1e-9)
    assert losses.shape == (601,) and bool((losses[1:] <= losses[:-1] + 1e-12).all())


def test_gradient_descent_first_step_is_the_hand_update():
    X, W0, b0, Y = problem("cpu", N=10, d=2)
    W, b, losses = lr_mod.fit_gradient_descent(X, Y, lr=0.1, steps=1, W0=W0, b0=b0)
    r = X @ W0 + b0 - Y
    torch.testing.assert_close(W, W0 - 0.1 * (2 / 10) * X.T @ r)
    torch.testing.assert_close(b, b0 - 0.1 * (2 / 10) * r.sum())
    torch.testing.assert_close(losses[0], (r ** 2).mean())


def test_gradient_descent_diverges_above_the_curvature_bound():
    X, _, _, Y = problem("cpu", N=60, d=3)
    lam_max = torch.linalg.eigvalsh(lr_mod.mse_hessian(X)).max().item()
    _, _, below = lr_mod.fit_gradient_descent(X, Y, lr=1.95 / lam_max, steps=400)
    _, _, above = lr_mod.fit_gradient_descent(X, Y, lr=2.05 / lam_max, steps=400)
    assert below[-1] < below[0] and above[-1] > 1e3 * above[0]


def test_minibatch_with_full_batch_is_gradient_descent(float64_device):
    X, _, _, Y = problem(float64_device, N=30, d=3)
    gen = torch.Generator().manual_seed(0)
    W1, b1, l1 = lr_mod.minibatch_sgd(X, Y, lr=0.1, steps=50, batch_size=30, generator=gen)
    W2, b2, l2 = lr_mod.fit_gradient_descent(X, Y, lr=0.1, steps=50)
    torch.testing.assert_close(W1, W2, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(l1, l2, rtol=1e-10, atol=1e-12)


def test_minibatch_step_uses_the_drawn_batch():
    X, _, _, Y = problem("cpu", N=12, d=2)
    W, b, _ = lr_mod.minibatch_sgd(X, Y, lr=0.05, steps=1, batch_size=4,
                                   generator=torch.Generator().manual_seed(3))
    idx = torch.randperm(12, generator=torch.Generator().manual_seed(3))[:4]
    r = -Y[idx]  # zero initial parameters
    torch.testing.assert_close(W, -0.05 * (2 / 4) * X[idx].T @ r)
    torch.testing.assert_close(b, -0.05 * (2 / 4) * r.sum())


def test_sgd_gets_near_the_minimum():
    X, _, _, Y = problem("cpu", N=200, d=3, seed=2)
    W_ls, b_ls = lr_mod.fit_least_squares(X, Y)
    best = lr_mod.mse_loss(X, W_ls, b_ls, Y)
    _, _, losses = lr_mod.minibatch_sgd(X, Y, lr=0.02, steps=2000, batch_size=8,
                                        generator=torch.Generator().manual_seed(0))
    assert losses[-200:].mean() < 1.05 * best


def test_bad_input_is_reported():
    X, W, b, Y = problem("cpu", N=5, d=3, m=2)
    with pytest.raises(ValueError, match="W must have 3 rows"):
        lr_mod.mse_gradient(X, W[:2], b, Y)
    with pytest.raises(ValueError, match="b must have shape"):
        lr_mod.mse_gradient(X, W, b[:1], Y)
    with pytest.raises(ValueError, match="Y must have shape"):
        lr_mod.mse_loss(X, W, b, Y[:4])
    with pytest.raises(TypeError, match="floating-point"):
        lr_mod.mse_loss(X.long(), W, b, Y)
    with pytest.raises(TypeError, match="torch.Tensor"):
        lr_mod.fit_least_squares([[1.0]], Y)
    with pytest.raises(ValueError, match="same number of rows"):
        lr_mod.fit_least_squares(X, Y[:3])
    with pytest.raises(ValueError, match="batch_size"):
        lr_mod.minibatch_sgd(X, Y, 0.1, 3, batch_size=6)
    with pytest.raises(ValueError, match="lr"):
        lr_mod.fit_gradient_descent(X, Y, 0.0, 3)
    with pytest.raises(ValueError, match="steps"):
        lr_mod.fit_gradient_descent(X, Y, 0.1, -1)
