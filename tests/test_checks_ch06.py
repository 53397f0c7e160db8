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
