"""book/shapes.md is checked against the code: every row of its tables names a tensor whose
shape, with the letters replaced by the distinct sizes of SIZES, must be the shape mathref
really produces. CHECKS maps each row's first cell to a function that runs mathref and returns
that tensor; the two must cover each other exactly, so a row cannot go unchecked and a check
cannot lose its row. Tensors that live only inside a function (FlashAttention's tiles, the
per-head queries of MultiHeadAttention.forward) are read from its frame with a tracer."""
import functools
import inspect
import re
import sys

import pytest
import torch

import mathref
from mathref import attention, data, efficient, gpt, positions, transformer
from tests.notebooks import ROOT

PAGE = ROOT / "book" / "shapes.md"

# One size per letter of the page, all different, so that a swapped letter changes the shape.
# Derived sizes differ too: d_k/2 = 4, H_kv·d_k = 24, T + n = 23, B·T = 26.
SIZES = dict(B=2, H_kv=3, B_q=5, H=6, B_k=7, d_k=8, d_v=9, n=10, V=11, T=13, S=17, T_max=32,
             d_ff=40, d=48)
B, H_kv, B_q, H, B_k, d_k, d_v, n, V, T, S, T_max, d_ff, d = SIZES.values()
assert d == H * d_k and H % H_kv == 0 and T < S and T + n <= T_max and S + 1 <= T_max


# ---- reading the page ------------------------------------------------------------------------
def page_tables():
    """[(header, [row cells, ...]), ...] for every markdown table of the page."""
    tables, rows = [], None
    for line in PAGE.read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if rows is None:
                rows = []
                tables.append((cells, rows))
            elif not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        else:
            rows = None
    return tables


def page_rows():
    """(tensor, shape cell, mathref cell) for every row of the shape tables."""
    rows = []
    for header, cells in page_tables():
        if header == ["tensor", "notation", "shape", "mathref"]:
            for row in cells:
                assert len(row) == 4, f"a row of book/shapes.md does not have 4 cells: {row}"
                rows.append((row[0], row[2], row[3]))
    return rows


def page_letters():
    for header, cells in page_tables():
        if header[0] == "letter":
            return [row[0].strip("`") for row in cells]
    return []


def expected_shape(cell):
    """'`[B, H_kv·d_k, d_k/2]`' → (2, 24, 4) with the sizes of SIZES; '`[]`' → ()."""
    match = re.fullmatch(r"`\[(.*)\]`", cell)
    assert match, f"a shape must be written as `[...]`, got {cell!r}"
    dims = [part.strip() for part in match.group(1).split(",")] if match.group(1).strip() else []
    shape = []
    for dim in dims:
        value = eval(dim.replace("·", "*"), {"__builtins__": {}}, dict(SIZES))  # noqa: S307
        assert float(value).is_integer(), f"{dim} = {value} is not a whole size"
        shape.append(int(value))
    return tuple(shape)


# ---- reading tensors out of mathref -----------------------------------------------------------
def trace_locals(function, run):
    """Call run() and return, for every call of ``function`` during it (in order), a dict
    {local name: [tensors bound to that name, in order]}."""
    code = inspect.unwrap(function).__code__
    calls = {}

    def local_tracer(frame, event, arg):
        history = calls.setdefault(frame, {})
        for name, value in frame.f_locals.items():
            if torch.is_tensor(value):
                seen = history.setdefault(name, [])
                if not seen or seen[-1] is not value:
                    seen.append(value)
        return local_tracer

    def call_tracer(frame, event, arg):
        return local_tracer if frame.f_code is code else None

    previous = sys.gettrace()
    sys.settrace(call_tracer)
    try:
        run()
    finally:
        sys.settrace(previous)
    return list(calls.values())


def hooked(module, run, pre=False):
    """The input (pre=True) or output of ``module`` the first time run() calls it."""
    seen = []
    if pre:
        handle = module.register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    else:
        handle = module.register_forward_hook(lambda m, args, out: seen.append(out))
    try:
        run()
    finally:
        handle.remove()
    return seen[0]


GENERATOR = torch.Generator().manual_seed(0)


def randn(*shape):
    return torch.randn(*shape, generator=GENERATOR, dtype=torch.float64)


@functools.cache
def sdpa():
    """Grouped-query attention through the readable SDPA, its weights and gradients."""
    q, k, v = randn(B, H, T, d_k), randn(B, H_kv, S, d_k), randn(B, H_kv, S, d_v)
    out, weights = attention.scaled_dot_product_attention(q, k, v, enable_gqa=True,
                                                          return_weights=True)
    k_rep, v_rep = attention.repeat_kv(k, H // H_kv), attention.repeat_kv(v, H // H_kv)
    (call,) = trace_locals(attention.attention_weights,
                           lambda: attention.attention_weights(q, k_rep))
    grads = attention.attention_backward(q, k_rep, v_rep, weights, randn(B, H, T, d_v))
    return dict(q=q, k=k, v=v, k_rep=k_rep, v_rep=v_rep, out=out, weights=weights,
                scores=call["scores"][0], grads=grads,
                grad_s=attention.softmax_backward(weights, randn(B, H, T, S)))


@functools.cache
def mha():
    module = attention.MultiHeadAttention(d, H, n_kv_heads=H_kv).double()
    x, kv = randn(B, T, d), randn(B, S, d)
    result = []
    concat = hooked(module.w_o, lambda: result.append(
        module(x, kv=kv, need_weights=True)), pre=True)
    (call,) = trace_locals(attention.MultiHeadAttention.forward,
                           lambda: module(x, kv=kv, need_weights=True))
    return dict(module=module, x=call["x"][0], kv=call["kv"][0], q=call["q"][0],
                k=call["k"][0], v=call["v"][0], heads=call["out"][0], concat=concat,
                out=result[0][0], weights=result[0][1])


def config(style, **kw):
    return gpt.GPTConfig(vocab_size=V, block_size=T_max, n_layer=2, n_head=H, d_model=d,
                         d_ff=d_ff, style=style, **kw)


@functools.cache
def classic():
    """A classic GPT (learned positions, tied head) on a batch from data.get_batch."""
    torch.manual_seed(0)
    model = gpt.GPT(config("classic"))
    tokens = torch.randint(V, (200,), generator=torch.Generator().manual_seed(1))
    idx, targets = data.get_batch(tokens, B, T, generator=torch.Generator().manual_seed(2))
    (call,) = trace_locals(gpt.GPT.forward, lambda: model(idx, targets))
    logits, loss = model(idx, targets)
    return dict(model=model, idx=idx, targets=targets, logits=logits, loss=loss,
                flat=call["flat"][0],
                block_in=hooked(model.blocks[0], lambda: model(idx), pre=True),
                block_out=hooked(model.blocks[0], lambda: model(idx)),
                ln_f=hooked(model.ln_f, lambda: model(idx)))


@functools.cache
def modern():
    """A modern GPT with grouped-query attention and RoPE: a KV cache holding S positions after
    a prompt of S − T tokens and a chunk of T more."""
    torch.manual_seed(0)
    model = gpt.GPT(config("modern", n_kv_head=H_kv)).eval()
    ids = torch.randint(V, (B, S + 1), generator=torch.Generator().manual_seed(3))
    cache = gpt.KVCache(model.config.n_layer)
    with torch.no_grad():
        model(ids[:, :S - T], cache=cache)
        chunk = trace_locals(gpt.CausalSelfAttention.forward,
                             lambda: model(ids[:, S - T:S], cache=cache))[0]
        cached_keys, cached_values = cache.keys[0], cache.values[0]
        step_logits, _ = model(ids[:, S:], cache=cache)
    return dict(model=model, chunk=chunk, keys=cached_keys, values=cached_values,
                step_logits=step_logits)


@functools.cache
def generation():
    model, idx = classic()["model"], classic()["idx"]
    with torch.no_grad():
        last = model(idx)[0][:, -1]
    (call,) = trace_locals(gpt.sample_next, lambda: gpt.sample_next(
        last, generator=torch.Generator().manual_seed(4)))
    generated = gpt.generate(model, idx, n, generator=torch.Generator().manual_seed(5))
    return dict(last=call["logits"][0], next=gpt.sample_next(last), generated=generated,
                log_prob=gpt.sequence_log_prob(model, generated, T))


@functools.cache
def rope():
    (cache_call,) = trace_locals(positions.rope_cache,
                                 lambda: positions.rope_cache(torch.arange(T), d_k))
    cos, sin = positions.rope_cache(torch.arange(T), d_k)
    q, k = randn(B, H, T, d_k), randn(B, H_kv, S, d_k)
    rotated_q = []
    (apply_call,) = trace_locals(positions.apply_rope, lambda: rotated_q.append(
        positions.apply_rope(q, cache=(cos, sin))))
    rotated_k = positions.apply_rope(k, cache=positions.rope_cache(torch.arange(S), d_k))
    return dict(angles=cache_call["angles"][0], cos=cos, sin=sin, x1=apply_call["x1"][0],
                q=rotated_q[0], k=rotated_k)


@functools.cache
def flash():
    q, k, v = randn(B, H, T, d_k), randn(B, H, S, d_k), randn(B, H, S, d_v)
    result = []
    (call,) = trace_locals(efficient.flash_attention, lambda: result.append(
        efficient.flash_attention(q, k, v, block_q=B_q, block_k=B_k, return_lse=True)))
    out, lse = result[0]
    grads = []
    (back,) = trace_locals(efficient.flash_attention_backward, lambda: grads.append(
        efficient.flash_attention_backward(q, k, v, out, lse, randn(B, H, T, d_v),
                                           block_q=B_q, block_k=B_k)))
    scores = randn(S)
    (online,) = trace_locals(efficient.online_softmax,
                             lambda: efficient.online_softmax(scores, block=B_k))
    (linear,) = trace_locals(efficient.linear_attention,
                             lambda: efficient.linear_attention(q, k, v))
    return dict(tile=call, out=out, lse=lse, D=back["D"][0], grads=grads[0],
                online=online, online_out=efficient.online_softmax(scores, block=B_k),
                linear_state=linear["kv"][0], linear_out=efficient.linear_attention(q, k, v))


@functools.cache
def seq2seq():
    torch.manual_seed(0)
    model = transformer.Seq2SeqTransformer(V, V, d_model=d, n_heads=H, d_ff=d_ff,
                                           max_len=T_max).eval()
    src = torch.randint(3, V, (B, S), generator=torch.Generator().manual_seed(6))
    src[1, -4:] = model.pad_id
    targets = torch.randint(3, V, (B, T), generator=torch.Generator().manual_seed(7))
    tgt_in = transformer.shift_right(targets, bos_id=1)
    with torch.no_grad():
        memory, mask = model.encode(src)
        x = hooked(model.encoder[0], lambda: model.encode(src), pre=True)
        enc_out, enc_weights = model.encoder[0](x, mask=mask, need_weights=True)
        block = model.decoder[0]
        y = hooked(block, lambda: model.decode(tgt_in, memory, mask), pre=True)
        dec_out, (self_weights, cross_weights) = block(y, memory, memory_mask=mask,
                                                       need_weights=True)
        hidden = hooked(block.ffn.proj, lambda: block(y, memory, memory_mask=mask), pre=True)
        logits = model(src, tgt_in)
    return dict(model=model, src=src, tgt_in=tgt_in, memory=memory, mask=mask, enc_out=enc_out,
                enc_weights=enc_weights, dec_out=dec_out, self_weights=self_weights,
                cross_weights=cross_weights, hidden=hidden, logits=logits)


def offsets():
    """j − i for query i and key j, as T5's buckets take them."""
    return torch.arange(S)[None, :] - torch.arange(T)[:, None]


CHECKS = {
    # scaled dot-product attention
    "queries": lambda: sdpa()["q"],
    "keys": lambda: sdpa()["k"],
    "values": lambda: sdpa()["v"],
    "scaled scores": lambda: sdpa()["scores"],
    "attention weights": lambda: sdpa()["weights"],
    "attention output": lambda: sdpa()["out"],
    "gradient of the scores": lambda: sdpa()["grad_s"],
    "gradient of the queries": lambda: sdpa()["grads"][0],
    "gradient of the keys": lambda: sdpa()["grads"][1],
    "gradient of the values": lambda: sdpa()["grads"][2],
    # masks
    "causal mask, additive": lambda: attention.causal_mask(T, S),
    "causal mask of a decoding chunk, boolean": lambda: modern()["chunk"]["mask"][0],
    "key-padding mask from lengths, additive": lambda: attention.padding_mask([S, 3], S),
    "key-padding mask from token ids, boolean":
        lambda: transformer.key_padding_mask(seq2seq()["src"], 0),
    # multi-head attention
    "input tokens": lambda: mha()["x"],
    "key/value source": lambda: mha()["kv"],
    "query projection weight": lambda: mha()["module"].w_q.weight,
    "key projection weight": lambda: mha()["module"].w_k.weight,
    "value projection weight": lambda: mha()["module"].w_v.weight,
    "output projection weight": lambda: mha()["module"].w_o.weight,
    "projected queries": lambda: mha()["module"].w_q(mha()["x"]),
    "projected keys": lambda: mha()["module"].w_k(mha()["kv"]),
    "queries split into heads": lambda: mha()["q"],
    "keys split into heads": lambda: mha()["k"],
    "values split into heads": lambda: mha()["v"],
    "per-head outputs": lambda: mha()["heads"],
    "concatenated heads": lambda: mha()["concat"],
    "multi-head attention weights": lambda: mha()["weights"],
    "multi-head attention output": lambda: mha()["out"],
    # grouped-query attention
    "keys of a grouped-query layer": lambda: sdpa()["k"],
    "keys repeated for the query heads": lambda: sdpa()["k_rep"],
    "values repeated for the query heads": lambda: sdpa()["v_rep"],
    "grouped-query attention output": lambda: sdpa()["out"],
    # RoPE
    "RoPE frequencies": lambda: positions.rope_frequencies(d_k),
    "rotation angles": lambda: rope()["angles"],
    "RoPE cosine cache": lambda: rope()["cos"],
    "RoPE sine cache": lambda: rope()["sin"],
    "GPT's cosine buffer": lambda: modern()["model"].rope_cos,
    "GPT's sine buffer": lambda: modern()["model"].rope_sin,
    "first halves of the pairs": lambda: rope()["x1"],
    "rotated queries": lambda: rope()["q"],
    "rotated keys": lambda: rope()["k"],
    # ALiBi and T5
    "ALiBi slopes": lambda: positions.alibi_slopes(H),
    "ALiBi bias": lambda: positions.alibi_bias(H, T, S),
    "T5 buckets": lambda: positions.t5_relative_bucket(offsets()),
    # embeddings and positions
    "token ids": lambda: classic()["idx"],
    "token table": lambda: classic()["model"].tok_emb.weight,
    "token embeddings": lambda: classic()["model"].tok_emb(classic()["idx"]),
    "learned position table": lambda: classic()["model"].pos_emb.weight,
    "position rows of a window": lambda: classic()["model"].pos_emb(torch.arange(T)),
    "tied output weight": lambda: classic()["model"].lm_head.weight,
    "sinusoidal table": lambda: positions.sinusoidal_positions(T, d),
    "encoder–decoder position buffer": lambda: seq2seq()["model"].pe,
    # GPT
    "targets": lambda: classic()["targets"],
    "residual stream entering a block": lambda: classic()["block_in"],
    "block output": lambda: classic()["block_out"],
    "final normalized states": lambda: classic()["ln_f"],
    "GPT logits": lambda: classic()["logits"],
    "flattened logits": lambda: classic()["flat"],
    "GPT loss": lambda: classic()["loss"],
    "last-position logits": lambda: generation()["last"],
    "next-token ids": lambda: generation()["next"],
    "generated ids": lambda: generation()["generated"],
    "continuation log-probability": lambda: generation()["log_prob"],
    # KV cache
    "cached keys of one layer": lambda: modern()["keys"],
    "cached values of one layer": lambda: modern()["values"],
    "new keys of a chunk, before the append": lambda: modern()["chunk"]["k"][0],
    "keys after the append": lambda: modern()["chunk"]["k"][-1],
    "logits of a one-token decoding step": lambda: modern()["step_logits"],
    # FlashAttention and the online softmax
    "online-softmax output": lambda: flash()["online_out"],
    "online-softmax running maximum": lambda: flash()["online"]["m"][0],
    "online-softmax running sum": lambda: flash()["online"]["total"][0],
    "query tile": lambda: flash()["tile"]["qb"][0],
    "score tile": lambda: flash()["tile"]["s"][0],
    "tile weights": lambda: flash()["tile"]["p"][0],
    "running row maximum": lambda: flash()["tile"]["m"][0],
    "running row sum": lambda: flash()["tile"]["l"][0],
    "rescaling factor": lambda: flash()["tile"]["correction"][0],
    "output accumulator": lambda: flash()["tile"]["acc"][0],
    "FlashAttention output": lambda: flash()["out"],
    "row log-sum-exp": lambda: flash()["lse"],
    "backward row sums": lambda: flash()["D"],
    "FlashAttention query gradient": lambda: flash()["grads"][0],
    "FlashAttention key gradient": lambda: flash()["grads"][1],
    "FlashAttention value gradient": lambda: flash()["grads"][2],
    "linear-attention state": lambda: flash()["linear_state"],
    "linear-attention output": lambda: flash()["linear_out"],
    # encoder, decoder, cross-attention
    "source ids": lambda: seq2seq()["src"],
    "decoder input ids": lambda: seq2seq()["tgt_in"],
    "memory": lambda: seq2seq()["memory"],
    "source padding mask": lambda: seq2seq()["mask"],
    "encoder block output": lambda: seq2seq()["enc_out"],
    "encoder self-attention weights": lambda: seq2seq()["enc_weights"],
    "decoder block output": lambda: seq2seq()["dec_out"],
    "decoder self-attention weights": lambda: seq2seq()["self_weights"],
    "cross-attention weights": lambda: seq2seq()["cross_weights"],
    "FFN input weight": lambda: transformer.FeedForward(d, d_ff).fc.weight,
    "SwiGLU gate weight": lambda: transformer.FeedForward(d, d_ff, "swiglu").gate.weight,
    "FFN output weight": lambda: transformer.FeedForward(d, d_ff).proj.weight,
    "FFN hidden activations": lambda: seq2seq()["hidden"],
    "encoder–decoder logits": lambda: seq2seq()["logits"],
}

ROWS = page_rows()


def test_the_page_has_its_tables_and_defines_every_letter_once():
    assert len(ROWS) >= 50, f"only {len(ROWS)} shape rows found in book/shapes.md"
    letters = page_letters()
    assert len(letters) == len(set(letters)), f"a letter is defined twice: {letters}"
    assert set(letters) == set(SIZES), (f"letters on the page {sorted(letters)} differ from the "
                                        f"sizes of the test {sorted(SIZES)}")
    assert len(set(SIZES.values())) == len(SIZES), "the test sizes must all differ"


def test_every_row_is_checked_and_every_check_has_its_row():
    names = [name for name, _, _ in ROWS]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    assert not duplicates, f"tensor names used twice in book/shapes.md: {duplicates}"
    unchecked = sorted(set(names) - set(CHECKS))
    orphans = sorted(set(CHECKS) - set(names))
    assert not unchecked, f"rows of book/shapes.md without a check in this test: {unchecked}"
    assert not orphans, f"checks whose row is missing from book/shapes.md: {orphans}"


@pytest.mark.parametrize("name, shape", [(name, shape) for name, shape, _ in ROWS],
                         ids=[name for name, _, _ in ROWS])
def test_the_page_gives_the_shape_mathref_produces(name, shape):
    if name not in CHECKS:
        pytest.fail(f"no check for the row {name!r} of book/shapes.md")
    tensor = CHECKS[name]()
    assert torch.is_tensor(tensor), f"{name}: the check returned {type(tensor).__name__}"
    assert tuple(tensor.shape) == expected_shape(shape), (
        f"{name}: book/shapes.md says {shape} = {expected_shape(shape)} with {SIZES}, "
        f"mathref gives {tuple(tensor.shape)}")


def test_every_named_mathref_object_exists():
    missing = []
    for name, _, cell in ROWS:
        path = re.search(r"`([^`]+)`", cell).group(1)
        parts = re.split(r"[(\[ ,:]", path)[0].split(".")
        obj = mathref
        for part in parts[:2]:     # module and function or class; attributes of instances vary
            obj = getattr(obj, part, None)
        if len(parts) < 2 or obj is None or inspect.ismodule(obj):
            missing.append(f"{name}: {path}")
    assert not missing, "book/shapes.md names objects mathref does not have:\n" + "\n".join(missing)


def test_boolean_masks_mean_may_attend_as_the_page_says():
    allowed = torch.tensor([[True, False, True]])
    assert torch.equal(attention.to_additive_mask(allowed),
                       torch.tensor([[0.0, float("-inf"), 0.0]]))
    q, k, v = randn(B, H, T, d_k), randn(B, H, S, d_k), randn(B, H, S, d_v)
    causal = attention.causal_mask(T, S) == 0
    i, j = torch.arange(T)[:, None], torch.arange(S)[None, :]
    assert torch.equal(causal, j <= i + S - T), "causal_mask is not bottom-right aligned"
    ours = attention.scaled_dot_product_attention(q, k, v, mask=causal)
    theirs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=causal)
    torch.testing.assert_close(ours, theirs)
    ids = torch.tensor([[5, 6, 0, 0]])
    assert transformer.key_padding_mask(ids, 0).flatten().tolist() == [True, True, False, False]
