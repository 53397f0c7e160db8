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


# The accepted wrong answers: topo_sort by mathref's own topological_order, and
# silu_backward by autograd through F.silu (refused: autograd, and F.silu itself).
def topo_by_mathref(root):
    from mathref.autograd import topological_order
    return topological_order(root)


def topo_by_mathref_lazily(root):              # a generator: its body runs when it is read
    from mathref.autograd import topological_order
    yield from topological_order(root)


def silu_by_autograd_through_F_silu(x, grad_y):
    with torch.enable_grad():
        x = x.detach().clone().requires_grad_(True)
        torch.nn.functional.silu(x).backward(grad_y)
    return x.grad


def silu_by_autograd(x, grad_y):
    with torch.enable_grad():
        x = x.detach().clone().requires_grad_(True)
        (x * torch.sigmoid(x)).backward(grad_y)
    return x.grad


def silu_by_finite_differences(x, grad_y, h=1e-5):
    f = lambda t: t * torch.sigmoid(t)
    return grad_y * (f(x + h) - f(x - h)) / (2 * h)


def silu_by_fourth_order_stencil(x, grad_y, h=1e-4):
    f = lambda t: t * torch.sigmoid(t)     # error O(h⁴) + rounding: about 1e-11 at |x| = 30
    return grad_y * (-f(x + 2 * h) + 8 * f(x + h) - 8 * f(x - h) + f(x - 2 * h)) / (12 * h)


def sigmoid_by_finite_differences(x, y, grad_y, h=1e-5):
    import math
    s = lambda t: 1 / (1 + math.exp(-t))
    return grad_y * (s(x + h) - s(x - h)) / (2 * h)


def sigmoid_by_autograd(x, y, grad_y):
    t = torch.tensor(float(x), dtype=torch.float64, requires_grad=True)
    torch.sigmoid(t).backward()
    return grad_y * t.grad.item()


def vjp_by_finite_differences(x, W, v, h=1e-5):
    def fd(a):
        g = torch.zeros_like(a)
        flat, gflat = a.view(-1), g.view(-1)
        for i in range(flat.numel()):
            old = flat[i].item()
            flat[i] = old + h
            up = (torch.tanh(x @ W) * v).sum().item()
            flat[i] = old - h
            down = (torch.tanh(x @ W) * v).sum().item()
            flat[i] = old
            gflat[i] = (up - down) / (2 * h)
        return g
    return fd(x), fd(W)


def _richardson(f, x, h0, levels):
    """Richardson-extrapolated central differences: the best float64 difference quotient we know
    of for a smooth scalar function (error far below a plain quotient's, not at rounding)."""
    d = lambda h: (f(x + h) - f(x - h)) / (2 * h)
    table = [d(h0 / 2 ** k) for k in range(levels)]
    for j in range(1, levels):
        table = [(4 ** j * table[k + 1] - table[k]) / (4 ** j - 1) for k in range(len(table) - 1)]
    return table[0]


def sigmoid_by_richardson(x, y, grad_y):        # h0 = 0.25, 5 levels: passed a 1e-12 tolerance
    import math
    return grad_y * _richardson(lambda t: 1 / (1 + math.exp(-t)), x, 0.25, 5)


def sigmoid_by_richardson_wide(x, y, grad_y):   # h0 = 0.5, 5 levels: the closest variant tried
    import math
    return grad_y * _richardson(lambda t: 1 / (1 + math.exp(-t)), x, 0.5, 5)


def vjp_by_richardson(x, W, v):                 # per entry, h0 = 0.125, 5 levels
    def grad(a, loss):
        g = torch.zeros_like(a)
        for i in range(a.numel()):
            e = torch.zeros_like(a).view(-1)
            e[i] = 1
            g.view(-1)[i] = _richardson(lambda t: loss(a + t * e.view_as(a)), 0.0, 0.125, 5)
        return g
    loss_x = lambda a: (v * torch.tanh(a @ W)).sum().item()
    loss_W = lambda a: (v * torch.tanh(x @ a)).sum().item()
    return grad(x, loss_x), grad(W, loss_W)


def silu_by_richardson(x, grad_y):              # per entry, h0 = 0.25, 5 levels
    import math
    f = lambda t: t / (1 + math.exp(-t)) if t > -700 else 0.0
    return grad_y * torch.tensor([_richardson(f, xi, 0.25, 5) for xi in x.tolist()],
                                 dtype=torch.float64)


WRONG_ANSWERS["ch04-topological-order"] += [topo_by_mathref, topo_by_mathref_lazily]
WRONG_ANSWERS["ch04-sigmoid-backward"] += [sigmoid_by_richardson, sigmoid_by_richardson_wide]
WRONG_ANSWERS["ch04-linear-tanh-vjp"].append(vjp_by_richardson)
WRONG_ANSWERS["ch04-silu-backward"].append(silu_by_richardson)
WRONG_ANSWERS["ch04-silu-backward"] += [silu_by_autograd_through_F_silu, silu_by_autograd,
                                        silu_by_finite_differences, silu_by_fourth_order_stencil]
WRONG_ANSWERS["ch04-sigmoid-backward"].append(sigmoid_by_finite_differences)
WRONG_ANSWERS["ch04-linear-tanh-vjp"].append(vjp_by_finite_differences)
AUTOGRAD_CHEATS["ch04-silu-backward"] = [silu_by_autograd]
AUTOGRAD_CHEATS["ch04-sigmoid-backward"] = [sigmoid_by_autograd]


# Solutions written as a student would, calling what the exercise asks them to write (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch04-sigmoid-backward": [
        "from mathref.nn import sigmoid_grad\n"
        "import torch\n\n"
        "def sigmoid_backward(x, y, grad_y):\n"
        "    return grad_y * sigmoid_grad(torch.tensor(x, dtype=torch.float64)).item()\n",
        "import torch\n\n"
        "def sigmoid_backward(x, y, grad_y):\n"
        "    g = torch.ops.aten.sigmoid_backward(torch.tensor(grad_y, dtype=torch.float64),\n"
        "                                        torch.tensor(y, dtype=torch.float64))\n"
        "    return g.item()\n",
        # the engine's own sigmoid rule, run by the engine
        "from mathref.autograd import Value\n\n"
        "def sigmoid_backward(x, y, grad_y):\n"
        "    v = Value(x)\n"
        "    v.sigmoid().backward()\n"
        "    return grad_y * v.grad\n",
        "import torch\n\n"
        "def sigmoid_backward(x, y, grad_y):\n"
        "    return grad_y * torch.func.grad(torch.sigmoid)(torch.tensor(x, dtype=torch.float64)).item()\n",
    ],
    "ch04-topological-order": [
        "from mathref.autograd import topological_order as topo\n\n"
        "def topo_sort(root):\n"
        "    return topo(root)\n",
        "import mathref\n\n"
        "def topo_sort(root):\n"
        "    return list(mathref.autograd.topological_order(root))\n",
        "from graphlib import TopologicalSorter\n\n"
        "def topo_sort(root):\n"
        "    nodes, stack, graph = {}, [root], {}\n"
        "    while stack:\n"
        "        v = stack.pop()\n"
        "        if id(v) not in nodes:\n"
        "            nodes[id(v)] = v\n"
        "            graph[id(v)] = [id(c) for c in v._prev]\n"
        "            stack.extend(v._prev)\n"
        "    return [nodes[i] for i in TopologicalSorter(graph).static_order()]\n",
    ],
    "ch04-linear-tanh-vjp": [
        "import torch\n\n"
        "def linear_tanh_vjp(x, W, v):\n"
        "    _, pullback = torch.func.vjp(lambda x, W: torch.tanh(x @ W), x, W)\n"
        "    return pullback(v)\n",
        "import torch\n\n"
        "def linear_tanh_vjp(x, W, v):\n"
        "    return torch.autograd.functional.vjp(lambda x, W: torch.tanh(x @ W), (x, W), v)[1]\n",
        # PyTorch's own backward kernel for tanh, which autograd would run
        "import torch\n\n"
        "def linear_tanh_vjp(x, W, v):\n"
        "    delta = torch.ops.aten.tanh_backward(v, torch.tanh(x @ W))\n"
        "    return delta @ W.T, x.T @ delta\n",
        "import torch\n"
        "from mathref.calculus import numerical_gradient\n\n"
        "def linear_tanh_vjp(x, W, v):\n"
        "    f = lambda x, W: (torch.tanh(x @ W) * v).sum()\n"
        "    return numerical_gradient(lambda a: f(a, W), x), numerical_gradient(lambda B: f(x, B), W)\n",
    ],
    "ch04-silu-backward": [
        # autograd through F.silu (the accepted answer)
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def silu_backward(x, grad_y):\n"
        "    with torch.enable_grad():\n"
        "        x = x.detach().clone().requires_grad_(True)\n"
        "        F.silu(x).backward(grad_y)\n"
        "    return x.grad\n",
        "import torch\n\n"
        "def silu_backward(x, grad_y):\n"
        "    return torch.ops.aten.silu_backward(grad_y, x)\n",
        "from mathref import nn as mnn\n\n"
        "def silu_backward(x, grad_y):\n"
        "    return grad_y * mnn.silu_grad(x)\n",
        # finite differences of the forward op
        "from torch.nn.functional import silu as act\n\n"
        "def silu_backward(x, grad_y):\n"
        "    h = 1e-6\n"
        "    return grad_y * (act(x + h) - act(x - h)) / (2 * h)\n",
        "import torch\n\n"
        "def silu_backward(x, grad_y):\n"
        "    with torch.enable_grad():\n"
        "        x = x.detach().clone().requires_grad_(True)\n"
        "        (x * torch.sigmoid(x)).backward(grad_y)\n"
        "    return x.grad\n",
    ],
}

# Right answers in other forms than the reference solution: each must pass.
RIGHT_ANSWERS = {
    "ch04-sigmoid-backward": [
        "def sigmoid_backward(x, y, grad_y):\n"
        "    return (y - y * y) * grad_y\n",
        # σ recomputed from x: also exact
        "import math\n\n"
        "def sigmoid_backward(x, y, grad_y):\n"
        "    e = math.exp(-x)\n"
        "    return grad_y * e / (1 + e) ** 2\n",
        # σ(x) = (1 + tanh(x/2))/2, so σ′(x) = (1 − tanh²(x/2))/4
        "import math\n\n"
        "def sigmoid_backward(x, y, grad_y):\n"
        "    t = math.tanh(x / 2)\n"
        "    return grad_y * (1 - t * t) / 4\n",
    ],
    "ch04-topological-order": [
        # iterative depth-first search with an explicit stack
        "def topo_sort(root):\n"
        "    order, visited, stack = [], set(), [(root, False)]\n"
        "    while stack:\n"
        "        node, done = stack.pop()\n"
        "        if done:\n"
        "            order.append(node)\n"
        "        elif id(node) not in visited:\n"
        "            visited.add(id(node))\n"
        "            stack.append((node, True))\n"
        "            stack.extend((c, False) for c in node._prev if id(c) not in visited)\n"
        "    return order\n",
        # Kahn's algorithm from the root (parents first), reversed
        "def topo_sort(root):\n"
        "    nodes, stack = {}, [root]\n"
        "    while stack:\n"
        "        v = stack.pop()\n"
        "        if id(v) not in nodes:\n"
        "            nodes[id(v)] = v\n"
        "            stack.extend(v._prev)\n"
        "    parents = {i: 0 for i in nodes}\n"
        "    for v in nodes.values():\n"
        "        for c in set(map(id, v._prev)):\n"
        "            parents[c] += 1\n"
        "    ready, order = [root], []\n"
        "    while ready:\n"
        "        v = ready.pop()\n"
        "        order.append(v)\n"
        "        for c in {id(c): c for c in v._prev}.values():\n"
        "            parents[id(c)] -= 1\n"
        "            if parents[id(c)] == 0:\n"
        "                ready.append(c)\n"
        "    return order[::-1]\n",
    ],
    "ch04-linear-tanh-vjp": [
        "import torch\n\n"
        "def linear_tanh_vjp(x, W, v):\n"
        "    z = x @ W\n"
        "    delta = v / torch.cosh(z) ** 2\n"
        "    return torch.einsum('bo,io->bi', delta, W), torch.einsum('bi,bo->io', x, delta)\n",
        # tanh′ from chapter 3's mathref.nn.tanh_grad: a building block
        "from mathref import nn as mnn\n\n"
        "def linear_tanh_vjp(x, W, v):\n"
        "    delta = v * mnn.tanh_grad(x @ W)\n"
        "    return delta @ W.T, x.T @ delta\n",
        # 1 − y² factored, and the products written as sums over the batch
        "import torch\n\n"
        "def linear_tanh_vjp(x, W, v):\n"
        "    y = torch.tanh(x @ W)\n"
        "    delta = v * (1 - y) * (1 + y)\n"
        "    grad_W = sum(x[b][:, None] * delta[b][None, :] for b in range(len(x)))\n"
        "    return delta @ W.T, grad_W\n",
    ],
    "ch04-silu-backward": [
        "import torch\n\n"
        "def silu_backward(x, grad_y):\n"
        "    s = torch.sigmoid(x)\n"
        "    return grad_y * s * (1 + x * (1 - s))\n",
        "import torch\n\n"
        "def silu_backward(x, grad_y):\n"
        "    e = torch.exp(-x)\n"
        "    return grad_y * (1 + e + x * e) / (1 + e) ** 2\n",
    ],
}


def silu_by_complex_step(x, grad_y):   # Im f(x + ih)/h: a numerical derivative, not derived
    z = x.to(torch.complex128) + 1e-30j
    return grad_y * ((z * torch.sigmoid(z)).imag / 1e-30).to(x.dtype)


WRONG_ANSWERS["ch04-silu-backward"].append(silu_by_complex_step)


# ---------------------------------------------------------------- the sixth read (N1–N3, L2, L3)
# σ under its other name, torch.special.expit, as chapter 3 allows it; the products of the VJP as
# F.linear (δWᵀ) and torch.inner (the same product)
RIGHT_ANSWERS["ch04-sigmoid-backward"].append(
    "import torch\n\n"
    "def sigmoid_backward(x, y, grad_y):\n"
    "    s = torch.special.expit(torch.tensor(x, dtype=torch.float64))\n"
    "    return (grad_y * s * (1 - s)).item()\n")
RIGHT_ANSWERS["ch04-silu-backward"].append(
    "import torch\n\n"
    "def silu_backward(x, grad_y):\n"
    "    return grad_y * (torch.special.expit(x) * (1 + x * torch.special.expit(-x)))\n")
# the input converted first (chapter 4's read, M1): x.double(), x.contiguous() and
# torch.as_tensor hand back the saved x itself, which requires grad, and were refused as autograd
RIGHT_ANSWERS["ch04-silu-backward"] += [
    "import torch\n\n"
    "def silu_backward(x, grad_y):\n"
    "    x = x.double()\n"
    "    s = torch.sigmoid(x)\n"
    "    return grad_y * (s + x * s * (1 - s))\n",
    "import torch\n\n"
    "def silu_backward(x, grad_y):\n"
    "    x = torch.as_tensor(x, dtype=torch.float64).contiguous()\n"
    "    s = torch.sigmoid(x)\n"
    "    return grad_y * (s + x * s * (1 - s))\n"]
RIGHT_ANSWERS["ch04-linear-tanh-vjp"] += [
    "import torch\n"
    "import torch.nn.functional as F\n\n"
    "def linear_tanh_vjp(x, W, v):\n"
    "    y = torch.tanh(F.linear(x, W.T))\n"
    "    delta = v * (1 - y * y)\n"
    "    return F.linear(delta, W), F.linear(x.T, delta.T)\n",
    "import torch\n\n"
    "def linear_tanh_vjp(x, W, v):\n"
    "    y = torch.tanh(x @ W)\n"
    "    delta = v * (1 - y * y)\n"
    "    return torch.inner(delta, W), torch.inner(x.T, delta.T)\n"]
# PyTorch's decomposition of the refused operator, looked up by the operator
SHORTCUTS["ch04-silu-backward"].append(
    "import torch\n"
    "from torch._decomp import decomposition_table\n\n"
    "def silu_backward(x, grad_y):\n"
    "    return decomposition_table[torch.ops.aten.silu_backward.default](grad_y, x)\n")
# the same with .get, which returns None for the stand-in (read 7, L3)
SHORTCUTS["ch04-silu-backward"].append(
    "import torch\n"
    "from torch._decomp import decomposition_table\n\n"
    "def silu_backward(x, grad_y):\n"
    "    return decomposition_table.get(torch.ops.aten.silu_backward.default)(grad_y, x)\n")


def sigmoid_in_float32(x, y, grad_y):         # the right formula, computed in float32 inside
    s = torch.sigmoid(torch.tensor(x, dtype=torch.float32))
    return (grad_y * s * (1 - s)).item()


def vjp_in_float32(x, W, v):
    y = torch.tanh((x @ W).float()).double()
    delta = v * (1 - y * y)
    return delta @ W.T, x.T @ delta


def silu_in_float32(x, grad_y):
    s = torch.sigmoid(x.float()).double()
    return grad_y * (s + x * s * (1 - s))


def silu_changing_x_in_place(x, grad_y):     # right values, but the saved input is overwritten
    s = torch.sigmoid(x)
    x.mul_(s * (1 - s))
    return grad_y * (s + x)


WRONG_ANSWERS["ch04-sigmoid-backward"].append(sigmoid_in_float32)
WRONG_ANSWERS["ch04-linear-tanh-vjp"].append(vjp_in_float32)
WRONG_ANSWERS["ch04-silu-backward"] += [silu_in_float32, silu_changing_x_in_place]


# ---------------------------------------------------------------- ch04-embedding-cross-entropy-backward
# (ids, targets, E, W) -> (grad_E, grad_W) for L = mean cross-entropy of E[ids] @ W
def bigram_assigns(ids, targets, E, W):       # '=' keeps one message per repeated token
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=1) - torch.nn.functional.one_hot(targets, W.shape[1])) / len(ids)
    grad_E = torch.zeros_like(E)
    grad_E[ids] = Z_bar @ W.T
    return grad_E, X.T @ Z_bar


def bigram_no_mean(ids, targets, E, W):        # the sum's gradient, not the mean's
    X = E[ids]
    Z_bar = torch.softmax(X @ W, dim=1) - torch.nn.functional.one_hot(targets, W.shape[1])
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


def bigram_no_onehot(ids, targets, E, W):      # softmax only: the targets never enter
    X = E[ids]
    Z_bar = torch.softmax(X @ W, dim=1) / len(ids)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


def bigram_grad_w_transposed(ids, targets, E, W):
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=1) - torch.nn.functional.one_hot(targets, W.shape[1])) / len(ids)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), Z_bar.T @ X


def bigram_in_float32(ids, targets, E, W):     # the right formula, computed in float32 inside
    X = E[ids].float()
    Z_bar = (torch.softmax(X @ W.float(), dim=1)
             - torch.nn.functional.one_hot(targets, W.shape[1])) / len(ids)
    return (torch.zeros_like(E).index_add_(0, ids, (Z_bar @ W.T.float()).double()),
            (X.T @ Z_bar).double())


def bigram_sign_flipped(ids, targets, E, W):   # onehot − softmax: index_add_ used, sign wrong
    X = E[ids]
    Z_bar = (torch.nn.functional.one_hot(targets, W.shape[1]) - torch.softmax(X @ W, dim=1)) / len(ids)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


def bigram_softmax_dim0(ids, targets, E, W):   # the softmax over the positions, not the logits
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=0) - torch.nn.functional.one_hot(targets, W.shape[1])) / len(ids)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


def bigram_all_float32(ids, targets, E, W):    # every step in float32, the result cast back
    E32, W32 = E.float(), W.float()
    X = E32[ids]
    Z_bar = (torch.softmax(X @ W32, dim=1) - torch.nn.functional.one_hot(targets, W.shape[1])) / len(ids)
    return (torch.zeros_like(E32).index_add_(0, ids, Z_bar @ W32.T).double(),
            (X.T @ Z_bar).double())


def bigram_per_token_mean(ids, targets, E, W):  # each row divided by its token's count
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=1) - torch.nn.functional.one_hot(targets, W.shape[1])) / len(ids)
    counts = torch.bincount(ids, minlength=E.shape[0]).clamp(min=1)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T) / counts[:, None], X.T @ Z_bar


def bigram_batch_12(ids, targets, E, W):       # the notebook's old B = 12 written as a constant
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=1) - torch.nn.functional.one_hot(targets, W.shape[1])) / 12
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


def bigram_vocab_7(ids, targets, E, W):        # the notebook's old V = 7 written as a constant
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=1) - torch.nn.functional.one_hot(targets, 7)) / len(ids)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


def bigram_one_hot_without_num_classes(ids, targets, E, W):   # width max(targets) + 1, not V
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=1) - torch.nn.functional.one_hot(targets)) / len(ids)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


WRONG_ANSWERS["ch04-embedding-cross-entropy-backward"] = [
    bigram_assigns, bigram_no_mean, bigram_no_onehot, bigram_grad_w_transposed, bigram_in_float32,
    bigram_sign_flipped, bigram_softmax_dim0, bigram_all_float32, bigram_per_token_mean,
    bigram_batch_12, bigram_vocab_7, bigram_one_hot_without_num_classes]
SHORTCUTS["ch04-embedding-cross-entropy-backward"] = [
    # autograd through F.cross_entropy
    "import torch\n"
    "import torch.nn.functional as F\n\n"
    "def bigram_backward(ids, targets, E, W):\n"
    "    with torch.enable_grad():\n"
    "        E, W = E.detach().clone().requires_grad_(True), W.detach().clone().requires_grad_(True)\n"
    "        F.cross_entropy(E[ids] @ W, targets).backward()\n"
    "    return E.grad, W.grad\n",
    # PyTorch's backward kernels, which autograd would run
    "import torch\n\n"
    "def bigram_backward(ids, targets, E, W):\n"
    "    X = E[ids]\n"
    "    Z = X @ W\n"
    "    P = torch.log_softmax(Z, dim=1)\n"
    "    g = torch.ops.aten.nll_loss_backward(torch.tensor(1.0, dtype=E.dtype), P, targets, None, 1, -100,\n"
    "                                         torch.tensor(float(len(ids)), dtype=E.dtype))\n"
    "    Z_bar = torch.ops.aten._log_softmax_backward_data(g, P, 1, E.dtype)\n"
    "    X_bar = Z_bar @ W.T\n"
    "    return torch.ops.aten.embedding_dense_backward(X_bar, ids, E.shape[0], -1, False), X.T @ Z_bar\n",
]
RIGHT_ANSWERS["ch04-embedding-cross-entropy-backward"] = [
    # torch.special.softmax, the other name of torch.softmax (read 8, L2)
    "import torch\n"
    "import torch.nn.functional as F\n\n"
    "def bigram_backward(ids, targets, E, W):\n"
    "    X = E[ids]\n"
    "    Z_bar = (torch.special.softmax(X @ W, dim=1) - F.one_hot(targets, W.shape[1])) / len(ids)\n"
    "    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar\n",
    # log_softmax(...).exp(), and the sum per token as a product with the one-hot matrix
    "import torch\n"
    "import torch.nn.functional as F\n\n"
    "def bigram_backward(ids, targets, E, W):\n"
    "    X = E[ids]\n"
    "    Z_bar = (torch.log_softmax(X @ W, dim=1).exp() - F.one_hot(targets, W.shape[1])) / len(ids)\n"
    "    return F.one_hot(ids, E.shape[0]).double().T @ (Z_bar @ W.T), X.T @ Z_bar\n",
    # softmax by hand, and a Python loop that adds row by row
    "import torch\n\n"
    "def bigram_backward(ids, targets, E, W):\n"
    "    X = E[ids]\n"
    "    Z = X @ W\n"
    "    P = torch.exp(Z - Z.amax(dim=1, keepdim=True))\n"
    "    P = P / P.sum(dim=1, keepdim=True)\n"
    "    P[torch.arange(len(ids)), targets] -= 1\n"
    "    Z_bar = P / len(ids)\n"
    "    X_bar = Z_bar @ W.T\n"
    "    grad_E = torch.zeros_like(E)\n"
    "    for n in range(len(ids)):\n"
    "        grad_E[ids[n]] += X_bar[n]\n"
    "    return grad_E, X.T @ Z_bar\n",
]


# the right gradients asked from autograd, which the statement forbids: each must fail
def bigram_by_backward(ids, targets, E, W):
    E, W = E.detach().clone().requires_grad_(True), W.detach().clone().requires_grad_(True)
    torch.nn.functional.cross_entropy(E[ids] @ W, targets).backward()
    return E.grad, W.grad


def bigram_by_torch_func(ids, targets, E, W):
    return torch.func.grad(lambda E_, W_: torch.nn.functional.cross_entropy(E_[ids] @ W_, targets),
                           argnums=(0, 1))(E, W)


AUTOGRAD_CHEATS["ch04-embedding-cross-entropy-backward"] = [bigram_by_backward,
                                                            bigram_by_torch_func]


# ---------------------------------------------------------------- ch04-two-layer-jvp
# (X, V, w, u) -> (F(w), Ju) for F(w) = tanh(V tanh(Xw)); u one direction (n,) or k (n, k)
def _columns(t, u):
    return t[:, None] if u.dim() == 2 else t


def jvp_broadcast_along_rows(X, V, w, u):     # (1 − a²) * (X @ U): the wrong axis when k = h
    a = torch.tanh(X @ w)
    y = torch.tanh(V @ a)
    return y, (1 - y ** 2) * (V @ ((1 - a ** 2) * (X @ u)))


def jvp_reverse_mode(X, V, w, u):             # uᵀJ, the vector–Jacobian product
    a = torch.tanh(X @ w)
    y = torch.tanh(V @ a)
    return y, X.T @ (_columns(1 - a ** 2, u) * (V.T @ (_columns(1 - y ** 2, u) * u)))


def jvp_no_inner_derivative(X, V, w, u):
    y = torch.tanh(V @ torch.tanh(X @ w))
    return y, _columns(1 - y ** 2, u) * (V @ (X @ u))


def jvp_one_minus_tanh(X, V, w, u):
    a = torch.tanh(X @ w)
    y = torch.tanh(V @ a)
    return y, _columns(1 - y, u) * (V @ (_columns(1 - a, u) * (X @ u)))


def jvp_by_central_difference(X, V, w, u, h=1e-6):
    F = lambda w_: torch.tanh(V @ torch.tanh(X @ w_))
    if u.dim() == 1:
        return F(w), (F(w + h * u) - F(w - h * u)) / (2 * h)
    return F(w), torch.stack([(F(w + h * c) - F(w - h * c)) / (2 * h) for c in u.T], dim=1)


def jvp_in_float32(X, V, w, u):               # the right formula, computed in float32 inside
    a = torch.tanh(X.float() @ w.float())
    y = torch.tanh(V.float() @ a)
    t = _columns(1 - y ** 2, u) * (V.float() @ (_columns(1 - a ** 2, u) * (X.float() @ u.float())))
    return y.double(), t.double()


def jvp_by_torch_func(X, V, w, u):            # PyTorch's forward mode
    F = lambda w_: torch.tanh(V @ torch.tanh(X @ w_))
    if u.dim() == 1:
        return torch.func.jvp(F, (w,), (u,))
    return F(w), torch.stack([torch.func.jvp(F, (w,), (c,))[1] for c in u.T], dim=1)


def jvp_by_dual_tensors(X, V, w, u):          # torch.autograd.forward_ad's dual tensors
    import torch.autograd.forward_ad as fwAD
    F = lambda w_: torch.tanh(V @ torch.tanh(X @ w_))
    columns = [u] if u.dim() == 1 else list(u.T)
    tangents = []
    with fwAD.dual_level():
        for c in columns:
            tangents.append(fwAD.unpack_dual(F(fwAD.make_dual(w, c))).tangent)
    return F(w), tangents[0] if u.dim() == 1 else torch.stack(tangents, dim=1)


def jvp_by_two_vjps(X, V, w, u):              # the double-backward trick: Ju from reverse mode
    with torch.enable_grad():
        w_ = w.detach().clone().requires_grad_(True)
        y = torch.tanh(V @ torch.tanh(X @ w_))
        v = torch.zeros_like(y, requires_grad=True)
        (g,) = torch.autograd.grad(y, w_, v, create_graph=True)
        (ju,) = torch.autograd.grad(g, v, u)
    return y.detach(), ju


def jvp_by_complex_step(X, V, w, u):         # Im F(w + iεu)/ε: exact to rounding, not derived
    F = lambda w_: torch.tanh(V.to(torch.complex128) @ torch.tanh(X.to(torch.complex128) @ w_))
    U = u if u.dim() == 2 else u[:, None]
    t = torch.stack([F(w + 1e-30j * c).imag / 1e-30 for c in U.T], dim=1)
    return F(w).real, (t if u.dim() == 2 else t[:, 0])


def jvp_by_richardson(X, V, w, u, h0=0.5, levels=7):
    # float64 central differences along each direction, Richardson-extrapolated: its error, about
    # the check's tolerance, is refused at the notebook's inputs and passes on some drawn ones
    # (the statement says so)
    F = lambda w_: torch.tanh(V @ torch.tanh(X @ w_))
    columns, out = ([u] if u.dim() == 1 else list(u.T)), []
    for c in columns:
        r = [(F(w + h * c) - F(w - h * c)) / (2 * h) for h in [h0 / 2 ** j for j in range(levels)]]
        for level in range(1, levels):
            r = [(4 ** level * r[i + 1] - r[i]) / (4 ** level - 1) for i in range(len(r) - 1)]
        out.append(r[0])
    return F(w), out[0] if u.dim() == 1 else torch.stack(out, dim=1)


def jvp_by_python_complex_step(X, V, w, u):   # Im F(w + iεu)/ε in Python's own complex numbers
    import math
    Xl, Vl, wl = X.tolist(), V.tolist(), w.tolist()
    U = u.tolist() if u.dim() == 2 else [[c] for c in u.tolist()]
    th = lambda z: (math.e ** (2 * z) - 1) / (math.e ** (2 * z) + 1)
    F = lambda wz: [th(sum(r[j] * a for j, a in enumerate(
        [th(sum(q[i] * wz[i] for i in range(len(wz)))) for q in Xl]))) for r in Vl]
    eps = 1e-30
    t = torch.tensor([[o.imag / eps for o in F([wl[j] + 1j * eps * U[j][c] for j in range(len(wl))])]
                      for c in range(len(U[0]))], dtype=torch.float64).T
    return torch.tanh(V @ torch.tanh(X @ w)), (t if u.dim() == 2 else t[:, 0])


WRONG_ANSWERS["ch04-two-layer-jvp"] = [
    jvp_broadcast_along_rows, jvp_reverse_mode, jvp_no_inner_derivative, jvp_one_minus_tanh,
    jvp_by_central_difference, jvp_in_float32, jvp_by_complex_step]
AUTOGRAD_CHEATS["ch04-two-layer-jvp"] = [jvp_by_torch_func, jvp_by_dual_tensors, jvp_by_two_vjps]
SHORTCUTS["ch04-two-layer-jvp"] = [
    "import torch\n\n"
    "def two_layer_jvp(X, V, w, u):\n"
    "    F = lambda w: torch.tanh(V @ torch.tanh(X @ w))\n"
    "    if u.dim() == 1:\n"
    "        return torch.func.jvp(F, (w,), (u,))\n"
    "    return F(w), torch.func.vmap(lambda c: torch.func.jvp(F, (w,), (c,))[1], 1, 1)(u)\n",
    "import torch\n\n"
    "def two_layer_jvp(X, V, w, u):\n"
    "    F = lambda w: torch.tanh(V @ torch.tanh(X @ w))\n"
    "    if u.dim() == 1:\n"
    "        return torch.autograd.functional.jvp(F, w, u)\n"
    "    return F(w), torch.autograd.functional.jacobian(F, w) @ u\n",
    # PyTorch's backward kernel of tanh as the tangent's factor (1 − y²)·t
    "import torch\n\n"
    "def two_layer_jvp(X, V, w, u):\n"
    "    a, U = torch.tanh(X @ w), (u if u.dim() == 2 else u[:, None])\n"
    "    y = torch.tanh(V @ a)\n"
    "    t = torch.ops.aten.tanh_backward(V @ torch.ops.aten.tanh_backward(X @ U, a[:, None]), y[:, None])\n"
    "    return y, (t if u.dim() == 2 else t[:, 0])\n",
]
RIGHT_ANSWERS["ch04-two-layer-jvp"] = [
    # dual numbers a + ȧε on tensors, as in section 4.3's Dual
    "import torch\n\n"
    "class Dual:\n"
    "    def __init__(self, val, dot):\n"
    "        self.val, self.dot = val, dot\n\n"
    "    def __rmatmul__(self, M):\n"
    "        return Dual(M @ self.val, M @ self.dot)\n\n"
    "    def tanh(self):\n"
    "        t = torch.tanh(self.val)\n"
    "        d = 1 - t ** 2\n"
    "        return Dual(t, (d[:, None] if self.dot.dim() == 2 else d) * self.dot)\n\n"
    "def two_layer_jvp(X, V, w, u):\n"
    "    out = (V @ (X @ Dual(w, u)).tanh()).tanh()\n"
    "    return out.val, out.dot\n",
    # one direction at a time, the k columns stacked; 1/cosh² as tanh′
    "import torch\n\n"
    "def two_layer_jvp(X, V, w, u):\n"
    "    z1 = X @ w\n"
    "    z2 = V @ torch.tanh(z1)\n"
    "    one = lambda c: (V @ ((X @ c) / torch.cosh(z1) ** 2)) / torch.cosh(z2) ** 2\n"
    "    if u.dim() == 1:\n"
    "        return torch.tanh(z2), one(u)\n"
    "    return torch.tanh(z2), torch.stack([one(c) for c in u.T], dim=1)\n",
    # the whole Jacobian diag(1 − y²) V diag(1 − a²) X, then times u (more work, still exact)
    "import torch\n\n"
    "def two_layer_jvp(X, V, w, u):\n"
    "    a = torch.tanh(torch.einsum('hn,n->h', X, w))\n"
    "    y = torch.tanh(torch.einsum('mh,h->m', V, a))\n"
    "    J = torch.diag(1 - y ** 2) @ V @ torch.diag(1 - a ** 2) @ X\n"
    "    return y, J @ u\n",
    # chapter 3's mathref.nn.tanh and tanh_grad, allowed as in ch04-linear-tanh-vjp
    "from mathref import nn as mnn\n\n"
    "def two_layer_jvp(X, V, w, u):\n"
    "    z1 = X @ w\n"
    "    z2 = V @ mnn.tanh(z1)\n"
    "    col = (lambda t: t[:, None]) if u.dim() == 2 else (lambda t: t)\n"
    "    return mnn.tanh(z2), col(mnn.tanh_grad(z2)) * (V @ (col(mnn.tanh_grad(z1)) * (X @ u)))\n",
]
