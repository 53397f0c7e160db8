"""Chapter 9's checkers name the cause of each wrong answer that an independent read found:
a softmax that subtracts the batch's maximum instead of each row's, flex_attention as a
shortcut, and the pairwise-distance exercise's clamp, formula and one-matrix-product rules."""
import re

import pytest
import torch

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests.exercises import ch09 as wrong


def _message(label, answer, capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[label](answer)
    assert "✅" not in capsys.readouterr().out
    return failure.value.message


def test_soft_lookup_refuses_the_batch_maximum_and_says_why(capsys):
    message = _message("ch09-soft-lookup", wrong.soft_lookup_global_max, capsys)
    assert "batch of 4 queries" in message and "largest score of each row" in message


def test_soft_lookup_refuses_flex_attention_by_name(capsys):
    def flex(query, keys, values, temperature):
        from torch.nn.attention.flex_attention import flex_attention
        q = query if query.dim() == 2 else query[None]
        out = flex_attention(q[None, None], keys[None, None], values[None, None],
                             scale=1 / temperature)[0, 0]
        return out if query.dim() == 2 else out[0]

    message = _message("ch09-soft-lookup", flex, capsys)
    assert "your solution called torch.nn.attention.flex_attention.flex_attention" in message


@pytest.mark.parametrize("answer, words", [
    (wrong.unit_distances_squared, "2 − 2c with c = u·v: that is the squared distance"),
    (wrong.unit_distances_plus, "√(2 + 2c)"),
    (wrong.unit_distances_no_clamp, "clamp it at 0 before the square root"),
    (wrong.unit_distances_direct, "coordinate by coordinate"),
    (wrong.unit_distances_row_loop, "it loops over pairs or rows"),
])
def test_unit_distances_wrong_answers_are_named(answer, words, capsys):
    assert words in _message("ch09-unit-distance", answer, capsys)


def test_unit_distances_reference_passes(capsys):
    def unit_distances(U, V):
        return (2 - 2 * U @ V.T).clamp_min(0).sqrt()

    CHECKS["ch09-unit-distance"](unit_distances)
    assert "✅ ch09-unit-distance: passed" in capsys.readouterr().out


# The fifth read's checker findings: each test runs the reference (it must pass) and the attack
# the read found (it must fail, with a message naming the cause).

def _unit_distances(U, V):
    return (2 - 2 * U @ V.T).clamp_min(0).sqrt()


def test_unit_distances_near_duplicates_refuse_rounding_small_distances_to_zero(capsys):
    def zero_small(U, V):                    # passed the float32 near-duplicate case alone
        D = _unit_distances(U, V)
        return torch.where(D < 2.5e-3, torch.zeros_like(D), D)

    message = _message("ch09-unit-distance", zero_small, capsys)
    assert "near-duplicates at distance ≈ 4e-5" in message and "got 0" in message


@pytest.mark.parametrize("answer, words", [
    (lambda U, V: (2 - 2 * U @ V.T).clamp_min(1e-12).sqrt(), "not at a positive floor"),
    (lambda U, V: _unit_distances(U.float(), V.float()), "your result is torch.float32"),
])
def test_unit_distances_floor_and_dtype_are_diagnosed(answer, words, capsys):
    message = _message("ch09-unit-distance", answer, capsys)
    assert words in message and "squared distance" not in message


def _mips_keys(keys):
    sq_norms = (keys * keys).sum(dim=-1, keepdim=True)
    return torch.cat([keys, (sq_norms.max() - sq_norms).clamp_min(0).sqrt()], dim=-1)


def test_mips_keys_reference_passes_and_float32_names_the_dtype(capsys):
    CHECKS["ch09-mips-to-nn"](_mips_keys)
    assert "✅ ch09-mips-to-nn: passed" in capsys.readouterr().out
    message = _message("ch09-mips-to-nn", lambda keys: _mips_keys(keys).float(), capsys)
    assert "your result is torch.float32" in message and "scaling them" not in message


def _soft_lookup(query, keys, values, temperature):
    return torch.softmax(query @ keys.T / temperature, dim=-1) @ values


def test_soft_lookup_reference_passes(capsys):
    CHECKS["ch09-soft-lookup"](_soft_lookup)
    assert "✅ ch09-soft-lookup: passed" in capsys.readouterr().out


def test_soft_lookup_names_an_input_modified_in_place(capsys):
    def divides_keys_in_place(query, keys, values, temperature):
        keys /= temperature
        return torch.softmax(query @ keys.T, dim=-1) @ values

    message = _message("ch09-soft-lookup", divides_keys_in_place, capsys)
    assert "modified its keys in place" in message


@pytest.mark.parametrize("threshold", [1e-2, 1e-1])
def test_soft_lookup_refuses_the_best_key_below_a_temperature(threshold, capsys):
    def hybrid(query, keys, values, temperature):
        scores = query @ keys.T
        if temperature < threshold:                    # the argmax limit for small τ ...
            return values[scores.argmax(-1)]
        e = torch.exp(scores / temperature)           # ... and the overflowing formula above it
        return (e / e.sum(-1, keepdim=True)) @ values

    message = _message("ch09-soft-lookup", hybrid, capsys)
    assert "τ = 1e-2 with scores near 10" in message


def test_float32_answers_to_cosine_and_soft_lookup_name_the_dtype(capsys):
    def cosine32(a, b, eps=1e-8):
        return ((a * b).sum(-1) / (a.norm(dim=-1).clamp_min(eps)
                                   * b.norm(dim=-1).clamp_min(eps))).float()

    assert "your result is torch.float32" in _message("ch09-cosine-from-dot", cosine32, capsys)
    message = _message("ch09-soft-lookup",
                       lambda q, K, V, t: _soft_lookup(q.float(), K.float(), V.float(), t), capsys)
    assert "your result is torch.float32" in message


# The sixth read's checker findings (the fifth's L1, L3 and L4, still present): an answer that
# changes its inputs is named as such, not as a wrong value; a loop over the coordinates and
# distances computed in Python are refused by what runs.

@pytest.mark.parametrize("label, answer, words", [
    ("ch09-cosine-from-dot", wrong.cosine_normalizes_in_place, "modified its argument a in place"),
    ("ch09-cosine-from-dot", wrong.cosine_then_zeroes_input, "modified its argument a in place"),
    ("ch09-unit-distance", wrong.unit_distances_then_zeroes_input,
     "modified its argument U in place"),
])
def test_an_input_modified_in_place_is_named(label, answer, words, capsys):
    message = _message(label, answer, capsys)
    assert words in message and "expected" not in message


@pytest.mark.parametrize("answer, words", [
    (wrong.unit_distances_coordinate_loop, "it loops over the coordinates"),
    (wrong.unit_distances_math_dist, "torch.Tensor.tolist"),
    (wrong.unit_distances_python_sum, "not computed from U and V by tensor operations"),
    (wrong.unit_distances_from_bytes, "not computed from U and V by tensor operations"),
])
def test_unit_distances_refuses_coordinate_loops_and_python_arithmetic(answer, words, capsys):
    assert words in _message("ch09-unit-distance", answer, capsys)


@pytest.mark.parametrize("answer", [
    lambda U, V: torch.sqrt(torch.clamp(2 - 2 * torch.einsum("id,jd->ij", U, V), min=0)),
    lambda U, V: (U @ V.T).mul_(-2).add_(2).clamp_(min=0).sqrt_(),       # in place on its own
    lambda U, V: (2 - 2 * (U.unsqueeze(1) @ V.T.unsqueeze(0)).squeeze(1)).clamp_min(0).sqrt(),
])
def test_unit_distances_other_matrix_product_forms_pass(answer, capsys):
    CHECKS["ch09-unit-distance"](answer)
    assert "✅ ch09-unit-distance: passed" in capsys.readouterr().out


# The ninth read's findings (2026-11-29): correct answers that the gate refused, a float32
# answer cast back blamed on a clamp's floor, and the distance kernels' aten twins, which only
# travel to the grader's worker by name.

@pytest.mark.parametrize("label, answer", [
    ("ch09-cosine-from-dot", lambda a, b, eps=1e-8: (a * b).sum(-1) / (
        torch.linalg.norm(a, dim=-1).clamp_min(eps) * torch.linalg.norm(b, dim=-1).clamp_min(eps))),
    ("ch09-soft-lookup", lambda q, K, V, t: torch.special.softmax(torch.inner(q, K) / t, -1) @ V),
    ("ch09-soft-lookup", lambda q, K, V, t: torch.softmax(
        torch.nn.functional.linear(q, K) / t, -1) @ V),
])
def test_correct_answers_by_other_names_pass(label, answer, capsys):
    CHECKS[label](answer)
    assert f"✅ {label}: passed" in capsys.readouterr().out


def test_mips_keys_by_linalg_norm_passes(capsys):
    def mips_keys(keys):
        n = torch.linalg.norm(keys, dim=-1, keepdim=True)
        return torch.cat([keys, (n.max() ** 2 - n ** 2).clamp_min(0).sqrt()], dim=-1)
    CHECKS["ch09-mips-to-nn"](mips_keys)
    assert "✅ ch09-mips-to-nn: passed" in capsys.readouterr().out


def test_unit_distances_in_float32_cast_back_is_named_as_such(capsys):
    message = _message("ch09-unit-distance", lambda U, V: (2 - 2 * (U.float() @ V.float().T))
                       .clamp_min(0).sqrt().to(U.dtype), capsys)
    assert "computed in float32" in message and "positive floor" not in message, message


def test_a_float32_cosine_gets_one_dtype_hint(capsys):
    def cosine(a, b, eps=1e-8):
        a, b = a.float(), b.float()
        return (a * b).sum(-1) / (a.norm(dim=-1).clamp_min(eps) * b.norm(dim=-1).clamp_min(eps))
    message = _message("ch09-cosine-from-dot", cosine, capsys)
    assert "your result is torch.float32" in message and "A difference this small" not in message


# The read at 18a970c, finding 3: the meter compared only the largest single tensor with
# n·m·d, so the broadcast difference split in pieces passed. It now bounds the numbers all the
# operations produce together, and the message does not state the bound.

def _halves(U, V):
    h = U.shape[1] // 2
    a = (U[:, None, :h] - V[None, :, :h]).pow(2).sum(-1)
    b = (U[:, None, h:] - V[None, :, h:]).pow(2).sum(-1)
    return (a + b).sqrt()


def _quarters(U, V):
    total = 0
    for u, v in zip(U.chunk(4, 1), V.chunk(4, 1)):
        total = total + (u[:, None] - v[None]).pow(2).sum(-1)
    return total.sqrt()


def _row_halves(U, V):
    n = U.shape[0] // 2
    return torch.cat([(U[:n, None] - V[None]).pow(2).sum(-1),
                      (U[n:, None] - V[None]).pow(2).sum(-1)]).sqrt()


def _single_coordinates(U, V):
    total = 0
    for k in range(U.shape[1]):
        total = total + (U[:, k, None] - V[None, :, k]).pow(2)
    return total.sqrt()


@pytest.mark.parametrize("answer", [_halves, _quarters, _row_halves])
def test_unit_distances_refuses_the_broadcast_difference_in_pieces(answer, capsys):
    message = _message("ch09-unit-distance", answer, capsys)
    assert "coordinate by coordinate" in message, message
    assert not re.search(r"\d{3}", message), message         # no count or bound is shown


def test_unit_distances_refuses_one_coordinate_at_a_time(capsys):
    message = _message("ch09-unit-distance", _single_coordinates, capsys)
    assert "loops over the coordinates" in message or "coordinate by coordinate" in message


@pytest.mark.parametrize("answer", [
    lambda U, V: torch.addmm(torch.full((U.shape[0], V.shape[0]), 2.0, dtype=U.dtype), U, V.T,
                             alpha=-2).clamp_min(0).sqrt(),
    lambda U, V: torch.relu(2 - 2 * U @ V.T).sqrt(),
    lambda U, V: 2 * torch.sin(torch.acos((U @ V.T).clamp(-1, 1)) / 2),
    lambda U, V: ((U * U).sum(-1)[:, None] + (V * V).sum(-1)[None] - 2 * U @ V.T)
    .clamp_min(0).sqrt(),
    # the delta read's medium: einsum's reshapes around its bmm counted as numbers produced
    lambda U, V: (torch.einsum("id,id->i", U, U)[:, None] + torch.einsum("jd,jd->j", V, V)[None]
                  - 2 * torch.einsum("id,jd->ij", U, V)).clamp_min(0).sqrt(),
    lambda U, V: (torch.bmm(U[:, None], U[:, :, None]).reshape(-1, 1)
                  + torch.bmm(V[:, None], V[:, :, None]).reshape(1, -1) - 2 * U @ V.T)
    .clamp_min(0).sqrt(),
])
def test_unit_distances_longer_matrix_product_forms_still_pass(answer, capsys):
    CHECKS["ch09-unit-distance"](answer)
    assert "✅ ch09-unit-distance: passed" in capsys.readouterr().out


# The read at 18a970c, L6: smoothing each norm (√(‖a‖² + ε²)) was blamed on clamping the product.

def test_cosine_mistakes_on_tiny_vectors_are_named_by_their_value(capsys):
    def product_clamped(a, b, eps=1e-8):
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)

    def smoothed(a, b, eps=1e-8):
        return ((a * b).sum(-1) / ((a * a).sum(-1) + eps ** 2).sqrt()
                / ((b * b).sum(-1) + eps ** 2).sqrt())

    message = _message("ch09-cosine-from-dot", product_clamped, capsys)
    assert "not their product" in message, message
    message = _message("ch09-cosine-from-dot", smoothed, capsys)
    assert "do not smooth" in message and "product" not in message, message


# The read at 81f456b, L1: the meter skipped every output whose schema marks it an alias (meant for
# einsum's views), and in-place and out= overloads return their written argument as one: the
# broadcast difference written into a buffer passed. Only aliases that do not write are free now.

@pytest.mark.parametrize("answer", [wrong.unit_distances_out_buffer,
                                    wrong.unit_distances_resized_buffer,
                                    wrong.unit_distances_products_out])
def test_unit_distances_refuses_the_difference_written_into_a_buffer(answer, capsys):
    assert "coordinate by coordinate" in _message("ch09-unit-distance", answer, capsys)


def test_unit_distances_in_place_on_the_distance_matrix_and_out_of_that_size_pass(capsys):
    def unit_distances(U, V):
        D = U.new_empty(0)
        torch.matmul(U, V.T, out=D)
        return D.mul_(-2).add_(2).clamp_min_(0).sqrt_()

    CHECKS["ch09-unit-distance"](unit_distances)
    assert "✅ ch09-unit-distance: passed" in capsys.readouterr().out


# The read at 81f456b, L2: the hint on two tiny vectors was chosen by the value alone, and blamed
# "the product" on each squared norm clamped at ε, and smoothing on the product of the squared
# norms clamped at ε. L3: ε added to each norm was told it computes in float32.

@pytest.mark.parametrize("answer, words, not_words", [
    (wrong.cosine_squared_norms_clamped, "each squared norm ‖a‖² at ε instead of ε²", "smooth"),
    (wrong.cosine_product_clamped, "the product ‖a‖‖b‖ clamped at ε", "smooth"),
    (wrong.cosine_squared_product_clamped, "product of the squared norms", "smooth"),
    (wrong.cosine_eps_added_to_each_norm, "(‖a‖ + ε)(‖b‖ + ε)", "float32"),
    (wrong.cosine_eps_added, "‖a‖‖b‖ + ε", "float32"),
    (wrong.cosine_eps_under_the_root, "√(‖a‖² + ε)·√(‖b‖² + ε)", "float32"),
])
def test_cosine_denominator_mistakes_are_named(answer, words, not_words, capsys):
    message = _message("ch09-cosine-from-dot", answer, capsys)
    assert words in message and not_words not in message, message


# The read at 81f456b, L5: attention compiled with TorchScript (which the function mode does not
# see) was refused by the operator it runs inside, aten._safe_softmax, without naming attention.
# Since chapter 13's read (M1) compiled TorchScript is refused as such, before it runs anything.

def test_soft_lookup_torchscript_attention_is_refused_as_torchscript(capsys):
    unit = torch.jit.CompilationUnit(
        "def f(q, K, V, t: float):\n"
        "    return torch.nn.functional.scaled_dot_product_attention(q, K, V, scale=1.0 / t)\n")

    def soft_lookup(query, keys, values, temperature):
        if query.dim() == 1:
            return unit.f(query[None], keys, values, temperature)[0]
        return unit.f(query, keys, values, temperature)

    message = _message("ch09-soft-lookup", soft_lookup, capsys)
    assert "compiled TorchScript" in message, message
