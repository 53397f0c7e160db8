"""Chapter 9's checkers name the cause of each wrong answer that an independent read found:
a softmax that subtracts the batch's maximum instead of each row's, flex_attention as a
shortcut, and the pairwise-distance exercise's clamp, formula and one-matrix-product rules."""
import pytest

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
    (wrong.unit_distances_direct, "broadcasts over all pairs"),
    (wrong.unit_distances_row_loop, "it loops over pairs or rows"),
])
def test_unit_distances_wrong_answers_are_named(answer, words, capsys):
    assert words in _message("ch09-unit-distance", answer, capsys)


def test_unit_distances_reference_passes(capsys):
    def unit_distances(U, V):
        return (2 - 2 * U @ V.T).clamp_min(0).sqrt()

    CHECKS["ch09-unit-distance"](unit_distances)
    assert "✅ ch09-unit-distance: passed" in capsys.readouterr().out
