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


def test_sinusoidal_entry_refusals_match_the_statement():
    """Cell 69 says: cmath and the NumPy functions the check sees run are refused, NumPy on plain
    numbers (np.sin) is not seen and passes, math and PyTorch in float64 pass."""
    import cmath
    import math

    import numpy as np

    def via_cmath(p, j, d):                              # Euler's formula: correct, refused
        z = cmath.exp(1j * p / 10000 ** (2 * (j // 2) / d))
        return z.imag if j % 2 == 0 else z.real

    def via_np_arange(p, j, d):
        angle = float(np.arange(p + 1)[p]) / 10000 ** (2 * (j // 2) / d)
        return math.sin(angle) if j % 2 == 0 else math.cos(angle)

    def via_np_scalars(p, j, d):                         # ufuncs on numbers: not seen, passes
        angle = np.float64(p) / np.power(10000.0, 2 * (j // 2) / d)
        return float(np.sin(angle) if j % 2 == 0 else np.cos(angle))

    with pytest.raises(ExerciseCheckFailed, match=r"ran exp \(from the C module cmath\)"):
        checks.check_ch12_sinusoidal_entry(via_cmath)
    with pytest.raises(ExerciseCheckFailed, match=r"ran arange \(from the C module numpy\)"):
        checks.check_ch12_sinusoidal_entry(via_np_arange)
    checks.check_ch12_sinusoidal_entry(via_np_scalars)


def test_alibi_matrix_refusals_and_precision_match_the_statement():
    """Cell 74 says: causal_mask and NumPy are refused; a slope that is not a power of 2 is
    compared to 1e-6 relative, so float32 passes and bfloat16 fails with a dtype message."""
    import math

    import numpy as np

    from mathref.attention import causal_mask

    def via_causal_mask(slope, T):
        pos = torch.arange(T, dtype=torch.float64)
        return -slope * (pos[:, None] - pos[None, :]) + causal_mask(T).double()

    def via_numpy(slope, T):
        i = np.arange(T)
        return torch.tensor(np.where(i[None] <= i[:, None], -slope * (i[:, None] - i[None]), -np.inf))

    def in_dtype(dtype):
        def alibi_matrix(slope, T):
            i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
            return (-slope * (i - j)).to(dtype).masked_fill(j > i, -math.inf)
        return alibi_matrix

    with pytest.raises(ExerciseCheckFailed, match=r"ran causal_mask \(from mathref.attention"):
        checks.check_ch12_alibi_matrix(via_causal_mask)
    with pytest.raises(ExerciseCheckFailed, match=r"\(from the C module numpy\)"):
        checks.check_ch12_alibi_matrix(via_numpy)
    checks.check_ch12_alibi_matrix(in_dtype(torch.float32))
    checks.check_ch12_alibi_matrix(in_dtype(torch.float64))
    with pytest.raises(ExerciseCheckFailed, match=r"your tensor is bfloat16, too coarse for a slope "
                                                  r"that is not a power of 2"):
        checks.check_ch12_alibi_matrix(in_dtype(torch.bfloat16))
    # the bfloat16 answer is exact on the power-of-2 slopes: only the new case catches it
    assert torch.equal(in_dtype(torch.bfloat16)(0.5, 4).double(), in_dtype(torch.float64)(0.5, 4))


def test_rope_half_float32_angles_message_reports_an_error_above_the_tolerance():
    """θ built in float32 is refused, and the message's error is printed with two digits, so it
    never rounds down to the 1e-9 it is compared with (read r10's L5: 1.48e-9 printed as 1e-09)."""
    import re

    def float32_theta(x, positions, base=10000.0):
        d = x.shape[-1]
        theta = (base ** (-2 * torch.arange(d // 2) / d)).double()     # float32 exponent, cast afterwards
        angles = positions.double()[:, None] * theta
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        h = d // 2
        return torch.cat([x[..., :h] * cos - x[..., h:] * sin, x[..., :h] * sin + x[..., h:] * cos], -1)

    with pytest.raises(ExerciseCheckFailed, match="went through float32") as info:
        checks.check_ch12_rope_half(float32_theta)
    reported = re.search(r"right only to (\S+) \(float64 needs 1e-9\)", str(info.value)).group(1)
    assert float(reported) >= 1e-9
    from mathref.checks import ch12
    from mathref.checks.core import CheckFailure
    with pytest.raises(CheckFailure, match=r"right only to 1\.5e-09 \(float64 needs 1e-9\)"):
        ch12._expect_float64_angles(1.48e-9, "rope_half_split")           # .1g would print 1e-09


def test_sinusoidal_entry_allows_pytorch_complex_numbers():
    """Chapter 12's twelfth read, L1: the statement allows PyTorch, but sin a as
    torch.polar(1, a).imag or torch.exp(1j * a).imag (correct, float64) was refused, the second
    naming aten.view_as_real, which .imag runs unseen. PyTorch's complex numbers now pass;
    cmath stays refused, as the statement says (test above)."""
    import math

    def via_polar(p, j, d):
        angle = torch.tensor(p / 10000 ** (2 * (j // 2) / d), dtype=torch.float64)
        z = torch.polar(torch.ones_like(angle), angle)
        return (z.imag if j % 2 == 0 else z.real).item()

    def via_exp(p, j, d):
        angle = torch.tensor(p, dtype=torch.float64) / 10000 ** (2 * (j // 2) / d)
        z = torch.exp(1j * angle)
        return float(z.imag if j % 2 == 0 else z.real)

    for answer in (via_polar, via_exp):
        checks.check_ch12_sinusoidal_entry(answer)
    assert abs(via_exp(999, 3, 8) - math.cos(999 / 10)) < 1e-12          # 10000^(2/8) = 10


def test_alibi_matrix_refuses_pytorch_causal_mask_and_a_list():
    """Chapter 12's twelfth read, L2 and L3: the statement refuses chapter 11's causal_mask (build
    the mask yourself) and asks for a float tensor; PyTorch's ready-made causal mask
    (nn.Transformer.generate_square_subsequent_mask, as chapter 11's exercise refuses it) and a
    list of lists both passed. Both fail now, each with its reason."""
    from torch import nn
    from torch.nn.modules import transformer

    def distance(slope, T):
        pos = torch.arange(T, dtype=torch.float64)
        return -slope * (pos[:, None] - pos[None, :])

    def via_transformer_mask(slope, T):
        return distance(slope, T) + nn.Transformer.generate_square_subsequent_mask(T, dtype=torch.float64)

    def via_private_mask(slope, T):
        return distance(slope, T) + transformer._generate_square_subsequent_mask(T, dtype=torch.float64)

    def as_list(slope, T):
        return distance(slope, T).masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1),
                                              float("-inf")).tolist()

    with pytest.raises(ExerciseCheckFailed, match="generate_square_subsequent_mask"):
        checks.check_ch12_alibi_matrix(via_transformer_mask)
    with pytest.raises(ExerciseCheckFailed, match="_generate_square_subsequent_mask"):
        checks.check_ch12_alibi_matrix(via_private_mask)
    with pytest.raises(ExerciseCheckFailed, match="expected a float tensor, got list"):
        checks.check_ch12_alibi_matrix(as_list)


def test_alibi_matrix_names_pytorch_causal_bias_objects():
    """Chapter 12's delta read, N2: the ALiBi exercise refused PyTorch's causal bias objects
    (torch.nn.attention.bias) only through an unrelated RuntimeError about a tensor subclass.
    They are refused by name now, as chapter 11's causal-mask exercise refuses them."""
    from torch.nn.attention import bias

    def distance(slope, T):
        pos = torch.arange(T, dtype=torch.float64)
        return -slope * (pos[:, None] - pos[None, :])

    def via_upper_left(slope, T):
        return distance(slope, T) + bias.causal_upper_left(T, T)._materialize().double().log()

    def via_lower_right(slope, T):
        return distance(slope, T) + bias.causal_lower_right(T, T)._materialize().double().log()

    def via_causal_bias(slope, T):
        mask = bias.CausalBias(bias.CausalVariant.UPPER_LEFT, T, T)._materialize()
        return distance(slope, T).masked_fill(~mask, float("-inf"))

    for answer in (via_upper_left, via_lower_right, via_causal_bias):   # right numbers when run plainly
        want = distance(0.5, 5).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
        torch.testing.assert_close(answer(0.5, 5), want, rtol=0, atol=0)
    for answer, name in ((via_upper_left, "torch.nn.attention.bias.causal_upper_left"),
                         (via_lower_right, "torch.nn.attention.bias.causal_lower_right")):
        with pytest.raises(ExerciseCheckFailed) as failure:
            checks.check_ch12_alibi_matrix(answer)
        assert f"your solution called {name}" in failure.value.message, failure.value.message
    # the class built directly fails in the gate before _materialize is reached (a tensor
    # subclass made under the gate's modes); the checker names it (chapter 12's third read, L4:
    # the message was "your code raised RuntimeError: Creating a new Tensor subclass ...")
    def via_lower_right_method(slope, T):
        mask = bias.CausalBias(bias.CausalVariant.UPPER_LEFT, T, T)._lower_right(torch.device("cpu"))
        return distance(slope, T).masked_fill(~mask, float("-inf"))

    torch.testing.assert_close(via_lower_right_method(0.5, 5), want, rtol=0, atol=0)
    for answer in (via_causal_bias, via_lower_right_method):
        with pytest.raises(ExerciseCheckFailed) as failure:
            checks.check_ch12_alibi_matrix(answer)
        assert "your solution built torch.nn.attention.bias.CausalBias" in failure.value.message, \
            failure.value.message
        assert "RuntimeError" not in failure.value.message
