"""The checker of chapter 14's exercise 'One cached decode step with RoPE', tested on its own
until the exercise is executed into notebook 14 (then tests/test_exercises.py takes over)."""
import math

import pytest
import torch

from mathref.checks import ExerciseCheckFailed, check_ch14_rope_decode_step
from mathref.positions import apply_rope
from tests.exercises.ch14 import PENDING_WRONG_ANSWERS


def reference(q_new, k_new, v_new, k_cache, v_cache):
    position = torch.tensor([k_cache.shape[-2]])
    k_cache = torch.cat([k_cache, apply_rope(k_new, positions=position)], dim=-2)
    v_cache = torch.cat([v_cache, v_new], dim=-2)
    scores = apply_rope(q_new, positions=position) @ k_cache.transpose(-2, -1) / math.sqrt(q_new.shape[-1])
    return torch.softmax(scores, dim=-1) @ v_cache, k_cache, v_cache


def test_reference_passes(capsys):
    check_ch14_rope_decode_step(reference)
    assert "✅ ch14-rope-decode-step: passed" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", PENDING_WRONG_ANSWERS["ch14-rope-decode-step"],
                         ids=lambda f: f.__name__)
def test_wrong_answers_fail(wrong):
    with pytest.raises(ExerciseCheckFailed):
        check_ch14_rope_decode_step(wrong)
