"""Checkers for chapter 4: automatic differentiation."""
import math

import torch

from mathref.autograd import Value
from mathref.calculus import check_gradients
from mathref.checks.core import exercise, expect, expect_callable, expect_close, without_autograd

__all__ = ["check_ch04_sigmoid_backward", "check_ch04_topological_order",
           "check_ch04_linear_tanh_vjp", "check_ch04_silu_backward"]


def _sigmoid(x):
    return 1 / (1 + math.exp(-x))


@exercise("ch04-sigmoid-backward")
def check_ch04_sigmoid_backward(sigmoid_backward):
    """sigmoid_backward(x, y, grad_y) returns grad_y · σ'(x) = grad_y · y(1 − y), y = σ(x)."""
    expect_callable(sigmoid_backward, "sigmoid_backward(x, y, grad_y)")
    for x, g in ((0.0, 1.0), (1.5, 1.0), (-2.0, 0.5), (0.7, -3.0), (3.0, 2.0)):
        t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        torch.sigmoid(t).backward(torch.tensor(g, dtype=torch.float64))
        got = sigmoid_backward(x, _sigmoid(x), g)
        expect_close(got, t.grad.item(), f"sigmoid_backward(x={x}, y=σ(x), grad_y={g})",
                     rtol=1e-9, atol=1e-12)
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
    gen = torch.Generator().manual_seed(seed)
    leaves = [Value(float(v)) for v in torch.randn(3, generator=gen)]
    pool = list(leaves)
    for k in range(8):
        i, j = torch.randint(0, len(pool), (2,), generator=gen).tolist()
        pool.append(pool[i] * pool[j] if k % 2 else (pool[i] + pool[j]).tanh())
    return pool[-1] + pool[-2] + pool[3]


@exercise("ch04-topological-order")
def check_ch04_topological_order(topo_sort):
    """topo_sort(root) lists every node of root's graph once, each after all its children."""
    expect_callable(topo_sort, "topo_sort(root)")
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


def _vjp_inputs(seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(5, 4, generator=gen, dtype=torch.float64)
    W = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    v = torch.randn(5, 3, generator=gen, dtype=torch.float64)
    return x, W, v


@exercise("ch04-linear-tanh-vjp")
def check_ch04_linear_tanh_vjp(linear_tanh_vjp):
    """linear_tanh_vjp(x, W, v) returns (vᵀ∂y/∂x, vᵀ∂y/∂W) for y = tanh(xW)."""
    expect_callable(linear_tanh_vjp, "linear_tanh_vjp(x, W, v)")
    by_hand = without_autograd(linear_tanh_vjp)   # "no autograd": matrix products only
    for seed in (0, 1):
        x, W, v = _vjp_inputs(seed)
        got = by_hand(x.clone(), W.clone(), v.clone())
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "return two tensors: (grad_x, grad_W)")
        gx, gW = (torch.as_tensor(g, dtype=torch.float64) for g in got)
        xl, Wl = x.clone().requires_grad_(True), W.clone().requires_grad_(True)
        torch.tanh(xl @ Wl).backward(v)
        for name, g, want in (("grad_x", gx, xl.grad), ("grad_W", gW, Wl.grad)):
            expect(tuple(g.shape) == tuple(want.shape), f"{name} must have the shape of its "
                   f"input {tuple(want.shape)}, got {tuple(g.shape)}")
            err = (g - want).abs().max().item()
            expect(err < 1e-10, f"{name} differs from autograd's vector–Jacobian product by up "
                   f"to {err:.3g} (seed {seed})")
    return "grad_x = (v ⊙ (1 − y²)) Wᵀ, grad_W = xᵀ (v ⊙ (1 − y²))"


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


@exercise("ch04-silu-backward")
def check_ch04_silu_backward(silu_backward):
    """silu_backward(x, grad_y) returns grad_y · (σ(x) + x σ(x)(1 − σ(x)))."""
    expect_callable(silu_backward, "silu_backward(x, grad_y)")
    silu = _silu_function(silu_backward)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(7, generator=gen, dtype=torch.float64) * 3
    report = check_gradients(lambda t: silu(t), x, verbose=False)
    expect(report.ok, f"the gradient check still fails: max abs error "
           f"{report.max_abs_error:.3g} against finite differences")
    xl = x.clone().requires_grad_(True)
    ok = torch.autograd.gradcheck(silu, (xl,), raise_exception=False)
    expect(ok, "torch.autograd.gradcheck rejects your backward")
    g = torch.randn(7, generator=gen, dtype=torch.float64)
    xr = x.clone().requires_grad_(True)
    F_silu = torch.nn.functional.silu(xr)
    F_silu.backward(g)
    got = torch.as_tensor(silu_backward(x.clone(), g.clone()), dtype=torch.float64)
    err = (got - xr.grad).abs().max().item()
    expect(err < 1e-10, f"differs from autograd through F.silu by up to {err:.3g}")
    return "the product rule: σ(x) + x·σ(x)(1 − σ(x))"
