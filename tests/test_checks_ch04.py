"""Chapter 4's checkers: the tight tolerances pass every exact formula and name the right cause
when they fail (a fresh read of chapter 4, 2026-11-29)."""
import math
import re

import pytest
import torch

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises.ch04 import (sigmoid_by_richardson, sigmoid_by_richardson_wide,
                                  silu_by_richardson, vjp_by_richardson, sigmoid_in_float32,
                                  vjp_in_float32, silu_in_float32, silu_changing_x_in_place,
                                  bigram_assigns, bigram_no_mean, bigram_no_onehot,
                                  bigram_grad_w_transposed, bigram_in_float32,
                                  bigram_sign_flipped, bigram_softmax_dim0, bigram_all_float32,
                                  bigram_per_token_mean, bigram_batch_12, bigram_vocab_7,
                                  bigram_one_hot_without_num_classes)


def sigmoid_reference(x, y, grad_y):
    return grad_y * y * (1 - y)


def sigmoid_exp_form(x, y, grad_y):
    e = math.exp(-x)
    return grad_y * e / (1 + e) ** 2


def sigmoid_tanh_form(x, y, grad_y):
    t = math.tanh(x / 2)
    return grad_y * (1 - t * t) / 4


def vjp_reference(x, W, v):
    delta = v * (1 - torch.tanh(x @ W) ** 2)
    return delta @ W.T, x.T @ delta


def vjp_cosh_form(x, W, v):
    delta = v / torch.cosh(x @ W) ** 2
    return delta @ W.T, x.T @ delta


def silu_reference(x, grad_y):
    s = torch.sigmoid(x)
    return grad_y * (s + x * s * (1 - s))


def silu_exp_form(x, grad_y):
    e = torch.exp(-x)
    return grad_y * (1 + e + x * e) / (1 + e) ** 2


EXACT = [(checks.check_ch04_sigmoid_backward, f) for f in (sigmoid_reference, sigmoid_exp_form,
                                                           sigmoid_tanh_form)]
EXACT += [(checks.check_ch04_linear_tanh_vjp, f) for f in (vjp_reference, vjp_cosh_form)]
EXACT += [(checks.check_ch04_silu_backward, f) for f in (silu_reference, silu_exp_form)]


def _generator(seed):
    return None if seed is None else torch.Generator().manual_seed(seed)


@pytest.mark.parametrize("check, answer", EXACT, ids=[f.__name__ for _, f in EXACT])
@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_exact_formulas_pass_the_tight_tolerance_on_any_inputs(check, answer, seed, capsys):
    # seed None: the notebook's fixed inputs; otherwise the grader's, drawn from a generator
    generator = _generator(seed)
    check(answer, generator=generator)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize("check, answer, name", [
    (checks.check_ch04_sigmoid_backward, sigmoid_by_richardson, "sigmoid_backward"),
    (checks.check_ch04_sigmoid_backward, sigmoid_by_richardson_wide, "sigmoid_backward"),
    (checks.check_ch04_linear_tanh_vjp, vjp_by_richardson, "differs from autograd"),
    (checks.check_ch04_silu_backward, silu_by_richardson, "differs from autograd")])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_richardson_differences_are_close_but_not_at_rounding(check, answer, name, seed):
    generator = _generator(seed)
    with pytest.raises(ExerciseCheckFailed, match="close but more than rounding") as err:
        check(answer, generator=generator)
    # (the message names float32 arithmetic as a possible cause, but not as the answer's dtype)
    assert name in err.value.message and "computed in torch.float32" not in err.value.message


def _in_float32(answer):
    def low(*args):
        got = answer(*args)
        if isinstance(got, tuple):
            return tuple(g.to(torch.float32) for g in got)
        return torch.as_tensor(got).to(torch.float32)
    return low


@pytest.mark.parametrize("check, answer", [
    (checks.check_ch04_sigmoid_backward, sigmoid_reference),
    (checks.check_ch04_linear_tanh_vjp, vjp_reference),
    (checks.check_ch04_silu_backward, silu_reference)])
def test_a_float32_result_is_told_its_dtype(check, answer):
    # the tight check used to fire first and blame "a difference quotient"
    with pytest.raises(ExerciseCheckFailed, match="your result is torch.float32") as err:
        check(_in_float32(answer))
    assert "difference quotient" not in err.value.message
    assert "compute in float64" in err.value.message


def _nodes(root):
    """Every node of a Value graph, by id (what a graph library is handed)."""
    nodes, stack = {}, [root]
    while stack:
        v = stack.pop()
        if id(v) not in nodes:
            nodes[id(v)] = v
            stack.extend(v._prev)
    return nodes


def topo_by_graphlib_by_hand(root):
    # graphlib's sorter with its ready list filled by hand instead of the forbidden prepare()
    import graphlib
    nodes = _nodes(root)
    sorter = graphlib.TopologicalSorter({k: {id(c) for c in v._prev} for k, v in nodes.items()})
    sorter._ready_nodes = [k for k, info in sorter._node2info.items() if info.npredecessors == 0]
    order = []
    while sorter.is_active():
        ready = sorter.get_ready()
        order.extend(ready)
        sorter.done(*ready)
    return [nodes[k] for k in order]


def test_graphlib_without_prepare_is_refused():
    with pytest.raises(ExerciseCheckFailed, match="your solution called graphlib"):
        checks.check_ch04_topological_order(topo_by_graphlib_by_hand)


def test_a_copy_of_topological_order_is_not_refused_as_autograd():
    # the refusal used to give the reason of the "without autograd" exercises, which this is not
    import types
    from mathref.autograd import topological_order
    copy = types.FunctionType(topological_order.__code__, topological_order.__globals__)
    with pytest.raises(ExerciseCheckFailed, match="your solution ran topological_order") as err:
        checks.check_ch04_topological_order(copy)
    assert "without autograd" not in err.value.message


# ---------------------------------------------------------------- the sixth read (2026-11-29)
def sigmoid_by_expit(x, y, grad_y):           # N1: σ under its other name, as chapter 3 allows
    s = torch.special.expit(torch.tensor(x, dtype=torch.float64))
    return (grad_y * s * (1 - s)).item()


def silu_by_expit(x, grad_y):
    return grad_y * (torch.special.expit(x) * (1 + x * torch.special.expit(-x)))


def vjp_by_linear(x, W, v):                   # N2: F.linear(δ, W) = δWᵀ
    delta = v * (1 - torch.tanh(x @ W) ** 2)
    return torch.nn.functional.linear(delta, W), torch.nn.functional.linear(x.T, delta.T)


def vjp_by_inner(x, W, v):                    # N2: torch.inner(δ, W) = δWᵀ
    delta = v * (1 - torch.tanh(x @ W) ** 2)
    return torch.inner(delta, W), torch.inner(x.T, delta.T)


def silu_changing_grad_y_in_place(x, grad_y):
    # grad_y is autograd's own buffer for this call, not a saved tensor: harmless, allowed
    s = torch.sigmoid(x)
    return grad_y.mul_(s + x * s * (1 - s))


ALLOWED = [(checks.check_ch04_sigmoid_backward, sigmoid_by_expit),
           (checks.check_ch04_silu_backward, silu_by_expit),
           (checks.check_ch04_linear_tanh_vjp, vjp_by_linear),
           (checks.check_ch04_linear_tanh_vjp, vjp_by_inner),
           (checks.check_ch04_silu_backward, silu_changing_grad_y_in_place)]


@pytest.mark.parametrize("check, answer", ALLOWED, ids=[f.__name__ for _, f in ALLOWED])
@pytest.mark.parametrize("seed", [None, 1])
def test_sigmoid_by_its_other_name_and_products_by_any_name_pass(check, answer, seed, capsys):
    generator = _generator(seed)
    check(answer, generator=generator)
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize("check, answer", [
    (checks.check_ch04_sigmoid_backward, sigmoid_in_float32),
    (checks.check_ch04_linear_tanh_vjp, vjp_in_float32),
    (checks.check_ch04_silu_backward, silu_in_float32)])
def test_float32_arithmetic_inside_is_named_as_the_cause(check, answer):
    # L2: the result is float64, so the dtype check cannot see it; what ran can
    with pytest.raises(ExerciseCheckFailed, match="close but more than rounding") as err:
        check(answer)
    assert "your code computed in torch.float32" in err.value.message
    assert "compute in float64" in err.value.message
    assert "difference quotient" not in err.value.message


def test_changing_x_in_place_is_refused_as_that_not_as_autograd():
    # L3: section 4.7's second bug, which the student made; the student used no autograd
    with pytest.raises(ExerciseCheckFailed, match="changed its argument x in place") as err:
        checks.check_ch04_silu_backward(silu_changing_x_in_place)
    assert "autograd" not in err.value.message
    assert "4.7" in err.value.message


def silu_by_decomposition_table(x, grad_y):
    from torch._decomp import decomposition_table
    return decomposition_table[torch.ops.aten.silu_backward.default](grad_y, x)


def topo_by_networkx(root):
    import networkx as nx
    nodes = _nodes(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(nodes)
    graph.add_edges_from((id(c), k) for k, v in nodes.items() for c in v._prev)
    return [nodes[k] for k in nx.topological_sort(graph)]


def test_a_graph_library_is_refused_by_its_package_with_the_exercise_reason():
    # L7: the refusal named networkx's decorator ("func") and listed PyTorch's elementary
    # operations (matmul, ...) as what a graph traversal may use
    with pytest.raises(ExerciseCheckFailed, match="code from the package networkx") as err:
        checks.check_ch04_topological_order(topo_by_networkx)
    message = err.value.message
    assert "elementary operations" not in message and "matmul" not in message
    assert "depth-first search" in message and "plain Python" in message


def silu_by_decomposition_table_get(x, grad_y):
    from torch._decomp import decomposition_table
    return decomposition_table.get(torch.ops.aten.silu_backward.default)(grad_y, x)


@pytest.mark.parametrize("answer, raw_error", [
    # N3: [op] used to fail as "KeyError: <mathref.checks.core._refusing object at 0x…>"
    (silu_by_decomposition_table, ("KeyError", "object at 0x")),
    # read 7, L3: .get(op) returns None, and the answer failed later as
    # "TypeError: 'NoneType' object is not callable"
    (silu_by_decomposition_table_get, ("TypeError", "NoneType")),
])
def test_a_lookup_of_the_refused_operator_names_it(answer, raw_error):
    with pytest.raises(ExerciseCheckFailed) as err:
        checks.check_ch04_silu_backward(answer)
    message = err.value.message
    assert not any(raw in message for raw in raw_error)
    assert "torch.ops.aten.silu_backward" in message and "decomposition_table" in message
    assert "product rule" in message


def silu_by_difference_with_tensor_h(x, grad_y):
    h = torch.tensor(1e-5)             # float32 (the default), but 0-d: x ± h stays float64
    f = lambda t: t * torch.sigmoid(t)
    return grad_y * (f(x + h) - f(x - h)) / (2 * h)


def silu_by_difference_with_unused_float32(x, grad_y):
    torch.zeros(3)                     # a float32 tensor the answer never uses
    f = lambda t: t * torch.sigmoid(t)
    return grad_y * (f(x + 1e-5) - f(x - 1e-5)) / 2e-5


def vjp_by_difference_with_tensor_h(x, W, v):
    h = torch.tensor(1e-4)             # float32 0-d: every tensor it meets stays float64
    grad_x = torch.zeros_like(x)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            e = torch.zeros_like(x)
            e[i, j] = 1
            up, down = torch.tanh((x + h * e) @ W), torch.tanh((x - h * e) @ W)
            grad_x[i, j] = ((v * up).sum() - (v * down).sum()) / (2 * h)
    delta = v * (1 - torch.tanh(x @ W) ** 2)
    return grad_x, x.T @ delta


@pytest.mark.parametrize("check, answer", [
    (checks.check_ch04_silu_backward, silu_by_difference_with_tensor_h),
    (checks.check_ch04_silu_backward, silu_by_difference_with_unused_float32),
    (checks.check_ch04_linear_tanh_vjp, vjp_by_difference_with_tensor_h)])
def test_a_harmless_float32_tensor_is_not_blamed(check, answer):
    # read 7, L1: a float32 h (0-d) or an unused float32 tensor in a float64 difference quotient
    # was named as the cause ("your code computed in torch.float32"); the quotient is
    with pytest.raises(ExerciseCheckFailed, match="close but more than rounding") as err:
        check(answer)
    assert "your code computed in" not in err.value.message
    assert "difference quotient" in err.value.message


def silu_by_vmap(x, grad_y):
    def one(xi, gi):
        s = torch.sigmoid(xi)
        return gi * (s + xi * s * (1 - s))
    return torch.vmap(one)(x, grad_y)


def vjp_by_vmap(x, W, v):
    def row(xb, vb):
        delta = vb * (1 - torch.tanh(xb @ W) ** 2)
        return delta @ W.T, torch.outer(xb, delta)
    grad_x, grad_W = torch.vmap(row)(x, v)
    return grad_x, grad_W.sum(0)


@pytest.mark.parametrize("check, answer", [(checks.check_ch04_silu_backward, silu_by_vmap),
                                           (checks.check_ch04_linear_tanh_vjp, vjp_by_vmap)])
def test_vmap_is_refused_as_a_torch_func_transform_not_as_autograd(check, answer):
    # read 7, L2: vmap differentiates nothing; it is refused with torch.func's transforms (its C
    # side too), and the message says so instead of "(autograd) ... without autograd"
    with pytest.raises(ExerciseCheckFailed, match="torch.func's transforms, vmap included") as err:
        check(answer)
    assert "autograd" not in err.value.message


# ---------------------------------------------------------------- ch04-embedding-cross-entropy-backward
def bigram_reference(ids, targets, E, W):
    X = E[ids]
    Z_bar = (torch.softmax(X @ W, dim=1)
             - torch.nn.functional.one_hot(targets, W.shape[1]).double()) / len(ids)
    return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_bigram_backward_reference_passes_on_any_inputs(seed, capsys):
    generator = _generator(seed)
    checks.check_ch04_embedding_cross_entropy_backward(bigram_reference, generator=generator)
    assert "✅ ch04-embedding-cross-entropy-backward: passed" in capsys.readouterr().out


@pytest.mark.parametrize("answer, message", [
    (bigram_assigns, "rows of tokens that occur more than once"),
    (bigram_no_mean, "mean over the B positions"),
    (bigram_no_onehot, "minus the one-hot targets"),
    (bigram_grad_w_transposed, "(the transpose)"),
    (bigram_in_float32, "float32"),
])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_bigram_backward_slips_name_their_cause(answer, message, seed):
    generator = _generator(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch04_embedding_cross_entropy_backward(answer, generator=generator)
    assert message in failure.value.message, failure.value.message


def test_bigram_inputs_have_a_repeated_and_an_absent_token():
    from mathref.checks.ch04 import _bigram_inputs
    for seed in range(5):
        for case in (0, 1):
            ids, targets, E, W = _bigram_inputs(seed, case=case)
            counts = torch.bincount(ids, minlength=E.shape[0])
            assert (counts > 1).any() and (counts == 0).any()
            assert E.shape[0] == W.shape[1] and E.shape[1] == W.shape[0]


def test_bigram_inputs_change_size_between_the_two_cases():
    # read 8, L1: V and B of case 0 and case 1 come from disjoint ranges, so a constant batch
    # size or vocabulary matches one case at most; d is drawn too
    from mathref.checks.ch04 import _bigram_inputs
    sizes = set()
    for seed in range(20):
        (ids0, _, E0, _), (ids1, _, E1, _) = (_bigram_inputs(seed, case=c) for c in (0, 1))
        assert E0.shape[0] < E1.shape[0] and len(ids0) < len(ids1)
        sizes.add((E0.shape, len(ids0)))
    assert len(sizes) > 1


def _every_token_repeats(generator_seed):
    """Whether both cases the checker draws under this generator have every present token
    repeated (the draws where any wrong grad_E row is a repeated token's row)."""
    from mathref.checks.ch04 import _bigram_inputs
    from mathref.checks.core import _CALLER
    _CALLER.append(torch.Generator().manual_seed(generator_seed))
    try:
        for case in (0, 1):
            ids, _, E, _ = _bigram_inputs(case, case=case)
            counts = torch.bincount(ids, minlength=E.shape[0])
            if not bool((counts[counts > 0] > 1).all()):
                return False
        return True
    finally:
        _CALLER.pop()


ALL_REPEAT_SEEDS = [s for s in range(400) if _every_token_repeats(s)][:3]


@pytest.mark.parametrize("answer, message", [
    (bigram_sign_flipped, "the sign is flipped"),
    (bigram_softmax_dim0, "not over the positions (dim=0)"),
    (bigram_all_float32, "float32"),
    (bigram_in_float32, "float32"),
    (bigram_per_token_mean, "not their mean"),
    (bigram_assigns, "holds one position's message"),
])
@pytest.mark.parametrize("seed", ALL_REPEAT_SEEDS)
def test_bigram_slips_keep_their_cause_when_every_token_repeats(answer, message, seed):
    # read 8, M1: on such a draw every wrong row of grad_E is a repeated token's row; only an
    # assignment (each wrong row one position's message) may be told to use index_add_
    assert len(ALL_REPEAT_SEEDS) == 3
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch04_embedding_cross_entropy_backward(
            answer, generator=torch.Generator().manual_seed(seed))
    assert message in failure.value.message, failure.value.message
    if answer is not bigram_assigns:
        assert "index_add_" not in failure.value.message, failure.value.message


@pytest.mark.parametrize("answer", [bigram_batch_12, bigram_vocab_7])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_bigram_constant_sizes_fail(answer, seed):
    # read 8, L1: B = 12 or V = 7 written as constants (the sizes of the old fixed inputs)
    generator = _generator(seed)
    with pytest.raises(ExerciseCheckFailed):
        checks.check_ch04_embedding_cross_entropy_backward(answer, generator=generator)


@pytest.mark.parametrize("seed", [None, 1])
def test_bigram_special_softmax_is_allowed(seed, capsys):
    # read 8, L2: torch.special.softmax is torch.softmax's other name
    def bigram_special(ids, targets, E, W):
        X = E[ids]
        Z_bar = (torch.special.softmax(X @ W, dim=1)
                 - torch.nn.functional.one_hot(targets, W.shape[1]).double()) / len(ids)
        return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W.T), X.T @ Z_bar
    generator = _generator(seed)
    checks.check_ch04_embedding_cross_entropy_backward(bigram_special, generator=generator)
    assert "✅ ch04-embedding-cross-entropy-backward: passed" in capsys.readouterr().out


@pytest.mark.parametrize("seed", [None, 1, 2, 1000, 1001, 1002])
def test_bigram_one_hot_without_num_classes_fails_on_every_draw_and_names_num_classes(seed):
    # read 9, M2: F.one_hot(targets) has max(targets) + 1 columns; it passed whenever both cases
    # had the last token V − 1 among their targets (the notebook's inputs, and 16 of 20 grader
    # draws), and failed on the others with a bare shape error. Case 1 now leaves V − 1 out of
    # the targets, so it fails on every draw, with num_classes named (1000..1002: draws it passed)
    generator = _generator(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch04_embedding_cross_entropy_backward(bigram_one_hot_without_num_classes,
                                                           generator=generator)
    assert "num_classes" in failure.value.message, failure.value.message


def test_bigram_inputs_leave_the_last_token_out_of_case_1s_targets():
    from mathref.checks.ch04 import _bigram_inputs
    from mathref.checks.core import _CALLER
    for generator_seed in (None, *range(20)):
        _CALLER.append(None if generator_seed is None
                       else torch.Generator().manual_seed(generator_seed))
        try:
            ids, targets, E, _ = _bigram_inputs(1, case=1)
        finally:
            _CALLER.pop()
        assert int(targets.max()) < E.shape[0] - 1 and int(ids.max()) < E.shape[0] - 1


def test_a_shape_error_unrelated_to_the_targets_is_not_blamed_on_num_classes():
    def bigram_wrong_shape(ids, targets, E, W):      # X̄ = Z̄W: a shape error on every input
        X = E[ids]
        Z_bar = (torch.softmax(X @ W, dim=1)
                 - torch.nn.functional.one_hot(targets, W.shape[1]).double()) / len(ids)
        return torch.zeros_like(E).index_add_(0, ids, Z_bar @ W), X.T @ Z_bar
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch04_embedding_cross_entropy_backward(bigram_wrong_shape)
    assert "num_classes" not in failure.value.message
    assert "your code raised RuntimeError" in failure.value.message


# ---------------------------------------------------------------- ch04-two-layer-jvp
# (chapter 4's evening read, L9: the checker's own tests; M1, L2, L3, L7)
from tests.exercises.ch04 import (jvp_broadcast_along_rows, jvp_reverse_mode,  # noqa: E402
                                  jvp_no_inner_derivative, jvp_one_minus_tanh,
                                  jvp_by_central_difference, jvp_in_float32, jvp_by_complex_step,
                                  jvp_by_torch_func, jvp_by_richardson,
                                  jvp_by_python_complex_step)


def jvp_reference(X, V, w, u):
    a = torch.tanh(X @ w)
    y = torch.tanh(V @ a)
    col = (lambda t: t[:, None]) if u.dim() == 2 else (lambda t: t)
    return y, col(1 - y ** 2) * (V @ (col(1 - a ** 2) * (X @ u)))


def jvp_by_mathref_tanh(X, V, w, u):          # chapter 3's tanh and tanh_grad (L2)
    from mathref import nn as mnn
    z1 = X @ w
    z2 = V @ mnn.tanh(z1)
    col = (lambda t: t[:, None]) if u.dim() == 2 else (lambda t: t)
    return mnn.tanh(z2), col(mnn.tanh_grad(z2)) * (V @ (col(mnn.tanh_grad(z1)) * (X @ u)))


@pytest.mark.parametrize("answer", [jvp_reference, jvp_by_mathref_tanh])
@pytest.mark.parametrize("seed", [None, 1, 2, 3])
def test_two_layer_jvp_right_answers_pass_on_any_inputs(answer, seed, capsys):
    checks.check_ch04_two_layer_jvp(answer, generator=_generator(seed))
    assert "✅ ch04-two-layer-jvp: passed" in capsys.readouterr().out


@pytest.mark.parametrize("answer, message", [
    (jvp_broadcast_along_rows, "without [:, None] a vector broadcasts along the rows"),
    (jvp_reverse_mode, "that is uᵀJ, the vector–Jacobian product of reverse mode"),
    (jvp_no_inner_derivative, "the inner tanh′ factor 1 − a²"),
    (jvp_one_minus_tanh, "squared, not 1 − tanh"),
    (jvp_in_float32, "computed in torch.float32"),
    (jvp_by_central_difference, "close but more than rounding"),
    (jvp_by_complex_step, "complex-step differentiation"),
])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_two_layer_jvp_slips_name_their_cause(answer, message, seed):
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch04_two_layer_jvp(answer, generator=_generator(seed))
    assert message in failure.value.message, failure.value.message


def test_two_layer_jvp_messages_call_the_hidden_width_d_not_h():
    # h is the chapter's difference step and a hidden activation (L3)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch04_two_layer_jvp(jvp_no_inner_derivative)
    assert "n = 4, d = 6, m = 4" in failure.value.message, failure.value.message


def test_two_layer_jvp_autograd_refusal_speaks_of_the_jvp_not_a_gradient():
    # (L7: without_autograd's default reason says "the gradient")
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch04_two_layer_jvp(jvp_by_torch_func)
    assert "torch.func.jvp" in failure.value.message
    assert "gradient" not in failure.value.message, failure.value.message
    assert "forward mode" in failure.value.message, failure.value.message


@pytest.mark.parametrize("seed", [None, 1000])
def test_two_layer_jvp_python_complex_step_is_not_refused_as_the_statement_says(seed, capsys):
    # the statement (cell 114) says a complex step in Python's own complex numbers reaches
    # rounding accuracy and is not refused: if the check ever refuses it, say so there
    checks.check_ch04_two_layer_jvp(jvp_by_python_complex_step, generator=_generator(seed))
    assert "passed" in capsys.readouterr().out


def test_two_layer_jvp_richardson_is_refused_at_the_notebook_inputs_and_near_the_tolerance():
    # the statement says a float64 Richardson quotient passes "on some inputs" (M1): refused at
    # the notebook's fixed inputs, within a few times the tolerance of torch.func.jvp
    with pytest.raises(ExerciseCheckFailed, match="close but more than rounding") as failure:
        checks.check_ch04_two_layer_jvp(jvp_by_richardson)
    err = float(re.search(r"by up to ([0-9.e-]+)", failure.value.message).group(1))
    assert 1e-14 < err < 1e-13, failure.value.message
