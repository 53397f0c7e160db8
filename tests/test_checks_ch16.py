"""Chapter 16's checkers name the cause of the mistakes the second read found (tests/exercises/
ch16.py holds the answers; each must fail, and its message must say why)."""
import pytest
import torch

from mathref import checks
from mathref.checks.core import ExerciseCheckFailed
from tests.exercises import ch16 as answers


def _message(check, answer):
    with pytest.raises(ExerciseCheckFailed) as failure:
        check(answer)
    return str(failure.value)


def test_float32_angles_are_named():
    assert "float64" in _message(checks.check_ch16_rope, answers.rope_float32_angles)


def test_a_float32_softmax_in_attention_is_named():
    # chapter 16's read, L-D: the attention check gave no cause for a float32-sized error
    message = _message(checks.check_ch16_attention, answers.attention_float32_softmax)
    assert "float32's size" in message, message


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


# ---- the sixth read (2026-11-30) ----------------------------------------------------------
def test_a_step_whose_gradients_add_up_across_steps_is_refused_and_told_why():
    # M1: loss.backward() and p.grad, never cleared; the check passes the same leaves to its
    # six steps, as the payoff does, so the second step sees the first one's gradients
    message = _message(checks.check_ch16_train_step, answers.train_step_accumulates)
    assert "step 1" in message and "add up across steps" in message
    assert "loss.backward() adds into p.grad" in message


def test_betas_fixed_instead_of_read_from_cfg_are_refused():
    # L2: the check's betas are not the default (0.9, 0.99)
    assert "use cfg.betas" in _message(checks.check_ch16_train_step,
                                       answers.train_step_betas_hardcoded)


def test_rope_returning_float64_for_float32_input_names_the_dtype():
    # M2: the statement's dtype rule, checked on a float32 input
    message = _message(checks.check_ch16_rope, answers.rope_float64_cos)
    assert "x of dtype float32: your output is torch.float64" in message
    assert "input's dtype" in message


def test_rope_that_assumes_consecutive_positions_is_refused():
    # L1: one case whose positions are unsorted, with gaps and a repeat
    message = _message(checks.check_ch16_rope, answers.rope_contiguous_positions)
    assert "positions [9, 2, 30, 2, 5]" in message and "need not be consecutive" in message


def test_a_float32_softmax_is_refused_by_its_distributions():
    message = _message(checks.check_ch16_generate, answers.generate_float32_softmax)
    assert "the probabilities of new token 0 differ from the statement's" in message


def test_right_train_steps_with_backward_pass():
    # the gradients cleared before backward, or after use with an in-place update: both pass
    import torch.nn.functional as F
    import torch
    for source in answers.RIGHT_ANSWERS["ch16-train-step"]:
        scope = {"torch": torch, "F": F}
        exec(source, scope)
        checks.check_ch16_train_step(scope["train_step"])


def test_an_undecayed_embedding_is_named():
    # seventh read, L2: the hint said "decay only the matrices", and the embedding is a matrix
    message = _message(checks.check_ch16_train_step, answers.train_step_embedding_undecayed)
    assert "the embedding was not decayed" in message and "the embedding and the head" in message
    assert "decay only the matrices" not in message
    assert "the gain (1-D: not decayed) was decayed" in _message(
        checks.check_ch16_train_step, answers.train_step_decays_gains)


def test_kingmas_efficient_adam_form_is_named():
    # seventh read, L3: ε added to the uncorrected √v was refused with no cause
    message = _message(checks.check_ch16_adamw, answers.adamw_kingma_efficient)
    assert "ε is added to √v̂, the corrected v" in message and "ε/√(1 − β₂ᵗ)" in message


def test_the_train_step_check_holds_no_later_result_while_the_answer_runs():
    # the delta read's N2: a traceback's frame reached mathref's six results (notebook only;
    # the grader refuses __traceback__ before the code runs)
    message = _message(checks.check_ch16_train_step, answers.train_step_reads_the_checkers_frames)
    assert "not in any frame" in message
    message = _message(checks.check_ch16_train_step, answers.train_step_advances_the_checker)
    # refused where it advances the checker's iterator of mathref's steps (a plain method: a
    # refusal raised while a generator resumed crashed the floor torch 2.9 at random)
    assert "ran advance" in message and "checkers' own module" in message, message


def test_a_softmax_with_one_maximum_over_all_rows_is_told_so():
    # the third red team: exp(s - s.max()) over the whole score tensor; a far-away last row sets
    # the maximum and the earlier rows underflow to 0/0 (the message named a moved output, nan)
    def one_max(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
        def weights(scores, allowed):
            s = scores.masked_fill(~allowed, float("-inf"))
            e = torch.exp(s - s.max())
            return e / e.sum(-1, keepdim=True)
        return answers._attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, weights=weights)
    message = _message(checks.check_ch16_attention, one_max)
    assert "each row's own maximum" in message, message
    # the fourth red team's form: each row's maximum taken before the future is masked
    message = _message(checks.check_ch16_attention, answers.attention_row_max_before_the_mask)
    assert "before any maximum" in message, message


def test_off_by_one_mistakes_in_rope_and_adamw_are_named():
    # ninth read, L-D: both were refused with only the size of the difference
    message = _message(checks.check_ch16_rope, answers.rope_theta_without_the_two)
    assert "with the 2" in message
    message = _message(checks.check_ch16_adamw, answers.adamw_bias_correction_one_step_behind)
    assert "one step behind" in message


def test_mathrefs_own_parameter_returned_is_not_updated_by_its_step():
    # the delta read of 8c157c5, L-A: gc.get_objects called through map is not seen by the gate;
    # the check copies what the answer returns before mathref's own step
    _message(checks.check_ch16_adamw, answers.adamw_returns_mathrefs_parameter)
