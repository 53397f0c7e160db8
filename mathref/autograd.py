"""A scalar reverse-mode automatic differentiation engine, written for the course. See chapter 4.

Every ``Value`` holds one number (``data``), the derivative of the final output with respect
to it (``grad``), and how it was computed (its children and a local backward rule). For an
output L, ``L.backward()`` visits the graph in reverse topological order and applies, at every
node u with children v,

    v.grad += (∂u/∂v) · u.grad        (the chain rule; ``+=`` sums over all uses of v)

which is reverse mode: one backward pass gives ∂L/∂v for every node v.

The module also holds ``draw_graph`` (matplotlib only) and a tiny ``Neuron``/``Layer``/``MLP``
built from ``Value``s, used in chapter 4 to check the engine against ``torch.autograd``.
"""
import math
import numbers
import random

__all__ = ["Value", "topological_order", "draw_graph", "Neuron", "Layer", "MLP"]


def _fmt(x):
    """Four significant digits, always with a decimal point or exponent (0 → '0.0')."""
    s = f"{x:.4g}"
    return s + ".0" if s.lstrip("-").isdigit() else s


class Value:
    """One scalar node of a computational graph, with its value and its gradient.

    ``Value(2.0)`` is a leaf; arithmetic (+ - * / **, unary -), the methods ``tanh``,
    ``exp``, ``relu``, ``log``, ``sigmoid`` and the generic ``apply`` build new nodes that
    remember their children (micrograd's word for a node's inputs; the node is their parent). After
    ``out.backward()``, ``v.grad`` holds ∂out/∂v for every node v of the graph. See chapter 4.
    """

    def __init__(self, data, _children=(), _op="", label=""):
        if isinstance(data, Value):
            raise TypeError("Value(data): data is already a Value; use it directly")
        if not isinstance(data, numbers.Real) or isinstance(data, bool):
            raise TypeError(f"Value(data): data must be a real number, got {type(data).__name__}")
        self.data = float(data)
        self.grad = 0.0
        self._backward = lambda: None   # sends self.grad to the children (set by each op)
        self._prev = tuple(_children)
        self._op = _op
        self.label = label

    def __repr__(self):
        return f"Value(data={_fmt(self.data)}, grad={_fmt(self.grad)})"

    @staticmethod
    def _wrap(other):
        if isinstance(other, Value):
            return other
        if isinstance(other, numbers.Real) and not isinstance(other, bool):
            return Value(other)
        return None

    # ---- binary operations: local derivatives ∂out/∂self and ∂out/∂other
    def __add__(self, other):
        other = Value._wrap(other)
        if other is None:
            return NotImplemented
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():                 # ∂(a + b)/∂a = 1, ∂(a + b)/∂b = 1
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = Value._wrap(other)
        if other is None:
            return NotImplemented
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():                 # ∂(ab)/∂a = b, ∂(ab)/∂b = a
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    def __pow__(self, exponent):
        if not isinstance(exponent, numbers.Real) or isinstance(exponent, bool):
            raise TypeError(f"Value ** exponent: the exponent must be a number, got "
                            f"{type(exponent).__name__} (use exp/log for a Value exponent)")
        if self.data < 0 and not float(exponent).is_integer():
            raise ValueError(f"Value ** {exponent!r}: a negative base {self.data!r} needs a "
                             f"whole exponent (the result would be complex)")
        out = Value(self.data ** exponent, (self,), f"**{_fmt(exponent)}")

        def _backward():                 # ∂(a^k)/∂a = k a^(k−1)
            self.grad += exponent * self.data ** (exponent - 1) * out.grad
        out._backward = _backward
        return out

    # ---- everything else is built from +, *, ** (so its gradient comes for free)
    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        other = Value._wrap(other)
        return NotImplemented if other is None else self + (-other)

    def __truediv__(self, other):
        other = Value._wrap(other)
        return NotImplemented if other is None else self * other ** -1

    def __radd__(self, other):           # 2 + v
        return self + other

    def __rmul__(self, other):           # 2 * v
        return self * other

    def __rsub__(self, other):           # 2 - v
        other = Value._wrap(other)
        return NotImplemented if other is None else other + (-self)

    def __rtruediv__(self, other):       # 2 / v
        other = Value._wrap(other)
        return NotImplemented if other is None else other * self ** -1

    # ---- unary functions
    def apply(self, fn, backward, op="f"):
        """A new node y = fn(x) whose backward rule is x.grad += backward(x, y, y.grad).

        ``fn`` maps a float to a float; ``backward(x, y, grad_y)`` returns the contribution
        ∂L/∂x = grad_y · dy/dx. This is how an operation is added to the engine.
        """
        out = Value(fn(self.data), (self,), op)

        def _backward():
            self.grad += backward(self.data, out.data, out.grad)
        out._backward = _backward
        return out

    def tanh(self):
        """tanh(x), with d tanh/dx = 1 − tanh²(x)."""
        return self.apply(math.tanh, lambda x, y, g: (1 - y * y) * g, "tanh")

    def sigmoid(self):
        """σ(x) = 1/(1 + e^(−x)), with dσ/dx = σ(x)(1 − σ(x)) (uses the output, like tanh).

        Evaluated as e^x/(1 + e^x) for x < 0, so that e^(−x) never overflows."""
        def sigmoid(x):
            if x >= 0:
                return 1.0 / (1.0 + math.exp(-x))
            e = math.exp(x)
            return e / (1.0 + e)
        return self.apply(sigmoid, lambda x, y, g: y * (1 - y) * g, "σ")

    def exp(self):
        """exp(x), with d exp/dx = exp(x)."""
        return self.apply(math.exp, lambda x, y, g: y * g, "exp")

    def relu(self):
        """max(0, x), with derivative 1 for x > 0 and 0 otherwise (0 at x = 0, as PyTorch)."""
        return self.apply(lambda x: x if x > 0 else 0.0,
                          lambda x, y, g: (1.0 if x > 0 else 0.0) * g, "relu")

    def log(self):
        """Natural log ln(x) for x > 0, with d ln/dx = 1/x."""
        if self.data <= 0:
            raise ValueError(f"log needs a positive input, got {self.data!r}")
        return self.apply(math.log, lambda x, y, g: g / x, "log")

    # ---- reverse mode
    def backward(self):
        """Reverse mode: fill ``v.grad`` = ∂self/∂v for every node v of self's graph.

        Children come before their parents in the topological order, so walking it backwards
        finishes every node's gradient before it is passed on. As in PyTorch, leaves
        *accumulate* (a second ``backward()`` adds to their ``grad``); the intermediate nodes
        are recomputed from zero.
        """
        order = topological_order(self)
        for v in order:
            if v._prev:
                v.grad = 0.0
        self.grad += 1.0                  # ∂self/∂self = 1
        for v in reversed(order):
            v._backward()


def topological_order(root):
    """All nodes of root's graph, each once, every node after all of its children.

    Depth-first, without recursion (a long chain of additions would exceed Python's
    recursion limit). See chapter 4.
    """
    if not isinstance(root, Value):
        raise TypeError(f"topological_order(root): root must be a Value, got "
                        f"{type(root).__name__}")
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
            continue
        if id(node) in visited:
            continue
        visited.add(id(node))
        stack.append((node, True))
        for child in reversed(node._prev):
            if id(child) not in visited:
                stack.append((child, False))
    return order


def draw_graph(root, ax=None, show_grad=True, title=None):
    """Draw root's computational graph with matplotlib: one box per ``Value`` (its label,
    data and grad), one circle per operation, inputs on the left and root on the right.

    Returns the matplotlib axes. A node used twice by one operation gets two arrows. See chapter 4.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Circle, FancyBboxPatch

    order = topological_order(root)
    # column: as late as possible (inputs sit just left of their first use); root rightmost
    depth = {id(root): 0}
    for v in reversed(order):
        for c in v._prev:
            depth[id(c)] = max(depth.get(id(c), 0), depth[id(v)] + 1)
    n_cols = max(depth.values()) + 1
    columns = {}
    for v in order:
        columns.setdefault(n_cols - 1 - depth[id(v)], []).append(v)
    parents = {}
    for v in order:
        for c in v._prev:
            parents.setdefault(id(c), []).append(v)
    # rows: each node near the mean height of its parents, at least 1 apart
    pos, step = {}, 3.2
    for col in sorted(columns, reverse=True):
        nodes = columns[col]
        want = [sum(pos[id(p)][1] for p in parents.get(id(v), [])) /
                max(len(parents.get(id(v), [])), 1) for v in nodes]
        ranked = sorted(range(len(nodes)), key=lambda i: (want[i], -i))   # first on top
        ys, last = [], None
        for i in ranked:
            y = want[i] if last is None else max(want[i], last + 1.0)
            ys.append(y)
            last = y
        shift = sum(want[i] for i in ranked) / len(ranked) - sum(ys) / len(ys)
        for i, y in zip(ranked, ys):
            pos[id(nodes[i])] = (step * col, y + shift)
    # an edge that skips a column would cross the boxes between: it runs in a lane above them
    skips = any(pos[id(v)][0] - pos[id(c)][0] > 1.5 * step for v in order for c in v._prev)
    top = max(p[1] for p in pos.values()) + (0.75 if skips else 0.0)      # (the lane's height)
    height = top - min(p[1] for p in pos.values()) + 1
    if ax is None:
        _, ax = plt.subplots(figsize=(2.3 * n_cols + 1, 1.1 * height + 1),
                             constrained_layout=True)
    w, h, r = 1.9, 0.62, 0.27
    for v in order:
        x, y = pos[id(v)]
        if v._prev:                         # the op circle sits left of its result
            ox = x - w / 2 - 0.55
            ax.add_patch(Circle((ox, y), r, fc="#fff3d6", ec="0.3", lw=1, zorder=3))
            ax.text(ox, y, v._op, ha="center", va="center", fontsize=8, zorder=4)
            ax.annotate("", xy=(x - w / 2, y), xytext=(ox + r, y), zorder=2,
                        arrowprops=dict(arrowstyle="->", color="0.3", lw=1))
            for k, c in enumerate(v._prev):
                cx, cy = pos[id(c)]
                if x - cx > 1.5 * step:         # up to the lane, along it, down to the circle
                    ax.plot([cx + w / 2, cx + w / 2 + 0.4, ox - 0.45, ox - 0.45],
                            [cy, top, top, y + r + 0.25], color="0.45", lw=1, zorder=2)
                    ax.annotate("", xy=(ox - r * 0.7, y + r * 0.7), xytext=(ox - 0.45, y + r + 0.25),
                                zorder=2, arrowprops=dict(arrowstyle="->", color="0.45", lw=1,
                                                          shrinkA=0, shrinkB=0))
                    continue
                # a child used m times by one operation: m arrows, leaving its box at m heights
                # and meeting the circle at m angles, each bowed away from the middle (two
                # arrows between the same two points would lie on top of each other)
                uses = [j for j, p in enumerate(v._prev) if p is c]
                spread = uses.index(k) - (len(uses) - 1) / 2        # 0 for a single use
                angle = 0.75 * spread
                ax.annotate("", xy=(ox - 0.9 * r * math.cos(angle), y + 0.9 * r * math.sin(angle)),
                            xytext=(cx + w / 2, cy + 0.2 * spread), zorder=2,
                            arrowprops=dict(arrowstyle="->", color="0.45", lw=1,
                                            shrinkA=0, shrinkB=0,
                                            connectionstyle=f"arc3,rad={-0.4 * spread}"))
        ax.add_patch(FancyBboxPatch((x - w / 2, y - h / 2), w, h,
                                    boxstyle="round,pad=0.02,rounding_size=0.08",
                                    fc="#dbe9f6" if not v._prev else "white",
                                    ec="#1f77b4", lw=1.2, zorder=3))
        text = f"{v.label + ' | ' if v.label else ''}data {_fmt(v.data)}"
        if show_grad:
            text += f"\ngrad {_fmt(v.grad)}"
        ax.text(x, y, text, ha="center", va="center", fontsize=8, zorder=4)
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    ax.set_xlim(min(xs) - w / 2 - 0.3, max(xs) + w / 2 + 0.3)
    ax.set_ylim(min(ys) - 0.6, top + 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax


# ---- a tiny neural network made of Values (the same maps as nn.Linear + tanh)
class Neuron:
    """y = φ(b + Σᵢ wᵢxᵢ) with φ = tanh (or the identity when ``nonlin=False``).

    Weights and bias start uniform in [−1/√n_in, 1/√n_in] (the range of nn.Linear's default).
    """

    def __init__(self, n_in, nonlin=True, rng=None):
        if not isinstance(n_in, int) or n_in < 1:
            raise ValueError(f"n_in must be a positive int, got {n_in!r}")
        rng = rng if rng is not None else random.Random(0)
        bound = 1 / math.sqrt(n_in)
        self.w = [Value(rng.uniform(-bound, bound)) for _ in range(n_in)]
        self.b = Value(rng.uniform(-bound, bound))
        self.nonlin = nonlin

    def __call__(self, x):
        if len(x) != len(self.w):
            raise ValueError(f"Neuron expects {len(self.w)} inputs, got {len(x)}")
        z = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return z.tanh() if self.nonlin else z

    def parameters(self):
        return self.w + [self.b]


class Layer:
    """``n_out`` neurons reading the same inputs: one Value per output."""

    def __init__(self, n_in, n_out, nonlin=True, rng=None):
        if not isinstance(n_out, int) or n_out < 1:
            raise ValueError(f"n_out must be a positive int, got {n_out!r}")
        rng = rng if rng is not None else random.Random(0)
        self.neurons = [Neuron(n_in, nonlin, rng) for _ in range(n_out)]

    def __call__(self, x):
        return [n(x) for n in self.neurons]

    def parameters(self):
        return [p for n in self.neurons for p in n.parameters()]

    def weights(self):
        """(W, b) as nested lists, W[j][i] = weight from input i to output j (nn.Linear's
        ``weight`` layout, shape (n_out, n_in))."""
        return ([[w.data for w in n.w] for n in self.neurons], [n.b.data for n in self.neurons])


class MLP:
    """Layers of tanh neurons with a linear last layer: sizes n_in → n_outs[0] → ... .

    ``MLP(2, [4, 4, 1])(x)`` returns a list of one Value. See chapter 4.
    """

    def __init__(self, n_in, n_outs, seed=0):
        from mathref.device import seeded  # the seed sweep's offset (make seeds)
        rng = random.Random(seeded(seed))
        sizes = [n_in] + list(n_outs)
        self.layers = [Layer(sizes[i], sizes[i + 1], nonlin=i < len(n_outs) - 1, rng=rng)
                       for i in range(len(n_outs))]

    def __call__(self, x):
        x = list(x)
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def zero_grad(self):
        for p in self.parameters():
            p.grad = 0.0

    def weights(self):
        """[(W, b), ...] per layer, in nn.Linear's layout, to copy into a torch model."""
        return [layer.weights() for layer in self.layers]
