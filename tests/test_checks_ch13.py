"""Chapter 13's checkers: messages that name the right cause."""
from fractions import Fraction

import numpy as np
import pytest
import torch

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises.ch13 import (block_attention_residual_dropped, block_in_float32,
                                  block_norms_swapped, block_parallel, block_parallel_norm2,
                                  cross_transposed, cross_transposed_v_o, cross_transposed_q,
                                  cross_transposed_k, dff_always_equal,
                                  dff_as_float, dff_float_ceil, dff_floor_rounded_up)


def test_pre_norm_block_in_float32_is_rejected_for_its_dtype():
    # the diagnosis of common mistakes used to crash comparing float32 with float64, and the
    # student saw "your code raised RuntimeError" for an error that was not in their code
    with pytest.raises(ExerciseCheckFailed, match="your result is torch.float32") as err:
        checks.check_ch13_pre_norm_block(block_in_float32)
    assert "raised" not in err.value.message


def test_pre_norm_block_reference_passes(capsys):
    def pre_norm_block(x, attn, ffn, norm1, norm2):
        x = x + attn(norm1(x))
        return x + ffn(norm2(x))

    checks.check_ch13_pre_norm_block(pre_norm_block)
    assert "✅ ch13-pre-norm-block: passed" in capsys.readouterr().out


def test_swiglu_width_floor_rounded_up_fails_on_a_small_case_with_its_own_hint():
    # LLaMA's integer rounding of ⌊8d/3⌋ is off by one at (4, 1) (10 vs 11); it used to pass
    # every small case and fail only the huge one, blamed on floating-point division
    with pytest.raises(ExerciseCheckFailed, match="d_model=4, multiple_of=1: expected 11, got 10") as err:
        checks.check_ch13_swiglu_width(dff_floor_rounded_up)
    assert "⌊8·d_model/3⌋" in err.value.message and "floating-point" not in err.value.message


def test_swiglu_width_float_hint_only_for_the_float_result():
    with pytest.raises(ExerciseCheckFailed, match="floating-point division") as err:
        checks.check_ch13_swiglu_width(dff_float_ceil)
    assert "⌊8·d_model/3⌋" not in err.value.message
    # an exact integer returned as a float is not float division's rounding
    with pytest.raises(ExerciseCheckFailed, match="return an int") as err:
        checks.check_ch13_swiglu_width(dff_as_float)
    assert "floating-point" not in err.value.message


@pytest.mark.parametrize("answer", [
    # the ninth read's M1: at d = 3·2⁵⁰ + 1 these give 2⁵³, and 2⁵³ + 3 == a float32 2⁵³
    lambda d, m: torch.tensor(8 * d / (3 * m)).ceil() * m,
    lambda d, m: torch.ceil(torch.tensor(8 * d, dtype=torch.float32) / (3 * m)) * m,
    lambda d, m: np.ceil(np.float32(8 * d) / np.float32(3 * m)) * m,
    lambda d, m: torch.tensor(float(-(-8 * d // (3 * m)) * m), dtype=torch.float64),  # L3
])
def test_swiglu_width_refuses_a_float_of_any_precision(answer):
    with pytest.raises(ExerciseCheckFailed, match="return an int"):
        checks.check_ch13_swiglu_width(answer)


@pytest.mark.parametrize("answer", [lambda d, m: np.int64(-(-8 * d // (3 * m)) * m),
                                    lambda d, m: torch.tensor(-(-8 * d // (3 * m)) * m)])
def test_swiglu_width_accepts_integer_types(answer, capsys):
    checks.check_ch13_swiglu_width(answer)
    assert "✅ ch13-swiglu-width: passed" in capsys.readouterr().out


def test_the_quantizable_multihead_attention_is_refused_by_name():
    # the ninth read's L1: torch.ao's MultiheadAttention, written with F.linear and softmax
    from torch.ao.nn.quantizable import MultiheadAttention

    def cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed):
        mha = MultiheadAttention(W_q.shape[0], n_heads, bias=False, batch_first=True).double()
        return mha(y, memory, memory, key_padding_mask=~src_allowed, average_attn_weights=False)
    with pytest.raises(ExerciseCheckFailed, match="MultiheadAttention"):
        checks.check_ch13_cross_attention(cross_attention)


@pytest.mark.parametrize("answer", [block_parallel, block_parallel_norm2])
def test_pre_norm_block_names_the_parallel_block(answer):
    # the tenth read's L6: the parallel block of 13.11 failed with a bare difference
    with pytest.raises(ExerciseCheckFailed, match="parallel block") as err:
        checks.check_ch13_pre_norm_block(answer)
    assert "after attention's update" in err.value.message


@pytest.mark.parametrize("answer, cause", [
    (block_norms_swapped, "the norms are swapped"),
    (block_attention_residual_dropped, "attention's update is missing from the output")])
def test_pre_norm_block_names_swapped_norms_and_a_dropped_attention_residual(answer, cause):
    # the fifth read's L4: both were rejected with a bare difference and no cause
    with pytest.raises(ExerciseCheckFailed, match="largest difference") as err:
        checks.check_ch13_pre_norm_block(answer)
    assert cause in err.value.message


def test_swiglu_width_an_int_subclass_does_not_decide_the_comparison():
    # the tenth read's L7: an int subclass whose __eq__ is always True was accepted
    with pytest.raises(ExerciseCheckFailed, match="expected 11008, got 0"):
        checks.check_ch13_swiglu_width(dff_always_equal)


def test_swiglu_width_names_a_non_float_type_it_refuses():
    # the tenth read's N1: a Fraction was refused as "a float"
    with pytest.raises(ExerciseCheckFailed, match="not Fraction") as err:
        checks.check_ch13_swiglu_width(lambda d, m: Fraction(-(-8 * d // (3 * m)) * m))
    assert "float" not in err.value.message


@pytest.mark.parametrize("answer, where", [(cross_transposed, "attention weights differ"),
                                           (cross_transposed_v_o, "the weights are right"),
                                           # the delta read's N1: W_q or W_k alone
                                           (cross_transposed_q, "attention weights differ"),
                                           (cross_transposed_k, "attention weights differ")])
def test_cross_attention_names_the_transposed_weights(answer, where):
    # the twelfth read's L1: y @ W_q.T (nn.Linear's convention, used in section 13.4) was told
    # to check the scale, the head split and the mask, none of which was the cause
    with pytest.raises(ExerciseCheckFailed, match=where) as err:
        checks.check_ch13_cross_attention(answer)
    assert "nn.Linear" in err.value.message and "xW" in err.value.message
    assert "head split" not in err.value.message
