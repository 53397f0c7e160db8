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
