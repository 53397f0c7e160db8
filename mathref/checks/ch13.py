"""Checkers for chapter 13: the Transformer block.

Expected values come from independent sources: PyTorch's own layers (parameter counts of
``nn.TransformerDecoderLayer``), exact integer arithmetic, and mathref's EncoderBlock (tested
against ``nn.TransformerEncoderLayer`` in tests/test_transformer.py).
"""
import torch
from torch import nn

from mathref.checks.core import exercise, expect, expect_callable

__all__ = ["check_ch13_shift_right", "check_ch13_swiglu_width", "check_ch13_decoder_params",
           "check_ch13_pre_norm_block"]


@exercise("ch13-shift-right")
def check_ch13_shift_right(shift_right):
    """shift_right(targets, bos_id) → (bos, y_1, …, y_{T−1}) per row, same shape [B, T]."""
    expect_callable(shift_right, "shift_right(targets, bos_id)")
    cases = [(torch.tensor([[5, 6, 7, 2]]), 1),
             (torch.tensor([[3, 4, 2, 0, 0], [9, 8, 7, 6, 2]]), 1),
             (torch.randint(3, 13, (4, 7), generator=torch.Generator().manual_seed(0)), 12)]
    for targets, bos in cases:
        before = targets.clone()
        got = shift_right(targets, bos)
        expect(isinstance(got, torch.Tensor), f"expected a tensor, got {type(got).__name__}")
        expect(torch.equal(targets, before), "your function changed `targets` in place")
        want = torch.cat([torch.full((targets.shape[0], 1), bos), targets[:, :-1]], dim=1)
        expect(tuple(got.shape) == tuple(want.shape),
               f"for targets of shape {tuple(targets.shape)} the decoder input must have the "
               f"same shape {tuple(want.shape)}, got {tuple(got.shape)}")
        expect(bool((got[:, 0] == bos).all()), f"every row must start with bos_id={bos}")
        expect(torch.equal(got.long(), want),
               f"for targets {targets[0].tolist()} (first row) expected {want[0].tolist()}, "
               f"got {got[0].tolist()}")
    return "position t reads y_<t and predicts y_t"


@exercise("ch13-swiglu-width")
def check_ch13_swiglu_width(swiglu_d_ff):
    """swiglu_d_ff(d_model, multiple_of): the smallest multiple of multiple_of ≥ 8·d_model/3."""
    expect_callable(swiglu_d_ff, "swiglu_d_ff(d_model, multiple_of)")
    for d, m in ((4096, 256), (512, 8), (768, 64), (96, 1), (64, 8), (300, 100), (5120, 256)):
        want = -(-8 * d // (3 * m)) * m            # ceil(8d / 3m) · m, in integers
        got = swiglu_d_ff(d, m)
        expect(got == want, f"d_model={d}, multiple_of={m}: expected {want}, got {got}")
    return "LLaMA-7B's 11008 = 256 · ⌈8·4096/(3·256)⌉"


@exercise("ch13-decoder-params")
def check_ch13_decoder_params(decoder_block_parameters):
    """decoder_block_parameters(d_model, d_ff): numel of nn.TransformerDecoderLayer."""
    expect_callable(decoder_block_parameters, "decoder_block_parameters(d_model, d_ff)")
    for d, d_ff, h in ((512, 2048, 8), (64, 256, 4), (48, 100, 3), (8, 8, 2)):
        layer = nn.TransformerDecoderLayer(d, h, d_ff, batch_first=True)
        want = sum(p.numel() for p in layer.parameters())
        got = decoder_block_parameters(d, d_ff)
        expect(got == want, f"d_model={d}, d_ff={d_ff}: nn.TransformerDecoderLayer has "
               f"{want} parameters, you counted {got}")
    return "16d² + 19d when d_ff = 4d"


@exercise("ch13-pre-norm-block")
def check_ch13_pre_norm_block(pre_norm_block):
    """pre_norm_block(x, attn, ffn, norm1, norm2): the pre-norm encoder block."""
    expect_callable(pre_norm_block, "pre_norm_block(x, attn, ffn, norm1, norm2)")
    from mathref.transformer import EncoderBlock
    for seed in (0, 1):
        torch.manual_seed(seed)
        block = EncoderBlock(8, 2, 16, norm_first=True).double().eval()
        with torch.no_grad():          # distinct norm parameters, so swapping them shows
            for p in (block.norm1.weight, block.norm2.weight, block.norm1.bias, block.norm2.bias):
                p.add_(0.5 * torch.randn_like(p))
        x = torch.randn(2, 5, 8, dtype=torch.float64) * 3 + 1
        with torch.no_grad():
            want = block(x)
            got = pre_norm_block(x, block.self_attn, block.ffn, block.norm1, block.norm2)
        expect(isinstance(got, torch.Tensor) and tuple(got.shape) == tuple(want.shape),
               f"expected a tensor of shape {tuple(want.shape)}")
        err = (got - want).abs().max().item()
        expect(err < 1e-10, f"largest difference from the pre-norm block is {err:.3g}")
    return "x + Attn(Norm₁(x)), then x + FFN(Norm₂(x))"
