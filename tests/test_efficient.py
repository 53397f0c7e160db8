"""mathref.efficient: tiled online-softmax attention equals naive attention and SDPA."""
import pytest
import torch
import torch.nn.functional as F

from mathref import efficient as E
from mathref.attention import scaled_dot_product_attention


def rand(*shape, device, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(device)


def test_online_softmax_equals_softmax(float64_device):
    x = rand(37, device=float64_device) * 30
    for block in (1, 4, 10, 64):
        torch.testing.assert_close(E.online_softmax(x, block), torch.softmax(x, 0))
    with pytest.raises(ValueError, match="1-D"):
        E.online_softmax(torch.ones(2, 2))


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("T, S, bq, bk", [(16, 16, 4, 4), (13, 13, 5, 3), (7, 20, 3, 8),
                                          (1, 9, 32, 2), (33, 33, 32, 32)])
def test_flash_attention_equals_naive_and_sdpa(float64_device, is_causal, T, S, bq, bk):
    q = rand(2, 3, T, 8, device=float64_device, seed=1)
    k = rand(2, 3, S, 8, device=float64_device, seed=2)
    v = rand(2, 3, S, 5, device=float64_device, seed=3)
    ours = E.flash_attention(q, k, v, is_causal=is_causal, block_q=bq, block_k=bk)
    naive = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(ours, naive, atol=1e-12, rtol=1e-10)
    if T == S or not is_causal:  # SDPA's is_causal is top-left aligned: equal only when T = S
        torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=is_causal),
                                   atol=1e-12, rtol=1e-10)


def test_flash_attention_is_stable_for_huge_scores_and_differentiable(float64_device):
    q = rand(1, 1, 10, 4, device=float64_device) * 200
    k = rand(1, 1, 10, 4, device=float64_device, seed=5) * 200
    v = rand(1, 1, 10, 4, device=float64_device, seed=6)
    out = E.flash_attention(q, k, v, is_causal=True, block_q=3, block_k=3)
    assert torch.isfinite(out).all()
    qa, ka, va = (t.clone().requires_grad_() for t in (q / 100, k / 100, v))
    E.flash_attention(qa, ka, va, is_causal=True, block_q=4, block_k=3).sum().backward()
    qb, kb, vb = (t.clone().requires_grad_() for t in (q / 100, k / 100, v))
    F.scaled_dot_product_attention(qb, kb, vb, is_causal=True).sum().backward()
    for a, b in ((qa, qb), (ka, kb), (va, vb)):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=1e-8)


@pytest.mark.parametrize("is_causal", [False, True])
def test_linear_attention_equals_its_quadratic_form(float64_device, is_causal):
    q, k, v = (rand(2, 6, 4, device=float64_device, seed=s) for s in (1, 2, 3))
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    weights = fq @ fk.transpose(-2, -1)
    if is_causal:
        weights = weights.tril()
    expected = (weights @ v) / (weights.sum(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(E.linear_attention(q, k, v, is_causal=is_causal), expected)


def test_kv_cache_bytes_for_a_7b_model():
    # 32 layers, 32 KV heads of 128, 4096 tokens, fp16: 2 GiB; GQA with 8 KV heads: a quarter
    assert E.kv_cache_bytes(32, 1, 32, 4096, 128, 2) == 2 * 1024 ** 3
    assert E.kv_cache_bytes(32, 1, 8, 4096, 128, 2) == 2 * 1024 ** 3 // 4
    with pytest.raises(ValueError, match="seq_len"):
        E.kv_cache_bytes(32, 1, 8, 0, 128)
