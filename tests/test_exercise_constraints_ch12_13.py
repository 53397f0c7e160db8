"""Constraints stated in chapters 12 and 13's exercises, enforced by their checkers: a correct
answer that breaks the rule fails, with a message that says why."""
import pytest
import torch

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from mathref.positions import apply_rope


def test_rope_half_refuses_mathref_apply_rope_and_rope_cache():
    def via_apply_rope(x, positions, base=10000.0):
        return apply_rope(x, positions, base)            # correct numbers, forbidden route

    def via_module_attribute(x, positions, base=10000.0):
        import mathref.positions as P
        cos, sin = P.rope_cache(positions, x.shape[-1], base, dtype=x.dtype)
        h = x.shape[-1] // 2
        return torch.cat([x[..., :h] * cos - x[..., h:] * sin, x[..., :h] * sin + x[..., h:] * cos], -1)

    x = torch.randn(1, 2, 3, 4, dtype=torch.float64)
    before = apply_rope(x)
    for answer in (via_apply_rope, via_module_attribute):
        with pytest.raises(ExerciseCheckFailed, match="must compute the rotation itself"):
            checks.check_ch12_rope_half(answer)
    torch.testing.assert_close(apply_rope(x), before, rtol=0, atol=0)   # restored afterwards
    assert via_apply_rope(x, torch.arange(3)).shape == x.shape


def test_adjacent_to_half_names_a_dtype_change_not_a_wrong_row():
    def rows_of(W, n_heads):
        d_k = W.shape[0] // n_heads
        within = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])
        return torch.cat([h * d_k + within for h in range(n_heads)])

    def reference(W, n_heads):
        return W[rows_of(W, n_heads)]

    def to_float32(W, n_heads):                          # right rows, but converted to float32
        return W[rows_of(W, n_heads)].float()

    checks.check_ch12_adjacent_to_half(reference)
    with pytest.raises(ExerciseCheckFailed, match=r"W is torch.float64 but your result is "
                                                  r"torch.float32: a row permutation keeps the dtype"):
        checks.check_ch12_adjacent_to_half(to_float32)
