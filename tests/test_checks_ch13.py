"""Chapter 13's checkers: messages that name the right cause."""
import pytest

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises.ch13 import block_in_float32


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
