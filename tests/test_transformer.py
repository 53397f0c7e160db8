"""mathref.transformer: FFN, encoder and decoder blocks against nn.TransformerEncoderLayer /
nn.TransformerDecoderLayer in float64, the encoder–decoder model, decoding, counting."""
import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from mathref.gpt import Block, GPTConfig
from mathref.transformer import (ACTIVATIONS, FUSED_ACTIVATIONS, DecoderBlock, EncoderBlock,
                                 FeedForward, Seq2SeqTransformer, beam_search, block_flops,
                                 block_parameters, default_d_ff, greedy_decode,
                                 key_padding_mask, shift_right)

D, H, DFF = 16, 4, 40


def rand(*shape, seed=0, device="cpu"):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(device)


# ---------------------------------------------------------------------------- activations / FFN
@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_course_activations_equal_torch(float64_device, name):
    x = rand(1000, device=float64_device) * 4
    torch_version = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu,
                     "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
                     "relu2": lambda t: F.relu(t) ** 2}[name]
    torch.testing.assert_close(ACTIVATIONS[name](x), torch_version(x), atol=1e-13, rtol=1e-12)
    torch.testing.assert_close(FUSED_ACTIVATIONS[name](x), torch_version(x), atol=1e-13, rtol=1e-12)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "relu2", "silu", "swiglu"])
def test_ffn_readable_equals_fused_and_formula(float64_device, activation):
    torch.manual_seed(0)
    ffn = FeedForward(D, 24, activation).double().to(float64_device)
    x = rand(2, 5, D, device=float64_device)
    fused = ffn(x)
    ffn.fused = False
    torch.testing.assert_close(ffn(x), fused, atol=1e-12, rtol=1e-10)
    W1, b1 = ffn.fc.weight.T, ffn.fc.bias
    W2, b2 = ffn.proj.weight.T, ffn.proj.bias
    if activation == "swiglu":
        h = F.silu(x @ ffn.gate.weight.T + ffn.gate.bias) * (x @ W1 + b1)
    else:
        phi = {"relu": F.relu, "gelu": F.gelu, "silu": F.silu, "relu2": lambda t: F.relu(t) ** 2,
               "gelu_tanh": lambda t: F.gelu(t, approximate="tanh")}[activation]
        h = phi(x @ W1 + b1)
    torch.testing.assert_close(fused, h @ W2 + b2, atol=1e-12, rtol=1e-10)


def test_ffn_acts_on_each_token_alone(float64_device):
    torch.manual_seed(1)
    ffn = FeedForward(D, DFF, "gelu").double().to(float64_device)
    x = rand(3, 7, D, device=float64_device)
    y = ffn(x)
    perm = torch.randperm(7, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(ffn(x[:, perm]), y[:, perm], atol=1e-13, rtol=0)
    x2 = x.clone()
    x2[:, 3] += 1.0
    y2 = ffn(x2)
    assert (y2[:, 3] - y[:, 3]).abs().max() > 1e-3
    torch.testing.assert_close(y2[:, [0, 1, 2, 4, 5, 6]], y[:, [0, 1, 2, 4, 5, 6]], atol=0, rtol=0)
    single = torch.stack([ffn(x[:, t:t + 1])[:, 0] for t in range(7)], dim=1)
    torch.testing.assert_close(single, y, atol=1e-13, rtol=0)


def test_swiglu_width_keeps_parameter_count():
    for d in (64, 96, 512, 768, 4096):
        d_ff = default_d_ff(d, "swiglu")
        assert d_ff % 8 == 0 and 0 <= d_ff - 8 * d / 3 < 8
        assert abs(3 * d * d_ff - 2 * d * 4 * d) <= 3 * d * 8


def test_ffn_rejects_unknown_activation():
    with pytest.raises(ValueError, match="activation"):
        FeedForward(8, activation="tanh")


# ---------------------------------------------------------------------------- blocks vs torch
def torch_masks(B, T, S, device):
    """Padding: sequence b has T - b real tokens (torch: True = padding)."""
    src_pad = torch.zeros(B, S, dtype=torch.bool, device=device)
    for b in range(B):
        src_pad[b, S - b:] = True
    return src_pad


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_block_equals_torch(float64_device, norm_first, activation):
    torch.manual_seed(3)
    layer = nn.TransformerEncoderLayer(D, H, DFF, dropout=0.1, activation=activation,
                                       batch_first=True, norm_first=norm_first)
    with torch.no_grad():   # non-trivial norm parameters, so that copying them is tested
        for p in (layer.norm1.weight, layer.norm2.weight):
            p.add_(0.3 * torch.randn_like(p))
        for p in (layer.norm1.bias, layer.norm2.bias):
            p.add_(0.3 * torch.randn_like(p))
    layer = layer.double().to(float64_device).eval()
    ours = EncoderBlock.from_torch(layer).eval()
    assert ours.norm_first == norm_first and ours.ffn.activation == activation
    B, T = 3, 6
    x = rand(B, T, D, device=float64_device).requires_grad_()
    pad = torch_masks(B, T, T, float64_device)
    want = layer(x, src_key_padding_mask=pad)           # grad enabled: torch's slow path
    got = ours(x, mask=~pad[:, None, None, :])
    real = ~pad
    torch.testing.assert_close(got[real], want[real], atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(ours(x), layer(x), atol=1e-12, rtol=1e-10)
    # same gradients w.r.t. the input
    g1, = torch.autograd.grad(got[real].square().sum(), x)
    g2, = torch.autograd.grad(want[real].square().sum(), x)
    torch.testing.assert_close(g1, g2, atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_decoder_block_equals_torch(float64_device, norm_first, activation):
    torch.manual_seed(4)
    layer = nn.TransformerDecoderLayer(D, H, DFF, dropout=0.1, activation=activation,
                                       batch_first=True, norm_first=norm_first)
    with torch.no_grad():
        for n in (layer.norm1, layer.norm2, layer.norm3):
            n.weight.add_(0.3 * torch.randn_like(n.weight))
            n.bias.add_(0.3 * torch.randn_like(n.bias))
    layer = layer.double().to(float64_device).eval()
    ours = DecoderBlock.from_torch(layer).eval()
    B, T, S = 3, 5, 7
    y = rand(B, T, D, seed=1, device=float64_device).requires_grad_()
    memory = rand(B, S, D, seed=2, device=float64_device).requires_grad_()
    src_pad = torch_masks(B, T, S, float64_device)
    causal = nn.Transformer.generate_square_subsequent_mask(T, device=float64_device,
                                                            dtype=torch.float64)
    want = layer(y, memory, tgt_mask=causal, tgt_is_causal=True,
                 memory_key_padding_mask=src_pad)
    got = ours(y, memory, memory_mask=~src_pad[:, None, None, :])
    torch.testing.assert_close(got, want, atol=1e-12, rtol=1e-10)
    gy1, gm1 = torch.autograd.grad(got.square().sum(), (y, memory))
    gy2, gm2 = torch.autograd.grad(want.square().sum(), (y, memory))
    torch.testing.assert_close(gy1, gy2, atol=1e-10, rtol=1e-9)
    torch.testing.assert_close(gm1, gm2, atol=1e-10, rtol=1e-9)
    assert gm1[src_pad].abs().max() == 0          # padded memory rows receive no gradient


def test_decoder_block_is_causal_and_sees_all_memory(float64_device):
    torch.manual_seed(5)
    block = DecoderBlock(D, H, DFF).double().to(float64_device).eval()
    y, m = rand(2, 6, D, device=float64_device), rand(2, 4, D, seed=1, device=float64_device)
    out = block(y, m)
    y2 = y.clone()
    y2[:, 4] += 1
    out2 = block(y2, m)
    torch.testing.assert_close(out2[:, :4], out[:, :4], atol=1e-13, rtol=0)
    m2 = m.clone()
    m2[:, -1] += 1                      # the last source token reaches every target position
    assert ((block(y, m2) - out).abs().amax(dim=-1) > 1e-6).all()


def test_rms_norm_and_validation():
    block = EncoderBlock(D, H, norm="rms")
    assert type(block.norm1).__name__ == "RMSNorm"
    assert sum(p.numel() for p in block.parameters()) == block_parameters(D, norm="rms")
    with pytest.raises(ValueError, match="norm"):
        EncoderBlock(D, H, norm="batch")
    with pytest.raises(ValueError, match=r"\[B, T, 16\]"):
        block(torch.randn(2, 3, 8))
    dec = DecoderBlock(D, H)
    with pytest.raises(ValueError, match="memory"):
        dec(torch.randn(2, 3, D))
    with pytest.raises(ValueError, match="batch_first"):
        EncoderBlock.from_torch(nn.TransformerEncoderLayer(D, H, DFF))


def test_gpt_block_is_the_prenorm_decoder_block_without_cross_attention(float64_device):
    torch.manual_seed(6)
    cfg = GPTConfig(d_model=D, n_head=H, style="classic", activation="gelu")
    gpt_block = Block(cfg).double().to(float64_device).eval()
    ours = DecoderBlock(D, H, activation="gelu", cross_attention=False).double().to(float64_device)
    sd = gpt_block.state_dict()
    mapping = {"ln_1": "norm1", "attn": "self_attn", "ln_2": "norm3", "mlp": "ffn"}
    ours.load_state_dict({mapping[k.split(".")[0]] + k[k.index("."):]: v for k, v in sd.items()})
    x = rand(2, 9, D, device=float64_device)
    torch.testing.assert_close(ours.eval()(x), gpt_block(x), atol=1e-12, rtol=1e-10)


# ---------------------------------------------------------------------------- counting
@pytest.mark.parametrize("activation, d_ff", [("relu", None), ("gelu", 48), ("swiglu", None)])
@pytest.mark.parametrize("norm, bias", [("layer", True), ("rms", False), ("layer", False)])
def test_parameter_counts_equal_numel(activation, d_ff, norm, bias):
    for kind, cls in (("encoder", EncoderBlock), ("decoder", DecoderBlock)):
        block = cls(D, H, d_ff, activation=activation, norm=norm, bias=bias)
        n = sum(p.numel() for p in block.parameters())
        assert n == block_parameters(D, d_ff, kind, activation, bias, norm)
    gpt = DecoderBlock(D, H, d_ff, activation=activation, norm=norm, bias=bias, cross_attention=False)
    assert sum(p.numel() for p in gpt.parameters()) == block_parameters(D, d_ff, "decoder_only",
                                                                         activation, bias, norm)


def test_parameter_counts_equal_torch_layers():
    d = 32
    enc = nn.TransformerEncoderLayer(d, 4, 4 * d, batch_first=True)
    dec = nn.TransformerDecoderLayer(d, 4, 4 * d, batch_first=True)
    assert sum(p.numel() for p in enc.parameters()) == block_parameters(d) == 12 * d * d + 13 * d
    assert sum(p.numel() for p in dec.parameters()) == block_parameters(d, kind="decoder") \
        == 16 * d * d + 19 * d


@pytest.mark.parametrize("activation", ["relu", "swiglu"])
def test_flops_equal_flop_counter(activation):
    d, T, S = 32, 10, 7
    torch.manual_seed(0)
    enc = EncoderBlock(d, 4, activation=activation).eval()
    dec = DecoderBlock(d, 4, activation=activation).eval()
    x, m = torch.randn(1, T, d), torch.randn(1, S, d)
    with torch.no_grad():
        with FlopCounterMode(display=False) as fc:
            enc(x)
        assert fc.get_total_flops() == block_flops(d, T, kind="encoder", activation=activation)
        with FlopCounterMode(display=False) as fc:
            dec(x, m)
        assert fc.get_total_flops() == block_flops(d, T, kind="decoder", S=S, activation=activation)


# ---------------------------------------------------------------------------- model and decoding
def test_shift_right_and_padding_mask():
    y = torch.tensor([[5, 6, 7, 2], [8, 2, 0, 0]])
    assert shift_right(y, 1).tolist() == [[1, 5, 6, 7], [1, 8, 2, 0]]
    assert key_padding_mask(y, 0)[:, 0, 0].tolist() == [[True] * 4, [True, True, False, False]]
    with pytest.raises(ValueError):
        shift_right(torch.tensor([1, 2]), 1)


def tiny_model(device, seed=0, **kw):
    torch.manual_seed(seed)
    base = dict(d_model=D, n_heads=H, n_enc_layers=2, n_dec_layers=2, max_len=12)
    base.update(kw)
    return Seq2SeqTransformer(7, 6, **base).double().to(device).eval()


def test_seq2seq_ignores_padding_and_is_causal(float64_device):
    model = tiny_model(float64_device)
    src = torch.tensor([[3, 4, 5, 0, 0]], device=float64_device)
    tgt = torch.tensor([[1, 3, 4, 5]], device=float64_device)
    a = model(src, tgt)
    b = model(src[:, :3], tgt)                       # the same source without padding
    torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)
    tgt2 = tgt.clone()
    tgt2[0, 2] = 5
    torch.testing.assert_close(model(src, tgt2)[:, :2], a[:, :2], atol=1e-12, rtol=0)


def test_greedy_decode_matches_step_by_step_argmax(float64_device):
    model = tiny_model(float64_device, seed=1)
    src = torch.tensor([[3, 4, 5, 6], [6, 5, 0, 0]], device=float64_device)
    out = greedy_decode(model, src, bos_id=1, eos_id=2, max_len=5)
    for b in range(2):
        seq = [1]
        for _ in range(5):
            logits = model(src[b:b + 1], torch.tensor([seq], device=float64_device))
            seq.append(int(logits[0, -1].argmax()))
            if seq[-1] == 2:
                break
        got = out[b].tolist()[:len(seq) - 1]
        assert got == seq[1:]


def test_beam_search_is_exact_with_a_wide_beam_and_greedy_with_one(float64_device):
    model = tiny_model(float64_device, seed=2)
    src = torch.tensor([3, 4, 5], device=float64_device)
    V, L, bos, eos = 6, 3, 1, 2

    def score(seq):
        tgt = torch.tensor([[bos] + seq[:-1]], device=float64_device)
        logp = F.log_softmax(model(src[None], tgt)[0], dim=-1)
        return sum(logp[t, tok].item() for t, tok in enumerate(seq))

    candidates = set()
    for seq in itertools.product(range(V), repeat=L):     # every completion, cut at ⟨eos⟩
        seq = list(seq)
        if eos in seq:
            seq = seq[:seq.index(eos) + 1]
        candidates.add(tuple(seq))
    best = max(candidates, key=lambda s: score(list(s)))
    ids, s = beam_search(model, src, bos, eos, max_len=L, beam_size=V ** L)
    assert tuple(ids) == best
    assert math.isclose(s, score(list(best)), rel_tol=1e-9)
    greedy = greedy_decode(model, src[None], bos, eos, max_len=L)[0].tolist()
    ids1, _ = beam_search(model, src, bos, eos, max_len=L, beam_size=1)
    assert ids1 == greedy[:len(ids1)]
