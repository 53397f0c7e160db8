"""Chapter 16's checkers name the cause of the mistakes the second read found (tests/exercises/
ch16.py holds the answers; each must fail, and its message must say why)."""
import pytest

from mathref import checks
from mathref.checks.core import ExerciseCheckFailed
from tests.exercises import ch16 as answers


def _message(check, answer):
    with pytest.raises(ExerciseCheckFailed) as failure:
        check(answer)
    return str(failure.value)


def test_float32_angles_are_named():
    assert "float64" in _message(checks.check_ch16_rope, answers.rope_float32_angles)


def test_a_prompt_fed_token_by_token_is_refused():
    message = _message(checks.check_ch16_generate, answers.generate_prompt_token_by_token)
    assert "whole prompt" in message


def test_top_k_skipped_is_told_to_come_first():
    def generate_without_top_k(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                               top_p=None, draw=None):
        return answers._generate(step, prompt, max_new_tokens, temperature, None, top_p, draw)
    assert "apply top_k first" in _message(checks.check_ch16_generate, generate_without_top_k)


def test_moments_of_unclipped_gradients_name_the_clipping():
    message = _message(checks.check_ch16_train_step, answers.train_step_no_clipping)
    assert "clipped gradients" in message or "global norm" in message


def test_moments_hint_names_the_actual_mistake():
    # the clipping hint only where the moments are those of unclipped gradients (fourth read, F4)
    message = _message(checks.check_ch16_train_step, answers.train_step_betas_swapped)
    assert "β₁ = cfg.betas[0]" in message and "clipped" not in message
    message = _message(checks.check_ch16_train_step, answers.train_step_m_v_swapped)
    assert "in m's place" in message and "clipped" not in message
    assert "unclipped" in _message(checks.check_ch16_train_step, answers.train_step_no_clipping)


def test_one_position_is_singular():
    message = _message(checks.check_ch16_generate, answers.generate_prompt_token_by_token)
    assert "given 1 position:" in message
