"""Derivatives by finite differences, gradient descent, and gradient checking. See chapters 1, 2 and 4.

    forward difference   f'(x) ≈ (f(x + h) − f(x)) / h             error O(h)
    backward difference  f'(x) ≈ (f(x) − f(x − h)) / h             error O(h)
    central difference   f'(x) ≈ (f(x + h) − f(x − h)) / (2h)      error O(h²)
    gradient descent     x_{k+1} = x_k − η ∇f(x_k)
"""
import math
from dataclasses import dataclass, field

import torch

from mathref._validation import check_number

__all__ = ["numerical_derivative", "numerical_gradient", "gradient_descent",
           "check_gradients", "GradientReport"]

_METHODS = ("forward", "backward", "central")


def _check_step(h):
    if not isinstance(h, (int, float)) or isinstance(h, bool) or not h > 0 or math.isinf(h):
        raise ValueError(f"step h must be a positive finite number, got {h!r}")


def numerical_derivative(f, x, h=1e-5, method="central"):
    """Finite-difference estimate of f'(x) for a scalar function of one variable. See chapter 1.

    method="forward":  (f(x + h) − f(x)) / h          (truncation error ≈ h·f''/2)
    method="backward": (f(x) − f(x − h)) / h          (truncation error ≈ −h·f''/2)
    method="central":  (f(x + h) − f(x − h)) / (2h)   (truncation error ≈ h²·f'''/6)
    """
    _check_step(h)
    if not callable(f):
        raise TypeError(f"f must be a function, got {type(f).__name__}")
    if method == "forward":
        return (f(x + h) - f(x)) / h
    if method == "backward":
        return (f(x) - f(x - h)) / h
    if method == "central":
        return (f(x + h) - f(x - h)) / (2 * h)
    raise ValueError(f"method must be one of {_METHODS}, got {method!r}")


def numerical_gradient(f, x, h=1e-6):
    """Central-difference gradient of a scalar function f of a tensor x, in float64. See chapter 2.

    ∂f/∂x_i ≈ (f(x + h·e_i) − f(x − h·e_i)) / (2h), one coordinate at a time, so the result has
    the shape of x (a gradient always has its parameter's shape).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
    if not x.is_floating_point():
        raise TypeError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    _check_step(h)
    x64 = x.detach().to(torch.float64).clone()
    grad = torch.zeros_like(x64)
    flat, gflat = x64.view(-1), grad.view(-1)
    for i in range(flat.numel()):
        original = flat[i].item()
        flat[i] = original + h
        f_plus = float(f(x64))
        flat[i] = original - h
        f_minus = float(f(x64))
        flat[i] = original
        gflat[i] = (f_plus - f_minus) / (2 * h)
    return grad


def gradient_descent(grad_fn, x0, lr, steps):
    """Run x_{k+1} = x_k − lr · grad_fn(x_k) and return the whole trajectory. See chapter 1.

    x0 may be a Python number (the trajectory is then a float64 tensor of shape [steps + 1])
    or a tensor of any shape (the trajectory has shape [steps + 1, *x0.shape], x0's dtype).
    Row k of the result is x_k; row 0 is x0 itself.
    """
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise ValueError(f"steps must be a non-negative int, got {steps!r}")
    check_number("lr", lr, min=0.0, min_open=True)      # NaN and inf refused
    if not callable(grad_fn):
        raise TypeError(f"grad_fn must be a function of x, got {type(grad_fn).__name__}")
    if isinstance(x0, torch.Tensor):
        x = x0.detach().clone()
    elif isinstance(x0, (int, float)) and not isinstance(x0, bool):
        x = torch.tensor(float(x0), dtype=torch.float64)
    else:
        raise TypeError(f"x0 must be a number or a torch.Tensor, got {type(x0).__name__}")
    trajectory = [x.clone()]
    for _ in range(steps):
        g = torch.as_tensor(grad_fn(x), dtype=x.dtype, device=x.device)
        if g.shape != x.shape:
            raise ValueError(f"grad_fn returned shape {tuple(g.shape)} for x of shape "
                             f"{tuple(x.shape)}: a gradient must have its parameter's shape")
        x = x - lr * g
        trajectory.append(x.clone())
    return torch.stack(trajectory)


@dataclass
class GradientReport:
    """The result of ``check_gradients``: one row per input tensor."""
    rows: list = field(default_factory=list)  # (index, shape, max_abs_error, max_rel_error, ok)
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def ok(self):
        return all(row[4] for row in self.rows)

    @property
    def max_abs_error(self):
        return max((row[2] for row in self.rows), default=0.0)

    def __str__(self):
        lines = [f"gradient check (central differences in float64, atol={self.atol:g}, "
                 f"rtol={self.rtol:g})",
                 f"{'input':>5}  {'shape':<16} {'max abs err':>12} {'max rel err':>12}  verdict"]
        for index, shape, abs_err, rel_err, ok in self.rows:
            lines.append(f"{index:>5}  {str(shape):<16} {abs_err:>12.2e} {rel_err:>12.2e}  "
                         f"{'ok' if ok else 'MISMATCH'}")
        lines.append("all gradients match" if self.ok else
                     "MISMATCH: autograd's gradient disagrees with finite differences")
        return "\n".join(lines)

    def __repr__(self):
        return f"GradientReport(ok={self.ok}, max_abs_error={self.max_abs_error:.2e})"


def check_gradients(fn, *inputs, h=1e-6, atol=1e-6, rtol=1e-4, verbose=True):
    """Compare autograd's gradient of ``fn(*inputs)`` with central differences, in float64.

    Every floating-point tensor in ``inputs`` is checked. A non-scalar output y is reduced to
    the scalar ⟨y, v⟩ with a fixed random v, which checks the vector-Jacobian product vᵀJ.
    Prints a table (one row per input: max absolute and relative error, a verdict) when
    ``verbose`` and returns a ``GradientReport`` whose ``.ok`` says whether all match.
    See chapter 4.
    """
    if not inputs:
        raise ValueError("check_gradients needs at least one input tensor")
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"input {i} must be a torch.Tensor, got {type(t).__name__}")
    xs = [t.detach().to(torch.float64).clone() if t.is_floating_point() else t for t in inputs]
    checked = [i for i, t in enumerate(xs) if t.is_floating_point()]
    if not checked:
        raise TypeError("check_gradients needs at least one floating-point input")

    with torch.no_grad():
        y0 = fn(*xs)
    if not isinstance(y0, torch.Tensor):
        raise TypeError(f"fn must return a torch.Tensor, got {type(y0).__name__}")
    gen = torch.Generator().manual_seed(0)
    v = torch.randn(y0.shape, generator=gen, dtype=torch.float64).to(y0.device)

    def scalar(*args):
        return (fn(*args).to(torch.float64) * v).sum()

    leaves = [t.clone().requires_grad_(True) if i in checked else t for i, t in enumerate(xs)]
    analytic = torch.autograd.grad(scalar(*leaves), [leaves[i] for i in checked],
                                   allow_unused=True)

    report = GradientReport(atol=atol, rtol=rtol)
    for i, g in zip(checked, analytic):
        g = torch.zeros_like(xs[i]) if g is None else g.detach()

        def f_of_input(x, i=i):
            args = list(xs)
            args[i] = x
            with torch.no_grad():
                return scalar(*args)

        numeric = numerical_gradient(f_of_input, xs[i], h=h)
        abs_err = (g - numeric).abs()
        scale = torch.maximum(g.abs(), numeric.abs()).clamp_min(1e-8)
        ok = bool(torch.allclose(g, numeric, atol=atol, rtol=rtol))
        report.rows.append((i, tuple(xs[i].shape), float(abs_err.max()),
                            float((abs_err / scale).max()), ok))
    if verbose:
        print(report)
    return report
