"""mathref.autograd.Value against torch.autograd in float64 (values and gradients)."""
import math
import random

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mathref.autograd import MLP, Value, draw_graph, topological_order  # noqa: E402

# Each op maps (a, b) to a new node; written once, run on Values and on float64 tensors, so the
# same formula is evaluated by both engines. Denominators and logs are kept away from 0.
OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (b * b + 1),
    "neg": lambda a, b: -a,
    "square": lambda a, b: a ** 2,
    "cube_scaled": lambda a, b: 0.1 * a ** 3,
    "inv_sqrt": lambda a, b: (a * a + 0.5) ** -0.5,
    "radd": lambda a, b: 1.5 + a,
    "rsub": lambda a, b: 2.0 - a,
    "rmul": lambda a, b: 0.7 * a,
    "rdiv": lambda a, b: 1.0 / (a * a + 1),
    "tanh": lambda a, b: a.tanh(),
    "exp": lambda a, b: a.tanh().exp(),
    "relu": lambda a, b: a.relu(),
    "sigmoid": lambda a, b: a.sigmoid(),
    "log": lambda a, b: (a * a + 0.5).log(),
}


def run_program(leaves, program, make_leaf):
    """Evaluate a random program; returns (leaf nodes, output node). Nodes may be reused."""
    xs = [make_leaf(v) for v in leaves]
    pool = list(xs)
    for op, i, j in program:
        pool.append(OPS[op](pool[i % len(pool)], pool[j % len(pool)]))
    out = pool[-1]
    for node in pool[-3:-1]:          # the output reuses earlier nodes too
        out = out + node
    return xs, out


def torch_leaf(v):
    return torch.tensor(v, dtype=torch.float64, requires_grad=True)


# tensors need .tanh() etc. and torch has them; Value has them: OPS works for both
program_strategy = st.lists(st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 50),
                                      st.integers(0, 50)), min_size=1, max_size=12)
leaf_strategy = st.lists(st.floats(-2, 2, allow_nan=False).filter(lambda v: abs(v) > 1e-3),
                         min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(leaves=leaf_strategy, program=program_strategy)
def test_random_expressions_match_torch(leaves, program):
    vals, out = run_program(leaves, program, Value)
    assume(math.isfinite(out.data) and abs(out.data) < 1e8)   # no overflow to compare
    tens, tout = run_program(leaves, program, torch_leaf)
    out.backward()
    tout.backward()
    assert out.data == pytest.approx(tout.item(), rel=1e-12, abs=1e-12)
    for v, t in zip(vals, tens):
        expected = 0.0 if t.grad is None else t.grad.item()
        assert v.grad == pytest.approx(expected, rel=1e-10, abs=1e-10)


def test_fixed_expression_all_ops(float64_device):
    # f = tanh(a*b + c/a) + exp(-a) * relu(b) + log(c) - 3/b + (1 - a)**2
    def f(a, b, c, tanh, exp, relu, log):
        return tanh(a * b + c / a) + exp(-a) * relu(b) + log(c) - 3 / b + (1 - a) ** 2

    a, b, c = Value(0.8), Value(1.3), Value(2.5)
    out = f(a, b, c, Value.tanh, Value.exp, Value.relu, Value.log)
    out.backward()
    ta, tb, tc = (torch.tensor(v, dtype=torch.float64, device=float64_device,
                               requires_grad=True) for v in (0.8, 1.3, 2.5))
    tout = f(ta, tb, tc, torch.tanh, torch.exp, torch.relu, torch.log)
    tout.backward()
    assert out.data == pytest.approx(tout.item(), rel=1e-13)
    for v, t in [(a, ta), (b, tb), (c, tc)]:
        assert v.grad == pytest.approx(t.grad.item(), rel=1e-12)


def test_node_used_twice_accumulates():
    x = Value(3.0)
    y = x * x + x            # dy/dx = 2x + 1 = 7, x is used three times
    y.backward()
    assert x.grad == pytest.approx(7.0)
    a = Value(-1.5)
    b = a + a                # the same child twice in one node
    b.backward()
    assert a.grad == pytest.approx(2.0)


def test_backward_on_fresh_graph_and_leaf_accumulation_like_torch():
    # a second backward() on the same graph adds to the leaves, as torch does; intermediate
    # nodes are recomputed, so the result is exactly twice the single-pass gradient.
    x, w = Value(0.5), Value(-2.0)
    h = (x * w).tanh()
    out = h * h + h
    out.backward()
    first = (x.grad, w.grad)
    out.backward()
    tx, tw = torch_leaf(0.5), torch_leaf(-2.0)
    th = torch.tanh(tx * tw)
    tout = th * th + th
    tout.backward(retain_graph=True)
    assert first == pytest.approx((tx.grad.item(), tw.grad.item()), rel=1e-12)
    tout.backward()
    assert (x.grad, w.grad) == pytest.approx((tx.grad.item(), tw.grad.item()), rel=1e-12)
    # a fresh graph over the same leaves, after zeroing them: back to one pass
    x.grad = w.grad = 0.0
    fresh = (x * w).tanh()
    fresh.backward()
    assert x.grad == pytest.approx(w.data * (1 - math.tanh(x.data * w.data) ** 2), rel=1e-12)


def test_backward_of_a_leaf_and_repr():
    v = Value(0.5)
    assert repr(v) == "Value(data=0.5, grad=0.0)"
    v.backward()
    assert v.grad == 1.0
    assert repr(Value(1 / 3)) == "Value(data=0.3333, grad=0.0)"


def test_topological_order_puts_children_first_once():
    a, b = Value(1.0), Value(2.0)
    c = a * b
    d = c + a
    e = d * c
    order = topological_order(e)
    assert len(order) == len({id(v) for v in order}) == 5
    where = {id(v): i for i, v in enumerate(order)}
    for v in order:
        for child in v._prev:
            assert where[id(child)] < where[id(v)]
    assert order[-1] is e


def test_long_chain_does_not_hit_the_recursion_limit():
    x = Value(1.0)
    y = x
    for _ in range(5000):
        y = y + x
    y.backward()
    assert x.grad == 5001.0


def test_mlp_matches_torch_model_forward_and_backward():
    mlp = MLP(3, [4, 4, 2], seed=1)
    layers = []
    for W, b in mlp.weights():
        lin = torch.nn.Linear(len(W[0]), len(W), dtype=torch.float64)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(W, dtype=torch.float64))
            lin.bias.copy_(torch.tensor(b, dtype=torch.float64))
        layers += [lin, torch.nn.Tanh()]
    model = torch.nn.Sequential(*layers[:-1])
    rng = random.Random(0)
    data = [[rng.uniform(-1, 1) for _ in range(3)] for _ in range(5)]
    loss = sum((o - 0.5) ** 2 for x in data for o in mlp(x))
    loss.backward()
    tloss = ((model(torch.tensor(data, dtype=torch.float64)) - 0.5) ** 2).sum()
    tloss.backward()
    assert loss.data == pytest.approx(tloss.item(), rel=1e-12)
    tgrads = [g for lin in model if isinstance(lin, torch.nn.Linear)
              for g in torch.cat([lin.weight.grad, lin.bias.grad[:, None]], 1).flatten().tolist()]
    assert [p.grad for p in mlp.parameters()] == pytest.approx(tgrads, rel=1e-10, abs=1e-12)
    mlp.zero_grad()
    assert all(p.grad == 0.0 for p in mlp.parameters())


def test_mlp_init_range_and_parameter_count():
    mlp = MLP(4, [3, 3, 2])
    assert len(mlp.parameters()) == (4 + 1) * 3 + (3 + 1) * 3 + (3 + 1) * 2
    assert all(abs(p.data) <= 1 / math.sqrt(4) for p in mlp.layers[0].parameters())


def test_bad_input_raises_clear_errors():
    with pytest.raises(TypeError, match="real number"):
        Value("1.0")
    with pytest.raises(TypeError, match="already a Value"):
        Value(Value(1.0))
    with pytest.raises(TypeError, match="exponent"):
        Value(2.0) ** Value(2.0)
    with pytest.raises(ValueError, match="whole exponent"):
        Value(-2.0) ** 0.5
    with pytest.raises(ValueError, match="positive"):
        Value(0.0).log()
    with pytest.raises(TypeError):
        Value(1.0) + "a"
    with pytest.raises(ValueError, match="inputs"):
        MLP(2, [3])([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match="root"):
        topological_order(1.0)


def test_draw_graph_shows_every_node_with_value_and_grad():
    a, b = Value(2.0, label="a"), Value(-3.0, label="b")
    c = a * b
    c.label = "c"
    L = c + a
    L.label = "L"
    L.backward()
    ax = draw_graph(L)
    texts = [t.get_text() for t in ax.texts]
    for v in (a, b, c, L):
        assert any(t.startswith(f"{v.label} | data") and f"grad {v.grad:.4g}" in t for t in texts)
    assert sum(t in ("*", "+") for t in texts) == 2          # one circle per operation
    assert "a | data 2.0\ngrad -2.0" in texts                # ∂L/∂a = b + 1 = −2
    plt.close("all")


def test_neuron_and_layer_are_tanh_of_an_affine_map():
    from mathref.autograd import Layer, Neuron
    x = [0.5, -1.5, 2.0]
    neuron = Neuron(3, rng=random.Random(1))
    by_hand = math.tanh(neuron.b.data + sum(w.data * xi for w, xi in zip(neuron.w, x)))
    assert neuron(x).data == pytest.approx(by_hand, abs=1e-15)
    linear = Neuron(3, nonlin=False, rng=random.Random(1))
    assert linear(x).data == pytest.approx(math.atanh(by_hand), abs=1e-12)
    layer = Layer(3, 4, rng=random.Random(2))
    outs = layer(x)
    assert len(outs) == 4 and len(layer.parameters()) == 4 * (3 + 1)
    for n, out in zip(layer.neurons, outs):
        assert out.data == pytest.approx(math.tanh(n.b.data + sum(w.data * xi for w, xi in zip(n.w, x))))
    with pytest.raises(ValueError, match="n_in"):
        Neuron(0)


@pytest.mark.parametrize("x", [-800.0, -40.0, -3.0, -1e-3, 0.0, 0.5, 2.0, 40.0, 800.0])
def test_sigmoid_matches_torch_sigmoid_and_autograd(x):
    v = Value(x)
    s = v.sigmoid()
    s.backward()
    t = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    ts = torch.sigmoid(t)
    ts.backward()
    assert s.data == pytest.approx(ts.item(), rel=1e-15, abs=1e-300)
    assert v.grad == pytest.approx(t.grad.item(), rel=1e-12, abs=1e-300)
    # and against the closed form σ(1 − σ), independent of both engines
    exact = 1 / (1 + math.exp(-x)) if x > -700 else 0.0
    assert v.grad == pytest.approx(exact * (1 - exact), rel=1e-12, abs=1e-300)


def test_sigmoid_inside_a_graph_matches_torch():
    a, b = Value(0.7), Value(-1.3)
    out = (a * b).sigmoid() * a + (b.sigmoid() ** 2)
    out.backward()
    ta, tb = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (0.7, -1.3))
    tout = torch.sigmoid(ta * tb) * ta + torch.sigmoid(tb) ** 2
    tout.backward()
    assert out.data == pytest.approx(tout.item(), rel=1e-14)
    assert (a.grad, b.grad) == pytest.approx((ta.grad.item(), tb.grad.item()), rel=1e-12)


def test_draw_graph_draws_a_child_used_twice_as_two_separate_arrows():
    # chapter 4's read 9, L6: h * h drew its two arrows between the same two points, one on top
    # of the other; they now leave the box at two heights and meet the circle at two angles
    h = Value(0.5, label="h")
    y = h * h
    y.backward()
    ax = draw_graph(y)
    arrows = [a for a in ax.texts if a.get_text() == "" and hasattr(a, "xyann")]
    left = min(a.xyann[0] for a in arrows)               # h's box: the leftmost starts
    from_h = [a for a in arrows if a.xyann[0] == left]
    assert len(from_h) == 2
    (s0, e0), (s1, e1) = ((a.xyann, a.xy) for a in from_h)
    assert abs(s0[1] - s1[1]) > 0.1 and abs(e0[1] - e1[1]) > 0.1
    plt.close("all")
