"""Chapter 13's checkers: messages that name the right cause."""
import pytest

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises.ch13 import (block_in_float32, dff_as_float, dff_float_ceil,
                                  dff_floor_rounded_up)


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
