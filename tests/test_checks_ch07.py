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
