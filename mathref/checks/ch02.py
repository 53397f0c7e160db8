"""Checkers for chapter 2: vectors, matrices and gradients; linear regression."""
import torch

from mathref.checks.core import equal_to, rng, uniform
from mathref.checks.core import (AUTOGRAD_FUNCTIONAL, as_tensor, exercise, expect, expect_callable,
                                 expect_tensor_close, forbidding, without_autograd)

__all__ = ["check_ch02_steepest_descent", "check_ch02_mse_gradient",
           "check_ch02_least_squares", "check_ch02_max_stable_lr", "check_ch02_ridge_svd"]


def _close(got, want, what, rtol=1e-8, atol=1e-10):
    expect_tensor_close(got, want, what, rtol=rtol, atol=atol, tensor_only=True,
                        shape_hint=" (the shape of the parameter)")


def _matches(got, candidate, rtol=1e-6, atol=1e-9):
    """Whether the answer ``got`` equals ``candidate`` (a typical slip), shape included."""
    if not isinstance(got, torch.Tensor):
        return False
    got = got.detach().to("cpu", torch.float64)
    candidate = candidate.to(torch.float64)
    return got.shape == candidate.shape and bool(torch.allclose(got, candidate, rtol=rtol,
                                                                atol=atol))


@exercise("ch02-steepest-descent", forbid=("torch.nn.functional.normalize",),
          because="steepest_descent_direction must scale −g to unit length itself")
def check_ch02_steepest_descent(steepest_descent_direction):
    """steepest_descent_direction(g) returns the unit vector −g/‖g‖."""
    expect_callable(steepest_descent_direction, "steepest_descent_direction(grad)")
    gen = rng(0)
    cases = [torch.tensor([3.0, 4.0], dtype=torch.float64),
             torch.tensor([0.0, -2.0], dtype=torch.float64),
             torch.randn(5, generator=gen, dtype=torch.float64),
             torch.randn(2, 3, generator=gen, dtype=torch.float64),
             # ‖g‖ < 1: −g/max(1, ‖g‖) is −g here, not a unit vector
             0.01 * torch.randn(4, generator=gen, dtype=torch.float64)]
    for g in cases:
        u = steepest_descent_direction(g.clone())
        what = f"direction for gradient {g.flatten().tolist()[:3]}..."
        # the type first: the messages below read u.dtype
        expect(isinstance(u, torch.Tensor), f"{what}: expected a torch.Tensor, got "
               f"{type(u).__name__}")
        expect(u.dtype == g.dtype,
               f"{what}: your tensor is {str(u.dtype).replace('torch.', '')}: return a tensor in "
               f"grad's dtype ({str(g.dtype).replace('torch.', '')})")
        expect(not _matches(u, g / g.norm()), f"{what}: your vector is +g/‖g‖, the direction "
               f"of steepest *ascent*; descent goes against the gradient")
        if isinstance(u, torch.Tensor) and u.shape == g.shape and not _matches(u, -g / g.norm()):
            length = float(u.detach().double().norm())
            expect(abs(length - 1) < 1e-6, f"{what}: your vector has length {length:.6g}, not "
                   f"1: divide by the Euclidean length ‖g‖ of the whole gradient (every entry "
                   f"of it, whatever its shape)")
        _close(u, -g / g.norm(), what)
        # and no random unit direction decreases f faster to first order
        others = torch.randn(200, g.numel(), generator=gen, dtype=torch.float64)
        others = others / others.norm(dim=1, keepdim=True)
        expect(float((u.flatten() * g.flatten()).sum()) <= float((others @ g.flatten()).min()),
               "some unit direction has a smaller directional derivative than yours")
    return "u = −∇f/‖∇f‖, the unit vector with the most negative directional derivative"


def _autograd_mse(X, W, b, Y):
    Wg, bg = W.clone().requires_grad_(True), b.clone().requires_grad_(True)
    loss = ((X @ Wg + bg - Y) ** 2).sum() / X.shape[0]
    return torch.autograd.grad(loss, [Wg, bg])


@exercise("ch02-mse-gradient",
          forbid=("mathref.linear_regression.mse_gradient", "mathref.linear_regression.mse_loss",
                  "mathref.losses.mse", "mathref.calculus.numerical_gradient",
                  "torch.nn.functional.mse_loss", "torch.ops.aten.mse_loss_backward")
          + AUTOGRAD_FUNCTIONAL,
          because="mse_gradient must compute the gradient from equation (ch02-linreg-grad), not "
                  "call a function that does it or ask autograd")
def check_ch02_mse_gradient(mse_gradient):
    """mse_gradient(X, W, b, Y) returns (∂L/∂W, ∂L/∂b) for L = (1/N)‖XW + b − Y‖²."""
    expect_callable(mse_gradient, "mse_gradient(X, W, b, Y)")
    by_hand = without_autograd(mse_gradient)   # the statement says "no autograd"
    gen = rng(1)
    # m = 3 and d = 4 first: there dividing by N·m (F.mse_loss's mean over all entries), by d
    # and a missing factor 2 give different answers, so each slip gets its own diagnosis
    for N, d, m in ((5, 4, 3), (8, 3, 2), (25, 4, 1)):
        X = torch.randn(N, d, generator=gen, dtype=torch.float64)
        W = torch.randn(d, m, generator=gen, dtype=torch.float64)
        b = torch.randn(m, generator=gen, dtype=torch.float64)
        Y = torch.randn(N, m, generator=gen, dtype=torch.float64)
        want_W, want_b = _autograd_mse(X, W, b, Y)      # before the call, from its own inputs
        got = by_hand(X.clone(), W.clone(), b.clone(), Y.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "expected a pair (grad_W, grad_b)")
        where = f"N={N}, d={d}, m={m}"
        for name, g, w in (("grad_W", got[0], want_W), ("grad_b", got[1], want_b)):
            # the type first: the messages below read g.dtype
            expect(isinstance(g, torch.Tensor), f"{name} for {where}: expected a torch.Tensor, "
                   f"got {type(g).__name__}")
            expect(g.dtype == X.dtype,
                   f"{name} for {where}: your tensor is {str(g.dtype).replace('torch.', '')}: "
                   f"return tensors in X's dtype (float64)")
            expect(not _matches(g, -w), f"{name} for {where} has the wrong sign: the residual "
                   f"is Ŷ − Y = XW + b − Y (prediction minus target)")
            expect(not _matches(g, N * w), f"{name} for {where} is N times too large (the "
                   f"gradient of the sum of squares): L averages over the N examples")
            expect(m <= 2 or not _matches(g, w / m), f"{name} for {where} is the gradient "
                   f"divided by m = {m}: this divides by N·m (what F.mse_loss does); the "
                   f"chapter's L divides by N only")
            expect(d in (2, m) or not _matches(g, w / d), f"{name} for {where} is the "
                   f"gradient divided by d = {d}: L averages over the N examples (the rows of "
                   f"X), not over the d features")
            expect(not _matches(g, w * N / d), f"{name} for {where} divides by d = {d} "
                   f"where L divides by N = {N}: N is X.shape[0], the number of examples"
                   if d != N - 1 else
                   f"{name} for {where} divides by {d}, which is N − 1 here (and also d): L "
                   f"divides by N = {N}, the number of examples (X.shape[0])")
            expect(not _matches(g, w / 2), f"{name} for {where} is half the gradient: the "
                   f"derivative of a square brings a factor 2"
                   + (" (or, with m = 2 outputs, you divided by N·m as F.mse_loss does; L "
                      "divides by N only)" if m == 2 else ""))
        expect(not (isinstance(got[1], torch.Tensor) and tuple(got[1].shape) == (N, m)),
               f"grad_b for {where} has shape {(N, m)}, one row per example: sum the residuals "
               f"over the examples to get the bias's shape {(m,)}")
        _close(got[0], want_W, f"grad_W for {where}")
        _close(got[1], want_b, f"grad_b for {where}")
    return "(2/N)Xᵀ(Ŷ − Y) and (2/N)Σₙ(Ŷ − Y)ₙ agree with autograd"


# the normal equations' solvers: the statement asks for torch.linalg.lstsq on the design matrix
_NORMAL_EQUATIONS = ("torch.linalg.solve", "torch.linalg.solve_ex", "torch.linalg.inv",
                     "torch.linalg.inv_ex", "torch.inverse", "torch.linalg.cholesky",
                     "torch.linalg.cholesky_ex", "torch.cholesky", "torch.cholesky_solve",
                     "torch.cholesky_inverse", "torch.Tensor.inverse", "torch.Tensor.cholesky",
                     "torch.Tensor.cholesky_solve", "torch.Tensor.cholesky_inverse")


# what factorizes a matrix for least squares: allowed only on the (N, d + 1) design matrix in
# X's dtype. Handed X̃ᵀX̃ instead ((d + 1) × (d + 1), in any dtype) they solve the normal
# equations, and handed a float64 copy of X̃ they hide float32's loss of digits.
_FACTORIZATIONS = {"torch.linalg.lstsq", "torch.linalg.pinv", "torch.pinverse",
                   "torch.Tensor.pinverse", "torch.linalg.svd", "torch.svd", "torch.Tensor.svd",
                   "torch.linalg.qr", "torch.qr", "torch.Tensor.qr", "torch.linalg.svdvals",
                   # QR in LAPACK's form: geqrf's output has X̃'s rows, and so has the
                   # Householder matrix the other two are handed first
                   "torch.geqrf", "torch.Tensor.geqrf", "torch.linalg.householder_product",
                   "torch.orgqr", "torch.Tensor.orgqr", "torch.ormqr", "torch.Tensor.ormqr"}


def _aten_names(*ops):
    """torch.ops.aten's names of ``ops``: the packet and each overload, which a solution can call
    directly (a TorchFunctionMode sees them under those objects, not the torch.linalg ones)."""
    names = []
    for op in ops:
        packet = getattr(torch.ops.aten, op)
        names += [f"torch.ops.aten.{op}"] + [f"torch.ops.aten.{op}.{overload}"
                                             for overload in packet.overloads()]
    return names


_FACTORIZATIONS |= set(_aten_names("linalg_lstsq", "linalg_pinv", "pinverse", "_linalg_svd",
                                   "linalg_svd", "svd", "linalg_svdvals", "linalg_qr", "qr",
                                   "geqrf", "linalg_householder_product", "orgqr", "ormqr"))

# what the statement lets solve the normal equations (so that the ill-conditioned float64 case
# fails them on accuracy): in the float32 call, allowed on float32 matrices only, since on a
# float64 copy of X̃ᵀX̃ they would pass that case with float64's digits
_NORMAL_EQUATION_SOLVERS = {
    "torch.linalg.lu_factor", "torch.linalg.lu_factor_ex", "torch.linalg.lu_solve",
    "torch.linalg.lu", "torch.lu_unpack", "torch.linalg.eigh", "torch.linalg.eigvalsh",
    "torch.linalg.det", "torch.det", "torch.Tensor.det", "torch.linalg.solve_triangular",
    "torch.triangular_solve", "torch.Tensor.triangular_solve", "torch.linalg.matrix_power",
    "torch.matrix_power", "torch.Tensor.matrix_power"} | set(_aten_names(
        "linalg_lu_factor", "linalg_lu_factor_ex", "linalg_lu_solve", "linalg_lu", "lu_unpack",
        "linalg_eigh", "_linalg_eigh", "linalg_eigvalsh", "linalg_det", "_linalg_det", "det",
        "linalg_solve_triangular", "triangular_solve", "linalg_matrix_power"))


# a float32 tensor turned into a NumPy array leaves PyTorch's sight (and float32, once NumPy
# upcasts it): refused outright in the float32 call, which the statement says
_TO_NUMPY = ("torch.Tensor.numpy", "torch.Tensor.__array__")

# the float32 call's other ways out of float32: a conversion of a tensor to another dtype
# (.double(), .to, .type: each runs aten._to_copy) and to Python numbers (.tolist(), .item(),
# float()), where plain Python would solve the normal equations in double precision (a tensor's
# truth value, as in `assert s[-1] > 0`, reads one scalar too and stays allowed). Not
# closed: a float64 copy made by arithmetic with a float64 tensor (type promotion) or by
# copying into a float64 buffer, then solved by elementary operations (the statement says so)
_OUT_OF_FLOAT32 = ("torch.Tensor.double", "torch.Tensor.tolist", "torch.Tensor.item",
                   "torch.Tensor.__float__", "torch.ops.aten._to_copy",
                   "torch.ops.aten._to_copy.default")
_FLOAT32_ONLY = tuple(f"{name}|dtype=float32" for name in sorted(_NORMAL_EQUATION_SOLVERS)) \
    + _TO_NUMPY + _OUT_OF_FLOAT32


def _pair(got):
    """The answer's (w, b), as a tuple or list of two: anything else fails here, before it is
    unpacked (an object whose __iter__ computes the pair would run after the call's rules)."""
    expect(isinstance(got, (tuple, list)) and len(got) == 2, "expected a pair (w, b)")
    return got


def _on_design_matrix(solve_least_squares, X, y, also=()):
    """solve_least_squares(X, y) with the factorizations refused on anything but a matrix of
    X's N rows in X's dtype (the design matrix X̃): handed X̃ᵀX̃ ((d + 1) rows, in any dtype)
    they solve the normal equations, and handed a float64 copy of X̃ they hide float32's loss
    of digits; ``also``: names refused outright in this call. Like every forbid rule, this one
    is applied where the student's code runs."""
    dtype = str(X.dtype).replace("torch.", "")
    names = [f"{name}|rows={X.shape[0]}|dtype={dtype}" for name in sorted(_FACTORIZATIONS)]
    names += list(also)
    return _pair(forbidding(solve_least_squares, names, "ch02-least-squares",
                            "call lstsq on the (N, d+1) design matrix in X's dtype; solving X̃ᵀX̃ "
                            "(in any dtype) is the normal equations, and converting X̃ to another "
                            "dtype (or to Python numbers) would only hide what forming X̃ᵀX̃ "
                            "does")(X, y))


@exercise("ch02-least-squares",
          forbid=("mathref.linear_regression.fit_least_squares",) + _NORMAL_EQUATIONS,
          because="solve least squares on the design matrix [X, 1] with torch.linalg.lstsq, not "
                  "with fit_least_squares or the normal equations XᵀXθ = Xᵀy")
def check_ch02_least_squares(solve_least_squares):
    """solve_least_squares(X, y) returns (w, b) minimizing ‖Xw + b − y‖², in X's dtype."""
    expect_callable(solve_least_squares, "solve_least_squares(X, y)")
    gen = rng(2)
    # a well-conditioned problem with noise, checked against the normal equations in float64
    X = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    y = X @ torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64) + 3.0 \
        + 0.1 * torch.randn(40, generator=gen, dtype=torch.float64)
    Xt = torch.cat([X, torch.ones(40, 1, dtype=X.dtype)], dim=1)
    theta = torch.linalg.solve(Xt.T @ Xt, Xt.T @ y)
    X_before, y_before = X.clone(), y.clone()
    got = _on_design_matrix(solve_least_squares, X, y)
    expect(torch.equal(X, X_before) and torch.equal(y, y_before),
           "your function changed X or y in place")
    w, b = (as_tensor(v, name, tensor_only=True) for v, name in zip(got, ("w", "b")))
    expect(tuple(w.shape) != (4,), "w has 4 entries, one more than the 3 features: the last "
           "entry of the least-squares solution on [X, 1] is the bias b, return it separately")
    expect(not _matches(w, torch.linalg.lstsq(X, y.unsqueeze(1)).solution[:, 0], rtol=1e-7),
           "w is the fit without a bias: append a column of ones to X (the design matrix "
           "[X, 1]) so that b is fitted too")
    _close(got[0], theta[:3], "w on a noisy problem", rtol=1e-7)
    _close(got[1], theta[3], "b on a noisy problem", rtol=1e-7)
    # an ill-conditioned problem in float64 (cond(X̃) ≈ 2e7, 1.6e7 to 2.7e7 over grader seeds):
    # least squares on X̃ lands within 2e-9 of the exact weights; the normal equations, whatever
    # solves them directly (solve, LU, eigh, Cramer's rule, NumPy), work with cond(X̃ᵀX̃) of
    # order 1e14 and miss by 1e-4 to 1e-1. Iterative refinement (the residual recomputed on X̃,
    # the correction solved with the same factors) recovers the digits and passes; so do
    # Householder QR, the SVD and Gram–Schmidt with reorthogonalization, while classical or
    # modified Gram–Schmidt on X̃ alone lose orthogonality and miss
    gen64 = rng(4)
    t = torch.randn(100, generator=gen64, dtype=torch.float64)
    X = torch.stack([t, t + 1e-7 * torch.randn(100, generator=gen64, dtype=torch.float64)], 1)
    y = X @ torch.tensor([1.0, 2.0], dtype=torch.float64) + 0.5
    w, b = _on_design_matrix(solve_least_squares, X, y)
    hint = (" (cond(X̃) ≈ 2·10⁷: a direct solve of a square system built from X̃ loses digits "
            "with that system's condition number. If you formed X̃ᵀX̃, that squares cond(X̃) to "
            "the order of 10¹⁴, and float64's 16 digits no longer hold the answer; the augmented "
            "system [[αI, X̃], [X̃ᵀ, 0]] is as badly conditioned when α is far above σ_min(X̃) "
            "(α = 1, say: its smallest eigenvalue is about σ_min²/α); if you orthogonalized X̃ "
            "by Gram–Schmidt, its columns lose orthogonality at this conditioning unless you "
            "orthogonalize twice. torch.linalg.lstsq on X̃ itself is accurate to ~10⁻⁹)")
    _close(as_tensor(w, "w", tensor_only=True), torch.tensor([1.0, 2.0], dtype=torch.float64),
           "w on an ill-conditioned float64 problem" + hint, rtol=0, atol=1e-6)
    _close(as_tensor(b, "b", tensor_only=True), torch.tensor(0.5, dtype=torch.float64),
           "b on an ill-conditioned float64 problem" + hint, rtol=0, atol=1e-6)
    # an ill-conditioned problem in float32 (two nearly equal features, cond(X̃) ≈ 2e3):
    # least squares recovers the exact weights, forming X̃ᵀX̃ squares the condition number
    t = torch.randn(100, generator=gen, dtype=torch.float64)
    X = torch.stack([t, t + 1e-3 * torch.randn(100, generator=gen, dtype=torch.float64)], 1)
    y = X @ torch.tensor([1.0, 2.0], dtype=torch.float64) + 0.5
    w, b = _on_design_matrix(solve_least_squares, X.float(), y.float(), also=_FLOAT32_ONLY)
    for name, v in (("w", w), ("b", b)):
        as_tensor(v, f"{name} on an ill-conditioned float32 problem", tensor_only=True)
        expect(v.dtype == torch.float32,
               f"{name} on an ill-conditioned float32 problem: your answer is {v.dtype}, not "
               f"float32. Work in X's dtype: torch.linalg.lstsq on the float32 design matrix is "
               f"accurate, and converting to float64 would only hide what forming XᵀX does")
    _close(as_tensor(w, "w", tensor_only=True), torch.tensor([1.0, 2.0], dtype=torch.float64),
           "w on an ill-conditioned float32 problem (did you form XᵀX?)", rtol=0, atol=2e-3)
    _close(as_tensor(b, "b", tensor_only=True), torch.tensor(0.5, dtype=torch.float64),
           "b on an ill-conditioned float32 problem", rtol=0, atol=2e-3)
    return "least squares on [X, 1], accurate even when XᵀX is badly conditioned"


@exercise("ch02-max-stable-lr",
          forbid=("mathref.linear_regression.mse_hessian",) + AUTOGRAD_FUNCTIONAL,
          because="derive the Hessian of the loss yourself: that is the exercise")
def check_ch02_max_stable_lr(max_stable_lr):
    """max_stable_lr(X): the learning rate above which full-batch gradient descent on
    L(w, b) = (1/N)‖Xw + b − y‖² diverges."""
    expect_callable(max_stable_lr, "max_stable_lr(X)")
    derived = without_autograd(    # "derive it": no Hessian from autograd
        max_stable_lr, because="it asks for the Hessian derived by hand, without autograd: "
                               "differentiate the loss (1/N)‖X̃θ − y‖² twice yourself")
    gen = rng(3)
    for N, scales in ((50, (1.0, 1.0)), (80, (1.0, 5.0, 0.3)), (30, (3.0,))):
        X = torch.randn(N, len(scales), generator=gen, dtype=torch.float64) \
            * torch.tensor(scales, dtype=torch.float64) + 1.0
        Xt = torch.cat([X, torch.ones(N, 1, dtype=X.dtype)], dim=1)
        H = (2.0 / N) * Xt.T @ Xt
        want = 2.0 / torch.linalg.eigvalsh(H).max().item()
        X_before = X.clone()
        got = float(derived(X))
        expect(torch.equal(X, X_before), "your function changed X in place")
        where = f"N={N}, {len(scales)} features: expected {want:.6g}, got {got:.6g}"
        if abs(got - want) > 1e-6 * want:
            H_no_bias = (2.0 / N) * X.T @ X
            for slip, hint in (
                    (want / 2, "= 1/λ_max, the safe default; divergence starts at 2/λ_max"),
                    (want / N, "the curvature of the *sum* of squares: L averages over N"),
                    (2 * want, "twice the threshold: the Hessian of (1/N)‖X̃θ − y‖² is "
                               "(2/N)X̃ᵀX̃, with the factor 2 that the derivative of a square "
                               "brings"),
                    (want * (N - 1) / N, "the Hessian with 1/(N − 1): L averages over the N "
                                         "examples, not N − 1"),
                    (2.0 / torch.linalg.eigvalsh(H_no_bias).max().item(),
                     "without the bias: b is a parameter too, so use [X, 1]"),
                    (2.0 / torch.linalg.eigvalsh(H).min().item(),
                     "from the smallest eigenvalue: the largest curvature decides divergence"),
                    (2.0 / torch.trace(H).item(),
                     "2/tr H: the trace is the sum of all the eigenvalues, larger than the "
                     "largest, so this rate is safe but not the threshold; divergence is set by "
                     "λ_max alone")):
                expect(abs(got - slip) > 1e-6 * abs(slip), f"{where}, {hint}")
        expect(abs(got - want) <= 1e-6 * want, where)
        y = torch.randn(N, generator=gen, dtype=torch.float64)
        for lr, converges in ((0.98 * got, True), (1.02 * got, False)):
            w, b = torch.zeros(X.shape[1], dtype=X.dtype), torch.zeros((), dtype=X.dtype)
            for _ in range(3000):
                r = X @ w + b - y
                w, b = w - lr * (2 / N) * X.T @ r, b - lr * (2 / N) * r.sum()
            finite = bool(torch.isfinite(w).all()) and w.abs().max().item() < 1e6
            expect(finite == converges, f"η = {lr:.4g} should make gradient descent "
                                        f"{'converge' if converges else 'diverge'}")
    return "η < 2/λ_max((2/N)X̃ᵀX̃), bias column included"


def _ridge_by_stacking(X, y, lam):
    """The oracle: w_λ as least squares on [X; √λ I], [y; 0] in float64 (QR, no SVD): its
    normal equations are (XᵀX + λI)w = Xᵀy, those of (ch02-ridge)."""
    X, y = X.double(), y.double()
    d = X.shape[1]
    A = torch.cat([X, lam ** 0.5 * torch.eye(d, dtype=X.dtype)])
    rhs = torch.cat([y, torch.zeros(d, dtype=X.dtype)])
    return torch.linalg.lstsq(A, rhs.unsqueeze(1), driver="gelsy").solution[:, 0]


def _ridge_slips(X, y, lams):
    """Typical wrong ridge paths, (k, d) each, with what each one did (from the checker's own
    SVD; every one is invariant under the SVD's sign choices, so the student's SVD gives it too)."""
    X, y, lams = X.double(), y.double(), lams.double()
    U, S, Vh = torch.linalg.svd(X, full_matrices=False)
    uy = U.T @ y
    lam = lams[:, None]
    pos = S > S.max() * 1e-12                                    # the least-squares solution
    ls = torch.where(pos, uy / torch.where(pos, S, 1.0), 0.0)    # (minimum norm: σ_i = 0 left out)
    def path(c):
        return c.expand(len(lams), -1) @ Vh if c.dim() == 1 else c @ Vh
    N = X.shape[0]
    return (
        (path(ls), "every row is the least-squares solution: λ did not change it. Each "
                   "component (u_i·y)/σ_i is to be multiplied by σ_i²/(σ_i² + λ)"),
        (path(uy / (S + lam)), "λ was added to σ_i: the penalty adds λ to σ_i², the eigenvalues "
                               "of XᵀX, so the component is σ_i(u_i·y)/(σ_i² + λ)"),
        (path(S ** 2 / (S ** 2 + lam) * uy), "the division by σ_i is missing: the shrinkage "
                                             "factor σ_i²/(σ_i² + λ) multiplies the least-squares "
                                             "component (u_i·y)/σ_i"),
        (path(lam / (S ** 2 + lam) * ls), "the factor is λ/(σ_i² + λ), the part that ridge "
                                          "removes: it keeps σ_i²/(σ_i² + λ)"),
        (path(S * uy / (S ** 2 + N * lam)), f"this is the solution of (XᵀX + Nλ I)w = Xᵀy, "
                                            f"N = {N}: the loss of (ch02-ridge) is the sum "
                                            f"‖Xw − y‖² + λ‖w‖², not the mean"),
        (path(S * uy / (S ** 2 + 2 * lam)), "this is the solution for 2λ: the gradient of "
                                            "‖Xw − y‖² + λ‖w‖² is 2Xᵀ(Xw − y) + 2λw, so the "
                                            "system is (XᵀX + λI)w = Xᵀy"),
        (path(S * uy / (S ** 2 + lam / 2)), "this is the solution for λ/2: the gradient of "
                                            "‖Xw − y‖² + λ‖w‖² is 2Xᵀ(Xw − y) + 2λw, so the "
                                            "system is (XᵀX + λI)w = Xᵀy"),
    )


# (matrix_rank counts the σ above a tolerance: on X harmless, a function of X's σ; on any other
# matrix, bisecting its tolerance would read off that matrix's σ, so it is held to X as well)
# (and the operators behind them, called through torch.ops: chapter 2's delta read, N1)
_SVDS = ("torch.linalg.svd", "torch.svd", "torch.Tensor.svd", "torch.linalg.svdvals",
         "torch.linalg.matrix_rank", "torch.ops.aten.linalg_svd", "torch.ops.aten._linalg_svd",
         "torch.ops.aten.svd", "torch.ops.aten.linalg_svdvals", "torch.ops.aten.linalg_matrix_rank")


def _on_x_itself(ridge_svd, X, y, lams):
    """ridge_svd(X, y, lams) with the SVD allowed only on X itself by value (or Xᵀ, in any
    dtype that holds it exactly): the SVD of XᵀX, of XᵀX + λI or of the stacked [X; √λI] would
    solve the ridge system (or the checker's least squares) under another name, and so would
    either of them zero-padded to X's shape (chapter 2's fourth read, P1)."""
    return forbidding(ridge_svd, [f"{name}|{equal_to(X)}" for name in _SVDS],
                      "ch02-ridge-svd", "take one SVD of X itself (or of Xᵀ): the SVD of XᵀX, "
                      "of XᵀX + λI or of [X; √λ I] solves the ridge system another way")(
                          X, y, lams)


@exercise("ch02-ridge-svd",
          forbid=_NORMAL_EQUATIONS + (
              "torch.linalg.lstsq", "torch.linalg.pinv", "torch.pinverse", "torch.Tensor.pinverse",
              "torch.linalg.eigh", "torch.linalg.eigvalsh", "torch.linalg.qr",
              "torch.linalg.lu_factor", "torch.linalg.lu_solve", "torch.linalg.solve_triangular",
              "mathref.linear_regression.fit_least_squares"),
          because="compute w_λ from one SVD of X by equation (ch02-ridge-svd), not by solving "
                  "the ridge system (XᵀX + λI)w = Xᵀy or the stacked least squares")
def check_ch02_ridge_svd(ridge_svd):
    """ridge_svd(X, y, lams) returns the (k, d) ridge solutions (XᵀX + λI)⁻¹Xᵀy, one row per λ."""
    expect_callable(ridge_svd, "ridge_svd(X, y, lams)")
    gen = rng(5)

    def penalties(scale, exponents):   # λ spread around σ² of the case, jittered
        return torch.tensor([scale * 10 ** (e + uniform(gen, -0.25, 0.25)) for e in exponents],
                            dtype=torch.float64)

    cases = []
    X = torch.randn(30, 4, generator=gen, dtype=torch.float64) \
        * torch.tensor([3.0, 1.0, 0.5, 0.1], dtype=torch.float64)
    cases.append(("tall X (30 × 4)", X, X @ torch.randn(4, generator=gen, dtype=torch.float64)
                  + 0.3 * torch.randn(30, generator=gen, dtype=torch.float64),
                  penalties(1.0, (-2.0, -1.0, 0.0, 1.0, 2.0))))
    t = torch.randn(50, generator=gen, dtype=torch.float64)    # section 2.8's two near-copies
    X = torch.stack([t, t + 0.01 * torch.randn(50, generator=gen, dtype=torch.float64)], 1)
    cases.append(("two nearly equal features (50 × 2)", X, X.sum(1) + 0.1 * torch.randn(
        50, generator=gen, dtype=torch.float64), penalties(1.0, (-4.0, -2.0, -1.0, 0.0))))
    X = torch.randn(8, 20, generator=gen, dtype=torch.float64)    # fewer examples than features
    cases.append(("wide X (8 × 20, N < d)", X, torch.randn(8, generator=gen, dtype=torch.float64),
                  penalties(10.0, (-2.0, 0.0, 1.0))))
    X = torch.randn(15, 5, generator=gen, dtype=torch.float64)
    X[:, -1] = 0.0      # a feature that is zero in every example: σ = 0 (exactly, from LAPACK)
    cases.append(("X with a feature that is 0 in every example (15 × 5)", X,
                  torch.randn(15, generator=gen, dtype=torch.float64),
                  penalties(1.0, (-1.0, 0.0, 1.0))))
    X = torch.randn(40, 3, generator=gen, dtype=torch.float64)
    cases.append(("tall float32 X (40 × 3)", X.float(), (X @ torch.tensor([1.0, -2.0, 0.5],
                  dtype=torch.float64) + 0.1 * torch.randn(40, generator=gen,
                  dtype=torch.float64)).float(), penalties(1.0, (-1.0, 0.0, 1.0)).float()))

    for where, X, y, lams in cases:
        want = torch.stack([_ridge_by_stacking(X, y, float(lam)) for lam in lams])
        before = (X.clone(), y.clone(), lams.clone())
        got = _on_x_itself(ridge_svd, X, y, lams)
        expect(all(torch.equal(a, b) for a, b in zip((X, y, lams), before)),
               "your function changed X, y or lams in place")
        expect(isinstance(got, torch.Tensor), f"{where}: expected a torch.Tensor, got "
               f"{type(got).__name__}")
        k, d = len(lams), X.shape[1]
        expect(tuple(got.shape) != (d, k) or k == d, f"{where}: expected shape {(k, d)}, got "
               f"{tuple(got.shape)}: one row per λ, so that row j is w_λ for lams[j]")
        expect(got.dtype == X.dtype, f"{where}: your tensor is "
               f"{str(got.dtype).replace('torch.', '')}: return a tensor in X's dtype "
               f"({str(X.dtype).replace('torch.', '')})")
        expect(tuple(got.shape) == (k, d), f"{where}: expected shape {(k, d)} (one row per λ "
               f"in lams, one column per feature), got {tuple(got.shape)}")
        expect(bool(torch.isfinite(got).all()), f"{where}: your result contains nan or inf"
               + (": σ_i = 0 for the zero feature, and (u_i·y)/σ_i is 0/0 or ∞ there. Write "
                  "the component as σ_i(u_i·y)/(σ_i² + λ), which is finite (0) at σ_i = 0"
                  if "0 in every example" in where else ""))
        float32 = X.dtype == torch.float32
        rtol, atol = (1e-4, 1e-5) if float32 else (1e-7, 1e-9)
        scale = float(want.abs().max())
        if not torch.allclose(got.double(), want, rtol=rtol, atol=atol * scale):
            for slip, hint in _ridge_slips(X, y, lams):
                expect(not torch.allclose(got.double(), slip, rtol=max(rtol, 1e-6),
                                          atol=atol * scale), f"{where}: {hint}")
        _close(got, want, f"w_λ for {where}", rtol=rtol, atol=atol * scale)
    return "w_λ = Σᵢ σᵢ(uᵢ·y)/(σᵢ² + λ) vᵢ for every λ, from one SVD, equal to least squares on [X; √λ I]"
