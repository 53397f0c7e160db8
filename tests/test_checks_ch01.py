"""Chapter 1's checkers: right answers that pass, wrong ones that fail, and messages that name the
right cause (a fresh read of chapter 1, 2026-11-29)."""
import os
import subprocess
import sys
import textwrap

import pytest

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.conftest import ROOT
from tests.exercises import ch01 as wrong
from tests.notebooks import all_exercises, read, reference_answer

# In a fresh process torch._dynamo is not loaded yet, and the first torch.tensor under the
# gate's TorchFunctionMode imports it (with sympy and mpmath). The line budget of
# steps-to-tolerance used to count that import, over 200,000 lines, and rejected this right
# answer as "a loop over steps".
_FRESH_PROCESS = textwrap.dedent('''
    import math
    import sys
    import torch
    from mathref import checks
    from mathref.checks import ExerciseCheckFailed
    assert "torch._dynamo" not in sys.modules, "precondition: torch._dynamo not loaded yet"

    def with_torch_logs(x0, lr, tol):
        if abs(x0) <= tol:
            return 0
        r = abs(1 - 2 * lr)
        if r == 0:
            return 1
        if r >= 1:
            return math.inf
        q = torch.log(torch.tensor(tol / abs(x0), dtype=torch.float64)) \\
            / torch.log(torch.tensor(r, dtype=torch.float64))
        k = math.ceil(q.item())
        while k > 0 and abs(x0) * r ** (k - 1) <= tol:
            k -= 1
        while abs(x0) * r ** k > tol:
            k += 1
        return k

    checks.check_ch01_steps_to_tolerance(with_torch_logs)
    print("torch._dynamo imported during the check:", "torch._dynamo" in sys.modules)

    def loop_over_steps(x0, lr, tol):       # still stopped by the budget
        r = abs(1 - 2 * lr)
        if abs(x0) > tol and r >= 1:
            return math.inf
        size, k = abs(x0), 0
        while size > tol:
            size, k = size * r, k + 1
        return k

    try:
        checks.check_ch01_steps_to_tolerance(loop_over_steps)
    except ExerciseCheckFailed as failure:
        print("loop:", failure.message)
''')


def test_torch_logarithms_pass_in_a_fresh_process_and_a_loop_still_fails():
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "✅ ch01-steps-to-tolerance: passed" in run.stdout, run.stdout
    # (the path under test: the check itself set off the import)
    assert "torch._dynamo imported during the check: True" in run.stdout, run.stdout
    loop = run.stdout.split("loop: ", 1)[-1]
    assert "still running after 200,000 lines" in loop and "k = 19779055341" in loop, run.stdout


def _steps_failure(answer):
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_steps_to_tolerance(answer)
    return failure.value.message


def test_the_reference_solution_passes_the_new_ties(capsys):
    path = next(path for path, label in all_exercises() if label == "ch01-steps-to-tolerance")
    checks.check_ch01_steps_to_tolerance(reference_answer(read(path), "ch01-steps-to-tolerance"))
    assert "✅ ch01-steps-to-tolerance: passed" in capsys.readouterr().out


def test_base_two_logarithms_fail_the_tie_with_r_three_quarters():
    # the only tie used to have r = 1/2, where the quotient of log2's is exactly a whole number
    message = _steps_failure(wrong.steps_ceil_of_log2)
    assert message.startswith("x0=1.0, η=0.125, tol=0.421875: expected 3 steps, got 4"), message
    assert "equals tol exactly" in message and "log2" in message


def test_a_settle_that_only_steps_down_fails_one_unit_below_a_tie():
    message = _steps_failure(wrong.steps_settled_downward_only)
    assert message.startswith("x0=1.0, η=0.25, tol=0.031249999999999997: expected 6 steps, "
                              "got 5"), message
    assert "is 5.0, a whole number" in message and "epsilon" not in message


def test_a_strict_comparison_is_told_that_equality_counts():
    message = _steps_failure(wrong.steps_settled_with_strict_comparison)
    assert "expected 29 steps, got 30" in message and "equality included" in message, message


def test_a_missing_absolute_value_names_the_case():
    message = _steps_failure(wrong.steps_without_absolute_values)
    assert message.startswith("x0=3.0, η=0.9, tol=0.0001: your code raised ValueError"), message
    assert "1 − 2η = -0.8 is negative" in message


def test_float32_logarithms_are_named():
    message = _steps_failure(wrong.steps_float32_logs_settled)
    assert "float32 rounds to 1" in message and "float64" in message, message
