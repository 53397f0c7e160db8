"""mathref.gpt: both styles, fused vs readable attention, causality, KV cache, GPT-2 loading,
sampling statistics, parameter and FLOP counts."""
import math

import pytest
import torch

from mathref.gpt import GPT, GPTConfig, KVCache, generate, sample_next


def tiny(style="classic", **kw):
    base = dict(vocab_size=37, block_size=16, n_layer=2, n_head=4, d_model=32, style=style)
    base.update(kw)
    return GPTConfig(**base)


def model_for(config, device, seed=0):
    torch.manual_seed(seed)
    return GPT(config).double().to(device).eval()


def ids(B, T, V=37, seed=0, device="cpu"):
    return torch.randint(V, (B, T), generator=torch.Generator().manual_seed(seed)).to(device)


def test_style_defaults_and_validation():
    c, m = tiny("classic"), tiny("modern")
    assert (c.positions, c.norm, c.activation, c.tie_embeddings, c.bias, c.qk_norm) == \
        ("learned", "layer", "gelu_tanh", True, True, False)
    assert (m.positions, m.norm, m.activation, m.tie_embeddings, m.bias, m.qk_norm) == \
        ("rope", "rms", "relu2", False, False, True)
    with pytest.raises(ValueError, match="style"):
        GPTConfig(style="postmodern")
    with pytest.raises(ValueError, match="divisible"):
        GPTConfig(d_model=30, n_head=4)


@pytest.mark.parametrize("style, extra", [("classic", {}), ("modern", {}),
                                          ("modern", {"activation": "swiglu", "n_kv_head": 2})])
def test_fused_and_readable_paths_agree(float64_device, style, extra):
    fused = model_for(tiny(style, fused=True, **extra), float64_device)
    readable = model_for(tiny(style, fused=False, **extra), float64_device)
    readable.load_state_dict(fused.state_dict())
    x = ids(3, 16, device=float64_device)
    torch.testing.assert_close(fused(x)[0], readable(x)[0], atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("style", ["classic", "modern"])
def test_the_model_is_causal_and_starts_near_uniform(float64_device, style):
    model = model_for(tiny(style), float64_device)
    x = ids(2, 12, device=float64_device)
    y = x.clone()
    y[:, 7] = (y[:, 7] + 1) % 37           # change a token in the middle
    a, b = model(x)[0], model(y)[0]
    torch.testing.assert_close(a[:, :7], b[:, :7], atol=1e-12, rtol=0)   # the past is untouched
    assert (a[:, 7:] - b[:, 7:]).abs().max() > 1e-6                     # the future sees it
    _, loss = model(x, ids(2, 12, seed=1, device=float64_device))
    assert abs(loss.item() - math.log(37)) < 0.15   # small init: p ≈ uniform, loss ≈ ln V


@pytest.mark.parametrize("style", ["classic", "modern"])
def test_kv_cache_logits_equal_full_recomputation(float64_device, style):
    model = model_for(tiny(style, n_kv_head=2), float64_device)
    x = ids(2, 10, device=float64_device)
    full = model(x)[0]
    cache = KVCache(model.config.n_layer)
    pieces = [model(x[:, :4], cache=cache)[0]]      # prefill 4, then one token at a time
    for t in range(4, 10):
        pieces.append(model(x[:, t:t + 1], cache=cache)[0])
    assert len(cache) == 10
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("style", ["classic", "modern"])
@pytest.mark.parametrize("kwargs", [dict(temperature=0.0), dict(temperature=0.8, top_k=5),
                                    dict(temperature=1.0, top_p=0.9)])
def test_generation_with_cache_equals_without_token_for_token(float64_device, style, kwargs):
    model = model_for(tiny(style), float64_device)
    prompt = ids(2, 3, device=float64_device)
    outs = []
    for use_cache in (True, False):
        g = torch.Generator(device=float64_device).manual_seed(7)
        # 20 new tokens run past block_size=16: the window slides in both paths
        outs.append(generate(model, prompt, 20, use_cache=use_cache, generator=g, **kwargs))
    assert outs[0].shape == (2, 23)
    assert torch.equal(outs[0], outs[1])


def test_sampling_distributions():
    logits = torch.log(torch.tensor([[0.4, 0.3, 0.15, 0.1, 0.05]]))
    n = 40000
    g = torch.Generator().manual_seed(0)

    def freq(**kw):
        draws = torch.stack([sample_next(logits.expand(n // 10, 5), generator=g, **kw)
                             for _ in range(10)]).flatten()
        return torch.bincount(draws, minlength=5).double() / n

    p = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05], dtype=torch.float64)
    tol = 4 * torch.sqrt(p * (1 - p) / n) + 1e-3   # about 4 standard errors
    assert ((freq() - p).abs() <= tol).all()
    topk = torch.tensor([0.4, 0.3, 0.15, 0, 0], dtype=torch.float64) / 0.85
    assert ((freq(top_k=3) - topk).abs() <= tol).all()
    # top_p = 0.65: the smallest set reaching 0.65 is {0.4, 0.3}
    topp = torch.tensor([0.4, 0.3, 0, 0, 0], dtype=torch.float64) / 0.7
    assert ((freq(top_p=0.65) - topp).abs() <= tol).all()
    # temperature 2 flattens: p ∝ p^(1/2)
    t2 = p.sqrt() / p.sqrt().sum()
    assert ((freq(temperature=2.0) - t2).abs() <= tol).all()
    assert sample_next(logits, temperature=0).item() == 0
    with pytest.raises(ValueError, match="top_p"):
        sample_next(logits, top_p=0.0)


def _hf_probs(logits, previous, temperature=1.0, top_k=None, top_p=None, min_p=None,
              repetition_penalty=None):
    """The oracle: Hugging Face's logits processors, in mathref's order, then the softmax."""
    from transformers.generation import logits_process as lp
    scores = logits.double()
    if repetition_penalty is not None:
        scores = lp.RepetitionPenaltyLogitsProcessor(repetition_penalty)(previous, scores)
    scores = lp.TemperatureLogitsWarper(temperature)(previous, scores)
    for warper, value in ((lp.TopKLogitsWarper, top_k), (lp.TopPLogitsWarper, top_p),
                          (lp.MinPLogitsWarper, min_p)):
        if value is not None:
            scores = warper(value)(previous, scores)
    return torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("kw", [dict(min_p=0.2), dict(min_p=0.05, temperature=1.7),
                                dict(repetition_penalty=1.5),
                                dict(repetition_penalty=2.0, temperature=0.7, top_p=0.9, min_p=0.1),
                                dict(repetition_penalty=1.3, top_k=6, min_p=0.1)])
def test_min_p_and_repetition_penalty_match_hugging_face(kw):
    """Sampling frequencies of sample_next against the probabilities of transformers' own
    MinPLogitsWarper and RepetitionPenaltyLogitsProcessor (with its top-k, top-p, temperature)."""
    gen = torch.Generator().manual_seed(1)
    logits = 2 * torch.randn(3, 12, generator=gen)          # positive and negative logits
    previous = torch.randint(12, (3, 5), generator=gen)
    want = _hf_probs(logits, previous, **kw)
    n = 40000
    if "repetition_penalty" in kw:
        kw = dict(kw, previous=previous.repeat_interleave(n, 0))
    draws = sample_next(logits.repeat_interleave(n, 0), generator=gen, **kw).view(3, n)
    freq = torch.stack([torch.bincount(row, minlength=12) for row in draws]).double() / n
    assert not (freq > 0)[want == 0].any()                   # no token the oracle cuts is drawn
    assert (freq > 0)[want > 1e-3].all()                     # and every likely one it keeps is
    tol = 4 * torch.sqrt(want * (1 - want) / n) + 1e-3
    assert ((freq - want).abs() <= tol).all(), (freq, want)


def test_repetition_penalty_and_min_p_rules():
    logits = torch.tensor([[3.0, 2.0, -1.0, 0.5, -2.0]])
    prev = torch.tensor([[0, 2, 2]])                         # tokens 0 and 2 were seen
    # greedy with the penalty: 3/2 = 1.5 < 2, so token 1 wins; unseen logits are unchanged
    assert sample_next(logits, temperature=0, repetition_penalty=2.0, previous=prev).item() == 1
    assert sample_next(logits, temperature=0).item() == 0
    # min-p with temperature first keeps z_i ≥ z_max − τ ln(1/min_p): here 3 − ln 10 = 0.70
    g = torch.Generator().manual_seed(0)
    kept = sample_next(logits.expand(4000, -1), min_p=0.1, generator=g).unique().tolist()
    assert kept == [0, 1]
    kept = sample_next(logits.expand(4000, -1), temperature=2.0, min_p=0.1, generator=g).unique().tolist()
    assert kept == [0, 1, 2, 3]                             # 3 − 2 ln 10 = −1.61 > −2
    with pytest.raises(ValueError, match="min_p"):
        sample_next(logits, min_p=0.0)
    with pytest.raises(ValueError, match="previous"):
        sample_next(logits, repetition_penalty=1.2, previous=torch.tensor([[0, 7]]))
    with pytest.raises(ValueError, match="previous is read only by the repetition penalty"):
        sample_next(logits, previous=prev)


def test_the_filters_apply_in_order_and_min_p_keeps_the_intersection():
    """top-k then top-p can keep fewer tokens than either alone (top-p sums the renormalized
    top-k distribution); min-p after either keeps exactly the intersection of the sets."""
    logits = torch.tensor([[0.4, 0.3, 0.2, 0.1]]).log().expand(3000, -1)
    g = torch.Generator().manual_seed(0)

    def kept(**kw):
        return sample_next(logits, generator=g, **kw).unique().tolist()

    assert kept(top_k=2) == [0, 1] and kept(top_p=0.5) == [0, 1]
    assert kept(top_k=2, top_p=0.5) == [0]          # 0.4 / 0.7 = 0.57 ≥ 0.5 already
    # min-p 0.6 alone keeps p ≥ 0.24, {0, 1}; after top_k=3 or top_p=0.8 the same two
    assert kept(min_p=0.6) == [0, 1]
    assert kept(top_k=3, min_p=0.6) == kept(top_p=0.8, min_p=0.6) == [0, 1]
    assert kept(top_p=0.8) == [0, 1, 2] and kept(min_p=0.2) == [0, 1, 2, 3]
    assert kept(top_p=0.8, min_p=0.2) == [0, 1, 2]  # the intersection of the two


@pytest.mark.parametrize("window", [None, 3])
def test_generate_with_a_repetition_penalty_equals_hugging_face_greedy(window):
    """Greedy decoding with a repetition penalty: mathref's generate (the window of the last
    positions or the whole context) against a step-by-step oracle built on transformers."""
    import transformers
    config = transformers.GPT2Config(vocab_size=20, n_positions=32, n_embd=32, n_layer=2,
                                     n_head=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(config).double().eval()
    ours = GPT.from_gpt2_state_dict(hf.state_dict(), n_head=4).eval()
    x = ids(2, 4, V=20)
    plain = generate(ours, x, 12, temperature=0.0)
    got = generate(ours, x, 12, temperature=0.0, repetition_penalty=1.8, penalty_window=window)
    want = x
    with torch.no_grad():
        for _ in range(12):
            seen = want if window is None else want[:, -window:]
            scores = transformers.generation.logits_process.RepetitionPenaltyLogitsProcessor(1.8)(
                seen, hf(want).logits[:, -1])
            want = torch.cat([want, scores.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(got, want)
    assert not torch.equal(got, plain)                       # the penalty changed the text


def test_parameter_and_flop_counts_match_closed_forms():
    c = tiny("classic")
    model = GPT(c)
    d, L, V, T = c.d_model, c.n_layer, c.vocab_size, c.block_size
    per_layer = 12 * d * d + 13 * d        # attn 4d²+4d, FFN 8d²+5d, two LayerNorms 4d
    assert model.num_parameters() == L * per_layer + V * d + T * d + 2 * d
    assert model.matmul_parameters() == L * per_layer + V * d + 2 * d
    assert model.flops_per_token(T) == 6 * model.matmul_parameters() + 12 * L * d * T
    m = GPT(tiny("modern"))
    dk = d // c.n_head
    per_layer_modern = 12 * d * d + 2 * d + 2 * dk   # no biases; RMSNorm gains; QK-norm gains
    assert m.num_parameters() == L * per_layer_modern + 2 * V * d + d


def test_bad_inputs_are_reported():
    model = GPT(tiny())
    with pytest.raises(ValueError, match="block_size"):
        model(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        model(torch.zeros(17, dtype=torch.long))


def test_loads_hugging_face_gpt2_with_identical_logits():
    import transformers  # a test-only dependency (requirements.txt)
    config = transformers.GPT2Config(vocab_size=50, n_positions=24, n_embd=64, n_layer=2,
                                     n_head=4, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0,
                                     bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    hf = transformers.GPT2LMHeadModel(config).double().eval()
    ours = GPT.from_gpt2_state_dict(hf.state_dict(), n_head=4).eval()
    x = ids(2, 24, V=50)
    with torch.no_grad():
        expected = hf(x).logits
        got = ours(x)[0]
    assert ours.config.n_layer == 2 and ours.config.d_model == 64
    torch.testing.assert_close(got, expected, atol=1e-10, rtol=1e-8)


def test_sequence_log_prob_is_the_sum_of_next_token_log_probs(float64_device):
    model = model_for(tiny(), float64_device)
    x = ids(2, 7, device=float64_device)
    logits = model(x)[0]
    expected = sum(torch.log_softmax(logits[:, t - 1], -1).gather(-1, x[:, t:t + 1]).squeeze(-1)
                   for t in range(3, 7))
    from mathref.gpt import sequence_log_prob
    torch.testing.assert_close(sequence_log_prob(model, x, 3), expected, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("style, seed", [("classic", 5), ("modern", 4)])
def test_beam_search_finds_the_exact_best_sequence_by_brute_force(float64_device, style, seed):
    import itertools
    from mathref.gpt import beam_search, sequence_log_prob
    V, n = 5, 3
    torch.manual_seed(seed)
    model = GPT(tiny(style, vocab_size=V)).double().to(float64_device).eval()
    with torch.no_grad():   # sharpen the random model's predictions (a larger final gain)
        model.ln_f.weight.mul_(10)
    prompt = ids(1, 2, V=V, seed=5, device=float64_device)
    every = torch.tensor(list(itertools.product(range(V), repeat=n)), device=float64_device)
    candidates = torch.cat([prompt.expand(len(every), -1), every], dim=1)
    logp = sequence_log_prob(model, candidates, prompt.shape[1])      # brute force: V^n sequences
    best = logp.argmax()
    seq, score = beam_search(model, prompt, n, beam_width=V ** (n - 1))
    assert torch.equal(seq[0], candidates[best])
    assert abs(score - logp[best].item()) < 1e-10
    greedy = generate(model, prompt, n, temperature=0.0, use_cache=False)
    seq1, score1 = beam_search(model, prompt, n, beam_width=1)          # width 1 is greedy
    assert torch.equal(seq1, greedy)
    assert score1 <= score + 1e-12
    if style == "modern":   # here greedy is not optimal: the test can tell beam from greedy
        assert score1 < score - 0.1
    with pytest.raises(ValueError, match="one prompt"):
        beam_search(model, candidates[:2], 2)


@pytest.mark.parametrize("fused", [True, False])
def test_causal_self_attention_is_causal_grouped_query_sdpa(fused):
    from mathref.gpt import CausalSelfAttention
    torch.manual_seed(0)
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=4, n_kv_head=2, d_model=8,
                    fused=fused)
    attn = CausalSelfAttention(cfg).double().eval()
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    heads = lambda t, h: t.view(2, 5, h, 2).transpose(1, 2)   # noqa: E731  [B, h, T, d_k]
    q = heads(attn.w_q(x), 4)
    k = heads(attn.w_k(x), 2).repeat_interleave(2, dim=1)       # kv head j serves queries 2j, 2j+1
    v = heads(attn.w_v(x), 2).repeat_interleave(2, dim=1)
    expected = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    expected = attn.w_o(expected.transpose(1, 2).reshape(2, 5, 8))
    torch.testing.assert_close(attn(x), expected, rtol=1e-12, atol=1e-12)


def adjacent_to_half_rows(d_k, n_heads):
    # per head, the rows (0, 2, 4, …, 1, 3, 5, …): q_half = q_adjacent[rows] puts pair i of the
    # adjacent layout, (2i, 2i+1), at (i, i + d_k/2), where the half-split layout expects it
    within = torch.cat([torch.arange(0, d_k, 2), torch.arange(1, d_k, 2)])
    return torch.cat([h * d_k + within for h in range(n_heads)])


@pytest.mark.parametrize("extra", [{}, {"bias": True, "qk_norm": False, "n_kv_head": 2}])
def test_rope_layout_adjacent_loads_adjacent_weights_unpermuted(float64_device, extra):
    adjacent = model_for(tiny("modern", rope_layout="adjacent", **extra), float64_device, seed=3)
    half = model_for(tiny("modern", **extra), float64_device, seed=4)
    assert half.config.rope_layout == "half"
    d_k = adjacent.config.d_model // adjacent.config.n_head
    with torch.no_grad():                 # distinct QK-norm gains, so their permutation matters,
        for name, p in adjacent.named_parameters():     # and sharper attention than at init
            if "q_norm" in name or "k_norm" in name:
                p.copy_(torch.rand_like(p) + 0.5)
            if "w_q" in name or "w_k" in name:
                p.mul_(4.0)
    converted = {}
    for name, value in adjacent.state_dict().items():
        part = name.split(".")[-2]
        if part in ("w_q", "w_k"):        # what a converter to the half-split layout does
            heads = adjacent.config.n_head if part == "w_q" else adjacent.config.n_kv_head
            value = value[adjacent_to_half_rows(d_k, heads).to(value.device)]
        elif part in ("q_norm", "k_norm"):
            value = value[adjacent_to_half_rows(d_k, 1).to(value.device)]
        converted[name] = value
    x = ids(2, 12, device=float64_device)
    reference = adjacent(x)[0]
    half.load_state_dict(converted)
    torch.testing.assert_close(half(x)[0], reference, atol=1e-12, rtol=1e-10)
    half.load_state_dict(adjacent.state_dict())          # same weights, wrong layout: differs
    assert (half(x)[0] - reference).abs().max() > 1e-3
    cache = KVCache(adjacent.config.n_layer)             # the layout holds in cached decoding
    steps = [adjacent(x[:, :5], cache=cache)[0]] + [adjacent(x[:, t:t + 1], cache=cache)[0]
                                                    for t in range(5, 12)]
    torch.testing.assert_close(torch.cat(steps, dim=1), reference, atol=1e-12, rtol=1e-10)


def test_rope_layout_is_validated():
    with pytest.raises(ValueError, match="rope_layout"):
        GPTConfig(style="modern", rope_layout="interleaved")
