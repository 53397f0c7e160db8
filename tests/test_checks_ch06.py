"""Chapter 6's warm-up checker names float32 as the cause of a float32-sized error (the fourth
read's N2), and still accepts the float64 formula."""
import math

import pytest
import torch

from mathref import checks
from mathref.checks.core import ExerciseCheckFailed


def _lr(step, warmup_steps, total_steps, lr_max, lr_min, dtype):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    if step > total_steps:
        return lr_min
    progress = torch.tensor((step - warmup_steps) / (total_steps - warmup_steps), dtype=dtype)
    return float(lr_min + 0.5 * (lr_max - lr_min) * (1 + torch.cos(math.pi * progress)))


def test_a_float32_cosine_is_named():
    with pytest.raises(ExerciseCheckFailed, match="float32-sized error"):
        checks.check_ch06_warmup_cosine(lambda *a: _lr(*a, dtype=torch.float32))


def test_the_float64_cosine_passes():
    checks.check_ch06_warmup_cosine(lambda *a: _lr(*a, dtype=torch.float64))


# The eighth read's N5: an Adam or AdamW step computed in float32 and cast back to float64 is
# refused by its values; the message now names float32 as the likely cause.
def _adam(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay=0.0, dtype=torch.float64):
    theta, grad, m, v = (x.to(dtype) for x in (theta, grad, m, v))
    theta = theta * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    step = lr * (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + eps)
    return tuple(x.double() for x in (theta - step, m, v))


def _adam32(*args):
    return _adam(*args, dtype=torch.float32)           # float32 inside, cast back to float64


def _adam64(*args):
    return _adam(*args)


@pytest.mark.parametrize("check", [checks.check_ch06_adam_step, checks.check_ch06_adamw_step])
def test_a_float32_adam_step_is_named(check):
    with pytest.raises(ExerciseCheckFailed, match="float32 rounding"):
        check(_adam32)


@pytest.mark.parametrize("check", [checks.check_ch06_adam_step, checks.check_ch06_adamw_step])
def test_the_float64_adam_step_passes(check):
    check(_adam64)


# The tenth read's M3: where ε sits is a formula error, not float32 rounding. Kingma and Ba's
# "efficient" form (ε added to √v, the correction folded into the step size, as in TensorFlow)
# and √(v̂ + ε²), both computed in float64, were refused with "the size of float32 rounding ...
# compute in float64"; they are named now, and the float32 hint is kept for float32 rounding.
def _adam_eps(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay=0.0, where="sqrt(v)"):
    theta = theta * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    if where == "sqrt(v)":                             # Kingma & Ba, Algorithm 1's last lines
        step = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) * m / (v.sqrt() + eps)
    elif where == "sqrt(v_hat + eps^2)":
        step = lr * (m / (1 - beta1 ** t)) / (v / (1 - beta2 ** t) + eps ** 2).sqrt()
    else:                                              # a float64 formula off by about 1e-6
        step = lr * (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt() + eps) * (1 + 1e-6)
    return theta - step, m, v


@pytest.mark.parametrize("check", [checks.check_ch06_adam_step, checks.check_ch06_adamw_step])
@pytest.mark.parametrize("where, named", [("sqrt(v)", "before the bias correction"),
                                          ("sqrt(v_hat + eps^2)", "√(v̂ + ε²)")])
def test_where_eps_sits_is_named_not_float32(check, where, named):
    with pytest.raises(ExerciseCheckFailed) as failed:
        check(lambda *a: _adam_eps(*a, where=where))
    assert named in failed.value.message and "float32" not in failed.value.message, \
        failed.value.message


# The eleventh read's N3: leaving ε out, or max(√v̂, ε), was told "√(v̂ + ε²) is not √v̂ + ε",
# an ε² the student never wrote (at ε = 1e-8 the three give the same numbers; the settings with a
# larger ε tell them apart).
def _adam_no_eps(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay=0.0, use_max=False):
    theta0 = theta
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    root = (v / (1 - beta2 ** t)).sqrt()
    step = lr * (m / (1 - beta1 ** t)) / (root.clamp_min(eps) if use_max else root)
    return theta0 * (1 - lr * weight_decay) - step, m, v


@pytest.mark.parametrize("check", [checks.check_ch06_adam_step, checks.check_ch06_adamw_step])
@pytest.mark.parametrize("use_max, named", [(False, "ε is missing"), (True, "max(√v̂, ε)")])
def test_a_missing_or_maxed_eps_is_named_as_such(check, use_max, named):
    with pytest.raises(ExerciseCheckFailed) as failed:
        check(lambda *a: _adam_no_eps(*a, use_max=use_max))
    message = failed.value.message
    assert named in message and "ε²" not in message and "float32" not in message, message


@pytest.mark.parametrize("check", [checks.check_ch06_adam_step, checks.check_ch06_adamw_step])
def test_a_small_float64_error_is_not_blamed_on_float32(check):
    with pytest.raises(ExerciseCheckFailed) as failed:
        check(lambda *a: _adam_eps(*a, where="off by 1e-6"))
    assert "float32" not in failed.value.message, failed.value.message


def _adam_sqrt32(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay=0.0):
    theta = theta * (1 - lr * weight_decay)
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad * grad
    root = (v / (1 - beta2 ** t)).float().sqrt().double()      # one intermediate in float32
    return theta - lr * (m / (1 - beta1 ** t)) / (root + eps), m, v


@pytest.mark.parametrize("check", [checks.check_ch06_adam_step, checks.check_ch06_adamw_step])
def test_one_float32_intermediate_is_named(check):
    with pytest.raises(ExerciseCheckFailed, match="float32 rounding"):
        check(_adam_sqrt32)


# The tenth read's L5: the clipping checker converted the answer with torch.as_tensor, so Python
# lists and float32 values for float64 gradients passed; and value clipping was named as
# per-tensor clipping (the first case had one non-zero entry per tensor).
def _clip(grads, max_norm, finish=lambda g: g):
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    return [finish(g * min(1.0, max_norm / norm)) for g in grads]


@pytest.mark.parametrize("finish, message", [(lambda g: g.tolist(), "expected a tensor"),
                                             (lambda g: g.float(), "keep each gradient's dtype")])
def test_a_clip_answer_must_keep_tensors_and_dtype(finish, message):
    with pytest.raises(ExerciseCheckFailed, match=message):
        checks.check_ch06_clip_global_norm(lambda grads, c: _clip(grads, c, finish))


# The eleventh read's N2: the check's literal gradients followed the default dtype, float64 in the
# chapter (cell 2), so a float64 result for what the grader gives as float32 gradients passed in
# the notebook and failed under the grader ("keep each gradient's dtype"). They are float32 now.
def _clip_f64_factor(grads, max_norm):
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    return [g * torch.tensor([min(1.0, max_norm / norm)], dtype=torch.float64) for g in grads]


@pytest.mark.parametrize("default", [torch.float32, torch.float64])
def test_a_float64_result_is_refused_whatever_the_default_dtype(default):
    saved = torch.get_default_dtype()
    torch.set_default_dtype(default)
    try:
        with pytest.raises(ExerciseCheckFailed, match="float64, but it was given as float32: "
                                                      "keep each gradient's dtype"):
            checks.check_ch06_clip_global_norm(_clip_f64_factor)
        checks.check_ch06_clip_global_norm(_clip)             # the right answer passes under both
    finally:
        torch.set_default_dtype(saved)


def test_value_clipping_is_named():
    with pytest.raises(ExerciseCheckFailed, match=r"each value to \[−c, c\]"):
        checks.check_ch06_clip_global_norm(lambda grads, c: [g.clamp(-c, c) for g in grads])


def test_the_global_clip_passes():
    checks.check_ch06_clip_global_norm(_clip)


# The tenth read's L6: torch's private cosine helper passed the notebook gate (the grader
# refused it as a private name); it is refused by name now.
def test_onecycle_private_cosine_is_refused():
    from torch.optim.lr_scheduler import OneCycleLR

    def lr_at(step, warmup_steps, total_steps, lr_max, lr_min):
        if step < warmup_steps:
            return lr_max * (step + 1) / warmup_steps
        if step > total_steps:
            return lr_min
        return OneCycleLR._annealing_cos(lr_max, lr_min,
                                         (step - warmup_steps) / (total_steps - warmup_steps))
    with pytest.raises(ExerciseCheckFailed, match="_annealing_cos"):
        checks.check_ch06_warmup_cosine(lr_at)


# The tenth read's L6: NumPy's SVD gufunc on G.tolist() (no ndarray method, no tensor handed to
# NumPy, so no profile event) passed the notebook gate; an answer whose code names NumPy is
# refused now, as the grader's trusted side refused the private name.
def test_numpy_svd_gufunc_is_refused():
    import numpy as np

    def orthogonalize(G, steps):
        u, s, vh = np.linalg._umath_linalg.svd_s(G.tolist())
        s = [float(x) for x in s]
        norm = math.sqrt(sum(x * x for x in s))
        p = []
        for x in s:
            x = x / norm
            for _ in range(steps):
                x = 3.4445 * x - 4.7750 * x ** 3 + 2.0315 * x ** 5
            p.append(x)
        U = torch.tensor([[float(v) for v in row] for row in u], dtype=G.dtype)
        Vh = torch.tensor([[float(v) for v in row] for row in vh], dtype=G.dtype)
        return U @ torch.diag(torch.tensor(p, dtype=G.dtype)) @ Vh
    with pytest.raises(ExerciseCheckFailed, match="NumPy"):
        checks.check_ch06_newton_schulz(orthogonalize)


# The fourth full read's L2: an answer computed in bfloat16 (as Muon runs Newton–Schulz) and cast
# back to float64 was refused with core's cast-back hint, which blamed float32 rounding (about
# 6e-8) beside a difference of 5e-4. The hint now names the format the result's values fit.
def _newton_schulz(G, steps, dtype):
    X = (G / G.norm()).to(dtype)
    for _ in range(steps):
        A = X @ X.T
        X = 3.4445 * X + (-4.7750 * A + 2.0315 * A @ A) @ X
    return X.to(G.dtype)


@pytest.mark.parametrize("dtype, name", [(torch.bfloat16, "bfloat16"), (torch.float16, "float16")])
def test_a_narrow_newton_schulz_names_its_format(dtype, name):
    with pytest.raises(ExerciseCheckFailed) as failed:
        checks.check_ch06_newton_schulz(lambda G, steps: _newton_schulz(G, steps, dtype))
    message = failed.value.message
    assert f"{name} number" in message and "float32" not in message, message


def test_a_float32_newton_schulz_is_still_told_to_use_float64():
    with pytest.raises(ExerciseCheckFailed, match="float32 number"):
        checks.check_ch06_newton_schulz(lambda G, steps: _newton_schulz(G, steps, torch.float32))


def test_the_float64_newton_schulz_passes():
    checks.check_ch06_newton_schulz(lambda G, steps: _newton_schulz(G, steps, torch.float64))


@pytest.mark.parametrize("check", [checks.check_ch06_adam_step, checks.check_ch06_adamw_step])
def test_a_bfloat16_adam_step_names_bfloat16(check):
    with pytest.raises(ExerciseCheckFailed) as failed:
        check(lambda *args: _adam(*args, dtype=torch.bfloat16))
    message = failed.value.message
    assert "bfloat16" in message and "float32" not in message, message


def test_the_shared_precision_hint_names_bfloat16_and_float16_too():
    # the hint lives in core (every chapter's float64 comparison), not in chapter 6 alone
    from mathref.checks.core import _precision_hint
    want = torch.tensor([1 / 3, 2 / 7, 5 / 11], dtype=torch.float64)
    for dtype, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16"),
                        (torch.float32, "float32")):
        hint = _precision_hint(want.to(dtype).double(), want, 1e-10)
        assert f"a {name} number" in hint, hint
