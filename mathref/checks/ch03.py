"""Checkers for chapter 3: neurons, activations, the MLP and backprop by hand."""
import torch
from torch import nn

from mathref.checks.core import integer, rng, seed_global
from mathref.checks.core import AUTOGRAD_FUNCTIONAL, FLOAT32_CAST_BACK, cast_back_from_float32
from mathref.checks.core import (exercise, expect, expect_callable, expect_close, expect_tensor_close,
                                 without_autograd)

__all__ = ["check_ch03_sigmoid_derivative", "check_ch03_parameter_count",
           "check_ch03_output_delta", "check_ch03_two_layer_backward"]

# finite differences of the loss would stand in for the derivation
_FINITE_DIFFERENCES = ("mathref.calculus.numerical_gradient",
                       "mathref.calculus.numerical_derivative", "mathref.calculus.check_gradients")


def _expect_tensor_close(got, want, what, rtol=1e-7, atol=1e-10):
    expect_tensor_close(got, want, what, rtol=rtol, atol=atol, tensor_only=True,
                        shape_hint=" (a gradient has its parameter's shape)")


def _matches(got, candidate, rtol=1e-6, atol=1e-9):
    """Whether the answer ``got`` equals ``candidate`` (a typical slip), shape included."""
    if not isinstance(got, torch.Tensor):
        return False
    got = got.detach().to("cpu", torch.float64)
    return got.shape == candidate.shape and bool(torch.allclose(got, candidate.double(),
                                                                rtol=rtol, atol=atol))


def _autograd_grad(f, *inputs):
    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    return torch.autograd.grad(f(*leaves), leaves)


# how close σ′ must come in float64, relative to σ′ itself (see the check)
_SIGMOID_RTOL = 2e-10


def _near_miss_cause(got, exact):
    """The cause of a near miss of σ′, named only when the values show it, else ''.

    Float32 arithmetic cast back to float64 leaves values that are all float32 numbers. A
    difference quotient's error is a multiple of a higher derivative of σ (σ″, σ‴, …, each of
    which changes sign, since it integrates to 0 over the line) plus rounding noise, so it
    changes sign on [−12, 12]; an added constant or a scale factor does not, and gets no cause."""
    d = got - exact
    if cast_back_from_float32(got):
        return f"; {FLOAT32_CAST_BACK}"
    if d.max().item() > 0 and d.min().item() < 0:
        return ("; the error changes sign along z, as a difference quotient's does (its "
                "truncation error is a multiple of a higher derivative of σ): a difference quotient "
                "leaves errors of this size")
    return ""


@exercise("ch03-sigmoid-derivative",
          # silu_grad = σ + zσ′ and gelu_grad hand over a derivative too; tanh_grad is allowed
          # (σ′(z) = tanh′(z/2)/4 is a derivation of its own), as the statement says
          forbid=("mathref.nn.sigmoid_grad", "mathref.nn.silu_grad", "mathref.nn.gelu_grad",
                  "torch.ops.aten.sigmoid_backward")
          + _FINITE_DIFFERENCES + AUTOGRAD_FUNCTIONAL,
          because="sigmoid_derivative must compute σ(z)(1 − σ(z)) itself")
def check_ch03_sigmoid_derivative(sigmoid_derivative):
    """sigmoid_derivative(z) returns σ′(z) = σ(z)(1 − σ(z)) elementwise, without autograd."""
    expect_callable(sigmoid_derivative, "sigmoid_derivative(z)")
    by_hand = without_autograd(sigmoid_derivative)
    z = torch.linspace(-12, 12, 97, dtype=torch.float64)
    z = torch.cat([z, (6 * torch.randn(32, generator=rng(1), dtype=torch.float64)).clamp(-12, 12)])
    (want,) = _autograd_grad(lambda t: torch.sigmoid(t).sum(), z)
    got = by_hand(z.clone())
    # σ′(z) = e/(1 + e)² with e = exp(−|z|) (σ′ is even): accurate to a few units of the last
    # place everywhere, unlike σ(1 − σ), whose 1 − σ loses digits for large z
    e = torch.exp(-z.abs())
    accurate = e / (1 + e) ** 2
    s = torch.sigmoid(z)
    expect(not _matches(got, z * (1 - z)), "σ′(z) on [−12, 12]: you computed z(1 − z); the "
           "formula is a(1 − a) with a = σ(z), the sigmoid's output")
    expect(not _matches(got, s), "σ′(z) on [−12, 12]: you returned σ(z) itself, not its "
           "derivative σ(z)(1 − σ(z))")
    expect(not _matches(got, 1 - s ** 2), "σ′(z) on [−12, 12]: 1 − σ² is the pattern of tanh′ "
           "= 1 − tanh²; the sigmoid's derivative is σ(1 − σ)")
    expect_close(by_hand(torch.tensor(0.0, dtype=torch.float64)), 0.25, "σ′(0)")
    # a near miss, within 1e-6 of σ′ everywhere (σ′ ≤ 1/4) but not to float64 rounding: float32
    # arithmetic (1 − σ keeps few digits at |z| = 12, 1e-2 relative there), a difference quotient,
    # or an added constant. Rejected here, before the generic comparison, with the cause named
    # only where the values show it (_near_miss_cause)
    if (isinstance(got, torch.Tensor) and got.is_floating_point() and got.shape == accurate.shape
            and bool(torch.isfinite(got).all())):
        got64 = got.detach().double()
        err = (got64 - accurate).abs()
        rel = (err / accurate).max().item()
        expect(err.max().item() > 1e-6 or rel <= _SIGMOID_RTOL,
               f"σ′(z) on [−12, 12]: off by up to {err.max().item():.2g} ({rel:.2g} relative), close "
               f"but not exact (the formula σ(z)(1 − σ(z)) in float64 is within "
               f"{_SIGMOID_RTOL:.0e} relative){_near_miss_cause(got64, accurate)}")
    _expect_tensor_close(got, want, "σ′(z) on [−12, 12]")
    # every formula for σ′ is within 4e-11 of it, relative, on [−12, 12] (σ(1 − σ): 1e-11 at
    # z = 12, where σ's own rounding is 1e-16 against σ′ ≈ 6e-6); a float64 central difference,
    # its Richardson extrapolation or a sixth-order stencil is not (5e-10 at best, the last at
    # h = 0.03; tests/test_checks_ch03.py). One taken at −|z| can be: it is not refused
    got64 = got.detach().double()
    rel = ((got64 - accurate).abs() / accurate).max().item()
    expect(rel <= _SIGMOID_RTOL, f"σ′(z) on [−12, 12]: off by up to {rel:.2g} relative, close but "
           f"not exact (the formula σ(z)(1 − σ(z)) is within {_SIGMOID_RTOL:.0e})"
           f"{_near_miss_cause(got64, accurate)}")
    z32 = torch.linspace(-8, 8, 33)                # float32 in, float32 accuracy expected
    (want32,) = _autograd_grad(lambda t: torch.sigmoid(t).sum(), z32.double())
    got32 = by_hand(z32.clone())
    expect(isinstance(got32, torch.Tensor) and got32.dtype == z32.dtype,
           f"σ′(z) for a float32 z: returned "
           f"{got32.dtype if isinstance(got32, torch.Tensor) else type(got32).__name__}; keep z's "
           f"dtype (float32 in, float32 out)")
    _expect_tensor_close(got32, want32, "σ′(z) for a float32 z", rtol=1e-5, atol=1e-7)
    # far in the tail σ(z) underflows to 0 and σ′ = σ(1 − σ) to 0; a formula built from
    # exp(−z), such as exp(−z)/(1 + exp(−z))², overflows there and returns inf/inf = NaN
    for z_far in (torch.tensor([-800.0, 800.0], dtype=torch.float64),
                  torch.tensor([-100.0, 100.0], dtype=torch.float32)):
        far = by_hand(z_far.clone())
        what = f"σ′(z) at z = ±{z_far[1].item():.0f} in {str(z_far.dtype).replace('torch.', '')}"
        expect(isinstance(far, torch.Tensor) and far.dtype == z_far.dtype,
               f"{what}: keep z's dtype")
        expect(bool(torch.isfinite(far).all()), f"{what}: got {far.tolist()}, not finite; "
               f"exp(−z) overflows for large −z, while σ(z)(1 − σ(z)) stays finite (it is 0 "
               f"to rounding there)")
        (want_far,) = _autograd_grad(lambda t: torch.sigmoid(t).sum(), z_far.double())
        _expect_tensor_close(far, want_far, what, rtol=1e-5, atol=1e-30)
    return "σ′ = σ(1 − σ), at most 1/4"


# what builds layers, or counts parameters, for the student
_BUILDS_LAYERS = ("mathref.nn.count_parameters", "torch.nn.Linear.__init__",
                  "torch.nn.LazyLinear.__init__", "mathref.nn.Linear.__init__",
                  "mathref.nn.MLP.__init__", "torch.nn.Module.parameters",
                  "torch.nn.Module.named_parameters",
                  # every layer, nn.Conv1d(a, b, 1) or nn.Bilinear included, runs Module.__init__
                  "torch.nn.Module.__init__")


# typical slips in counting, each with its cause, and the cases that confirm one: on each witness
# the count and every slip differ, and so do a dropped first or last layer
_COUNT_SLIPS = (
    (lambda s: sum(a * b for a, b in zip(s[:-1], s[1:])),
     ", the weights alone: each layer also has one bias per output unit"),
    (lambda s: sum(a * (b + 1) for a, b in zip(s[:-1], s[1:])),
     ": the biases belong to the outputs of a layer (n_out of them), not to its inputs"),
    (lambda s: sum(s),
     ", the number of units: count the connections n_in·n_out of each layer, plus its n_out biases"))
_SLIP_WITNESSES = ([7, 11, 5, 3], [6, 2, 9])


def _answer(count_mlp_parameters, sizes):
    """The answer's count for ``sizes``, or None where it raises (a slip is then not named)."""
    try:
        return count_mlp_parameters(list(sizes))
    except Exception:
        return None


@exercise("ch03-parameter-count", forbid=_BUILDS_LAYERS,
          because="count the weights and biases from the widths, without building the layers")
def check_ch03_parameter_count(count_mlp_parameters):
    """count_mlp_parameters(sizes) = number of weights and biases of Linear layers
    sizes[0] → sizes[1] → … → sizes[-1]."""
    expect_callable(count_mlp_parameters, "count_mlp_parameters(sizes)")
    gen = rng(2)
    drawn = [integer(gen, 1, 300) for _ in range(integer(gen, 2, 6))]
    for sizes in ([4, 3, 3, 2], [2, 1], [784, 128, 64, 10], [3, 5, 1], [10, 10], drawn):
        seed_global(0)
        model = nn.Sequential(*[nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])])
        want = sum(p.numel() for p in model.parameters())
        got = count_mlp_parameters(list(sizes))
        where = f"sizes {sizes}: nn.Linear layers hold {want} parameters, got {got!r}"
        expect(type(got) is int, f"{where}: return the count as a Python int, not "
               f"{type(got).__name__} (int(...) converts a NumPy or tensor count)")
        if got != want:
            witness = next(w for w in _SLIP_WITNESSES if w != sizes)
            for slip, cause in _COUNT_SLIPS:
                # named only when the answer follows the slip on the witness too: on [4, 3, 3, 2]
                # the weights alone and a dropped last layer (with its biases) both give 27
                expect(got != slip(sizes) or _answer(count_mlp_parameters, witness) != slip(witness),
                       where + cause)
        expect(got == want, where)
    return "Σ (n_in + 1)·n_out, as sum(p.numel() for p in model.parameters())"


@exercise("ch03-output-delta",
          forbid=("mathref.nn.mlp_backward", "mathref.linear_regression.mse_gradient",
                  "mathref.linear_regression.mse_loss", "mathref.losses.mse",
                  "torch.nn.functional.mse_loss", "torch.ops.aten.mse_loss_backward")
          + _FINITE_DIFFERENCES + AUTOGRAD_FUNCTIONAL,
          because="output_delta must compute ∂L/∂Ŷ from the formula")
def check_ch03_output_delta(output_delta):
    """output_delta(Y_hat, Y) = ∂L/∂Ŷ for L = (1/N) Σₙ ‖Ŷₙ − Yₙ‖² (identity output, so also
    δ₂ = ∂L/∂Z₂)."""
    expect_callable(output_delta, "output_delta(Y_hat, Y)")
    by_hand = without_autograd(output_delta)
    gen = rng(3)
    for n, d in ((5, 3), (8, 1), (2, 4), (6, 3)):
        Y_hat = torch.randn(n, d, generator=gen, dtype=torch.float64)
        Y = torch.randn(n, d, generator=gen, dtype=torch.float64)
        if n == 6:
            # every other row close to its target: there δ₂ is small, and a one-sided difference
            # quotient's error (its step, times ∂²L/∂Ŷ²/2 = 1/N, plus the rounding of the O(1)
            # loss over the step) is above the tolerance for every step (tests/test_checks_ch03.py)
            Y = Y_hat - Y * torch.tensor([1.0, 1e-3] * 3, dtype=torch.float64)[:, None]
        (want,) = _autograd_grad(lambda yh: ((yh - Y) ** 2).sum(dim=1).mean(), Y_hat)
        got = by_hand(Y_hat.clone(), Y.clone())
        what = f"δ₂ for N={n} examples with {d} outputs"
        expect(not isinstance(got, torch.Tensor) or got.dtype == Y_hat.dtype,
               f"{what}: returned {getattr(got, 'dtype', None)} for float64 inputs; keep Ŷ's "
               f"dtype (a float32 δ₂ has lost half its digits)")
        expect(not _matches(got, -want), f"{what}: the sign is flipped; δ₂ is proportional to "
               f"Ŷ − Y (prediction minus target)")
        if d > 1:
            expect(not _matches(got, want / d), f"{what}: you divided by N·d = {n * d}, the "
                   f"number of entries (as F.mse_loss does); L averages over the N = {n} "
                   f"examples only, so divide by N")
        expect(n == 2 or not _matches(got, want * n / 2), f"{what}: you returned Ŷ − Y; the "
               f"derivative of (1/N)Σ‖Ŷₙ − Yₙ‖² brings a factor 2/N")
        if isinstance(got, torch.Tensor) and got.shape == want.shape:
            got64 = got.detach().to("cpu", torch.float64)
            off = (got64 - want).abs()
            # the cause named as the values show it: float32 arithmetic cast back leaves float32
            # numbers only; otherwise a difference quotient, whose error (the size of a
            # one-sided step) stands out on the rows of the N = 6 case close to their targets
            if cast_back_from_float32(got64):
                cause = f"; {FLOAT32_CAST_BACK}"
            else:
                rows = " (every other row of Ŷ is close to its row of Y here)" if n == 6 else ""
                cause = (f"; a difference quotient leaves errors of this size{rows}: a one-sided "
                         f"one of the size of its step, a central one with a small step the "
                         f"rounding of the loss over the step")
            expect(not (off.max().item() <= 1e-3 and (off > 1e-7 * want.abs() + 1e-10).any()),
                   f"{what}: off by up to {off.max().item():.2g}, close but not to float64 "
                   f"rounding (the formula is){cause}")
        _expect_tensor_close(got, want, what)
    return "δ₂ = (2/N)(Ŷ − Y)"


# how close the chain rule in float64 comes to autograd, relative to 1 + max |gradient|
_CHAIN_RULE_TOL = 2e-14


@exercise("ch03-two-layer-backward",
          forbid=("mathref.nn.mlp_backward",) + _FINITE_DIFFERENCES + AUTOGRAD_FUNCTIONAL,
          because="two_layer_backward must compute the deltas and gradients itself, by the "
                  "chain rule")
def check_ch03_two_layer_backward(two_layer_backward):
    """two_layer_backward(X, Y, W1, b1, W2, b2) returns (delta1, dW1, db1, dW2, db2) for
    Ŷ = tanh(XW₁ + b₁)W₂ + b₂ and L = (1/N) Σₙ ‖Ŷₙ − Yₙ‖², without autograd; δ₁ = ∂L/∂Z₁ is
    checked on its own, so a wrong hidden delta is named as such."""
    expect_callable(two_layer_backward, "two_layer_backward(X, Y, W1, b1, W2, b2)")
    by_hand = without_autograd(two_layer_backward)
    gen = rng(4)
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
        Z1 = X @ W1 + b1
        (want_delta1,) = _autograd_grad(
            lambda Z1: (((torch.tanh(Z1) @ W2 + b2 - Y) ** 2).sum(dim=1).mean()), Z1)
        got = by_hand(X.clone(), Y.clone(), W1.clone(), b1.clone(), W2.clone(), b2.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 5,
               "expected a tuple (delta1, dW1, db1, dW2, db2) of five tensors"
               + (" (δ₁ comes first, then the four gradients)"
                  if isinstance(got, (tuple, list)) and len(got) == 4 else ""))
        shape = f"(N={n}, d_in={d_in}, d_h={d_h}, d_out={d_out})"
        # typical slips, named before the numbers
        expect(not _matches(got[3], want[2] * n / 2), f"dW2 {shape} is N/2 times too large: "
               f"δ₂ = (2/N)(Ŷ − Y) carries the factor 2/N of the loss")
        expect(not _matches(got[4], want[3] / n), f"db2 {shape} is N times too small: the bias "
               f"gradient sums δ₂ over the examples (sum, not mean)")
        dA1 = want_delta1 / (1 - torch.tanh(Z1) ** 2)           # ∂L/∂A₁
        expect(not _matches(got[0], dA1), f"delta1 = ∂L/∂Z1 {shape}: you returned ∂L/∂A1 = "
               f"δ₂W₂ᵀ; multiply by tanh′(Z₁) = 1 − A₁²")
        expect(not _matches(got[0], dA1 * (1 - Z1 ** 2)),
               f"delta1 = ∂L/∂Z1 {shape}: tanh′(Z₁) = 1 − tanh²(Z₁) = 1 − A₁², not 1 − Z₁²: "
               f"square the activation A₁, not the pre-activation")
        expect(not _matches(got[0], dA1 * (1 - torch.tanh(torch.tanh(Z1)) ** 2)),
               f"delta1 = ∂L/∂Z1 {shape}: tanh′ must be evaluated at Z₁: 1 − tanh²(Z₁) = 1 − A₁², "
               f"not 1 − tanh²(A₁)")
        # check from the output layer back, so the first wrong quantity is the one reported
        for name, g, w in (("dW2", got[3], want[2]), ("db2", got[4], want[3]),
                           ("delta1 = ∂L/∂Z1", got[0], want_delta1),
                           ("dW1", got[1], want[0]), ("db1", got[2], want[1])):
            if isinstance(g, torch.Tensor) and g.shape == w.shape:
                off = (g.detach().double() - w).abs().max().item()
                scale = 1 + w.abs().max().item()
                # the chain rule in float64 comes within 2e-16·scale of autograd (any of the
                # forms in tests/exercises/ch03.py); a sixth-order difference quotient of the
                # loss, at its best step, within 3e-13·scale (tests/test_checks_ch03.py)
                expect(not (_CHAIN_RULE_TOL * scale < off <= 1e-5 * scale),
                       f"{name} {shape}: off by up to {off:.2g}, close but not to float64 "
                       f"rounding (the chain rule in float64 is within {_CHAIN_RULE_TOL:.0e} "
                       f"relative); arithmetic in float32, or a difference quotient, leaves "
                       f"errors of this size")
            _expect_tensor_close(g, w, f"{name} {shape}", rtol=1e-9, atol=1e-12)
    return "δ₁ and all four gradients match autograd in float64, computed without it"
