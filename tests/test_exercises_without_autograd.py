"""Exercises whose statement says "without autograd" (chapters 2-4): a right answer that asks
autograd for the gradient must fail its checker, with a message that says why, while the
notebook's own hand-written solution passes (tests/test_exercises.py)."""
import importlib
import pkgutil

import pytest

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests import exercises

CHEATS = {}
for module in pkgutil.iter_modules(exercises.__path__):
    CHEATS.update(getattr(importlib.import_module(f"tests.exercises.{module.name}"),
                          "AUTOGRAD_CHEATS", {}))
CASES = [(label, i) for label, answers in sorted(CHEATS.items()) for i in range(len(answers))]
# every exercise whose statement says "without autograd" / "no autograd" in chapters 1-4
MUST_BE_ENFORCED = {"ch02-mse-gradient", "ch03-output-delta", "ch03-two-layer-backward",
                    "ch04-linear-tanh-vjp", "ch04-two-layer-jvp"}


def test_every_without_autograd_exercise_has_a_cheat_to_refuse():
    assert MUST_BE_ENFORCED <= set(CHEATS)


@pytest.mark.parametrize("label, index", CASES, ids=[f"{l}-cheat{i}" for l, i in CASES])
def test_autograd_answer_fails_with_a_reason(label, index, capsys):
    with pytest.raises(ExerciseCheckFailed, match="without autograd") as failure:
        CHECKS[label](CHEATS[label][index])
    assert failure.value.label == label
    assert "✅" not in capsys.readouterr().out


def test_autograd_is_restored_after_a_refused_call():
    import torch

    from mathref.checks.core import _FUNC_TRANSFORMS

    before = (torch.Tensor.backward, torch.autograd.grad, torch.autograd.backward,
              *(getattr(torch.func, name) for name in _FUNC_TRANSFORMS))
    for label, i in CASES:
        with pytest.raises(ExerciseCheckFailed):
            CHECKS[label](CHEATS[label][i])
    after = (torch.Tensor.backward, torch.autograd.grad, torch.autograd.backward,
             *(getattr(torch.func, name) for name in _FUNC_TRANSFORMS))
    assert all(a is b for a, b in zip(before, after))
    x = torch.ones(2, requires_grad=True)
    assert torch.func.grad(lambda t: (t * t).sum())(x.detach()).tolist() == [2.0, 2.0]


def test_picking_eigenvalues_is_allowed_and_a_complex_step_is_not():
    """Chapter 2's sixth read, L3: an answer that indexes torch.linalg.eigvals' complex result
    was refused as a complex step. Picking entries computes nothing and passes; arithmetic in
    complex numbers, even with an imaginary unit taken from an eigenvalue routine, is refused."""
    import torch

    from mathref.checks.core import CheckFailure, without_autograd

    H = torch.tensor([[2.0, 1.0], [1.0, 3.0]], dtype=torch.float64)
    picked = without_autograd(lambda H: max(torch.linalg.eigvals(H)[i].real.item() for i in (0, 1)))
    assert abs(picked(H) - torch.linalg.eigvalsh(H).max().item()) < 1e-12

    def step(x):      # Im f(x + ih)/h for f = exp, the imaginary unit from a rotation's eigenvalues
        i = torch.linalg.eigvals(torch.tensor([[0.0, -1.0], [1.0, 0.0]], dtype=torch.float64))[0]
        return (torch.exp(x + 1e-30 * i)).imag / 1e-30

    with pytest.raises(CheckFailure, match="complex-step"):
        without_autograd(step)(torch.tensor(0.5, dtype=torch.float64))
    with pytest.raises(CheckFailure, match="complex-step"):
        without_autograd(lambda x: torch.exp(x.to(torch.complex128) + 1e-30j).imag / 1e-30)(
            torch.tensor(0.5, dtype=torch.float64))
