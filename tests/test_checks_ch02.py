"""Chapter 2's checkers: messages that name the right cause, and verdicts that follow the
statements (a fresh read of chapter 2, 2026-11-29)."""
import pytest

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises.ch02 import (direction_as_list, grad_b_as_list, lr_two_over_trace,
                                 normal_equations_det64, normal_equations_eigh64,
                                 normal_equations_lu64)


@pytest.mark.parametrize("check, answer, name", [
    (checks.check_ch02_steepest_descent, direction_as_list, "direction"),
    (checks.check_ch02_mse_gradient, grad_b_as_list, "grad_b")])
def test_a_list_is_reported_as_a_list(check, answer, name):
    # the checker used to read .dtype off the answer in a message before its type check, and
    # the student saw "your code raised AttributeError" for an error that was not in their code
    with pytest.raises(ExerciseCheckFailed, match="expected a torch.Tensor, got list") as err:
        check(answer)
    assert name in err.value.message and "raised" not in err.value.message


@pytest.mark.parametrize("answer", [normal_equations_lu64, normal_equations_eigh64,
                                    normal_equations_det64])
def test_normal_equations_by_lu_eigh_or_det_fail_the_ill_conditioned_case(answer):
    # the statement says LU, an eigendecomposition and Cramer's rule run and miss the
    # ill-conditioned float64 case: the gate lets them run, the accuracy check fails them
    with pytest.raises(ExerciseCheckFailed, match="ill-conditioned float64 problem") as err:
        checks.check_ch02_least_squares(answer)
    assert "your solution" not in err.value.message


def test_two_over_the_trace_is_told_the_number_not_the_operator():
    with pytest.raises(ExerciseCheckFailed, match="expected 0.269741") as err:
        checks.check_ch02_max_stable_lr(lr_two_over_trace)
    assert "your solution" not in err.value.message
