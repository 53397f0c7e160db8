"""Checkers for chapter 15: efficient attention and scaling."""
import math

import torch

from mathref.checks.ch13 import ATTENTION_CALLS
from mathref.checks.core import integer, rng
from mathref.checks.numpy_use import refuse_named_numpy, watching_numpy
from mathref.checks.core import CheckFailure, exercise, expect, expect_callable, expect_close

__all__ = ["check_ch15_kv_cache_bytes", "check_ch15_crossover_length",
           "check_ch15_flops_per_token", "check_ch15_merge_softmax_states",
           "check_ch15_loss_scale_update", "check_ch15_flash_tile_step"]


# Merging two log-normalizers in log space is the rescaling these exercises ask for
# (logcumsumexp(z)[-1] is a log-sum-exp under another name)
LOG_SUM_EXP_CALLS = ("torch.logaddexp", "torch.Tensor.logaddexp", "torch.logaddexp2",
                     "torch.Tensor.logaddexp2", "torch.logsumexp",
                     "torch.Tensor.logsumexp", "torch.special.logsumexp",
                     "torch.logcumsumexp", "torch.Tensor.logcumsumexp",
                     "torch.ops.aten.logsumexp", "torch.ops.aten.logcumsumexp",
                     "mathref.losses.logsumexp")
# A softmax over the states' log-normalizers hands back the weights e^(m_a + log ℓ_a − lse), and
# 1 / its largest entry is the merged ℓ: the rescaling again, done by the library
SOFTMAX_CALLS = ("torch.softmax", "torch.Tensor.softmax", "torch.nn.functional.softmax",
                 "torch.special.softmax", "torch.log_softmax", "torch.Tensor.log_softmax",
                 "torch.nn.functional.log_softmax", "torch.special.log_softmax",
                 "torch.ops.aten._softmax", "torch.ops.aten._log_softmax",
                 "mathref.losses.softmax", "mathref.losses.log_softmax")


def _close_or_why(got, want, what, mistakes, rtol):
    """expect_close(got, want, what, rtol), naming the mistake when ``got`` is one of
    ``mistakes`` ((value, why) pairs)."""
    try:
        expect_close(got, want, what, rtol=rtol, atol=0)
    except CheckFailure as failure:
        try:
            got = float(got)
        except (TypeError, ValueError, RuntimeError):
            raise failure from None
        why = next((why for value, why in mistakes if value is not None and (
                    math.isnan(got) and math.isnan(value)
                    or value != want and math.isclose(got, value, rel_tol=rtol))), None)
        raise CheckFailure(str(failure) + (f" ({why})" if why else "")) from None


@exercise("ch15-kv-cache-bytes", forbid=("mathref.efficient.kv_cache_bytes",),
          because="the statement asks for the formula, written out")
def check_ch15_kv_cache_bytes(kv_cache_size):
    """kv_cache_size(n_layers, batch, n_kv_heads, seq_len, d_head, bytes_per_element)."""
    expect_callable(kv_cache_size, "kv_cache_size(n_layers, batch, n_kv_heads, seq_len, d_head, "
                                   "bytes_per_element)")
    # (a 1-byte cache first: there a missing factor 2 is want / 2 and a missing bytes_per_element
    # is right, so at the 2-byte cases after it, where the two coincide, want / 2 can only be
    # bytes_per_element left out)
    cases = [((3, 5, 2, 7, 6, 1), 2 * 3 * 5 * 2 * 7 * 6), ((1, 1, 1, 1, 1, 1), 2),
             ((32, 1, 32, 4096, 128, 2), 2 * 1024 ** 3),       # Llama-2-7B-like, fp16: 2 GiB
             ((80, 1, 8, 4096, 128, 2), 1280 * 1024 ** 2),     # 70B-like with 8 KV heads
             ((12, 4, 12, 1024, 64, 4), 2 * 12 * 4 * 12 * 1024 * 64 * 4)]
    gen = rng(1)
    drawn = tuple(integer(gen, 1, 65) for _ in range(5)) + (2 ** integer(gen, 0, 3),)
    cases.append((drawn, 2 * math.prod(drawn)))
    for args, want in cases:
        got = kv_cache_size(*args)
        elements = 2 * math.prod(args[:5])
        _close_or_why(got, want, f"kv_cache_size{args}", (
            # (first: where bytes_per_element = 4, 2 bytes hard-coded is also want / 2, and the
            # 1-byte case before it has ruled the missing factor 2 out)
            (elements * 2, f"multiply by bytes_per_element, here {args[5]}: not every cache "
                           f"is fp16"),
            (elements, f"multiply by bytes_per_element, here {args[5]}"),
            (want / 2, "the cache holds keys and values: a factor 2"),
            (want * 8, "count bytes, not bits"),
            (want / args[1], "every sequence of the batch has its own cache: multiply by batch")),
            rtol=1e-12)
    return "2 · L · B · H_kv · T · d_head · bytes: keys and values of every layer"


@exercise("ch15-crossover-length",
          forbid=("mathref.efficient.layer_flops", "mathref.efficient.attention_flops",
                  "mathref.transformer.block_flops"),
          because="solve the FLOP balance for T yourself")
def check_ch15_crossover_length(crossover_length):
    """crossover_length(d, d_ff): the T at which attention's 4T²d FLOPs equal the matrices'
    8Td² + 4T·d·d_ff, i.e. T* = 2d + d_ff (6d when d_ff = 4d)."""
    expect_callable(crossover_length, "crossover_length(d, d_ff)")
    gen = rng(2)
    # (the first case has d_ff ≠ 4d: there 2d + d_ff/2 = d_ff, and the hints would coincide)
    for d, d_ff in ((4096, 11008), (768, 3072), (128, 512), (64, 64), (1000, 1),
                    (integer(gen, 1, 8192), integer(gen, 1, 30000))):
        got = crossover_length(d, d_ff)
        _close_or_why(got, 2 * d + d_ff, f"crossover_length(d={d}, d_ff={d_ff})", (
            (6 * d, "that is 6d, the answer only when d_ff = 4d: keep d_ff in the balance"),
            (4 * d + 2 * d_ff, "count both sides in FLOPs, 2 per multiply–add: attention's two "
                               "T × T × d products cost 4T²d"),
            (d_ff, "the four projections W_Q, W_K, W_V, W_O count too, not only the FFN"),
            (2 * d + d_ff / 2, "the FFN has two matrices, d → d_ff and d_ff → d: 4T·d·d_ff "
                               "FLOPs"),
            (d + d_ff, "all four projections count, W_Q, W_K, W_V and W_O: 4 · 2Td² = 8Td²")),
            rtol=1e-9)
        T = float(got)
        expect_close(4 * T * T * d, 8 * T * d * d + 4 * T * d * d_ff,
                     f"attention vs matrices at your T for d={d}", rtol=1e-9)
    return "T* = 2d + d_ff, so 6d for the standard d_ff = 4d"


@exercise("ch15-flops-per-token",
          forbid=("mathref.gpt.GPT.flops_per_token", "mathref.gpt.GPT.mfu"),
          because="count the forward and backward FLOPs yourself")
def check_ch15_flops_per_token(flops_per_token):
    """flops_per_token(n_params, n_layer, d_model, T) = 6N + 12·L·d·T."""
    expect_callable(flops_per_token, "flops_per_token(n_params, n_layer, d_model, T)")
    cases = [(85_000_000, 12, 768, 1024), (801_664, 4, 128, 64), (1, 1, 1, 1),
             (7_000_000_000, 32, 4096, 4096), (1000, 2, 10, 0)]
    gen = rng(3)
    cases.append((integer(gen, 1, 10 ** 9), integer(gen, 1, 80), integer(gen, 1, 8192),
                  integer(gen, 0, 8192)))
    for N, L, d, T in cases:
        forward = 2 * N + 4 * L * d * T
        _close_or_why(flops_per_token(N, L, d, T), 3 * forward,
                      f"flops_per_token(N={N}, L={L}, d={d}, T={T})", (
                          (forward, "training runs the backward pass too, which costs twice the "
                                    "forward: 3 × the forward in all"),
                          (6 * N, "the attention term is missing: the scores and the weighted "
                                  "values cost FLOPs that grow with T"),
                          (6 * N + 4 * L * d * T, "the attention term needs its backward pass "
                                                  "too: 3 × its forward"),
                          (6 * N + 6 * L * d * T, "that is Kaplan et al.'s convention, "
                                                  "2·L·T·d forward for attention; equation "
                                                  "(ch15-flops-per-token) counts QKᵀ and PV over "
                                                  "the full T × T square, 4LdT forward, tripled "
                                                  "for training")),
                      rtol=1e-12)
    return "forward 2N + 4LdT, backward twice that"


MERGE_BECAUSE = "rescale both states to the common maximum yourself, with e^(m_a − m)"


@exercise("ch15-merge-softmax-states", forbid=LOG_SUM_EXP_CALLS + SOFTMAX_CALLS,
          because=MERGE_BECAUSE)
def check_ch15_merge_softmax_states(merge_softmax_states):
    """merge_softmax_states(m1, l1, acc1, m2, l2, acc2) → (m, l, acc) for two parts of a row."""
    expect_callable(merge_softmax_states, "merge_softmax_states(m1, l1, acc1, m2, l2, acc2)")
    refuse_named_numpy(merge_softmax_states, "ch15-merge-softmax-states", MERGE_BECAUSE)
    merge_softmax_states = watching_numpy(merge_softmax_states, "ch15-merge-softmax-states",
                                           MERGE_BECAUSE)

    def state(s, v):
        m = s.max()
        p = torch.exp(s - m)
        return m, p.sum(), p @ v

    g = rng(15)
    # (shift: the second block's scores far above, or below, the first's; a log-sum-exp of the
    # two states' log-normalizers then underflows, which NumPy reports)
    for n1, n2, spread, shift in ((3, 4, 1.0, 0.0), (5, 2, 30.0, 0.0), (1, 6, 300.0, 2000.0),
                                  (4, 4, 0.1, 0.0), (3, 2, 1.0, -1000.0)):
        s = torch.randn(n1 + n2, generator=g, dtype=torch.float64) * spread
        v = torch.randn(n1 + n2, 3, generator=g, dtype=torch.float64)
        s[n1:] += shift
        (m1, l1, acc1), (m2, l2, acc2) = state(s[:n1], v[:n1]), state(s[n1:], v[n1:])
        got = merge_softmax_states(m1, l1, acc1, m2, l2, acc2)
        expect(isinstance(got, (tuple, list)) and len(got) == 3,
               f"return the triple (m, l, acc), got {type(got).__name__}")
        low = sorted({str(t.dtype).replace("torch.", "") for t in got
                      if isinstance(t, torch.Tensor) and t.dtype != torch.float64})
        m, l, acc = (torch.as_tensor(t, dtype=torch.float64) for t in got)
        m_want, l_want = s.max(), torch.exp(s - s.max()).sum()
        if acc.shape == (3,):
            acc_want = torch.exp(s - s.max()) @ v
            close32 = (math.isclose(float(m), float(m_want), rel_tol=1e-5, abs_tol=1e-5)
                       and math.isclose(float(l), float(l_want), rel_tol=1e-5)
                       and torch.allclose(acc, acc_want, rtol=1e-5,
                                          atol=1e-5 * float(acc_want.abs().max())))
            exact = (math.isclose(float(m), float(m_want), rel_tol=1e-12)
                     and math.isclose(float(l), float(l_want), rel_tol=1e-9)
                     and float((acc - acc_want).abs().max()) < 1e-9 * float(acc_want.abs().max()))
            if close32 and not exact:
                raise CheckFailure(
                    f"for a split {n1}+{n2} your result is right to float32 precision only"
                    + (f" (it comes back as {', '.join(low)})" if low else "")
                    + ": compute in the inputs' dtype (float64)")
        expect_close(m, float(s.max()), f"merged max m for a split {n1}+{n2}", rtol=1e-12)
        m_all = torch.maximum(m1, m2)
        up1, up2 = torch.exp(m_all - m1), torch.exp(m_all - m2)      # the factors upside down
        flipped = float(up1 * l1 + up2 * l2)
        _close_or_why(l, float(torch.exp(s - s.max()).sum()),
                      f"merged sum l = Σ exp(s − m) for a split {n1}+{n2}", (
                          (float(l1 + l2), "rescale each part's sum by e^(m_a − m) before "
                                           "adding: they were computed with different maxima"),
                          # (where the flipped sum is inf, any ℓ that overflowed would match)
                          (flipped if math.isfinite(flipped) else None,
                           "the factor is e^(m_a − m), at most 1: part a was computed with its "
                           "own max m_a ≤ m"),
                          (math.inf, "ℓ overflowed to inf: with the common maximum m every "
                                     "factor e^(m_a − m) is at most 1, and ℓ stays finite"),
                          (math.nan, "ℓ is NaN, as inf · 0 is: a factor such as e^(m_2 − m_1) "
                                     "overflowed before another, e^(m_1 − m), underflowed to 0; "
                                     "rescale each part straight to the common maximum m, with "
                                     "e^(m_a − m), at most 1")),
                      rtol=1e-9)
        expect(acc.shape == (3,), f"acc must keep the shape of acc1 (3,), got {tuple(acc.shape)}")
        want = torch.softmax(s, 0) @ v
        err = float((acc / l - want).abs().max())
        same_as_sum = acc.shape == acc1.shape and torch.allclose(acc, acc1 + acc2, rtol=1e-9)
        expect(math.isfinite(err) and err < 1e-9,
               f"acc / l must equal softmax(s) @ v for a split {n1}+{n2}; max error {err:.3g}"
               + (" (rescale acc₁ and acc₂ by the same factors e^(m_a − m) as the sums)"
                  if same_as_sum else ""))
    # the empty state (m = −∞, ℓ = 0, acc = 0), a loop's start: merging it changes nothing
    s = torch.randn(4, generator=g, dtype=torch.float64)
    v = torch.randn(4, 3, generator=g, dtype=torch.float64)
    real = state(s, v)
    empty = (torch.tensor(-math.inf, dtype=torch.float64), torch.tensor(0.0, dtype=torch.float64),
             torch.zeros(3, dtype=torch.float64))
    for first, second, what in ((empty, real, "the empty state (m = −∞, ℓ = 0) first"),
                                (real, empty, "the empty state (m = −∞, ℓ = 0) second")):
        got = merge_softmax_states(*(t.clone() for t in first), *(t.clone() for t in second))
        expect(isinstance(got, (tuple, list)) and len(got) == 3,
               f"return the triple (m, l, acc), got {type(got).__name__}")
        for name, mine, want in zip(("m", "l", "acc"), got, real):
            mine = torch.as_tensor(mine, dtype=torch.float64)
            expect(mine.shape == want.shape and bool(torch.isfinite(mine).all())
                   and torch.allclose(mine, want, rtol=1e-12, atol=0),
                   f"merging with {what}: {name} should be the other state's, "
                   f"{want.tolist()}, got {mine.tolist()}")
    return "both partial states rescaled to the common max, then added"


# Under the grader the answer runs in another process, where neither watch above reaches: the
# grader's trusted side reads the solution cell instead (mathref.grade.policy) and refuses these
# modules there, by their imports, the setup cell's names for them (np) and attributes so named
check_ch15_merge_softmax_states.refused_modules = ("numpy", "scipy")


def _scale_rule(scale, good_steps, found_inf, growth_interval):
    if found_inf:
        return scale * 0.5, 0
    good_steps += 1
    if good_steps == growth_interval:
        return scale * 2.0, 0
    return scale, good_steps


@exercise("ch15-loss-scale-update",
          forbid=("mathref.efficient.DynamicLossScaler.update", "torch.amp.GradScaler.update",
                  "torch._amp_update_scale_", "torch.ops.aten._amp_update_scale_"),
          because="write the update rule yourself")
def check_ch15_loss_scale_update(update_scale):
    """update_scale(scale, good_steps, found_inf, growth_interval) → (scale, good_steps)."""
    expect_callable(update_scale, "update_scale(scale, good_steps, found_inf, growth_interval)")
    # (an overflow at scale 1 and at 3: halving is a multiplication by 0.5, which floor division
    # matches only on the powers of two above 1)
    cases = [(65536.0, 0, True, 4), (65536.0, 3, True, 4), (1024.0, 2, False, 4),
             (1024.0, 3, False, 4), (8.0, 0, False, 1), (2.0 ** 20, 1999, False, 2000),
             (1.0, 0, True, 4), (3.0, 2, True, 4)]
    gen = rng(4)
    interval = integer(gen, 1, 3000)
    cases.append((2.0 ** integer(gen, 1, 24), integer(gen, 0, interval), bool(integer(gen, 0, 2)),
                  interval))
    for scale, good, inf, interval in cases:
        got = update_scale(scale, good, inf, interval)
        expect(isinstance(got, (tuple, list)) and len(got) == 2,
               f"return a pair (scale, good_steps), got {got!r}")
        want = _scale_rule(scale, good, inf, interval)
        what = f"update_scale({scale:g}, good_steps={good}, found_inf={inf}, interval={interval})"
        expect_close(got[0], want[0], what + " new scale", rtol=1e-12)
        expect(int(got[1]) == want[1], f"{what}: good_steps should be {want[1]}, got {got[1]}")
    # a run: overflow, overflow, then 6 clean steps with interval 3 → 2^14, grows twice
    scale, good = 2.0 ** 16, 0
    for inf in (True, True, False, False, False, False, False, False):
        scale, good = update_scale(scale, good, inf, 3)
    expect_close(scale, 2.0 ** 16, "scale after 2 overflows and 6 clean steps (interval 3)",
                 rtol=1e-12)
    return "halve and reset on overflow; double after growth_interval clean steps"


TILE_BECAUSE = "compute the tile's scores and rescale the running state yourself, with e^(m − m')"


@exercise("ch15-flash-tile-step",
          forbid=ATTENTION_CALLS + LOG_SUM_EXP_CALLS + SOFTMAX_CALLS
          + ("mathref.efficient.online_softmax",
             # (flex_attention, with return_lse, is attention with its log-normalizer; compile,
             # and dynamo's older spellings of it, would hand the forbidden calls to generated code)
             "torch.nn.attention.flex_attention.flex_attention", "torch.compile",
             "torch._dynamo.eval_frame.optimize", "torch._dynamo.eval_frame.optimize_assert"),
          because=TILE_BECAUSE)
def check_ch15_flash_tile_step(flash_tile_step):
    """flash_tile_step(q, k_tile, v_tile, m, l, acc) → (m, l, acc) after one key/value tile."""
    expect_callable(flash_tile_step, "flash_tile_step(q, k_tile, v_tile, m, l, acc)")
    refuse_named_numpy(flash_tile_step, "ch15-flash-tile-step", TILE_BECAUSE)
    flash_tile_step = watching_numpy(flash_tile_step, "ch15-flash-tile-step", TILE_BECAUSE)
    g = rng(151)
    for T_q, T, d, b_k, shift in ((4, 12, 8, 4, 0.0), (3, 10, 5, 3, 0.0), (5, 9, 16, 2, 1000.0),
                                  (2, 7, 4, 7, 0.0)):
        q = torch.randn(T_q, d, generator=g, dtype=torch.float64) * 2.0
        k = torch.randn(T, d, generator=g, dtype=torch.float64) * 2.0
        v = torch.randn(T, d, generator=g, dtype=torch.float64)
        if shift:                  # scores near 1000 in the later tiles: e^s overflows, the max rises
            k[b_k:] += shift * q.mean(0) / q.mean(0).pow(2).sum() * math.sqrt(d)
        scores = q @ k.T / math.sqrt(d)
        m = torch.full((T_q,), float("-inf"), dtype=torch.float64)
        l = torch.zeros(T_q, dtype=torch.float64)
        acc = torch.zeros(T_q, d, dtype=torch.float64)
        where = f"(B_q={T_q}, T={T}, d={d}, tiles of {b_k}{', scores near 1000' if shift else ''})"
        m_before, l_before, acc_before = m, l, acc
        for start in range(0, T, b_k):
            got = flash_tile_step(q, k[start:start + b_k], v[start:start + b_k], m, l, acc)
            expect(isinstance(got, (tuple, list)) and len(got) == 3,
                   f"return the triple (m, l, acc), got {type(got).__name__}")
            low = sorted({str(t.dtype).replace("torch.", "") for t in got
                          if isinstance(t, torch.Tensor) and t.dtype != torch.float64})
            m, l, acc = (torch.as_tensor(t, dtype=torch.float64) for t in got)
            expect(m.shape == (T_q,) and l.shape == (T_q,) and acc.shape == (T_q, d),
                   f"shapes must stay m {[T_q]}, l {[T_q]}, acc {[T_q, d]}; got "
                   f"{list(m.shape)}, {list(l.shape)}, {list(acc.shape)}")
            seen = scores[:, :start + b_k]
            m_want = seen.max(dim=-1).values
            l_want = torch.exp(seen - m_want[:, None]).sum(dim=-1)
            acc_want = torch.exp(seen - m_want[:, None]) @ v[:start + b_k]
            close32 = (torch.allclose(m, m_want, rtol=1e-5, atol=1e-5)
                       and torch.allclose(l, l_want, rtol=1e-5, atol=1e-5 * float(l_want.abs().max()))
                       and torch.allclose(acc, acc_want, rtol=1e-5,
                                          atol=1e-5 * float(acc_want.abs().max())))
            exact = (torch.allclose(m, m_want, rtol=1e-12, atol=1e-12)
                     and float((l - l_want).abs().max() / l_want.abs().max()) < 1e-9
                     and float((acc - acc_want).abs().max() / acc_want.abs().max()) < 1e-9)
            if close32 and not exact:
                raise CheckFailure(
                    f"after the tile starting at key {start} {where}, your result is right to "
                    f"float32 precision only"
                    + (f" (it comes back as {', '.join(low)})" if low else "")
                    + ": compute in the inputs' dtype (float64)")
            expect(not low, f"m, l and acc must keep the inputs' dtype (float64), got {', '.join(low)}")
            if not torch.allclose(m, m_want, rtol=1e-12, atol=1e-12):
                unscaled = (q @ k[:start + b_k].T).max(dim=-1).values
                tile_only = scores[:, start:start + b_k].max(dim=-1).values
                why = (" (scale the scores by 1/√d)" if torch.allclose(m, unscaled) else
                       " (m is the running maximum: the larger of m and this tile's maximum)"
                       if torch.allclose(m, tile_only) else "")
                raise CheckFailure(
                    f"after the tile starting at key {start} {where}, m must be the running row "
                    f"max of the scores q kᵀ/√d; max error "
                    f"{float((m - m_want).abs().max()):.3g}{why}")
            l_want = torch.exp(seen - m_want[:, None]).sum(dim=-1)
            err = float((l - l_want).abs().max() / l_want.abs().max())
            if not (math.isfinite(err) and err < 1e-9):
                new = scores[:, start:start + b_k]
                flipped = (l_before * torch.exp(m_want - m_before).nan_to_num(0.0, posinf=0.0)
                           + torch.exp(new - m_want[:, None]).sum(dim=-1))
                no_max = torch.exp(seen).sum(dim=-1)
                why = ""
                if start and torch.allclose(l, flipped, rtol=1e-9):
                    why = " (the old sum is rescaled by e^(m − m'), at most 1, not by e^(m' − m))"
                elif not torch.isfinite(l).all() or torch.allclose(l, no_max, rtol=1e-9):
                    why = (" (subtract the running maximum before exponentiating: ℓ is "
                           "Σ exp(s − m), and e^s alone overflows for large scores)")
                raise CheckFailure(
                    f"after the tile starting at key {start} {where}, l must be Σ exp(s − m) over "
                    f"the keys seen so far; relative error {err:.3g}{why}")
            acc_want = torch.exp(seen - m_want[:, None]) @ v[:start + b_k]
            err = float((acc - acc_want).abs().max() / acc_want.abs().max())
            if not (math.isfinite(err) and err < 1e-9):
                new = scores[:, start:start + b_k]
                tile = torch.exp(new - m_want[:, None]) @ v[start:start + b_k]
                why = (" (rescale the old acc by e^(m − m'), as ℓ)"
                       if start and torch.allclose(acc, acc_before + tile, rtol=1e-9) else "")
                raise CheckFailure(
                    f"after the tile starting at key {start} {where}, acc must be "
                    f"Σ exp(s − m) v over the keys seen so far; relative error {err:.3g}{why}")
            m_before, l_before, acc_before = m, l, acc
        want = torch.softmax(scores, dim=-1) @ v
        err = float((acc / l[:, None] - want).abs().max())
        expect(math.isfinite(err) and err < 1e-9,
               f"acc / l after the last tile must equal softmax(q kᵀ/√d) v {where}; max error {err:.3g}")
    return "m, ℓ and o rescaled by e^(m − m') at every tile; acc / ℓ is softmax attention"


check_ch15_flash_tile_step.refused_modules = ("numpy", "scipy")     # (as the merge's, above)
