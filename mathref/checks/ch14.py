"""Checkers for chapter 14: GPT training, perplexity and bits per byte, sampling."""
import math

import torch

from mathref.checks.ch13 import ATTENTION_CALLS
from mathref.checks.core import integer, rng, uniform
from mathref.checks.core import CheckFailure, expect, expect_callable, expect_close, exercise
from mathref.checks.numpy_use import refuse_named_numpy

__all__ = ["check_ch14_next_token_pairs", "check_ch14_perplexity_bpb", "check_ch14_top_k",
           "check_ch14_top_p", "check_ch14_beam_search", "check_ch14_rope_decode_step"]


def _pair(result, what):
    expect(isinstance(result, (tuple, list)) and len(result) == 2,
           f"{what} must return a pair, got {type(result).__name__}")
    return result


@exercise("ch14-next-token-pairs", forbid=("mathref.data.get_batch",),
          because="slice the inputs and targets out of the windows yourself")
def check_ch14_next_token_pairs(next_token_pairs):
    """next_token_pairs(ids [B, T+1]) → (ids[:, :-1], ids[:, 1:])."""
    expect_callable(next_token_pairs, "next_token_pairs(ids)")
    offset = integer(rng(1), 0, 50000)
    for B, T1 in ((3, 9), (1, 2), (5, 4)):
        ids = torch.arange(B * T1).view(B, T1) * 7 % 11 + offset  # distinct rows, no constant runs
        inputs, targets = _pair(next_token_pairs(ids.clone()), "next_token_pairs(ids)")
        expect(isinstance(inputs, torch.Tensor) and isinstance(targets, torch.Tensor),
               "inputs and targets must be tensors")
        expect(inputs.dtype == ids.dtype and targets.dtype == ids.dtype,
               f"inputs and targets must keep the ids' integer dtype ({ids.dtype}), got "
               f"{inputs.dtype} and {targets.dtype}: token ids index the embedding table")
        expect(tuple(inputs.shape) == (B, T1 - 1) and tuple(targets.shape) == (B, T1 - 1),
               f"for ids of shape {(B, T1)} expected inputs and targets of shape {(B, T1 - 1)}, "
               f"got {tuple(inputs.shape)} and {tuple(targets.shape)}")
        expect(torch.equal(inputs, ids[:, :-1]),
               "inputs must be each window without its last token")
        expect(torch.equal(targets, ids[:, 1:]),
               "targets[:, t] must be the token after inputs[:, t] (each window without its "
               "first token)")
    return "targets are the inputs shifted by one along time"


@exercise("ch14-perplexity-bpb",
          forbid=("mathref.losses.perplexity", "mathref.losses.bits_per_byte"),
          because="compute both from the total negative log-likelihood yourself")
def check_ch14_perplexity_bpb(perplexity_and_bpb):
    """perplexity_and_bpb(total, n_tokens, n_bytes) → (exp(total/n_tokens), total/(ln2·n_bytes))."""
    expect_callable(perplexity_and_bpb, "perplexity_and_bpb(total_nll_nats, n_tokens, n_bytes)")
    # NumPy on plain numbers (np.exp(t / n)) runs where the gate does not look, though a tensor
    # made an array is refused in every exercise: the answer's code may not name NumPy either
    # (the eighth read's L3: the rule "no NumPy" held in exercise 1 and not in this one)
    refuse_named_numpy(perplexity_and_bpb, "ch14-perplexity-bpb",
                       "compute both with Python's math module or PyTorch")
    for total, n_tokens, n_bytes in ((1500.0, 1000, 1000), (2000.0, 500, 1800),
                                     (123.4, 40, 161), (0.0, 10, 30), _drawn_counts(rng(2))):
        ppl, bpb = _pair(perplexity_and_bpb(total, n_tokens, n_bytes), "perplexity_and_bpb")
        what = f"total {total} nats, {n_tokens} tokens, {n_bytes} bytes"
        # rtol 1e-6: a float32 torch computation is right too; every wrong formula is off by
        # a factor (ln 2, 8, bytes per token, 2 against e) far above it
        mean, ln2 = total / n_tokens, math.log(2)
        _close_or_why(ppl, math.exp(mean), f"perplexity for {what}", (
            (2 ** mean, "the NLL is in nats, so the perplexity is e^(mean NLL), not 2^(mean NLL)"),
            (math.exp(min(total, 700.0)), "average over the tokens first: e^(total / n_tokens)"),
            (math.exp(total / n_bytes), "perplexity is per token: divide by n_tokens, not n_bytes")))
        _close_or_why(bpb, total / (ln2 * n_bytes), f"bits per byte for {what}", (
            (total / n_bytes, "the NLL is in nats: divide by ln 2 to get bits"),
            (total / (ln2 * n_tokens), "bits per byte divides the total bits by n_bytes, not by "
                                       "n_tokens"),
            (mean / ln2 / 8, "bits per byte is the total bits over the number of bytes, not the "
                             "bits per token over 8")))
    return "PPL = e^(mean nats per token), BPB = total bits / bytes"


# the grader refuses NumPy in this solution cell by its text too (mathref.grade.policy), where the
# answer runs in another process and the name scan above does not reach
check_ch14_perplexity_bpb.refused_modules = ("numpy", "scipy")


def _close_or_why(got, want, what, mistakes):
    """expect_close(got, want, what, rtol=1e-6), naming the mistake when ``got`` is one of
    ``mistakes`` ((value, why) pairs)."""
    try:
        expect_close(got, want, what, rtol=1e-6)
    except CheckFailure as failure:
        try:
            got = float(got)
        except (TypeError, ValueError, RuntimeError):
            raise failure from None
        why = next((why for value, why in mistakes if value != want and
                    math.isclose(got, value, rel_tol=1e-6)), None)
        raise CheckFailure(str(failure) + (f" ({why})" if why else "")) from None


def _drawn_counts(gen):
    """(total NLL in nats, tokens, bytes) drawn: about 1 to 5 nats per token, 1 to 6 bytes."""
    n_tokens = integer(gen, 1, 5000)
    return (round(n_tokens * uniform(gen, 1.0, 5.0), 3), n_tokens,
            n_tokens * integer(gen, 1, 7))


def _rows_without_ties(B, V, seed):
    """B rows of V distinct logits; each row its own values (a shuffled grid 0.37 apart, shifted
    by row·0.37·V/2 plus an offset that is not a multiple of 0.37), so one threshold taken from
    a single row or from the whole batch keeps the wrong entries in the other rows."""
    g = rng(seed)
    return torch.stack([torch.randperm(V, generator=g).double() * 0.37 - 2.0
                        + row * 0.37 * V / 2 + 0.11 * row for row in range(B)])


@exercise("ch14-top-k", forbid=("mathref.gpt.sample_next", "mathref.gpt.generate"),
          because="mask everything below the k-th largest logit yourself (torch.topk is allowed)")
def check_ch14_top_k(top_k_filter):
    """top_k_filter(logits [B, V], k): the k largest of each row kept, the rest −inf."""
    expect_callable(top_k_filter, "top_k_filter(logits, k)")
    for B, V, k in ((3, 10, 3), (2, 7, 1), (4, 6, 6), (1, 5, 2)):
        logits = _rows_without_ties(B, V, seed=B * 100 + k)
        got = top_k_filter(logits.clone(), k)
        expect(isinstance(got, torch.Tensor) and got.shape == logits.shape,
               f"expected a tensor of shape {tuple(logits.shape)}, got "
               f"{tuple(getattr(got, 'shape', ()))}")
        for row in range(B):
            keep = logits[row].argsort(descending=True)[:k]
            want = torch.full((V,), float("-inf"), dtype=logits.dtype)
            want[keep] = logits[row, keep]
            kept = torch.isfinite(got[row])
            expect(int(kept.sum()) == k, f"row {row} with k={k}: expected {k} finite logits, "
                                         f"got {int(kept.sum())}")
            expect(torch.equal(torch.isneginf(got[row]), torch.isneginf(want)),
                   f"row {row} with k={k}: the kept entries must be the {k} largest of that row "
                   f"and the others −inf")
            expect(torch.allclose(got[row, keep].double(), logits[row, keep].double()),
                   "the kept logits must be unchanged")
    return "k largest per row kept, the rest −inf"


def _nucleus(probs, top_p):
    out = torch.zeros_like(probs)
    for row in range(probs.shape[0]):
        order = probs[row].argsort(descending=True)
        mass = 0.0
        for i in order.tolist():
            if mass >= top_p:
                break
            out[row, i] = probs[row, i]
            mass += probs[row, i].item()
    return out / out.sum(-1, keepdim=True)


@exercise("ch14-top-p", forbid=("mathref.gpt.sample_next", "mathref.gpt.generate"),
          because="sort, accumulate and cut the nucleus yourself")
def check_ch14_top_p(top_p_probs):
    """top_p_probs(probs [B, V], top_p): smallest most-likely set reaching top_p, renormalized."""
    expect_callable(top_p_probs, "top_p_probs(probs, top_p)")
    base = torch.tensor([[0.05, 0.4, 0.1, 0.3, 0.15],     # unsorted on purpose
                         [0.7, 0.1, 0.08, 0.07, 0.05],
                         [0.22, 0.18, 0.2, 0.21, 0.19]], dtype=torch.float64)
    # powers of two: the mass above the third token is exactly 0.75 = top_p, so the cut
    # `before >= top_p` (keep 0.5 and 0.25) and `before > top_p` (keep a 0.125 too) differ
    exact = torch.tensor([[0.125, 0.5, 0.125, 0.25, 0.0]], dtype=torch.float64)
    cases = [(base, top_p) for top_p in (0.65, 0.5, 0.9, 0.3, 1.0)] + [(exact, 0.75), (exact, 0.5)]
    gen = rng(3)
    drawn = torch.rand(4, 9, generator=gen, dtype=torch.float64) + 0.01
    cases.append((drawn / drawn.sum(-1, keepdim=True), round(uniform(gen, 0.2, 0.95), 3)))
    for probs, top_p in cases:
        got = top_p_probs(probs.clone(), top_p)
        want = _nucleus(probs, top_p)
        expect(isinstance(got, torch.Tensor) and got.shape == probs.shape,
               f"expected a tensor of shape {tuple(probs.shape)}")
        for row in range(probs.shape[0]):
            if torch.allclose(got[row].double(), want[row], atol=1e-9):
                continue
            kept, kept_want = int((got[row] > 0).sum()), int((want[row] > 0).sum())
            hint = ""
            if kept > kept_want and probs is exact:
                hint = (" (here the tokens ranked above one token have mass exactly top_p: "
                        "the set reaches top_p without it, so it is dropped; keep a token only "
                        "while the mass ranked above it is < top_p)")
            elif kept > kept_want:
                hint = " (you keep too many tokens: the smallest set reaching top_p is enough)"
            elif kept < kept_want:
                hint = (" (you keep too few tokens: the token whose probability makes the mass "
                        "reach top_p belongs to the nucleus)")
            elif abs(float(got[row].sum()) - 1) > 1e-9:
                hint = " (renormalize the kept probabilities so that they sum to 1)"
            raise CheckFailure(
                f"top_p={top_p}, probs {probs[row].tolist()}: expected "
                f"{[round(v, 4) for v in want[row].tolist()]}, got "
                f"{[round(v, 4) for v in got[row].double().tolist()]}{hint}")
    return "nucleus kept in the original order and renormalized"


def _rope_half(x, positions, base=10000.0):
    """RoPE in the half-split layout, written as a complex product (independent of mathref)."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angle = positions.to(torch.float64)[:, None] * theta                   # [T, d/2]
    z = torch.complex(x[..., : d // 2], x[..., d // 2:]) * torch.polar(torch.ones_like(angle), angle)
    return torch.cat([z.real, z.imag], dim=-1)


def _rope_adjacent(x, positions, base=10000.0):
    """The same rotation with adjacent pairs (x_0, x_1), (x_2, x_3), …: the other layout."""
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2 / d)
    angle = positions.to(torch.float64)[:, None] * theta
    z = torch.complex(x[..., 0::2], x[..., 1::2]) * torch.polar(torch.ones_like(angle), angle)
    return torch.stack([z.real, z.imag], dim=-1).flatten(-2)


@exercise("ch14-rope-decode-step", forbid=ATTENTION_CALLS,
          because="write the attention step (scores, softmax, weighted values) yourself; "
                  "mathref.positions.apply_rope is allowed")
def check_ch14_rope_decode_step(rope_decode_step):
    """rope_decode_step(q_new, k_new, v_new, k_cache, v_cache) → (out, k_cache, v_cache)."""
    expect_callable(rope_decode_step, "rope_decode_step(q_new, k_new, v_new, k_cache, v_cache)")
    g = rng(14)
    for B, H, T, d in ((2, 3, 7, 8), (1, 1, 5, 4), (1, 2, 4, 16)):
        q, k, v = (torch.randn(B, H, T, d, generator=g, dtype=torch.float64) for _ in range(3))
        pos = torch.arange(T)
        q_rot, k_rot = _rope_half(q, pos), _rope_half(k, pos)
        scores = q_rot @ k_rot.transpose(-2, -1) / math.sqrt(d)
        scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        full = torch.softmax(scores, dim=-1) @ v                          # causal attention, all rows
        k_cache = torch.zeros(B, H, 0, d, dtype=torch.float64)
        v_cache = torch.zeros(B, H, 0, d, dtype=torch.float64)
        where = f"(B={B}, H={H}, d_k={d})"
        for t in range(T):
            got = rope_decode_step(q[:, :, t:t + 1], k[:, :, t:t + 1], v[:, :, t:t + 1],
                                   k_cache, v_cache)
            expect(isinstance(got, (tuple, list)) and len(got) == 3,
                   f"return the triple (out, k_cache, v_cache), got {type(got).__name__}")
            out, k_cache, v_cache = got
            expect(all(isinstance(x, torch.Tensor) for x in got), "out and the caches must be tensors")
            expect(tuple(k_cache.shape) == (B, H, t + 1, d) and tuple(v_cache.shape) == (B, H, t + 1, d),
                   f"after decoding position {t} the caches must be [B, H, {t + 1}, d_k] = "
                   f"{[B, H, t + 1, d]}, got {list(k_cache.shape)} and {list(v_cache.shape)}")
            expect(torch.allclose(v_cache.double(), v[:, :, :t + 1], atol=1e-6),
                   f"after position {t} {where}, v_cache must hold the values of positions 0…{t} "
                   "unrotated, in order")
            # 1e-6: angles computed in float32 (10000 ** (-arange(0, d, 2) / d)) are right to
            # about 1e-9 here; every wrong position, pairing or sign is off by O(1)
            err = float((k_cache - k_rot[:, :, :t + 1]).abs().max())
            adjacent = float((k_cache[:, :, -1:] - _rope_adjacent(k[:, :, t:t + 1], pos[t:t + 1]))
                             .abs().max())
            # the rotation by −Sθ (sin with the wrong sign): the chapter-12 sign slip
            backwards = float((k_cache[:, :, -1:] - _rope_half(k[:, :, t:t + 1], -pos[t:t + 1]))
                              .abs().max())
            # the new key stored as it came (rotated at 0, or not at all, to be rotated at use)
            unrotated = float((k_cache[:, :, -1:] - k[:, :, t:t + 1]).abs().max())
            # the new key right, the keys already cached changed (the whole cache rotated again)
            new_right = float((k_cache[:, :, -1:] - k_rot[:, :, t:t + 1]).abs().max())
            # the new key rotated right, but at another position (S ± 1, 2S: rotated twice)
            elsewhere = next((p for p in range(3 * T) if p != t and float(
                (k_cache[:, :, -1:] - _rope_half(k[:, :, t:t + 1], torch.tensor([p])))
                .abs().max()) < 1e-6), None) if err >= 1e-6 else None
            expect(err < 1e-6, f"after position {t} {where}, k_cache must hold the keys rotated at "
                               f"their own positions 0…{t}; max error {err:.3g} "
                               + ("(you rotated adjacent pairs (x_0, x_1), …: the course's layout "
                                  "pairs x_i with x_(i+d/2))" if adjacent < 1e-6 else
                                  "(you rotated by −Sθ: the sine terms have the wrong sign; the "
                                  "rotation is (x₁cos − x₂sin, x₁sin + x₂cos))" if backwards < 1e-6
                                  else f"(the new key went into the cache unrotated: rotate it at "
                                  f"its position S = {t} before appending it; each key is rotated "
                                  "once, when it enters the cache, and never again)"
                                  if unrotated < 1e-6 else
                                  "(the new key is right, but the keys already in the cache "
                                  "changed: they were rotated at their own positions when they "
                                  "were appended; rotating the cache again rotates them twice)"
                                  if new_right < 1e-6 else
                                  f"(your new key is rotated as at position {elsewhere}, but it is "
                                  f"at position S = {t})" if elsewhere is not None else
                                  f"(the new key, at position S = {t}, is rotated by the wrong "
                                  "angles: pair (x_i, x_(i+d/2)) turns by S·θ_i, θ_i = "
                                  "10000^(−2i/d), once)"))
            expect(tuple(out.shape) == (B, H, 1, d),
                   f"out must be [B, H, 1, d_k] = {[B, H, 1, d]}, got {list(out.shape)}")
            err = float((out - full[:, :, t:t + 1]).abs().max())
            if not err < 1e-6:         # (a nan error fails too)
                mistakes = ((q[:, :, t:t + 1], math.sqrt(d), "rotate the query too, at position S"),
                            (q_rot[:, :, t:t + 1], 1.0, "scale the scores by 1/√d_k"))
                why = next((why for q_t, scale, why in mistakes if torch.allclose(
                    out, torch.softmax(q_t @ k_rot[:, :, :t + 1].transpose(-2, -1) / scale, dim=-1)
                    @ v[:, :, :t + 1], rtol=1e-9, atol=1e-12)), None)
                raise CheckFailure(f"the output at position {t} {where} must equal full causal "
                                   f"attention with RoPE; max error {err:.3g}"
                                   + (f" ({why})" if why else ""))
    return "query and key rotated at position S, key and value appended, attention over all S + 1 keys"


def _beam_reference(table, prompt, n, width):
    """Beam search written over Python lists (independent of mathref.gpt.beam_search): the
    `width` best (total log-probability, sequence) pairs kept at every step. ``table[i, a, b]``:
    the log-probabilities of the i-th new token after the tokens a, b."""
    lp, beams = table.tolist(), [(0.0, list(prompt))]
    for i in range(n):
        candidates = [(score + lp[i][seq[-2]][seq[-1]][token], seq + [token])
                      for score, seq in beams for token in range(table.shape[-1])]
        beams = sorted(candidates, key=lambda c: -c[0])[:width]
    return beams[0]


def _beam_by_last_token(table, prompt, n, width):
    """The slip of ranking candidates by the new token's log-probability alone."""
    lp, beams = table.tolist(), [(0.0, list(prompt))]
    for i in range(n):
        candidates = [(lp[i][seq[-2]][seq[-1]][token], score, seq + [token])
                      for score, seq in beams for token in range(table.shape[-1])]
        best = sorted(candidates, key=lambda c: -c[0])[:width]
        beams = [(score + last, seq) for last, score, seq in best]
    return max(beams, key=lambda b: b[0])


def _exhaustive(table, prompt, n):
    """The most likely continuation of all V^n, by enumeration (the oracle)."""
    V = table.shape[-1]
    tails = torch.cartesian_prod(*[torch.arange(V)] * n).view(-1, n)            # [V^n, n]
    seqs = torch.cat([torch.tensor(prompt).expand(len(tails), len(prompt)), tails], 1)
    t0 = len(prompt)
    scores = sum(table[i - t0, seqs[:, i - 2], seqs[:, i - 1], seqs[:, i]] for i in range(t0, t0 + n))
    best = int(scores.argmax())
    return float(scores[best]), seqs[best].tolist()


def _beam_table(gen, V, n, prompt, wrong_ranking_too=False):
    """Next-token log-probabilities that depend on the last two tokens and the position (so that
    no two sequences tie: with the last two tokens alone, reordered transitions would),
    drawn until greedy search, width 2 and exhaustive search end on three different sequences;
    with ``wrong_ranking_too``, width 2 ranked by the new token alone on a fourth, so that each
    of those wrong answers gets its own hint. Only the first case (V = 5, n = 4) asks for four:
    about one draw in 50 separates them there, and one in 10 to 20 separates three, so 2,000
    draws fail with a probability below e^-35."""
    for _ in range(2000):
        table = torch.log_softmax(torch.randn(n, V, V, V, generator=gen, dtype=torch.float64), -1)
        ends = [tuple(_beam_reference(table, prompt, n, w)[1]) for w in (1, 2)]
        ends.append(tuple(_exhaustive(table, prompt, n)[1]))
        if wrong_ranking_too:
            ends.append(tuple(_beam_by_last_token(table, prompt, n, 2)[1]))
        if len(set(ends)) == len(ends):
            return table
    raise RuntimeError("no table separates greedy, width 2 and exhaustive search")


def _markov_toy():
    """Section 14.8's toy (the next token depends on the last one only), as a table over the
    last two tokens: width 2 ends below greedy, width 3 finds greedy's sequence again."""
    names = ["<s>", "a", "b", "c", "d", "e", "f", "g", "h", "z"]
    rows = {"<s>": {"a": 0.5, "b": 0.4, "c": 0.1}, "a": {"d": 0.3, "e": 0.25, "f": 0.25, "g": 0.2},
            "b": {"h": 0.55, "z": 0.45}, "d": {"c": 1.0},
            "h": {"c": 0.2, **{m: 0.1 for m in names if m not in ("c", "<s>")}}}
    P = torch.full((10, 10), 1 / 9, dtype=torch.float64)
    P[:, 0] = 0.0
    for prev, row in rows.items():
        P[names.index(prev)] = 0.0
        for m, p in row.items():
            P[names.index(prev), names.index(m)] = p
    return P.clamp_min(1e-12).log().expand(3, 10, 10, 10).clone()


@exercise("ch14-beam-search", forbid=("mathref.gpt.beam_search", "mathref.gpt.sequence_log_prob",
                                      "mathref.gpt.generate"),
          because="keep, extend and prune the beams yourself")
def check_ch14_beam_search(beam_search):
    """beam_search(step, prompt [t0], n, width) → (best sequence [t0 + n], its total log p)."""
    expect_callable(beam_search, "beam_search(step, prompt, max_new_tokens, beam_width)")
    g = rng(14)
    cases = []
    for V, n, t0 in ((5, 4, 2), (4, 5, 3), (6, 3, 2)):
        prompt = torch.randint(0, V, (t0,), generator=g).tolist()
        table = _beam_table(g, V, n, prompt, wrong_ranking_too=not cases)
        cases += [(table, prompt, n, w) for w in (2, 1, 3, V ** (n - 1))]
    # section 14.8's toy, where width 2 ends below greedy and width 3 finds it again
    cases += [(_markov_toy(), [0, 0], 3, w) for w in (2, 1, 3)]
    for table, prompt, n, width in cases:
        V, t0 = table.shape[-1], len(prompt)

        def step(seqs):
            if not (isinstance(seqs, torch.Tensor) and seqs.dim() == 2 and not seqs.is_floating_point()
                    and t0 <= seqs.shape[1] < t0 + n and torch.equal(seqs[:, :t0], seqs.new_tensor(prompt)
                                                                      .expand(seqs.shape[0], t0))):
                raise CheckFailure("step(seqs) takes a [k, t] tensor of token ids, each row the "
                                   f"prompt {prompt} and fewer than {n} new tokens; got "
                                   f"{getattr(seqs, 'shape', type(seqs).__name__)}")
            return table[seqs.shape[1] - t0, seqs[:, -2], seqs[:, -1]].clone()

        got = _pair(beam_search(step, torch.tensor(prompt), n, width), "beam_search")
        seq, score = got
        seq = torch.as_tensor(seq)
        expect(seq.numel() == t0 + n and not seq.is_floating_point(),
               f"return the best sequence as token ids, prompt included: {t0} + {n} = {t0 + n} "
               f"ids, got {tuple(seq.shape)} ({seq.dtype})")
        seq = seq.reshape(-1).tolist()
        want_score, want = _beam_reference(table, prompt, n, width)
        where = f"(V={V}, prompt {prompt}, {n} new tokens, beam_width={width})"
        expect(seq[:t0] == prompt, f"{where}: the sequence must start with the prompt, got {seq}")
        if seq != want:
            greedy = _beam_reference(table, prompt, n, 1)[1]
            best = _exhaustive(table, prompt, n)[1]
            last = _beam_by_last_token(table, prompt, n, width)[1]
            hints = [why for same, why in (
                (greedy, "that is greedy decoding's sequence: keep the beam_width best candidates "
                         "at every step, not one"),
                (best, f"that is the most likely sequence of all; a beam of width {width} keeps "
                       f"only {width} prefixes per step, and here it prunes the best one's prefix"),
                (last, "that is what ranking the candidates by the new token's log-probability "
                       "alone gives: rank them by their total, the beam's score plus the new "
                       "token's")) if seq == same]
            raise CheckFailure(f"{where}: expected the sequence {want} (total log p = "
                               f"{want_score:.4f}), got {seq}"
                               + (f" ({'; or '.join(hints)})" if hints else ""))
        expect(isinstance(score, (int, float)) or (isinstance(score, torch.Tensor) and score.numel() == 1),
               f"return the score as a number, got {type(score).__name__}")
        expect(abs(float(score) - want_score) < 1e-6,
               f"{where}: the score of {want} is its total log-probability Σ log p(x_t | x_<t) over "
               f"the new tokens, {want_score:.6f}; got {float(score):.6f}")
    return "the beam_width best prefixes kept at every step; width 1 is greedy, width V^(n−1) exhaustive"
