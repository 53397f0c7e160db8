"""Checkers for chapter 1: derivatives and gradient descent on x²."""
import decimal
import importlib
import inspect
import math
import numbers
import struct
import sys
from fractions import Fraction

import torch

from mathref.checks.core import integer, rng, uniform
from mathref.checks.line_budget import with_line_budget
from mathref.checks.core import (CheckFailure, exercise, expect, expect_callable, expect_close,
                                 without_autograd)

__all__ = ["check_ch01_central_difference", "check_ch01_gradient_descent_loop",
           "check_ch01_best_constant_step", "check_ch01_steps_to_tolerance"]

# what runs gradient descent for the student: mathref's loop and PyTorch's SGD
_RUNS_GRADIENT_DESCENT = ("mathref.calculus.gradient_descent", "mathref.optim.optimize_path",
                          "mathref.optim.SGD.step", "torch.optim.SGD.step", "torch.optim.sgd.sgd")


def _number(value, what):
    """A Python float from a number or a one-element tensor/array; a readable failure otherwise."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return float(value.detach().cpu().reshape(()).item())
    try:
        return float(value)
    except (TypeError, ValueError):
        raise CheckFailure(f"{what}: expected a number, got {type(value).__name__} "
                           f"{value!r}") from None


def _is_float32(value):
    """Whether a Python float is exactly a float32 number (what .item() of a float32 tensor
    gives)."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0] == value
    except OverflowError:
        return False


def _near(a, b, rtol=1e-9):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-300)


def _numerical_differences():
    """PyTorch's own finite differences: every numerical helper of torch.autograd.gradcheck
    (_get_numerical_jacobian, the deprecated public get_numerical_jacobian, the central quotient
    _compute_numerical_gradient and the jvp helpers around it), found by name in that module so
    that a helper added by a later torch is refused too."""
    module = importlib.import_module("torch.autograd.gradcheck")
    return tuple(f"{module.__name__}.{name}" for name, obj in sorted(vars(module).items())
                 if "numerical" in name and inspect.isfunction(obj)
                 and obj.__module__ == module.__name__)


@exercise("ch01-central-difference",
          forbid=("mathref.calculus.numerical_derivative", "mathref.calculus.numerical_gradient")
          + _numerical_differences(),
          because="central_difference must apply the central-difference formula itself")
def check_ch01_central_difference(central_difference):
    """central_difference(f, x, h) must return (f(x + h) − f(x − h)) / (2h)."""
    expect_callable(central_difference, "central_difference(f, x, h)")
    # On x³ the central difference is exactly 3x² + h², whatever x: it tells forward
    # differences (3x² + 3xh + h²) and a missing factor 2 apart even with a large h.
    for x in (-1.5, 0.0, 2.0, round(uniform(rng(1), -3.0, 3.0), 4)):
        for h in (0.1, 0.01):
            raw = central_difference(lambda t: t ** 3, x, h)
            got = _number(raw, f"d/dx x³ at x={x}")
            want = 3 * x * x + h * h
            where = f"d/dx x³ at x={x} with h={h}: expected {want:.10g}, got {got:.10g}"
            expect(not _near(got, 3 * x * x + 3 * x * h + h * h) or _near(got, want),
                   f"{where}, the forward difference (f(x + h) − f(x))/h; the central "
                   f"difference uses f(x + h) and f(x − h)")
            expect(not _near(got, 3 * x * x - 3 * x * h + h * h) or _near(got, want),
                   f"{where}, the backward difference (f(x) − f(x − h))/h; the central "
                   f"difference uses f(x + h) and f(x − h)")
            expect(not _near(got, 2 * want) or want == 0, f"{where}, twice the derivative: "
                   f"the two points are 2h apart, so divide by 2h")
            expect(not _near(got, -want) or want == 0,
                   f"{where}: the sign is flipped (f(x + h) comes first)")
            # (a tensor as it is: expect_close names a float32 result's dtype; a NumPy scalar's
            # low dtype is named here)
            low = getattr(raw, "dtype", None)
            expect(isinstance(raw, torch.Tensor) or str(low) not in ("float32", "float16")
                   or _near(got, want), f"{where} (your result is a NumPy {low}: compute in "
                                        f"float64, the dtype of the inputs)")
            # a float32 quotient handed back as a Python float (.item(), float()) has lost its
            # dtype, not its digits: a float32 number, off by float32's rounding (a float64
            # answer a hair off, such as the derivative plus h² at x = 0, is no float32 number)
            relative = abs(got - want) / max(abs(want), 1e-300)
            float32_like = 1e-9 < relative < 1e-5 and _is_float32(got)
            expect(isinstance(raw, torch.Tensor) or not float32_like,
                   f"{where}. A difference this small (relative {relative:.1g}) is the size of "
                   f"float32 rounding (torch.tensor(x) is float32 by default): compute in "
                   f"float64")
            expect_close(raw if isinstance(raw, torch.Tensor) else got, want,
                         f"d/dx x³ at x={x} with h={h}", rtol=1e-9)
    # at a large h the quotient itself, not the derivative: exp's third derivative is not
    # constant, so the derivative plus h² (exact on x³) is off by h²/6·e^x here
    for x, h in ((0.3, 0.1), (-1.2, 0.05)):
        expect_close(central_difference(math.exp, x, h),
                     (math.exp(x + h) - math.exp(x - h)) / (2 * h),
                     f"the central difference of exp at x={x} with h={h}", rtol=1e-9)
    for f, df, x in ((math.sin, math.cos, 0.7), (math.exp, math.exp, -1.0),
                     (lambda t: 1 / t, lambda t: -1 / t ** 2, 2.0)):
        expect_close(central_difference(f, x, 1e-5), df(x), f"derivative at x={x}",
                     rtol=1e-8, atol=1e-9)
    return "exact on x³, O(h²) accurate elsewhere"


def _torch_optimizers():
    """Every optimizer of torch.optim (a search for η with any of them, or plain SGD in disguise,
    such as ASGD with lambd = 0): its step, under the name of the class that defines it (AdamW
    inherits Adam's), its functional form (torch.optim.adam.adam) where there is one, and the
    kernels that form dispatches to (torch.optim.sgd._single_tensor_sgd, _multi_tensor_sgd,
    _fused_sgd), which a solution can also call directly."""
    names = []
    for name in torch.optim.__all__:
        cls = getattr(torch.optim, name)
        if not (isinstance(cls, type) and issubclass(cls, torch.optim.Optimizer)) \
                or cls is torch.optim.Optimizer or "step" not in vars(cls):
            continue
        names.append(f"torch.optim.{name}.step")
        module = sys.modules.get(cls.__module__)
        functional = cls.__module__.rsplit(".", 1)[-1]
        if module is not None and callable(getattr(module, functional, None)):
            names.append(f"{cls.__module__}.{functional}")
        if module is not None:
            names += [f"{cls.__module__}.{kernel}" for kernel, obj in sorted(vars(module).items())
                      if kernel.startswith(("_single_tensor_", "_multi_tensor_", "_fused_"))
                      and inspect.isfunction(obj) and obj.__module__ == cls.__module__]
    return tuple(dict.fromkeys(names))


_TORCH_OPTIMIZERS = _torch_optimizers()


def _descent(df, x0, lr, steps):
    xs = [float(x0)]
    for _ in range(steps):
        xs.append(xs[-1] - lr * df(xs[-1]))
    return xs


def _accumulated_descent(df, x0, lr, steps):
    """The usual bug: each step subtracts η times the sum of all the gradients so far (a .grad
    never reset)."""
    xs, total = [float(x0)], 0.0
    for _ in range(steps):
        total += df(xs[-1])
        xs.append(xs[-1] - lr * total)
    return xs


def _missing_iterate(got, x0, steps):
    """Which iterate a list one short lacks: x_0 (it starts with x_1) or x_steps (one step short)."""
    try:
        starts_at_x0 = float(got[0]) == float(x0)
    except (TypeError, ValueError, RuntimeError, IndexError):
        starts_at_x0 = False
    if starts_at_x0:
        return (f": the list starts with x0 but ends at x_{steps - 1}, one step short: the last "
                f"iterate x_{steps} is missing (run all {steps} updates after x0)")
    return ": the list must start with x0 itself"


@exercise("ch01-gradient-descent-loop", forbid=_RUNS_GRADIENT_DESCENT + _TORCH_OPTIMIZERS,
          because="gradient_descent_1d must run the update x ← x − η·f′(x) itself")
def check_ch01_gradient_descent_loop(gradient_descent_1d):
    """gradient_descent_1d(df, x0, lr, steps) returns [x_0, x_1, ..., x_steps]."""
    expect_callable(gradient_descent_1d, "gradient_descent_1d(df, x0, lr, steps)")
    cases = [(lambda x: 2 * x, 3.0, 0.1, 10),                      # x²
             (lambda x: 4 * (x - 2) ** 3 + 2 * x, 0.5, 0.02, 25),   # (x − 2)⁴ + x²
             (lambda x: math.cos(x), 1.0, 0.5, 15)]                 # sin x
    gen = rng(2)
    cases.append((lambda x: 2 * x, round(uniform(gen, -4.0, 4.0), 4),
                  round(uniform(gen, 0.01, 0.45), 4), integer(gen, 5, 20)))
    for df, x0, lr, steps in cases:
        got = list(gradient_descent_1d(df, x0, lr, steps))
        want = _descent(df, x0, lr, steps)
        expect(len(got) == steps + 1,
               f"with steps={steps} expected {steps + 1} iterates (x_0 included), got {len(got)}"
               + (_missing_iterate(got, x0, steps) if len(got) == steps else ""))
        raws, got = got, [_number(g, f"x_{k} for x0={x0}, lr={lr}") for k, g in enumerate(got)]
        if len(got) > 1 and not _near(got[1], want[1]):
            expect(not _near(got[1], x0 + lr * df(x0)),
                   f"x_1 for x0={x0}, lr={lr}: expected {want[1]:.10g}, got {got[1]:.10g}, a step "
                   f"uphill: the update subtracts η·f′(x)")
        accumulated = _accumulated_descent(df, x0, lr, steps)
        for k, (g, w) in enumerate(zip(got, want)):
            expect(_near(g, w) or not _near(g, accumulated[k]),
                   f"x_{k} for x0={x0}, lr={lr}: expected {w:.10g}, got {g:.10g}, the step of the "
                   f"sum of all the gradients so far: each step uses f′ at the current x_k alone "
                   f"(a gradient that is accumulated must be reset before the next one)")
            expect(_near(g, w) or not _near(g, x0 - k * lr * df(x0)) or k < 2,
                   f"x_{k} for x0={x0}, lr={lr}: expected {w:.10g}, got {g:.10g}; f′ must be "
                   f"evaluated at the current x_k at every step, not only at x_0")
            # a float32 loop that hands back Python floats (x.item()) has lost its dtype: name
            # the likely cause from the size of the miss, as expect_tensor_close does
            relative = abs(g - w) / max(abs(w), 1e-300)
            expect(isinstance(raws[k], torch.Tensor) or not 1e-9 < relative < 1e-5,
                   f"x_{k} for x0={x0}, lr={lr}: expected {w:.10g}, got {g:.10g}. A difference "
                   f"this small (relative {relative:.1g}) is the size of float32 rounding "
                   f"(torch.tensor(x0) is float32 by default): compute in float64")
            expect_close(raws[k] if isinstance(raws[k], torch.Tensor) else g, w,
                         f"x_{k} for x0={x0}, lr={lr}", rtol=1e-9, atol=1e-12)
    return "matches x_(k+1) = x_k − η f′(x_k) on three functions"


def _quadratic_cases():
    """Symmetric positive definite Hessians H = Q diag(λ) Qᵀ with known eigenvalues, in 2, 3, 4 and
    5 dimensions (random rotations Q, so the answer cannot be read off the diagonal); the 4-D
    one's eigenvalues are drawn too."""
    gen = rng(11)
    cases = []
    for eigenvalues in ((1.0, 25.0), (0.5, 2.0), (3.0, 4.0), (0.2, 1.0, 7.0), (1.0, 2.0, 3.0, 5.0, 40.0)):
        lam = torch.tensor(eigenvalues, dtype=torch.float64)
        Q, _ = torch.linalg.qr(torch.randn(len(lam), len(lam), generator=gen, dtype=torch.float64))
        cases.append((Q @ torch.diag(lam) @ Q.T, lam, Q))
    # and eigenvalues drawn from the caller's generator: under the grader a table of answers
    # keyed by what the fixed cases show (their traces, say) does not know this one
    lo, hi = round(uniform(gen, 0.2, 2.0), 4), round(uniform(gen, 5.0, 40.0), 4)
    mid = sorted(round(uniform(gen, lo, hi), 4) for _ in range(2))
    lam = torch.tensor([lo, *mid, hi], dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(4, 4, generator=gen, dtype=torch.float64))
    cases.append((Q @ torch.diag(lam) @ Q.T, lam, Q))
    return cases


def _worst_distance(H, Q, lr, steps):
    """Largest |θ_steps| over the starts θ_0 = each unit eigenvector, gradient descent on θᵀHθ/2."""
    worst = 0.0
    for j in range(Q.shape[1]):
        theta = Q[:, j].clone()
        for _ in range(steps):
            theta = theta - lr * (H @ theta)
        worst = max(worst, float(theta.norm()))
    return worst


@exercise("ch01-best-constant-step", forbid=_RUNS_GRADIENT_DESCENT + _TORCH_OPTIMIZERS + (
              "mathref.calculus.numerical_derivative",),
          because="derive η* and ρ from λ_min and λ_max; a numerical search for the best step "
                  "does not")
def check_ch01_best_constant_step(best_constant_step):
    """best_constant_step(H) returns (η*, ρ): the constant step that minimizes the worst
    per-step contraction max_i |1 − η λ_i| of gradient descent on θᵀHθ/2, and that factor."""
    expect_callable(best_constant_step, "best_constant_step(H)")
    # "derive both": no search by autograd
    derived = without_autograd(best_constant_step, because="this exercise asks for η* and ρ "
                               "from the eigenvalues, not for a search for η by autograd")
    for H, lam, Q in _quadratic_cases():
        lo, hi = float(lam.min()), float(lam.max())
        got = derived(H.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "expected a pair (eta, rate) of two numbers")
        eta, rate = _number(got[0], "eta"), _number(got[1], "rate")
        where = f"H with eigenvalues {[round(v, 3) for v in lam.tolist()]}"
        if not _near(eta, 2 / (lo + hi), 1e-8):
            wrong = f"η* for {where}: expected {2 / (lo + hi):.10g}, got {eta:.10g}"
            expect(not _near(eta, 2 / hi, 1e-6), f"{wrong} = 2/λ_max, the edge of divergence: "
                   f"there the λ_max direction does not shrink at all")
            expect(not _near(eta, 1 / hi, 1e-6), f"{wrong} = 1/λ_max, a safe step but not the "
                   f"best: with one curvature a, η = 1/a would land in one step, but here the "
                   f"flattest direction shrinks only by 1 − λ_min/λ_max; balance |1 − ηλ_min| "
                   f"against |1 − ηλ_max|")
            expect(not _near(eta, 2 / float(H.min() + H.max()), 1e-6),
                   f"{wrong}, from the smallest and largest entries of H: the entries of a "
                   f"matrix are not its curvatures (use torch.linalg.eigvalsh(H))")
            # within 1e-6 of the right step but not 1e-8: the formula is right and the digits
            # are lost (eigenvalues in float32). In 2-D the diagonal's d_min + d_max and tr H
            # both equal λ_min + λ_max, so those diagnoses would name the wrong cause here.
            nearly_right = _near(eta, 2 / (lo + hi), 1e-6)
            diag = H.diagonal()
            expect(nearly_right or not _near(eta, 2 / float(diag.min() + diag.max()), 1e-6),
                   f"{wrong}: the diagonal of a rotated H is not its eigenvalues (use "
                   f"torch.linalg.eigvalsh(H))")
            expect(nearly_right or not _near(eta, 2 / float(torch.trace(H)), 1e-6),
                   f"{wrong} = 2/tr(H): the trace sums all eigenvalues, use only λ_min and λ_max")
            lam32 = torch.linalg.eigvalsh(H.float())
            in_float32 = _near(eta, 2 / float(lam32[0] + lam32[-1]), 1e-7)
            expect(not nearly_right or not in_float32,
                   f"{wrong}: η is within 1e-6 of 2/(λ_min + λ_max) but not within 1e-8, and "
                   f"matches the formula computed in float32: compute in H's dtype "
                   f"({str(H.dtype).replace('torch.', '')}). (A search over η that stops at a "
                   f"grid spacing or a tolerance can miss by as much)")
            # every pair but (λ_min, λ_max) itself: an η within 1e-6 of the right one is a
            # search's tolerance (the message below), not an unsorted eigvals
            values = lam.tolist()
            pairs = [(a, b) for i, a in enumerate(values) for j, b in enumerate(values)
                     if i < j and (i, j) != (0, len(values) - 1)]
            expect(nearly_right or not any(_near(eta, 2 / (a + b), 1e-6) for a, b in pairs),
                   f"{wrong} = 2/(λ_i + λ_j) for two eigenvalues that are not the smallest and "
                   f"the largest: torch.linalg.eigvals does not sort them (eigvalsh does); take "
                   f"their min and max")
            expect(not nearly_right, f"{wrong}: η is within 1e-6 of 2/(λ_min + λ_max) but not "
                   f"within 1e-8: the formula, computed in H's dtype, gives all the digits (a "
                   f"search over η that stops at a grid spacing or a tolerance does not)")
            expect(False, f"{wrong}: along the eigenvector of each eigenvalue λ_i the error is "
                   f"multiplied by 1 − ηλ_i, and the slowest of these factors is largest at "
                   f"λ_min or λ_max; choose η so that |1 − ηλ_min| = |1 − ηλ_max|")
        expect(rate >= 0, f"the contraction factor ρ for {where}: expected "
                          f"{(hi - lo) / (hi + lo):.10g}, got {rate:.10g}: a factor by which the "
                          f"error shrinks is |1 − η*λ_min| ≥ 0 (an absolute value lost, or λ_min "
                          f"and λ_max swapped: torch.linalg.eigvals does not sort them)")
        expect(not _near(rate, (hi - lo) / hi, 1e-6),
               f"the contraction factor ρ for {where}: expected {(hi - lo) / (hi + lo):.10g}, "
               f"got {rate:.10g} = 1 − λ_min/λ_max, the factor of η = 1/λ_max; give ρ(η*) = "
               f"|1 − η*λ_min|")
        diag = H.diagonal()
        d_lo, d_hi = float(diag.min()), float(diag.max())
        # (a right ρ passes first: a rotation drawn close to the axes under the grader's
        # generator leaves the diagonal within 1e-6 of the eigenvalues)
        expect(_near(rate, (hi - lo) / (hi + lo), 1e-8)
               or not _near(rate, (d_hi - d_lo) / (d_hi + d_lo), 1e-6),
               f"the contraction factor ρ for {where}: expected {(hi - lo) / (hi + lo):.10g}, "
               f"got {rate:.10g}, from the diagonal of H; a rotated H's diagonal is not its "
               f"eigenvalues (use torch.linalg.eigvalsh(H))")
        expect_close(rate, (hi - lo) / (hi + lo), f"the contraction factor ρ for {where}",
                     rtol=1e-8, atol=1e-12)
        # the step really is best: nearby steps contract the worst direction more slowly
        steps = 40
        best = _worst_distance(H, Q, eta, steps)
        expect_close(best, rate ** steps, f"|θ_{steps}| from the worst start with your η ({where})",
                     rtol=1e-6, atol=1e-300)
        for other in (0.9 * eta, 0.97 * eta, 1.03 * eta, 1.1 * eta):
            expect(_worst_distance(H, Q, other, steps) > best,
                   f"η = {other:.4g} converges at least as fast as your η = {eta:.4g} ({where})")
    return "η* = 2/(λ_min + λ_max), ρ = (κ − 1)/(κ + 1), faster than any nearby η"


def _exact_steps(x0, lr, tol):
    """The smallest k with |x0|·|1 − 2η|^k ≤ tol, decided without rounding trouble, or math.inf
    when |1 − 2η| ≥ 1 and |x0| > tol. Small k: exact rational arithmetic on the given floats.
    Large k (billions of steps, where exact powers are out of reach): a candidate from the
    logarithms, settled by comparing k and k − 1 in 60-digit decimal arithmetic."""
    x, r, tol = abs(Fraction(x0)), abs(1 - 2 * Fraction(lr)), Fraction(tol)
    if x <= tol:
        return 0
    if r >= 1:
        return math.inf
    if r == 0:
        return 1
    candidate = math.ceil(math.log(tol / x) / math.log(r))
    if candidate <= 10_000:
        k = 0
        while x > tol:
            x, k = x * r, k + 1
        return k
    with decimal.localcontext() as ctx:
        ctx.prec = 60
        x_d, r_d, tol_d = (decimal.Decimal(q.numerator) / q.denominator for q in (x, r, tol))

        def reached(k):
            return x_d * r_d ** k <= tol_d

        k = candidate
        while not reached(k):
            k += 1
        while k > 0 and reached(k - 1):
            k -= 1
        return k


def _whole_number(value):
    """An int from an int, a whole float, a numpy integer or a one-element tensor; None if the
    value is not a whole number (inf is returned as math.inf)."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.detach().cpu().reshape(()).item()
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        value = float(value)
        if math.isinf(value) and value > 0:
            return math.inf
        if value.is_integer():
            return int(value)
    return None


def _steps_or_none(steps_to_tolerance, args):
    """The answer's count for one more case, or None if it fails there in any way (a probe for
    a hint, never a verdict)."""
    try:
        raw, endless = with_line_budget(steps_to_tolerance, args)
    except Exception:
        return None
    return None if endless else _whole_number(raw)


def _clean_tie(steps_to_tolerance):
    """The answer's count at a tie where nothing is rounded: |x_k| = 2⁻ᵏ reaches tol = 0.25 at
    k = 2, and log, log2 and log10 all give the quotient 2.0 exactly. A ceiling of the logarithms
    answers 2 there; a strict comparison or floor + 1 answers 3."""
    return _steps_or_none(steps_to_tolerance, (1.0, 0.25, 0.25))


def _recursion_failure(err, where, expected):
    """A readable failure for an answer that recursed once per step. Python's recursion limit
    stops it, often inside the gate's profile hook, which CPython then removes: the gate then
    reports a hook "replaced" (a ForbiddenCall naming sys.setprofile), and the RecursionError is
    only that failure's context. (Under the grader the RecursionError itself comes back from the
    student's process.) Returns without raising for any other failure."""
    recursed = isinstance(err, RecursionError) or isinstance(err.__context__, RecursionError)
    if recursed:
        raise CheckFailure(
            f"{where}: your function stopped with a RecursionError (here k = {expected}): a "
            f"function that calls itself once per step is a loop over the steps in disguise, and "
            f"Python's recursion limit stops it before k calls; the closed form answers "
            f"instantly") from None


@exercise("ch01-steps-to-tolerance", forbid=_RUNS_GRADIENT_DESCENT,
          because="count the steps from the closed form |x_k| = |1 − 2η|^k·|x₀|, not by running "
                  "gradient descent")
def check_ch01_steps_to_tolerance(steps_to_tolerance):
    """steps_to_tolerance(x0, lr, tol): smallest k with |x_k| ≤ tol for gradient descent on x²,
    or math.inf if that never happens."""
    expect_callable(steps_to_tolerance, "steps_to_tolerance(x0, lr, tol)")
    cases = [(3.0, 0.1, 1e-3), (3.0, 0.01, 1e-2), (-2.0, 0.3, 1e-6), (3.0, 0.9, 1e-4),
             (5.0, 0.45, 0.51), (3.0, 0.5, 1e-9), (0.01, 0.1, 0.1), (3.0, 1.0, 1e-3),
             (3.0, 1.2, 1e-3),
             # |x0| ≤ tol already, with η = 0.5 and with |1 − 2η| ≥ 1: 0 steps either way (that
             # test comes first)
             (0.5, 0.5, 1.0), (0.5, 1.0, 1.0), (-0.5, 1.5, 0.5),
             # η = 0 and η < 0: |1 − 2η| ≥ 1 there too (a test of η ≥ 1 alone misses them)
             (3.0, 0.0, 1e-3), (3.0, -0.1, 1e-3),
             # a tie: |x_k| = 2⁻ᵏ, so |x_29| = tol exactly and k = 29; the quotient of rounded
             # logarithms log(tol/|x0|)/log r comes out a hair above 29, and its ceiling is 30
             (1.0, 0.25, 2.0 ** -29),
             # just below that tie: k = 30, though the quotient exceeds 29 by only ~1e-12 (an
             # epsilon subtracted before the ceiling turns it into 29)
             (1.0, 0.25, 2.0 ** -29 * (1 - 2.0 ** -40)),
             # a tie with r = 3/4: |x_3| = 0.75³ = tol exactly, k = 3; base-2 logarithms are
             # exact at the ties above (r = 1/2), not here: log2, log and log10 all give a
             # quotient a hair above 3
             (1.0, 0.125, 0.75 ** 3),
             # one rounding unit below the tie |x_5| = 2⁻⁵: k = 6, but the quotient of the
             # logarithms rounds to exactly 5.0, whose ceiling stops one step short (a settle
             # that only steps down from the ceiling keeps 5)
             (1.0, 0.25, 2.0 ** -5 * (1 - 2.0 ** -53)),
             # the same with 1 − 2η = −1/2: k = 6 is even, k = 5 odd, so a settle that steps up
             # while |x0|·(1 − 2η)^k > tol, without the absolute value on r, sees a negative
             # power at k = 5 and keeps it
             (1.0, 0.75, 2.0 ** -5 * (1 - 2.0 ** -53)),
             # k ≈ 2·10¹⁰ (1 − 2η = 1 − 2⁻³³ exactly): instant with the closed form, endless
             # with a loop over the steps
             (1.0, 2.0 ** -34, 0.1)]
    gen = rng(3)
    cases.append((round(uniform(gen, 0.5, 5.0), 4) * (-1) ** integer(gen, 0, 2),
                  round(uniform(gen, 0.01, 0.45), 4), 10.0 ** -integer(gen, 2, 8)))
    for x0, lr, tol in cases:
        expected = _exact_steps(x0, lr, tol)
        where = f"x0={x0}, η={lr}, tol={tol}"
        try:
            raw, endless = with_line_budget(steps_to_tolerance, (x0, lr, tol))
        except (RecursionError, CheckFailure) as err:
            _recursion_failure(err, where, expected)
            raise
        except (ZeroDivisionError, ValueError, OverflowError) as err:
            r = abs(1 - 2 * lr)
            raised = f"{where}: your code raised {type(err).__name__}: {err}"
            if r == 0 or r >= 1:
                raise CheckFailure(
                    f"{raised}. Here |1 − 2η| = "
                    f"{r:g}, so log|1 − 2η| is {'undefined' if r == 0 else 'not negative'}: "
                    f"handle η = 0.5 (one step) and |1 − 2η| ≥ 1 (math.inf) before taking "
                    f"logarithms") from None
            if isinstance(err, ValueError) and (x0 < 0 or 1 - 2 * lr < 0):
                negative = f"x0 = {x0:g}" if x0 < 0 else f"1 − 2η = {1 - 2 * lr:g}"
                raise CheckFailure(
                    f"{raised}. Here {negative} is negative, and a logarithm of a negative "
                    f"number is undefined: the closed form is |x_k| = |1 − 2η|^k·|x0|, with "
                    f"absolute values") from None
            if 1 - r < 1e-7:
                raise CheckFailure(
                    f"{raised}. Here |1 − 2η| = 1 − {1 - r:.3g}, which float32 rounds to 1 "
                    f"(log 1 = 0, a division by zero): take the logarithms in float64") from None
            raise CheckFailure(f"{raised}.") from None
        expect(not endless, f"{where}: your function was still running after 200,000 lines of "
                            f"Python (here k = {expected}): the closed form answers instantly; a "
                            f"loop over steps does not")
        got = _whole_number(raw)
        if math.isinf(expected):
            expect(got == math.inf, f"{where}: |x_k| never reaches tol (|1 − 2η| ≥ 1), so "
                                    f"expected math.inf, got {raw!r}")
        else:
            expect(got is not None, f"{where}: expected a whole number of steps, got {raw!r}"
                   + (" (round up with math.ceil)" if isinstance(raw, float) else ""))
            hint = ""
            x_exact, r_exact = abs(Fraction(x0)), abs(1 - 2 * Fraction(lr))
            if got == expected + 1 and x_exact * r_exact ** expected == Fraction(tol):
                r = abs(1 - 2 * lr)
                above = [log.__name__ for log in (math.log, math.log2, math.log10)
                         if math.ceil(log(tol / abs(x0)) / log(r)) > expected]
                logs = (f"; the quotient of rounded logarithms ({', '.join(above)} here) lands a "
                        f"hair above {expected}, so a ceiling of it alone is one too many"
                        if above else "")
                hint = (f" (off by one: here |x0|·|1 − 2η|^{expected} equals tol exactly, so "
                        f"k = {expected} already meets |x_k| ≤ tol, equality included{logs}; "
                        f"check the candidate and the step before it with the closed form "
                        f"|x0|·|1 − 2η|^k ≤ tol)")
                if _clean_tie(steps_to_tolerance) == 3:
                    hint = (f" (off by one: here |x0|·|1 − 2η|^{expected} equals tol exactly, so "
                            f"k = {expected} already meets |x_k| ≤ tol, equality included. Your "
                            f"function also returns 3 for x0=1.0, η=0.25, tol=0.25, where "
                            f"|x_2| = tol exactly and the quotient of the logarithms is exactly "
                            f"2.0, so rounding is not the cause: a strict < where the closed form "
                            f"has ≤, or floor + 1 in place of the ceiling, counts one step too "
                            f"many at every tie)")
            elif (got == expected - 1 and expected <= 10_000
                  and x_exact * r_exact ** got <= Fraction(tol) * (1 + Fraction(1, 10 ** 9))):
                excess = float(x_exact * r_exact ** got / Fraction(tol) - 1)
                quotient = math.log(tol / abs(x0)) / math.log(abs(1 - 2 * lr))
                cause = (f"the quotient of the float64 logarithms is {quotient!r}, a whole "
                         f"number, so its ceiling alone stops one step short"
                         if math.ceil(quotient) == got else
                         f"the quotient of the float64 logarithms is {quotient!r}, above {got}, "
                         f"so something brought it down: an epsilon subtracted before the "
                         f"ceiling, or logarithms in float32")
                sign = (f"; here 1 − 2η = {1 - 2 * lr:g} is negative and k = {got} odd, so "
                        f"(1 − 2η)^{got} without the absolute value is negative and never "
                        f"exceeds tol" if 1 - 2 * lr < 0 and got % 2 == 1 else "")
                hint = (f" (one too few: |x0|·|1 − 2η|^{got} exceeds tol, by a relative "
                        f"{excess:.1g}; {cause}. Settle the candidate with the closed form in "
                        f"both directions: step up while |x0|·|1 − 2η|^k > tol, and down while "
                        f"the step before also meets tol{sign})")
            elif got in (expected - 1, expected + 1):
                hint = (" (off by one: k is the smallest whole number with |x0|·|1 − 2η|^k ≤ "
                        "tol, so round up with math.ceil)")
            if lr == 0.5:
                hint = " (η = 0.5 lands on the minimum in one step: |1 − 2η| = 0)"
            if expected == 0:
                hint = (" (|x0| ≤ tol already: no step is needed, whatever η; test that before "
                        "the cases of η)")
                if abs(x0) == tol and _steps_or_none(steps_to_tolerance, (0.25, 1.5, 0.5)) == 0:
                    # the order is right (|x0| < tol is answered before η), the comparison not
                    hint = (" (|x0| equals tol here, and |x_0| ≤ tol counts equality: 0 steps; "
                            "your function does return 0 for x0=0.25, η=1.5, tol=0.5, so its "
                            "first test likely compares with a strict <)")
            expect(got == expected, f"{where}: expected {expected} steps, got {raw!r}{hint}")
    return "including η = 0.5 (one step), η = 1 (never), η > 1 (never) and exact ties"
