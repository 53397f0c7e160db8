"""Chapter 11's checkers: refusals that name their real cause (the third read found two that
named another), and the line budget of the two derive exercises."""
import os
import sys

import pytest
import torch
import torch.functional

from mathref.checks import CHECKS, ExerciseCheckFailed
from tests.exercises import ch11
from tests.notebooks import all_exercises, read, reference_answer

PATHS = {label: path for path, label in all_exercises()}


@pytest.mark.parametrize("label, index, name", [
    ("ch11-causal-mask", 4, "torch.nn.attention.bias.causal_upper_left"),
    ("ch11-multi-head", 0, "torch.nn.attention.flex_attention.flex_attention"),
])
def test_a_ready_made_mask_or_attention_is_refused_by_its_own_name(label, index, name):
    answer = reference_answer(read(PATHS[label]), label, ch11.SHORTCUTS[label][index])
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS[label](answer)
    assert f"your solution called {name}" in failure.value.message, failure.value.message


def test_a_derivative_taken_entry_by_entry_in_python_is_stopped_by_the_line_budget():
    """The fixed-point differences on Python ints (quick to reach the budget): the message says
    why, on the large case."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-softmax-backward"](ch11.softmax_bw_python_int_fixed_point)
    message = failure.value.message
    assert "16 rows of 4096 scores" in message and "50,000 lines of Python" in message, message


def _softmax_backward_in_float32(P, G_P, cast_back):
    P32, G32 = P.float(), G_P.float()
    G_S = P32 * (G32 - (G32 * P32).sum(-1, keepdim=True))
    return G_S.double() if cast_back else G_S


@pytest.mark.parametrize("cast_back", [False, True], ids=["float32-result", "cast-back"])
def test_a_float32_answer_is_told_it_is_float32_rounding(cast_back):
    """The fifth read's L5: a float32 softmax backward was refused with a bare mismatch of about
    3e-8 that named no cause."""
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-softmax-backward"](lambda P, G_P: _softmax_backward_in_float32(P, G_P, cast_back))
    message = failure.value.message
    assert "float32" in message and "compute in float64" in message, message


INTERLEAVED_HEADS = (
    "import torch.nn.functional as F\n\n"
    "def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):\n"
    "    B, T, d = x.shape\n"
    "    heads = lambda y: y.view(B, T, d // n_heads, n_heads).permute(0, 3, 1, 2)\n"
    "    o = F.scaled_dot_product_attention(heads(x @ W_Q), heads(x @ W_K), heads(x @ W_V),\n"
    "                                       is_causal=True)\n"
    "    return o.transpose(1, 2).reshape(B, T, d) @ W_O\n")


def test_interleaved_heads_through_sdpa_fail_on_their_values():
    """The seventh read's M1: heads taken as every H-th column reach SDPA's math path
    (aten._safe_softmax), which was refused as an operator; now allowed, the wrong split is
    caught by its values."""
    answer = reference_answer(read(PATHS["ch11-multi-head"]), "ch11-multi-head", INTERLEAVED_HEADS)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-multi-head"](answer)
    message = failure.value.message
    assert "expected" in message and "does not allow" not in message, message


COMPLEX_STEP_ROWS = (
    "def softmax_backward_rows(P, G_P):\n"
    "    h, n, out = 1e-20, P.shape[-1], []\n"
    "    for p, g in zip(P.reshape(-1, n).tolist(), G_P.reshape(-1, n).tolist()):\n"
    "        Z, L, row = sum(p), sum(gj * pj for gj, pj in zip(g, p)), []\n"
    "        for j in range(n):\n"
    "            c = complex(1.0, h)\n"
    "            row.append(((L - g[j] * p[j] + g[j] * p[j] * c) / (Z - p[j] + p[j] * c)).imag / h)\n"
    "        out.append(row)\n"
    "    return torch.tensor(out, dtype=P.dtype).reshape(P.shape)\n")


def _under_library_name(module, filename):
    namespace = module.__dict__ if filename is None else {"torch": torch}
    exec(compile(COMPLEX_STEP_ROWS, filename or module.__file__, "exec"), namespace)
    return namespace["softmax_backward_rows"]


@pytest.mark.parametrize("where", ["a new torch/ file name", "torch.functional itself",
                                   "mathref.attention itself"])
def test_a_complex_step_compiled_under_a_library_file_name_is_stopped(where):
    """The sixth and eighth reads' L2(b)/L4: a per-entry complex step compiled under a file name
    inside torch/ had its lines taken for PyTorch's and passed. The budget now counts library
    lines only for code that the named file on disk compiles to."""
    import mathref.attention
    module, filename = {"a new torch/ file name": (torch, os.path.join(os.path.dirname(torch.__file__),
                                                                        "_my_helpers.py")),
                        "torch.functional itself": (torch.functional, None),
                        "mathref.attention itself": (mathref.attention, None)}[where]
    answer = _under_library_name(module, filename)
    try:
        with pytest.raises(ExerciseCheckFailed) as failure:
            CHECKS["ch11-softmax-backward"](answer)
    finally:
        module.__dict__.pop("softmax_backward_rows", None)
    assert "50,000 lines of Python" in failure.value.message, failure.value.message


def test_a_complex_step_under_an_import_machinery_name_or_run_at_import_is_stopped(tmp_path):
    """The ninth read's L1: compiled under "<frozen importlib._bootstrap>" (its own frame was taken
    for an import), or run at the top of a module imported from a folder named site-packages
    (any such folder was taken for the installed packages'): both passed, both are now counted."""
    namespace = {"torch": torch}
    exec(compile(COMPLEX_STEP_ROWS, "<frozen importlib._bootstrap>", "exec"), namespace)
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-softmax-backward"](namespace["softmax_backward_rows"])
    assert "50,000 lines of Python" in failure.value.message, failure.value.message

    folder = tmp_path / "site-packages"
    folder.mkdir()
    (folder / "rows_at_import.py").write_text(
        "import builtins\nimport torch\n" + COMPLEX_STEP_ROWS
        + "RESULT = softmax_backward_rows(*builtins.ROWS_ARGS)\n")
    sys.path.insert(0, str(folder))

    def at_import(P, G_P):
        import builtins
        import importlib
        builtins.ROWS_ARGS = (P, G_P)
        sys.modules.pop("rows_at_import", None)
        return importlib.import_module("rows_at_import").RESULT

    try:
        with pytest.raises(ExerciseCheckFailed) as failure:
            CHECKS["ch11-softmax-backward"](at_import)
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("rows_at_import", None)
    assert "50,000 lines of Python" in failure.value.message, failure.value.message


def test_a_high_order_stencil_is_refused_by_the_size_of_the_terms():
    """The tenth read's M1: a 16th-order central difference of a hand-written softmax met rtol
    1e-13 / atol 1e-14 on every case and passed. Each entry must now also be within 1e-13 of
    P_n (|G_n| + Σ_j |G_j| P_j), which the exact formula meets however small P_n and a
    difference quotient of the loss does not: it is refused on the scores of shape [2, 3, 4, 6],
    where it still meets the old tolerance."""
    from mathref.checks.core import rng
    S = (torch.randn(2, 3, 4, 6, generator=rng(1), dtype=torch.float64) * 3).requires_grad_()
    P = torch.softmax(S, -1)
    G_P = torch.randn(S.shape, generator=rng(11), dtype=torch.float64)
    (want,) = torch.autograd.grad(P, S, G_P)
    got = ch11.softmax_bw_sixteenth_order_stencil(P.detach(), G_P)
    assert torch.isclose(got, want, rtol=1e-13, atol=1e-14).all()     # the old tolerance: met
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-softmax-backward"](ch11.softmax_bw_sixteenth_order_stencil)
    message = failure.value.message
    assert "scores of shape [2, 3, 4, 6]" in message and "P_n (|G_n| + Σ_j |G_j| P_j)" in message, message


@pytest.mark.parametrize("cast_back", [False, True], ids=["float32-result", "cast-back"])
def test_attention_in_float32_is_told_it_is_float32_rounding(cast_back):
    """The tenth read's L3: attention computed in float32 and cast back was refused with
    "(ratio 1); largest difference 1.35e-07" and no cause, since core's hint measures the error
    against each entry and one entry of the output is near 0."""
    import math

    def attention(q, k, v, mask=None):
        s = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(q.shape[-1])
        if mask is not None:
            s = s + mask.float()
        out = torch.softmax(s, -1) @ v.float()
        return out.to(q.dtype) if cast_back else out

    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-attention"](attention)
    message = failure.value.message
    assert "float32" in message and "compute in float64" in message, message


def test_a_parameter_count_must_be_an_int():
    """The tenth read's L4: true division (d_model / n_heads) gave 288.0, which passed."""
    def mha_param_count(d_model, n_heads, n_kv_heads, bias):
        d_kv = n_kv_heads * d_model / n_heads
        return 2 * d_model * d_model + 2 * d_model * d_kv + ((2 * d_model + 2 * d_kv) if bias else 0)

    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-mha-param-count"](mha_param_count)
    message = failure.value.message
    assert "return an int" in message and "288.0" in message and "//" in message, message


@pytest.mark.parametrize("answer", [ch11.softmax_bw_jvp_along_g, ch11.softmax_bw_jvp_along_g_stable],
                         ids=["P-exp-tG", "max-subtracted"])
def test_a_difference_of_the_softmax_along_g_p_is_refused_where_g_p_is_uneven(answer):
    """The chapter 11 delta read's N1: the softmax Jacobian is symmetric, so G_S is the derivative
    of softmax(S + t G_P) at t = 0, and a high-order central difference of it along G_P is right
    to rtol 1e-13 and within 1e-13 σ on the first four cases (its rounding error is relative to
    P_n); it passed. The case where G_P is about 10⁶ on keys of weight below 1e-5 refuses it: a
    step that suits the other rows overflows there, or is far off."""
    from mathref.checks.ch11 import _softmax_backward_cases
    for S, G_P, what, _ in _softmax_backward_cases()[:4]:
        S = S.clone().requires_grad_()
        P = torch.softmax(S, -1)
        (want,) = torch.autograd.grad(P, S, G_P)
        got = answer(P.detach(), G_P)
        assert torch.isclose(got, want, rtol=1e-13, atol=1e-14).all(), what
        scale = P.detach() * (G_P.abs() + (G_P.abs() * P.detach()).sum(-1, keepdim=True))
        assert ((got - want).abs() <= 1e-13 * scale).all(), what
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-softmax-backward"](answer)
    assert "G_P is about 10⁶ on two keys per row" in failure.value.message, failure.value.message


def test_pytorchs_causal_bias_object_is_named_not_reported_as_a_runtime_error():
    """As chapter 12's ch12-alibi-matrix (its third read, L4): CausalBias's constructor makes a
    tensor subclass, which fails under the gate's dispatch mode before any Python code of the
    class runs, so the refusal read "your code raised RuntimeError: Creating a new Tensor subclass
    CausalBias ...". ch11-causal-mask now names the object; ch11-multi-head, where a causal mask
    object passed to F.scaled_dot_product_attention gives right numbers, says why it cannot run
    and what to pass instead."""
    import math
    import torch.nn.functional as F
    from torch.nn.attention import bias

    def via_causal_bias(T):
        keep = bias.CausalBias(bias.CausalVariant.UPPER_LEFT, T, T)._materialize()
        return torch.zeros(T, T).masked_fill(~keep, float("-inf"))

    def via_lower_right_method(T):
        keep = bias.CausalBias(bias.CausalVariant.LOWER_RIGHT, T, T)._lower_right(torch.device("cpu"))
        return torch.zeros(T, T).masked_fill(~keep, float("-inf"))

    want = torch.zeros(5, 5).masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    for answer in (via_causal_bias, via_lower_right_method):   # right numbers when run plainly
        torch.testing.assert_close(answer(5), want, rtol=0, atol=0)
        with pytest.raises(ExerciseCheckFailed) as failure:
            CHECKS["ch11-causal-mask"](answer)
        message = failure.value.message
        assert "your solution built torch.nn.attention.bias.CausalBias" in message, message
        assert "RuntimeError" not in message and "build the mask from its definition" in message, message

    def multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads):
        B, T, d = x.shape
        heads = lambda y: y.view(B, T, n_heads, d // n_heads).transpose(1, 2)
        o = F.scaled_dot_product_attention(heads(x @ W_Q), heads(x @ W_K), heads(x @ W_V),
                                           attn_mask=bias.causal_lower_right(T, T))
        return o.transpose(1, 2).reshape(B, T, d) @ W_O

    x, W = torch.randn(2, 5, 8, dtype=torch.float64), torch.randn(4, 8, 8, dtype=torch.float64) / math.sqrt(8)
    B, T, d = x.shape
    heads = lambda y: y.view(B, T, 2, 4).transpose(1, 2)
    plain = F.scaled_dot_product_attention(heads(x @ W[0]), heads(x @ W[1]), heads(x @ W[2]), is_causal=True)
    torch.testing.assert_close(multi_head_attention(x, *W, 2),
                               plain.transpose(1, 2).reshape(B, T, d) @ W[3])
    with pytest.raises(ExerciseCheckFailed) as failure:
        CHECKS["ch11-multi-head"](multi_head_attention)
    message = failure.value.message
    assert "your solution built torch.nn.attention.bias.CausalBias" in message, message
    assert "RuntimeError" not in message and "is_causal=True" in message, message


def test_a_difference_along_g_p_with_a_step_per_row_passes_as_the_docstring_says(capsys):
    """The chapter 11 delta read's L1: a central difference of the softmax along G_P whose step
    shrinks with each row's largest |G_j| is accepted by design (the checker's docstring: its
    error, 20 to 60 ε P_n max_j |G_j| on the last case, is within the 90 ε the bound keeps for
    the exact forms that shift G_P first). Kept as accepted, so that a tightening of the bound
    shows up here rather than unnoticed."""
    def per_row_step(P, G_P):
        h = 0.1 / G_P.abs().amax(-1, keepdim=True)
        return ch11.softmax_bw_jvp_along_g(P, G_P, p=12, h=h)

    CHECKS["ch11-softmax-backward"](per_row_step)           # raises ExerciseCheckFailed if refused
    assert "ch11-softmax-backward: passed" in capsys.readouterr().out
