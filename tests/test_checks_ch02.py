"""Chapter 2's checkers: messages that name the right cause, and verdicts that follow the
statements (a fresh read of chapter 2, 2026-11-29)."""
from pathlib import Path

import pytest

from mathref import checks
from mathref.checks import ExerciseCheckFailed
import torch

from tests.exercises.ch02 import (direction_as_list, grad_b_as_list, grad_divided_by_d,
                                 grad_over_d_not_n, least_squares_classical_gram_schmidt,
                                 least_squares_modified_gram_schmidt, lr_hessian_without_two,
                                 lr_n_minus_one, lr_two_over_trace, max_lr_by_func_hessian,
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
    # the third read's L3 (mathref/checks/allowances.py says the checker names this slip):
    # it used to get the two numbers only
    assert "2/tr H: the trace is the sum of all the eigenvalues" in err.value.message


# A third read of chapter 2 (L2, L3, L4, N1)
@pytest.mark.parametrize("answer, cause", [
    (grad_divided_by_d, "divided by d = 4"),
    (grad_over_d_not_n, "L divides by N = 5")])
def test_a_division_by_d_is_not_called_a_missing_factor_two(answer, cause):
    with pytest.raises(ExerciseCheckFailed, match=cause) as err:
        checks.check_ch02_mse_gradient(answer)
    assert "half the gradient" not in err.value.message


@pytest.mark.parametrize("answer, cause", [
    (lr_hessian_without_two, "twice the threshold"),
    (lr_n_minus_one, "N − 1")])
def test_max_stable_lr_slips_get_their_own_diagnosis(answer, cause):
    with pytest.raises(ExerciseCheckFailed, match=cause):
        checks.check_ch02_max_stable_lr(answer)


def test_func_hessian_is_refused_as_a_hessian_not_a_gradient():
    with pytest.raises(ExerciseCheckFailed, match="Hessian derived by hand") as err:
        checks.check_ch02_max_stable_lr(max_lr_by_func_hessian)
    assert "gradient by hand" not in err.value.message


@pytest.mark.parametrize("answer", [least_squares_classical_gram_schmidt,
                                    least_squares_modified_gram_schmidt])
def test_gram_schmidt_failure_names_gram_schmidt(answer):
    # it never forms X̃ᵀX̃: the message must not give that as the only cause
    with pytest.raises(ExerciseCheckFailed, match="ill-conditioned float64 problem") as err:
        checks.check_ch02_least_squares(answer)
    assert "Gram–Schmidt" in err.value.message


def _central_difference_gradient(X, W, b, Y):   # no derivation: exact on a quadratic (h = 1)
    loss = lambda W, b: ((X @ W + b - Y) ** 2).sum() / X.shape[0]
    grad_W, grad_b = torch.zeros_like(W), torch.zeros_like(b)
    for i in range(W.numel()):
        E = torch.zeros_like(W).view(-1)
        E[i] = 1.0
        E = E.view_as(W)
        grad_W.view(-1)[i] = (loss(W + E, b) - loss(W - E, b)) / 2
    for j in range(b.numel()):
        e = torch.zeros_like(b)
        e[j] = 1.0
        grad_b[j] = (loss(W, b + e) - loss(W, b - e)) / 2
    return grad_W, grad_b


def _second_difference_lr(X):                   # the Hessian by second differences, h = 1
    N, p = X.shape[0], X.shape[1] + 1
    loss = lambda th: ((X @ th[:-1] + th[-1]) ** 2).sum() / N
    eye = torch.eye(p, dtype=X.dtype)
    H = torch.stack([torch.stack([(loss(eye[i] + eye[j]) - loss(eye[i] - eye[j])
                                   - loss(eye[j] - eye[i]) + loss(-eye[i] - eye[j])) / 4
                                  for j in range(p)]) for i in range(p)])
    return 2.0 / torch.linalg.eigvalsh(H).max().item()


@pytest.mark.parametrize("check, answer", [
    (checks.check_ch02_mse_gradient, _central_difference_gradient),
    (checks.check_ch02_max_stable_lr, _second_difference_lr)])
def test_numerical_routes_exact_on_a_quadratic_pass_as_the_statements_say(check, answer):
    # the statements of ch02-mse-gradient and ch02-max-stable-lr say that such numerical
    # routes are not refused (on a quadratic they are exact); if a check starts refusing
    # them, the statements must change with it
    check(answer)


from tests.exercises.ch02 import FLOAT64_BY_PROMOTION_NOT_CAUGHT, FLOAT64_IN_FLOAT32_CALL  # noqa: E402


@pytest.mark.parametrize("answer", FLOAT64_IN_FLOAT32_CALL, ids=lambda f: f.__name__)
def test_float64_routes_in_the_float32_call_fail_there(answer):
    # the sixth read's M2: each passed before (lstsq in float64, another route in float32)
    with pytest.raises(ExerciseCheckFailed, match="design matrix in X's dtype") as err:
        checks.check_ch02_least_squares(answer)
    assert "your solution called" in err.value.message


def test_a_float64_copy_by_type_promotion_solved_by_hand_is_not_caught():
    # disclosed in book/instructors.md (instructors-ch02-least-squares, linked from the
    # statement): no refused call runs, and the digits are float64's. If this starts failing,
    # the route is closed: update that paragraph, which says it is not
    checks.check_ch02_least_squares(FLOAT64_BY_PROMOTION_NOT_CAUGHT)


def test_the_augmented_system_is_told_about_its_own_conditioning():
    # round 4's L6: the hint named X̃ᵀX̃ and Gram–Schmidt, neither of which this answer uses
    from tests.exercises.ch02 import least_squares_augmented_system
    with pytest.raises(ExerciseCheckFailed, match="ill-conditioned float64 problem") as err:
        checks.check_ch02_least_squares(least_squares_augmented_system)
    assert "augmented system" in err.value.message


# The seventh read of chapter 2, L4: torch.view_as_real only reinterprets eigvals' complex
# result as (real, imaginary) pairs, so the largest real part read through it is a right answer
def _lr_by_view_as_real(X):
    N = X.shape[0]
    Xt = torch.cat([X, torch.ones(N, 1, dtype=X.dtype)], dim=1)
    H = (2 / N) * Xt.T @ Xt
    return 2 / torch.view_as_real(torch.linalg.eigvals(H))[:, 0].max().item()


def test_max_stable_lr_allows_view_as_real_of_the_eigenvalues():
    checks.check_ch02_max_stable_lr(_lr_by_view_as_real)


# ch02-ridge-svd (the third read's depth item: an exercise on ridge by SVD shrinkage)
from mathref.checks.ch02 import _ridge_by_stacking  # noqa: E402
from tests.exercises.ch02 import (ridge_complement_factor, ridge_lambda_added_to_sigma,  # noqa: E402
                                 ridge_lambda_ignored, ridge_least_squares_component_shrunk,
                                 ridge_of_the_mean_loss, ridge_path_transposed,
                                 ridge_twice_lambda, ridge_without_division_by_sigma)


@pytest.mark.parametrize("N, d, lam", [(30, 4, 0.3), (8, 20, 2.0), (50, 2, 1e-3)])
def test_ridge_oracle_is_the_ridge_solution(N, d, lam):
    # the checker's oracle (least squares on [X; √λ I], [y; 0], no SVD) against the normal
    # equations (XᵀX + λI)w = Xᵀy and the vanishing gradient of ‖Xw − y‖² + λ‖w‖²
    gen = torch.Generator().manual_seed(N + d)
    X = torch.randn(N, d, generator=gen, dtype=torch.float64)
    y = torch.randn(N, generator=gen, dtype=torch.float64)
    w = _ridge_by_stacking(X, y, lam)
    direct = torch.linalg.solve(X.T @ X + lam * torch.eye(d, dtype=X.dtype), X.T @ y)
    assert torch.allclose(w, direct, rtol=1e-9, atol=1e-11)
    wg = w.clone().requires_grad_(True)
    (((X @ wg - y) ** 2).sum() + lam * (wg ** 2).sum()).backward()
    assert wg.grad.abs().max() < 1e-9 * (1 + X.abs().max() ** 2)


@pytest.mark.parametrize("answer, cause", [
    (ridge_lambda_ignored, "least-squares solution: λ did not change it"),
    (ridge_lambda_added_to_sigma, "λ was added to σ_i"),
    (ridge_without_division_by_sigma, "the division by σ_i is missing"),
    (ridge_complement_factor, "the part that ridge removes"),
    (ridge_of_the_mean_loss, "(XᵀX + Nλ I)w = Xᵀy, N = 30"),
    (ridge_twice_lambda, "the solution for 2λ"),
    (ridge_path_transposed, "one row per λ")])
def test_ridge_slips_get_their_own_diagnosis(answer, cause):
    with pytest.raises(ExerciseCheckFailed) as err:
        checks.check_ch02_ridge_svd(answer)
    assert cause in err.value.message


def test_ridge_by_the_least_squares_component_fails_where_sigma_is_zero():
    # right wherever σ_i > 0; at the zero feature LAPACK returns σ = 0 exactly (the feature is
    # X's last column), and σ²/(σ² + λ)·(u·y)/σ is 0·∞ = nan there. The statement asks for a
    # component defined at σ_i = 0
    X = torch.randn(15, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    X[:, -1] = 0.0
    if torch.linalg.svd(X, full_matrices=False).S[-1] != 0:   # a LAPACK whose σ_min is not
        checks.check_ch02_ridge_svd(ridge_least_squares_component_shrunk)   # 0: no 0·∞, right
        return
    with pytest.raises(ExerciseCheckFailed, match="σ_i = 0 for the zero feature"):
        checks.check_ch02_ridge_svd(ridge_least_squares_component_shrunk)


def test_ridge_svd_allows_matrix_rank_on_x_only():
    # chapter 2's fourth read, L-c: the rank of X, then the SVD truncated to it, was refused
    # ("ran torch linalg_matrix_rank"); it passes (tests/exercises/ch02.py, RIGHT_ANSWERS). On
    # another matrix it is refused like the SVD: bisecting atol would read off that matrix's σ
    def rank_of_the_gram_matrix(X, y, lams):
        r = int(torch.linalg.matrix_rank(X.T @ X))
        U, S, Vh = torch.linalg.svd(X, full_matrices=False)
        U, S, Vh = U[:, :r], S[:r], Vh[:r]
        return (S * (U.T @ y) / (S ** 2 + lams[:, None])) @ Vh

    with pytest.raises(ExerciseCheckFailed, match="called torch.linalg.matrix_rank on something "
                                                  "other than the 30×4 matrix"):
        checks.check_ch02_ridge_svd(rank_of_the_gram_matrix)


GAUSS_JORDAN_RIDGE = """import torch

def ridge_svd(X, y, lams):
    d = X.shape[1]
    rows = []
    for lam in lams:
        A = torch.cat([X.T @ X + lam * torch.eye(d, dtype=X.dtype), (X.T @ y)[:, None]], 1)
        for j in range(d):
            p = j + int(A[j:, j].abs().argmax())
            A[[j, p]] = A[[p, j]]
            A[j] = A[j] / A[j, j]
            A = A - A[:, j:j + 1] * A[j] * (torch.arange(d)[:, None] != j)
        rows.append(A[:, d])
    return torch.stack(rows)
"""


def test_a_hand_written_elimination_of_the_ridge_system_passes_as_the_guide_says(capsys):
    # book/instructors.md (instructors-ch02-ridge-svd, chapter 2's fourth read, L-b): the check
    # refuses the library's solvers, not arithmetic; Gauss–Jordan by hand passes. If the check
    # ever refuses it, the guide's paragraph is to change with it
    namespace = {}
    exec(compile(GAUSS_JORDAN_RIDGE, "<solution>", "exec"), namespace)
    checks.check_ch02_ridge_svd(namespace["ridge_svd"])
    assert "✅ ch02-ridge-svd: passed" in capsys.readouterr().out
    guide = Path(__file__).resolve().parents[1] / "book" / "instructors.md"
    assert "Gauss–Jordan" in guide.read_text(encoding="utf-8")
