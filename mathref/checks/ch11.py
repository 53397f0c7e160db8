"""Checkers for chapter 11: causal masks, scaled dot-product attention, the softmax backward
pass, the parameter count and the forward pass of multi-head attention.

Every expected value comes from PyTorch itself in float64: ``F.scaled_dot_product_attention``,
autograd through ``torch.softmax``, ``nn.MultiheadAttention`` and its parameter count.
"""
import math
import numbers

import torch
import torch.nn.functional as F
from torch import nn

from mathref.checks.line_budget import with_line_budget
from mathref.checks.core import integer, rng
from mathref.checks.core import (CheckFailure, exercise, expect, expect_callable,
                                 expect_tensor_close, without_autograd)

__all__ = ["check_ch11_gqa_backward", "check_ch11_causal_mask", "check_ch11_mha_param_count", "check_ch11_attention",
           "check_ch11_softmax_backward", "check_ch11_multi_head"]

F64 = torch.float64


def _expect_tensor_close(got, want, what, rtol=1e-8, atol=1e-10):
    try:
        expect_tensor_close(got, want, what, rtol=rtol, atol=atol, tensor_only=True)
    except CheckFailure as failure:
        # core's hint measures the error against each entry, and an output entry near 0 (the
        # weights of an attention output cancel) hides a float32 rounding of the terms; here it is
        # measured against the largest entry (the tenth read's L3)
        message = str(failure)
        if ("float32" not in message and isinstance(got, torch.Tensor) and got.is_floating_point()
                and tuple(got.shape) == tuple(want.shape) and torch.isfinite(got).all()):
            size = ((got.to(F64) - want).abs().max() / want.abs().max().clamp_min(1e-300)).item()
            if 1e-9 < size < 1e-5:
                message += (f". The largest difference is {size:.1g} of the largest entry, the size "
                            f"of float32 rounding (about 6e-8): if your code computes in float32 "
                            f"anywhere, compute in float64")
        raise CheckFailure(message) from None


def _randn(*shape, seed):
    return torch.randn(*shape, generator=rng(seed), dtype=F64)


# Lines of Python an answer may run per call (sys.settrace, as chapter 1's checker counts them:
# torch's and mathref's own code is not counted, but code compiled under their file names is,
# since it is not what those files compile to). The derived formulas run as a few tensor
# operations, or a loop over heads or rows of them; each derive exercise has a case with over
# 60,000 entries, so an answer that loops over every entry in Python runs out, as a numerical
# derivative taken entry by entry in Python's own numbers (a complex step, or differences in
# fixed point on Python ints, which no tensor operation sees) must. Under the grader the
# answer runs in another process, which the tracer does not see; there the per-exercise time
# limit stops the slower of them (each perturbation recomputing a row of 4096 keys, or a whole
# forward pass), not an entry-by-entry loop quick enough to finish in time.
_LINE_BUDGET = 50_000


def _run_within_budget(answer, args, what):
    got, endless = with_line_budget(answer, args, budget=_LINE_BUDGET)
    expect(not endless, f"{what}: your function was still running after {_LINE_BUDGET:,} lines "
                        f"of Python. The derived formula is a few tensor operations on whole "
                        f"rows; a loop over every entry in Python (as a numerical derivative "
                        f"taken entry by entry, in complex or fixed-point numbers, needs) is "
                        f"stopped here")
    return got


_SDPA_OPS = ("torch.ops.aten._scaled_dot_product_attention_math",
             "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
             "torch.ops.aten._scaled_dot_product_flash_attention",
             "torch.ops.aten._scaled_dot_product_efficient_attention",
             "torch.ops.aten._scaled_dot_product_cudnn_attention")
_SDPA_BACKWARD_OPS = tuple(f"{name}_backward" for name in _SDPA_OPS[1:])
_MHA_MODULES = ("torch.nn.MultiheadAttention.forward", "mathref.gpt.CausalSelfAttention.forward",
                "mathref.gpt.Block.forward", "mathref.gpt.GPT.forward",
                "torch.nn.functional.multi_head_attention_forward",
                "mathref.attention.MultiHeadAttention.forward",
                "torch._native_multi_head_attention", "torch.ops.aten._native_multi_head_attention",
                # the quantizable twin: a whole multi-head attention of F.linear and softmax
                "torch.ao.nn.quantizable.modules.activation.MultiheadAttention.forward",
                "torch.ao.nn.quantizable.modules.activation.MultiheadAttention._forward_impl")
_SOFTMAX_BACKWARD = ("torch._softmax_backward_data", "torch.ops.aten._softmax_backward_data",
                     "torch._log_softmax_backward_data", "torch.ops.aten._log_softmax_backward_data",
                     "mathref.attention.softmax_backward", "mathref.attention.attention_backward",
                     "mathref.attention.AttentionFunction.backward")


def _call_refusing_causal_bias(answer, args, refusal):
    """answer(*args), with PyTorch's CausalBias named when the answer builds one. Its constructor
    makes a tensor subclass, which fails under the gate's dispatch mode with a RuntimeError about
    the subclass before any Python code of the class runs, so no forbid entry can see it (as in
    chapter 12's ``_call_alibi_matrix``); ``refusal`` says what the exercise makes of it."""
    try:
        return answer(*args)
    except RuntimeError as error:
        if "Tensor subclass CausalBias" not in str(error):
            raise
        raise CheckFailure(f"your solution built torch.nn.attention.bias.CausalBias, PyTorch's "
                           f"causal mask object, {refusal}") from None


@exercise("ch11-causal-mask",
          forbid=("mathref.attention.causal_mask", "mathref.attention.to_additive_mask",
                  "torch.nn.Transformer.generate_square_subsequent_mask",
                  "torch.nn.modules.transformer._generate_square_subsequent_mask",
                  "mathref.positions.alibi_bias",
                  # PyTorch's causal bias objects: ready-made masks (by name, so that the
                  # refusal says so rather than what the gate's modes make of a tensor subclass)
                  "torch.nn.attention.bias.causal_upper_left",
                  "torch.nn.attention.bias.causal_lower_right",
                  "torch.nn.attention.bias.CausalBias._materialize"),
          because="the exercise asks you to build the mask from its definition")
def check_ch11_causal_mask(causal_additive_mask):
    """causal_additive_mask(T): [T, T] float, 0 where j ≤ i and −∞ where j > i."""
    expect_callable(causal_additive_mask, "causal_additive_mask(T)")
    for T in (1, 2, 5, integer(rng(1), 3, 40)):
        got = _call_refusing_causal_bias(
            causal_additive_mask, (T,),
            "which ch11-causal-mask does not allow: the exercise asks you to build the mask from "
            "its definition")
        expect(isinstance(got, torch.Tensor) and got.is_floating_point(),
               f"T={T}: expected a float tensor (additive mask), got "
               f"{getattr(got, 'dtype', type(got).__name__)}")
        expect(tuple(got.shape) == (T, T), f"T={T}: expected shape ({T}, {T}), got "
                                           f"{tuple(got.shape)}")
        for i in range(T):
            for j in range(T):
                v = got[i, j].item()
                if j <= i:
                    expect(v == 0.0, f"T={T}: query {i} must see key {j} (j ≤ i, the diagonal "
                                     f"included), so M[{i}, {j}] = 0; got {v}")
                else:
                    expect(v == -math.inf, f"T={T}: query {i} must not see the future key {j}, "
                                           f"so M[{i}, {j}] = −inf; got {v}")
    return "0 on and below the diagonal, −∞ above: no row is ever fully masked"


def _drawn_heads(gen):
    """(d_model, n_heads, n_kv_heads, bias) drawn: n_kv_heads divides n_heads."""
    h_kv = integer(gen, 1, 5)
    h = h_kv * integer(gen, 1, 5)
    return h * integer(gen, 1, 33), h, h_kv, bool(integer(gen, 0, 2))


def _expect_whole_number(got, what):
    """A count is an int (the tenth read's L4: 288.0 from true division passed)."""
    expect(isinstance(got, numbers.Integral) and not isinstance(got, bool),
           f"{what}: a parameter count is a whole number, so return an int; got {got!r} "
           f"({type(got).__name__}){' (use // rather than /)' if isinstance(got, float) else ''}")


@exercise("ch11-mha-param-count",
          forbid=("mathref.attention.MultiHeadAttention.__init__",
                  "torch.nn.MultiheadAttention.__init__", "torch.nn.Linear.__init__"),
          because="count the parameters from the shapes of W_Q, W_K, W_V, W_O and their biases, "
                  "without building the layer")
def check_ch11_mha_param_count(mha_param_count):
    """mha_param_count(d_model, n_heads, n_kv_heads, bias): parameters of W_Q, W_K, W_V, W_O."""
    expect_callable(mha_param_count, "mha_param_count(d_model, n_heads, n_kv_heads, bias)")
    from mathref.attention import MultiHeadAttention

    for d, h in ((8, 2), (12, 3)):
        ref = nn.MultiheadAttention(d, h, bias=True)
        want = sum(p.numel() for p in ref.parameters())
        got = mha_param_count(d, h, h, True)
        _expect_whole_number(got, f"d_model={d}, {h} heads with biases")
        expect(got == want, f"d_model={d}, {h} heads with biases: nn.MultiheadAttention has "
                            f"{want} parameters, you counted {got}")
    for d, h, h_kv, bias in ((512, 8, 8, False), (768, 12, 12, True), (512, 8, 2, True),
                             (64, 8, 1, False), (96, 6, 3, True), _drawn_heads(rng(2))):
        want = sum(p.numel() for p in MultiHeadAttention(d, h, h_kv, bias=bias).parameters())
        got = mha_param_count(d, h, h_kv, bias)
        _expect_whole_number(got, f"d_model={d}, n_heads={h}, n_kv_heads={h_kv}, bias={bias}")
        expect(got == want, f"d_model={d}, n_heads={h}, n_kv_heads={h_kv}, bias={bias}: "
                            f"expected {want} parameters, got {got}")
    return "4d² + 4d with full heads; grouped K/V heads shrink W_K and W_V to d × H_kv·d_k"


@exercise("ch11-attention",
          forbid=("torch.nn.functional.scaled_dot_product_attention", *_SDPA_OPS, *_MHA_MODULES,
                  "mathref.attention.scaled_dot_product_attention",
                  "mathref.attention.attention_weights", "mathref.attention.AttentionFunction.forward",
                  "mathref.similarity.soft_lookup", "mathref.efficient.flash_attention",
                  "mathref.efficient.FlashAttentionFunction.forward",
                  "torch.nn.attention.flex_attention.flex_attention"),
          because="attention computes softmax(q kᵀ/√d_k + mask) v itself (torch.softmax is allowed)")
def check_ch11_attention(attention):
    """attention(q, k, v, mask=None): softmax(q kᵀ/√d_k + mask) v over the last two dims."""
    expect_callable(attention, "attention(q, k, v, mask)")
    q, k, v = _randn(2, 3, 4, 6, seed=0), _randn(2, 3, 5, 6, seed=1), _randn(2, 3, 5, 7, seed=2)
    _expect_tensor_close(attention(q, k, v, None), F.scaled_dot_product_attention(q, k, v),
                         "4 queries, 5 keys, d_k = 6, d_v = 7, no mask")
    # no head axis: shape (B, T, d_k), so the answer must act on the last two axes, not on 2 and 3
    q3, k3, v3 = _randn(3, 4, 6, seed=6), _randn(3, 5, 6, seed=7), _randn(3, 5, 2, seed=8)
    _expect_tensor_close(attention(q3, k3, v3, None), F.scaled_dot_product_attention(q3, k3, v3),
                         "3-D inputs (B, T, d_k) without a head axis, no mask")
    q, k, v = (_randn(1, 2, 5, 16, seed=s) * 2 for s in (3, 4, 5))
    causal = torch.zeros(5, 5, dtype=F64).masked_fill(
        torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    _expect_tensor_close(attention(q, k, v, causal),
                         F.scaled_dot_product_attention(q, k, v, attn_mask=causal),
                         "5 positions, d_k = 16, causal additive mask")
    # a finite bias (like ALiBi's) shows whether the mask is added after the 1/√d_k scaling
    bias = -0.7 * (torch.arange(5.0)[:, None] - torch.arange(5.0)[None, :]).abs().to(F64)
    _expect_tensor_close(attention(q, k, v, bias),
                         F.scaled_dot_product_attention(q, k, v, attn_mask=bias),
                         "a finite additive bias −0.7·|i − j| (add it after scaling)")
    # scores in the thousands: exp overflows unless the row maximum is subtracted first
    q, k, v = _randn(1, 2, 4, 8, seed=9) * 60, _randn(1, 2, 6, 8, seed=10) * 60, _randn(1, 2, 6, 3, seed=11)
    _expect_tensor_close(attention(q, k, v, None), F.scaled_dot_product_attention(q, k, v),
                         "scores in the thousands (subtract each row's maximum before exp)")
    return "scores scaled by 1/√d_k, mask added after scaling, softmax over keys"


def _expect_close_to_terms(got, want, P, G_P, what, rtol=1e-13, shift=2e-14):
    """Fail unless every entry of ``got`` is within rtol·σ + shift·P_n·max_j |G_j| of ``want``,
    where σ = P_n (|G_n| + Σ_j |G_j| P_j) is the size of the terms that
    G_S_n = P_n (G_n − Σ_j G_j P_j) combines: the exact formula's rounding error is a few 1e-16 σ,
    and a difference quotient's, about 1e-16 |L| / h for every entry, is far more where P_n is
    small. The second term (about 90 float64 epsilons) allows for an exact form that first
    subtracts a constant from each row of G_P (the result does not change, since Σ_j P_j = 1) as
    large as its largest entry: where G_P is uneven such a form is off by up to
    6 ε P_n max_j |G_j| (the chapter 11 delta read found the row-mean form refused by its
    proposed case). Where
    P_n = 0 (masked) both terms are 0, and the entry must be 0, as the formula makes it."""
    scale = P * (G_P.abs() + (G_P.abs() * P).sum(-1, keepdim=True))
    allowed = rtol * scale + shift * P * G_P.abs().amax(-1, keepdim=True)
    off = (got.to(F64) - want).abs()
    bad = off > allowed.clamp_min(torch.finfo(F64).tiny)
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        raise CheckFailure(
            f"{what}: at index {list(i)}, where P = {P[i].item():.3g}, expected {want[i].item():.10g}, "
            f"got {got[i].item():.10g}, off by {off[i].item():.2g}; each entry must be within "
            f"{rtol:g} σ + {shift:g} P_n max_j |G_j| = {allowed[i].item():.2g}, where "
            f"σ = P_n (|G_n| + Σ_j |G_j| P_j) = {scale[i].item():.3g} is the size of the terms the "
            f"formula combines. The exact formula is, however small P_n and however uneven G_P; "
            f"a numerical derivative is not, since its rounding error does not shrink with P_n, "
            f"or (a difference along G_P) its step must shrink where G_P is large. Derive the "
            f"formula")


def _uneven_rows(seed):
    """Scores S [8, 64] and an upstream gradient G_P that is 10⁶ times a normal draw on two keys
    per row whose weight P is below e^-12 = 6e-6 (each score set 12 to 16 below the largest of
    the row's other keys), and a normal draw elsewhere. The softmax Jacobian is symmetric, so G_S is also the derivative of
    softmax(S + t G_P) at t = 0; a difference along G_P must keep t·10⁶ small here, far smaller
    than a step that suits the other cases, and its rounding error, relative to P_n, grows as
    the step shrinks."""
    gen = rng(seed)
    S = torch.randn(8, 64, generator=gen, dtype=F64)
    G_P = torch.randn(8, 64, generator=gen, dtype=F64)
    cols = torch.rand(8, 64, generator=gen).argsort(-1)[:, :2]
    drop = 12 + 4 * torch.rand(8, 2, generator=gen, dtype=F64)
    top = S.scatter(-1, cols, float("-inf")).amax(-1, keepdim=True)   # over the other keys
    S.scatter_(-1, cols, top - drop)                      # so P < e^-12 = 6e-6 there
    G_P.scatter_(-1, cols, 1e6 * torch.randn(8, 2, generator=gen, dtype=F64))
    return S, G_P


def _softmax_backward_cases():
    """(S, G_P, what, rtol): the cases of ch11-softmax-backward, drawn from :func:`rng`."""
    cases = [(_randn(4, 5, seed=0), "a [4, 5] batch of rows"),
             (_randn(2, 3, 4, 6, seed=1) * 3, "scores of shape [2, 3, 4, 6]")]
    masked = _randn(4, 4, seed=2).masked_fill(torch.ones(4, 4, dtype=torch.bool).triu(1),
                                              float("-inf"))
    cases.append((masked, "causally masked [4, 4] scores (P = 0 above the diagonal)"))
    cases.append((_randn(16, 4096, seed=3) * 3, "16 rows of 4096 scores (a long context)"))
    cases = [(S, _randn(*S.shape, seed=10 + i), what, 1e-13) for i, (S, what) in enumerate(cases)]
    # (where G_P is uneven, an exact form that first subtracts its row maximum is off by up to
    # 6 ε P_n max_j |G_j|, which rtol 1e-13 does not allow: only the second test is tight there)
    cases.append((*_uneven_rows(4), "8 rows of 64 scores where G_P is about 10⁶ on two keys per "
                                    "row whose weight is below 1e-5", 1e-8))
    return cases


@exercise("ch11-softmax-backward",
          forbid=(*_SOFTMAX_BACKWARD, "torch.softmax", "torch.Tensor.softmax",
                  "torch.nn.functional.softmax", "torch.ops.aten._softmax",
                  "mathref.losses.softmax_jacobian"),
          because="the exercise asks you to derive the softmax backward pass, not to call one, "
                  "to take a ready-made Jacobian or to differentiate the softmax you are denied "
                  "numerically")
def check_ch11_softmax_backward(softmax_backward_rows):
    """softmax_backward_rows(P, G_P): G_S = ∂L/∂S for P = softmax(S) along the last dim, derived:
    the answer runs under ``without_autograd``, and the softmax itself, the library backward
    passes and mathref.losses.softmax_jacobian are refused.

    Each entry must match autograd to rtol 1e-13 / atol 1e-14 (1e-8 / 1e-9 on the last case)
    and, besides, be within 1e-13 σ + 2e-14 P_n max_j |G_j| of it, where
    σ = P_n (|G_n| + Σ_j |G_j| P_j) is the size of the terms the formula combines
    (:func:`_expect_close_to_terms`). The exact formula's rounding error is relative to P_n:
    in the sixteen forms we tried (P recomputed from log P, an explicit Jacobian and a sum over
    pairs among them; the notebook's inputs and 20 draws of the grader's, though the four slowest
    forms only on three of them for the 4096-wide rows) it is below 1e-14 σ on the first four
    cases, and up to 5e-14 σ for forms that first subtract G_P's row maximum or minimum (the
    result does not change, since Σ_j P_j = 1); on the last case, where G_P is uneven, those
    forms are off by up to 6 ε P_n max_j |G_j| (ε = 2.2e-16), a fifteenth of what the second
    term allows, and a form that subtracts the row mean by about 1e-11 σ.

    A difference quotient of a hand-written softmax is not exact in that way: it reads
    ∂L/∂S_n off the change of the loss L = Σ_j G_j P_j, a change of about h·|G_S_n| ≤ h·σ, and
    its rounding error, about 1e-16·|L|/h, is the same for every entry n. Wherever P_n is
    small it is many times 1e-13 σ, whatever the stencil's order and step (a 16th-order central
    difference with h = 0.1 meets rtol 1e-13 / atol 1e-14 on every case, but is off by 1e-9 σ
    on the scores of shape [2, 3, 4, 6] and by 7e-6 σ on the 4096-wide rows); decimal,
    fractions and complex tensors, where a difference could go further, are refused.

    A difference of the softmax along G_P is another matter (the chapter 11 delta read's N1):
    the Jacobian diag(p) − ppᵀ is symmetric, so the derivative of softmax(S + t G_P) at t = 0 is
    G_S, and its rounding error is relative to P_n too. A 24th- to 64th-order central difference
    with h = 0.05 passes the first four cases on the notebook's inputs. The last case refuses it
    with any one step for every call: there G_P is 10⁶ times a normal draw on keys of weight
    below 6e-6, so t·10⁶ must stay small. On the notebook's inputs, orders 4 to 64, steps 1e-9
    to 0.1, the steps that pass the first four cases (1e-2 to 6e-2 for P e^{tG} / Σ P e^{tG};
    from 3e-3 for a form that subtracts the row's largest tG inside exp) are 5·10³ to 10⁴ times
    those that pass the last (3e-8 to 6e-7). A difference whose step shrinks with the spread of
    G_P (row by row, or call by call) is not refused. On the last case its error, in the forms
    we tried (orders 8 to 64, a step of 0.05 to 0.3 over the row's largest |G_j|; the notebook's
    inputs and four grader draws), is 7 to 57 ε P_n max_j |G_j|, and 20 to 60 ε for those that
    pass all five cases: several times what the shifted exact forms need (up to 6 ε), within
    the 90 ε the second term allows. A second term of 13.5 ε refused every one of them and
    passed the shifted forms, but at 22.5 ε one (order 64, step 0.15) passed all five cases on
    every input set, so a tuned difference would likely pass any bound the shifted forms meet;
    the term is left at 90 ε, and tests/test_checks_ch11.py keeps one such difference as
    accepted, so that a change of the bound shows up.

    The fourth case has 16 rows of 4096 scores, and each call may run 50,000 lines of Python
    (:data:`_LINE_BUDGET`): a loop over the entries in Python's own complex numbers or ints is
    stopped in the notebook; under the grader only the time limit applies, which stops a
    complex step or fixed-point difference that recomputes a 4096-wide row per entry, but not
    one that reuses each row's sums (that one is not refused there)."""
    expect_callable(softmax_backward_rows, "softmax_backward_rows(P, G_P)")
    for S, G_P, what, tol in _softmax_backward_cases():
        S = S.clone().requires_grad_()
        P = torch.softmax(S, dim=-1)
        (grad,) = torch.autograd.grad(P, S, G_P)
        got = _run_within_budget(without_autograd(softmax_backward_rows), (P.detach(), G_P), what)
        _expect_tensor_close(got, grad, what, rtol=tol, atol=tol / 10)
        _expect_close_to_terms(got, grad, P.detach(), G_P, what)
    return "G_S = P ⊙ (G_P − rowsum(G_P ⊙ P)), the vector–Jacobian product of diag(p) − ppᵀ"


@exercise("ch11-multi-head",
          # (flex_attention by name too: the gate refuses it anyway, but by a helper it runs)
          forbid=(*_MHA_MODULES, "torch.nn.attention.flex_attention.flex_attention"),
          because="the exercise asks you to split the heads, attend and recombine them yourself "
                  "(torch.softmax or F.scaled_dot_product_attention per head is allowed)")
def check_ch11_multi_head(multi_head_attention):
    """multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads): causal multi-head attention,
    weights in the math layout (y = x W), no biases, checked against nn.MultiheadAttention."""
    expect_callable(multi_head_attention, "multi_head_attention(x, W_Q, W_K, W_V, W_O, n_heads)")
    for d, h, T, seed in ((8, 2, 5, 0), (12, 4, 6, 1), (6, 1, 3, 2)):
        W_Q, W_K, W_V, W_O = (_randn(d, d, seed=seed * 10 + i) / math.sqrt(d) for i in range(4))
        x = _randn(2, T, d, seed=seed * 10 + 5) * 2
        mha = nn.MultiheadAttention(d, h, bias=False, batch_first=True).to(F64)
        with torch.no_grad():   # nn.Linear layout (out, in) = transpose of the math layout
            mha.in_proj_weight.copy_(torch.cat([W_Q.T, W_K.T, W_V.T]))
            mha.out_proj.weight.copy_(W_O.T)
        blocked = torch.ones(T, T, dtype=torch.bool).triu(1)   # True = blocked in nn.MHA
        want, _ = mha(x, x, x, attn_mask=blocked, need_weights=False)
        got = _call_refusing_causal_bias(
            multi_head_attention, (x, W_Q, W_K, W_V, W_O, h),
            "which cannot be built while the check watches every tensor operation (it is a "
            "tensor subclass): for the causal mask pass is_causal=True to "
            "F.scaled_dot_product_attention, or a mask tensor")
        _expect_tensor_close(got, want.detach(), f"d_model={d}, {h} heads, T={T}")
    return "heads of d_k = d_model/H, scale 1/√d_k, concatenated, W_O applied once"


@exercise("ch11-gqa-backward",
          forbid=(*_SOFTMAX_BACKWARD, *_SDPA_BACKWARD_OPS,
                  "torch.nn.functional.scaled_dot_product_attention", *_SDPA_OPS,
                  "mathref.attention.scaled_dot_product_attention",
                  "mathref.efficient.flash_attention_backward",
                  "mathref.efficient.FlashAttentionFunction.backward"),
          because="the exercise asks you to derive the gradients (torch.softmax and repeat_kv for "
                  "the forward pass are allowed)")
def check_ch11_gqa_backward(gqa_attention_backward):
    """gqa_attention_backward(q, k, v, G_O): the gradients (G_Q, G_K, G_V) of causal grouped-query
    attention, q [B, H, T, d], k [B, H_kv, T, d], v [B, H_kv, T, d_v], query head h reading
    key/value head h // (H / H_kv), computed without autograd (the answer runs under
    ``without_autograd``); the oracle is autograd through F.scaled_dot_product_attention
    with enable_gqa=True. Each gradient is checked on its own, G_V first, to rtol 1e-13 and
    atol 1e-14: the exact formulas are off by ≤ 2e-15 in float64, a 4th-order finite-difference
    stencil on a hand-written forward pass by ≥ 7e-13. The last case has T = 256 (98,304
    input entries), and each call may run 50,000 lines of Python (:data:`_LINE_BUDGET`): a
    complex step or fixed-point difference in Python's own numbers, entry by entry, is stopped
    in the notebook; under the grader only the time limit applies, which stops one that
    recomputes the forward pass for each entry."""
    expect_callable(gqa_attention_backward, "gqa_attention_backward(q, k, v, G_O)")
    gen = rng(23)
    for (B, H, H_kv, T, d, d_v), what in [((1, 2, 2, 4, 3, 2), "ordinary multi-head (H_kv = H = 2)"),
                                          ((2, 4, 2, 5, 4, 3), "H = 4 query heads sharing H_kv = 2"),
                                          ((1, 6, 1, 3, 2, 2), "multi-query (H_kv = 1, H = 6)"),
                                          ((1, 8, 2, 256, 32, 32), "T = 256, H = 8, H_kv = 2")]:
        q = torch.randn(B, H, T, d, generator=gen, dtype=torch.float64)
        k = torch.randn(B, H_kv, T, d, generator=gen, dtype=torch.float64)
        v = torch.randn(B, H_kv, T, d_v, generator=gen, dtype=torch.float64)
        G_O = torch.randn(B, H, T, d_v, generator=gen, dtype=torch.float64)
        qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))
        F.scaled_dot_product_attention(qa, ka, va, is_causal=True, enable_gqa=True).backward(G_O)
        got = _run_within_budget(without_autograd(gqa_attention_backward),
                                 (q.clone(), k.clone(), v.clone(), G_O.clone()), what)
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            raise CheckFailure(f"{what}: expected a tuple (G_Q, G_K, G_V), got {type(got).__name__}")
        for name, g, want in [("G_V", got[2], va.grad), ("G_K", got[1], ka.grad),
                              ("G_Q", got[0], qa.grad)]:
            if isinstance(g, torch.Tensor) and tuple(g.shape) != tuple(want.shape):
                raise CheckFailure(f"{what}: {name} should have the shape of its input, "
                                   f"{tuple(want.shape)}, got {tuple(g.shape)}")
            expect_tensor_close(g, want, f"{what}: {name} against autograd", rtol=1e-13,
                                atol=1e-14, tensor_only=True)
    return ("G_V = Pᵀ G_O and G_K = c G_Sᵀ Q summed over the query heads of each group, "
            "G_Q = c G_S K per head")
