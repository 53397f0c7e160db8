"""Typical wrong answers to chapter 4's exercises: each must fail its checker."""
import torch


# ch04-sigmoid-backward: (x, y = σ(x), grad_y) -> grad_x
def sigmoid_no_upstream(x, y, grad_y):
    return y * (1 - y)                       # forgets the chain rule's grad_y


def sigmoid_of_input(x, y, grad_y):
    return grad_y * x * (1 - x)              # σ(1 − σ) evaluated at x instead of y


def sigmoid_tanh_rule(x, y, grad_y):
    return grad_y * (1 - y * y)              # tanh's derivative


# ch04-topological-order
def topo_no_visited(root):                   # reused nodes listed several times
    order = []

    def visit(v):
        for c in v._prev:
            visit(c)
        order.append(v)
    visit(root)
    return order


def topo_parents_first(root):                # pre-order: the root first
    order, seen = [], set()

    def visit(v):
        if id(v) in seen:
            return
        seen.add(id(v))
        order.append(v)
        for c in v._prev:
            visit(c)
    visit(root)
    return order


def topo_breadth_first(root):                # levels from the root, reversed: not topological
    order, seen, queue = [], {id(root)}, [root]
    while queue:
        v = queue.pop(0)
        order.append(v)
        for c in v._prev:
            if id(c) not in seen:
                seen.add(id(c))
                queue.append(c)
    return order[::-1]


# ch04-linear-tanh-vjp: y = tanh(xW)
def vjp_no_tanh_derivative(x, W, v):
    return v @ W.T, x.T @ v


def vjp_one_minus_y(x, W, v):
    d = v * (1 - torch.tanh(x @ W))
    return d @ W.T, x.T @ d


def vjp_grad_w_transposed(x, W, v):
    d = v * (1 - torch.tanh(x @ W) ** 2)
    return d @ W.T, d.T @ x


# ch04-silu-backward: (x, grad_y) -> grad_x for y = x σ(x)
def silu_no_product_rule(x, grad_y):          # the bug of section 4.7
    s = torch.sigmoid(x)
    return grad_y * x * s * (1 - s)


def silu_sign_slip(x, grad_y):
    s = torch.sigmoid(x)
    return grad_y * (s - x * s * (1 - s))


def silu_no_upstream(x, grad_y):
    s = torch.sigmoid(x)
    return s + x * s * (1 - s)


# A right answer that uses autograd, which the statement forbids: it must fail.
def vjp_by_backward(x, W, v):
    x, W = x.detach().clone().requires_grad_(True), W.detach().clone().requires_grad_(True)
    torch.tanh(x @ W).backward(v)
    return x.grad, W.grad


def vjp_by_torch_func(x, W, v):
    _, pullback = torch.func.vjp(lambda x_, W_: torch.tanh(x_ @ W_), x, W)
    return pullback(v)


AUTOGRAD_CHEATS = {"ch04-linear-tanh-vjp": [vjp_by_backward, vjp_by_torch_func]}

WRONG_ANSWERS = {
    "ch04-sigmoid-backward": [sigmoid_no_upstream, sigmoid_of_input, sigmoid_tanh_rule],
    "ch04-topological-order": [topo_no_visited, topo_parents_first, topo_breadth_first],
    "ch04-linear-tanh-vjp": [vjp_no_tanh_derivative, vjp_one_minus_y, vjp_grad_w_transposed],
    "ch04-silu-backward": [silu_no_product_rule, silu_sign_slip, silu_no_upstream],
}
