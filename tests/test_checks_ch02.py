"""Chapter 2's checkers: messages that name the right cause, and verdicts that follow the
statements (a fresh read of chapter 2, 2026-11-29)."""
import pytest

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises.ch02 import direction_as_list, grad_b_as_list


@pytest.mark.parametrize("check, answer, name", [
    (checks.check_ch02_steepest_descent, direction_as_list, "direction"),
    (checks.check_ch02_mse_gradient, grad_b_as_list, "grad_b")])
def test_a_list_is_reported_as_a_list(check, answer, name):
    # the checker used to read .dtype off the answer in a message before its type check, and
    # the student saw "your code raised AttributeError" for an error that was not in their code
    with pytest.raises(ExerciseCheckFailed, match="expected a torch.Tensor, got list") as err:
        check(answer)
    assert name in err.value.message and "raised" not in err.value.message
