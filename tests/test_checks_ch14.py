"""Chapter 14's checkers: right answers in the forms the course teaches pass, and a failure
names its cause."""
import pytest

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests.exercises import ch14
from tests.notebooks import NOTEBOOKS, read, reference_answer

CHAPTER = read(next(path for path in NOTEBOOKS if path.name == "14_gpt.ipynb"))
LABEL = "ch14-rope-decode-step"


@pytest.mark.parametrize("body", [ch14.COMPLEX_ROPE_DECODE, ch14.VIEW_AS_COMPLEX_ROPE_DECODE],
                         ids=["complex-polar", "view_as_complex"])
def test_rope_as_a_complex_product_passes(body, capsys):
    """The eighth read's M1: RoPE written with torch.complex/polar or view_as_complex (chapter
    12's method, and the checker's own reference) was refused as 'ran aten.complex'."""
    CHECKS[LABEL](reference_answer(CHAPTER, LABEL, body))
    assert f"✅ {LABEL}: passed" in capsys.readouterr().out


def test_complex_numbers_do_not_open_the_attention_shortcut():
    with pytest.raises(ExerciseCheckFailed, match="scaled_dot_product_attention"):
        CHECKS[LABEL](reference_answer(CHAPTER, LABEL, ch14.COMPLEX_ROPE_SDPA))


def test_adjacent_pairs_written_with_complex_numbers_get_the_layout_hint():
    """Before M1's fix this wrong answer failed on the refused operator, not on its mistake."""
    with pytest.raises(ExerciseCheckFailed, match="adjacent pairs") as failure:
        CHECKS[LABEL](ch14.rope_decode_adjacent)
    assert "does not allow" not in failure.value.message
