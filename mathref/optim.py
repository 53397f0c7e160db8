"""Optimizers, learning-rate schedules and gradient clipping, written out plainly. See chapter 6.

Every optimizer here is a ``torch.optim.Optimizer`` subclass that follows PyTorch's own
conventions, so it can replace ``torch.optim.SGD``, ``RMSprop``, ``Adam`` or ``AdamW`` in any
training loop, and the tests check that it produces the same parameters step by step:

- SGD with momentum uses v ← βv + g, θ ← θ − ηv (the velocity is not scaled by 1 − β);
- RMSProp and Adam add ε *outside* the square root: θ ← θ − η m̂/(√v̂ + ε);
- Muon orthogonalizes the momentum of each weight matrix (``torch.optim.Muon`` with
  ``adjust_lr_fn="match_rms_adamw"``) and runs AdamW on the other parameters;
- weight decay λ is in PyTorch units: ``Adam(weight_decay=λ)`` adds λθ to the gradient (L2),
  ``AdamW(weight_decay=λ)`` multiplies θ by (1 − ηλ) before the Adam step (decoupled).
"""
import math

import torch

from mathref._validation import check_int, check_number, check_tensor

__all__ = ["SGD", "RMSProp", "Adam", "AdamW", "newton_schulz", "Muon", "warmup_cosine",
           "inverse_sqrt", "clip_grad_norm_", "decay_param_groups", "optimize_path"]


def _check_hyper(name, value, low=0.0, high=None, high_open=False):
    check_number(name, value, min=low, max=high, max_open=high_open)   # NaN and ±inf refused


def _check_adam_hyper(lr, betas, eps, weight_decay):
    _check_hyper("lr", lr)
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"betas must be a pair (beta1, beta2), got {betas!r}")
    _check_hyper("betas[0]", betas[0], 0.0, 1.0, high_open=True)
    _check_hyper("betas[1]", betas[1], 0.0, 1.0, high_open=True)
    _check_hyper("eps", eps)
    _check_hyper("weight_decay", weight_decay)


def _loss_of(closure):
    """The ``closure`` argument of ``step``: re-evaluate the loss (with gradients) if given."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


def _grads(group):
    """(param, grad) pairs of a group, skipping parameters without a gradient."""
    out = []
    for p in group["params"]:
        if p.grad is None:
            continue
        if p.grad.is_sparse:
            raise TypeError("mathref.optim does not support sparse gradients")
        out.append((p, p.grad))
    return out


class SGD(torch.optim.Optimizer):
    r"""Stochastic gradient descent with optional momentum, Nesterov and weight decay. See chapter 6.

    With g = ∇L(θ) + λθ (L2 weight decay, ``weight_decay=λ``):

        v ← g at the first step, then v ← βv + (1 − dampening)·g
        θ ← θ − η·(g + βv)   if nesterov, else   θ ← θ − η·v

    ``momentum=0`` gives plain SGD, θ ← θ − ηg. As in ``torch.optim.SGD``.
    """

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False):
        _check_hyper("lr", lr)
        _check_hyper("momentum", momentum, 0.0, 1.0, high_open=True)
        _check_hyper("dampening", dampening, 0.0, 1.0)
        _check_hyper("weight_decay", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("nesterov=True needs momentum > 0 and dampening = 0, got "
                             f"momentum={momentum}, dampening={dampening}")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov))

    @torch.no_grad()
    def step(self, closure=None):
        loss = _loss_of(closure)
        for group in self.param_groups:
            lr, beta, wd = group["lr"], group["momentum"], group["weight_decay"]
            for p, g in _grads(group):
                if wd != 0:
                    g = g.add(p, alpha=wd)               # L2: g ← g + λθ
                if beta != 0:
                    state = self.state[p]
                    if "momentum_buffer" not in state:
                        v = state["momentum_buffer"] = g.clone()
                    else:
                        v = state["momentum_buffer"]
                        v.mul_(beta).add_(g, alpha=1 - group["dampening"])
                    g = g.add(v, alpha=beta) if group["nesterov"] else v   # g + βv or v
                p.add_(g, alpha=-lr)
        return loss


class RMSProp(torch.optim.Optimizer):
    r"""RMSProp: divide each coordinate by a running root mean square of its gradient. See chapter 6.

        s ← αs + (1 − α)g²,           (centered: a ← αa + (1 − α)g,  s̃ = s − a²)
        θ ← θ − η·g/(√s + ε)           (with momentum μ: b ← μb + g/(√s + ε), θ ← θ − ηb)

    s starts at 0; ε is added outside the square root, as in ``torch.optim.RMSprop``.
    """

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False):
        _check_hyper("lr", lr)
        _check_hyper("alpha", alpha, 0.0, 1.0)
        _check_hyper("eps", eps)
        _check_hyper("weight_decay", weight_decay)
        _check_hyper("momentum", momentum, 0.0, 1.0, high_open=True)
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered))

    @torch.no_grad()
    def step(self, closure=None):
        loss = _loss_of(closure)
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            for p, g in _grads(group):
                if group["weight_decay"] != 0:
                    g = g.add(p, alpha=group["weight_decay"])      # L2: g ← g + λθ
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["square_avg"] = torch.zeros_like(p)
                    if group["centered"]:
                        state["grad_avg"] = torch.zeros_like(p)
                    if group["momentum"] > 0:
                        state["momentum_buffer"] = torch.zeros_like(p)
                state["step"] += 1
                s = state["square_avg"]
                s.mul_(alpha).addcmul_(g, g, value=1 - alpha)
                if group["centered"]:
                    a = state["grad_avg"]
                    a.lerp_(g, 1 - alpha)                # a + (1 − α)(g − a) = αa + (1 − α)g
                    denom = s.addcmul(a, a, value=-1).sqrt_().add_(eps)   # √(s − a²) + ε
                else:
                    denom = s.sqrt().add_(eps)
                if group["momentum"] > 0:
                    b = state["momentum_buffer"]
                    b.mul_(group["momentum"]).addcdiv_(g, denom)
                    p.add_(b, alpha=-lr)
                else:
                    p.addcdiv_(g, denom, value=-lr)
        return loss


class Adam(torch.optim.Optimizer):
    r"""Adam with bias correction. See chapter 6.

    At step t = 1, 2, ... with g = ∇L(θ) (+ λθ when ``weight_decay=λ``: L2, coupled):

        m ← β₁m + (1 − β₁)g,      v ← β₂v + (1 − β₂)g²
        m̂ = m/(1 − β₁ᵗ),          v̂ = v/(1 − β₂ᵗ)
        θ ← θ − η·m̂/(√v̂ + ε)

    m and v start at 0. ``foreach=True`` does the same arithmetic with multi-tensor
    ``torch._foreach_*`` calls (one kernel per operation for the whole group), as
    ``torch.optim.Adam(foreach=True)`` does. Same update as ``torch.optim.Adam``.
    """

    decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0,
                 foreach=False):
        _check_adam_hyper(lr, betas, eps, weight_decay)
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=bool(foreach)))

    def _state(self, p):
        state = self.state[p]
        if not state:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        return state

    @torch.no_grad()
    def step(self, closure=None):
        loss = _loss_of(closure)
        for group in self.param_groups:
            pairs = _grads(group)
            if pairs:
                self._step_group(group, pairs)
        return loss

    def _step_group(self, group, pairs):
        (self._step_foreach if group["foreach"] else self._step_plain)(group, pairs)

    def _step_plain(self, group, pairs):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        for p, g in pairs:
            state = self._state(p)
            if wd != 0:
                if self.decoupled:
                    p.mul_(1 - lr * wd)                  # AdamW: θ ← (1 − ηλ)θ
                else:
                    g = g.add(p, alpha=wd)               # Adam + L2: g ← g + λθ
            state["step"] += 1
            t = state["step"]
            m, v = state["exp_avg"], state["exp_avg_sq"]
            m.lerp_(g, 1 - beta1)                        # m ← β₁m + (1 − β₁)g
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)  # v ← β₂v + (1 − β₂)g²
            # θ ← θ − η·m̂/(√v̂ + ε) with m̂ = m/(1 − β₁ᵗ), √v̂ = √v/√(1 − β₂ᵗ)
            denom = (v.sqrt() / math.sqrt(1 - beta2 ** t)).add_(eps)
            p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** t))

    def _step_foreach(self, group, pairs):
        lr, (beta1, beta2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
        params = [p for p, _ in pairs]
        grads = [g for _, g in pairs]
        states = [self._state(p) for p in params]
        ms = [s["exp_avg"] for s in states]
        vs = [s["exp_avg_sq"] for s in states]
        for s in states:
            s["step"] += 1
        if wd != 0:
            if self.decoupled:
                torch._foreach_mul_(params, 1 - lr * wd)
            else:
                grads = torch._foreach_add(grads, params, alpha=wd)
        torch._foreach_lerp_(ms, grads, 1 - beta1)
        torch._foreach_mul_(vs, beta2)
        torch._foreach_addcmul_(vs, grads, grads, value=1 - beta2)
        # θ ← θ − (η/(1 − β₁ᵗ))·m / (√v/√(1 − β₂ᵗ) + ε), per tensor (steps may differ)
        step_sizes = [-lr / (1 - beta1 ** s["step"]) for s in states]
        denom = torch._foreach_sqrt(vs)
        torch._foreach_div_(denom, [math.sqrt(1 - beta2 ** s["step"]) for s in states])
        torch._foreach_add_(denom, eps)
        torch._foreach_addcdiv_(params, ms, denom, step_sizes)


class AdamW(Adam):
    r"""AdamW: Adam with decoupled weight decay. See chapter 6.

        θ ← (1 − ηλ)θ,   then the Adam step   θ ← θ − η·m̂/(√v̂ + ε)

    where m̂ and v̂ are built from the raw gradient (λθ is *not* added to g, so the decay is
    not divided by √v̂). Default λ = 0.01 as in ``torch.optim.AdamW``; ``foreach=True`` is
    the multi-tensor fast path.
    """

    decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 foreach=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         foreach=foreach)


NS_DTYPES = ("bfloat16", "float32", "float64")
MUON_COEFFICIENTS = (3.4445, -4.7750, 2.0315)   # Jordan et al.'s quintic, as in torch.optim.Muon


def newton_schulz(G, steps=5, coefficients=MUON_COEFFICIENTS, eps=1e-7, dtype=torch.bfloat16):
    r"""Approximate the orthogonal factor U Vᵀ of a matrix G = U Σ Vᵀ without an SVD. See chapter 6.

        X₀ = G / ‖G‖_F                          (every singular value is now ≤ 1)
        X ← aX + b(XXᵀ)X + c(XXᵀ)²X             (``steps`` times)

    Each step keeps U and V and maps every singular value σ to p(σ) = aσ + bσ³ + cσ⁵. With
    (a, b, c) = (1.5, −0.5, 0) the values converge to 1, so X → U Vᵀ, but slowly for small σ.
    Muon's quintic coefficients raise small values much faster and stop short of exactness:
    after 5 steps every σ/‖G‖_F in [0.01, 1] lands in [0.68, 1.14]. The arithmetic is in ``dtype``
    (bfloat16 by default, as in Muon); a tall G is iterated through its transpose so that XXᵀ
    is the smaller Gram matrix.
    """
    check_tensor("G", G, kind="float")
    if G.dim() != 2:
        raise ValueError(f"newton_schulz orthogonalizes a matrix, got shape {tuple(G.shape)}")
    steps = check_int("steps", steps, min=0)
    a, b, c = coefficients
    tall = G.shape[0] > G.shape[1]
    X = G.to(dtype)
    if tall:
        X = X.T
    X = X / X.norm().clamp(min=eps)
    for _ in range(steps):
        A = X @ X.T                                  # Gram matrix, singular values σ²
        B = torch.addmm(A, A, A, beta=b, alpha=c)    # bA + cA²  (one rounding in bfloat16)
        X = torch.addmm(X, B, X, beta=a)             # aX + BX = aX + b(XXᵀ)X + c(XXᵀ)²X
    return (X.T if tall else X).to(G.dtype)


class Muon(torch.optim.Optimizer):
    r"""Muon for a network's weight matrices, AdamW for its other parameters. See chapter 6.

    A parameter group with ``muon=True`` (the default) holds 2-D matrices W (out × in). With
    G = ∇L(W) and the momentum B (starting at 0), each step does

        B ← μB + (1 − μ)G
        M = (1 − μ)G + μB                      (Nesterov; M = B with ``nesterov=False``)
        O = newton_schulz(M) ≈ U Vᵀ            (the direction with all singular values ≈ 1)
        W ← (1 − ηλ)W − η·s·O,   s = 0.2·√max(out, in)

    ``ns_dtype`` is the precision of the Newton–Schulz iteration: "bfloat16" as in
    ``torch.optim.Muon`` (fast on GPUs), or "float32" (on a CPU without bfloat16 instructions
    about ten times faster; the iteration does not need the extra precision either way).

    U Vᵀ has RMS 1/√max(out, in), so s gives the update an RMS of 0.2, about that of an AdamW
    update; one η then serves both kinds of group. A group with ``muon=False`` (embeddings, the
    output head, biases, norm gains) takes AdamW steps with its ``betas``, ``eps`` and
    ``weight_decay``. Same updates as ``torch.optim.Muon(adjust_lr_fn="match_rms_adamw")`` and
    ``torch.optim.AdamW``.
    """

    decoupled = True          # the AdamW groups take Adam's steps with decoupled decay
    step, _state = Adam.step, Adam._state
    _step_plain, _step_foreach = Adam._step_plain, Adam._step_foreach

    def __init__(self, params, lr=1e-3, momentum=0.95, nesterov=True, ns_steps=5,
                 betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, foreach=False,
                 ns_dtype="bfloat16"):
        _check_adam_hyper(lr, betas, eps, weight_decay)
        _check_hyper("momentum", momentum, 0.0, 1.0, high_open=True)
        ns_steps = check_int("ns_steps", ns_steps, min=0)
        if ns_dtype not in NS_DTYPES:
            raise ValueError(f"ns_dtype must be one of {NS_DTYPES}, got {ns_dtype!r}")
        super().__init__(params, dict(lr=lr, momentum=momentum, nesterov=bool(nesterov),
                                      ns_steps=ns_steps, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, foreach=bool(foreach), muon=True,
                                      ns_dtype=ns_dtype))

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        group = self.param_groups[-1]
        if group["muon"]:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"Muon orthogonalizes matrices; a parameter of shape "
                                     f"{tuple(p.shape)} belongs in a group with muon=False (AdamW)")

    def _step_group(self, group, pairs):
        if group["muon"]:
            self._step_muon(group, pairs)
        else:
            Adam._step_group(self, group, pairs)

    def _step_muon(self, group, pairs):
        lr, mu, wd = group["lr"], group["momentum"], group["weight_decay"]
        for p, g in pairs:
            state = self.state[p]
            if not state:
                state["momentum_buffer"] = torch.zeros_like(p)
            B = state["momentum_buffer"]
            B.lerp_(g, 1 - mu)                               # B ← μB + (1 − μ)G
            M = g.lerp(B, mu) if group["nesterov"] else B    # (1 − μ)G + μB
            O = newton_schulz(M, group["ns_steps"], dtype=getattr(torch, group["ns_dtype"]))
            p.mul_(1 - lr * wd)                              # decoupled decay, as in AdamW
            p.add_(O, alpha=-lr * 0.2 * math.sqrt(max(p.shape)))


def _check_schedule(step, warmup_steps):
    if not isinstance(step, int) or isinstance(step, bool):
        raise TypeError(f"step must be an int, got {type(step).__name__}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if not isinstance(warmup_steps, int) or isinstance(warmup_steps, bool) or warmup_steps < 0:
        raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")


def warmup_cosine(step, warmup_steps, total_steps, lr_max, lr_min=0.0):
    r"""Linear warm-up, then cosine decay to a floor. See chapter 6.

        step < W:        η = η_max·(step + 1)/W
        W ≤ step ≤ T:    η = η_min + ½(η_max − η_min)(1 + cos(π·(step − W)/(T − W)))
        step > T:        η = η_min

    (W = ``warmup_steps``, T = ``total_steps``, steps counted from 0.) With ``lr_max=1`` it
    returns the factor that ``torch.optim.lr_scheduler.LambdaLR`` multiplies the base lr by.

    Warm-up convention (courses and libraries differ): the first step, step 0, already uses
    η_max/W, not 0, and step W − 1 uses η_max. Schedules written as η_max·step/W take their
    first step with η = 0 and reach η_max one step later, at step W. See chapters 6 and 14.
    """
    _check_schedule(step, warmup_steps)
    if not isinstance(total_steps, int) or isinstance(total_steps, bool) \
            or total_steps <= warmup_steps:
        raise ValueError(f"total_steps must be an int > warmup_steps={warmup_steps}, "
                         f"got {total_steps!r}")
    check_number("lr_max", lr_max, min=0.0)
    check_number("lr_min", lr_min, min=0.0)
    if lr_min > lr_max:
        raise ValueError(f"lr_min={lr_min} must not exceed lr_max={lr_max}")
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    if step > total_steps:
        return lr_min
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * progress))


def inverse_sqrt(step, warmup_steps, lr_max):
    r"""Linear warm-up, then decay ∝ 1/√step (the Transformer schedule). See chapter 6.

        η = η_max · min(s/W, √(W/s)),   s = step + 1,

    which peaks at η_max when s = W. With η_max = d_model^(−1/2)·W^(−1/2) this is Vaswani et
    al.'s d_model^(−1/2)·min(s^(−1/2), s·W^(−3/2)).
    """
    _check_schedule(step, warmup_steps)
    if warmup_steps == 0:
        raise ValueError("inverse_sqrt needs warmup_steps >= 1")
    check_number("lr_max", lr_max, min=0.0)
    s = step + 1
    return lr_max * min(s / warmup_steps, math.sqrt(warmup_steps / s))


def clip_grad_norm_(params, max_norm, eps=1e-6):
    r"""Scale all gradients together so that their global norm is at most ``max_norm``. See chapter 6.

        ‖g‖ = √(Σ_p ‖g_p‖²),    g_p ← g_p · min(1, c/(‖g‖ + ε))

    Returns the global norm *before* clipping, as ``torch.nn.utils.clip_grad_norm_`` does
    (same ε = 1e-6). Parameters without a gradient are skipped.
    """
    check_number("max_norm", max_norm, min=0.0, min_open=True, allow_inf=True)
    check_number("eps", eps, min=0.0)
    if isinstance(params, torch.Tensor):
        params = [params]
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    norms = [torch.linalg.vector_norm(g.detach()).to(grads[0].device) for g in grads]
    total = torch.linalg.vector_norm(torch.stack(norms))  # = √(Σ_p ‖g_p‖²)
    scale = torch.clamp(max_norm / (total + eps), max=1.0)
    for g in grads:
        g.detach().mul_(scale.to(g.device, g.dtype))
    return total


def decay_param_groups(model, weight_decay):
    """Two optimizer groups: weight matrices and embeddings (dim ≥ 2) decay, biases and norm
    gains (dim < 2) do not. See chapter 6.

    Returns ``[{"params": decayed, "weight_decay": λ}, {"params": others, "weight_decay": 0.0}]``
    for any ``torch.optim`` optimizer.
    """
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    check_number("weight_decay", weight_decay, min=0.0)
    params = [p for p in model.parameters() if p.requires_grad]
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def optimize_path(loss, start, make_optimizer, steps):
    """Run an optimizer on a loss of a few numbers; return the path [θ₀, θ₁, ..., θ_steps]. See chapter 6.

    ``loss(*theta)`` takes the coordinates as scalar tensors (e.g. ``lambda x, y: x**2 + y**2``);
    ``make_optimizer(params)`` builds the optimizer. The path is a float64 tensor
    [steps + 1, len(start)]; it stops early (shorter) if the loss becomes infinite or NaN.
    """
    steps = check_int("steps", steps, min=0)
    if not callable(loss) or not callable(make_optimizer):
        raise TypeError("loss and make_optimizer must be callables")
    theta = torch.as_tensor(start, dtype=torch.float64).detach().clone().flatten().requires_grad_()
    opt = make_optimizer([theta])
    path = [theta.detach().clone()]
    for _ in range(steps):
        opt.zero_grad()
        value = loss(*theta)
        if not torch.isfinite(value):
            break
        value.backward()
        opt.step()
        path.append(theta.detach().clone())
    return torch.stack(path)
