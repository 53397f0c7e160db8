"""mathref.calculus against closed forms and autograd."""
import math

import pytest
import torch

from mathref import calculus


@pytest.mark.parametrize("f, df, x", [(math.sin, math.cos, 0.3), (math.exp, math.exp, 1.2),
                                      (lambda t: t ** 3, lambda t: 3 * t ** 2, -2.0)])
def test_numerical_derivative_matches_closed_form(f, df, x):
    assert calculus.numerical_derivative(f, x) == pytest.approx(df(x), rel=1e-9, abs=1e-9)
    assert calculus.numerical_derivative(f, x, 1e-7, "forward") == pytest.approx(df(x), rel=1e-5)
    assert calculus.numerical_derivative(f, x, 1e-7, "backward") == pytest.approx(df(x), rel=1e-5)


def test_difference_errors_have_the_predicted_order():
    # f = x³ at x: forward gives 3x² + 3xh + h², central gives 3x² + h² (exact algebra).
    x, h = 2.0, 1e-2
    fwd = calculus.numerical_derivative(lambda t: t ** 3, x, h, "forward")
    cen = calculus.numerical_derivative(lambda t: t ** 3, x, h, "central")
    assert fwd == pytest.approx(3 * x * x + 3 * x * h + h * h, rel=1e-10)
    assert cen == pytest.approx(3 * x * x + h * h, rel=1e-10)


def test_numerical_derivative_rejects_bad_arguments():
    with pytest.raises(ValueError, match="method"):
        calculus.numerical_derivative(math.sin, 0.0, method="sideways")
    with pytest.raises(ValueError, match="positive"):
        calculus.numerical_derivative(math.sin, 0.0, h=0)


def test_numerical_gradient_matches_autograd(float64_device):
    gen = torch.Generator().manual_seed(0)
    A = torch.randn(4, 3, generator=gen, dtype=torch.float64).to(float64_device)
    x = torch.randn(3, 2, generator=gen, dtype=torch.float64).to(float64_device)

    def f(x):
        return torch.tanh(A @ x).pow(2).sum()

    xg = x.clone().requires_grad_(True)
    f(xg).backward()
    numeric = calculus.numerical_gradient(f, x)
    assert numeric.shape == x.shape and numeric.device == x.device
    torch.testing.assert_close(numeric, xg.grad, atol=1e-8, rtol=1e-7)


def test_numerical_gradient_rejects_non_float():
    with pytest.raises(TypeError, match="floating-point"):
        calculus.numerical_gradient(lambda x: x.sum(), torch.arange(3))


@pytest.mark.parametrize("lr", [0.01, 0.1, 0.4, 0.75, 1.0, 1.1])
def test_gradient_descent_on_x_squared_follows_closed_form(lr):
    x0, steps = 3.0, 30
    traj = calculus.gradient_descent(lambda x: 2 * x, x0, lr, steps)
    closed = torch.tensor([x0 * (1 - 2 * lr) ** k for k in range(steps + 1)], dtype=torch.float64)
    assert traj.shape == (steps + 1,) and traj.dtype == torch.float64
    torch.testing.assert_close(traj, closed, rtol=1e-12, atol=1e-12)


def test_gradient_descent_on_tensors_keeps_shape_and_device(device):
    x0 = torch.tensor([[1.0, -2.0]], device=device)
    traj = calculus.gradient_descent(lambda x: 2 * x, x0, 0.25, 3)
    assert traj.shape == (4, 1, 2) and traj.device.type == device.type
    torch.testing.assert_close(traj[-1].cpu(), torch.tensor([[0.125, -0.25]]))


def test_gradient_descent_rejects_bad_input():
    with pytest.raises(ValueError, match="steps"):
        calculus.gradient_descent(lambda x: 2 * x, 1.0, 0.1, -1)
    with pytest.raises(ValueError, match="lr"):
        calculus.gradient_descent(lambda x: 2 * x, 1.0, 0.0, 5)
    with pytest.raises(ValueError, match="shape"):
        calculus.gradient_descent(lambda x: torch.ones(2), torch.ones(3), 0.1, 1)
    with pytest.raises(TypeError, match="x0"):
        calculus.gradient_descent(lambda x: 2 * x, "3", 0.1, 1)


def test_check_gradients_passes_correct_and_flags_wrong_backward(capsys):
    class WrongSquare(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return -2 * x * g  # sign slip

    x = torch.randn(5, dtype=torch.float64)
    w = torch.randn(5, 2, dtype=torch.float64)
    good = calculus.check_gradients(lambda x, w: torch.sin(x) @ w, x, w)
    assert good.ok and len(good.rows) == 2 and good.max_abs_error < 1e-7
    assert "all gradients match" in capsys.readouterr().out
    bad = calculus.check_gradients(WrongSquare.apply, x, verbose=False)
    assert not bad.ok and "MISMATCH" in str(bad)
    # agrees with PyTorch's own gradcheck on both
    assert torch.autograd.gradcheck(lambda x, w: torch.sin(x) @ w,
                                    (x.requires_grad_(), w.requires_grad_()))
    with pytest.raises(RuntimeError, match="Jacobian mismatch"):  # GradcheckError
        torch.autograd.gradcheck(WrongSquare.apply, (x.detach().requires_grad_(),))


def test_check_gradients_rejects_bad_input():
    with pytest.raises(TypeError, match="input 0"):
        calculus.check_gradients(lambda x: x, [1.0, 2.0])
    with pytest.raises(ValueError, match="at least one"):
        calculus.check_gradients(lambda: torch.tensor(1.0))


def test_gradient_report_rows_hold_the_measured_errors():
    x = torch.tensor([0.3, -1.2, 2.0], dtype=torch.float64)

    class WrongSquare(torch.autograd.Function):      # forward x², backward 3x instead of 2x
        @staticmethod
        def forward(ctx, t):
            ctx.save_for_backward(t)
            return t ** 2

        @staticmethod
        def backward(ctx, g):
            (t,) = ctx.saved_tensors
            return g * 3 * t

    good = calculus.check_gradients(lambda t: t ** 2, x, verbose=False)
    bad = calculus.check_gradients(WrongSquare.apply, x, verbose=False)
    assert isinstance(good, calculus.GradientReport) and good.ok and len(good.rows) == 1
    assert not bad.ok
    v = torch.randn(3, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    assert bad.max_abs_error == pytest.approx((v * x).abs().max().item(), rel=1e-6)  # |(3x − 2x)·v|
