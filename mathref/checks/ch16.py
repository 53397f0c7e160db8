"""Checkers for chapter 16: the learner builds the course's GPT from its parts.

Every model part is compared with the matching mathref module given the same weights, in
float64: the output, and the gradients of a random projection of the output with respect to the
inputs and every weight (computed where the answer runs: under the grader, in the student's
process). RoPE is also run on one float32 input, for the dtype its statement asks for. The parts a solution
receives as arguments (``parts``, ``rope``) are the checker's own plain-PyTorch versions, so
that each exercise tests one piece. Each checker takes ``generator`` (a torch.Generator; None:
a fixed seed) from which it draws its test inputs.
"""
import math
import numbers

import torch
import torch.nn.functional as F

from mathref.checks.ch13 import ATTENTION_CALLS
from mathref.checks.core import CheckFailure, exercise, expect, expect_callable
from mathref.checks.remote import grads_where_run, remote_apply

__all__ = ["check_ch16_rms_norm", "check_ch16_rope", "check_ch16_swiglu",
           "check_ch16_attention", "check_ch16_block", "check_ch16_gpt_forward",
           "check_ch16_adamw", "check_ch16_schedule", "check_ch16_clip",
           "check_ch16_train_step", "check_ch16_generate"]

# What a model part may not call: whole attention (chapter 13's list), the norms, RoPE, the
# FFN and the model of mathref and PyTorch.
NORM_CALLS = ("torch.nn.functional.rms_norm", "torch.rms_norm", "torch.nn.functional.layer_norm",
              "torch.layer_norm", "torch.nn.RMSNorm.forward", "torch.nn.LayerNorm.forward",
              "torch.ops.aten.rms_norm", "torch.ops.aten._fused_rms_norm",
              "torch.ops.aten.native_layer_norm",
              "mathref.norm.rms_norm", "mathref.norm.layer_norm", "mathref.norm.RMSNorm.forward",
              "mathref.norm.LayerNorm.forward", "mathref.norm.RMSNormFunction.forward")
MODEL_CALLS = ATTENTION_CALLS + NORM_CALLS + (
    "mathref.positions.apply_rope", "mathref.positions.rope_cache",
    "mathref.positions.rope_frequencies", "mathref.transformer.FeedForward.forward",
    "mathref.nn.swiglu", "mathref.gpt.Block.forward", "mathref.gpt.GPT.forward",
    "mathref.gpt.KVCache.update", "torch.nn.Transformer.forward",
    "torch.nn.TransformerDecoderLayer.forward", "torch.nn.TransformerEncoderLayer.forward")
OPTIMIZER_CALLS = ("torch.optim.AdamW.step", "torch.optim.Adam.step", "torch.optim.adamw.adamw",
                   "torch.optim.adam.adam", "torch.optim.Optimizer.step",
                   "torch.optim.adam._single_tensor_adam", "torch.optim.adam._multi_tensor_adam",
                   "torch.optim.adam._fused_adam", "torch._fused_adamw_", "torch._fused_adam_",
                   "torch.ops.aten._fused_adamw_", "torch.ops.aten._fused_adam_",
                   "mathref.optim.Adam.step", "mathref.optim.Adam._step_plain",
                   "mathref.optim.Adam._step_foreach")
SCHEDULE_CALLS = ("mathref.optim.warmup_cosine", "mathref.train.lr_at",
                  "torch.optim.lr_scheduler.LRScheduler.step",
                  "torch.optim.lr_scheduler.CosineAnnealingLR.get_lr",
                  "torch.optim.lr_scheduler.CosineAnnealingLR._get_closed_form_lr",
                  "torch.optim.lr_scheduler.LambdaLR.get_lr",
                  # PyTorch's other cosine formulas: the warm restarts' and the one-cycle's
                  "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts.get_lr",
                  "torch.optim.lr_scheduler.OneCycleLR.get_lr",
                  "torch.optim.lr_scheduler.OneCycleLR._annealing_cos",
                  "torch.optim.swa_utils.SWALR._cosine_anneal")
CLIP_CALLS = ("mathref.optim.clip_grad_norm_", "torch.nn.utils.clip_grad_norm_",
              "torch.nn.utils.clip_grads_with_norm_", "torch.nn.utils.get_total_norm")
GENERATE_CALLS = ("mathref.gpt.generate", "mathref.gpt.sample_next", "mathref.gpt.beam_search",
                  "mathref.checks.ch16._reference_probs")
# This module's own plain-PyTorch parts are oracles too: the exercise that asks for one refuses it
_OWN = "mathref.checks.ch16."
_EPS64 = torch.finfo(torch.float64).eps

_MODEL_BECAUSE = ("build it from PyTorch tensor operations yourself (no ready-made norm, RoPE, "
                  "attention, feed-forward or model)")


def _gen(generator, seed):
    return generator if generator is not None else torch.Generator().manual_seed(seed)


def _randn(g, *shape, scale=1.0):
    return torch.randn(*shape, generator=g, dtype=torch.float64) * scale


# ---- the checker's own parts, in plain PyTorch (handed to solutions that compose them) -----
def _rms(x, weight, eps=1e-5):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _rope(x, positions, base=10000.0):
    positions = torch.as_tensor(positions)
    if positions.is_floating_point() or positions.is_complex():   # the statements: integers
        raise TypeError(f"rope(x, positions): positions must be an integer tensor (as "
                        f"torch.arange(start, start + T) gives), got {positions.dtype}")
    d = x.shape[-1]
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * theta
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


def _mlp(x, w_gate, w_up, w_down):
    return (F.silu(x @ w_gate.T) * (x @ w_up.T)) @ w_down.T


def _attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None):
    B, T, d = x.shape
    d_k = d // n_head

    def split(t):
        return t.view(B, T, n_head, d_k).transpose(1, 2)

    q, k, v = split(x @ w_q.T), split(x @ w_k.T), split(x @ w_v.T)
    start = 0 if cache is None else cache[0].shape[-2]
    positions = torch.arange(start, start + T)
    q, k = rope(q, positions), rope(k, positions)
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=-2), torch.cat([cache[1], v], dim=-2)
    S = k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    allowed = torch.ones(T, S, dtype=torch.bool).tril(S - T)
    weights = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    return (weights @ v).transpose(1, 2).reshape(B, T, d) @ w_o.T, (k, v)


def _block(x, p, n_head, parts, cache=None):
    h, cache = parts["attention"](parts["norm"](x, p["ln_1.weight"]), p["attn.w_q.weight"],
                                  p["attn.w_k.weight"], p["attn.w_v.weight"],
                                  p["attn.w_o.weight"], n_head, parts["rope"], cache)
    x = x + h
    x = x + parts["mlp"](parts["norm"](x, p["ln_2.weight"]), p["mlp.gate.weight"],
                         p["mlp.fc.weight"], p["mlp.proj.weight"])
    return x, cache


PARTS = {"norm": _rms, "rope": _rope, "mlp": _mlp, "attention": _attention, "block": _block}
BLOCK_PARTS = {k: f for k, f in PARTS.items() if k != "block"}   # the block exercise's parts


# ---- mathref references ---------------------------------------------------------------------
def _config(d_model, n_head, n_layer=1, vocab_size=11, block_size=32):
    from mathref.gpt import GPTConfig
    return GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=n_layer,
                     n_head=n_head, d_model=d_model, style="modern", activation="swiglu",
                     qk_norm=False, fused=False)


def _randomize(module, g):
    """Weights of size O(1/√fan_in) and norm gains near 1: every entry matters."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.3 * _randn(g, *p.shape))
            else:
                p.copy_(_randn(g, *p.shape, scale=1 / math.sqrt(p.shape[-1])))
    return module


def _leaves(tensors):
    return [t.detach().clone().requires_grad_(True) for t in tensors]


def _float64(got, what):
    expect(isinstance(got, torch.Tensor), f"{what} must be a tensor, got {type(got).__name__}")
    expect(got.dtype == torch.float64, f"{what} is {got.dtype}, but the inputs are float64: keep "
                                       f"the computation in the inputs' dtype")
    return got


def _close(got, want, what, tol=1e-9, diagnose=None):
    got = _float64(got, what)
    expect(tuple(got.shape) == tuple(want.shape),
           f"{what}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}")
    err = (got.detach() - want.detach()).abs().max().item() if want.numel() else 0.0
    scale = max(1.0, want.detach().abs().max().item())
    if not err < tol * scale:
        why = diagnose(got.detach()) if diagnose else ""
        if not why and err < 2e-6 * scale:      # far above float64 rounding, near float32's
            why = (" (an error of float32's size: some step ran in float32, e.g. a .float() or "
                   "a tensor made without dtype=; keep the inputs' float64 throughout)")
        raise CheckFailure(f"{what}: largest difference from mathref's is {err:.3g}{why}")


def _diagnosis(got, mistakes):
    for output, why in mistakes:
        if tuple(got.shape) == tuple(output.shape) and torch.allclose(got, output, rtol=1e-8,
                                                                     atol=1e-10):
            return f" ({why})"
    return ""


def _run(answer, leaves, build, probe, pair=False):
    """(what ``answer(*build(leaves))`` returned, its gradients): the gradients computed where
    the answer runs (see remote.grads_where_run) when it runs in the grader's other process, else
    None (computed here by _compare_grads, the output carrying its graph)."""
    apply = remote_apply(answer)
    if apply is not None:
        return apply(grads_where_run, leaves, build, probe, pair)
    return answer(*build(leaves)), None


def _compare_grads(got_out, leaves, want_out, want_leaves, names, probe, grads=None):
    """Gradients of ⟨probe, output⟩ w.r.t. every leaf, the learner's against mathref's. ``grads``
    as _run returned them (computed where the answer ran, in the grader), or None: then the
    output must carry the graph (a ``grad_fn``) here and they are computed here."""
    no_graph = ("your output does not depend on the inputs through autograd (a .detach(), "
                ".item(), torch.no_grad() or a new tensor built from numbers breaks the graph): "
                "the model could not be trained")
    leaf = ("your output is a new leaf tensor, not computed from the inputs by autograd (a "
            ".detach().requires_grad_(), or a tensor rebuilt from NumPy or numbers): no "
            "gradient reaches the inputs and weights, so the model could not be trained")
    if grads is None:
        expect(getattr(got_out, "requires_grad", False), no_graph)
        expect(got_out.grad_fn is not None, leaf)
        got = torch.autograd.grad((got_out * probe).sum(), leaves, allow_unused=True)
    else:
        expect(grads != "no graph", no_graph)
        expect(grads != "leaf", leaf)
        expect(isinstance(grads, list) and len(grads) == len(leaves),
               "internal: the gradients did not come back from your process")
        got = grads
    want = torch.autograd.grad((want_out * probe).sum(), want_leaves, allow_unused=True)
    for name, a, b in zip(names, got, want):
        expect(a is not None, f"the output does not depend on {name}")
        expect(isinstance(a, torch.Tensor) and a.shape == b.shape,
               f"the gradient with respect to {name} has the wrong shape")
        err = (a.double() - b).abs().max().item()
        expect(err < 1e-9 * max(1.0, b.abs().max().item()),
               f"the gradient with respect to {name} differs from mathref's by {err:.3g}")


# ---- exercises -------------------------------------------------------------------------------
@exercise("ch16-rms-norm", forbid=MODEL_CALLS + (_OWN + "_rms",), because=_MODEL_BECAUSE)
def check_ch16_rms_norm(rms_norm, *, generator=None):
    """rms_norm(x, weight, eps) against mathref.norm.RMSNorm."""
    expect_callable(rms_norm, "rms_norm(x, weight, eps)")
    from mathref.norm import RMSNorm
    g = _gen(generator, 1601)
    # the last case: mean(x²) near 1e5 with ε = 0.05, which moves the output by 2e-7 of itself
    # (the fifth red team: ε dropped once mean(x²) > 1e4 passed inputs of size 1 and 3)
    for shape, scale, eps in (((2, 3, 8), 1.0, 1e-5), ((4, 6), 0.2, 0.05), ((1, 5, 16), 3.0, 1.0),
                              ((3, 8), 300.0, 0.05)):
        d = shape[-1]
        ref = RMSNorm(d, eps=eps).double()
        with torch.no_grad():
            ref.weight.copy_(1 + 0.5 * _randn(g, d))
        x = _randn(g, *shape, scale=scale) + 0.3 * scale
        x_ref = x.clone().requires_grad_(True)
        want = ref(x_ref)
        leaves = _leaves([x, ref.weight])
        probe = _randn(g, *want.shape)
        got, grads = _run(rms_norm, leaves, lambda t: (t[0], t[1], eps), probe)
        w = ref.weight.detach()
        ms = x.pow(2).mean(-1, keepdim=True)
        mistakes = ((x / (ms.sqrt() + eps) * w, "ε goes inside the square root: "
                     "x / √(mean(x²) + ε)"),
                    ((x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False,
                                                                       keepdim=True) + eps) * w,
                     "this is LayerNorm: RMSNorm does not subtract the mean"),
                    (x / torch.sqrt(x.pow(2).sum(-1, keepdim=True) + eps) * w,
                     "divide by the root of the mean of the squares, not of their sum"),
                    (x / torch.sqrt(ms + eps), "multiply by the gain `weight`"),
                    (x / ms.sqrt() * w, "ε is missing: x / √(mean(x²) + ε) ⊙ γ, whatever the "
                                        "size of mean(x²)"))
        _close(got, want, f"x of shape {shape}, eps={eps}",
               diagnose=lambda out: _diagnosis(out, mistakes))
        _compare_grads(got, leaves, want, [x_ref, ref.weight], ["x", "weight"], probe, grads)
    return "x / √(mean(x²) + ε) ⊙ γ, outputs and gradients as mathref's RMSNorm"


@exercise("ch16-rope", forbid=MODEL_CALLS + (_OWN + "_rope",), because=_MODEL_BECAUSE)
def check_ch16_rope(apply_rope, *, generator=None):
    """apply_rope(x, positions, base) against mathref.positions.apply_rope (half layout)."""
    expect_callable(apply_rope, "apply_rope(x, positions, base)")
    from mathref.positions import apply_rope as ref_rope
    g = _gen(generator, 1602)
    # positions as the attention passes them (consecutive, from 0 or after a cache), and one
    # case of any integers: unsorted, with gaps and a repeat (row t rotates by positions[t])
    for shape, positions, base in (((2, 3, 5, 8), range(0, 5), 10000.0),
                                   ((1, 2, 4, 16), range(7, 11), 10000.0),
                                   ((3, 1, 6, 4), range(3, 9), 100.0),
                                   ((2, 7, 4), range(0, 7), 10000.0),
                                   ((2, 2, 5, 8), (9, 2, 30, 2, 5), 10000.0)):
        T, d = shape[-2], shape[-1]
        positions = torch.tensor(list(positions))
        where = (f"positions {int(positions[0])}…{int(positions[-1])}"
                 if torch.equal(positions, torch.arange(int(positions[0]), int(positions[0]) + T))
                 else f"positions {positions.tolist()}")
        x = _randn(g, *shape)
        x_ref = x.clone().requires_grad_(True)
        want = ref_rope(x_ref, positions=positions, base=base)
        leaves = _leaves([x])
        probe = _randn(g, *want.shape)
        got, grads = _run(apply_rope, leaves, lambda t: (t[0], positions, base), probe)
        theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
        angle = positions.double()[:, None] * theta
        x1a, x2a = x[..., 0::2], x[..., 1::2]
        adjacent = torch.stack([x1a * angle.cos() - x2a * angle.sin(),
                                x1a * angle.sin() + x2a * angle.cos()], -1).flatten(-2)
        # θ_i = b^(−i/d), the 2 dropped (chapter 16's ninth read, L-D), in the course's layout
        half = positions.double()[:, None] * base ** (-torch.arange(d // 2, dtype=torch.float64) / d)
        x1, x2 = x[..., : d // 2], x[..., d // 2:]
        no_two = torch.cat([x1 * half.cos() - x2 * half.sin(), x1 * half.sin() + x2 * half.cos()], -1)
        mistakes = ((ref_rope(x, positions=-positions, base=base),
                     "you rotate by −m·θ_i: position m rotates by +m·θ_i, "
                     "R = [[cos, −sin], [sin, cos]]"),
                    (adjacent, "you paired adjacent entries (x_0, x_1), …: the course's layout "
                               "pairs x_i with x_(i + d/2)"),
                    (no_two, "θ_i = b^(−2i/d), with the 2 (i counts the pairs, 0 … d/2 − 1): "
                             "with b^(−i/d) the last pair's frequency is about b^(−1/2), not "
                             "about b^(−1)"),
                    (ref_rope(x, base=base), "rotate position m = positions[t], not t"),
                    (ref_rope(x, positions=positions[0] + torch.arange(T), base=base),
                     "row t rotates by m = positions[t]: the positions need not be consecutive, "
                     "so use every entry, not positions[0] + t"))
        _close(got, want, f"x of shape {shape}, {where}, base {base:g}",
               diagnose=lambda out: _diagnosis(out, mistakes) or (
                   " (a float32-sized error: compute θ_i, the angles m·θ_i and their cos and "
                   "sin in float64)" if (out - want.detach()).abs().max().item() < 1e-5 else ""))
        _compare_grads(got, leaves, want, [x_ref], ["x"], probe, grads)
    # the statement's dtype rule: a float32 x (the payoff's model) comes back float32
    x = _randn(g, 2, 3, 6, 8).float()
    # far positions: float32 angles miss by 4.5e-5 or more there, float64 angles rounded to
    # float32 by at most 3.4e-7 (300 draws each): the bound 2e-6 sits between
    positions = torch.tensor([4, 5, 4097, 9999, 20001, 32767])
    got = apply_rope(x.clone(), positions, 10000.0)
    expect(isinstance(got, torch.Tensor), f"return a tensor, got {type(got).__name__}")
    expect(got.dtype == torch.float32,
           f"x of dtype float32: your output is {got.dtype}. Return the input's dtype: compute "
           f"the angles in float64, then convert cos and sin to x.dtype before rotating (a "
           f"float64 cos times a float32 x is float64, and the model's float32 attention then "
           f"fails on mixed dtypes)")
    want = ref_rope(x.double(), positions=positions, base=10000.0)
    expect(tuple(got.shape) == tuple(want.shape),
           f"x of dtype float32: expected shape {tuple(want.shape)}, got {tuple(got.shape)}")
    err = (got.detach().double() - want).abs().max().item()
    expect(err < 2e-6, f"x of dtype float32, positions {positions.tolist()}: largest difference "
                       f"from mathref's (float64) is {err:.3g}, more than float32 rounding "
                       f"explains (compute the angles m·θ_i in float64, then convert cos and "
                       f"sin to x.dtype: in float32 an angle of thousands of radians loses about "
                       f"1e-4)")
    return "pairs (x_i, x_(i+d/2)) rotated by m·θ_i, θ_i = base^(−2i/d)"


@exercise("ch16-swiglu", forbid=MODEL_CALLS + (_OWN + "_mlp",), because=_MODEL_BECAUSE)
def check_ch16_swiglu(swiglu_mlp, *, generator=None):
    """swiglu_mlp(x, w_gate, w_up, w_down) against mathref.transformer.FeedForward('swiglu')."""
    expect_callable(swiglu_mlp, "swiglu_mlp(x, w_gate, w_up, w_down)")
    from mathref.transformer import FeedForward
    g = _gen(generator, 1603)
    # the last case: x of size 30, so the gate's pre-activations reach ±50 and more (the fifth
    # red team: a gate clamped to [−30, 30] "for stability" passed pre-activations of a few units)
    for B, T, d, d_ff, scale in ((2, 3, 8, 24, 1.0), (1, 5, 16, 40, 1.0), (3, 2, 4, 8, 1.0),
                                 (2, 3, 8, 16, 30.0)):
        ref = _randomize(FeedForward(d, d_ff, "swiglu", bias=False).double(), g)
        x = _randn(g, B, T, d, scale=scale)
        x_ref = x.clone().requires_grad_(True)
        want = ref(x_ref)
        ws = [ref.gate.weight, ref.fc.weight, ref.proj.weight]
        leaves = _leaves([x] + ws)
        probe = _randn(g, *want.shape)
        got, grads = _run(swiglu_mlp, leaves, lambda t: tuple(t), probe)
        wg, wu, wd = (w.detach() for w in ws)
        mistakes = (((F.silu(x @ wu.T) * (x @ wg.T)) @ wd.T,
                     "SiLU acts on the gate x·W_gateᵀ, the other factor x·W_upᵀ is linear"),
                    ((torch.relu(x @ wg.T) * (x @ wu.T)) @ wd.T, "the gate uses SiLU, "
                                                               "z·σ(z), not ReLU"),
                    (F.silu((x @ wg.T) * (x @ wu.T)) @ wd.T, "multiply SiLU(gate) by the "
                                                             "value; do not apply SiLU to the product"),
                    ((torch.sigmoid(x @ wg.T) * (x @ wu.T)) @ wd.T,
                     "SiLU(z) = z·σ(z), not σ(z) (that is the GLU)"),
                    ((F.gelu(x @ wg.T) * (x @ wu.T)) @ wd.T,
                     "the gate uses SiLU, z·σ(z), not GELU (that is GeGLU)"))
        _close(got, want, f"x of shape {(B, T, d)}, d_ff={d_ff}",
               diagnose=lambda out: _diagnosis(out, mistakes))
        _compare_grads(got, leaves, want, [x_ref] + ws, ["x", "w_gate", "w_up", "w_down"], probe,
                       grads)
    return "(SiLU(x W_gateᵀ) ⊙ x W_upᵀ) W_downᵀ"


def _attention_case(g, B, T, d, H):
    from mathref.gpt import CausalSelfAttention
    from mathref.positions import rope_cache
    ref = _randomize(CausalSelfAttention(_config(d, H)).double(), g)
    cos, sin = rope_cache(torch.arange(T), d // H, dtype=torch.float64)
    return ref, (cos, sin)


def _unpack_attention(result, what):
    expect(isinstance(result, (tuple, list)) and len(result) == 2,
           f"{what} must return the pair (out, cache), got {type(result).__name__}")
    out, cache = result
    expect(isinstance(cache, (tuple, list)) and len(cache) == 2
           and all(isinstance(t, torch.Tensor) for t in cache),
           f"{what}: the cache must be the pair of tensors (k, v), got {type(cache).__name__}")
    return out, tuple(cache)


def _expect_future_unseen(causal_self_attention, g):
    """A future position must not reach an earlier query at all, neither through its value nor
    through its key (a softmax denominator). The probe moves the input at each position p ≥ 1 in
    turn by 10³⁰⁰ along a random direction, so its key and value become huge, and asserts that
    the outputs of the positions before p stay equal to a few units in the last place: nothing
    they compute depends on position p. It runs with gradients on (as in training), under
    no_grad, and through every cache of c < p positions, each time on fresh inputs and
    with the moved ones first, so an answer cannot return what it computed for them before. A finite fill
    leaves the future a weight of about e^fill, which this shows down to fills of about −720;
    an additive mask of any size meets a future score of about +10³⁰⁰. Then a case whose
    queries are −10¹⁵⁰ times its keys, so that position 0's only allowed score is about −10¹⁵⁰:
    a finite fill above that hands position 0's weight to the future. Chapter 16's red teams
    found, in turn: fills of −30, then −40 to −700, under a 10⁶ probe of the last value; a
    denominator that kept e^(s − 40) of the future, a finite fill used only with a cache; leaks
    of 10⁻¹² under a 10⁻⁹ tolerance; then leaks that spared the last position, or ran only with
    gradients on, or only for the probe's shapes, or fills of −10⁴ (fifth red team); leaks
    from position 1, and an answer that remembered its last call's rows (sixth)."""
    for B, T, d, H in ((2, 5, 8, 2), (1, 6, 16, 4), (3, 4, 8, 1)):
        ref, _ = _attention_case(g, B, T, d, H)
        W = [w.detach().clone() for w in (ref.w_q.weight, ref.w_k.weight, ref.w_v.weight,
                                          ref.w_o.weight)]
        # every moved position p ≥ 1, without a cache (gradients on, and off) and after every
        # cache of c < p positions
        for p, c in [(p, c) for p in range(1, T) for c in (-1, *range(p))]:
            how = ("with gradients on" if c == -1 else "under torch.no_grad()" if c == 0
                   else f"decoding after a cache of {c}")
            c = max(c, 0)
            # fresh inputs each time, the moved ones first: the answer cannot have seen them
            x = _randn(g, B, T, d)
            u = _randn(g, d)
            far = x.clone()
            far[:, p] += 1e300 * u / u.norm()
            outs = []
            for t in (far, x):
                if how.startswith("with"):
                    result, _ = _run(causal_self_attention, _leaves([t] + W),
                                     lambda leaves: (*leaves, H, _rope),
                                     torch.zeros(B, T, d, dtype=torch.float64), pair=True)
                else:
                    with torch.no_grad():
                        cache = None
                        if c:
                            _, cache = _unpack_attention(causal_self_attention(
                                t[:, :c], *W, H, _rope, None), "causal_self_attention")
                        result = causal_self_attention(t[:, c:], *W, H, _rope, cache)
                outs.append(_float64(_unpack_attention(result, "causal_self_attention")[0],
                                     "the output").detach())
            outs.reverse()                                          # near, far
            near_out, far_out = outs[0][:, :p - c], outs[1][:, :p - c]   # positions before p
            where = (f"B={B}, T={T}, d_model={d}, n_head={H}, {how}: position {p}'s input moved "
                     f"by 1e300")
            expect(bool(far_out.isfinite().all()),
                   f"{where}: the outputs of positions {c}…{p - 1} are not finite. Subtract each "
                   f"row's own maximum over its allowed scores: mask the future with −∞ before "
                   f"the softmax and before any maximum. One maximum over all rows, or one that "
                   f"includes a row's future scores, can be far above the row's allowed scores, "
                   f"and then all its weights underflow to 0/0")
            moved = (far_out - near_out).abs().max().item()
            # nothing an earlier output computes depends on position p, so it is equal to the
            # last bit; the few units in the last place allowed are not a leak's room
            expect(moved <= 4 * _EPS64 * max(1.0, near_out.abs().max().item()),
                   f"{where}: the outputs of positions {c}…{p - 1} moved by {moved:.3g}. A future "
                   f"key must not enter an earlier query's softmax at all, numerator or "
                   f"denominator: mask its score with −∞ (masked_fill with float('-inf')) before "
                   f"the softmax; a finite fill such as −40 leaves it a weight of about e^(−40)")
    B, T, d, H = 2, 5, 8, 2
    ref, _ = _attention_case(g, B, T, d, H)
    W = [w.detach().clone() for w in (ref.w_q.weight, ref.w_k.weight, ref.w_v.weight,
                                      ref.w_o.weight)]
    W[0] = -1e150 * W[1]      # q = −10¹⁵⁰ k: position 0's one allowed score is −10¹⁵⁰|k₀|²/√d_k
    x = _randn(g, B, T, d)
    with torch.no_grad():
        want = _attention(x, *W, H, _rope)[0]
        got = _unpack_attention(causal_self_attention(x, *W, H, _rope, None),
                                "causal_self_attention")[0]
    _close(got, want, f"B={B}, T={T}, d_model={d}, n_head={H}, scores of about ±1e150 (w_q = "
           f"−1e150·w_k)", diagnose=lambda out: (
               " (position 0 may see only itself, whose score here is about −1e150: a finite "
               "fill or additive mask above that hands its weight to the future keys. Mask "
               "with −∞)"))


@exercise("ch16-attention", forbid=MODEL_CALLS + (_OWN + "_attention",), because=_MODEL_BECAUSE)
def check_ch16_attention(causal_self_attention, *, generator=None):
    """causal_self_attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache) → (out, (k, v)),
    against mathref.gpt.CausalSelfAttention (RoPE, no biases, no QK-norm) with its KVCache."""
    expect_callable(causal_self_attention,
                    "causal_self_attention(x, w_q, w_k, w_v, w_o, n_head, rope, cache=None)")
    from mathref.gpt import KVCache
    g = _gen(generator, 1604)
    for B, T, d, H in ((2, 6, 8, 2), (1, 5, 16, 4), (3, 4, 8, 1)):
        ref, rope = _attention_case(g, B, T, d, H)
        x = _randn(g, B, T, d)
        x_ref = x.clone().requires_grad_(True)
        want = ref(x_ref, rope=rope)
        ws = [ref.w_q.weight, ref.w_k.weight, ref.w_v.weight, ref.w_o.weight]
        leaves = _leaves([x] + ws)
        case = f"B={B}, T={T}, d_model={d}, n_head={H}"
        probe = _randn(g, *want.shape)
        result, grads = _run(causal_self_attention, leaves, lambda t: (*t, H, _rope), probe,
                             pair=True)
        got, (k, v) = _unpack_attention(result, "causal_self_attention")
        W = [w.detach() for w in ws]
        d_k = d // H

        def variant(causal=True, rope_v=False, scale=d_k, axis=-1):
            split = lambda t: t.view(B, T, H, d_k).transpose(1, 2)   # noqa: E731
            pos = torch.arange(T)
            q, kk, vv = split(x @ W[0].T), split(x @ W[1].T), split(x @ W[2].T)
            q, kk = _rope(q, pos), _rope(kk, pos)
            if rope_v:
                vv = _rope(vv, pos)
            s = q @ kk.transpose(-2, -1) / math.sqrt(scale)
            if causal:
                s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
            return (s.softmax(axis) @ vv).transpose(1, 2).reshape(B, T, d) @ W[3].T

        mistakes = ((variant(causal=False), "the causal mask is missing: query t may see keys "
                                            "0…t only"),
                    (variant(rope_v=True), "RoPE rotates the queries and keys only, never the "
                                           "values"),
                    (variant(scale=d), "scale the scores by 1/√d_k with d_k = d_model/n_head"),
                    (variant(axis=-2), "the softmax runs over the keys (the last axis of "
                                       "QKᵀ): each query's weights sum to 1"))
        _close(got, want, case, diagnose=lambda out: _diagnosis(out, mistakes))
        _compare_grads(got, leaves, want, [x_ref] + ws, ["x", "w_q", "w_k", "w_v", "w_o"], probe,
                       grads)
        # the cache: the rotated keys and the values of every position, [B, H, T, d_k]
        cache = KVCache(1)
        with torch.no_grad():
            ref(x, rope=rope, cache=cache)
        _close(k, cache.keys[0], f"{case}: the returned keys (rotated, [B, n_head, T, d_k])")
        _close(v, cache.values[0], f"{case}: the returned values ([B, n_head, T, d_k])")
        # decoding: a prefix, then two new positions at once (the mask must let each see the
        # cached keys and the new keys up to itself), then one position at a time
        with torch.no_grad():
            split_at = T // 2
            out, cache = _unpack_attention(causal_self_attention(
                x[:, :split_at], *W, H, _rope, None), "causal_self_attention")
            pieces, t = [out], split_at
            while t < T:
                n = 2 if t == split_at else 1
                out, cache = _unpack_attention(causal_self_attention(
                    x[:, t:t + n], *W, H, _rope, cache), "causal_self_attention with a cache")
                pieces.append(out)
                t += n
            expect(tuple(cache[0].shape) == (B, H, T, d_k),
                   f"{case}: after decoding all {T} positions the key cache must be "
                   f"{[B, H, T, d_k]}, got {list(cache[0].shape)}")
            _close(torch.cat(pieces, dim=1), want, f"{case}: decoding with the cache (a prefix "
                   f"of {split_at}, then 2 new positions together, then one at a time)",
                   diagnose=lambda out: (
                       " (new positions start at S = the cache's length: rotate them there, "
                       "let them see every cached key, and mask among the new ones: query t "
                       "sees keys 0…S + t)"))
    _expect_future_unseen(causal_self_attention, g)
    return "RoPE on q and k at their positions, causal softmax(QKᵀ/√d_k)V, W_o; the cache decodes"


BLOCK_KEYS = ("ln_1.weight", "attn.w_q.weight", "attn.w_k.weight", "attn.w_v.weight",
              "attn.w_o.weight", "ln_2.weight", "mlp.gate.weight", "mlp.fc.weight",
              "mlp.proj.weight")


@exercise("ch16-block", forbid=MODEL_CALLS + (_OWN + "_block",), because=_MODEL_BECAUSE)
def check_ch16_block(block_forward, *, generator=None):
    """block_forward(x, params, n_head, parts, cache) → (x, cache) against mathref.gpt.Block."""
    expect_callable(block_forward, "block_forward(x, params, n_head, parts, cache=None)")
    from mathref.gpt import Block
    g = _gen(generator, 1605)
    for B, T, d, H in ((2, 5, 8, 2), (1, 4, 16, 4)):
        ref = _randomize(Block(_config(d, H)).double(), g)
        from mathref.positions import rope_cache
        rope = rope_cache(torch.arange(T), d // H, dtype=torch.float64)
        x = _randn(g, B, T, d)
        x_ref = x.clone().requires_grad_(True)
        want = ref(x_ref, rope=rope)
        named = dict(ref.named_parameters())
        expect(set(named) == set(BLOCK_KEYS), "internal: mathref's Block changed its names")
        ws = [named[k] for k in BLOCK_KEYS]
        leaves = _leaves([x] + ws)
        probe = _randn(g, *want.shape)
        result, grads = _run(block_forward, leaves, lambda t: (
            t[0], dict(zip(BLOCK_KEYS, t[1:])), H, dict(BLOCK_PARTS), None), probe, pair=True)
        expect(isinstance(result, (tuple, list)) and len(result) == 2,
               "block_forward must return the pair (x, cache)")
        got = result[0]
        p = {k: w.detach() for k, w in zip(BLOCK_KEYS, ws)}

        def attn(h):
            return _attention(h, p["attn.w_q.weight"], p["attn.w_k.weight"], p["attn.w_v.weight"],
                              p["attn.w_o.weight"], H, _rope)[0]

        def mlp(h):
            return _mlp(h, p["mlp.gate.weight"], p["mlp.fc.weight"], p["mlp.proj.weight"])

        n1 = lambda h: _rms(h, p["ln_1.weight"])   # noqa: E731
        n2 = lambda h: _rms(h, p["ln_2.weight"])   # noqa: E731
        post = n1(x + attn(x))
        mid = x + attn(n1(x))
        mistakes = ((n2(post + mlp(post)), "this is the post-norm block: pre-norm normalizes only "
                                           "the sub-layer's input, x + Sublayer(Norm(x))"),
                    (mlp(n2(attn(n1(x)))), "the residual connections are missing"),
                    (mid + mlp(n1(mid)), "the second sub-layer uses ln_2, not ln_1"),
                    (x + attn(n1(x)) + mlp(n2(x)), "the MLP reads the stream after the "
                                                   "attention's update, not the block's input"),
                    (mlp(n2(mid)), "the MLP's residual is missing: return u + MLP(RMSNorm₂(u)), "
                                   "u = x + Attn(RMSNorm₁(x))"),
                    (attn(n1(x)) + mlp(n2(attn(n1(x)))), "the attention's residual is missing: "
                                                         "u = x + Attn(RMSNorm₁(x))"))
        _close(got, want, f"B={B}, T={T}, d_model={d}, n_head={H}",
               diagnose=lambda out: _diagnosis(out, mistakes))
        _compare_grads(got, leaves, want, [x_ref] + ws, ["x"] + list(BLOCK_KEYS), probe, grads)
        with torch.no_grad():   # the cache passes through the attention: a prefix, then two
            # new positions at once (the fifth red team: a block that kept only the last new
            # position with a cache passed one), then the last one
            _, cache = block_forward(x[:, :T - 3], p, H, dict(BLOCK_PARTS), None)
            two, cache = block_forward(x[:, T - 3:T - 1], p, H, dict(BLOCK_PARTS), cache)
            expect(isinstance(cache, (tuple, list)) and len(cache) == 2,
                   "return the attention's cache (k, v) as the block's cache")
            _close(two, want[:, T - 3:T - 1], f"positions {T - 3} and {T - 2} decoded together "
                   f"with the cache of the {T - 3} before them", diagnose=lambda out: (
                       " (with a cache, run the block on every new position it is given)"))
            last, cache = block_forward(x[:, T - 1:], p, H, dict(BLOCK_PARTS), cache)
            expect(isinstance(cache, (tuple, list)) and len(cache) == 2,
                   "return the attention's cache (k, v) as the block's cache")
            _close(last, want[:, T - 1:], "the last position, decoded with the cache of the "
                   "others", diagnose=lambda out: " (pass `cache` to the attention and return "
                                                   "the cache it gives back)")

    def draw(q):
        x, u = _randn(g, B, T, d), _randn(g, d)
        changed = x.clone()
        changed[:, q] += 1e3 * u / u.norm()
        return x, changed

    with torch.no_grad():
        _expect_causal(lambda t: block_forward(t, p, H, dict(BLOCK_PARTS), None)[0], T, draw,
                       f"block_forward (B={B}, T={T}, d_model={d}, n_head={H})")
    return "x + Attn(RMSNorm₁(x)), then x + MLP(RMSNorm₂(x))"


def _expect_causal(run, T, draw, what):
    """For each position q ≥ 1: ``draw(q)`` gives fresh (plain, changed) inputs that differ at
    position q only; ``run`` of the changed ones first, then of the plain ones, and every output
    before q must be equal to a few units in the last place (chapter 16's sixth red team: a
    block and a GPT that added 1e-10 of the next position passed)."""
    for q in range(1, T):
        plain, changed = draw(q)
        far = _float64(run(changed), f"{what}'s output").detach()[:, :q]
        near = _float64(run(plain), f"{what}'s output").detach()[:, :q]
        moved = (far - near).abs().max().item()
        expect(moved <= 4 * _EPS64 * max(1.0, near.abs().max().item()),
               f"{what}: the outputs of positions 0…{q - 1} moved by {moved:.3g} when only "
               f"position {q}'s input changed: a position may depend only on itself and the "
               f"positions before it")


def _gpt_case(g, vocab, d, H, L):
    from mathref.gpt import GPT
    from mathref.positions import rope_cache
    model = _randomize(GPT(_config(d, H, n_layer=L, vocab_size=vocab)).double(), g)
    # the angles in float64 too (the model's buffers were computed in float32)
    cos, sin = rope_cache(torch.arange(model.config.block_size), d // H, dtype=torch.float64)
    model.rope_cos, model.rope_sin = cos, sin
    return model


def _unpack_gpt(result, what):
    expect(isinstance(result, (tuple, list)) and len(result) == 2,
           f"{what} must return the pair (logits, caches), got {type(result).__name__}")
    return result


@exercise("ch16-gpt-forward", forbid=MODEL_CALLS, because=_MODEL_BECAUSE)
def check_ch16_gpt_forward(gpt_forward, *, generator=None):
    """gpt_forward(idx, params, n_head, n_layer, parts, caches) → (logits, caches) against
    mathref.GPT (modern style: RoPE, RMSNorm, SwiGLU, untied head, no biases, no QK-norm)."""
    expect_callable(gpt_forward, "gpt_forward(idx, params, n_head, n_layer, parts, caches=None)")
    g = _gen(generator, 1606)
    for B, T, vocab, d, H, L in ((2, 6, 11, 8, 2, 2), (1, 5, 13, 16, 4, 1), (3, 4, 7, 8, 1, 3)):
        model = _gpt_case(g, vocab, d, H, L)
        idx = torch.randint(vocab, (B, T), generator=g)
        want, _ = model(idx)
        names = [n for n, _ in model.named_parameters()]
        ws = [p for _, p in model.named_parameters()]
        leaves = _leaves(ws)
        probe = _randn(g, *want.shape)
        result, grads = _run(gpt_forward, leaves, lambda t: (
            idx, dict(zip(names, t)), H, L, dict(PARTS), None), probe, pair=True)
        logits, caches = _unpack_gpt(result, "gpt_forward")
        p = {n: w.detach() for n, w in zip(names, ws)}

        def run(final_norm=True, head="lm_head.weight", emb_scale=1.0):
            x = p["tok_emb.weight"][idx] * emb_scale
            for i in range(L):
                sub = {k: p[f"blocks.{i}.{k}"] for k in BLOCK_KEYS}
                x, _ = _block(x, sub, H, PARTS)
            if final_norm:
                x = _rms(x, p["ln_f.weight"])
            return x @ p[head].T

        mistakes = ((run(final_norm=False), "apply the final RMSNorm (ln_f) before the head"),
                    (run(head="tok_emb.weight"), "this model's head is its own matrix "
                                                 "lm_head.weight, not the embedding (untied)"),
                    (run(emb_scale=math.sqrt(d)), "the embedding rows are used as they are, "
                                                  "not scaled by √d_model"))
        case = f"B={B}, T={T}, vocab={vocab}, d_model={d}, n_head={H}, n_layer={L}"
        _close(logits, want, case, diagnose=lambda out: _diagnosis(out, mistakes))
        _compare_grads(logits, leaves, want, ws, names, probe, grads)
        expect(isinstance(caches, (tuple, list)) and len(caches) == L,
               f"{case}: return one cache per block ({L}), got "
               f"{len(caches) if isinstance(caches, (tuple, list)) else type(caches).__name__}")
        with torch.no_grad():   # a prefix, two ids at once with the caches (the fifth red
            # team: only the last new id fed, or only its logits returned, passed one), then one
            _, caches = _unpack_gpt(gpt_forward(idx[:, :T - 3], p, H, L, dict(PARTS), None),
                                    "gpt_forward")
            two, caches = _unpack_gpt(gpt_forward(idx[:, T - 3:T - 1], p, H, L, dict(PARTS),
                                                  caches), "gpt_forward with caches")
            _close(two, want[:, T - 3:T - 1], f"{case}: positions {T - 3} and {T - 2} decoded "
                   f"together with the caches of the {T - 3} before them",
                   diagnose=lambda out: " (with caches, return the logits of every new id "
                                        "given, [B, T, V], each block run on all of them)")
            expect(isinstance(caches, (tuple, list)) and len(caches) == L,
                   f"{case}: return one cache per block ({L})")
            last, caches = _unpack_gpt(gpt_forward(idx[:, -1:], p, H, L, dict(PARTS), caches),
                                       "gpt_forward with caches")
            _close(last, want[:, -1:], f"{case}: the last position decoded with the caches",
                   diagnose=lambda out: " (give block i the cache caches[i] and return the "
                                        "list of the caches the blocks give back)")

    def draw(q):
        ids = torch.randint(vocab, (B, T), generator=g)
        changed = ids.clone()
        changed[:, q] = (ids[:, q] + 1 + torch.randint(vocab - 1, (B,), generator=g)) % vocab
        return ids, changed

    with torch.no_grad():
        _expect_causal(lambda t: _unpack_gpt(gpt_forward(t, p, H, L, dict(PARTS), None),
                                             "gpt_forward")[0], T, draw, f"gpt_forward ({case})")
    return "logits = RMSNorm(blocks(E[idx])) W_headᵀ, equal to mathref.GPT's"


def _triple(result, what):
    expect(isinstance(result, (tuple, list)) and len(result) == 3,
           f"{what} must return the triple (p, m, v), got {type(result).__name__}")
    return [_float64(t, what) for t in result]


@exercise("ch16-adamw", forbid=OPTIMIZER_CALLS,
          because="write the AdamW update from its equations yourself")
def check_ch16_adamw(adamw_update, *, generator=None):
    """adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay) → (p, m, v), five steps
    against mathref.optim.AdamW, from t = 1 and, in one case, from a t drawn in 100 … 2999 with
    moments already built up (the fifth red team: a bias correction 1 − βᵗ capped at t = 5
    passed the steps 1 … 5)."""
    expect_callable(adamw_update, "adamw_update(p, g, m, v, t, lr, betas, eps, weight_decay)")
    from mathref.optim import AdamW
    gen = _gen(generator, 1607)
    for shape, lr, betas, eps, wd, late in (((3, 4), 0.1, (0.9, 0.999), 1e-8, 0.1, False),
                                            ((5,), 0.03, (0.8, 0.95), 1e-3, 0.5, False),
                                            ((2, 2), 0.2, (0.9, 0.99), 1e-8, 0.0, False),
                                            ((4,), 0.01, (0.9, 0.999), 1e-8, 0.1, True)):
        theta = _randn(gen, *shape)
        ref = torch.nn.Parameter(theta.clone())
        opt = AdamW([ref], lr=lr, betas=betas, eps=eps, weight_decay=wd)
        p, m, v = theta.clone(), torch.zeros(shape, dtype=torch.float64), \
            torch.zeros(shape, dtype=torch.float64)
        first = 1
        if late:    # mathref's state after first − 1 updates: moments of gradients of size ~1
            first = int(torch.randint(100, 3000, (1,), generator=gen))
            m = 0.3 * _randn(gen, *shape)
            v = m * m + _randn(gen, *shape).square()
            opt.state[ref].update(step=first - 1, exp_avg=m.clone(), exp_avg_sq=v.clone())
        for t in range(first, first + 5):
            grad = _randn(gen, *shape, scale=10.0 ** (t % 3 - 1))
            step_lr = lr * (t - first + 1) / 5      # the rate changes from step to step
            opt.param_groups[0]["lr"] = step_lr
            ref.grad = grad.clone()
            before = (p, m, v)
            p, m, v = _triple(adamw_update(p.clone(), grad.clone(), m.clone(), v.clone(), t,
                                           step_lr, betas, eps, wd), "adamw_update")
            # copies, made before mathref's step: an answer that returns mathref's own
            # parameter, found by a route the gate does not see, is not updated by that step
            # (chapter 16's delta read, L-A: gc.get_objects through map)
            p, m, v = (x.detach().clone() for x in (p, m, v))
            # mathref's step after the answer's: while the answer runs, no frame holds the
            # result it should return (the attack read: a traceback's frames reached it)
            opt.step()
            want_m, want_v = opt.state[ref]["exp_avg"], opt.state[ref]["exp_avg_sq"]
            case = f"step t={t} (lr={step_lr:g}, betas={betas}, eps={eps:g}, weight_decay={wd:g})"
            why = _adamw_mistakes(*before, grad, t, step_lr, betas, eps, wd)
            _close(m, want_m, f"{case}: the first moment m",
                   diagnose=lambda out: _diagnosis(out, [(w[1], text) for w, text in why]))
            _close(v, want_v, f"{case}: the second moment v",
                   diagnose=lambda out: _diagnosis(out, [(w[2], text) for w, text in why]))
            _close(p, ref.detach(), f"{case}: the parameters", tol=1e-12,
                   diagnose=lambda out: _diagnosis(out, [(w[0], text) for w, text in why]))
    return "θ ← (1 − ηλ)θ − η·m̂/(√v̂ + ε), m̂ = m/(1 − β₁ᵗ), v̂ = v/(1 − β₂ᵗ)"


def _adamw_variant(p, m, v, g, t, lr, betas, eps, wd, l2=False, correct=True, decay_lr=True,
                   eps_inside=False, decay_after=False, eps_uncorrected=False, t_late=False):
    if l2:
        g = g + wd * p
    elif not decay_after:
        p = p * (1 - (lr if decay_lr else 1.0) * wd)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    if t_late:          # the correction one step behind (t − 1, and 1 at the first step)
        t = max(t - 1, 1)
    m_hat, v_hat = (m / (1 - betas[0] ** t), v / (1 - betas[1] ** t)) if correct else (m, v)
    denominator = (v_hat + eps).sqrt() if eps_inside else v_hat.sqrt() + eps
    if eps_uncorrected:
        denominator = v_hat.sqrt() + eps / math.sqrt(1 - betas[1] ** t)
    p = p - lr * m_hat / denominator
    if decay_after:
        p = p * (1 - lr * wd)
    return p, m, v


def _adamw_mistakes(p, m, v, g, t, lr, betas, eps, wd):
    """The results of the common mistakes, each with its explanation (for the messages)."""
    args = (p, m, v, g, t, lr, betas, eps, wd)
    return [(_adamw_variant(*args, l2=True), "the decay λθ was added to the gradient: that is "
             "Adam with L2; AdamW subtracts ηλθ from θ directly, outside m and v"),
            (_adamw_variant(*args, correct=False), "the bias correction is missing: divide m by "
             "1 − β₁ᵗ and v by 1 − β₂ᵗ"),
            (_adamw_variant(*args, t_late=True), "the bias correction is one step behind: "
             "at step t (the t passed in, counted from 1) divide by 1 − β₁ᵗ and 1 − β₂ᵗ, "
             "not by 1 − β^(t−1)"),
            (_adamw_variant(*args, decay_lr=False), "the decay is θ ← (1 − ηλ)θ: it is "
             "multiplied by the learning rate"),
            (_adamw_variant(*args, eps_inside=True), "ε is added after the square root: "
             "m̂/(√v̂ + ε), not m̂/√(v̂ + ε)"),
            (_adamw_variant(*args, eps_uncorrected=True), "ε is added to √v̂, the corrected "
             "v: the form α = η·√(1 − β₂ᵗ)/(1 − β₁ᵗ), θ −= α·m/(√v + ε) (Kingma and Ba's "
             "§2) adds it to the uncorrected √v, which is ε/√(1 − β₂ᵗ) in place of ε in "
             "m̂/(√v̂ + ε)"),
            (_adamw_variant(*args, decay_after=True), "decay the parameters before the Adam "
             "step, θ ← (1 − ηλ)θ − η·m̂/(√v̂ + ε) with the θ of before the step, not after it")]


@exercise("ch16-schedule", forbid=SCHEDULE_CALLS,
          because="write the warm-up and the cosine from their formulas yourself")
def check_ch16_schedule(warmup_cosine_lr, *, generator=None):
    """warmup_cosine_lr(step, warmup_steps, total_steps, lr_max, lr_min) against
    mathref.optim.warmup_cosine at every step 0 … total_steps + 3 and two steps beyond, one
    case without warm-up (warmup_steps = 0)."""
    expect_callable(warmup_cosine_lr,
                    "warmup_cosine_lr(step, warmup_steps, total_steps, lr_max, lr_min)")
    from mathref.optim import warmup_cosine
    g = _gen(generator, 1608)
    def rates(floor=True):  # drawn from the generator: no table of answers fits another one
        lr_max = 10 ** float(torch.empty(()).uniform_(-4, 0.5, generator=g))
        return lr_max, lr_max * float(torch.rand((), generator=g)) if floor else 0.0

    W = int(torch.randint(2, 20, (1,), generator=g))
    cases = [(10, 50, *rates()), (1, 7, *rates(floor=False)), (4, 5, *rates()),
             (W, W + int(torch.randint(1, 40, (1,), generator=g)), *rates())]
    # no warm-up (W = 0: the cosine from step 0; the fifth red team's division by W passed)
    cases.append((0, int(torch.randint(1, 30, (1,), generator=g)), *rates()))
    for W, T, lr_max, lr_min in cases:
        # every step to T + 3, then steps far past T (the fifth red team: a cosine that
        # restarted after T + 3 passed): 2T + W, where a restart is back at η_max, and one drawn
        far = [2 * T + W, int(torch.randint(T + 4, 5 * T + 10, (1,), generator=g))]
        for step in list(range(T + 4)) + far:
            got = warmup_cosine_lr(step, W, T, lr_max, lr_min)
            want = warmup_cosine(step, W, T, lr_max, lr_min)    # after: no frame holds it before
            expect(not isinstance(got, torch.Tensor) or got.dtype == torch.float64,
                   f"warmup_cosine_lr returned a {getattr(got, 'dtype', '')} tensor: its "
                   f"rounding (about 1e-7 of the value in float32) is larger than the check "
                   f"allows; return a Python float (compute with math, not torch)")
            expect((isinstance(got, numbers.Real) and not isinstance(got, bool))
                   or (isinstance(got, torch.Tensor) and got.dim() == 0),
                   f"warmup_cosine_lr must return a number (a Python float), got "
                   f"{type(got).__name__}{list(got.shape) if isinstance(got, torch.Tensor) else ''}")
            got = float(got)
            if not math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-15):
                why = ""
                if step < W and math.isclose(got, lr_max * step / W, rel_tol=1e-9):
                    why = (" (off by one: step 0 already uses η_max/W and step W − 1 uses "
                           "η_max, η = η_max·(step + 1)/W)")
                elif step >= W and math.isclose(got, lr_min + 0.5 * (lr_max - lr_min) * (
                        1 + math.cos(math.pi * min(step, T) / T)), rel_tol=1e-9):
                    why = " (the cosine runs over the T − W steps after the warm-up)"
                elif step > T:
                    why = " (after total_steps the rate stays at lr_min)"
                raise CheckFailure(f"warmup {W}, total {T}, lr_max {lr_max:g}, lr_min "
                                   f"{lr_min:g}: at step {step} expected {want:.10g}, got "
                                   f"{got:.10g}{why}")
    return "η_max·(s+1)/W, then η_min + ½(η_max − η_min)(1 + cos(π(s − W)/(T − W)))"


@exercise("ch16-clip", forbid=CLIP_CALLS,
          because="compute the global norm and the scale yourself")
def check_ch16_clip(clip_global_norm, *, generator=None):
    """clip_global_norm(grads, max_norm) → (clipped grads, norm before clipping) against
    mathref.optim.clip_grad_norm_."""
    expect_callable(clip_global_norm, "clip_global_norm(grads, max_norm)")
    from mathref.optim import clip_grad_norm_
    g = _gen(generator, 1609)
    # the last case: a global norm drawn in 1e4 … 3e4, clipped, where the ε = 1e-6 changes the
    # factor by 3e-11 … 1e-10 of itself, above the comparison's 1e-12 (the fifth red team: an ε
    # dropped for norms ≥ 1e3 passed norms of a few units)
    for shapes, scale, max_norm in ((((3, 4), (5,), (2, 2)), 1.0, 1.0),
                                    (((4,), (4, 4)), 0.05, 1.0),
                                    (((6, 2), (3,)), 3.0, 0.5),
                                    (((2,),), 1.0, 100.0),
                                    (((3,), (2, 2)), None, 1.0)):
        if scale is None:
            grads = [_randn(g, *s) for s in shapes]
            norm = float(torch.sqrt(sum((gr * gr).sum() for gr in grads)))
            target = 10 ** float(torch.empty(()).uniform_(4, math.log10(3e4), generator=g))
            grads = [gr * (target / norm) for gr in grads]
        else:
            grads = [_randn(g, *s, scale=scale) for s in shapes]
        params = [torch.nn.Parameter(torch.zeros(s, dtype=torch.float64)) for s in shapes]
        for p, gr in zip(params, grads):
            p.grad = gr.clone()
        result = clip_global_norm([gr.clone() for gr in grads], max_norm)
        want_norm = clip_grad_norm_(params, max_norm)   # after: no frame holds it before
        expect(isinstance(result, (tuple, list)) and len(result) == 2,
               "clip_global_norm must return the pair (clipped_grads, total_norm)")
        clipped, total = result
        case = f"{len(shapes)} tensors of global norm {float(want_norm):.4g}, max_norm {max_norm:g}"
        expect(isinstance(clipped, (tuple, list)) and len(clipped) == len(grads),
               f"{case}: return a list of {len(grads)} clipped gradients")
        expect((isinstance(total, numbers.Real) and not isinstance(total, bool))
               or (isinstance(total, torch.Tensor) and total.numel() == 1
                   and not total.is_complex()),
               f"total_norm must be a number or a one-element tensor, got {type(total).__name__}")
        total = float(total)
        expect(math.isclose(total, float(want_norm), rel_tol=1e-9),
               f"{case}: expected the global norm √(Σ‖g‖²) = {float(want_norm):.10g} (before "
               f"clipping), got {total:.10g}")
        for i, (got, p) in enumerate(zip(clipped, params)):
            per_tensor = grads[i] * min(1.0, max_norm / (grads[i].norm().item() + 1e-6))
            no_eps = grads[i] * min(1.0, max_norm / float(want_norm))
            _close(got, p.grad, f"{case}: gradient {i}", tol=1e-12, diagnose=lambda out: (
                " (clip all gradients by one common factor computed from the global norm, "
                "not each by its own norm)" if torch.allclose(out, per_tensor, rtol=1e-12,
                                                               atol=0) else
                " (the factor is max_norm/(‖g‖ + 1e-6): the ε = 1e-6 is missing)"
                if torch.allclose(out, no_eps, rtol=1e-12, atol=0) else
                " (scale by min(1, max_norm/(‖g‖ + 1e-6)): one factor for all tensors, and "
                "gradients whose global norm is below max_norm stay as they are)"))
    return "g ← g·min(1, c/(‖g‖ + ε)), one factor for all tensors"


def _decoder(model, uniforms, prompt_len):
    """The ``step`` and ``draw`` handed to ``generate``, as plain functions of torch alone (the
    grader sends a checker's function to the worker as its code and the values it closes over).

    ``step(ids)`` runs mathref's GPT on the new ids [B, t] with its KVCache and returns their
    logits [B, t, V]; the first call takes the whole prompt (``prompt_len`` positions), every
    later call one position. ``draw(probs)``
    returns the next ids by the inverse of the cumulative distribution at the uniforms drawn
    by the checker, ``uniforms[i]`` for the i-th call, so the checker can replay the draws. In
    this process both record what they were given in ``record``."""
    from mathref.gpt import KVCache
    record = {"cache": KVCache(model.config.n_layer), "fed": 0, "calls": 0, "probs": [],
              "ids": []}
    context = model.config.block_size

    def step(ids):
        if not (isinstance(ids, torch.Tensor) and ids.dim() == 2):
            raise ValueError("call step with a [B, t] tensor of token ids")
        if not record["calls"] and ids.shape[1] != prompt_len:
            raise ValueError(f"the first call to step was given {ids.shape[1]} "
                             f"position{'s' if ids.shape[1] != 1 else ''}: feed "
                             f"the whole prompt ({prompt_len} positions) in one call, then only "
                             f"the newest token [B, 1] per call")
        if record["calls"] and ids.shape[1] != 1:
            raise ValueError(f"step was given {ids.shape[1]} positions after the prompt: feed "
                             f"the prompt once, then only the newest token [B, 1] per call "
                             f"(the cache holds the rest)")
        record["calls"] += 1
        record["fed"] += ids.shape[1]
        if record["fed"] > context:
            raise ValueError(f"you fed {record['fed']} positions, more than this model's "
                             f"context {context}")
        with torch.no_grad():
            logits, _ = model(ids.long(), cache=record["cache"])
        return logits

    def draw(probs):
        if not (isinstance(probs, torch.Tensor) and probs.dim() == 2):
            raise ValueError("call draw with the probabilities [B, V] of the next token")
        if probs.dtype != torch.float64:
            raise ValueError(f"the probabilities passed to draw are {probs.dtype}, but the "
                             f"logits are float64: keep the logits' dtype (float32 rounding, "
                             f"about 1e-7, is more than the check allows)")
        probs = probs.detach()
        if bool(probs.isnan().any()) or not bool((probs.sum(-1) > 0).all()):
            raise ValueError("some row passed to draw is empty or NaN: the nucleus kept no "
                             "token. Keep the token that crosses top_p: drop a token only when "
                             "the mass ranked before it is ≥ top_p (then the most likely token "
                             "always stays)")
        if not (bool((probs >= 0).all()) and bool(((probs.sum(-1) - 1).abs() < 1e-9).all())):
            raise ValueError("the probabilities passed to draw must be ≥ 0 and sum to 1 in each "
                             "row (renormalize after cutting the nucleus)")
        i = len(record["ids"])
        if i >= len(uniforms):
            raise ValueError(f"draw was called more than once per new token ({len(uniforms)})")
        ids = _inverse_cdf(probs, uniforms[i])
        record["probs"].append(probs.clone())    # a decoder may reuse its buffer next step
        record["ids"].append(ids)
        return ids

    return step, draw, record


def _inverse_cdf(probs, u):
    """The ids [B] at which the cumulative sums of ``probs`` [B, V] first reach ``u`` [B]."""
    cdf = probs.cumsum(-1)
    return torch.searchsorted(cdf, u[:, None].to(cdf.dtype)).squeeze(-1).clamp(
        max=probs.shape[-1] - 1)


def _reference_probs(last, temperature, top_k, top_p):
    """The sampling distribution of the statement, from the last logits [B, V] (float64)."""
    last = last / temperature
    if top_k is not None:
        kth = torch.topk(last, top_k, dim=-1).values[:, -1:]
        last = last.masked_fill(last < kth, float("-inf"))
    probs = last.softmax(-1)
    if top_p is not None:
        sp, order = probs.sort(dim=-1, descending=True)
        sp = sp.masked_fill(sp.cumsum(-1) - sp >= top_p, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sp)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def _probs_why(got, last, temperature, top_k, top_p):
    variants = ((_reference_probs(last * temperature ** 2, temperature, top_k, top_p),
                 "divide the logits by the temperature, do not multiply them"),
                (_reference_probs(last, temperature, None, top_p), "apply top_k first: keep "
                 "the top_k largest logits, then cut the nucleus of that renormalized "
                 "distribution (skipping top_k, or cutting the nucleus before it, gives this)"),
                (_reference_probs(last, temperature, top_k, None), "cut the nucleus: keep the "
                 "tokens whose preceding mass is below top_p, then renormalize"),
                (_reference_probs(last, 1.0, top_k, top_p), "divide the logits by the "
                                                            "temperature"))
    return _diagnosis(got, variants)


def _generate_where_run(generate, step, draw, prompt, n, temperature, top_k, top_p):
    """Runs where the answer runs (in the grader, in the student's process, sent there as code
    by mathref.grade.rpc.apply): ``generate`` with the checker's ``step`` and ``draw``, then
    the ids it returned with what ``draw`` recorded there (the distributions it was given and
    the ids it drew), so that the grader compares the same things as the notebook."""
    got = generate(step, prompt, n, temperature, top_k, top_p, draw)
    record = draw.__closure__[draw.__code__.co_freevars.index("record")].cell_contents
    return _copied(got), record["probs"], record["ids"]


@exercise("ch16-generate", forbid=GENERATE_CALLS,
          because="pick the next token or build its distribution yourself")
def check_ch16_generate(generate, *, generator=None):
    """generate(step, prompt, max_new_tokens, temperature, top_k, top_p, draw): greedy tokens
    and sampling distributions against a float64 reference along the learner's own sequence,
    the prompt fed once and then one token per call."""
    expect_callable(generate, "generate(step, prompt, max_new_tokens, temperature=0.0, "
                              "top_k=None, top_p=None, draw=None)")
    apply = remote_apply(generate)
    remote = apply is not None

    def run(*args):         # the same comparisons in the notebook and under the grader
        return apply(_generate_where_run, *args) if remote else _generate_where_run(generate,
                                                                                    *args)
    g = _gen(generator, 1610)
    for B, T, n, temperature, top_k, top_p in ((2, 3, 8, 0.0, None, None),
                                               (1, 5, 6, 0.0, None, None),
                                               (3, 2, 10, 1.0, 4, None),
                                               (2, 4, 8, 0.7, None, 0.8),
                                               (2, 3, 8, 1.3, 5, 0.9),
                                               # no new token: the prompt comes back as it is
                                               # (the fifth red team: a first token picked
                                               # before the loop passed)
                                               (2, 4, 0, 0.0, None, None)):
        model = _gpt_case(g, 13, 16, 2, 2).eval()
        with torch.no_grad():
            model.lm_head.weight.mul_(3.0)        # peaked distributions: top-k and top-p bite
        prompt = torch.randint(13, (B, T), generator=g)
        uniforms = torch.rand(n, B, generator=g, dtype=torch.float64)
        step, draw, _ = _decoder(model, uniforms, T)
        got, probs_given, ids_drawn = run(step, draw, prompt.clone(), n, temperature, top_k,
                                          top_p)
        case = (f"B={B}, prompt length {T}, {n} new tokens, temperature {temperature:g}, "
                f"top_k={top_k}, top_p={top_p}")
        expect(isinstance(got, torch.Tensor) and tuple(got.shape) == (B, T + n),
               f"{case}: return the ids [B, T + max_new_tokens] = {[B, T + n]}, got "
               f"{list(getattr(got, 'shape', [])) or type(got).__name__}")
        expect(not (got.is_floating_point() or got.is_complex()),
               f"{case}: return the ids as an integer tensor (like the prompt, torch.long), got "
               f"{got.dtype}: ids of a float dtype cannot index the embedding")
        got = got.long()
        expect(torch.equal(got[:, :T], prompt), f"{case}: the output starts with the prompt")
        with torch.no_grad():
            logits, _ = model(got[:, :-1])        # the reference along your sequence
        if temperature == 0:
            expect(not ids_drawn, f"{case}: with temperature 0 pick the argmax; do not call "
                                      f"draw")
            want = logits[:, T - 1:].argmax(-1)
            bad = (got[:, T:] != want).nonzero()
            if len(bad):
                row, i = bad[0].tolist()
                raise CheckFailure(f"{case}: new token {i} of row {row} is {int(got[row, T + i])}"
                                   f", but the argmax of the logits after the tokens before it is "
                                   f"{int(want[row, i])}")
            continue
        # the distributions given to draw (recorded where the answer ran, in the notebook or
        # in the grader's worker) are compared, then each token is replayed from the reference
        # distribution with the same uniform
        expect(isinstance(ids_drawn, list) and isinstance(probs_given, list)
               and len(ids_drawn) == n == len(probs_given),
               f"{case}: call draw exactly once per new token ({n} times), got "
               f"{len(ids_drawn) if isinstance(ids_drawn, list) else '?'} calls")
        for i in range(n):
            last = logits[:, T - 1 + i]
            want = _reference_probs(last, temperature, top_k, top_p)
            probs = probs_given[i]
            expect(isinstance(probs, torch.Tensor) and probs.shape == want.shape,
                   f"{case}: pass draw the probabilities [B, V] = {list(want.shape)} of new "
                   f"token {i}")
            if not torch.allclose(probs, want, rtol=1e-8, atol=1e-12):
                raise CheckFailure(f"{case}: the probabilities of new token {i} differ from "
                                   f"the statement's by up to "
                                   f"{(probs - want).abs().max().item():.3g}"
                                   + _probs_why(probs, last, temperature, top_k, top_p))
            expect(isinstance(ids_drawn[i], torch.Tensor)
                   and torch.equal(got[:, T + i], ids_drawn[i].long()),
                   f"{case}: new token {i} must be the id that draw returned")
            expected = _inverse_cdf(want, uniforms[i])
            bad = (got[:, T + i] != expected).nonzero()
            if len(bad):
                row = int(bad[0])
                raise CheckFailure(f"{case}: new token {i} of row {row} is "
                                   f"{int(got[row, T + i])}, but the statement's distribution "
                                   f"gives {int(expected[row])} for the same draw (divide by the "
                                   f"temperature, keep the top_k logits, cut the nucleus, "
                                   f"renormalize, and pass the result to draw)")
    return "prompt fed once, then one token per step through the KV cache"


# ---- one training step ----------------------------------------------------------------------
def _plain_adamw(p, g, m, v, t, lr, betas, eps, weight_decay):
    p = p * (1 - lr * weight_decay)
    m = betas[0] * m + (1 - betas[0]) * g
    v = betas[1] * v + (1 - betas[1]) * g * g
    return p - lr * (m / (1 - betas[0] ** t)) / ((v / (1 - betas[1] ** t)).sqrt() + eps), m, v


def _plain_clip(grads, max_norm):
    total = torch.sqrt(sum((g * g).sum() for g in grads))
    scale = min(1.0, max_norm / (float(total) + 1e-6))
    return [g * scale for g in grads], total


def _plain_schedule(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    if step > total_steps:
        return lr_min
    return lr_min + 0.5 * (lr_max - lr_min) * (
        1 + math.cos(math.pi * (step - warmup_steps) / (total_steps - warmup_steps)))


TRAIN_PARTS = {"adamw": _plain_adamw, "clip": _plain_clip, "schedule": _plain_schedule}
TRAIN_CALLS = OPTIMIZER_CALLS + SCHEDULE_CALLS + CLIP_CALLS + (
    "mathref.train.train", "mathref.train.lr_at", "mathref.train.configure_optimizer")


def _tiny_logits(params, x):
    """A small language model for the check: embedding [V, d], a tanh layer [h, d] with a gain
    [h], a head [V, h]."""
    emb, w, gain, head = params
    return (torch.tanh(emb[x] @ w.T) * gain) @ head.T


def _tiny_logits_gain_first(params, x):
    """The same model with its parameters in another order: the gain, which takes no weight
    decay, is told by its shape, not by its place in the list (chapter 16's attack read: a step
    that skipped decay for params[2] passed)."""
    gain, emb, head, w = params
    return (torch.tanh(emb[x] @ w.T) * gain) @ head.T


def _copied(value):
    """``value`` with its tensors copied (detached), in lists and tuples as returned."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if type(value) in (list, tuple):
        return type(value)(_copied(v) for v in value)
    return value


class _OneAtATime:
    """mathref's steps as a plain iterator, no generator: ``begin(s)`` draws step s's batch and
    returns what it starts from; ``finish(s)`` computes mathref's step s, only when the next
    start is asked for, after the answer's step s has returned. An answer that advances it is
    refused at the call of ``advance``, an ordinary frame (a refusal raised while a generator
    resumed crashed the interpreter at random on the floor torch 2.9)."""

    def __init__(self, count, begin, finish):
        self._count, self._begin, self._finish = count, begin, finish
        self._next = 0

    def __iter__(self):
        return self

    def __next__(self):
        return self.advance()

    def advance(self):
        if self._next:
            self._finish(self._next - 1)
        if self._next == self._count:
            raise StopIteration
        self._next += 1
        return self._begin(self._next - 1)


def _steps_where_run(train_step, logits_fn, weights, batches, moments, cfg, parts):
    """Runs where the answer runs (in the grader, in the student's process, sent there as code
    by mathref.grade.rpc.apply): the checked steps of ``train_step`` on one list of leaves, as
    the payoff's loop passes the same nn.Parameters to every step. Before step s the leaves
    take mathref's weights ``weights[s]`` (copied into them, so whatever an earlier step left
    in their ``.grad`` is still there). Returns, for each step, what train_step returned (its
    tensors copied) and the leaves' ``.grad`` after it (None where empty). In the notebook,
    ``weights`` is instead an iterator of ``(weights[s], batch, moments)`` that computes mathref's
    step s only after the answer's step s has returned (``batches`` and ``moments`` None)."""
    inputs = weights if batches is None else zip(weights, batches, moments)
    leaves = None
    results, left = [], []
    for step, (start, (x, y), (m, v)) in enumerate(inputs):
        if leaves is None:
            leaves = [w.detach().clone().requires_grad_(True) for w in start]
        with torch.no_grad():
            for leaf, w in zip(leaves, start):
                leaf.copy_(w)
        result = train_step(logits_fn, leaves, x, y, [t.clone() for t in m],
                            [t.clone() for t in v], step, cfg, dict(parts))
        results.append(_copied(result))
        left.append([None if leaf.grad is None else leaf.grad.detach().clone()
                     for leaf in leaves])
    return results, left


@exercise("ch16-train-step", forbid=TRAIN_CALLS,
          because="write the step from your parts: the loss, its gradients, the clipping, the "
                  "rate and the AdamW update")
def check_ch16_train_step(train_step, *, generator=None):
    """train_step(logits_fn, params, x, y, m, v, step, cfg, parts) → (params, m, v, loss) for
    six consecutive steps (warm-up, cosine, steps past max_steps, clipping that bites or not,
    betas other than the default) against mathref's AdamW, clip_grad_norm_ and warmup_cosine on the same weights
    and batch, in float64. The six steps get the same leaves, as in the payoff's loop, so a
    step that lets loss.backward() add into the previous step's .grad is caught."""
    expect_callable(train_step, "train_step(logits_fn, params, x, y, m, v, step, cfg, parts)")
    from mathref.optim import AdamW, clip_grad_norm_, warmup_cosine
    from mathref.train import TrainConfig
    g = _gen(generator, 1611)
    V, B, T = 7, 3, 5
    apply = remote_apply(train_step)
    # case 2 reorders the parameters (gain, embedding, head, matrix) and gives them other sizes:
    # an embedding of width 1 (7 entries), a 128 × 1 matrix (128) beside a gain of 128 (chapter
    # 16's red teams: decay by position, by size (more than 64 entries: the fifth) or by a
    # hard-coded shape passed the same shapes), and other values (look_alike). Case 1 clips at
    # 0.005 (the fifth red team: a threshold raised to at least 0.01 passed 0.05 and 100); case 2's
    # schedule ends at step 4 and its six steps run past it (the fifth red team: the schedule
    # given step % max_steps passed steps 0 … 5 of a schedule of 6)
    for max_norm, weight_decay, betas, logits_fn, order, d, h, look_alike, max_steps in (
            (0.005, 0.1, (0.85, 0.95), _tiny_logits, (0, 1, 2, 3), 6, 6, False, 6),
            (100.0, 0.3, (0.8, 0.999), _tiny_logits_gain_first, (2, 0, 3, 1), 1, 128, True, 4)):
        cfg = TrainConfig(max_steps=max_steps, warmup_steps=2, lr=0.05, min_lr=0.005,
                          weight_decay=weight_decay, grad_clip=max_norm, batch_size=B,
                          block_size=T, betas=betas, progress=False)
        n_steps = 6
        emb = _randn(g, V, d)
        if look_alike:   # the matrix drawn near 1, the gain around 0: a rule that reads the
            # values ("all positive", "mean near 1") picks the wrong one (the third red team)
            w, gain = 1 + 0.3 * _randn(g, h, d), 0.3 * _randn(g, h)
        else:
            w, gain = _randn(g, h, d, scale=0.5), 1 + 0.3 * _randn(g, h)
        ref = [torch.nn.Parameter(t) for t in (emb, w, gain, _randn(g, V, h))]
        ref = [ref[i] for i in order]
        opt = AdamW([{"params": [p for p in ref if p.dim() >= 2], "weight_decay": weight_decay},
                     {"params": [p for p in ref if p.dim() < 2], "weight_decay": 0.0}],
                    lr=cfg.lr, betas=cfg.betas, eps=1e-8)
        m = [torch.zeros_like(p) for p in ref]
        v = [torch.zeros_like(p) for p in ref]
        weights, batches, moments, steps = [], [], [], []

        def begin(step):
            """What mathref's step ``step`` starts from: its weights, batch and moments."""
            x = torch.randint(V, (B, T), generator=g)
            y = torch.randint(V, (B, T), generator=g)
            weights.append([p.detach().clone() for p in ref])
            batches.append((x, y))
            moments.append((m, v))
            return weights[-1], batches[-1], moments[-1]

        def finish(step):
            """mathref's step ``step``. In the notebook it runs after the answer's step has
            returned, so no frame above the answer holds the weights and moments it should
            return (the delta read's N2: an answer read them through a traceback); an answer
            that advances the iterator is refused by the gate, as the checkers' own code."""
            nonlocal m, v
            x, y = batches[step]
            lr = warmup_cosine(step, cfg.warmup_steps, cfg.max_steps, cfg.lr, cfg.min_lr)
            for group in opt.param_groups:
                group["lr"] = lr
            loss = F.cross_entropy(logits_fn(ref, x).flatten(0, 1), y.flatten())
            raw = torch.autograd.grad(loss, ref)
            for p, gr in zip(ref, raw):
                p.grad = gr.clone()             # clipped in place below; raw stays unclipped
            norm = float(clip_grad_norm_(ref, max_norm))
            opt.step()
            m = [opt.state[p]["exp_avg"].clone() for p in ref]
            v = [opt.state[p]["exp_avg_sq"].clone() for p in ref]
            steps.append(dict(lr=lr, loss=loss.detach(), raw=raw, norm=norm, m=m, v=v,
                              clipped=[p.grad.clone() for p in ref],
                              params=[p.detach().clone() for p in ref]))

        # the learner's six steps, on one list of leaves (in the student's process under the
        # grader: .grad never crosses its channel, and mathref's six steps are computed first)
        if apply is not None:
            for _ in _OneAtATime(n_steps, begin, finish):
                pass
            ran = apply(_steps_where_run, logits_fn, weights, batches, moments, cfg,
                        dict(TRAIN_PARTS))
        else:
            ran = _steps_where_run(train_step, logits_fn, _OneAtATime(n_steps, begin, finish),
                                   None, None, cfg, dict(TRAIN_PARTS))
        expect(isinstance(ran, (tuple, list)) and len(ran) == 2,
               "internal: the steps' results did not come back from your process")
        results, left = ran
        b1, b2 = cfg.betas
        for step, (result, want) in enumerate(zip(results, steps)):
            expect(isinstance(result, (tuple, list)) and len(result) == 4,
                   "train_step must return (params, m, v, loss)")
            got_p, got_m, got_v, got_loss = result
            m, v = moments[step]
            raw, lr, norm = want["raw"], want["lr"], want["norm"]
            case = (f"step {step} (rate {lr:.4g}, gradient norm {norm:.3g}, max_norm "
                    f"{max_norm:g}, weight_decay {weight_decay:g}, betas {betas})")
            try:
                got_loss = float(got_loss.detach() if isinstance(got_loss, torch.Tensor)
                                 else got_loss)
            except (TypeError, ValueError, RuntimeError):
                raise CheckFailure(f"{case}: the loss must be a number or a one-element "
                                   f"tensor") from None
            expect(math.isclose(got_loss, float(want["loss"]), rel_tol=1e-9),
                   f"{case}: the loss is {got_loss:.10g}, mathref's cross-entropy of the logits "
                   f"is {float(want['loss']):.10g} (the mean over all B·T positions)")
            names = [("the embedding", "the tanh layer's matrix", "the gain (1-D: not decayed)",
                      "the head")[i] for i in order]
            for what, got in (("parameters", got_p), ("m", got_m), ("v", got_v)):
                expect(isinstance(got, (tuple, list)) and len(got) == 4,
                       f"{case}: return a list of 4 tensors for {what}")
            clip_hint = ("m and v are built from the clipped gradients: clip all of them by one "
                         "factor from their global norm, then update the moments with β₁, β₂")
            # what loss.backward() gives when the previous step's gradients are still in .grad
            before = left[step - 1] if step else [None] * 4
            stale = None
            if any(gr is not None for gr in before):
                summed = [r if b is None else r + b for r, b in zip(raw, before)]
                total = float(torch.sqrt(sum((s * s).sum() for s in summed)))
                stale = [s * min(1.0, max_norm / (total + 1e-6)) for s in summed]
            stale_why = ("the gradients add up across steps: loss.backward() adds into p.grad, "
                         "and your step left the previous step's gradients there (the payoff "
                         "passes the same parameters to every step). Take the gradients with "
                         "torch.autograd.grad(loss, params), which stores nothing in .grad, or "
                         "clear .grad once you have used them (p.grad.zero_())")
            fixed = ("use cfg.betas (here " + f"{betas}" + "), not a fixed pair")
            for i, name in enumerate(names):
                clipped = want["clipped"][i]
                alone = raw[i] * min(1.0, max_norm / (float(raw[i].norm()) + 1e-6))
                m_of = lambda gr, beta: beta * m[i] + (1 - beta) * gr           # noqa: E731
                v_of = lambda gr, beta: beta * v[i] + (1 - beta) * gr * gr      # noqa: E731
                m_mistakes = ((want["v"][i], "you returned v in m's place: return "
                                             "(params, m, v, loss)"),
                              (m_of(clipped, b2), "m's decay is β₁ = cfg.betas[0], not β₂"),
                              (m_of(raw[i], b1), clip_hint + "; these are the unclipped ones"),
                              (m_of(alone, b1), clip_hint + "; this tensor was clipped alone"),
                              (m_of(clipped, 0.9), fixed))
                v_mistakes = ((want["m"][i], "you returned m in v's place: return "
                                             "(params, m, v, loss)"),
                              (v_of(clipped, b1), "v's decay is β₂ = cfg.betas[1], not β₁"),
                              (v_of(raw[i], b2), clip_hint + "; these are the unclipped ones"),
                              (v_of(alone, b2), clip_hint + "; this tensor was clipped alone"),
                              (v_of(clipped, 0.99), fixed), (v_of(clipped, 0.999), fixed))
                if stale is not None:
                    m_mistakes = ((m_of(stale[i], b1), stale_why),) + m_mistakes
                    v_mistakes = ((v_of(stale[i], b2), stale_why),) + v_mistakes
                _close(got_m[i], want["m"][i], f"{case}: m of {name}",
                       diagnose=lambda out: _diagnosis(out, m_mistakes))
                _close(got_v[i], want["v"][i], f"{case}: v of {name}",
                       diagnose=lambda out: _diagnosis(out, v_mistakes))
                # with the decay left out (or put in) the new weight differs by exactly ηλθ
                shift = lr * weight_decay * weights[step][i]
                p_mistakes = (((want["params"][i] + shift, f"{name} was not decayed: decay every "
                                "2-D weight by cfg.weight_decay, the embedding and the head "
                                "included (minGPT exempts nn.Embedding; this course does not)"),)
                              if weights[step][i].dim() >= 2 else
                              ((want["params"][i] - shift, f"{name} was decayed: 1-D weights "
                                "get weight_decay 0"),))
                _close(got_p[i], want["params"][i], f"{case}: {name}", tol=1e-12,
                       diagnose=lambda out: _diagnosis(out, p_mistakes) or (
                           " (the rate of step s is warmup_cosine_lr(s, …) and AdamW's t is "
                           "s + 1; clip the gradients by their global norm before the update; "
                           "decay every 2-D weight, the embedding included, and not the 1-D "
                           "gains)"))
    return "loss, gradients, global-norm clip, scheduled AdamW: six steps equal to mathref's"
