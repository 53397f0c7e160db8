"""mathref.attention against F.scaled_dot_product_attention, nn.MultiheadAttention, autograd."""
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mathref import attention as A


def qkv(device, B=2, H=3, T=5, S=5, d=4, H_kv=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    H_kv = H if H_kv is None else H_kv
    q = torch.randn(B, H, T, d, generator=g, dtype=torch.float64)
    k = torch.randn(B, H_kv, S, d, generator=g, dtype=torch.float64)
    v = torch.randn(B, H_kv, S, d + 1, generator=g, dtype=torch.float64)
    return q.to(device), k.to(device), v.to(device)


def test_causal_mask_blocks_only_the_future(device):
    m = A.causal_mask(4, device=device)
    expected = torch.triu(torch.full((4, 4), float("-inf")), diagonal=1)
    assert torch.equal(m.cpu(), expected)
    # decode: 2 new queries over 5 keys see keys ≤ 3 and ≤ 4 (bottom-right aligned)
    m = A.causal_mask(2, 5).isfinite()
    assert m.tolist() == [[True, True, True, True, False], [True, True, True, True, True]]
    with pytest.raises(ValueError, match="T ≤ S"):
        A.causal_mask(5, 2)


def test_matches_sdpa_without_mask(float64_device):
    q, k, v = qkv(float64_device)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v),
                               F.scaled_dot_product_attention(q, k, v), atol=1e-12, rtol=1e-12)


def test_matches_sdpa_causal(float64_device):
    q, k, v = qkv(float64_device)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, is_causal=True),
                               atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_matches_sdpa_with_mask(float64_device, kind):
    q, k, v = qkv(float64_device, T=4, S=6)
    g = torch.Generator().manual_seed(1)
    allowed = torch.rand(2, 1, 4, 6, generator=g) > 0.4
    allowed[..., 0] = True  # no fully blocked row here
    allowed = allowed.to(float64_device)
    mask = allowed if kind == "bool" else A.to_additive_mask(allowed, dtype=torch.float64)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, mask=mask),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
                               atol=1e-12, rtol=1e-12)


def test_decode_mask_matches_explicit_bottom_right_mask(float64_device):
    q, k, v = qkv(float64_device, T=2, S=6)
    explicit = torch.ones(2, 6, dtype=torch.bool, device=float64_device).tril(diagonal=4)
    torch.testing.assert_close(A.scaled_dot_product_attention(q, k, v, is_causal=True),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=explicit),
                               atol=1e-12, rtol=1e-12)


def test_fully_masked_rows_are_zero_not_nan(float64_device):
    q, k, v = qkv(float64_device, T=3, S=3)
    allowed = torch.tensor([[True, False, False], [False, False, False], [True, True, True]],
                           device=float64_device)
    out, w = A.scaled_dot_product_attention(q, k, v, mask=allowed, return_weights=True)
    assert torch.isfinite(out).all() and (out[:, :, 1] == 0).all() and (w[:, :, 1] == 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=allowed),
                               atol=1e-12, rtol=1e-12)


def test_weights_rows_sum_to_one_and_use_sqrt_dk(float64_device):
    q, k, _ = qkv(float64_device)
    w = A.attention_weights(q, k)
    torch.testing.assert_close(w.sum(-1), torch.ones_like(w.sum(-1)))
    manual = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    torch.testing.assert_close(w, manual, atol=1e-14, rtol=0)


def test_grouped_query_attention_matches_sdpa(float64_device):
    q, k, v = qkv(float64_device, H=6, H_kv=2)
    ours = A.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(ours, ref, atol=1e-12, rtol=1e-12)
    with pytest.raises(ValueError, match="enable_gqa"):
        A.scaled_dot_product_attention(q, k, v)


def test_three_dim_inputs_broadcast_their_batch_like_sdpa(float64_device):
    # axis −3 of a 3-D call is a batch: a size of 1 broadcasts (it is not a head mismatch)
    g = torch.Generator(device=float64_device).manual_seed(5)
    many = [torch.randn(4, 5, 3, dtype=torch.float64, device=float64_device, generator=g) for _ in range(3)]
    one = [torch.randn(1, 5, 3, dtype=torch.float64, device=float64_device, generator=g) for _ in range(3)]
    for q, k, v in ((many[0], one[1], one[2]), (one[0], many[1], many[2])):
        ours = A.scaled_dot_product_attention(q, k, v, is_causal=True)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert ours.shape == ref.shape == (4, 5, 3)
        torch.testing.assert_close(ours, ref, atol=1e-12, rtol=1e-12)


def test_hand_backward_matches_autograd_and_passes_gradcheck(float64_device):
    q, k, v = qkv(float64_device, B=1, H=2, T=4, S=4, d=3)
    gO = torch.randn(1, 2, 4, 4, dtype=torch.float64, device=float64_device)
    qa, ka, va = (t.clone().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(qa, ka, va, is_causal=True)
    out.backward(gO)
    w = A.attention_weights(q, k, is_causal=True)
    gq, gk, gv = A.attention_backward(q, k, v, w, gO)
    for ours, ref in ((gq, qa.grad), (gk, ka.grad), (gv, va.grad)):
        torch.testing.assert_close(ours, ref, atol=1e-12, rtol=1e-10)
    inputs = tuple(t.clone().requires_grad_() for t in (q, k, v))
    assert torch.autograd.gradcheck(lambda a, b, c: A.AttentionFunction.apply(a, b, c, None, True),
                                    inputs)


def test_softmax_backward_is_the_jacobian_product(float64_device):
    s = torch.randn(3, 5, dtype=torch.float64, device=float64_device)
    g = torch.randn(3, 5, dtype=torch.float64, device=float64_device)
    p = torch.softmax(s, -1)
    jac = torch.func.vmap(torch.func.jacrev(lambda x: torch.softmax(x, -1)))(s)
    torch.testing.assert_close(A.softmax_backward(p, g), (g.unsqueeze(1) @ jac).squeeze(1))


@pytest.mark.parametrize("bias", [True, False])
def test_multihead_matches_torch_multiheadattention(float64_device, bias):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(8, 2, bias=bias, batch_first=True).double().to(float64_device)
    ours = A.MultiHeadAttention.from_torch(mha)
    x = torch.randn(2, 5, 8, dtype=torch.float64, device=float64_device)
    allowed = torch.ones(5, 5, dtype=torch.bool, device=float64_device).tril()
    # nn.MultiheadAttention's boolean mask means True = *blocked*: pass the complement
    ref, ref_w = mha(x, x, x, attn_mask=~allowed, need_weights=True, average_attn_weights=False)
    out, w = ours(x, mask=allowed, need_weights=True)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(w, ref_w, atol=1e-12, rtol=1e-10)
    fused = ours(x, is_causal=True, fused=True)
    torch.testing.assert_close(fused, ref, atol=1e-12, rtol=1e-10)
    n_params = sum(p.numel() for p in ours.parameters())
    assert n_params == 4 * 8 * 8 + (4 * 8 if bias else 0)


def test_cross_attention_and_gqa_shapes(device):
    mha = A.MultiHeadAttention(12, 6, n_kv_heads=2).to(device)
    x, memory = torch.randn(2, 3, 12, device=device), torch.randn(2, 7, 12, device=device)
    out, w = mha(x, kv=memory, need_weights=True)
    assert out.shape == (2, 3, 12) and w.shape == (2, 6, 3, 7)
    assert sum(p.numel() for p in mha.parameters()) == 2 * (144 + 12) + 2 * (12 * 4 + 4)
    with pytest.raises(ValueError, match="x must be"):
        mha(torch.randn(3, 12, device=device))


def test_padding_mask_blocks_keys_beyond_length():
    m = A.padding_mask([2, 3], 4)
    assert m.shape == (2, 1, 1, 4)
    assert m.isfinite().squeeze().tolist() == [[True, True, False, False], [True, True, True, False]]


def test_bad_inputs_are_named():
    q = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match="last dim d_k"):
        A.scaled_dot_product_attention(q, torch.randn(2, 3, 5), torch.randn(2, 3, 5))
    with pytest.raises(TypeError, match="bool"):
        A.to_additive_mask(torch.ones(3, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="divisible"):
        A.MultiHeadAttention(10, 3)


def test_repeat_kv_gives_each_query_head_its_group_s_kv_head(device):
    _, k, _ = qkv(device, H=6, H_kv=2)
    out = A.repeat_kv(k, 3)
    assert out.shape == (2, 6, 5, 4)
    for h in range(6):                       # query head h reads kv head h // n_rep
        assert torch.equal(out[:, h], k[:, h // 3])
    assert A.repeat_kv(k, 1) is k


@pytest.mark.parametrize("T, S", [(2, 6), (1, 4), (5, 5)])
@pytest.mark.parametrize("with_mask", [False, True])
def test_fused_causal_is_bottom_right_like_the_readable_path(float64_device, T, S, with_mask):
    """fused=True, is_causal=True with T ≠ S (cross-attention over a longer memory, or decoding
    after cached keys) must use the bottom-right mask of the readable path, not SDPA's
    top-left one; an extra mask is combined with it on both paths."""
    torch.manual_seed(1)
    mha = A.MultiHeadAttention(8, 2, n_kv_heads=1).double().to(float64_device)
    x = torch.randn(2, T, 8, dtype=torch.float64, device=float64_device)
    memory = torch.randn(2, S, 8, dtype=torch.float64, device=float64_device)
    mask = None
    if with_mask:
        mask = torch.ones(2, 1, 1, S, dtype=torch.bool, device=float64_device)
        mask[1, ..., 0] = False                           # key padding of the first key
    readable = mha(x, kv=memory, mask=mask, is_causal=True)
    fused = mha(x, kv=memory, mask=mask, is_causal=True, fused=True)
    torch.testing.assert_close(fused, readable, atol=1e-12, rtol=1e-10)
    # the oracle: SDPA with an explicit bottom-right boolean mask
    q = mha.split_heads(mha.w_q(x), 2)
    k = A.repeat_kv(mha.split_heads(mha.w_k(memory), 1), 2)
    v = A.repeat_kv(mha.split_heads(mha.w_v(memory), 1), 2)
    allowed = torch.ones(T, S, dtype=torch.bool, device=float64_device).tril(S - T)
    if mask is not None:
        allowed = allowed & mask
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    ref = mha.w_o(ref.transpose(1, 2).reshape(2, T, 8))
    torch.testing.assert_close(fused, ref, atol=1e-12, rtol=1e-10)
    if T != S:   # SDPA's own is_causal (top-left) really differs: the test can fail
        top_left = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        assert (mha.w_o(top_left.transpose(1, 2).reshape(2, T, 8)) - readable).abs().max() > 1e-3


def test_fused_causal_with_more_queries_than_keys_raises_like_the_readable_path():
    mha = A.MultiHeadAttention(8, 2)
    x, memory = torch.randn(1, 4, 8), torch.randn(1, 2, 8)
    for fused in (False, True):
        with pytest.raises(ValueError, match="T ≤ S"):
            mha(x, kv=memory, is_causal=True, fused=fused)
