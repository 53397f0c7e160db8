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


# ---- chapter 15 additions: backward by recomputation, FLOP/memory counts, loss scaler ----
@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("T, S, bq, bk", [(9, 9, 4, 3), (5, 11, 2, 4), (16, 16, 16, 16)])
def test_flash_backward_equals_autograd_of_naive(float64_device, is_causal, T, S, bq, bk):
    q = rand(2, 2, T, 6, device=float64_device, seed=1).requires_grad_()
    k = rand(2, 2, S, 6, device=float64_device, seed=2).requires_grad_()
    v = rand(2, 2, S, 3, device=float64_device, seed=3).requires_grad_()
    g = rand(2, 2, T, 3, device=float64_device, seed=4)
    out, lse = E.flash_attention(q, k, v, is_causal, bq, bk, return_lse=True)
    scores = (q @ k.transpose(-2, -1)) / 6 ** 0.5
    if is_causal:
        scores = scores.masked_fill(torch.ones(T, S, dtype=torch.bool, device=q.device)
                                    .tril(S - T).logical_not(), float("-inf"))
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))
    naive = scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    expected = torch.autograd.grad(naive, (q, k, v), g)
    got = E.flash_attention_backward(q.detach(), k.detach(), v.detach(), out.detach(),
                                     lse.detach(), g, is_causal, bq, bk)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_attention_function_gradcheck(float64_device, is_causal):
    q, k, v = (rand(1, 2, 7, 4, device=float64_device, seed=s).requires_grad_() for s in (1, 2, 3))
    assert torch.autograd.gradcheck(
        lambda a, b, c: E.FlashAttentionFunction.apply(a, b, c, is_causal, 3, 2), (q, k, v))


def test_flash_backward_rejects_bad_shapes():
    q = torch.randn(1, 4, 3)
    with pytest.raises(ValueError, match="lse"):
        E.flash_attention_backward(q, q, q, q, torch.zeros(1, 5), q)
    with pytest.raises(ValueError, match="grad_out"):
        E.flash_attention_backward(q, q, q, q, torch.zeros(1, 4), torch.zeros(1, 4, 2))


def test_attention_flops_match_the_flop_counter():
    from torch.utils.flop_counter import FlopCounterMode
    q, k, v = torch.randn(1, 4, 24, 8), torch.randn(1, 4, 40, 8), torch.randn(1, 4, 40, 8)
    with FlopCounterMode(display=False) as counter:
        scaled_dot_product_attention(q, k, v)
    assert counter.get_total_flops() == E.attention_flops(24, 32, S=40)   # width d = 4 heads · 8
    with pytest.raises(ValueError, match="T"):
        E.attention_flops(0, 8)


def test_layer_flops_match_the_flop_counter_and_cross_at_6d():
    from torch.utils.flop_counter import FlopCounterMode
    from mathref.transformer import FeedForward
    from mathref.attention import MultiHeadAttention
    T, d = 20, 16
    x = torch.randn(1, T, d)
    mha, ffn = MultiHeadAttention(d, 4), FeedForward(d, 4 * d, "gelu")
    with FlopCounterMode(display=False) as counter:
        mha(x)
        ffn(x)
    parts = E.layer_flops(T, d)
    assert counter.get_total_flops() == sum(parts.values())
    at_6d = E.layer_flops(6 * d, d)
    assert at_6d["attention"] == at_6d["projections"] + at_6d["ffn"]
    with pytest.raises(ValueError, match="d_ff"):
        E.layer_flops(4, 4, d_ff=0)


def test_attention_memory_bytes_counts_the_score_matrix():
    q = torch.randn(2, 3, 10, 4)
    _, weights = scaled_dot_product_attention(q, q, q, return_weights=True)
    qkvo = 4 * q.numel() * q.element_size()
    assert E.attention_memory_bytes(10, 12, n_heads=3, batch=2) == qkvo + weights.numel() * 4
    assert E.attention_memory_bytes(10, 12, n_heads=3, batch=2, tiled=True) == qkvo + 2 * 2 * 3 * 10 * 4
    with pytest.raises(ValueError, match="n_heads"):
        E.attention_memory_bytes(10, 12, n_heads=0)


def _scaler_run(scaler, unscale, step, update, get_scale, overflow_steps, n_steps=12):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0], dtype=torch.float64))
    opt = torch.optim.SGD([w], lr=0.1)
    scales, weights = [], []
    for i in range(n_steps):
        opt.zero_grad()
        scaler.scale((w ** 2).sum()).backward()
        if i in overflow_steps:
            w.grad[0] = float("inf")
        unscale(opt)
        step(opt)
        update()
        scales.append(get_scale())
        weights.append(w.detach().clone())
    return scales, torch.stack(weights)


def test_dynamic_loss_scaler_matches_torch_grad_scaler():
    overflow = {0, 1, 5, 6}
    ours = E.DynamicLossScaler(init_scale=1024.0, growth_interval=3)
    got = _scaler_run(ours, lambda opt: ours.unscale_(opt.param_groups[0]["params"]), ours.step,
                      ours.update, lambda: ours.scale_value, overflow)
    ref = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=3)
    want = _scaler_run(ref, ref.unscale_, ref.step, ref.update, ref.get_scale, overflow)
    assert got[0] == want[0]
    torch.testing.assert_close(got[1], want[1])
    # by hand: halve on steps 0, 1, 5, 6; double after 3 clean steps in a row (steps 4, 9)
    assert got[0] == [512.0, 256, 256, 256, 512, 256, 128, 128, 128, 256, 256, 256]
    with pytest.raises(ValueError, match="growth_interval"):
        E.DynamicLossScaler(growth_interval=0)
