"""Chapter 3's checkers: the float64 tolerances pass every exact formula, on the notebook's
inputs and the grader's, and refuse difference quotients, float32 arithmetic and layers built
by another name, naming the cause (the third read of chapter 3, 2026-11-29)."""
import pytest
import torch

from mathref import checks
from mathref import nn as mnn
from mathref.checks import ExerciseCheckFailed
from tests.exercises import ch03 as ex


def sigmoid_reference(z):
    s = torch.sigmoid(z)
    return s * (1 - s)


def sigmoid_minus_square(z):        # s − s²: the largest rounding error of the exact forms
    s = mnn.sigmoid(z)
    return s - s * s


def sigmoid_symmetric(z):
    return torch.sigmoid(z) * torch.sigmoid(-z)


def sigmoid_exp_form(z):
    e = torch.exp(-z.abs())
    return e / (1 + e) ** 2


def sigmoid_cosh_form(z):
    return 0.25 / torch.cosh(z / 2) ** 2


def sigmoid_tanh_form(z):
    return 0.25 * (1 - torch.tanh(z / 2) ** 2)


def sigmoid_expit(z):
    s = torch.special.expit(z)
    return s * (1 - s)


def backward_reference(X, Y, W1, b1, W2, b2):
    A1 = torch.tanh(X @ W1 + b1)
    d2 = 2 / X.shape[0] * (A1 @ W2 + b2 - Y)
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)


def backward_einsum_cosh(X, Y, W1, b1, W2, b2):
    Z1 = torch.addmm(b1, X, W1)
    A1 = torch.tanh(Z1)
    d2 = (A1 @ W2 + b2 - Y) * (2.0 / len(X))
    d1 = torch.einsum("no,ho->nh", d2, W2) / torch.cosh(Z1) ** 2
    return (d1, torch.einsum("ni,nh->ih", X, d1), d1.sum(dim=0),
            torch.einsum("nh,no->ho", A1, d2), d2.sum(dim=0))


def backward_per_example(X, Y, W1, b1, W2, b2):
    N = X.shape[0]
    d1s, sums = [], [0, 0, 0, 0]
    for n in range(N):
        a = torch.tanh(X[n] @ W1 + b1)
        d2 = 2 / N * (a @ W2 + b2 - Y[n])
        d1 = (W2 @ d2) * (1 - a * a)
        d1s.append(d1)
        for k, v in enumerate((torch.outer(X[n], d1), d1, torch.outer(a, d2), d2)):
            sums[k] = sums[k] + v
    return (torch.stack(d1s), *sums)


def backward_mathref_forward(X, Y, W1, b1, W2, b2):
    Y_hat, cache = mnn.mlp_forward(X, dict(W1=W1, b1=b1, W2=W2, b2=b2), activation="tanh")
    d2 = 2 * (Y_hat - Y) / X.shape[0]
    d1 = d2 @ W2.T * mnn.tanh_grad(cache["Z1"])
    return d1, X.T @ d1, d1.sum(0), cache["A1"].T @ d2, d2.sum(0)


EXACT = [(checks.check_ch03_sigmoid_derivative, f) for f in (
    sigmoid_reference, sigmoid_minus_square, sigmoid_symmetric, sigmoid_exp_form,
    sigmoid_cosh_form, sigmoid_tanh_form, sigmoid_expit)]
EXACT += [(checks.check_ch03_two_layer_backward, f) for f in (
    backward_reference, backward_einsum_cosh, backward_per_example, backward_mathref_forward)]


@pytest.mark.parametrize("check, answer", EXACT, ids=[f.__name__ for _, f in EXACT])
@pytest.mark.parametrize("seed", [None, 1, 2, 3, 4, 5])
def test_exact_formulas_pass_the_float64_tolerance_on_any_inputs(check, answer, seed, capsys):
    # seed None: the notebook's fixed inputs; otherwise the grader's, drawn from a generator
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    check(answer, generator=generator)
    assert "passed" in capsys.readouterr().out


REFUSED = [
    (checks.check_ch03_sigmoid_derivative, ex.sigmoid_derivative_by_central_difference,
     "difference quotient"),
    (checks.check_ch03_sigmoid_derivative, ex.sigmoid_derivative_by_richardson, "difference quotient"),
    (checks.check_ch03_sigmoid_derivative, ex.sigmoid_derivative_by_richardson_levels,
     "difference quotient"),
    (checks.check_ch03_sigmoid_derivative, ex.sigmoid_derivative_by_sixth_order_stencil,
     "difference quotient"),
    (checks.check_ch03_two_layer_backward, ex.backward_by_sixth_order_stencil, "difference quotient"),
    (checks.check_ch03_two_layer_backward, ex.backward_by_sixth_order_stencil_fine,
     "difference quotient"),
    (checks.check_ch03_two_layer_backward, ex.backward_delta1_by_stencil, "difference quotient"),
    (checks.check_ch03_two_layer_backward, ex.backward_by_richardson, "difference quotient"),
    # float32 arithmetic is named as a cause too, not blamed on a difference quotient alone
    (checks.check_ch03_two_layer_backward, ex.backward_in_float32, "float32"),
    (checks.check_ch03_parameter_count, ex.count_by_conv1d_state_dict, "Module.__init__"),
    (checks.check_ch03_parameter_count, ex.count_as_float, "Python int"),
    (checks.check_ch03_parameter_count, ex.count_as_tensor, "Python int"),
    (checks.check_ch03_parameter_count, ex.count_as_numpy_int, "Python int"),
    (checks.check_ch03_output_delta, ex.delta_in_float32, "dtype"),
]


@pytest.mark.parametrize("check, answer, cause", REFUSED, ids=[f.__name__ for _, f, _ in REFUSED])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_numerical_and_mistyped_answers_fail_with_their_cause(check, answer, cause, seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed, match=cause):
        check(answer, generator=generator)


# The fifth read (2026-11-29): a one-sided difference quotient of the output delta is refused
# at every step, and the 1 − Z₁² slip is named
REFUSED_5 = [
    (checks.check_ch03_output_delta, ex.delta_by_forward_difference, "one-sided one"),
    (checks.check_ch03_output_delta, ex.delta_by_forward_difference_best_step, "one-sided one"),
    (checks.check_ch03_output_delta, ex.delta_by_central_difference_small_step, "small step"),
    (checks.check_ch03_two_layer_backward, ex.backward_one_minus_z_squared, "not 1 − Z₁²"),
]


@pytest.mark.parametrize("check, answer, cause", REFUSED_5, ids=[f.__name__ for _, f, _ in REFUSED_5])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_one_sided_differences_and_the_pre_activation_slip_fail_with_their_cause(check, answer,
                                                                                   cause, seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed, match=cause):
        check(answer, generator=generator)


@pytest.mark.parametrize("exponent", range(-13, 1))
def test_a_one_sided_difference_of_the_output_delta_fails_at_any_step(exponent):
    h = 10.0 ** exponent
    with pytest.raises(ExerciseCheckFailed):
        checks.check_ch03_output_delta(lambda Y_hat, Y: ex._delta_by_forward_difference(Y_hat, Y, h))


def _central(loss, P, h):
    g = torch.empty_like(P)
    for i in range(P.numel()):
        up, down = P.clone(), P.clone()
        up.view(-1)[i] += h
        down.view(-1)[i] -= h
        g.view(-1)[i] = (loss(up) - loss(down)) / (2 * h)
    return g


def delta_by_central_difference_step_1(Y_hat, Y):
    return _central(lambda P: ((P - Y) ** 2).sum(1).mean(), Y_hat, 1.0)


def backward_dW2_by_central_difference_step_1(X, Y, W1, b1, W2, b2):
    A1 = torch.tanh(X @ W1 + b1)
    d2 = 2 / X.shape[0] * (A1 @ W2 + b2 - Y)
    d1 = (d2 @ W2.T) * (1 - A1 ** 2)
    dW2 = _central(lambda W: ((A1 @ W + b2 - Y) ** 2).sum(1).mean(), W2, 1.0)
    return d1, X.T @ d1, d1.sum(0), dW2, d2.sum(0)


def _one_sided_second_order(loss, P, h):
    # (−3 L(P) + 4 L(P + hE) − L(P + 2hE)) / 2h: one-sided, but exact for a quadratic like the central one
    g, L0 = torch.empty_like(P), loss(P)
    for i in range(P.numel()):
        one, two = P.clone(), P.clone()
        one.view(-1)[i] += h
        two.view(-1)[i] += 2 * h
        g.view(-1)[i] = (-3 * L0 + 4 * loss(one) - loss(two)) / (2 * h)
    return g


def _forward(loss, P, h):
    g, L0 = torch.empty_like(P), loss(P)
    for i in range(P.numel()):
        one = P.clone()
        one.view(-1)[i] += h
        g.view(-1)[i] = (loss(one) - L0) / h
    return g


def delta_by_one_sided_second_order_step_1(Y_hat, Y):
    return _one_sided_second_order(lambda P: ((P - Y) ** 2).sum(1).mean(), Y_hat, 1.0)


def delta_by_one_sided_second_order_step_1e_3(Y_hat, Y):
    return _one_sided_second_order(lambda P: ((P - Y) ** 2).sum(1).mean(), Y_hat, 1e-3)


def delta_by_richardson_of_forward_differences_step_1(Y_hat, Y):
    loss = lambda P: ((P - Y) ** 2).sum(1).mean()
    return 2 * _forward(loss, Y_hat, 1.0) - _forward(loss, Y_hat, 2.0)


# The sixth read (2026-11-29): one-sided quotients exact for a quadratic pass, as cell 92 now says
ADMITTED = [(checks.check_ch03_output_delta, delta_by_central_difference_step_1),
            (checks.check_ch03_two_layer_backward, backward_dW2_by_central_difference_step_1),
            (checks.check_ch03_output_delta, delta_by_one_sided_second_order_step_1),
            (checks.check_ch03_output_delta, delta_by_one_sided_second_order_step_1e_3),
            (checks.check_ch03_output_delta, delta_by_richardson_of_forward_differences_step_1)]


@pytest.mark.parametrize("check, answer", ADMITTED, ids=[f.__name__ for _, f in ADMITTED])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_central_differences_where_the_loss_is_quadratic_pass_as_the_statements_say(check, answer,
                                                                                      seed, capsys):
    # L is quadratic in Ŷ and in W₂, so a central difference (or a one-sided quotient of second
    # order) there is exact up to rounding: values cannot refuse it, and the statements (cells 92
    # and 97) say it is not refused
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    check(answer, generator=generator)
    assert "passed" in capsys.readouterr().out


# The eighth read (2026-11-29): σ′ taken out of mathref's SiLU derivative is refused, while the
# tanh identity σ′(z) = tanh′(z/2)/4 is allowed, as the statement (cell 82) says
@pytest.mark.parametrize("answer", [ex.sigmoid_derivative_from_silu_grad,
                                    ex.sigmoid_derivative_from_silu_activation],
                         ids=["silu_grad", "get_activation_silu"])
def test_sigma_prime_from_the_silu_derivative_is_refused(answer):
    with pytest.raises(ExerciseCheckFailed, match="silu_grad"):
        checks.check_ch03_sigmoid_derivative(answer)


@pytest.mark.parametrize("answer", [lambda z: mnn.tanh_grad(z / 2) / 4,
                                    lambda z: mnn.get_activation("tanh")[1](z / 2) / 4],
                         ids=["tanh_grad", "get_activation_tanh"])
@pytest.mark.parametrize("seed", [None, 1])
def test_sigma_prime_from_the_tanh_derivative_passes_as_the_statement_says(answer, seed, capsys):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    checks.check_ch03_sigmoid_derivative(answer, generator=generator)
    assert "passed" in capsys.readouterr().out


# A slip in counting is named only when the answer follows it on a second case: dropping the last
# layer gives 27 on [4, 3, 3, 2], as the weights alone do, and must not be blamed on the biases
SLIPS = [(ex.count_without_biases, "the weights alone"), (ex.count_units, "the number of units"),
         (ex.count_bias_on_inputs, "not to its inputs")]


@pytest.mark.parametrize("answer, cause", SLIPS, ids=[f.__name__ for f, _ in SLIPS])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_a_counting_slip_is_named(answer, cause, seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed, match=cause):
        checks.check_ch03_parameter_count(answer, generator=generator)


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_a_dropped_last_layer_fails_without_a_wrong_cause(seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch03_parameter_count(ex.count_dropping_last_layer, generator=generator)
    message = str(failure.value)
    assert "got 27" in message
    assert not any(cause in message for _, cause in SLIPS)


# The ninth read (2026-11-30, M1): a complex step in Python's own complex numbers passes all three
# "without autograd" checks (nothing that runs sees it), as the three statements now disclose;
# float32 arithmetic in the sigmoid exercise is named as such (L1)
@pytest.mark.parametrize("label, answer", [(label, f) for label, fs in ex.DISCLOSED.items() for f in fs],
                         ids=[f.__name__ for fs in ex.DISCLOSED.values() for f in fs])
@pytest.mark.parametrize("seed", [None, 1])
def test_a_python_complex_step_passes_as_the_statements_disclose(label, answer, seed, capsys):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    checks.CHECKS[label](answer, generator=generator)
    assert "passed" in capsys.readouterr().out


def test_the_complex_step_in_torch_complex_tensors_stays_refused():
    with pytest.raises(ExerciseCheckFailed):
        checks.check_ch03_output_delta(ex.delta_by_complex_step)


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_sigmoid_derivative_in_float32_is_named(seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed, match="float32"):
        checks.check_ch03_sigmoid_derivative(ex.sigmoid_derivative_in_float32, generator=generator)


# The tenth read (2026-11-30, L2): the near miss names float32 only for float32 values and a
# difference quotient only for an error that changes sign; an added constant gets no cause
@pytest.mark.parametrize("answer", [ex.sigmoid_derivative_plus_eps, ex.sigmoid_derivative_plus_tiny_eps])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_sigmoid_derivative_plus_a_constant_fails_without_a_wrong_cause(answer, seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch03_sigmoid_derivative(answer, generator=generator)
    message = str(failure.value)
    assert "close but not exact" in message
    assert "float32" not in message and "difference quotient" not in message


@pytest.mark.parametrize("seed", [None, 1, 2])
def test_sigmoid_derivative_in_float32_is_not_blamed_on_a_difference_quotient(seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch03_sigmoid_derivative(ex.sigmoid_derivative_in_float32, generator=generator)
    assert "difference quotient" not in str(failure.value)


# The twelfth read (2026-11-30, L3): F.linear and torch.inner compute the products of the
# backward pass, as chapter 4's VJP exercise allows them; the notebook's check refused them
# (the grader accepted them), now both pass
@pytest.mark.parametrize("answer", [ex.backward_by_f_linear, ex.backward_by_torch_inner],
                         ids=["F.linear", "torch.inner"])
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_the_products_by_f_linear_or_torch_inner_pass(answer, seed, capsys):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    checks.check_ch03_two_layer_backward(answer, generator=generator)
    assert "passed" in capsys.readouterr().out


# The twelfth read (L2): δ₂ in float32 arithmetic cast back to float64 is named as float32, and
# neither blamed on a difference quotient nor on rows close to their targets (only the N = 6
# case has those)
@pytest.mark.parametrize("seed", [None, 1, 2])
def test_output_delta_in_float32_cast_back_is_named_as_float32(seed):
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch03_output_delta(ex.delta_in_float32_cast_back, generator=generator)
    message = str(failure.value)
    assert "float32" in message
    assert "difference quotient" not in message and "close to Y" not in message
