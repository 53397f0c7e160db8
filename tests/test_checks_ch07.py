"""Chapter 7's checkers: the cause of an unconverged fixed-point iteration is named, and the
product of the (I + J_l) by torch's own chain-product routines is a correct answer."""
import pytest
import torch

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests.exercises import ch07 as wrong


def test_tanh_fixed_point_names_an_unconverged_iteration(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-tanh-fixed-point"](wrong.tanh_thirty_iterations)
    assert "✅" not in capsys.readouterr().out
    message = failure.value.message
    assert "not a fixed point yet" in message and "iterate until q stops changing" in message


def test_tanh_fixed_point_small_q_hint_is_kept(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-tanh-fixed-point"](wrong.tanh_small_q_expansion)
    assert "small-q expansion" in failure.value.message


@pytest.mark.parametrize("product", ["multi_dot", "chain_matmul"])
def test_residual_backward_accepts_chain_products(product, capsys):
    def residual_backward(jacobians, grad_out):
        eye = torch.eye(len(grad_out), dtype=grad_out.dtype)
        factors = [grad_out[None]] + [eye + J for J in reversed(jacobians)]
        if product == "multi_dot":
            return torch.linalg.multi_dot(factors)[0]
        return torch.chain_matmul(*factors)[0]

    CHECKS["ch07-residual-backward"](residual_backward)
    assert "✅" in capsys.readouterr().out


def test_tanh_fixed_point_names_the_post_activation_variance(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-tanh-fixed-point"](wrong.tanh_post_activation_variance)
    message = failure.value.message
    assert "pre-activation variance q" in message and "not a fixed point yet" not in message


def test_tanh_fixed_point_hint_names_a_cut_grid_among_its_causes(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-tanh-fixed-point"](wrong.tanh_grid_cut_at_four)
    message = failure.value.message
    assert "for example" in message and "tails" in message and "pre-activation variance" in message


@pytest.mark.parametrize("coupled", ["dropout_pair_coupled", "dropout_far_coupled"])
def test_inverted_dropout_refuses_coupled_masks(coupled, capsys):
    # each entry is kept with probability 1 − p and the counts look Binomial, but some pairs of
    # entries are correlated (0.25): the pooled correlation over all pairs of units finds them
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](getattr(wrong, coupled))
    assert "✅" not in capsys.readouterr().out
    assert "correlated" in failure.value.message or "kept together" in failure.value.message


def test_tanh_fixed_point_names_the_trivial_root(capsys):
    # q used as a standard deviation: the search collapses to q = 0, which is a fixed point, so
    # the message must not say "not a fixed point yet" (eighth read, L7)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-tanh-fixed-point"](wrong.tanh_q_as_std)
    message = failure.value.message
    assert "trivial fixed point q = 0" in message and "not a fixed point yet" not in message


@pytest.mark.parametrize("fixed", ["dropout_private_fixed_generator", "dropout_reseeds_global"])
def test_inverted_dropout_names_a_mask_repeated_on_every_call(fixed, capsys):
    # eighth read, L8: the mask is random across units but the same on every call
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](getattr(wrong, fixed))
    message = failure.value.message
    assert "same on every call" in message and "exact fraction" not in message


def test_inverted_dropout_coupled_rows_message_names_the_rows(capsys):
    # eighth read's L5 (seventh read): the same mask for each pair of rows couples examples, not units
    def paired_rows(x, p):
        flat = x.reshape(-1, x.shape[-1])
        keep = torch.rand((flat.shape[0] + 1) // 2, flat.shape[1], dtype=x.dtype) >= p
        keep = keep.repeat_interleave(2, dim=0)[:flat.shape[0]]
        return (flat * keep / (1 - p)).reshape(x.shape)

    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](paired_rows)
    assert "rows" in failure.value.message


def test_leaky_relu_init_refuses_a_table_of_rounded_slopes(capsys):
    # eighth read, L9: the drawn slope was rounded to 4 digits, so a 10,001-entry table of
    # PyTorch's gains built before the check held every input; the slope is no longer rounded
    import math

    table = {round(k * 1e-4, 4): torch.nn.init.calculate_gain("leaky_relu", round(k * 1e-4, 4))
             for k in range(10_001)}

    def leaky_relu_std(fan_in, negative_slope):
        return table[round(negative_slope, 4)] / math.sqrt(fan_in)

    with pytest.raises(ExerciseCheckFailed):
        CHECKS["ch07-leaky-relu-init"](leaky_relu_std)


def test_tanh_fixed_point_names_a_low_order_gauss_hermite_rule(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-tanh-fixed-point"](wrong.tanh_gauss_hermite_60)
    message = failure.value.message
    assert "60-node Gauss–Hermite" in message and "100 nodes" in message


def test_tanh_fixed_point_names_the_unsquared_gain(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-tanh-fixed-point"](wrong.tanh_gain_not_squared)
    assert "not squared" in failure.value.message


def test_inverted_dropout_refuses_a_numpy_mask_by_reseeding(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](wrong.dropout_numpy_mask)
    assert "torch.manual_seed" in failure.value.message


def test_inverted_dropout_names_nan_at_p_one(capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](wrong.dropout_nan_at_p_one)
    assert "p=1" in failure.value.message and "NaN" in failure.value.message


@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("name, words", [
    ("dropout_scales_positive_survivors", "on the negative entries"),
    ("dropout_drops_negatives", "negative entries of x should be zeroed"),
    ("dropout_never_drops_negatives", "negative entries of x should be zeroed"),
    ("dropout_p_in_tenths", "should be zeroed")])
def test_inverted_dropout_refuses_sign_dependent_and_rounded_masks_on_fresh_inputs(
        name, words, seed, capsys):
    """Eleventh read, M1 and L1: with all-positive inputs a dropout wrong on negative entries
    passed, and with p only 0.1, 0.5, 0.8 a keep probability rounded to tenths did; under the
    grader's generator too."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](getattr(wrong, name),
                                        generator=torch.Generator().manual_seed(seed))
    assert words in failure.value.message


def test_inverted_dropout_names_state_kept_between_calls(capsys):
    """Eleventh read: antithetic masks on alternate calls (u, then 1 − u) were refused with a
    message that named only NumPy's and Python's generators."""
    calls = []

    def antithetic(x, p):
        if p == 1:
            return torch.zeros_like(x)
        calls.append(None)
        u = torch.rand(x.shape, dtype=x.dtype)
        return x * ((u if len(calls) % 2 else 1 - u) >= p) / (1 - p)

    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](antithetic)
    assert "keeps state from one call to the next" in failure.value.message


@pytest.mark.parametrize("seed", [None, 11, 12, 13])
@pytest.mark.parametrize("name, words", [
    ("dropout_exact_fraction_on_negatives", "each unit must be kept independently"),
    ("dropout_by_magnitude", "must not depend on the size of x")])
def test_inverted_dropout_refuses_masks_that_look_at_x(name, words, seed, capsys):
    """Fifteenth read, L3: an exact fraction of the negative entries dropped, and a drop
    probability that depends on |x| through P₃, passed at every seed and in the grader."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](getattr(wrong, name), generator=generator)
    assert words in failure.value.message


@pytest.mark.parametrize("seed", [None, 11, 12, 13])
def test_inverted_dropout_blames_the_rounding_not_the_sign(seed, capsys):
    """Fifteenth read, L4a: a keep probability rounded to twentieths is off on both signs alike;
    on generator 12 the message blamed the sign of x."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](wrong.dropout_p_in_twentieths, generator=generator)
    message = failure.value.message
    assert "a fraction p of the entries should be zeroed" in message and "sign" not in message


@pytest.mark.parametrize("seed", [None, 11])
def test_inverted_dropout_blames_an_epsilon_not_float32(seed, capsys):
    """Fifteenth read, L4b: x·mask/(1 − p + 1e-8) was told its scale was rounded to float32."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](wrong.dropout_epsilon_in_scale, generator=generator)
    message = failure.value.message
    assert "float32" not in message and "exactly 1/(1 − p)" in message


def test_inverted_dropout_still_names_a_float32_scale(capsys):
    """The float32 hint is kept for a scale that is rounded to float32 (torch.tensor without dtype)."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](wrong.dropout_float32_scale_tensor)
    assert "rounded to float32" in failure.value.message


@pytest.mark.parametrize("seed", [None, 11, 12, 13])
@pytest.mark.parametrize("name", ["dropout_bin_orthogonal", "dropout_high_frequency",
                                  "dropout_bin_orthogonal_not_half", "dropout_high_frequency_not_half",
                                  "dropout_high_frequency_below_half",
                                  "dropout_high_frequency_unless_1000"])
def test_inverted_dropout_refuses_any_mask_that_looks_at_x(name, seed, capsys):
    """Fifteenth read's delta, N2: a drop probability that depends on |x| in a way orthogonal to
    the four quarter bins (or by the thousandths of |x|) passed at every seed and in the grader.
    Ninth read, L2: the same masks, honest at p = 0.5 only, passed the χ² test run at p = 0.5."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](getattr(wrong, name), generator=generator)
    assert "the mask must not look at x" in failure.value.message


@pytest.mark.parametrize("seed", [None, 11])
def test_inverted_dropout_names_an_epsilon_beyond_the_tight_tolerance(seed, capsys):
    """Delta read, N4: x·mask/(1 − p + 1e-6) was told 'x·1.111; got ratios like 1.111', with no hint."""
    generator = None if seed is None else torch.Generator().manual_seed(seed)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch07-inverted-dropout"](wrong.dropout_epsilon_1e6_in_scale, generator=generator)
    message = failure.value.message
    assert "exactly 1/(1 − p)" in message and "x·1.111111111; got ratios like 1.11110" in message
