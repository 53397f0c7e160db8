"""Checkers for chapter 4: automatic differentiation."""
import functools
import math
import re

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from mathref.autograd import Value
from mathref.calculus import check_gradients
from mathref.checks.core import integer, rng, uniform
from mathref.checks.core import AUTOGRAD_FUNCTIONAL
from mathref.checks.core import exercise, expect, expect_callable, expect_close, without_autograd
from mathref.checks.core import CheckFailure, ForbiddenCall, LOOKED_UP, _refusing

__all__ = ["check_ch04_sigmoid_backward", "check_ch04_topological_order",
           "check_ch04_embedding_cross_entropy_backward",
           "check_ch04_linear_tanh_vjp", "check_ch04_two_layer_jvp", "check_ch04_silu_backward"]


# finite differences stand in for a derivation; the engine's own backward does it for the student
_FINITE_DIFFERENCES = ("mathref.calculus.numerical_gradient",
                       "mathref.calculus.numerical_derivative", "mathref.calculus.check_gradients")


def _sigmoid(x):
    return 1 / (1 + math.exp(-x))


def _near(a, b, rtol=1e-9):
    return abs(a - b) <= rtol * max(abs(a), abs(b), 1e-300)


_LOW_PRECISION = (torch.float32, torch.float16, torch.bfloat16)


class _Precision(TorchDispatchMode):
    """Remembers the low-precision dtype of a tensor whose values reach the answer's float64
    arithmetic while the answer runs (float32 arithmetic inside an answer that returns float64:
    its rounding, about 6e-8 relative, is what the tight checks then see, not a difference
    quotient's error). A low-precision tensor counts where it is converted (``.double()``,
    ``.item()``, a copy into a float64 tensor) or where one of more than one element enters an
    operation with a float64 result. A lone float32 number in float64 arithmetic does not
    (``x + torch.tensor(1e-5)`` is float64: a 0-d tensor does not set the dtype), nor does a
    float32 tensor made and not used."""

    _CONVERSIONS = ("aten._to_copy", "aten.to", "aten.copy_", "aten.copy", "aten.item",
                    "aten._local_scalar_dense")

    def __init__(self):
        super().__init__()
        self.low = None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.low is None:      # (plain loops: a comprehension is a call the gate refuses)
            low, big, high, outs = None, False, False, 0
            for t in tree_leaves((args, kwargs)):
                if isinstance(t, torch.Tensor) and t.dtype in _LOW_PRECISION:
                    low, big = t.dtype, big or t.numel() > 1
            if low is not None:
                for t in tree_leaves(out):
                    if isinstance(t, torch.Tensor):
                        outs += 1
                        high = high or (t.dtype.is_floating_point
                                        and t.dtype not in _LOW_PRECISION)
                converted = str(func.overloadpacket) in self._CONVERSIONS and (high or not outs)
                if converted or (high and big):
                    self.low = low
        return out


def _watched(answer, label, because, precision):
    """``answer`` (already wrapped by the checker's rules) with two causes made readable:
    low-precision arithmetic, recorded in ``precision`` (a :class:`_Precision`), and a refused
    ``torch.ops`` operator used as a dictionary key (``decomposition_table[aten.op.default]``
    meets the stand-in that refuses the operator, mathref.checks.core's ``_refusing``, and
    failed as a KeyError that named neither the operator nor the reason). Under the grader the
    answer runs in another process, where neither is seen: the messages then stay generic."""
    @functools.wraps(answer)
    def call(*args, **kwargs):
        start = len(LOOKED_UP)
        try:
            with precision:
                return answer(*args, **kwargs)
        except (KeyError, TypeError, AttributeError) as err:
            # decomposition_table[op] fails as a KeyError, decomposition_table.get(op) returns
            # None and fails later ("'NoneType' object is not callable"): the stand-in was
            # hashed as a key either way (core's LOOKED_UP)
            key = err.args[0] if isinstance(err, KeyError) and err.args else None
            name = (key._forbidden_name if isinstance(key, _refusing)
                    else LOOKED_UP[start] if len(LOOKED_UP) > start else None)
            if name is not None:
                raise CheckFailure(
                    f"your solution ran a lookup keyed by {name} (in a table such as "
                    f"torch._decomp's decomposition_table: during the check that key stands "
                    f"for the refused operator, so the lookup finds nothing), which {label} "
                    f"does not allow: {because}") from None
            raise
        finally:
            del LOOKED_UP[start:]
    return call


def _low_precision_hint(precision, exact, relative):
    """The likely cause of a result close to the answer but not to rounding; ``exact`` names
    what reaches rounding accuracy, ``relative`` is the error relative to the answer's size
    (float32 arithmetic, unseen under the grader, is named only where it is that large)."""
    if precision.low is not None:
        return (f": close but more than rounding, and your code computed in {precision.low} "
                f"(its rounding, about 6e-8 relative for float32, is far above the check's "
                f"tolerance): compute in float64, the dtype of the inputs")
    float32 = "float32 arithmetic (about 6e-8 relative) or " if relative > 1e-9 else ""
    return (f": close but more than rounding, as {float32}a numerical approximation such as a "
            f"difference quotient would be; {exact} in float64 is exact to rounding")


def _expect_float64(got, want, what):
    """Fail with the dtype as the cause when ``got`` (a number or tensor) is a low-precision
    tensor close to ``want``: its rounding, not a wrong formula, is what the tight checks see."""
    dtype = getattr(got, "dtype", None)
    if dtype not in _LOW_PRECISION:
        return
    got = got.detach().to("cpu", torch.float64)
    want = torch.as_tensor(want, dtype=torch.float64)
    close = got.shape == want.shape and bool(torch.allclose(got, want, rtol=1e-3, atol=1e-6))
    expect(not close, f"{what}: your result is {dtype}, whose rounding alone exceeds what the "
           f"check allows: compute in float64, the dtype of the inputs")


def _matches(got, candidate, rtol=1e-6, atol=1e-9):
    """Whether the tensor answer ``got`` equals ``candidate`` (a typical slip), shape included."""
    got = torch.as_tensor(got).detach().to("cpu", torch.float64)
    return got.shape == candidate.shape and bool(torch.allclose(got, candidate, rtol=rtol,
                                                                atol=atol))


_SIGMOID_BECAUSE = "sigmoid_backward must apply σ′ = σ(1 − σ) to the output y itself"


@exercise("ch04-sigmoid-backward",
          forbid=("mathref.nn.sigmoid_grad", "torch.ops.aten.sigmoid_backward",
                  "mathref.autograd.Value.sigmoid", "mathref.autograd.Value.backward")
          + _FINITE_DIFFERENCES + AUTOGRAD_FUNCTIONAL,
          because=_SIGMOID_BECAUSE)
def check_ch04_sigmoid_backward(sigmoid_backward):
    """sigmoid_backward(x, y, grad_y) returns grad_y · σ'(x) = grad_y · y(1 − y), y = σ(x),
    without autograd."""
    expect_callable(sigmoid_backward, "sigmoid_backward(x, y, grad_y)")
    precision = _Precision()
    sigmoid_backward = _watched(without_autograd(sigmoid_backward), "ch04-sigmoid-backward",
                                _SIGMOID_BECAUSE, precision)
    gen = rng(1)
    drawn = [(round(uniform(gen, -6.0, 6.0), 4), round(uniform(gen, 0.5, 3.0), 4)
              * (1 if k % 2 else -1)) for k in range(24)]
    for x, g in [(0.0, 1.0), (1.5, 1.0), (-2.0, 0.5), (0.7, -3.0), (3.0, 2.0)] + drawn:
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        torch.sigmoid(t).backward(torch.tensor(g, dtype=torch.float64))
        y = _sigmoid(x)
        got = sigmoid_backward(x, y, g)
        what = f"sigmoid_backward(x={x}, y=σ(x), grad_y={g})"
        number = isinstance(got, (int, float)) or (isinstance(got, torch.Tensor)
                                                    and got.numel() == 1)
        if number and not _near(float(got), t.grad.item()):
            got_f = float(got)
            for slip, hint in ((y * (1 - y), "you left out grad_y: the message to x is grad_y "
                                             "times dy/dx (the chain rule)"),
                               (g * x * (1 - x), "σ(1 − σ) must be evaluated at the output y = "
                                                 "σ(x), not at the input x"),
                               (g * (1 - y * y), "1 − y² is tanh's derivative; the sigmoid's is "
                                                 "y(1 − y)")):
                expect(not _near(got_f, slip), f"{what}: expected {t.grad.item():.10g}, got "
                       f"{got_f:.10g}; {hint}")
        # tight: an exact formula (y(1 − y), or one from x: e^{−x}/(1 + e^{−x})², (1 − tanh²(x/2))/4)
        # is within 2e-16·|grad_y| of autograd on [−6, 6]; the Richardson-extrapolated central
        # differences we tried miss by more than 1e-15·|grad_y| at a third of the points or more
        tol = 1e-15 * abs(g)
        _expect_float64(got, t.grad.item(), what)
        if number:
            off = abs(float(got) - t.grad.item())
            expect(not tol < off < 1e-5, f"{what}: off by {off:.2g} (the check allows "
                   f"1e-15·|grad_y|)"
                   + _low_precision_hint(precision, "grad_y·y(1 − y)",
                                         off / max(abs(t.grad.item()), 1e-300)))
        expect_close(got, t.grad.item(), what, rtol=0, atol=tol)
    # inside the engine: L = s·s + s·x with s = σ(x), so s and x are both used twice
    for x0 in (-1.2, 0.4):
        x = Value(x0)
        s = x.apply(_sigmoid, sigmoid_backward, "σ")
        (s * s + s * x).backward()
        t = torch.tensor(x0, dtype=torch.float64, requires_grad=True)
        ts = torch.sigmoid(t)
        (ts * ts + ts * t).backward()
        expect_close(x.grad, t.grad.item(), f"∂L/∂x for L = σ(x)² + σ(x)·x at x={x0} "
                     f"(your rule inside Value)", rtol=1e-9, atol=1e-12)
    return "σ′ = σ(1 − σ), times the upstream gradient"


def _random_graph(seed):
    gen = rng(seed)
    leaves = [Value(float(v)) for v in torch.randn(3, generator=gen)]
    pool = list(leaves)
    for k in range(8):
        i, j = torch.randint(0, len(pool), (2,), generator=gen).tolist()
        pool.append(pool[i] * pool[j] if k % 2 else (pool[i] + pool[j]).tanh())
    return pool[-1] + pool[-2] + pool[3]


_TOPO_BECAUSE = "topo_sort must do the depth-first search itself"
# the gate's refusal ends with what it allows, PyTorch's elementary operations: not what a graph
# traversal is written with, so this exercise's refusals say what it asks for instead
_GATE_REFUSAL = re.compile(r"your solution ran (?P<what>.*?) \(from (?P<where>.*?)\), which "
                           r"ch04-topological-order does not allow")


def _plain_python(topo_sort):
    """``topo_sort`` with the gate's refusals reworded for a graph traversal: a third-party
    package is named as the package (its first function's name, often a decorator's wrapper
    such as networkx's ``func``, says nothing), and the exercise's own reason ends them."""
    @functools.wraps(topo_sort)
    def call(root):
        try:
            return topo_sort(root)
        except ForbiddenCall as refusal:
            found = _GATE_REFUSAL.match(str(refusal))
            if found is None:
                raise
            what, where = found["what"], found["where"]
            ran = (f"code from {where} (its function {what})" if where.startswith("the package")
                   else f"{what} (from {where})")
            raise CheckFailure(
                f"your solution ran {ran}, which ch04-topological-order does not allow: "
                f"{_TOPO_BECAUSE}, in plain Python over each node's _prev with a set of visited "
                f"nodes (no graph library, and not the engine's own topological_order or "
                f"backward)") from None
    return call


@exercise("ch04-topological-order",
          forbid=("mathref.autograd.topological_order", "mathref.autograd.Value.backward",
                  "graphlib.TopologicalSorter.prepare", "graphlib.TopologicalSorter.static_order",
                  "graphlib.TopologicalSorter.get_ready", "graphlib.TopologicalSorter.done"),
          because=_TOPO_BECAUSE)
def check_ch04_topological_order(topo_sort):
    """topo_sort(root) lists every node of root's graph once, each after all its children."""
    expect_callable(topo_sort, "topo_sort(root)")
    topo_sort = _plain_python(topo_sort)
    a = Value(2.0)
    b = a * a
    c = b + a
    x = Value(0.5)
    d = x + (x * x).tanh()       # x is needed before x·x: breadth-first orders get this wrong
    graphs = [("a single leaf", Value(1.0)), ("c = a·a + a", c), ("d = x + tanh(x·x)", d)]
    graphs += [(f"random graph {s}", _random_graph(s)) for s in range(4)]
    for name, root in graphs:
        order = list(topo_sort(root))
        ids = [id(v) for v in order]
        expect(len(ids) == len(set(ids)), f"{name}: a node appears more than once (a node used "
               f"twice must still be listed once: keep a set of visited nodes)")
        everything, stack = set(), [root]
        while stack:
            v = stack.pop()
            if id(v) not in everything:
                everything.add(id(v))
                stack.extend(v._prev)
        expect(set(ids) == everything, f"{name}: expected all {len(everything)} nodes of the "
               f"graph, got {len(set(ids) & everything)} of them"
               + (" and others" if set(ids) - everything else ""))
        where = {i: k for k, i in enumerate(ids)}
        for v in order:
            for child in v._prev:
                expect(where[id(child)] < where[id(v)], f"{name}: a node comes before one of "
                       f"its children (children first, the root last)")
        expect(order[-1] is root, f"{name}: the root must come last")
    return "children before parents, every node once"


def _expect_to_rounding(got, want, name, oracle, where, precision):
    """Fail unless ``got`` is within 1e-14·(1 + max|want|) of ``oracle``'s ``want``. The chain
    rule in any arrangement (1 − y², (1 − y)(1 + y), 1/cosh², 4σ(2z)(1 − σ(2z)), loops, the whole
    Jacobian) came within 1e-15·(1 + max|want|) of autograd's VJP and torch.func.jvp (200 draws
    of the JVP's inputs); a plain central difference misses by 1e-10 or more. A float64
    Richardson-extrapolated central difference comes close. Per entry of the VJP's gradients
    (h₀ = 0.5, 0.25, 0.125 with 7, 6, 5 levels) it missed by 6.6e-14, about 5 times the
    tolerance, on each of 21 draws. Along the JVP's directions (h₀ = 0.5, 7 levels) its error
    over 1 + max|want| ranged from 4.6e-15 to a median of 1.5e-14 on 200 draws, under the
    tolerance on 15% of them: it passes on some inputs, which the JVP's statement says."""
    err = (got - want).abs().max().item()
    expect(err < 1e-14 * (1 + want.abs().max().item()),
           f"{name} differs from {oracle} by up to {err:.3g} ({where})"
           + (_low_precision_hint(precision, "the chain rule", err / want.abs().max().item())
              if err < 1e-5 else ""))


def _vjp_inputs(seed):
    gen = rng(seed)
    x = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    W = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    v = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    return x, W, v


_VJP_BECAUSE = "linear_tanh_vjp must apply the chain rule itself, with matrix products"


@exercise("ch04-linear-tanh-vjp",
          forbid=("torch.ops.aten.tanh_backward", "mathref.nn.mlp_backward") + _FINITE_DIFFERENCES
          + AUTOGRAD_FUNCTIONAL,
          because=_VJP_BECAUSE)
def check_ch04_linear_tanh_vjp(linear_tanh_vjp):
    """linear_tanh_vjp(x, W, v) returns (vᵀ∂y/∂x, vᵀ∂y/∂W) for y = tanh(xW)."""
    expect_callable(linear_tanh_vjp, "linear_tanh_vjp(x, W, v)")
    precision = _Precision()
    by_hand = _watched(without_autograd(linear_tanh_vjp), "ch04-linear-tanh-vjp", _VJP_BECAUSE,
                       precision)                   # "no autograd": matrix products only
    for seed in (0, 1):
        x, W, v = _vjp_inputs(seed)
        got = by_hand(x.clone(), W.clone(), v.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "return two tensors: (grad_x, grad_W)")
        xl, Wl = x.clone().requires_grad_(True), W.clone().requires_grad_(True)
        torch.tanh(xl @ Wl).backward(v)
        _expect_float64(got[0], xl.grad, f"grad_x (seed {seed})")
        _expect_float64(got[1], Wl.grad, f"grad_W (seed {seed})")
        gx, gW = (torch.as_tensor(g, dtype=torch.float64) for g in got)
        y = torch.tanh(x @ W)
        missing = "the tanh′ factor 1 − y² is missing: the message at z = xW is v ⊙ (1 − y²)"
        unsquared = "tanh′(z) = 1 − y², with y squared, not 1 − y"
        for name, g, want, slips in (
                ("grad_x", gx, xl.grad, ((v @ W.T, missing), ((v * (1 - y)) @ W.T, unsquared))),
                ("grad_W", gW, Wl.grad, ((x.T @ v, missing), (x.T @ (v * (1 - y)), unsquared)))):
            expect(tuple(g.shape) == tuple(want.shape), f"{name} must have the shape of its "
                   f"input {tuple(want.shape)}, got {tuple(g.shape)}"
                   + (" (the transpose: grad_W = xᵀ·δ)" if tuple(g.shape) == tuple(want.shape)[::-1]
                      else ""))
            for slip, hint in slips:
                expect(not _matches(g, slip), f"{name} differs from autograd's vector–Jacobian "
                       f"product (seed {seed}): {hint}")
            _expect_to_rounding(g, want, name, "autograd's vector–Jacobian product",
                                f"seed {seed}", precision)
    return "grad_x = (v ⊙ (1 − y²)) Wᵀ, grad_W = xᵀ (v ⊙ (1 − y²))"


_JVP_BECAUSE = ("two_layer_jvp must carry the tangent through the two layers itself (forward "
                "mode), with matrix products, without autograd")
# (n, d, m, k): k directions as the columns of U, or one direction (None); d is the hidden width
# (the statement's, not h, which the chapter uses for a step and a hidden activation). With
# d = m = k a vector of length d or m broadcasts along the wrong axis of a (d, k) or (m, k)
# matrix without an error; with m = n the vector–Jacobian product uᵀJ (reverse mode) has Ju's
# shape
_JVP_CASES = ((4, 6, 4, None), (5, 3, 3, 3), (6, 4, 7, 3), (5, 4, 3, None))


def _two_layer(X, V, w):
    return torch.tanh(V @ torch.tanh(X @ w))


def _jvp_slips(X, V, w, u):
    """Typical wrong tangents for F(w) = tanh(V tanh(Xw)) along u, each with its hint."""
    a, y = torch.tanh(X @ w), _two_layer(X, V, w)
    col = (lambda t: t[:, None]) if u.dim() == 2 else (lambda t: t)
    Xu = X @ u
    slips = [(col(1 - y ** 2) * (V @ Xu), "the inner tanh′ factor 1 − a² (a = tanh(Xw)) is "
                                            "missing: the tangent of a is (1 − a²) ⊙ Xu"),
             (V @ (col(1 - a ** 2) * Xu), "the outer tanh′ factor 1 − F² is missing"),
             (col(1 - y) * (V @ (col(1 - a) * Xu)), "tanh′ = 1 − tanh², squared, not 1 − tanh")]
    if u.dim() == 2 and u.shape[1] == a.shape[0] == y.shape[0]:
        slips.append(((1 - y ** 2) * (V @ ((1 - a ** 2) * Xu)),
                      "with k directions, 1 − a² multiplies each column of XU: write "
                      "(1 − a²)[:, None] * (X @ U), and the same for 1 − F²; without [:, None] "
                      "a vector broadcasts along the rows (no error here, since k = d = m)"))
    if u.dim() == 1 and X.shape[1] == V.shape[0]:
        slips.append((X.T @ ((1 - a ** 2) * (V.T @ ((1 - y ** 2) * u))),
                      "that is uᵀJ, the vector–Jacobian product of reverse mode (the transposed "
                      "matrices, applied last layer first); forward mode computes Ju, first "
                      "layer first"))
    return slips


@exercise("ch04-two-layer-jvp",
          forbid=("torch.ops.aten.tanh_backward",) + _FINITE_DIFFERENCES + AUTOGRAD_FUNCTIONAL,
          because=_JVP_BECAUSE)
def check_ch04_two_layer_jvp(two_layer_jvp):
    """two_layer_jvp(X, V, w, u) returns (F(w), Ju) for F(w) = tanh(V tanh(Xw)) and J = ∂F/∂w,
    u one direction (n,) or k directions (n, k); compared with torch.func.jvp."""
    expect_callable(two_layer_jvp, "two_layer_jvp(X, V, w, u)")
    precision = _Precision()
    # (without_autograd's own reason speaks of a gradient: this exercise asks for Ju)
    by_hand = _watched(without_autograd(two_layer_jvp, because=_JVP_BECAUSE),
                       "ch04-two-layer-jvp", _JVP_BECAUSE, precision)
    for case, (n, d, m, k) in enumerate(_JVP_CASES):
        gen = rng(40 + case)
        X = torch.randn(d, n, generator=gen, dtype=torch.float64) / n ** 0.5
        V = torch.randn(m, d, generator=gen, dtype=torch.float64) / d ** 0.5
        w = torch.randn(n, generator=gen, dtype=torch.float64)
        u = torch.randn(*((n,) if k is None else (n, k)), generator=gen, dtype=torch.float64)
        what = (f"n = {n}, d = {d}, m = {m}, " + ("one direction u of shape "
                f"({n},)" if k is None else f"k = {k} directions, U of shape ({n}, {k})"))
        got = by_hand(X.clone(), V.clone(), w.clone(), u.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               f"return two tensors: (F(w), Ju) ({what})")
        value = _two_layer(X, V, w)
        # the oracle: PyTorch's forward mode, one direction at a time
        columns = u.T if k is not None else u[None]
        tangent = torch.stack([torch.func.jvp(lambda w_: _two_layer(X, V, w_), (w,), (c,))[1]
                               for c in columns], dim=-1)
        tangent = tangent if k is not None else tangent[:, 0]
        for name, g, want, slips, oracle in (
                ("F(w)", got[0], value, (), "tanh(V tanh(Xw))"),
                ("Ju", got[1], tangent, _jvp_slips(X, V, w, u), "torch.func.jvp")):
            _expect_float64(g, want, f"{name} ({what})")
            g = torch.as_tensor(g, dtype=torch.float64)
            expect(tuple(g.shape) == tuple(want.shape), f"{name} ({what}): expected shape "
                   f"{tuple(want.shape)}, got {tuple(g.shape)}")
            for slip, hint in slips:
                expect(not _matches(g, slip), f"{name} differs from {oracle} ({what}): {hint}")
            _expect_to_rounding(g, want, name, oracle, what, precision)
    return "Ju = (1 − F²) ⊙ V((1 − a²) ⊙ Xu), a = tanh(Xw), in one pass"


def _silu_function(backward_fn):
    class SiLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * torch.sigmoid(x)

        @staticmethod
        def backward(ctx, grad_y):
            x, = ctx.saved_tensors
            return backward_fn(x, grad_y)
    return SiLU.apply


_SILU_BECAUSE = ("derive SiLU's derivative with the product rule; F.silu's backward, or "
                 "differences of SiLU, would do it for you")


def _keeping_x(backward):
    """``backward`` refused when it changes its argument x in place: in the check's
    autograd.Function, x is the input SiLU saved for backward (section 4.7's second bug)."""
    @functools.wraps(backward)
    def call(x, grad_y):
        version = x._version
        try:
            out = backward(x, grad_y)
        except Exception:
            if x._version != version:
                raise CheckFailure(_IN_PLACE) from None
            raise
        expect(x._version == version, _IN_PLACE)
        return out
    return call


_IN_PLACE = ("your silu_backward changed its argument x in place (x.mul_, x += …, x[...] = …): "
             "x is the tensor the forward saved for backward, the caller's input itself, so "
             "the change corrupts it (section 4.7's second bug). Compute into new tensors "
             "(x * s, not x.mul_(s))")


@exercise("ch04-silu-backward",
          forbid=("torch.nn.functional.silu", "torch.ops.aten.silu", "torch.ops.aten.silu_",
                  "torch.ops.aten.silu_backward", "mathref.nn.silu", "mathref.nn.silu_grad")
          + _FINITE_DIFFERENCES + AUTOGRAD_FUNCTIONAL,
          because=_SILU_BECAUSE)
def check_ch04_silu_backward(silu_backward):
    """silu_backward(x, grad_y) returns grad_y · (σ(x) + x σ(x)(1 − σ(x))), derived: without
    autograd, F.silu's backward, the course's finite-difference helpers or complex tensors."""
    expect_callable(silu_backward, "silu_backward(x, grad_y)")
    precision = _Precision()
    silu_backward = _keeping_x(_watched(without_autograd(silu_backward), "ch04-silu-backward",
                                        _SILU_BECAUSE, precision))
    silu = _silu_function(silu_backward)
    gen = rng(0)
    x = torch.randn(7, generator=gen, dtype=torch.float64) * 3
    g0 = torch.randn(7, generator=gen, dtype=torch.float64)
    s = torch.sigmoid(x)
    first = silu_backward(x.clone(), g0.clone())
    x0 = x.clone().requires_grad_(True)
    torch.nn.functional.silu(x0).backward(g0)
    _expect_float64(first, x0.grad, "silu_backward")
    for slip, hint in ((g0 * x * s * (1 - s), "that is the buggy rule x·σ′(x): the product rule "
                        "for y = x·σ(x) adds the term σ(x)·(dx/dx) = σ(x)"),
                       (g0 * (s - x * s * (1 - s)), "the product rule adds its two terms: "
                        "σ(x) + x·σ′(x)"),
                       (s + x * s * (1 - s), "you left out grad_y: return grad_y times dy/dx")):
        expect(not _matches(first, slip), f"your backward is wrong: {hint}")
    report = check_gradients(lambda t: silu(t), x, verbose=False)
    expect(report.ok, f"the gradient check still fails: max abs error "
           f"{report.max_abs_error:.3g} against finite differences")
    xl = x.clone().requires_grad_(True)
    ok = torch.autograd.gradcheck(silu, (xl,), raise_exception=False)
    expect(ok, "torch.autograd.gradcheck rejects your backward")
    # the exact formula agrees with autograd through F.silu to ~1e-16 on 51 points over [−30, 30];
    # the float64 difference quotients we tried (fourth-order stencils, Richardson tableaux) miss
    # by 1e-13 or more there. Python's own complex numbers are not refused, so a complex step
    # written with them passes: the statement asks for the derivation and promises no more
    x_wide = torch.cat([x, torch.linspace(-30, 30, 51, dtype=torch.float64)])
    g = torch.randn(len(x_wide), generator=gen, dtype=torch.float64)
    xr = x_wide.clone().requires_grad_(True)
    F_silu = torch.nn.functional.silu(xr)
    F_silu.backward(g)
    got = silu_backward(x_wide.clone(), g.clone())
    _expect_float64(got, xr.grad, "silu_backward")
    got = torch.as_tensor(got, dtype=torch.float64)
    expect(tuple(got.shape) == tuple(x_wide.shape),
           f"silu_backward returned shape {tuple(got.shape)} for an x of shape {tuple(x_wide.shape)}")
    err = (got - xr.grad).abs().max().item()
    # tight: the product rule is exact to rounding, a difference quotient usually is not
    expect(err < 1e-14 * (1 + xr.grad.abs().max().item()),
           f"differs from autograd through F.silu by up to {err:.3g}"
           + (_low_precision_hint(precision, "the derived formula",
                                  err / xr.grad.abs().max().item()) if err < 1e-5 else ""))
    return "the product rule: σ(x) + x·σ(x)(1 − σ(x))"


def _bigram_inputs(seed, case=0):
    """Token ids with repeats (two of them forced) and one token of the vocabulary left out, so
    that a summed row, a single row and a zero row are all checked. The sizes V, d and B are
    drawn too, from ranges that differ between case 0 and case 1 (V in 5..7 or 8..10, B in 8..12
    or 13..18): a constant written for one vocabulary or batch size fails on the other case.
    In case 1 the last token V − 1 is never a target either: a one-hot that takes its width
    from the targets (``F.one_hot(targets)`` without ``num_classes``) is then one column short
    on every draw, not only on the draws where no target happens to be V − 1."""
    gen = rng(seed)
    V = integer(gen, 5, 8) if case == 0 else integer(gen, 8, 11)
    B = integer(gen, 8, 13) if case == 0 else integer(gen, 13, 19)
    d = integer(gen, 2, 5)
    ids = torch.randint(0, V - 1, (B,), generator=gen)            # token V − 1 never occurs
    ids[B - 1], ids[B - 2] = ids[0], ids[1]                        # at least one repeated token
    targets = torch.randint(0, V if case == 0 else V - 1, (B,), generator=gen)
    E = torch.randn(V, d, generator=gen, dtype=torch.float64)
    W = torch.randn(d, V, generator=gen, dtype=torch.float64)
    return ids, targets, E, W


def _expect_width_from_vocabulary(by_hand, err, ids, targets, E, W, seed):
    """Name ``num_classes`` when ``err`` came on inputs where no target is the last token V − 1
    and the same answer runs once one target is V − 1: its one-hot took its width from the
    targets (``F.one_hot(targets)`` makes max(targets) + 1 columns), not from the vocabulary."""
    V = E.shape[0]
    if bool((targets == V - 1).any()):
        return
    with_last = targets.clone()
    with_last[0] = V - 1
    try:
        by_hand(ids.clone(), with_last, E.clone(), W.clone())
    except Exception:      # (CheckFailure included: the original error is then what is told)
        return
    raise CheckFailure(
        f"your code raised {type(err).__name__} ({err}) on inputs where no target is the last "
        f"token V − 1 = {V - 1} (seed {seed}), and runs once one target is: its one-hot has "
        f"max(targets) + 1 columns, fewer than V = {V}. F.one_hot(targets) takes its width "
        f"from the largest target; give it the vocabulary's size, "
        f"F.one_hot(targets, num_classes=V) with V = E.shape[0]")


_BIGRAM_BECAUSE = ("bigram_backward must apply the chain rule itself: softmax minus one-hot for "
                   "the loss, then the matrix product, then a sum over the positions of each token")


@exercise("ch04-embedding-cross-entropy-backward",
          forbid=("torch.ops.aten.embedding_dense_backward", "torch.ops.aten.embedding_backward",
                  "torch.ops.aten.nll_loss_backward", "torch.ops.aten._log_softmax_backward_data",
                  "torch.ops.aten._softmax_backward_data", "torch.nn.functional.cross_entropy",
                  "torch.nn.functional.nll_loss") + _FINITE_DIFFERENCES + AUTOGRAD_FUNCTIONAL,
          because=_BIGRAM_BECAUSE)
def check_ch04_embedding_cross_entropy_backward(bigram_backward):
    """bigram_backward(ids, targets, E, W) returns (∂L/∂E, ∂L/∂W) for the mean cross-entropy of
    the logits E[ids] @ W, by hand: Z̄ = (softmax(Z) − onehot)/B, W̄ = XᵀZ̄, X̄ = Z̄Wᵀ and Ē the
    sum of X̄'s rows per token (index_add_)."""
    expect_callable(bigram_backward, "bigram_backward(ids, targets, E, W)")
    precision = _Precision()
    by_hand = _watched(without_autograd(bigram_backward), "ch04-embedding-cross-entropy-backward",
                       _BIGRAM_BECAUSE, precision)
    for seed in (0, 1):
        ids, targets, E, W = _bigram_inputs(seed, case=seed)
        B, V = len(ids), E.shape[0]
        try:
            got = by_hand(ids.clone(), targets.clone(), E.clone(), W.clone())
        except CheckFailure:
            raise
        except Exception as err:
            _expect_width_from_vocabulary(by_hand, err, ids, targets, E, W, seed)
            raise
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "return two tensors: (grad_E, grad_W)")
        El, Wl = E.clone().requires_grad_(True), W.clone().requires_grad_(True)
        torch.nn.functional.cross_entropy(El[ids] @ Wl, targets).backward()
        _expect_float64(got[0], El.grad, f"grad_E (seed {seed})")
        _expect_float64(got[1], Wl.grad, f"grad_W (seed {seed})")
        gE, gW = (torch.as_tensor(g, dtype=torch.float64) for g in got)
        for name, g, want in (("grad_E", gE, El.grad), ("grad_W", gW, Wl.grad)):
            expect(tuple(g.shape) == tuple(want.shape), f"{name} must have the shape of its "
                   f"input {tuple(want.shape)}, got {tuple(g.shape)}"
                   + (" (the transpose)" if tuple(g.shape) == tuple(want.shape)[::-1] else ""))
        X = E[ids]
        P = torch.softmax(X @ W, dim=1)
        onehot = torch.nn.functional.one_hot(targets, V).double()
        counts = torch.bincount(ids, minlength=V)
        no_onehot = "the loss's gradient at the logits is softmax(Z) minus the one-hot targets"
        no_mean = ("the loss is the mean over the B positions: the gradient at the logits is "
                   "(softmax(Z) − onehot(targets)) / B")
        axis = ("the softmax runs over each position's V logits (dim=1, along a row of Z), "
                "not over the positions (dim=0)")
        P0 = torch.softmax(X @ W, dim=0)
        sign = ("the sign is flipped: the gradient at the logits is softmax(Z) − onehot, "
                "not onehot − softmax(Z)")
        per_token = ("a row used at several positions gets the sum of their messages, not their "
                     "mean: do not divide by the token's count")
        for name, g, want, slips in (
                ("grad_W", gW, Wl.grad, ((X.T @ (P - onehot), no_mean), (X.T @ P / B, no_onehot),
                                         (-Wl.grad, sign), (X.T @ (P0 - onehot) / B, axis))),
                ("grad_E", gE, El.grad, ((El.grad * B, no_mean), (-El.grad, sign),
                                         (El.grad / counts.clamp(min=1)[:, None].double(),
                                          per_token)))):
            for slip, hint in slips:
                expect(not _matches(g, slip), f"{name} differs from autograd (seed {seed}): {hint}")
        scale = 1 + El.grad.abs().max().item()
        err_E = (gE - El.grad).abs().max().item()
        expect(not (precision.low is not None and err_E < 1e-5 * scale),
               f"grad_E differs from autograd by up to {err_E:.3g} (seed {seed})"
               + _low_precision_hint(precision, "the chain rule", err_E / scale))
        # an assignment grad_E[ids] = X̄ keeps one position's message per token: diagnosed only
        # where every wrong row is one of its token's messages, and none of them the sum
        messages = (P - onehot) / B @ W.T
        bad = (gE - El.grad).abs().amax(dim=1) > 1e-9 * scale
        one_message = bool(bad.any())
        for token in bad.nonzero().flatten().tolist():
            rows = messages[ids == token]
            one_message = one_message and bool(
                (counts[token] > 1)
                and ((rows - gE[token]).abs().amax(dim=1) <= 1e-9 * scale).any())
        expect(not one_message,
               f"grad_E is wrong exactly in the rows of tokens that occur more than once, where "
               f"it holds one position's message (seed {seed}): a row used at several positions "
               f"gets the sum of their messages (index_add_ or +=, not an assignment "
               f"grad_E[ids] = ..., which keeps one)")
        expect(gE[counts == 0].abs().max().item() == 0 if (counts == 0).any() else True,
               f"grad_E must be 0 in the rows of tokens that do not occur in ids (seed {seed})")
        for name, g, want in (("grad_E", gE, El.grad), ("grad_W", gW, Wl.grad)):
            err = (g - want).abs().max().item()
            # tight: the chain rule in any arrangement is within rounding of autograd
            expect(err < 1e-14 * (1 + want.abs().max().item()), f"{name} differs from "
                   f"autograd by up to {err:.3g} (seed {seed})"
                   + (_low_precision_hint(precision, "the chain rule",
                                          err / want.abs().max().item()) if err < 1e-5 else ""))
    return "Z̄ = (P − onehot)/B, W̄ = XᵀZ̄, Ē = index_add_(0, ids, Z̄Wᵀ)"
