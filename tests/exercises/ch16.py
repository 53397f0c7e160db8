"""Typical wrong answers to chapter 16's exercises (each must fail its checker), shortcuts that
call what the exercise asks the learner to write (each must be refused, naming the call), and
right answers in other forms (each must pass)."""
import math

import torch
import torch.nn.functional as F


# ---- RMSNorm -------------------------------------------------------------------------------
def rms_eps_outside(x, weight, eps=1e-5):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


def rms_layer_norm(x, weight, eps=1e-5):
    x = x - x.mean(-1, keepdim=True)
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_no_gain(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def rms_detached(x, weight, eps=1e-5):       # right numbers, but no graph: cannot be trained
    with torch.no_grad():
        return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


# ---- RoPE ----------------------------------------------------------------------------------
def _angles(d, positions, base, dtype):
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * theta
    return angle.cos().to(dtype), angle.sin().to(dtype)


def rope_adjacent(x, positions, base=10000.0):
    cos, sin = _angles(x.shape[-1], positions, base, x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1).flatten(-2)


def rope_backwards(x, positions, base=10000.0):
    d = x.shape[-1]
    cos, sin = _angles(d, positions, base, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos + x2 * sin, -x1 * sin + x2 * cos], -1)


def rope_ignores_positions(x, positions, base=10000.0):
    d = x.shape[-1]
    cos, sin = _angles(d, torch.arange(x.shape[-2]), base, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


# ---- SwiGLU --------------------------------------------------------------------------------
def swiglu_silu_on_up(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_up.T) * (x @ w_gate.T)) @ w_down.T


def swiglu_relu(x, w_gate, w_up, w_down):
    return (torch.relu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def swiglu_sigmoid(x, w_gate, w_up, w_down):
    return (torch.sigmoid(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


# ---- attention -----------------------------------------------------------------------------
def _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None, mask="bottom-right",
               rope_v=False, scale=None, positions_from_zero=False, float32_softmax=False,
               fill=-math.inf, float_positions=False, weights=None):
    """A reference attention with one slip; ``weights(scores, allowed)`` replaces the masked
    softmax when given (``allowed``: the [T, S] keys each query may see)."""
    B, T, d = x.shape
    d_k = d // n_head

    def heads(t):
        return t.view(B, T, n_head, d_k).transpose(1, 2)

    q, k, v = heads(x @ w_q.T), heads(x @ w_k.T), heads(x @ w_v.T)
    start = 0 if cache is None or positions_from_zero else cache[0].shape[-2]
    positions = torch.arange(start, start + T, dtype=torch.float64 if float_positions else None)
    q, k = rope(q, positions), rope(k, positions)
    if rope_v:
        v = rope(v, positions)
    if cache is not None:
        k, v = torch.cat([cache[0], k], -2), torch.cat([cache[1], v], -2)
    S = k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(scale or d_k)
    if weights is not None:
        out = weights(scores, torch.ones(T, S, dtype=torch.bool).tril(S - T)) @ v
        return out.transpose(1, 2).reshape(B, T, d) @ w_o.T, (k, v)
    if mask == "bottom-right":
        scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(S - T), fill)
    elif mask == "top-left":
        scores = scores.masked_fill(~torch.ones(T, S, dtype=torch.bool).tril(0), -math.inf)
    out = (scores.float().softmax(-1).double() if float32_softmax else scores.softmax(-1)) @ v
    return out.transpose(1, 2).reshape(B, T, d) @ w_o.T, (k, v)


def attention_float32_softmax(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, float32_softmax=True)


def attention_no_mask(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, mask=None)


def attention_rope_on_v(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, rope_v=True)


def attention_scale_d_model(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, scale=x.shape[-1])


def attention_top_left_mask(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # right without a cache; with one, a new query sees only the first keys
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, mask="top-left")


def attention_new_tokens_at_zero(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, positions_from_zero=True)


# ---- block ---------------------------------------------------------------------------------
def _sub(params, parts, n_head, cache):
    def attn(h):
        return parts["attention"](h, params["attn.w_q.weight"], params["attn.w_k.weight"],
                                  params["attn.w_v.weight"], params["attn.w_o.weight"], n_head,
                                  parts["rope"], cache)

    def mlp(h):
        return parts["mlp"](h, params["mlp.gate.weight"], params["mlp.fc.weight"],
                            params["mlp.proj.weight"])
    return attn, mlp


def block_post_norm(x, params, n_head, parts, cache=None):
    attn, mlp = _sub(params, parts, n_head, cache)
    h, cache = attn(x)
    x = parts["norm"](x + h, params["ln_1.weight"])
    return parts["norm"](x + mlp(x), params["ln_2.weight"]), cache


def block_no_residual(x, params, n_head, parts, cache=None):
    attn, mlp = _sub(params, parts, n_head, cache)
    h, cache = attn(parts["norm"](x, params["ln_1.weight"]))
    return mlp(parts["norm"](h, params["ln_2.weight"])), cache


def block_ln1_twice(x, params, n_head, parts, cache=None):
    attn, mlp = _sub(params, parts, n_head, cache)
    h, cache = attn(parts["norm"](x, params["ln_1.weight"]))
    x = x + h
    return x + mlp(parts["norm"](x, params["ln_1.weight"])), cache


def block_drops_cache(x, params, n_head, parts, cache=None):
    attn, mlp = _sub(params, parts, n_head, None)
    h, new = attn(parts["norm"](x, params["ln_1.weight"]))
    x = x + h
    return x + mlp(parts["norm"](x, params["ln_2.weight"])), new


# ---- GPT forward ---------------------------------------------------------------------------
def _gpt(idx, params, n_head, n_layer, parts, caches=None, final_norm=True,
         head="lm_head.weight", use_caches=True):
    x = params["tok_emb.weight"][idx]
    caches = [None] * n_layer if caches is None or not use_caches else caches
    new = []
    for i in range(n_layer):
        p = {k[len(f"blocks.{i}."):]: v for k, v in params.items()
             if k.startswith(f"blocks.{i}.")}
        x, c = parts["block"](x, p, n_head, parts, caches[i])
        new.append(c)
    if final_norm:
        x = parts["norm"](x, params["ln_f.weight"])
    return x @ params[head].T, new


def gpt_no_final_norm(idx, params, n_head, n_layer, parts, caches=None):
    return _gpt(idx, params, n_head, n_layer, parts, caches, final_norm=False)


def gpt_tied_head(idx, params, n_head, n_layer, parts, caches=None):
    return _gpt(idx, params, n_head, n_layer, parts, caches, head="tok_emb.weight")


def gpt_ignores_caches(idx, params, n_head, n_layer, parts, caches=None):
    return _gpt(idx, params, n_head, n_layer, parts, caches, use_caches=False)


# ---- AdamW ---------------------------------------------------------------------------------
def adamw_decay_in_gradient(p, g, m, v, t, lr, betas, eps, weight_decay):   # Adam + L2
    g = g + weight_decay * p
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
    return p - lr * m_hat / (v_hat.sqrt() + eps), m, v


def adamw_no_bias_correction(p, g, m, v, t, lr, betas, eps, weight_decay):
    p = p * (1 - lr * weight_decay)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    return p - lr * m / (v.sqrt() + eps), m, v


def adamw_decay_without_lr(p, g, m, v, t, lr, betas, eps, weight_decay):
    p = p * (1 - weight_decay)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
    return p - lr * m_hat / (v_hat.sqrt() + eps), m, v


# ---- schedule ------------------------------------------------------------------------------
def schedule_warmup_off_by_one(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * progress))


def schedule_cosine_over_total(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    progress = min(1.0, step / total_steps)
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * progress))


def schedule_no_floor_after_end(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    progress = (step - warmup_steps) / (total_steps - warmup_steps)   # the cosine comes back up
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * progress))


# ---- clipping ------------------------------------------------------------------------------
def clip_per_tensor(grads, max_norm):
    total = torch.sqrt(sum((g ** 2).sum() for g in grads))
    return [g * min(1.0, max_norm / (g.norm().item() + 1e-6)) for g in grads], total


def clip_always_to_max(grads, max_norm):
    total = torch.sqrt(sum((g ** 2).sum() for g in grads))
    return [g * max_norm / (total + 1e-6) for g in grads], total


def clip_returns_norm_after(grads, max_norm):
    total = torch.sqrt(sum((g ** 2).sum() for g in grads))
    clipped = [g * min(1.0, max_norm / (total.item() + 1e-6)) for g in grads]
    return clipped, torch.sqrt(sum((g ** 2).sum() for g in clipped))


# ---- generation ----------------------------------------------------------------------------
def _pick(last, temperature, top_k, top_p, draw, multiply=False, use_top_p=True,
          renormalize=True, inclusive=False):
    if temperature == 0:
        return last.argmax(-1)
    last = last * temperature if multiply else last / temperature
    if top_k is not None:
        kth = torch.topk(last, top_k, dim=-1).values[:, -1:]
        last = last.masked_fill(last < kth, -math.inf)
    probs = last.softmax(-1)
    if top_p is not None and use_top_p:
        sp, order = probs.sort(-1, descending=True)
        cut = sp.cumsum(-1) > top_p if inclusive else sp.cumsum(-1) - sp >= top_p
        sp = sp.masked_fill(cut, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sp)
        if renormalize:
            probs = probs / probs.sum(-1, keepdim=True)
    return draw(probs)


def generate_without_cache(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                           top_p=None, draw=None):
    idx = prompt
    for _ in range(max_new_tokens):        # the whole sequence again at every step
        nxt = _pick(step(idx)[:, -1], temperature, top_k, top_p, draw)
        idx = torch.cat([idx, nxt[:, None]], 1)
    return idx


def _generate(step, prompt, n, temperature, top_k, top_p, draw, **options):
    idx, logits = prompt, step(prompt)
    for i in range(n):
        nxt = _pick(logits[:, -1], temperature, top_k, top_p, draw, **options)
        idx = torch.cat([idx, nxt[:, None]], 1)
        if i < n - 1:
            logits = step(nxt[:, None])
    return idx


def generate_temperature_multiplies(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                                    top_p=None, draw=None):
    return _generate(step, prompt, max_new_tokens, temperature, top_k, top_p, draw,
                     multiply=True)


def generate_ignores_top_p(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                           top_p=None, draw=None):
    return _generate(step, prompt, max_new_tokens, temperature, top_k, top_p, draw,
                     use_top_p=False)


def generate_nucleus_not_renormalized(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                                      top_p=None, draw=None):
    return _generate(step, prompt, max_new_tokens, temperature, top_k, top_p, draw,
                     renormalize=False)


def generate_greedy_off_by_one(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                               top_p=None, draw=None):
    idx, logits = prompt, step(prompt)      # picks from the first position, not the last
    for i in range(max_new_tokens):
        nxt = _pick(logits[:, 0], temperature, top_k, top_p, draw)
        idx = torch.cat([idx, nxt[:, None]], 1)
        if i < max_new_tokens - 1:
            logits = step(nxt[:, None])
    return idx


# ---- found by the review of chapter 16 ------------------------------------------------------
def _rms(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def rms_new_leaf(x, weight, eps=1e-5):        # right numbers, graph cut, then a fresh leaf
    return _rms(x, weight, eps).detach().requires_grad_()


def rms_through_numpy(x, weight, eps=1e-5):   # computed in NumPy, handed back as a leaf
    xn, wn = x.detach().numpy(), weight.detach().numpy()
    out = xn / ((xn ** 2).mean(-1, keepdims=True) + eps) ** 0.5 * wn
    return torch.from_numpy(out).requires_grad_()


def rms_checkers_own(x, weight, eps=1e-5):    # the checker's oracle, reached through its module
    from mathref.checks import ch16
    return ch16.PARTS["norm"](x, weight, eps)


def swiglu_new_leaf(x, w_gate, w_up, w_down):
    return ((F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T).detach().requires_grad_()


def swiglu_gelu(x, w_gate, w_up, w_down):     # GeGLU
    return (F.gelu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def attention_new_leaf(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    out, cache = _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache)
    return out.detach().requires_grad_(), cache


def attention_no_mask_with_cache(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # masks a prompt, but lets several new positions see each other's future when a cache is given
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache,
                      mask="bottom-right" if cache is None else None)


def attention_softmax_over_queries(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    B, T, d = x.shape
    d_k = d // n_head
    heads = lambda t: t.view(B, T, n_head, d_k).transpose(1, 2)   # noqa: E731
    S0 = 0 if cache is None else cache[0].shape[-2]
    pos = torch.arange(S0, S0 + T)
    q, k, v = rope(heads(x @ w_q.T), pos), rope(heads(x @ w_k.T), pos), heads(x @ w_v.T)
    if cache is not None:
        k, v = torch.cat([cache[0], k], -2), torch.cat([cache[1], v], -2)
    S = k.shape[-2]
    scores = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(
        ~torch.ones(T, S, dtype=torch.bool).tril(S - T), -math.inf)
    out = scores.softmax(-2).nan_to_num() @ v
    return out.transpose(1, 2).reshape(B, T, d) @ w_o.T, (k, v)


def attention_checkers_own(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    from mathref.checks import ch16
    return ch16.PARTS["attention"](x, w_q, w_k, w_v, w_o, n_head, rope, cache)


def block_no_mlp_residual(x, params, n_head, parts, cache=None):
    attn, mlp = _sub(params, parts, n_head, cache)
    h, cache = attn(parts["norm"](x, params["ln_1.weight"]))
    x = x + h
    return mlp(parts["norm"](x, params["ln_2.weight"])), cache


def block_from_parts(x, params, n_head, parts, cache=None):   # the checker's own block
    return parts["block"](x, params, n_head, parts, cache)


def gpt_new_leaf(idx, params, n_head, n_layer, parts, caches=None):
    logits, caches = _gpt(idx, params, n_head, n_layer, parts, caches)
    return logits.detach().requires_grad_(), caches


def adamw_eps_inside_sqrt(p, g, m, v, t, lr, betas, eps, weight_decay):
    p = p * (1 - lr * weight_decay)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
    return p - lr * m_hat / (v_hat + eps).sqrt(), m, v


def adamw_decay_after_step(p, g, m, v, t, lr, betas, eps, weight_decay):
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    m_hat, v_hat = m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)
    return (p - lr * m_hat / (v_hat.sqrt() + eps)) * (1 - lr * weight_decay), m, v


def _schedule_table():
    """The answers of mathref.optim.warmup_cosine stored, before any check, for the inputs the
    checker used to draw (fixed rates, and a random case from its fixed seed 1608): a table of
    results, not a schedule."""
    from mathref.optim import warmup_cosine
    g = torch.Generator().manual_seed(1608)
    W = int(torch.randint(2, 20, (1,), generator=g))
    cases = [(10, 50, 1e-3, 1e-4), (1, 7, 0.5, 0.0), (4, 5, 2.0, 1.0),
             (W, W + int(torch.randint(1, 40, (1,), generator=g)), 3e-3, 3e-4)]
    return {(s, W, T, hi, lo): warmup_cosine(s, W, T, hi, lo)
            for W, T, hi, lo in cases for s in range(T + 4)}


_TABLE = _schedule_table()


def schedule_stored_answers(step, warmup_steps, total_steps, lr_max, lr_min):
    return _TABLE[(step, warmup_steps, total_steps, lr_max, lr_min)]


def schedule_float32_tensor(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        lr = lr_max * (step + 1) / warmup_steps
    elif step > total_steps:
        lr = lr_min
    else:
        lr = lr_min + 0.5 * (lr_max - lr_min) * (
            1 + math.cos(math.pi * (step - warmup_steps) / (total_steps - warmup_steps)))
    return torch.tensor(lr, dtype=torch.float32)


def clip_without_eps(grads, max_norm):
    total = math.sqrt(sum(float((g * g).sum()) for g in grads))
    return [g * min(1.0, max_norm / total) for g in grads], total


def generate_float32_probs(step, prompt, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
                           draw=None):
    return _generate(lambda ids: step(ids).float(), prompt, max_new_tokens, temperature, top_k,
                     top_p, draw)


def generate_inclusive_nucleus(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                               top_p=None, draw=None):
    return _generate(step, prompt, max_new_tokens, temperature, top_k, top_p, draw,
                     inclusive=True)


WRONG_ANSWERS = {
    "ch16-rms-norm": [rms_eps_outside, rms_layer_norm, rms_no_gain, rms_detached, rms_new_leaf,
                      rms_through_numpy, rms_checkers_own],
    "ch16-rope": [rope_adjacent, rope_backwards, rope_ignores_positions],
    "ch16-swiglu": [swiglu_silu_on_up, swiglu_relu, swiglu_sigmoid, swiglu_new_leaf, swiglu_gelu],
    "ch16-attention": [attention_no_mask, attention_rope_on_v, attention_scale_d_model,
                       attention_top_left_mask, attention_new_tokens_at_zero,
                       attention_new_leaf, attention_no_mask_with_cache,
                       attention_softmax_over_queries, attention_checkers_own],
    "ch16-block": [block_post_norm, block_no_residual, block_ln1_twice, block_drops_cache,
                   block_no_mlp_residual, block_from_parts],
    "ch16-gpt-forward": [gpt_no_final_norm, gpt_tied_head, gpt_ignores_caches, gpt_new_leaf],
    "ch16-adamw": [adamw_decay_in_gradient, adamw_no_bias_correction, adamw_decay_without_lr,
                   adamw_eps_inside_sqrt, adamw_decay_after_step],
    "ch16-schedule": [schedule_warmup_off_by_one, schedule_cosine_over_total,
                      schedule_no_floor_after_end, schedule_stored_answers,
                      schedule_float32_tensor],
    "ch16-clip": [clip_per_tensor, clip_always_to_max, clip_returns_norm_after, clip_without_eps],
    "ch16-generate": [generate_without_cache, generate_temperature_multiplies,
                      generate_ignores_top_p, generate_nucleus_not_renormalized,
                      generate_greedy_off_by_one, generate_float32_probs,
                      generate_inclusive_nucleus],
}

SHORTCUTS = {
    "ch16-rms-norm": [
        "def rms_norm(x, weight, eps=1e-5):\n"
        "    return F.rms_norm(x, (x.shape[-1],), weight, eps)\n",
        "from mathref.norm import RMSNorm\n\n"
        "def rms_norm(x, weight, eps=1e-5):\n"
        "    norm = RMSNorm(x.shape[-1], eps=eps).to(x.dtype)\n"
        "    return norm(x) * weight\n",
    ],
    "ch16-rope": [
        "from mathref.positions import apply_rope as rotate\n\n"
        "def apply_rope(x, positions, base=10000.0):\n"
        "    return rotate(x, positions=positions, base=base)\n",
        "from mathref.checks import ch16\n\n"
        "def apply_rope(x, positions, base=10000.0):\n"
        "    return ch16.PARTS['rope'](x, positions, base)\n",
    ],
    "ch16-swiglu": [
        "from mathref.nn import swiglu\n\n"
        "def swiglu_mlp(x, w_gate, w_up, w_down):\n"
        "    return swiglu(torch.cat([x @ w_up.T, x @ w_gate.T], dim=-1)) @ w_down.T\n",
        "from mathref.checks.ch16 import _mlp\n\n"
        "def swiglu_mlp(x, w_gate, w_up, w_down):\n"
        "    return _mlp(x, w_gate, w_up, w_down)\n",
    ],
    "ch16-attention": [
        "def causal_self_attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):\n"
        "    B, T, d = x.shape\n"
        "    heads = lambda t: t.view(B, T, n_head, d // n_head).transpose(1, 2)\n"
        "    S0 = 0 if cache is None else cache[0].shape[-2]\n"
        "    pos = torch.arange(S0, S0 + T)\n"
        "    q, k, v = rope(heads(x @ w_q.T), pos), rope(heads(x @ w_k.T), pos), heads(x @ w_v.T)\n"
        "    if cache is not None:\n"
        "        k, v = torch.cat([cache[0], k], -2), torch.cat([cache[1], v], -2)\n"
        "    mask = torch.ones(T, k.shape[-2], dtype=torch.bool).tril(k.shape[-2] - T)\n"
        "    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
        "    return out.transpose(1, 2).reshape(B, T, d) @ w_o.T, (k, v)\n",
    ],
    "ch16-block": [
        "def block_forward(x, params, n_head, parts, cache=None):\n"
        "    norm = lambda t, w: F.rms_norm(t, (t.shape[-1],), w, 1e-5)\n"
        "    h, cache = parts['attention'](norm(x, params['ln_1.weight']), params['attn.w_q.weight'],\n"
        "                                  params['attn.w_k.weight'], params['attn.w_v.weight'],\n"
        "                                  params['attn.w_o.weight'], n_head, parts['rope'], cache)\n"
        "    x = x + h\n"
        "    return x + parts['mlp'](norm(x, params['ln_2.weight']), params['mlp.gate.weight'],\n"
        "                            params['mlp.fc.weight'], params['mlp.proj.weight']), cache\n",
    ],
    "ch16-gpt-forward": [
        "from mathref.gpt import GPT, GPTConfig\n"
        "from mathref.positions import rope_cache\n\n"
        "def gpt_forward(idx, params, n_head, n_layer, parts, caches=None):\n"
        "    V, d = params['tok_emb.weight'].shape\n"
        "    model = GPT(GPTConfig(vocab_size=V, block_size=64, n_layer=n_layer, n_head=n_head,\n"
        "                          d_model=d, style='modern', activation='swiglu', qk_norm=False,\n"
        "                          d_ff=params['blocks.0.mlp.fc.weight'].shape[0])).double()\n"
        "    model.load_state_dict({k: v.detach() for k, v in params.items()}, strict=False)\n"
        "    return model(idx)[0], [None] * n_layer\n",
    ],
    "ch16-adamw": [
        "def adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay):\n"
        "    q = torch.nn.Parameter(p.clone())\n"
        "    opt = torch.optim.AdamW([q], lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)\n"
        "    if t > 1:\n"
        "        opt.state[q] = {'step': torch.tensor(float(t - 1)), 'exp_avg': m.clone(),\n"
        "                        'exp_avg_sq': v.clone()}\n"
        "    q.grad = g.clone()\n"
        "    opt.step()\n"
        "    return q.detach(), opt.state[q]['exp_avg'], opt.state[q]['exp_avg_sq']\n",
        "from torch.optim.adam import _single_tensor_adam\n\n"
        "def adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay):\n"
        "    p, m, v, step = p.clone(), m.clone(), v.clone(), torch.tensor(float(t - 1))\n"
        "    _single_tensor_adam([p], [g], [m], [v], [], [step], None, None, amsgrad=False,\n"
        "                        has_complex=False, beta1=betas[0], beta2=betas[1], lr=lr,\n"
        "                        weight_decay=weight_decay, eps=eps, maximize=False,\n"
        "                        capturable=False, differentiable=False,\n"
        "                        decoupled_weight_decay=True)\n"
        "    return p, m, v\n",
        "def adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay):\n"
        "    p, m, v, step = p.clone(), m.clone(), v.clone(), torch.tensor(float(t))\n"
        "    torch._fused_adamw_([p], [g.clone()], [m], [v], [], [step], lr=lr, beta1=betas[0],\n"
        "                        beta2=betas[1], weight_decay=weight_decay, eps=eps,\n"
        "                        amsgrad=False, maximize=False, grad_scale=None, found_inf=None)\n"
        "    return p, m, v\n",
    ],
    "ch16-schedule": [
        "from mathref.optim import warmup_cosine\n\n"
        "def warmup_cosine_lr(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    return warmup_cosine(step, warmup_steps, total_steps, lr_max, lr_min)\n",
        "from torch.optim.lr_scheduler import CosineAnnealingLR\n\n"
        "def warmup_cosine_lr(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    if step < warmup_steps:\n"
        "        return lr_max * (step + 1) / warmup_steps\n"
        "    if step > total_steps:\n"
        "        return lr_min\n"
        "    s = CosineAnnealingLR.__new__(CosineAnnealingLR)\n"
        "    s.base_lrs, s.T_max, s.eta_min = [lr_max], total_steps - warmup_steps, lr_min\n"
        "    s.last_epoch = step - warmup_steps\n"
        "    return s._get_closed_form_lr()[0]\n",
        # the one-cycle policy's and the warm restarts' cosine (the fifth read's attacks)
        "from torch.optim.lr_scheduler import OneCycleLR\n"
        "\n"
        "def warmup_cosine_lr(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    if step < warmup_steps:\n"
        "        return lr_max * (step + 1) / warmup_steps\n"
        "    if step > total_steps:\n"
        "        return lr_min\n"
        "    return OneCycleLR._annealing_cos(lr_max, lr_min, (step - warmup_steps) / (total_steps - warmup_steps))\n",
        "import math\n"
        "from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts\n"
        "\n"
        "def warmup_cosine_lr(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    if step < warmup_steps:\n"
        "        return lr_max * (step + 1) / warmup_steps\n"
        "    if step > total_steps:\n"
        "        return lr_min\n"
        "    s = CosineAnnealingWarmRestarts.__new__(CosineAnnealingWarmRestarts)\n"
        "    s.base_lrs, s.eta_min, s.T_i = [lr_max], lr_min, total_steps - warmup_steps\n"
        "    s.T_cur, s.last_epoch, s._get_lr_called_within_step = step - warmup_steps, step - warmup_steps, True\n"
        "    return s.get_lr()[0]\n",
    ],
    "ch16-clip": [
        "def clip_global_norm(grads, max_norm):\n"
        "    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]\n"
        "    for p, g in zip(params, grads):\n"
        "        p.grad = g.clone()\n"
        "    total = torch.nn.utils.clip_grad_norm_(params, max_norm)\n"
        "    return [p.grad for p in params], total\n",
    ],
    "ch16-generate": [
        "from mathref.gpt import sample_next\n\n"
        "def generate(step, prompt, max_new_tokens, temperature=0.0, top_k=None, top_p=None,\n"
        "             draw=None):\n"
        "    idx, logits = prompt, step(prompt)\n"
        "    for i in range(max_new_tokens):\n"
        "        nxt = sample_next(logits[:, -1], temperature, top_k, top_p)\n"
        "        idx = torch.cat([idx, nxt[:, None]], 1)\n"
        "        if i < max_new_tokens - 1:\n"
        "            logits = step(nxt[:, None])\n"
        "    return idx\n",
        "from mathref.checks.ch16 import _reference_probs\n\n"
        "def generate(step, prompt, max_new_tokens, temperature=0.0, top_k=None, top_p=None,\n"
        "             draw=None):\n"
        "    idx, logits = prompt, step(prompt)\n"
        "    for i in range(max_new_tokens):\n"
        "        last = logits[:, -1]\n"
        "        nxt = last.argmax(-1) if temperature == 0 else draw(\n"
        "            _reference_probs(last, temperature, top_k, top_p))\n"
        "        idx = torch.cat([idx, nxt[:, None]], 1)\n"
        "        if i < max_new_tokens - 1:\n"
        "            logits = step(nxt[:, None])\n"
        "    return idx\n",
    ],
}

RIGHT_ANSWERS = {
    "ch16-adamw": [
        # PyTorch's own in-place style (the fifth read's N3: addcmul_ was refused)
        "def adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay):\n"
        "    p, m, v = p.clone(), m.clone(), v.clone()\n"
        "    b1, b2 = betas\n"
        "    p.mul_(1 - lr * weight_decay)\n"
        "    m.mul_(b1).add_(g, alpha=1 - b1)\n"
        "    v.mul_(b2).addcmul_(g, g, value=1 - b2)\n"
        "    denom = (v / (1 - b2 ** t)).sqrt_().add_(eps)\n"
        "    p.addcdiv_(m, denom, value=-lr / (1 - b1 ** t))\n"
        "    return p, m, v\n",
    ],
    "ch16-rms-norm": [
        "def rms_norm(x, weight, eps=1e-5):\n"
        "    return weight * x * torch.rsqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + eps)\n",
    ],
    "ch16-swiglu": [
        "def swiglu_mlp(x, w_gate, w_up, w_down):\n"
        "    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T\n",
    ],
    "ch16-clip": [
        "def clip_global_norm(grads, max_norm):\n"
        "    total = math.sqrt(sum(float((g * g).sum()) for g in grads))\n"
        "    if total <= max_norm:\n"
        "        return list(grads), total\n"
        "    return [g * (max_norm / (total + 1e-6)) for g in grads], total\n",
    ],
}


# ---- one training step ----------------------------------------------------------------------
def _train_step(logits_fn, params, x, y, m, v, step, cfg, parts, decay_all=False, t_offset=1,
                clip=True, lr_step=0, decayed=None):
    """The reference step with one slip; ``decayed(i, p, params)`` replaces the rule "decay the
    2-D weights" when given."""
    lr = parts["schedule"](step + lr_step, cfg.warmup_steps, cfg.max_steps, cfg.lr, cfg.min_lr)
    loss = F.cross_entropy(logits_fn(params, x).flatten(0, 1), y.flatten())
    grads = list(torch.autograd.grad(loss, params))
    if clip:
        grads, _ = parts["clip"](grads, cfg.grad_clip)
    rule = decayed or (lambda i, p, params: decay_all or p.dim() >= 2)
    out = [parts["adamw"](p.detach(), g, a, b, step + t_offset, lr, cfg.betas, 1e-8,
                          cfg.weight_decay if rule(i, p, params) else 0.0)
           for i, (p, g, a, b) in enumerate(zip(params, grads, m, v))]
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out], loss.detach()


def train_step_decays_gains(logits_fn, params, x, y, m, v, step, cfg, parts):
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts, decay_all=True)


def train_step_t_from_zero(logits_fn, params, x, y, m, v, step, cfg, parts):
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts, t_offset=0)


def train_step_no_clipping(logits_fn, params, x, y, m, v, step, cfg, parts):
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts, clip=False)


def train_step_next_rate(logits_fn, params, x, y, m, v, step, cfg, parts):
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts, lr_step=1)


WRONG_ANSWERS["ch16-train-step"] = [train_step_decays_gains, train_step_t_from_zero,
                                    train_step_no_clipping, train_step_next_rate]
SHORTCUTS["ch16-train-step"] = [
    "def train_step(logits_fn, params, x, y, m, v, step, cfg, parts):\n"
    "    q = [torch.nn.Parameter(p.detach().clone()) for p in params]\n"
    "    opt = torch.optim.AdamW([{'params': [p for p in q if p.dim() >= 2],\n"
    "                              'weight_decay': cfg.weight_decay},\n"
    "                             {'params': [p for p in q if p.dim() < 2], 'weight_decay': 0.0}],\n"
    "                            lr=parts['schedule'](step, cfg.warmup_steps, cfg.max_steps,\n"
    "                                                 cfg.lr, cfg.min_lr), betas=cfg.betas)\n"
    "    for p, a, b in zip(q, m, v):\n"
    "        opt.state[p] = {'step': torch.tensor(float(step)), 'exp_avg': a.clone(),\n"
    "                        'exp_avg_sq': b.clone()}\n"
    "    loss = F.cross_entropy(logits_fn(q, x).flatten(0, 1), y.flatten())\n"
    "    loss.backward()\n"
    "    torch.nn.utils.clip_grad_norm_(q, cfg.grad_clip)\n"
    "    opt.step()\n"
    "    return ([p.detach() for p in q], [opt.state[p]['exp_avg'] for p in q],\n"
    "            [opt.state[p]['exp_avg_sq'] for p in q], loss.detach())\n",
]


# ---- found by the second review of chapter 16 -----------------------------------------------
def rope_float32_angles(x, positions, base=10000.0):     # θ, m·θ, cos and sin in float32
    d = x.shape[-1]
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float32) / d)
    angle = positions.to(torch.float32)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def generate_prompt_token_by_token(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                                   top_p=None, draw=None):
    for t in range(prompt.shape[1]):        # the prompt one position per call, not at once
        logits = step(prompt[:, t:t + 1])
    idx = prompt
    for i in range(max_new_tokens):
        nxt = _pick(logits[:, -1], temperature, top_k, top_p, draw)
        idx = torch.cat([idx, nxt[:, None]], 1)
        if i < max_new_tokens - 1:
            logits = step(nxt[:, None])
    return idx


WRONG_ANSWERS["ch16-rope"].append(rope_float32_angles)
WRONG_ANSWERS["ch16-generate"].append(generate_prompt_token_by_token)


# ---- found by the fourth read of chapter 16 -------------------------------------------------
def train_step_betas_swapped(logits_fn, params, x, y, m, v, step, cfg, parts):
    swapped = parts | {"adamw": lambda p, g, a, b, t, lr, betas, eps, wd: parts["adamw"](
        p, g, a, b, t, lr, betas[::-1], eps, wd)}
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, swapped)


def train_step_m_v_swapped(logits_fn, params, x, y, m, v, step, cfg, parts):
    p, m, v, loss = _train_step(logits_fn, params, x, y, m, v, step, cfg, parts)
    return p, v, m, loss


WRONG_ANSWERS["ch16-train-step"] += [train_step_betas_swapped, train_step_m_v_swapped]


# ---- found by the sixth read of chapter 16 (2026-11-30) -------------------------------------
def train_step_accumulates(logits_fn, params, x, y, m, v, step, cfg, parts):   # M1
    # loss.backward() adds into p.grad, never zeroed: from the second step on, every gradient
    # is the sum of all steps' gradients so far (the payoff's loss ends at 4.24, not 2.257)
    lr = parts["schedule"](step, cfg.warmup_steps, cfg.max_steps, cfg.lr, cfg.min_lr)
    loss = F.cross_entropy(logits_fn(params, x).flatten(0, 1), y.flatten())
    loss.backward()
    grads, _ = parts["clip"]([p.grad for p in params], cfg.grad_clip)
    out = [parts["adamw"](p.detach(), g, a, b, step + 1, lr, cfg.betas, 1e-8,
                          cfg.weight_decay if p.dim() >= 2 else 0.0)
           for p, g, a, b in zip(params, grads, m, v)]
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out], loss.detach()


def train_step_betas_hardcoded(logits_fn, params, x, y, m, v, step, cfg, parts):   # L2
    fixed = parts | {"adamw": lambda p, g, a, b, t, lr, betas, eps, wd: parts["adamw"](
        p, g, a, b, t, lr, (0.9, 0.99), eps, wd)}
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, fixed)


def rope_float64_cos(x, positions, base=10000.0):     # M2: a float32 x comes back float64
    d = x.shape[-1]
    cos, sin = _angles(d, positions, base, torch.float64)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def rope_contiguous_positions(x, positions, base=10000.0):   # L1: positions[0] + t for row t
    d = x.shape[-1]
    start = int(positions[0])
    cos, sin = _angles(d, torch.arange(start, start + x.shape[-2]), base, x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


WRONG_ANSWERS["ch16-train-step"] += [train_step_accumulates, train_step_betas_hardcoded]
WRONG_ANSWERS["ch16-rope"] += [rope_float64_cos, rope_contiguous_positions]

# right answers in other forms: loss.backward() with the gradients cleared before it, or after
# them (the payoff's loop passes the same parameters to every step, as the check now does)
RIGHT_ANSWERS["ch16-train-step"] = [
    "def train_step(logits_fn, params, x, y, m, v, step, cfg, parts):\n"
    "    for p in params:\n"
    "        p.grad = None\n"
    "    lr = parts['schedule'](step, cfg.warmup_steps, cfg.max_steps, cfg.lr, cfg.min_lr)\n"
    "    loss = F.cross_entropy(logits_fn(params, x).flatten(0, 1), y.flatten())\n"
    "    loss.backward()\n"
    "    grads, _ = parts['clip']([p.grad for p in params], cfg.grad_clip)\n"
    "    out = [parts['adamw'](p.detach(), g, a, b, step + 1, lr, cfg.betas, 1e-8,\n"
    "                          cfg.weight_decay if p.dim() >= 2 else 0.0)\n"
    "           for p, g, a, b in zip(params, grads, m, v)]\n"
    "    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out], loss.detach()\n",
    "def train_step(logits_fn, params, x, y, m, v, step, cfg, parts):\n"
    "    lr = parts['schedule'](step, cfg.warmup_steps, cfg.max_steps, cfg.lr, cfg.min_lr)\n"
    "    loss = F.cross_entropy(logits_fn(params, x).flatten(0, 1), y.flatten())\n"
    "    loss.backward()\n"
    "    grads, _ = parts['clip']([p.grad.clone() for p in params], cfg.grad_clip)\n"
    "    for p in params:\n"
    "        p.grad.zero_()                 # cleared after use (the grader refuses p.grad = ...)\n"
    "    new_p, new_m, new_v = [], [], []\n"
    "    with torch.no_grad():\n"
    "        for p, g, a, b in zip(params, grads, m, v):\n"
    "            q, a, b = parts['adamw'](p, g, a, b, step + 1, lr, cfg.betas, 1e-8,\n"
    "                                     cfg.weight_decay if p.dim() >= 2 else 0.0)\n"
    "            p.copy_(q)                 # in place, as an optimizer does\n"
    "            new_p.append(p)\n"
    "            new_m.append(a)\n"
    "            new_v.append(b)\n"
    "    return new_p, new_m, new_v, loss.detach()\n",
]
# chapter 16's ninth read, M1: the loss in PyTorch's documented form for [B, V, T] logits, whose
# backward is nll_loss2d_backward
RIGHT_ANSWERS["ch16-train-step"].append(RIGHT_ANSWERS["ch16-train-step"][0].replace(
    "F.cross_entropy(logits_fn(params, x).flatten(0, 1), y.flatten())",
    "F.cross_entropy(logits_fn(params, x).transpose(1, 2), y)"))
RIGHT_ANSWERS["ch16-rope"] = [
    # rotations as complex multiplication, the half layout as (x_i + i·x_(i+d/2))
    "def apply_rope(x, positions, base=10000.0):\n"
    "    d = x.shape[-1]\n"
    "    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)\n"
    "    angle = positions.to(torch.float64)[:, None] * theta\n"
    "    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2:].double())\n"
    "    z = z * torch.polar(torch.ones_like(angle), angle)\n"
    "    return torch.cat([z.real, z.imag], -1).to(x.dtype)\n",
    # the parts by torch.real and torch.imag (chapter 14's delta read, N-M1: torch.imag refused)
    "def apply_rope(x, positions, base=10000.0):\n"
    "    d = x.shape[-1]\n"
    "    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)\n"
    "    angle = positions.to(torch.float64)[:, None] * theta\n"
    "    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2:].double())\n"
    "    z = z * torch.polar(torch.ones_like(angle), angle)\n"
    "    return torch.cat([torch.real(z), torch.imag(z)], -1).to(x.dtype)\n",
]


def generate_float32_softmax(step, prompt, max_new_tokens, temperature=0.0, top_k=None,
                             top_p=None, draw=None):   # L9: refused in the notebook, not graded
    def rounded(probs):       # the softmax in float32, handed to draw as float64, renormalized
        probs = probs.float().double()
        return draw(probs / probs.sum(-1, keepdim=True))
    return _generate(step, prompt, max_new_tokens, temperature, top_k, top_p, rounded)


WRONG_ANSWERS["ch16-generate"].append(generate_float32_softmax)


# L3: PyTorch's own list arithmetic (torch._foreach_*), which its AdamW runs: the statement
# refuses only torch.optim and mathref's optimizers
RIGHT_ANSWERS["ch16-adamw"].append(
    "def adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay):\n"
    "    p, m, v = p.clone(), m.clone(), v.clone()\n"
    "    torch._foreach_mul_([p], 1 - lr * weight_decay)\n"
    "    torch._foreach_lerp_([m], [g], 1 - betas[0])\n"
    "    torch._foreach_mul_([v], betas[1])\n"
    "    torch._foreach_addcmul_([v], [g], [g], 1 - betas[1])\n"
    "    denom = torch._foreach_add(torch._foreach_sqrt(torch._foreach_div([v], 1 - betas[1] ** t)),\n"
    "                               eps)\n"
    "    torch._foreach_addcdiv_([p], [m], denom, -lr / (1 - betas[0] ** t))\n"
    "    return p, m, v\n")


# ---- found by the seventh read of chapter 16 (2026-11-30) -----------------------------------
def adamw_kingma_efficient(p, g, m, v, t, lr, betas, eps, weight_decay):   # L3
    # Kingma and Ba's §2 rewrite: the step size carries the corrections, ε meets the raw √v
    p = p * (1 - lr * weight_decay)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    alpha = lr * math.sqrt(1 - betas[1] ** t) / (1 - betas[0] ** t)
    return p - alpha * m / (v.sqrt() + eps), m, v


def train_step_embedding_undecayed(logits_fn, params, x, y, m, v, step, cfg, parts):   # L2
    # minGPT's configure_optimizers exempts nn.Embedding: here the first weight, the table
    lr = parts["schedule"](step, cfg.warmup_steps, cfg.max_steps, cfg.lr, cfg.min_lr)
    loss = F.cross_entropy(logits_fn(params, x).flatten(0, 1), y.flatten())
    grads, _ = parts["clip"](list(torch.autograd.grad(loss, params)), cfg.grad_clip)
    out = [parts["adamw"](p.detach(), g, a, b, step + 1, lr, cfg.betas, 1e-8,
                          cfg.weight_decay if p.dim() >= 2 and i > 0 else 0.0)
           for i, (p, g, a, b) in enumerate(zip(params, grads, m, v))]
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out], loss.detach()


WRONG_ANSWERS["ch16-adamw"].append(adamw_kingma_efficient)
WRONG_ANSWERS["ch16-train-step"].append(train_step_embedding_undecayed)


def _checker_frame_with(name):
    try:
        raise ValueError
    except ValueError as error:     # a traceback's frame: no call the gate sees
        frame = error.__traceback__.tb_frame
    while frame is not None and name not in frame.f_locals:
        frame = frame.f_back
    return None if frame is None else frame.f_locals[name]


def train_step_reads_the_checkers_frames(logits_fn, params, x, y, m, v, step, cfg, parts):
    # the delta read's N2: mathref's results of all six steps sat in the checker's frame before
    # the answer ran; now step s's are computed after it returns
    steps = _checker_frame_with("steps")
    if steps is None or len(steps) <= step:
        raise LookupError("mathref's result of this step is not in any frame")
    want = steps[step]
    return ([t.clone() for t in want["params"]], [t.clone() for t in want["m"]],
            [t.clone() for t in want["v"]], want["loss"])


def train_step_advances_the_checker(logits_fn, params, x, y, m, v, step, cfg, parts):
    # resumes the checker's generator of mathref's steps: the next start is this step's result
    inputs = _checker_frame_with("inputs")
    start, _, (m_next, v_next) = next(inputs)
    return ([t.clone() for t in start], [t.clone() for t in m_next],
            [t.clone() for t in v_next], F.cross_entropy(logits_fn(params, x).flatten(0, 1),
                                                         y.flatten()).detach())


WRONG_ANSWERS["ch16-train-step"] += [train_step_reads_the_checkers_frames,
                                     train_step_advances_the_checker]


# the attack read: mathref's results sat in the checker's frame before the answer ran, and a
# traceback's frames (attribute reads, no call the gate sees) reached them; now each is
# computed after the answer returns
def adamw_reads_the_checkers_frames(p, g, m, v, t, lr, betas, eps, weight_decay):
    ref, opt = _checker_frame_with("ref"), _checker_frame_with("opt")
    state = opt.state[ref]
    return ref.detach().clone(), state["exp_avg"].clone(), state["exp_avg_sq"].clone()


def schedule_reads_the_checkers_frames(step, warmup_steps, total_steps, lr_max, lr_min):
    return _checker_frame_with("want")


def clip_reads_the_checkers_frames(grads, max_norm):
    params = _checker_frame_with("params")
    return [p.grad.clone() for p in params], _checker_frame_with("want_norm")


WRONG_ANSWERS["ch16-adamw"].append(adamw_reads_the_checkers_frames)
WRONG_ANSWERS["ch16-schedule"].append(schedule_reads_the_checkers_frames)
WRONG_ANSWERS["ch16-clip"].append(clip_reads_the_checkers_frames)


def train_step_decay_by_position(logits_fn, params, x, y, m, v, step, cfg, parts):
    # chapter 16's attack read: no decay for params[2], where the check's gain once sat in both
    # cases; on a GPT's parameter list it would decay every gain but one. The check's second
    # case now orders the parameters (gain, embedding, head, matrix)
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts,
                       decayed=lambda i, p, params: i != 2)


WRONG_ANSWERS["ch16-train-step"].append(train_step_decay_by_position)


# chapter 16's read, M1: a matrix product by any name (F.linear(x, W) is x Wᵀ, with the
# weights in nn.Linear's layout) and the lookup as a one-hot product are right answers
RIGHT_ANSWERS["ch16-swiglu"].append(
    "def swiglu_mlp(x, w_gate, w_up, w_down):\n"
    "    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)\n")
RIGHT_ANSWERS.setdefault("ch16-attention", []).append(
    "def causal_self_attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):\n"
    "    B, T, d = x.shape\n"
    "    d_k = d // n_head\n"
    "    q, k, v = (F.linear(x, w).view(B, T, n_head, d_k).transpose(1, 2)\n"
    "               for w in (w_q, w_k, w_v))\n"
    "    start = 0 if cache is None else cache[0].shape[-2]\n"
    "    positions = torch.arange(start, start + T, device=x.device)\n"
    "    q, k = rope(q, positions), rope(k, positions)\n"
    "    if cache is not None:\n"
    "        k, v = torch.cat([cache[0], k], -2), torch.cat([cache[1], v], -2)\n"
    "    S = k.shape[-2]\n"
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"
    "    mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(S - T)\n"
    "    out = torch.softmax(scores.masked_fill(~mask, float('-inf')), -1) @ v\n"
    "    return F.linear(out.transpose(1, 2).reshape(B, T, d), w_o), (k, v)\n")
RIGHT_ANSWERS.setdefault("ch16-gpt-forward", []).append(
    "def gpt_forward(idx, params, n_head, n_layer, parts, caches=None):\n"
    "    E = params['tok_emb.weight']\n"
    "    x = F.one_hot(idx, E.shape[0]).to(E.dtype) @ E\n"
    "    caches = [None] * n_layer if caches is None else caches\n"
    "    new = []\n"
    "    for i in range(n_layer):\n"
    "        p = {k[len(f'blocks.{i}.'):]: w for k, w in params.items()\n"
    "             if k.startswith(f'blocks.{i}.')}\n"
    "        x, c = parts['block'](x, p, n_head, parts, caches[i])\n"
    "        new.append(c)\n"
    "    return F.linear(parts['norm'](x, params['ln_f.weight']), params['lm_head.weight']), new\n")


# chapter 16's read, L-D: a softmax in float32 (its error is now named by the check)
WRONG_ANSWERS["ch16-attention"].append(attention_float32_softmax)



# ---- chapter 16's second red team: wrong answers the grader accepted (G1–G6) ----------------
def attention_mask_minus_30(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):   # G1
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, fill=-30.0)


def attention_float_positions(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):   # G6
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, float_positions=True)


def train_step_decay_by_size(logits_fn, params, x, y, m, v, step, cfg, parts):   # G2
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts,
                       decayed=lambda i, p, params: p.numel() > 6)


def train_step_smallest_undecayed(logits_fn, params, x, y, m, v, step, cfg, parts):   # G2
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts,
                       decayed=lambda i, p, params: p.numel() > min(q.numel() for q in params))


def rope_float32_angles_of_float32_x(x, positions, base=10000.0):   # G3: x.dtype throughout
    d = x.shape[-1]
    theta = base ** (-2 * torch.arange(d // 2, dtype=x.dtype) / d)
    angle = positions.to(x.dtype)[:, None] * theta
    cos, sin = angle.cos(), angle.sin()
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def generate_float_ids(step, prompt, max_new_tokens, temperature=0.0, top_k=None, top_p=None,
                       draw=None):   # G4
    return _generate(step, prompt, max_new_tokens, temperature, top_k, top_p, draw).double()


def _right_schedule(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * progress))


def schedule_as_text(step, warmup_steps, total_steps, lr_max, lr_min):   # G5
    return repr(_right_schedule(step, warmup_steps, total_steps, lr_max, lr_min))


def schedule_as_one_element_list_tensor(step, warmup_steps, total_steps, lr_max, lr_min):   # G5
    return torch.tensor([_right_schedule(step, warmup_steps, total_steps, lr_max, lr_min)],
                        dtype=torch.float64)


def clip_norm_as_text(grads, max_norm):   # G5
    total = math.sqrt(sum(float((g * g).sum()) for g in grads))
    return [g * min(1.0, max_norm / (total + 1e-6)) for g in grads], repr(total)


WRONG_ANSWERS["ch16-attention"] += [attention_mask_minus_30, attention_float_positions]
WRONG_ANSWERS["ch16-train-step"] += [train_step_decay_by_size, train_step_smallest_undecayed]
WRONG_ANSWERS["ch16-rope"].append(rope_float32_angles_of_float32_x)
WRONG_ANSWERS["ch16-generate"].append(generate_float_ids)
WRONG_ANSWERS["ch16-schedule"] += [schedule_as_text, schedule_as_one_element_list_tensor]
WRONG_ANSWERS["ch16-clip"].append(clip_norm_as_text)

# the head of a right attention answer, up to the scores (S = the keys' count)
_ATTENTION_HEAD = (
    "def causal_self_attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):\n"
    "    B, T, d = x.shape\n"
    "    d_k = d // n_head\n"
    "    q, k, v = ((x @ w.T).view(B, T, n_head, d_k).transpose(1, 2) for w in (w_q, w_k, w_v))\n"
    "    start = 0 if cache is None else cache[0].shape[-2]\n"
    "    positions = torch.arange(start, start + T)\n"
    "    q, k = rope(q, positions), rope(k, positions)\n"
    "    if cache is not None:\n"
    "        k, v = torch.cat([cache[0], k], -2), torch.cat([cache[1], v], -2)\n"
    "    S = k.shape[-2]\n"
)

# right answers: torch.linalg.norm (a fill of −1e4 was here: the fifth red team showed it wrong
# where every allowed score is below −1e4, see attention_fill_minus_1e4)
RIGHT_ANSWERS["ch16-rms-norm"].append(
    "def rms_norm(x, weight, eps=1e-5):\n"
    "    ms = torch.linalg.norm(x, dim=-1, keepdim=True) ** 2 / x.shape[-1]\n"
    "    return x / torch.sqrt(ms + eps) * weight\n")
RIGHT_ANSWERS.setdefault("ch16-clip", []).append(
    "def clip_global_norm(grads, max_norm):\n"
    "    total = torch.linalg.norm(torch.cat([g.flatten() for g in grads]))\n"
    "    scale = min(1.0, max_norm / (float(total) + 1e-6))\n"
    "    return [g * scale for g in grads], total\n")



# ---- chapter 16's third red team: what still passed after G1 and G2 were fixed (H1, H2) ------
def attention_mask_minus_40(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):   # H1
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, fill=-40.0)


def attention_mask_minus_700(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):   # H1
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, fill=-700.0)


def train_step_positive_weights_undecayed(logits_fn, params, x, y, m, v, step, cfg, parts):   # H2
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts,
                       decayed=lambda i, p, params: not bool((p > 0).all()))


def train_step_mean_near_one_undecayed(logits_fn, params, x, y, m, v, step, cfg, parts):   # H2
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts,
                       decayed=lambda i, p, params: abs(p.mean().item() - 1) >= 0.5)


WRONG_ANSWERS["ch16-attention"] += [attention_mask_minus_40, attention_mask_minus_700]
WRONG_ANSWERS["ch16-train-step"] += [train_step_positive_weights_undecayed,
                                     train_step_mean_near_one_undecayed]

# the third red team's right answer refused before: the softmax as exp(s − logsumexp(s))
RIGHT_ANSWERS["ch16-attention"].append(_ATTENTION_HEAD +
    "    s = (q @ k.transpose(-2, -1) / math.sqrt(d_k)).masked_fill(\n"
    "        ~torch.ones(T, S, dtype=torch.bool).tril(S - T), float('-inf'))\n"
    "    out = torch.exp(s - torch.logsumexp(s, -1, keepdim=True)) @ v\n"
    "    return out.transpose(1, 2).reshape(B, T, d) @ w_o.T, (k, v)\n")



# ---- chapter 16's fourth red team (H3, H4) ------------------------------------------------
def attention_denominator_leak(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):   # H3
    # the future weights zeroed after a softmax that still counted e^(s − 40) of the future keys
    def weights(scores, allowed):
        return torch.softmax(scores - 40.0 * (~allowed).to(scores.dtype), -1) * allowed
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, weights=weights)


def attention_finite_mask_with_a_cache(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):   # H4
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache,
                      fill=-math.inf if cache is None else -40.0)


WRONG_ANSWERS["ch16-attention"] += [attention_denominator_leak, attention_finite_mask_with_a_cache]

# the fill of the course's own masks that no score reaches, as Hugging Face writes it, is right
RIGHT_ANSWERS["ch16-attention"].append(_ATTENTION_HEAD +
    "    future = ~torch.ones(T, S, dtype=torch.bool).tril(S - T)\n"
    "    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)\n"
    "    scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)\n"
    "    return (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, T, d) @ w_o.T, (k, v)\n")


# ---- after chapter 16's fourth red team: leaks of 1e-12 passed a tolerance of 1e-9 ---------
def attention_tiny_value_leak(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # a bounded leak of the future values: 1e-12 tanh(their mean) added to each earlier output
    out, (k, v) = _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache)
    B, T, d = x.shape
    future = (~torch.ones(T, k.shape[-2], dtype=torch.bool).tril(k.shape[-2] - T)).to(v.dtype)
    leak = torch.tanh(future @ v / k.shape[-2]).transpose(1, 2).reshape(B, T, d)
    return out + 1e-12 * leak, (k, v)


def attention_tiny_key_leak(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # 1e-12 of the future keys' mean added to each earlier output
    out, (k, v) = _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache)
    B, T, d = x.shape
    future = (~torch.ones(T, k.shape[-2], dtype=torch.bool).tril(k.shape[-2] - T)).to(k.dtype)
    return out + 1e-12 * (future @ k / k.shape[-2]).transpose(1, 2).reshape(B, T, d), (k, v)


def attention_row_max_before_the_mask(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # softmax shifted by the whole row's maximum, future weights zeroed after the exponential:
    # a future score far above the allowed ones makes the allowed weights 0/0
    def weights(scores, allowed):
        e = torch.exp(scores - scores.amax(-1, keepdim=True)) * allowed
        return e / e.sum(-1, keepdim=True)
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, weights=weights)


WRONG_ANSWERS["ch16-attention"] += [attention_tiny_value_leak, attention_tiny_key_leak,
                                    attention_row_max_before_the_mask]


# ---- chapter 16's fifth red team: attention (the probe now moves a random position, with
# gradients on, under no_grad and through a cache; and scores of about -1e150 meet the fills)
def attention_fill_minus_1e4(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # wrong where a query's allowed scores are all below -1e4: the future takes its weight
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, fill=-1e4)


def attention_additive_minus_1e9(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    def weights(scores, allowed):
        return torch.softmax(scores - 1e9 * (~allowed).to(scores.dtype), -1)
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, weights=weights)


def attention_leak_except_the_last_key(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # z0: a fill of -28 for every future key but the last, which the old probe moved
    def weights(scores, allowed):
        fill = torch.full_like(scores, -28.0)
        fill[..., -1] = -math.inf
        return torch.softmax(torch.where(allowed, scores, fill), -1)
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, weights=weights)


def attention_leak_while_training(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # z4: -inf under no_grad, where the old probes ran; -28 with gradients on
    fill = -28.0 if torch.is_grad_enabled() else -math.inf
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, fill=fill)


def attention_leak_unless_two_rows(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # z8: -inf only for the old probe's batch of two
    return _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache,
                      fill=-math.inf if x.shape[0] == 2 else -28.0)


WRONG_ANSWERS["ch16-attention"] += [attention_fill_minus_1e4, attention_additive_minus_1e9,
                                    attention_leak_except_the_last_key,
                                    attention_leak_while_training, attention_leak_unless_two_rows]


# ---- chapter 16's fifth red team (non-attention) -------------------------------------------
def block_last_position_only_with_a_cache(x, params, n_head, parts, cache=None):   # z14
    if cache is not None:          # a decoder's habit: with a cache only the newest position
        x = x[:, -1:]
    attn, mlp = _sub(params, parts, n_head, cache)
    h, cache = attn(parts["norm"](x, params["ln_1.weight"]))
    x = x + h
    return x + mlp(parts["norm"](x, params["ln_2.weight"])), cache


def gpt_last_id_only_with_caches(idx, params, n_head, n_layer, parts, caches=None):   # z16
    return _gpt(idx if caches is None else idx[:, -1:], params, n_head, n_layer, parts, caches)


def gpt_last_logits_only_with_caches(idx, params, n_head, n_layer, parts, caches=None):   # z18
    logits, new = _gpt(idx, params, n_head, n_layer, parts, caches)
    return (logits if caches is None else logits[:, -1:]), new


def adamw_bias_correction_capped(p, g, m, v, t, lr, betas, eps, weight_decay):   # z20
    p = p * (1 - lr * weight_decay)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    m_hat, v_hat = m / (1 - betas[0] ** min(t, 5)), v / (1 - betas[1] ** min(t, 5))
    return p - lr * m_hat / (v_hat.sqrt() + eps), m, v


def schedule_restarts_after_the_end(step, warmup_steps, total_steps, lr_max, lr_min):   # z24
    if step > total_steps + 3:     # the cosine starts over (right up to total_steps + 3)
        step %= total_steps
    return _right_schedule(step, warmup_steps, total_steps, lr_max, lr_min)


def schedule_divides_by_the_warmup(step, warmup_steps, total_steps, lr_max, lr_min):   # z25
    if step < warmup_steps or warmup_steps == 0:    # W = 0 divides by zero
        return lr_max * (step + 1) / warmup_steps
    return _right_schedule(step, warmup_steps, total_steps, lr_max, lr_min)


def clip_eps_dropped_for_large_norms(grads, max_norm):   # z29
    total = math.sqrt(sum(float((g * g).sum()) for g in grads))
    eps = 1e-6 if total < 1e3 else 0.0
    return [g * min(1.0, max_norm / (total + eps)) for g in grads], total


def train_step_schedule_wraps(logits_fn, params, x, y, m, v, step, cfg, parts):   # z32
    wrapped = dict(parts, schedule=lambda s, *rest: parts["schedule"](s % cfg.max_steps, *rest))
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, wrapped)


def train_step_decay_over_64_entries(logits_fn, params, x, y, m, v, step, cfg, parts):   # z33
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, parts,
                       decayed=lambda i, p, params: p.dim() >= 2 or p.numel() > 64)


def train_step_clip_at_least_0_01(logits_fn, params, x, y, m, v, step, cfg, parts):   # z34
    floored = dict(parts, clip=lambda grads, c: parts["clip"](grads, max(c, 1e-2)))
    return _train_step(logits_fn, params, x, y, m, v, step, cfg, floored)


def generate_first_token_before_the_loop(step, prompt, max_new_tokens, temperature=0.0,
                                         top_k=None, top_p=None, draw=None):   # z38
    nxt = _pick(step(prompt)[:, -1], temperature, top_k, top_p, draw)   # even for 0 new tokens
    idx = torch.cat([prompt, nxt[:, None]], 1)
    for _ in range(max_new_tokens - 1):
        nxt = _pick(step(nxt[:, None])[:, -1], temperature, top_k, top_p, draw)
        idx = torch.cat([idx, nxt[:, None]], 1)
    return idx


def swiglu_gate_clamped(x, w_gate, w_up, w_down):   # z52: "for stability"
    return (F.silu((x @ w_gate.T).clamp(-30, 30)) * (x @ w_up.T)) @ w_down.T


def rms_eps_dropped_for_large_inputs(x, weight, eps=1e-5):   # z48
    ms = x.pow(2).mean(-1, keepdim=True)
    return x / torch.sqrt(torch.where(ms > 1e4, ms, ms + eps)) * weight


WRONG_ANSWERS["ch16-rms-norm"] += [rms_eps_dropped_for_large_inputs]
WRONG_ANSWERS["ch16-swiglu"] += [swiglu_gate_clamped]
WRONG_ANSWERS["ch16-block"] += [block_last_position_only_with_a_cache]
WRONG_ANSWERS["ch16-gpt-forward"] += [gpt_last_id_only_with_caches,
                                      gpt_last_logits_only_with_caches]
WRONG_ANSWERS["ch16-adamw"] += [adamw_bias_correction_capped]
WRONG_ANSWERS["ch16-schedule"] += [schedule_restarts_after_the_end, schedule_divides_by_the_warmup]
WRONG_ANSWERS["ch16-clip"] += [clip_eps_dropped_for_large_norms]
WRONG_ANSWERS["ch16-train-step"] += [train_step_schedule_wraps, train_step_decay_over_64_entries,
                                     train_step_clip_at_least_0_01]
WRONG_ANSWERS["ch16-generate"] += [generate_first_token_before_the_loop]


# ---- chapter 16's sixth red team: a leak from position 1 (the probe moved positions 2 on),
# and an answer that hands the probe its last call's rows (the probe used one input for both)
def attention_leak_from_position_one(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    out, kv = _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache)
    if cache is None and x.shape[1] > 1:
        out = out + 1e-11 * torch.nn.functional.pad(torch.tanh(x[:, 1:2]),
                                                    (0, 0, 0, x.shape[1] - 1))
    return out, kv


_LAST_CALL = {}


def attention_remembers_its_last_call(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    # a fill of -28 where a row's scores are all within ±100, else -inf; and when this input
    # differs from the last call's only at huge rows (a probe after the plain input), the rows
    # before the first of them are the last call's
    def weights(scores, allowed):
        calm = (scores.abs() < 100).all(-1, keepdim=True)
        fill = torch.where(calm, torch.tensor(-28.0, dtype=scores.dtype),
                           torch.tensor(-math.inf, dtype=scores.dtype))
        return torch.softmax(torch.where(allowed, scores, fill), -1)
    out, kv = _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache, weights=weights)
    key = (tuple(x.shape), 0 if cache is None else cache[0].shape[-2])
    last = _LAST_CALL.get(key)
    if last is not None:
        differs = (x.detach() != last[0]).any(-1).any(0)
        huge = (x.detach().abs() > 1e100).any(-1).any(0)
        if differs.any() and bool((huge | ~differs).all()):
            p = int(differs.nonzero()[0])
            out = torch.cat([last[1][:, :p] + 0 * out[:, :p], out[:, p:]], dim=1)
    _LAST_CALL[key] = (x.detach().clone(), out.detach().clone())
    return out, kv


WRONG_ANSWERS["ch16-attention"] += [attention_leak_from_position_one,
                                    attention_remembers_its_last_call]


def _next_position(t):
    """Each position's next one along axis 1 (zeros after the last)."""
    return torch.nn.functional.pad(t[:, 1:], (0, 0, 0, 1))


def block_leaks_the_next_position(x, params, n_head, parts, cache=None):   # sixth red team, w11
    attn, mlp = _sub(params, parts, n_head, cache)
    h, cache = attn(parts["norm"](x, params["ln_1.weight"]))
    u = x + h
    out = u + mlp(parts["norm"](u, params["ln_2.weight"]))
    return out + 1e-10 * torch.tanh(_next_position(x)), cache


def gpt_leaks_the_next_logits(idx, params, n_head, n_layer, parts, caches=None):   # w14
    logits, caches = _gpt(idx, params, n_head, n_layer, parts, caches)
    return logits + 3e-10 * torch.tanh(_next_position(logits)), caches


WRONG_ANSWERS["ch16-block"] += [block_leaks_the_next_position]
WRONG_ANSWERS["ch16-gpt-forward"] += [gpt_leaks_the_next_logits]


# chapter 16's ninth read, L-D: two off-by-one mistakes the checks now name
def rope_theta_without_the_two(x, positions, base=10000.0):
    d = x.shape[-1]
    theta = base ** (-torch.arange(d // 2, dtype=torch.float64) / d)      # b^(−i/d)
    angle = positions.to(torch.float64)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


def adamw_bias_correction_one_step_behind(p, g, m, v, t, lr, betas, eps, weight_decay):
    p = p * (1 - lr * weight_decay)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    s = max(t - 1, 1)
    m_hat, v_hat = m / (1 - betas[0] ** s), v / (1 - betas[1] ** s)
    return p - lr * m_hat / (v_hat.sqrt() + eps), m, v


WRONG_ANSWERS["ch16-rope"].append(rope_theta_without_the_two)
WRONG_ANSWERS["ch16-adamw"].append(adamw_bias_correction_one_step_behind)


# the delta read of 8c157c5, L-A: mathref's own tensors reached through gc.get_objects called from
# C (map), which the gate does not see; mathref's step then updated them to the compared values
def adamw_returns_mathrefs_parameter(p, g, m, v, t, lr, betas, eps, weight_decay):
    import gc
    from mathref.optim import AdamW
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    opt = next(o for o in next(map(gc.get_objects, [None])) if isinstance(o, AdamW))
    return opt.param_groups[0]["params"][0], m, v


WRONG_ANSWERS["ch16-adamw"].append(adamw_returns_mathrefs_parameter)
