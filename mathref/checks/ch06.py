"""Checkers for chapter 6: optimizers, schedules and clipping."""
import math

import torch

from mathref.checks.core import exercise, expect, expect_callable, expect_close, expect_tensor_close

__all__ = ["check_ch06_warmup_cosine", "check_ch06_clip_global_norm", "check_ch06_adam_step",
           "check_ch06_adamw_step", "check_ch06_newton_schulz"]


@exercise("ch06-warmup-cosine")
def check_ch06_warmup_cosine(lr_at):
    """lr_at(step, warmup_steps, total_steps, lr_max, lr_min): linear warm-up, cosine to a floor."""
    expect_callable(lr_at, "lr_at(step, warmup_steps, total_steps, lr_max, lr_min)")
    for W, T, hi, lo in ((10, 110, 3e-4, 3e-5), (4, 20, 1.0, 0.0), (100, 1100, 6e-4, 6e-5)):
        for step in sorted({0, 1, W // 2, W - 1, W, W + 1, (W + T) // 2, T - 1, T, T + 7}):
            if step < W:
                want = hi * (step + 1) / W
            elif step > T:
                want = lo
            else:
                want = lo + 0.5 * (hi - lo) * (1 + math.cos(math.pi * (step - W) / (T - W)))
            expect_close(lr_at(step, W, T, hi, lo), want,
                         f"lr at step {step} (warm-up {W}, total {T}, max {hi:g}, min {lo:g})",
                         rtol=1e-9, atol=1e-15)
    return "warm-up (step + 1)/W, cosine over T − W steps, floor η_min"


def _torch_clipped(grads, max_norm):
    params = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.clone()
    torch.nn.utils.clip_grad_norm_(params, max_norm)
    return [p.grad for p in params]


@exercise("ch06-clip-global-norm")
def check_ch06_clip_global_norm(clip_global_norm):
    """clip_global_norm(grads, max_norm) returns the list of gradients scaled by min(1, c/‖g‖)."""
    expect_callable(clip_global_norm, "clip_global_norm(grads, max_norm)")
    gen = torch.Generator().manual_seed(6)
    cases = [([torch.tensor([3.0, 0.0]), torch.tensor([[0.0, 4.0]])], 1.0),      # norm 5
             ([torch.tensor([3.0, 0.0]), torch.tensor([[0.0, 4.0]])], 10.0),     # untouched
             ([torch.tensor([0.1]), 10 * torch.ones(3, 3)], 2.0),
             ([torch.randn(4, 5, generator=gen, dtype=torch.float64),
               torch.randn(7, generator=gen, dtype=torch.float64) * 5], 3.0)]
    for grads, c in cases:
        originals = [g.clone() for g in grads]
        got = clip_global_norm([g.clone() for g in grads], c)
        want = _torch_clipped(originals, c)
        expect(isinstance(got, (list, tuple)) and len(got) == len(want),
               f"expected a list of {len(want)} tensors, got {type(got).__name__}")
        norm = math.sqrt(sum(float((g ** 2).sum()) for g in originals))
        for i, (a, b) in enumerate(zip(got, want)):
            a = torch.as_tensor(a, dtype=b.dtype)
            expect(a.shape == b.shape, f"gradient {i}: shape {tuple(a.shape)}, expected "
                                       f"{tuple(b.shape)}")
            expect(torch.allclose(a, b, rtol=1e-5, atol=1e-7),
                   f"global norm {norm:.4g}, max_norm {c:g}: gradient {i} should be "
                   f"{[round(x, 6) for x in b.flatten()[:3].tolist()]}..., got "
                   f"{[round(x, 6) for x in a.flatten()[:3].tolist()]}...")
    return "one factor min(1, c/‖g‖) for all tensors: the direction is kept"


def _sequence(seed, n=25):
    gen = torch.Generator().manual_seed(seed)
    target = torch.randn(5, generator=gen, dtype=torch.float64)
    scale = torch.tensor([1e-3, 0.1, 1.0, 10.0, 300.0], dtype=torch.float64)
    return target, scale


def _run_step(step_fn, torch_cls, kwargs, extra_args, seed, steps=25):
    """Drive the student's one-step function and torch's optimizer on the same loss."""
    target, scale = _sequence(seed)
    theta0 = torch.linspace(-1, 1, 5, dtype=torch.float64)
    ref = theta0.clone().requires_grad_()
    opt = torch_cls([ref], **kwargs)
    theta, m, v = theta0.clone(), torch.zeros(5, dtype=torch.float64), torch.zeros(5, dtype=torch.float64)
    for t in range(1, steps + 1):
        grad = scale * (theta - target) ** 3 + 0.5 * scale * torch.sin(3.0 * t + theta)
        out = step_fn(theta.clone(), grad.clone(), m.clone(), v.clone(), t, *extra_args)
        expect(isinstance(out, (tuple, list)) and len(out) == 3,
               "expected the tuple (theta, m, v) back")
        theta, m, v = (torch.as_tensor(x, dtype=torch.float64) for x in out)
        ref.grad = (scale * (ref.detach() - target) ** 3
                    + 0.5 * scale * torch.sin(3.0 * t + ref.detach()))
        opt.step()
        state = opt.state[ref]
        for name, mine, theirs in (("theta", theta, ref.detach()),
                                   ("m", m, state["exp_avg"]), ("v", v, state["exp_avg_sq"])):
            bad = ~torch.isclose(mine, theirs, rtol=1e-9, atol=1e-12)
            if bad.any():
                i = int(bad.nonzero()[0])
                raise_msg = (f"{name} after step t={t} ({kwargs}): coordinate {i} should be "
                             f"{theirs[i].item():.10g}, got {mine[i].item():.10g}")
                expect(False, raise_msg)


@exercise("ch06-adam-step")
def check_ch06_adam_step(adam_step):
    """adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps) -> (theta, m, v), as torch.optim.Adam."""
    expect_callable(adam_step, "adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps)")
    for seed, (lr, b1, b2, eps) in enumerate([(1e-2, 0.9, 0.999, 1e-8), (0.1, 0.8, 0.95, 1e-2),
                                              (3e-3, 0.5, 0.9, 1e-6)]):
        _run_step(adam_step, torch.optim.Adam, dict(lr=lr, betas=(b1, b2), eps=eps),
                  (lr, b1, b2, eps), seed)
    return "25 steps equal to torch.optim.Adam, bias correction included"


@exercise("ch06-adamw-step")
def check_ch06_adamw_step(adamw_step):
    """adamw_step(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay) -> (theta, m, v),
    as torch.optim.AdamW."""
    expect_callable(adamw_step, "adamw_step(theta, grad, m, v, t, lr, beta1, beta2, eps, "
                                "weight_decay)")
    for seed, (lr, b1, b2, eps, wd) in enumerate([(1e-2, 0.9, 0.999, 1e-8, 0.1),
                                                  (0.1, 0.8, 0.95, 1e-6, 0.5),
                                                  (3e-3, 0.9, 0.99, 1e-8, 2.0)]):
        _run_step(adamw_step, torch.optim.AdamW,
                  dict(lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd),
                  (lr, b1, b2, eps, wd), seed)
    return "θ ← (1 − ηλ)θ − η·m̂/(√v̂ + ε), equal to torch.optim.AdamW"


@exercise("ch06-newton-schulz")
def check_ch06_newton_schulz(orthogonalize):
    """orthogonalize(G, steps): X₀ = G/‖G‖_F, then ``steps`` quintic steps; checked against the
    closed form U p^k(Σ/‖G‖_F) Vᵀ from the SVD, for wide, tall and square G."""
    expect_callable(orthogonalize, "orthogonalize(G, steps)")
    a, b, c = 3.4445, -4.7750, 2.0315
    gen = torch.Generator().manual_seed(0)
    for shape in ((4, 7), (7, 4), (5, 5)):
        G = torch.randn(*shape, generator=gen, dtype=torch.float64)
        U, S, Vh = torch.linalg.svd(G, full_matrices=False)
        s = S / torch.linalg.matrix_norm(G)
        for steps in range(4):
            expect_tensor_close(orthogonalize(G.clone(), steps), U @ torch.diag(s) @ Vh,
                                f"G of shape {shape}, {steps} step(s), against U·p^{steps}(Σ/‖G‖_F)·Vᵀ",
                                rtol=0, atol=1e-9)
            s = a * s + b * s ** 3 + c * s ** 5
    return "X₀ = G/‖G‖_F, X ← aX + b(XXᵀ)X + c(XXᵀ)²X: the singular values follow p, the vectors stay"
