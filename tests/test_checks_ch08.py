"""Chapter 8's BatchNorm-backward checker names each ε mistake and each statistic treated as a
constant (the sixth and seventh reads found three refused with a bare mismatch), the one-pass
variance (not finite differences) and n − 1 in the means (the eighth read)."""
import pytest

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests.exercises import ch08 as wrong


@pytest.mark.parametrize("answer, cause", [
    (wrong.bnb_without_eps, "ε is missing"),
    (wrong.bnb_eps_outside_the_root, "goes inside the square root"),
    (wrong.bnb_eps_missing_from_dx_scale, "ε is missing from the 1/s"),
    (wrong.bnb_sigma_constant, "σ depends on x too"),
    (wrong.bnb_mu_constant, "μ depends on x too"),
    (wrong.bnb_one_pass_variance, "mean(x²) − μ² cancels"),       # not "finite differences"
    (wrong.bnb_bessel_in_means, "n − 1 in place of n"),
    (wrong.bnb_dropped_one_over_n, "sums where the formula has means"),
    (wrong.bnb_finite_differences, "what float64 finite differences leave"),
])
def test_batch_norm_backward_names_the_eps_mistake(answer, cause, capsys):
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch08-batch-norm-backward"](answer)
    assert "✅" not in capsys.readouterr().out
    assert cause in failure.value.message, failure.value.message


@pytest.mark.parametrize("label, answer", [
    ("ch08-layer-norm", wrong.ln_one_pass_variance),
    ("ch08-running-stats", wrong.running_one_pass_variance),
])
def test_a_one_pass_variance_is_refused_and_named(label, answer, capsys):
    """The eighth read (L3, still open in the ninth): mean(x²) − μ² passed both forward exercises, while the backward
    exercise refused it; inputs far from 0 against their spread now catch it, with the cause."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[label](answer)
    assert "✅" not in capsys.readouterr().out
    assert "mean(x²) − μ² (or Σx² − nμ²), cancels there" in failure.value.message, failure.value.message
