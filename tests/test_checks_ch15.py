"""Chapter 15's checkers: NumPy on Python floats refused, and hints that name the right cause."""
import math
import sys

import numpy as np
import pytest
import torch

from mathref import checks
from mathref.checks import ExerciseCheckFailed
from tests.exercises import ch15


def _answer(source, name):
    namespace = {}
    exec(compile(source, f"<solution {name}>", "exec"), namespace)
    return namespace[name]


@pytest.mark.parametrize("check, source, name", [
    (checks.check_ch15_merge_softmax_states, ch15.MERGE_NUMPY_ON_FLOATS, "merge_softmax_states"),
    (checks.check_ch15_flash_tile_step, ch15.TILE_NUMPY_ON_FLOATS, "flash_tile_step")])
def test_numpy_log_sum_exp_on_python_floats_is_refused(check, source, name, capsys):
    # named in the code: refused before it runs
    with pytest.raises(ExerciseCheckFailed, match=r"its code names numpy\.logaddexp"):
        check(_answer(source.format(logaddexp="np.logaddexp"), name))
    # reached through a string: NumPy reports the underflow of e^(z_lo − z_hi) on the check's
    # widely separated values, with the notebook's inputs and with a grader's
    hidden = _answer(source.format(logaddexp="__import__('nu' + 'mpy').logaddexp"), name)
    for generator in (None, torch.Generator().manual_seed(11)):
        with pytest.raises(ExerciseCheckFailed, match="reported a floating-point underflow"):
            check(hidden, generator=generator)
    assert "✅" not in capsys.readouterr().out


def test_numpy_named_by_a_helper_or_a_default_is_refused():
    def helper(z1, z2):
        return float(np.logaddexp(z1, z2))

    def merge(m1, l1, acc1, m2, l2, acc2, lse=helper):
        return m1, l1, acc1

    with pytest.raises(ExerciseCheckFailed, match=r"its code names numpy"):
        checks.check_ch15_merge_softmax_states(merge)


def test_the_watch_leaves_numpy_error_state_as_it_was(capsys):
    before = np.geterr()
    right = _answer(ch15.RIGHT_ANSWERS["ch15-merge-softmax-states"][1], "merge_softmax_states")
    checks.check_ch15_merge_softmax_states(right)
    assert np.geterr() == before and np.geterrcall() is None
    assert "✅ ch15-merge-softmax-states: passed" in capsys.readouterr().out


def test_a_right_answer_beside_numpy_in_its_namespace_passes(capsys):
    # the notebook imports numpy as np: an answer that does not use it is not refused
    source = ("import numpy as np\nimport torch\n\n"
              "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
              "    m = torch.maximum(m1, m2)\n"
              "    c1, c2 = torch.exp(m1 - m), torch.exp(m2 - m)\n"
              "    return m, c1 * l1 + c2 * l2, c1 * acc1 + c2 * acc2\n")
    checks.check_ch15_merge_softmax_states(_answer(source, "merge_softmax_states"))
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("check, answer, why, not_why", [
    # fp16's 2 bytes hard-coded: fails the 1-byte case, which comes first (the third read's L2)
    (checks.check_ch15_kv_cache_bytes, ch15.kv_two_bytes_hard_coded,
     "multiply by bytes_per_element, here 1", "keys and values"),
    (checks.check_ch15_kv_cache_bytes, ch15.kv_without_factor_two, "keys and values",
     "bytes_per_element"),
    # bytes_per_element left out is not told it lacks the factor 2 (the sixth read's L4)
    (checks.check_ch15_kv_cache_bytes, ch15.kv_without_bytes_per_element,
     "multiply by bytes_per_element, here 2", "keys and values"),
    # 2d + d_ff/2 equals d_ff where d_ff = 4d (the third read's L5)
    (checks.check_ch15_crossover_length, ch15.crossover_ffn_as_one_matrix, "two matrices",
     "projections"),
    (checks.check_ch15_crossover_length, ch15.crossover_ffn_only, "four projections",
     "two matrices"),
    (checks.check_ch15_crossover_length, ch15.crossover_two_projections, "8Td²", "FFN"),
    (checks.check_ch15_flops_per_token, ch15.flops_kaplan, "Kaplan", "backward pass too"),
    # an ℓ that overflows is not told it flipped the factor (the third read's L3)
    (checks.check_ch15_merge_softmax_states, ch15.merge_relative_to_first, "overflowed to inf",
     "part a was computed"),
    (checks.check_ch15_merge_softmax_states, ch15.merge_sign_flipped, "part a was computed",
     "overflowed"),
    # a NaN ℓ from inf · 0 gets its own hint (the fourth read's L4)
    (checks.check_ch15_merge_softmax_states, ch15.merge_relative_to_first_nan, "ℓ is NaN",
     "part a was computed"),
])
def test_a_mistake_gets_its_own_hint(check, answer, why, not_why):
    with pytest.raises(ExerciseCheckFailed) as failure:
        check(answer)
    assert why in failure.value.message and not_why not in failure.value.message, \
        failure.value.message


@pytest.mark.parametrize("check, source, name", [
    (checks.check_ch15_merge_softmax_states, ch15.MERGE_NUMPY_ON_FLOATS, "merge_softmax_states"),
    (checks.check_ch15_flash_tile_step, ch15.TILE_NUMPY_ON_FLOATS, "flash_tile_step")])
def test_numpy_held_or_run_in_a_fresh_context_is_refused(check, source, name, capsys):
    # the fourth read's L1: a container, a class attribute, a bound __call__ (guarded, so that
    # NumPy raises no flag); M1: a fresh contextvars.Context, where NumPy reports nothing
    for holder in ch15.HOLDERS:
        answer = _answer(source.format(logaddexp="LAE").replace("import torch\n",
                                                                holder + ch15.GUARD), name)
        for generator in (None, torch.Generator().manual_seed(11)):
            with pytest.raises(ExerciseCheckFailed, match=r"its code names numpy\.logaddexp"):
                check(answer, generator=generator)
    context = _answer(source.format(logaddexp="LAE").replace("import torch\n", ch15.IN_A_CONTEXT),
                      name)
    with pytest.raises(ExerciseCheckFailed, match=r"contextvars context \(its code names "):
        check(context)
    assert "✅" not in capsys.readouterr().out


def test_numpys_float_constant_is_not_numpy_called(capsys):
    # the fourth read's L2: -np.inf is a Python float; naming it calls nothing of NumPy's
    checks.check_ch15_merge_softmax_states(
        _answer(ch15.RIGHT_ANSWERS["ch15-merge-softmax-states"][-1], "merge_softmax_states"))
    assert "✅ ch15-merge-softmax-states: passed" in capsys.readouterr().out


_TILE_FROM_LIBRARY = """import math
import torch

def flash_tile_step(q, k_tile, v_tile, m, l, acc):
{body}
    m_new = torch.maximum(m, (q @ k_tile.T / math.sqrt(q.shape[-1])).amax(-1))
    l_tile, c = torch.exp(lse - m_new), torch.exp(m - m_new)
    return m_new, l * c + l_tile, acc * c[:, None] + l_tile[:, None] * out
"""


@pytest.mark.parametrize("body, called", [
    # flex_attention hands back the tile's output and its log-normalizer: the whole step
    ("    from torch.nn.attention.flex_attention import flex_attention\n"
     "    out, lse = flex_attention(q[None, None], k_tile[None, None], v_tile[None, None],\n"
     "                              return_lse=True)\n"
     "    out, lse = out[0, 0], lse[0, 0]",
     "torch.nn.attention.flex_attention.flex_attention"),
    # a compiled log-sum-exp and softmax
    ("    s = q @ k_tile.T / math.sqrt(q.shape[-1])\n"
     "    lse, p = torch.compile(lambda x: (x.logsumexp(-1), x.softmax(-1)), backend='eager')(s)\n"
     "    out = p @ v_tile",
     "torch.compile"),
    # the same through dynamo's older spellings of compile
    ("    import torch._dynamo\n"
     "    s = q @ k_tile.T / math.sqrt(q.shape[-1])\n"
     "    lse, p = torch._dynamo.optimize('eager')(lambda x: (x.logsumexp(-1), x.softmax(-1)))(s)\n"
     "    out = p @ v_tile",
     "torch._dynamo.eval_frame.optimize"),
    ("    from torch._dynamo.eval_frame import optimize_assert\n"
     "    s = q @ k_tile.T / math.sqrt(q.shape[-1])\n"
     "    lse, p = optimize_assert('eager')(lambda x: (x.logsumexp(-1), x.softmax(-1)))(s)\n"
     "    out = p @ v_tile",
     "torch._dynamo.eval_frame.optimize_assert")])
def test_a_library_tile_is_refused_by_name(body, called, capsys):
    # refused for what it is (the attention call, the compiler), not for an unrelated module
    # that it happens to reach (both reach torch.distributions' set_default_validate_args)
    answer = _answer(_TILE_FROM_LIBRARY.format(body=body), "flash_tile_step")
    with pytest.raises(ExerciseCheckFailed) as refused:
        checks.check_ch15_flash_tile_step(answer)
    message = str(refused.value)
    assert f"called {called}, which ch15-flash-tile-step does not allow" in message, message
    assert "distributions" not in message, message
    assert "✅" not in capsys.readouterr().out
