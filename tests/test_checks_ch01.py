"""Chapter 1's checkers: right answers that pass, wrong ones that fail, and messages that name the
right cause (a fresh read of chapter 1, 2026-11-29)."""
import importlib
import os
import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

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
    # (the path under test: the check itself set off the import. It does on the pinned torch;
    # older ones, such as the floor the canary tests, do not import torch._dynamo there, and
    # the right answer must pass all the same)
    pinned = next(line.split("==")[1].strip() for line in (ROOT / "requirements.txt").open()
                  if line.startswith("torch=="))
    if torch.__version__.split("+")[0] == pinned:
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


# An optimizer's step wraps itself, at the first construction of its class, in a profiler label
# (torch.autograd.profiler.record_function). The gate used to refuse that label before the
# named refusal of the step was reached: "ran __init__ (from torch.autograd.profiler
# (autograd))" or "ran the PyTorch operator aten._record_function_enter_new". Only a process
# where no optimizer was built yet shows it.
_OPTIMIZERS_FRESH = textwrap.dedent('''
    import torch
    from mathref import checks
    from mathref.checks import ExerciseCheckFailed

    def sgd_loop(df, x0, lr, steps):
        p = torch.nn.Parameter(torch.tensor(float(x0), dtype=torch.float64))
        opt, xs = torch.optim.SGD([p], lr=lr), [x0]
        for _ in range(steps):
            p.grad = torch.tensor(df(p.item()), dtype=torch.float64)
            opt.step()
            xs.append(p.item())
        return xs

    def search_with(optimizer):
        def best_constant_step(H):
            lam = torch.linalg.eigvalsh(H)
            eta = torch.tensor(0.01, dtype=torch.float64)
            opt = optimizer([eta], lr=1e-4)
            for _ in range(10):
                eta.grad = torch.sign(eta * (lam[0] + lam[-1]) - 2)
                opt.step()
            return eta.item(), 0.0
        return best_constant_step

    def autograd_search(H):
        lam = torch.linalg.eigvalsh(H)
        with torch.inference_mode(False):
            eta = torch.tensor(0.01, dtype=torch.float64, requires_grad=True)
            (1 - eta * lam).abs().max().backward()
        return eta.item(), 0.0

    for name, check, answer in (
            ("loop", checks.check_ch01_gradient_descent_loop, sgd_loop),
            ("sgd", checks.check_ch01_best_constant_step, search_with(torch.optim.SGD)),
            ("adam", checks.check_ch01_best_constant_step, search_with(torch.optim.Adam)),
            ("autograd", checks.check_ch01_best_constant_step, autograd_search)):
        try:
            check(answer)
            print(name, "PASSED")
        except ExerciseCheckFailed as failure:
            print(name, "|", failure.message)
''')


def test_an_optimizer_is_refused_by_its_name_in_a_fresh_process():
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    run = subprocess.run([sys.executable, "-c", _OPTIMIZERS_FRESH], env=env, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = dict(line.split(" | ", 1) for line in run.stdout.splitlines() if " | " in line)
    assert lines.get("loop", "").startswith("your solution called torch.optim.SGD.step, which "
                                            "ch01-gradient-descent-loop does not allow"), run.stdout
    assert lines.get("sgd", "").startswith("your solution called torch.optim.SGD.step"), run.stdout
    assert lines.get("adam", "").startswith("your solution called torch.optim.Adam.step"), run.stdout
    # best-constant-step asks for no gradient: its autograd refusal says what it asks for
    assert "not for a search for η by autograd" in lines.get("autograd", ""), run.stdout
    assert "gradient by hand" not in lines["autograd"]


@pytest.mark.parametrize("check, answer, start", [
    (checks.check_ch01_central_difference, wrong.central_difference_float32,
     "d/dx x³ at x=-1.5 with h=0.1: expected 6.76, got 6.760001"),
    (checks.check_ch01_gradient_descent_loop, wrong.gd_float32,
     "x_1 for x0=3.0, lr=0.1: expected 2.4, got 2.400000")])
def test_a_float32_result_is_told_its_dtype(check, answer, start):
    # the result used to become a Python float before the comparison could see its dtype
    with pytest.raises(ExerciseCheckFailed) as failure:
        check(answer)
    assert failure.value.message.startswith(start), failure.value.message
    assert "your result is torch.float32" in failure.value.message


def test_an_accumulated_gradient_is_named():
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_gradient_descent_loop(wrong.gd_accumulated_gradient)
    message = failure.value.message
    assert message.startswith("x_2 for x0=3.0, lr=0.1: expected 1.92, got 1.32"), message
    assert "sum of all the gradients" in message


def test_a_loop_one_step_short_is_told_the_last_iterate_is_missing():
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_gradient_descent_loop(wrong.gd_one_step_short)
    message = failure.value.message
    assert message.startswith("with steps=10 expected 11 iterates (x_0 included), got 10"), message
    assert "one step short" in message and "x_10 is missing" in message
    assert "must start with x0" not in message
    with pytest.raises(ExerciseCheckFailed) as failure:      # the list that leaves x0 out is told so
        checks.check_ch01_gradient_descent_loop(wrong.gd_missing_start)
    assert "the list must start with x0 itself" in failure.value.message, failure.value.message


def test_the_derivative_plus_h_squared_is_not_the_central_difference():
    # exact on x³, where the quotient is 3x² + h²; exp at h = 0.1 tells them apart
    with pytest.raises(ExerciseCheckFailed, match="the central difference of exp at x=0.3"):
        checks.check_ch01_central_difference(wrong.central_derivative_plus_h_squared)


def test_special_cases_in_the_wrong_order_fail():
    message = _steps_failure(wrong.steps_special_cases_in_wrong_order)
    assert message.startswith("x0=0.5, η=0.5, tol=1.0: expected 0 steps, got 1"), message
    assert "|x0| ≤ tol already" in message


def test_a_recursion_once_per_step_is_told_so_not_that_it_replaced_a_hook():
    # the 2·10¹⁰-step case raises RecursionError inside the gate's profile hook, which CPython
    # then removes: the gate used to report that as "ran sys.setprofile"
    message = _steps_failure(wrong.steps_by_recursion)
    assert message.startswith("x0=1.0, η=5.820766091346741e-11, tol=0.1: your function stopped "
                              "with a RecursionError (here k = 19779055341)"), message
    assert "setprofile" not in message and "hook" not in message


def test_a_refusal_that_is_no_recursion_keeps_its_message():
    message = _steps_failure(wrong.steps_by_running_descent)
    assert "still running after 200,000 lines" in message and "Recursion" not in message


# Cell 63's statement: NumPy's functions, fractions and decimal's methods are refused; NumPy's
# ufuncs, NumPy scalars and Decimal numbers under operators are not (the gate sees calls, not
# arithmetic inside C types). Both halves are tested, so the statement stays true.
def _np_mean(f, x, h):
    import numpy as np
    return float(np.mean([f(x + h) / h, -f(x - h) / h]))


def _fractions(f, x, h):
    from fractions import Fraction
    return float((Fraction(f(x + h)) - Fraction(f(x - h))) / (2 * Fraction(h)))


def _decimal_method(f, x, h):
    from decimal import Decimal
    return float((Decimal(f(x + h)) - Decimal(f(x - h))).fma(1, 0) / (2 * Decimal(h)))


def _np_ufunc(f, x, h):
    import numpy as np
    return float(np.subtract(f(x + h), f(x - h)) / (2 * h))


def _np_scalar(f, x, h):
    import numpy as np
    return float((np.float64(f(x + h)) - f(x - h)) / (2 * h))


def _decimal_operators(f, x, h):
    from decimal import Decimal
    return float((Decimal(f(x + h)) - Decimal(f(x - h))) / (2 * Decimal(h)))


@pytest.mark.parametrize("answer, named", [(_np_mean, "numpy"), (_fractions, "fractions"),
                                           (_decimal_method, "decimal")])
def test_what_the_exercise_statement_says_is_refused_is_refused(answer, named):
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_central_difference(answer)
    assert "does not allow" in failure.value.message and named in failure.value.message


@pytest.mark.parametrize("answer", [_np_ufunc, _np_scalar, _decimal_operators])
def test_what_the_exercise_statement_says_is_not_refused_passes(answer, capsys):
    checks.check_ch01_central_difference(answer)
    assert "✅ ch01-central-difference: passed" in capsys.readouterr().out


def test_a_numpy_float32_result_is_told_its_dtype():
    # the read's NumPy float32 scalar used to get a bare "expected 6.76, got 6.760001183"
    def central_numpy_float32(f, x, h):
        import numpy as np
        return (f(np.float32(x + h)) - f(np.float32(x - h))) / np.float32(2 * h)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_central_difference(central_numpy_float32)
    message = failure.value.message
    assert message.startswith("d/dx x³ at x=-1.5 with h=0.1: expected 6.76, got 6.760001"), message
    assert "your result is a NumPy float32" in message


def test_a_strict_first_test_is_told_its_comparison_not_its_order():
    # it used to be told to "test that before the cases of η", which it does
    message = _steps_failure(wrong.steps_strict_first_test)
    assert message.startswith("x0=-0.5, η=1.5, tol=0.5: expected 0 steps, got inf"), message
    assert "strict <" in message and "before the cases of η" not in message


@pytest.mark.parametrize("answer", [wrong.steps_settled_with_strict_comparison,
                                    wrong.steps_floor_plus_one])
def test_one_too_many_at_every_tie_is_not_blamed_on_rounding(answer):
    # a clean tie (x0 = 1, η = 0.25, tol = 0.25: the logarithms' quotient is exactly 2.0) tells
    # a rule that counts one too many apart from a ceiling of rounded logarithms
    message = _steps_failure(answer)
    assert "expected 29 steps, got 30" in message and "equality included" in message, message
    assert "rounding is not the cause" in message and "a ceiling of it alone" not in message


def test_a_ceiling_of_rounded_logarithms_is_still_told_about_rounding():
    message = _steps_failure(wrong.steps_ceil_of_logs)
    assert "a ceiling of it alone is one too many" in message, message
    assert "rounding is not the cause" not in message


def test_a_table_of_answers_keyed_by_the_trace_fails_under_the_graders_generator(capsys):
    # read 7's carried L6: the fixed eigenvalues made the trace a key to the answer
    table = {}

    def recording(H):
        lam = torch.linalg.eigvalsh(H)
        lo, hi = float(lam[0]), float(lam[-1])
        table[round(float(H.diagonal().sum()), 6)] = (2 / (lo + hi), (hi - lo) / (hi + lo))
        return table[round(float(H.diagonal().sum()), 6)]

    def lookup(H):
        return table[round(float(H.diagonal().sum()), 6)]

    checks.check_ch01_best_constant_step(recording)
    checks.check_ch01_best_constant_step(lookup)              # the notebook's inputs: passes
    assert capsys.readouterr().out.count("✅ ch01-best-constant-step: passed") == 2
    for seed in (12345, 2026):
        with pytest.raises(ExerciseCheckFailed, match="KeyError"):
            checks.check_ch01_best_constant_step(lookup, generator=torch.Generator().manual_seed(seed))
        checks.check_ch01_best_constant_step(recording, generator=torch.Generator().manual_seed(seed))


def _best_step_from(extremes):
    def best_constant_step(H):
        lo, hi = extremes(H)
        return 2 / (lo + hi), (hi - lo) / (hi + lo)
    return best_constant_step


def test_a_right_rate_passes_when_the_drawn_rotation_is_close_to_the_axes(capsys):
    # under generator seeds 22 and 50 the 2-D H with eigenvalues 1 and 25 has a diagonal within
    # 1e-6 of them: the "ρ from the diagonal" diagnosis used to refuse the right ρ there
    answer = _best_step_from(lambda H: (torch.linalg.eigvalsh(H)[0].item(),
                                        torch.linalg.eigvalsh(H)[-1].item()))
    for seed in (22, 50):
        checks.check_ch01_best_constant_step(answer, generator=torch.Generator().manual_seed(seed))
    assert capsys.readouterr().out.count("✅ ch01-best-constant-step: passed") == 2


# Exercise 4's statement: eigh, eigvals, svdvals and matrix_norm are allowed, torch.linalg.cond not
@pytest.mark.parametrize("extremes", [
    lambda H: (torch.linalg.eigh(H)[0][0].item(), torch.linalg.eigh(H)[0][-1].item()),
    lambda H: (torch.linalg.eigvals(H).real.min().item(), torch.linalg.eigvals(H).real.max().item()),
    lambda H: (torch.linalg.svdvals(H)[-1].item(), torch.linalg.svdvals(H)[0].item()),
    lambda H: (torch.linalg.matrix_norm(H, -2).item(), torch.linalg.matrix_norm(H, 2).item())])
def test_the_routines_the_statement_allows_pass(extremes, capsys):
    checks.check_ch01_best_constant_step(_best_step_from(extremes))
    assert "✅ ch01-best-constant-step: passed" in capsys.readouterr().out


def test_torch_linalg_cond_is_refused_as_the_statement_says():
    def with_cond(H):
        lam = torch.linalg.eigvalsh(H)
        kappa = torch.linalg.cond(H).item()
        return 2 / (lam[0].item() + lam[-1].item()), (kappa - 1) / (kappa + 1)
    with pytest.raises(ExerciseCheckFailed, match="linalg_cond"):
        checks.check_ch01_best_constant_step(with_cond)


# Read 8's L1 and L2: PyTorch's own central difference and SGD in other forms. Each computes the
# right numbers outside the check (asserted first, so the refusal is what fails it) and must be
# refused by name inside it.
_GRADCHECK = importlib.import_module("torch.autograd.gradcheck")


def _first(value):
    while not isinstance(value, torch.Tensor):
        value = value[0]
    return value.reshape(-1)[0].item()


def _as_tensor_fn(f):
    return lambda u: torch.tensor(f(u.item()), dtype=torch.float64)


def _cd_private(f, x, h):
    t = torch.tensor(float(x), dtype=torch.float64, requires_grad=True)
    return _first(_GRADCHECK._get_numerical_jacobian(_as_tensor_fn(f), (t,), eps=h))


def _cd_deprecated_public(f, x, h):
    t = torch.tensor(float(x), dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return _first(_GRADCHECK.get_numerical_jacobian(
            lambda inputs: _as_tensor_fn(f)(inputs[0]), (t,), eps=h))


def _cd_quotient_helper(f, x, h):
    t = torch.tensor([float(x)], dtype=torch.float64)
    return _first(_GRADCHECK._compute_numerical_gradient(
        lambda: (_as_tensor_fn(f)(t),), t, torch.full([1], h, dtype=torch.float64), h,
        lambda a, b: None))


def _cd_jvp_helper(f, x, h):
    t = torch.tensor([float(x)], dtype=torch.float64)
    jvp = _GRADCHECK._get_numerical_jvp_fn(lambda: (_as_tensor_fn(f)(t),), t, h,
                                           lambda a, b: None)
    return _first(jvp(torch.full([1], h, dtype=torch.float64)))


@pytest.mark.parametrize("answer, named", [
    (_cd_private, "torch.autograd.gradcheck._get_numerical_jacobian"),
    (_cd_deprecated_public, "torch.autograd.gradcheck.get_numerical_jacobian"),
    (_cd_quotient_helper, "torch.autograd.gradcheck._compute_numerical_gradient"),
    (_cd_jvp_helper, "torch.autograd.gradcheck._get_numerical_jvp_fn")])
def test_pytorchs_own_central_difference_is_refused(answer, named, capsys):
    for x, h in ((-1.5, 0.1), (0.3, 0.01)):
        want = ((x + h) ** 3 - (x - h) ** 3) / (2 * h)
        assert abs(answer(lambda t: t ** 3, x, h) - want) <= 1e-12 * max(1.0, abs(want))
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_central_difference(answer)
    assert failure.value.message.startswith(f"your solution called {named}, which "
                                            f"ch01-central-difference does not allow"), \
        failure.value.message
    assert "✅" not in capsys.readouterr().out


def _sgd_kernel(kernel):
    def gradient_descent_1d(df, x0, lr, steps):
        sgd = importlib.import_module("torch.optim.sgd")
        p, xs = torch.tensor(float(x0), dtype=torch.float64), [x0]
        for _ in range(steps):
            g = torch.tensor(df(p.item()), dtype=torch.float64)
            getattr(sgd, kernel)([p], [g], [None], grad_scale=None, found_inf=None,
                                 weight_decay=0.0, momentum=0.0, lr=lr, dampening=0.0,
                                 nesterov=False, maximize=False, has_sparse_grad=False)
            xs.append(p.item())
        return xs
    return gradient_descent_1d


def _asgd_as_sgd(df, x0, lr, steps):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)         # ASGD keeps η in the default dtype
    try:
        p = torch.nn.Parameter(torch.tensor(float(x0), dtype=torch.float64))
        opt, xs = torch.optim.ASGD([p], lr=lr, lambd=0, alpha=0, t0=1e12), [x0]
        for _ in range(steps):
            p.grad = torch.tensor(df(p.item()), dtype=torch.float64)
            opt.step()
            xs.append(p.item())
        return xs
    finally:
        torch.set_default_dtype(old)


@pytest.mark.parametrize("answer, named", [
    (_sgd_kernel("_single_tensor_sgd"), "torch.optim.sgd._single_tensor_sgd"),
    (_sgd_kernel("_multi_tensor_sgd"), "torch.optim.sgd._multi_tensor_sgd"),
    (_asgd_as_sgd, "torch.optim.ASGD.step")])
def test_sgd_in_other_forms_is_refused_by_the_loop_exercise(answer, named, capsys):
    df = lambda x: 4 * (x - 2) ** 3 + 2 * x
    got, x = answer(df, 0.5, 0.02, 25), 0.5
    for k in range(26):
        assert abs(got[k] - x) <= 1e-12, (k, got[k], x)
        x = x - 0.02 * df(x)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_gradient_descent_loop(answer)
    assert failure.value.message.startswith(f"your solution called {named}, which "
                                            f"ch01-gradient-descent-loop does not allow"), \
        failure.value.message
    assert "✅" not in capsys.readouterr().out


def test_an_upward_settle_without_abs_on_r_fails_one_unit_below_a_tie():
    # read 8's L3: with 1 − 2η = −1/2 the power at the odd k = 5 is negative, so the settle keeps
    # 5; the answer is 6 (the read's second case, 2⁻⁷(1 − 2⁻⁵³), gives 7 for 8 the same way)
    assert wrong.steps_settled_up_without_abs(1.0, 0.75, 2.0 ** -7 * (1 - 2.0 ** -53)) == 7
    message = _steps_failure(wrong.steps_settled_up_without_abs)
    assert message.startswith("x0=1.0, η=0.75, tol=0.031249999999999997: expected 6 steps, "
                              "got 5"), message
    assert "1 − 2η = -0.5 is negative and k = 5 odd" in message, message


def test_best_constant_step_names_a_negative_rate_and_a_wrong_pair():
    """The ninth read's L2: eigvals does not sort; its first and last eigenvalues swapped give a
    negative ρ, and in 3-D a pair that is not (λ_min, λ_max); both used to get a bare mismatch."""
    def swapped(H):
        lam = torch.linalg.eigvalsh(H)
        eta = 2 / float(lam[0] + lam[-1])
        return eta, 1 - eta * float(lam[-1])
    with pytest.raises(ExerciseCheckFailed, match="an absolute value lost, or λ_min"):
        checks.check_ch01_best_constant_step(swapped)

    def middle_pair(H):
        lam = torch.linalg.eigvalsh(H)
        if len(lam) < 3:
            eta = 2 / float(lam[0] + lam[-1])
            return eta, abs(1 - eta * float(lam[0]))
        eta = 2 / float(lam[0] + lam[1])
        return eta, abs(1 - eta * float(lam[0]))
    with pytest.raises(ExerciseCheckFailed, match="not the smallest and the largest"):
        checks.check_ch01_best_constant_step(middle_pair)


def test_a_float32_loop_returning_python_floats_is_told_float32():
    """The tenth read's L2: torch.tensor(x0) is float32, and .item() hides the dtype; the miss
    used to get a bare "expected 2.4, got 2.400000095"."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_gradient_descent_loop(wrong.gd_float32_items)
    message = failure.value.message
    assert message.startswith("x_1 for x0=3.0, lr=0.1: expected 2.4, got 2.400000"), message
    assert "size of float32 rounding" in message and "torch.tensor(x0) is float32" in message


def test_a_search_that_stops_at_a_tolerance_is_told_so_not_that_eigvals_does_not_sort():
    """The tenth read's L1: the pair check counted (λ_min, λ_max) itself, so an η within 1e-6 of
    η* was told that eigvals does not sort (self-contradictory in 2-D)."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_best_constant_step(wrong.step_by_ternary_search)
    message = failure.value.message
    assert "a search over η that stops at a grid spacing or a tolerance" in message, message
    assert "does not sort" not in message, message

    def near_miss(H):             # η*·(1 + 3·10⁻⁷), the read's second case
        lam = torch.linalg.eigvalsh(H)
        eta = 2 / float(lam[0] + lam[-1]) * (1 + 3e-7)
        return eta, max(abs(1 - eta * float(v)) for v in lam)
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_best_constant_step(near_miss)
    assert "does not sort" not in failure.value.message, failure.value.message
    assert "stops at a grid spacing or a tolerance" in failure.value.message


def test_two_over_the_trace_gets_the_trace_hint_and_the_trace_is_allowed(capsys):
    """The twelfth read's L1: torch.trace was outside the allowance, so 2/tr(H) (a wrong answer,
    not a shortcut) got a refusal naming aten.trace instead of the checker's own hint, whose
    refusal message also listed reductions as allowed; and a right answer that evaluated
    torch.trace on the side was refused. As ch02-max-stable-lr, the trace is allowed."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_best_constant_step(wrong.step_from_trace)
    message = failure.value.message
    assert "= 2/tr(H): the trace sums all eigenvalues" in message, message
    assert "your solution" not in message and "aten.trace" not in message, message

    def right_with_trace(H):
        lam = torch.linalg.eigvalsh(H)
        lo, hi = lam[0].item(), lam[-1].item()
        assert torch.trace(H).item() >= hi               # tr H ≥ λ_max: a bound, looked at
        return 2 / (lo + hi), (hi - lo) / (hi + lo)
    checks.check_ch01_best_constant_step(right_with_trace)
    assert "✅ ch01-best-constant-step: passed" in capsys.readouterr().out


@pytest.mark.parametrize("answer", [wrong.central_difference_float32_items,
                                    wrong.central_difference_float32_float])
def test_a_float32_central_difference_returned_as_a_float_is_told_float32(answer):
    """The twelfth read's L2 (half of the earlier L7): float32, as torch.tensor(x) makes it, then
    .item() or float(), used to get a bare "expected 6.76, got 6.760001183"."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        checks.check_ch01_central_difference(answer)
    message = failure.value.message
    assert message.startswith("d/dx x³ at x=-1.5 with h=0.1: expected 6.76, got 6.760001"), message
    assert "size of float32 rounding" in message and "compute in float64" in message, message
