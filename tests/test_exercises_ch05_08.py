"""The constraints that chapters 5–8 state in their exercises, each shown to be enforced:
an answer that asks autograd for the gradient fails with a message that says why."""
import pytest
import torch
import torch.nn.functional as F

from mathref.checks import CHECKS, ExerciseCheckFailed


def ce_gradient_by_autograd(logits, targets, label_smoothing=0.0, ignore_index=-100):
    z = logits.detach().clone().requires_grad_(True)
    F.cross_entropy(z, targets, label_smoothing=label_smoothing, ignore_index=ignore_index).backward()
    return z.grad


def ce_gradient_by_grad(logits, targets, label_smoothing=0.0, ignore_index=-100):
    with torch.enable_grad():
        z = logits.detach().clone().requires_grad_(True)
        loss = F.cross_entropy(z, targets, label_smoothing=label_smoothing, ignore_index=ignore_index)
        return torch.autograd.grad(loss, z)[0]


def batch_norm_backward_by_autograd(dy, x, gamma, eps=1e-5):
    x = x.detach().clone().requires_grad_(True)
    g = gamma.detach().clone().requires_grad_(True)
    b = torch.zeros_like(gamma, requires_grad=True)
    F.batch_norm(x, None, None, g, b, training=True, eps=eps).backward(dy)
    return x.grad, g.grad, b.grad


@pytest.mark.parametrize("label, cheat", [
    ("ch05-ce-gradient", ce_gradient_by_autograd),
    ("ch05-ce-gradient", ce_gradient_by_grad),
    ("ch08-batch-norm-backward", batch_norm_backward_by_autograd),
])
def test_autograd_answers_fail_the_without_autograd_exercises(label, cheat):
    with pytest.raises(ExerciseCheckFailed, match="without autograd"):
        CHECKS[label](cheat)


@pytest.mark.parametrize("label, answer", [
    ("ch05-perplexity", lambda nlls: torch.exp(nlls.float().mean())),
    ("ch05-bits-per-byte", lambda nlls, text: nlls.float().sum() / (len(text.encode()) * 0.6931471805599453)),
])
def test_a_float32_result_is_told_its_dtype(label, answer):
    """A scalar answer right to float32 precision fails with the dtype named (second read of
    chapter 5: 'expected 65, got 65.00004578' said nothing of why)."""
    with pytest.raises(ExerciseCheckFailed, match="your result is torch.float32: compute in float64"):
        CHECKS[label](answer)


def test_a_wrong_float32_result_is_not_blamed_on_its_dtype():
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch05-perplexity"](lambda nlls: torch.exp(nlls.float().sum()))
    assert "float64" not in failure.value.message
