"""Typical wrong answers to chapter 6's exercises: each must fail its checker."""
import importlib.util
import math

import torch


def lr_no_floor(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    p = min(step - warmup_steps, total_steps - warmup_steps) / (total_steps - warmup_steps)
    return 0.5 * lr_max * (1 + math.cos(math.pi * p))          # decays to 0, not to lr_min


def lr_warmup_from_zero(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * step / warmup_steps                      # first step has lr = 0
    p = min(step - warmup_steps, total_steps - warmup_steps) / (total_steps - warmup_steps)
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * p))


def lr_progress_over_total(step, warmup_steps, total_steps, lr_max, lr_min):
    if step < warmup_steps:
        return lr_max * (step + 1) / warmup_steps
    p = min(step, total_steps) / total_steps                     # ignores the warm-up shift
    return lr_min + 0.5 * (lr_max - lr_min) * (1 + math.cos(math.pi * p))


def clip_per_tensor(grads, max_norm):
    return [g * min(1.0, max_norm / float(g.norm())) for g in grads]


def clip_always_rescale(grads, max_norm):
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    return [g * max_norm / norm for g in grads]                  # scales small gradients up


def clip_sum_of_norms(grads, max_norm):
    norm = sum(float(g.norm()) for g in grads)                   # ‖a‖ + ‖b‖, not √(‖a‖² + ‖b‖²)
    return [g * min(1.0, max_norm / norm) for g in grads]


def adam_no_bias_correction(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    return theta - lr * m / (v.sqrt() + eps), m, v


def adam_eps_inside_sqrt(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    return theta - lr * m_hat / (v_hat + eps).sqrt(), m, v


def adam_abs_not_square(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad.abs()                      # |g| instead of g²
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    return theta - lr * m_hat / (v_hat.sqrt() + eps), m, v


def _adam_core(theta, grad, m, v, t, lr, beta1, beta2, eps):
    m = beta1 * m + (1 - beta1) * grad
    v = beta2 * v + (1 - beta2) * grad ** 2
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    return lr * m_hat / (v_hat.sqrt() + eps), m, v


def adamw_decay_without_lr(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    step, m, v = _adam_core(theta, grad, m, v, t, lr, beta1, beta2, eps)
    return (1 - weight_decay) * theta - step, m, v               # (1 − λ)θ


def adamw_as_l2(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    step, m, v = _adam_core(theta, grad + weight_decay * theta, m, v, t, lr, beta1, beta2, eps)
    return theta - step, m, v                                     # Adam + L2, coupled


def adamw_decay_after_step(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):
    step, m, v = _adam_core(theta, grad, m, v, t, lr, beta1, beta2, eps)
    return (1 - lr * weight_decay) * (theta - step), m, v         # decays the updated θ


def _quintic(X, gram_term):
    a, b, c = 3.4445, -4.7750, 2.0315
    A = X @ X.T
    return a * X + gram_term(A, b, c) @ X


def ns_without_normalizing(G, steps):
    X = G.clone()                                                 # X₀ = G: σ may exceed 1
    for _ in range(steps):
        X = _quintic(X, lambda A, b, c: b * A + c * A @ A)
    return X


def ns_elementwise_square(G, steps):
    X = G / G.norm()
    for _ in range(steps):
        X = _quintic(X, lambda A, b, c: b * A + c * A * A)        # A², elementwise
    return X


def ns_swapped_coefficients(G, steps):
    X = G / G.norm()
    for _ in range(steps):
        X = _quintic(X, lambda A, b, c: c * A + b * A @ A)        # b and c exchanged
    return X


WRONG_ANSWERS = {
    "ch06-warmup-cosine": [lr_no_floor, lr_warmup_from_zero, lr_progress_over_total],
    "ch06-clip-global-norm": [clip_per_tensor, clip_always_rescale, clip_sum_of_norms],
    "ch06-adam-step": [adam_no_bias_correction, adam_eps_inside_sqrt, adam_abs_not_square],
    "ch06-adamw-step": [adamw_decay_without_lr, adamw_as_l2, adamw_decay_after_step],
    "ch06-newton-schulz": [ns_without_normalizing, ns_elementwise_square, ns_swapped_coefficients],
}


# ---------------------------------------------------------------- added with the shortcut table
def clip_in_place(grads, max_norm):
    norm = math.sqrt(sum(float((g ** 2).sum()) for g in grads))
    for g in grads:
        g.mul_(min(1.0, max_norm / norm))                         # changes the caller's gradients
    return grads


def ns_in_float32(G, steps):
    a, b, c = 3.4445, -4.7750, 2.0315
    X = (G / G.norm()).float()                                    # not in G's own dtype
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X


def ns_float32_inside(G, steps):
    return ns_in_float32(G, steps).to(G.dtype)                    # float32 arithmetic, cast back


def ns_spectral_norm(G, steps):
    a, b, c = 3.4445, -4.7750, 2.0315
    X = G / torch.linalg.matrix_norm(G, ord=2)                    # ‖G‖₂, not ‖G‖_F
    for _ in range(steps):
        A = X @ X.T
        X = a * X + (b * A + c * A @ A) @ X
    return X


WRONG_ANSWERS["ch06-clip-global-norm"] += [clip_in_place]
WRONG_ANSWERS["ch06-newton-schulz"] += [ns_in_float32, ns_float32_inside, ns_spectral_norm]


_ADAM_WITH_STATE = (
    "def {name}(theta, grad, m, v, t, lr, beta1, beta2, eps{wd_arg}):\n"
    "    p = theta.clone().requires_grad_(True)\n"
    "    opt = {cls}([p], lr=lr, betas=(beta1, beta2), eps=eps{wd_kw})\n"
    "    opt.state[p] = {{'step': torch.tensor(float(t - 1)), 'exp_avg': m.clone(),\n"
    "                    'exp_avg_sq': v.clone()}}\n"
    "    p.grad = grad.clone()\n"
    "    opt.step()\n"
    "    return p.detach(), opt.state[p]['exp_avg'], opt.state[p]['exp_avg_sq']\n")
_MATHREF_ADAM = (
    "def {name}(theta, grad, m, v, t, lr, beta1, beta2, eps{wd_arg}):\n"
    "    p = theta.clone().requires_grad_(True)\n"
    "    opt = {cls}([p], lr=lr, betas=(beta1, beta2), eps=eps{wd_kw})\n"
    "    opt.state[p] = {{'step': t - 1, 'exp_avg': m.clone(), 'exp_avg_sq': v.clone()}}\n"
    "    p.grad = grad.clone()\n"
    "    opt.step()\n"
    "    return p.detach(), opt.state[p]['exp_avg'], opt.state[p]['exp_avg_sq']\n")
_ADAM = dict(name="adam_step", wd_arg="", wd_kw="")
_ADAMW = dict(name="adamw_step", wd_arg=", weight_decay", wd_kw=", weight_decay=weight_decay")

# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch06-warmup-cosine": [
        "from mathref.optim import warmup_cosine\n\n"
        "def lr_at(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    return warmup_cosine(step, warmup_steps, total_steps, lr_max, lr_min)\n",
        "import mathref.train\n\n"
        "def lr_at(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    cfg = mathref.train.TrainConfig(lr=lr_max, min_lr=lr_min, warmup_steps=warmup_steps,\n"
        "                                    max_steps=total_steps)\n"
        "    return mathref.train.lr_at(step, cfg)\n",
        "from torch.optim.lr_scheduler import CosineAnnealingLR\n\n"
        "def lr_at(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    if step < warmup_steps:\n"
        "        return lr_max * (step + 1) / warmup_steps\n"
        "    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr_max)\n"
        "    sched = CosineAnnealingLR(opt, T_max=total_steps - warmup_steps, eta_min=lr_min)\n"
        "    for _ in range(min(step, total_steps) - warmup_steps):\n"
        "        opt.step()\n"
        "        sched.step()\n"
        "    return opt.param_groups[0]['lr']\n",
    ],
    "ch06-clip-global-norm": [
        "def clip_global_norm(grads, max_norm):\n"
        "    params = [torch.zeros_like(g, requires_grad=True) for g in grads]\n"
        "    for p, g in zip(params, grads):\n"
        "        p.grad = g.clone()\n"
        "    torch.nn.utils.clip_grad_norm_(params, max_norm)\n"
        "    return [p.grad for p in params]\n",
        "from torch.nn.utils import clip_grad_norm_ as clip\n\n"
        "def clip_global_norm(grads, max_norm):\n"
        "    params = [torch.nn.Parameter(g.clone()) for g in grads]\n"
        "    for p, g in zip(params, grads):\n"
        "        p.grad = g.clone()\n"
        "    clip(params, max_norm)\n"
        "    return [p.grad for p in params]\n",
        "from torch.nn.utils import get_total_norm\n\n"
        "def clip_global_norm(grads, max_norm):\n"
        "    total = float(get_total_norm(grads))\n"
        "    return [g * min(1.0, max_norm / (total + 1e-6)) for g in grads]\n",
        "import mathref.optim as O\n\n"
        "def clip_global_norm(grads, max_norm):\n"
        "    params = [torch.zeros_like(g, requires_grad=True) for g in grads]\n"
        "    for p, g in zip(params, grads):\n"
        "        p.grad = g.clone()\n"
        "    O.clip_grad_norm_(params, max_norm)\n"
        "    return [p.grad for p in params]\n",
    ],
    "ch06-adam-step": [
        _ADAM_WITH_STATE.format(cls="torch.optim.Adam", **_ADAM),
        _ADAM_WITH_STATE.format(cls="torch.optim.Adam", **_ADAM).replace(
            "eps=eps)", "eps=eps, foreach=True)"),
        "from torch.optim.adam import adam as functional_adam\n\n"
        "def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):\n"
        "    theta, m, v = theta.clone(), m.clone(), v.clone()\n"
        "    functional_adam([theta], [grad], [m], [v], [], [torch.tensor(float(t - 1))],\n"
        "                    amsgrad=False, beta1=beta1, beta2=beta2, lr=lr, weight_decay=0.0,\n"
        "                    eps=eps, maximize=False)\n"
        "    return theta, m, v\n",
        _MATHREF_ADAM.format(cls="mathref.optim.Adam", **_ADAM),
    ],
    "ch06-adamw-step": [
        _ADAM_WITH_STATE.format(cls="torch.optim.AdamW", **_ADAMW),
        _ADAM_WITH_STATE.format(cls="torch.optim.Adam", **_ADAMW).replace(
            "weight_decay=weight_decay)", "weight_decay=weight_decay, decoupled_weight_decay=True)"),
        _MATHREF_ADAM.format(cls="mathref.optim.AdamW", **_ADAMW),
    ],
    "ch06-newton-schulz": [
        "from mathref.optim import newton_schulz\n\n"
        "def orthogonalize(G, steps):\n"
        "    return newton_schulz(G, steps, dtype=G.dtype)\n",
        "def orthogonalize(G, steps):\n"
        "    a, b, c = 3.4445, -4.7750, 2.0315\n"
        "    U, S, Vh = torch.linalg.svd(G, full_matrices=False)\n"
        "    s = S / G.norm()\n"
        "    for _ in range(steps):\n"
        "        s = a * s + b * s ** 3 + c * s ** 5\n"
        "    return U @ torch.diag(s) @ Vh\n",
        "def orthogonalize(G, steps):\n"
        "    a, b, c = 3.4445, -4.7750, 2.0315\n"
        "    U, S, V = G.svd()\n"
        "    s = S / G.norm()\n"
        "    for _ in range(steps):\n"
        "        s = a * s + b * s ** 3 + c * s ** 5\n"
        "    return U @ torch.diag(s) @ V.T\n",
        "import numpy as np\n\n"                                   # the SVD done by NumPy
        "def orthogonalize(G, steps):\n"
        "    a, b, c = 3.4445, -4.7750, 2.0315\n"
        "    U, S, Vh = np.linalg.svd(G.numpy(), full_matrices=False)\n"
        "    s = S / np.linalg.norm(S)\n"
        "    for _ in range(steps):\n"
        "        s = a * s + b * s ** 3 + c * s ** 5\n"
        "    return torch.from_numpy(U @ np.diag(s) @ Vh)\n",
        "import numpy as np\n\n"                                   # np.asarray: Tensor.__array__
        "def orthogonalize(G, steps):\n"
        "    a, b, c = 3.4445, -4.7750, 2.0315\n"
        "    U, S, Vh = np.linalg.svd(np.asarray(G), full_matrices=False)\n"
        "    s = S / np.linalg.norm(S)\n"
        "    for _ in range(steps):\n"
        "        s = a * s + b * s ** 3 + c * s ** 5\n"
        "    return torch.from_numpy(U @ np.diag(s) @ Vh)\n",
    ],
}

# Correct solutions in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch06-warmup-cosine": [
        "def lr_at(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    if step < warmup_steps:\n"
        "        return lr_max * (step + 1) / warmup_steps\n"
        "    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))\n"
        "    return lr_min + (lr_max - lr_min) * math.cos(math.pi * progress / 2) ** 2\n",
    ],
    "ch06-clip-global-norm": [
        "def clip_global_norm(grads, max_norm):\n"                      # no ε, a stacked norm
        "    total = torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))\n"
        "    scale = torch.clamp(max_norm / total, max=1.0)\n"
        "    return [g * scale for g in grads]\n",
        "def clip_global_norm(grads, max_norm):\n"                      # a tuple, float32 factor
        "    total = torch.cat([g.flatten().float() for g in grads]).norm().item()\n"
        "    return tuple(g * min(1.0, max_norm / total) for g in grads)\n",
    ],
    "ch06-adam-step": [
        "def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):\n"   # PyTorch's own order
        "    m = m.lerp(grad, 1 - beta1)\n"
        "    v = v * beta2 + (1 - beta2) * grad * grad\n"
        "    denom = v.sqrt() / math.sqrt(1 - beta2 ** t) + eps\n"
        "    return theta - lr / (1 - beta1 ** t) * m / denom, m, v\n",
    ],
    "ch06-adamw-step": [
        "def adamw_step(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):\n"
        "    theta = theta * (1 - lr * weight_decay)\n"
        "    m = m.lerp(grad, 1 - beta1)\n"
        "    v = v * beta2 + (1 - beta2) * grad * grad\n"
        "    denom = v.sqrt() / math.sqrt(1 - beta2 ** t) + eps\n"
        "    return theta - lr / (1 - beta1 ** t) * m / denom, m, v\n",
    ],
    "ch06-newton-schulz": [
        "def orthogonalize(G, steps):\n"                                # Muon's normalization
        "    a, b, c = 3.4445, -4.7750, 2.0315\n"
        "    X = G / (G.norm() + 1e-7)\n"
        "    for _ in range(steps):\n"
        "        A = X @ X.T\n"
        "        B = b * A + c * A @ A\n"
        "        X = a * X + B @ X\n"
        "    return X\n",
        "def orthogonalize(G, steps):\n"                                # tall: iterate on Gᵀ
        "    a, b, c = 3.4445, -4.7750, 2.0315\n"
        "    tall = G.shape[0] > G.shape[1]\n"
        "    X = G.T if tall else G\n"
        "    X = X / torch.linalg.matrix_norm(X)\n"
        "    for _ in range(steps):\n"
        "        A = X @ X.mT\n"
        "        X = a * X + b * A @ X + c * A @ A @ X\n"
        "    return X.T if tall else X\n",
    ],
}


# ------------------------------------------- in-place updates, other norms and matrix products
# PyTorch's own in-place style: the checker hands in copies, so updating them in place is fine
_IN_PLACE_ADAM_CORE = (
    "    m.mul_(beta1).add_(grad, alpha=1 - beta1)\n"
    "    v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)\n"
    "    denom = (v.sqrt() / math.sqrt(1 - beta2 ** t)).add_(eps)\n"
    "    theta.addcdiv_(m, denom, value=-lr / (1 - beta1 ** t))\n"
    "    return theta, m, v\n")
RIGHT_ANSWERS["ch06-adam-step"] += [
    "def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):\n" + _IN_PLACE_ADAM_CORE,
    "def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):\n"     # addcmul, addcdiv_ only
    "    m = m.lerp(grad, 1 - beta1)\n"
    "    v = torch.addcmul(v * beta2, grad, grad, value=1 - beta2)\n"
    "    theta.addcdiv_(m / (1 - beta1 ** t), (v / (1 - beta2 ** t)).sqrt() + eps, value=-lr)\n"
    "    return theta, m, v\n",
]
RIGHT_ANSWERS["ch06-adamw-step"] += [
    "def adamw_step(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):\n"
    "    theta.mul_(1 - lr * weight_decay)\n" + _IN_PLACE_ADAM_CORE,
]
RIGHT_ANSWERS["ch06-clip-global-norm"] += [
    "def clip_global_norm(grads, max_norm):\n"                      # torch.linalg.norm of all entries
    "    total = torch.linalg.norm(torch.cat([g.flatten() for g in grads]))\n"
    "    return [g * torch.clamp(max_norm / total, max=1.0) for g in grads]\n",
    "def clip_global_norm(grads, max_norm):\n"                      # per-tensor norms, then theirs
    "    total = torch.linalg.norm(torch.stack([torch.linalg.norm(g) for g in grads]))\n"
    "    return [g * min(1.0, max_norm / float(total)) for g in grads]\n",
    "def clip_global_norm(grads, max_norm):\n"                      # Frobenius norm per tensor
    "    total = math.sqrt(sum(float(torch.linalg.matrix_norm(g.reshape(1, -1))) ** 2\n"
    "                          for g in grads))\n"
    "    return [g * min(1.0, max_norm / total) for g in grads]\n",
]
RIGHT_ANSWERS["ch06-newton-schulz"] += [
    "def orthogonalize(G, steps):\n"                                # torch.linalg.matrix_power
    "    a, b, c = 3.4445, -4.7750, 2.0315\n"
    "    X = G / torch.linalg.norm(G)\n"
    "    for _ in range(steps):\n"
    "        A = X @ X.T\n"
    "        X = a * X + (b * A + c * torch.linalg.matrix_power(A, 2)) @ X\n"
    "    return X\n",
    "def orthogonalize(G, steps):\n"                                # torch.linalg.multi_dot
    "    a, b, c = 3.4445, -4.7750, 2.0315\n"
    "    X = G / G.norm()\n"
    "    for _ in range(steps):\n"
    "        A = X @ X.T\n"
    "        X = a * X + b * torch.linalg.multi_dot([X, X.T, X]) \\\n"
    "            + c * torch.linalg.multi_dot([A, A, X])\n"
    "    return X\n",
    "def orthogonalize(G, steps):\n"                                # ‖G‖_F = √tr(GGᵀ)
    "    a, b, c = 3.4445, -4.7750, 2.0315\n"
    "    X = G / torch.sqrt(torch.trace(G @ G.T))\n"
    "    for _ in range(steps):\n"
    "        A = X @ X.T\n"
    "        X = a * X + (b * A + c * torch.matrix_power(A, 2)) @ X\n"
    "    return X\n",
]

# ... while what the statement does not allow stays refused: a low-rank SVD, an eigendecomposition
# of GᵀG, eigenvectors by QR iteration, and torch's own Newton–Schulz (its bfloat16 cast patched out)
_NS_FROM_EIGH = (
    "def orthogonalize(G, steps):\n"
    "    a, b, c = 3.4445, -4.7750, 2.0315\n"
    "    L, V = {eigh}(G.T @ G)\n"
    "    S = L.clamp(min=0).sqrt()\n"
    "    keep = S > 1e-12 * S.max()\n"
    "    S, V = S[keep], V[:, keep]\n"
    "    U = G @ V / S\n"
    "    s = S / G.norm()\n"
    "    for _ in range(steps):\n"
    "        s = a * s + b * s ** 3 + c * s ** 5\n"
    "    return U @ torch.diag(s) @ V.T\n")
SHORTCUTS["ch06-newton-schulz"] += [
    "def orthogonalize(G, steps):\n"
    "    a, b, c = 3.4445, -4.7750, 2.0315\n"
    "    U, S, V = torch.svd_lowrank(G, q=min(G.shape), niter=10)\n"
    "    s = S / G.norm()\n"
    "    for _ in range(steps):\n"
    "        s = a * s + b * s ** 3 + c * s ** 5\n"
    "    return U @ torch.diag(s) @ V.T\n",
    _NS_FROM_EIGH.format(eigh="torch.linalg.eigh"),
    _NS_FROM_EIGH.format(eigh="torch.ops.aten._linalg_eigh.default")
    .replace("L, V =", "L, V, _ ="),
    "def orthogonalize(G, steps):\n"                                 # eigenvectors of GᵀG by QR
    "    a, b, c = 3.4445, -4.7750, 2.0315\n"
    "    A = G.T @ G\n"
    "    V = torch.eye(A.shape[0], dtype=G.dtype)\n"
    "    for _ in range(300):\n"
    "        V, _ = torch.linalg.qr(A @ V)\n"
    "    S = (V.T @ A @ V).diagonal().clamp(min=0).sqrt()\n"
    "    keep = S > 1e-12 * S.max()\n"
    "    S, V = S[keep], V[:, keep]\n"
    "    U = G @ V / S\n"
    "    s = S / G.norm()\n"
    "    for _ in range(steps):\n"
    "        s = a * s + b * s ** 3 + c * s ** 5\n"
    "    return U @ torch.diag(s) @ V.T\n",
    "def orthogonalize(G, steps):\n"                                 # A^(-1/2) needs an inverse
    "    a, b, c = 3.4445, -4.7750, 2.0315\n"
    "    X = G / G.norm()\n"
    "    for _ in range(steps):\n"
    "        A = X @ X.T\n"
    "        X = a * X + (b * A + c * torch.linalg.matrix_power(A, -1) @ A @ A @ A) @ X\n"
    "    return X\n",
]
if hasattr(torch.optim, "_muon") or importlib.util.find_spec("torch.optim._muon") is not None:
    SHORTCUTS["ch06-newton-schulz"] += [
        "from torch.optim import _muon\n\n"
        "def orthogonalize(G, steps):\n"
        "    cast = torch.Tensor.bfloat16\n"
        "    torch.Tensor.bfloat16 = lambda self, *args, **kwargs: self.clone()\n"
        "    try:\n"
        "        return _muon._zeropower_via_newtonschulz(G, (3.4445, -4.7750, 2.0315), steps, 1e-300)\n"
        "    finally:\n"
        "        torch.Tensor.bfloat16 = cast\n",
    ]

# torch._foreach_*: the same elementwise arithmetic on lists of tensors (what foreach=True runs;
# the fourth read found it refused)
_FOREACH_ADAM_CORE = (
    "    (m,), (v,), (theta,) = [m], [v], [theta]\n"
    "    torch._foreach_lerp_([m], [grad], 1 - beta1)\n"
    "    torch._foreach_mul_([v], beta2)\n"
    "    torch._foreach_addcmul_([v], [grad], [grad], value=1 - beta2)\n"
    "    (denom,) = torch._foreach_sqrt([v])\n"
    "    torch._foreach_div_([denom], math.sqrt(1 - beta2 ** t))\n"
    "    torch._foreach_add_([denom], eps)\n"
    "    torch._foreach_addcdiv_([theta], [m], [denom], value=-lr / (1 - beta1 ** t))\n"
    "    return theta, m, v\n")
RIGHT_ANSWERS["ch06-adam-step"].append(
    "def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):\n" + _FOREACH_ADAM_CORE)
RIGHT_ANSWERS["ch06-adamw-step"].append(
    "def adamw_step(theta, grad, m, v, t, lr, beta1, beta2, eps, weight_decay):\n"
    "    torch._foreach_mul_([theta], 1 - lr * weight_decay)\n" + _FOREACH_ADAM_CORE)

# torch._foreach_norm and _foreach_mul, as torch's own clip_grad_norm_ is written (the eighth
# read's N4 found them refused here while the Adam exercises accept them)
RIGHT_ANSWERS["ch06-clip-global-norm"] += [
    "def clip_global_norm(grads, max_norm):\n"                      # per-tensor norms by _foreach_norm
    "    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))\n"
    "    return torch._foreach_mul(grads, torch.clamp(max_norm / (total + 1e-6), max=1.0))\n",
    "def clip_global_norm(grads, max_norm):\n"                      # a hand norm, then _foreach_mul
    "    total = math.sqrt(sum(float((g * g).sum()) for g in grads))\n"
    "    return torch._foreach_mul(grads, min(1.0, max_norm / total))\n",
]


def clip_foreach_in_place(grads, max_norm):
    total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / total, max=1.0))   # the caller's tensors
    return grads


def clip_foreach_per_tensor(grads, max_norm):
    factors = [min(1.0, max_norm / float(n)) for n in torch._foreach_norm(grads)]
    return torch._foreach_mul(grads, factors)                     # one factor per tensor


WRONG_ANSWERS["ch06-clip-global-norm"] += [clip_foreach_in_place, clip_foreach_per_tensor]
