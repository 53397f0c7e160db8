"""Checkers for chapter 13: the Transformer block.

Expected values come from independent sources: PyTorch's own layers (parameter counts of
``nn.TransformerDecoderLayer``), exact integer arithmetic, and mathref's EncoderBlock (tested
against ``nn.TransformerEncoderLayer`` in tests/test_transformer.py).
"""
import math

import torch
from torch import nn

from mathref.checks.core import integer, rng, seed_global
from mathref.checks.core import CheckFailure, exercise, expect, expect_callable

__all__ = ["check_ch13_shift_right", "check_ch13_swiglu_width", "check_ch13_decoder_params",
           "check_ch13_pre_norm_block", "check_ch13_cross_attention"]

# What computes attention whole, refused where an exercise asks for it written out (chapters 13,
# 14 and 15): PyTorch's function and module, their kernels (the composite ops by the object a
# direct torch.ops call hands to a TorchFunctionMode, the others as aten ops, which the
# TorchDispatchMode sees however they were reached), and mathref's attention, blocks and
# FlashAttention.
ATTENTION_CALLS = (
    "torch.nn.functional.scaled_dot_product_attention",
    "torch._ops.ops.aten.scaled_dot_product_attention",
    "torch._ops.ops.aten.scaled_dot_product_attention.default",
    "torch._ops.ops.aten._scaled_dot_product_attention_math",
    "torch._ops.ops.aten._scaled_dot_product_attention_math.default",
    "torch.ops.aten._scaled_dot_product_flash_attention_for_cpu",
    "torch.ops.aten._scaled_dot_product_flash_attention",
    "torch.ops.aten._scaled_dot_product_efficient_attention",
    "torch.ops.aten._scaled_dot_product_cudnn_attention",
    "torch.ops.aten._scaled_dot_product_fused_attention_overrideable",
    "torch.ops.aten._native_multi_head_attention",
    "torch._native_multi_head_attention",
    "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.MultiheadAttention.forward",
    # (the quantizable twin: a whole multi-head attention written with F.linear and softmax)
    "torch.ao.nn.quantizable.modules.activation.MultiheadAttention.forward",
    "torch.ao.nn.quantizable.modules.activation.MultiheadAttention._forward_impl",
    "mathref.attention.attention_weights",
    "mathref.attention.scaled_dot_product_attention",
    "mathref.attention.MultiHeadAttention.forward",
    "mathref.attention.AttentionFunction.forward",
    "mathref.gpt.CausalSelfAttention.forward",
    "mathref.transformer.EncoderBlock.forward",
    "mathref.transformer.DecoderBlock.forward",
    "mathref.efficient.flash_attention",
    "mathref.efficient.FlashAttentionFunction.forward",
)


@exercise("ch13-shift-right", forbid=("mathref.transformer.shift_right",),
          because="build the shifted input from `targets` yourself")
def check_ch13_shift_right(shift_right):
    """shift_right(targets, bos_id) → (bos, y_1, …, y_{T−1}) per row, same shape [B, T]."""
    expect_callable(shift_right, "shift_right(targets, bos_id)")
    cases = [(torch.tensor([[5, 6, 7, 2]]), 1),
             (torch.tensor([[3, 4, 2, 0, 0], [9, 8, 7, 6, 2]]), 1),
             (torch.randint(3, 13, (4, 7), generator=rng(0)), 12)]
    for targets, bos in cases:
        before = targets.clone()
        got = shift_right(targets, bos)
        expect(isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}")
        expect(torch.equal(targets, before), "your function changed `targets` in place")
        want = torch.cat([torch.full((targets.shape[0], 1), bos), targets[:, :-1]], dim=1)
        expect(tuple(got.shape) == tuple(want.shape),
               f"for targets of shape {tuple(targets.shape)} the decoder input must have the "
               f"same shape {tuple(want.shape)}, got {tuple(got.shape)}")
        expect(got.dtype == targets.dtype, f"token ids: keep targets' dtype "
               f"({str(targets.dtype).replace('torch.', '')}), got "
               f"{str(got.dtype).replace('torch.', '')}")
        expect(bool((got[:, 0] == bos).all()), f"every row must start with bos_id={bos}")
        expect(torch.equal(got, want),
               f"for targets {targets[0].tolist()} (first row) expected {want[0].tolist()}, "
               f"got {got[0].tolist()}")
    return "position t reads y_<t and predicts y_t"


@exercise("ch13-swiglu-width", forbid=("mathref.transformer.default_d_ff",),
          because="round 8·d_model/3 up to a multiple of multiple_of yourself")
def check_ch13_swiglu_width(swiglu_d_ff):
    """swiglu_d_ff(d_model, multiple_of): the smallest multiple of multiple_of ≥ 8·d_model/3,
    in integers (the last case is beyond float64's exact integers: float division rounds the
    remainder away there)."""
    expect_callable(swiglu_d_ff, "swiglu_d_ff(d_model, multiple_of)")
    # (4, 1): 8d/3 = 10.67, so rounding ⌊8d/3⌋ = 10 up to a multiple of 1 misses 11
    for d, m in ((4096, 256), (512, 8), (768, 64), (96, 1), (4, 1), (64, 8), (300, 100),
                 (5120, 256), (3 * 2 ** 50 + 1, 1),
                 (integer(rng(1), 8, 10000), 2 ** integer(rng(2), 0, 9))):
        want = -(-8 * d // (3 * m)) * m            # ceil(8d / 3m) · m, in integers
        got = swiglu_d_ff(d, m)
        value = _as_int(got)           # (compared as integers: a float32 2^53 "equals" 2^53 + 3)
        hint = ""
        if 8 * d >= 2 ** 53 and _equals(got, math.ceil(8 * d / (3 * m)) * m):
            hint = (" (8·d_model/3 is beyond float64's exact integers here, so floating-point "
                    "division rounds the remainder away: use integer arithmetic, e.g. -(-a // b) "
                    "for ⌈a/b⌉)")
        elif value is not None and value == -(-(8 * d // 3) // m) * m and value != want:
            hint = (" (that rounds ⌊8·d_model/3⌋ up to a multiple, not 8·d_model/3 itself: "
                    "round the quotient 8·d_model/(3·multiple_of) up)")
        elif value is None:
            hint = (" (return an integer, a Python int or an integer tensor" +
                    (": a float cannot hold every integer this large)" if _is_float(got)
                     else f", not {type(got).__name__})"))
        expect(value == want, f"d_model={d}, multiple_of={m}: expected {want}, got {got}{hint}")
    return "LLaMA-7B's 11008 = 256 · ⌈8·4096/(3·256)⌉"


def _as_int(got):
    """``got`` as a Python int if it is an integer (an int, a NumPy integer, an integer tensor of
    one element), else None: a float of any precision is not, whatever value it compares equal to."""
    if isinstance(got, bool):
        return None
    if isinstance(got, int):
        return int(got)                # (a subclass's own __eq__ must not decide the comparison)
    if isinstance(got, torch.Tensor):
        ok = got.numel() == 1 and not (got.is_floating_point() or got.is_complex()
                                       or got.dtype == torch.bool)
        return int(got.item()) if ok else None
    if type(got).__module__ == "numpy" and getattr(getattr(got, "dtype", None), "kind", "") in "iu" \
            and getattr(got, "size", 0) == 1:
        return int(got)
    return None


def _is_float(got):
    """Whether ``got`` is a floating-point number: a Python, NumPy or tensor float."""
    if isinstance(got, torch.Tensor):
        return got.is_floating_point()
    return isinstance(got, float) or getattr(getattr(got, "dtype", None), "kind", "") == "f"


def _equals(got, value):
    """Whether ``got == value`` holds, for an answer of any type (False if it cannot compare)."""
    try:
        return bool(got == value)
    except Exception:
        return False


@exercise("ch13-decoder-params",
          forbid=("mathref.transformer.block_parameters",
                  "mathref.transformer.DecoderBlock.__init__",
                  "torch.nn.TransformerDecoderLayer.__init__",
                  "torch.nn.TransformerEncoderLayer.__init__",
                  "torch.nn.MultiheadAttention.__init__", "torch.nn.Linear.__init__",
                  "torch.nn.LayerNorm.__init__", "torch.nn.Module.modules",
                  "torch.nn.Module.named_modules",
                  "torch.nn.Module.parameters", "torch.nn.Module.named_parameters",
                  "torch.nn.Module.state_dict",
                  "torch.Tensor.numel", "torch.Tensor.nelement", "torch.numel"),
          because="count the parameters from the shapes of the weights, biases and norms, "
                  "without building the layer")
def check_ch13_decoder_params(decoder_block_parameters):
    """decoder_block_parameters(d_model, d_ff): numel of nn.TransformerDecoderLayer."""
    expect_callable(decoder_block_parameters, "decoder_block_parameters(d_model, d_ff)")
    gen = rng(3)
    h = integer(gen, 1, 9)
    drawn = (h * integer(gen, 1, 17), integer(gen, 1, 300), h)
    for d, d_ff, h in ((512, 2048, 8), (64, 256, 4), (48, 100, 3), (8, 8, 2), drawn):
        layer = nn.TransformerDecoderLayer(d, h, d_ff, batch_first=True)
        want = sum(p.numel() for p in layer.parameters())
        got = decoder_block_parameters(d, d_ff)
        missing = {4 * d * d + 4 * d: " (one attention is missing: a decoder block has "
                                      "self-attention and cross-attention, 4d² + 4d each)",
                   4 * d * d + 6 * d: " (the cross-attention and its LayerNorm are missing: "
                                      "a decoder block has two attentions and three norms)",
                   2 * d: " (a decoder block has three LayerNorms, each with γ and β)",
                   9 * d + d_ff: " (the biases are missing: 4d per attention, d_ff + d in the "
                                 "FFN)"}
        hint = missing.get(want - got, "") if isinstance(got, int) else ""
        expect(got == want, f"d_model={d}, d_ff={d_ff}: nn.TransformerDecoderLayer has "
               f"{want} parameters, you counted {got}{hint}")
    return "16d² + 19d when d_ff = 4d"


def _pre_norm_diagnosis(got, x, block):
    """Which common mistake ``got`` is, if it is one of them."""
    attn, ffn, n1, n2 = block.self_attn, block.ffn, block.norm1, block.norm2
    with torch.no_grad():
        post = n1(x + attn(x))
        after_attn = x + attn(n1(x))
        mistakes = (
            (n2(post + ffn(post)), "this is the post-norm block, Norm(x + Sublayer(x)); pre-norm "
                                   "normalizes only the sub-layer's input: x + Sublayer(Norm(x))"),
            (ffn(n2(attn(n1(x)))), "the residual connections are missing: add each sub-layer's "
                                   "output to its input"),
            (after_attn + ffn(n1(after_attn)), "the second sub-layer must use norm2, not norm1"),
            (x + attn(n2(x)) + ffn(n1(x + attn(n2(x)))),
             "the norms are swapped: norm1 goes before attention, norm2 before the FFN"),
            (x + ffn(n2(after_attn)), "attention's update is missing from the output: the FFN's "
                                      "output is added to h = x + Attn(Norm₁(x)), not to x"),
            (x + attn(n1(x)) + ffn(n1(x)), "this is the parallel block of 13.11: here the "
                                            "FFN must read x after attention's update, "
                                            "x + Attn(Norm₁(x)), through norm2"),
            (x + attn(n1(x)) + ffn(n2(x)), "this is a parallel block (13.11): here the FFN must "
                                           "read x after attention's update, x + Attn(Norm₁(x))"),
            (ffn(n2(n1(x) + attn(n1(x)))) + n2(n1(x) + attn(n1(x))),
             "the residual stream itself was normalized: only the sub-layer's input goes "
             "through the norm, x is added as it is"),
        )
    for output, why in mistakes:
        if got.shape == output.shape and torch.allclose(got.to(output.dtype), output,
                                                        rtol=1e-9, atol=1e-9):
            return f" ({why})"
    return ""


@exercise("ch13-pre-norm-block",
          forbid=("mathref.transformer.EncoderBlock.forward",
                  "mathref.transformer.DecoderBlock.forward", "mathref.gpt.Block.forward",
                  "torch.nn.TransformerEncoderLayer.forward",
                  "torch.nn.TransformerDecoderLayer.forward",
                  "torch._transformer_encoder_layer_fwd"),
          because="apply the two residual sub-layers yourself, with the parts you are given")
def check_ch13_pre_norm_block(pre_norm_block):
    """pre_norm_block(x, attn, ffn, norm1, norm2): the pre-norm encoder block."""
    expect_callable(pre_norm_block, "pre_norm_block(x, attn, ffn, norm1, norm2)")
    from mathref.transformer import EncoderBlock
    for seed in (0, 1):
        seed_global(seed)
        block = EncoderBlock(8, 2, 16, norm_first=True).double().eval()
        with torch.no_grad():          # distinct norm parameters, so swapping them shows
            for p in (block.norm1.weight, block.norm2.weight, block.norm1.bias, block.norm2.bias):
                p.add_(0.5 * torch.randn_like(p))
        x = torch.randn(2, 5, 8, dtype=torch.float64) * 3 + 1
        with torch.no_grad():
            want = block(x)
            before = x.clone()
            got = pre_norm_block(x, block.self_attn, block.ffn, block.norm1, block.norm2)
        expect(torch.equal(x, before), "your function changed `x` in place (`x += …` or "
               "`x.add_(…)`): do not modify `x`, write `x = x + …` to make a new tensor")
        expect(isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(want.shape),
               f"expected a tensor of shape {tuple(want.shape)}")
        expect(got.dtype == want.dtype, f"your result is {got.dtype}, but `x` and the sub-layers "
               f"are {want.dtype}: keep the computation in the input's dtype (a cast to a "
               f"lower precision changes the result)")
        err = (got - want).abs().max().item()
        if not err < 1e-10:            # (a nan error fails too)
            raise CheckFailure(f"largest difference from the pre-norm block is {err:.3g}"
                               + _pre_norm_diagnosis(got, x, block))
    return "x + Attn(Norm₁(x)), then x + FFN(Norm₂(x))"


_TRANSPOSED = ("the four matrices are used as xW (y @ W_q, memory @ W_k, memory @ W_v, … @ W_o), "
               "not as xWᵀ, the way nn.Linear applies the weight it stores")


def _cross_output_diagnosis(out, weights, memory, W, H):
    """Why the output is off when the weights are right: W_v or W_o used as xWᵀ."""
    B, T, d = out.shape
    S = memory.shape[1]
    for W_v, W_o in ((W[2].T, W[3].T), (W[2].T, W[3]), (W[2], W[3].T)):
        v = (memory @ W_v).view(B, S, H, d // H).transpose(1, 2)
        if torch.allclose(out, (weights @ v).transpose(1, 2).reshape(B, T, d) @ W_o,
                          rtol=1e-9, atol=1e-12):
            return f" ({_TRANSPOSED})"
    return " (values from the memory, heads concatenated, then W_o)"


def _cross_weights_diagnosis(weights, y, memory, W, H, allowed):
    """Why the weights are off, when they are those of a common mistake."""
    B, T, d = y.shape
    S, d_k = memory.shape[1], d // H
    blocked = ~allowed[:, None, None, :]

    def weights_with(scale=d_k, split=(H, d_k), causal=False, transposed=""):
        W_q = W[0].T if "q" in transposed else W[0]
        W_k = W[1].T if "k" in transposed else W[1]
        q = (y @ W_q).view(B, T, *split)
        k = (memory @ W_k).view(B, S, *split)
        if split != (H, d_k):                     # [B, L, d_k, H]: heads interleaved
            q, k = q.transpose(-1, -2), k.transpose(-1, -2)
        scores = q.transpose(1, 2) @ k.permute(0, 2, 3, 1) / scale ** 0.5
        scores = scores.masked_fill(blocked, float("-inf"))
        if causal:
            scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool).triu(1), float("-inf"))
        return scores.softmax(-1)

    mistakes = ((dict(causal=True), "cross-attention has no causal mask: every target position "
                                    "may attend to every real source position"),
                (dict(scale=d), "the scale is 1/√d_k with d_k = d / n_heads, not 1/√d"),
                (dict(split=(d_k, H)), "head h owns the consecutive columns h·d_k … (h+1)·d_k − 1: "
                                       "split with view(B, L, n_heads, d_k)"),
                # (both, or either one alone: each is the same slip)
                (dict(transposed="qk"), _TRANSPOSED), (dict(transposed="q"), _TRANSPOSED),
                (dict(transposed="k"), _TRANSPOSED))
    for options, why in mistakes:
        if torch.allclose(weights, weights_with(**options), rtol=1e-9, atol=1e-12):
            return f" ({why})"
    return " (check the scale 1/√d_k, the head split and the mask)"


@exercise("ch13-cross-attention", forbid=ATTENTION_CALLS,
          because="compute the scores, the masked softmax and the weighted values yourself")
def check_ch13_cross_attention(cross_attention):
    """cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, src_allowed) → (out, weights),
    compared with torch's nn.MultiheadAttention (no biases, key_padding_mask = ~src_allowed)."""
    expect_callable(cross_attention, "cross_attention(y, memory, W_q, W_k, W_v, W_o, n_heads, "
                                     "src_allowed)")
    gen = rng(0)
    for B, T, S, d, H in ((1, 3, 5, 4, 1), (2, 4, 6, 8, 2), (3, 5, 4, 12, 4), (2, 6, 7, 16, 4)):
        y = torch.randn(B, T, d, dtype=torch.float64, generator=gen)
        memory = torch.randn(B, S, d, dtype=torch.float64, generator=gen)
        W = [torch.randn(d, d, dtype=torch.float64, generator=gen) / d ** 0.5 for _ in range(4)]
        lengths = torch.tensor([S - (b % 3) for b in range(B)])
        allowed = torch.arange(S) < lengths[:, None]
        if S == 7:     # the last case: padding anywhere (at the start, in the middle), not
            # only at the end, as a left-padded batch or a packed one has it
            allowed = torch.rand(B, S, generator=gen) < 0.6
            allowed[:, 0] = False
            allowed[torch.arange(B), torch.randint(1, S, (B,), generator=gen)] = True
        torch_mha = nn.MultiheadAttention(d, H, bias=False, batch_first=True).double()
        with torch.no_grad():
            torch_mha.in_proj_weight.copy_(torch.cat([W[0].T, W[1].T, W[2].T]))
            torch_mha.out_proj.weight.copy_(W[3].T)
            want_out, want_w = torch_mha(y, memory, memory, key_padding_mask=~allowed,
                                         need_weights=True, average_attn_weights=False)
        got = cross_attention(y, memory, *W, H, allowed)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               "return the pair (out, weights)")
        low = sorted({str(t.dtype).replace("torch.", "") for t in got
                      if isinstance(t, torch.Tensor) and t.dtype != torch.float64})
        out, weights = (torch.as_tensor(t).detach().to(torch.float64) for t in got)
        case = f"B={B}, T={T}, S={S}, d={d}, H={H}"
        from_y = " (keys and values come from `memory`: S columns, one per source position)" \
            if tuple(weights.shape) == (B, H, T, T) else ""
        expect(tuple(weights.shape) == (B, H, T, S), f"{case}: weights must have shape "
               f"{(B, H, T, S)} = [B, H, T, S], got {tuple(weights.shape)}{from_y}")
        if tuple(out.shape) == tuple(want_out.shape):
            close32 = (torch.allclose(weights, want_w, rtol=1e-5, atol=1e-5)
                       and torch.allclose(out, want_out, rtol=1e-5,
                                          atol=1e-5 * float(want_out.abs().max())))
            exact = ((weights - want_w).abs().max().item() < 1e-9
                     and (out - want_out).abs().max().item() < 1e-9)
            if close32 and not exact:
                raise CheckFailure(
                    f"{case}: your result is right to float32 precision only"
                    + (f" (it comes back as {', '.join(low)})" if low else "")
                    + ": compute in the inputs' dtype (float64)")
        blocked = (~allowed)[:, None, None, :].expand_as(weights)
        expect(bool((weights[blocked] == 0).all()), f"{case}: padding keys must get weight 0")
        row_sums = weights.sum(-1)
        expect(bool(((row_sums - 1).abs() < 1e-9).all()), f"{case}: each query's weights must sum "
               f"to 1 over the source positions (got sums from {row_sums.min().item():.4g} to "
               f"{row_sums.max().item():.4g})")
        err_w = (weights - want_w).abs().max().item()
        if not err_w < 1e-9:           # (a nan error fails too)
            raise CheckFailure(f"{case}: attention weights differ from nn.MultiheadAttention's by "
                               f"up to {err_w:.3g}"
                               + _cross_weights_diagnosis(weights, y, memory, W, H, allowed))
        expect(tuple(out.shape) == (B, T, d), f"{case}: out must have shape {(B, T, d)}, got "
               f"{tuple(out.shape)}")
        err = (out - want_out).abs().max().item()
        if not err < 1e-9:
            raise CheckFailure(f"{case}: the weights are right but the output differs by up to "
                               f"{err:.3g}" + _cross_output_diagnosis(out, weights, memory, W, H))
    return "Q from the decoder, K and V from the memory, T × S weights, padding masked"
