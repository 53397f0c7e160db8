"""Typical wrong answers to chapter 8's exercises: each must fail its checker."""
import torch
import torch.nn.functional as F


# ---------------------------------------------------------------- ch08-layer-norm
def ln_unbiased_variance(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(x.var(-1, keepdim=True) + eps) + beta   # Tensor.var default


def ln_std_plus_eps(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    std = ((x - mu) ** 2).mean(-1, keepdim=True).sqrt()
    return gamma * (x - mu) / (std + eps) + beta


def ln_per_feature(x, gamma, beta, eps=1e-5):
    mu = x.mean(0, keepdim=True)                                  # statistics over the batch
    var = ((x - mu) ** 2).mean(0, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def ln_without_affine(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


# ---------------------------------------------------------------- ch08-rms-norm
def rms_divide_by_norm(x, gamma, eps=1e-5):
    return gamma * x / torch.sqrt((x ** 2).sum(-1, keepdim=True) + eps)


def rms_without_eps(x, gamma, eps=1e-5):
    return gamma * x / torch.sqrt((x ** 2).mean(-1, keepdim=True))


def rms_without_gain(x, gamma, eps=1e-5):
    return x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + eps)


def rms_eps_outside(x, gamma, eps=1e-5):
    return gamma * x / (torch.sqrt((x ** 2).mean(-1, keepdim=True)) + eps)


# ---------------------------------------------------------------- ch08-running-stats
def running_biased_variance(x, running_mean, running_var, momentum):
    mean, var = x.mean(0), x.var(0, unbiased=False)
    return ((1 - momentum) * running_mean + momentum * mean,
            (1 - momentum) * running_var + momentum * var)


def running_momentum_reversed(x, running_mean, running_var, momentum):
    mean, var = x.mean(0), x.var(0)
    return (momentum * running_mean + (1 - momentum) * mean,
            momentum * running_var + (1 - momentum) * var)


def running_per_row(x, running_mean, running_var, momentum):
    return ((1 - momentum) * running_mean + momentum * x.mean(),
            (1 - momentum) * running_var + momentum * x.var())


# ---------------------------------------------------------------- ch08-batch-norm-backward
def _bn(x, eps, unbiased=False):
    mu = x.mean(0)
    var = x.var(0) if unbiased else ((x - mu) ** 2).mean(0)
    s = torch.sqrt(var + eps)
    return (x - mu) / s, s


def _bn_grads(dx, dy, xhat):
    return dx, (dy * xhat).sum(0), dy.sum(0)


def bnb_dropped_one_over_n(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    g = gamma * dy
    return _bn_grads((g - g.sum(0) - xhat * (g * xhat).sum(0)) / s, dy, xhat)


def bnb_forgot_gamma(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    return _bn_grads((dy - dy.mean(0) - xhat * (dy * xhat).mean(0)) / s, dy, xhat)


def bnb_sigma_constant(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    g = gamma * dy
    return _bn_grads((g - g.mean(0)) / s, dy, xhat)          # forgets that σ depends on x


def bnb_layer_norm_axis(dy, x, gamma, eps=1e-5):
    mu = x.mean(-1, keepdim=True)                              # statistics per example, not per feature
    s = torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + eps)
    xhat, g = (x - mu) / s, gamma * dy
    return _bn_grads((g - g.mean(-1, keepdim=True) - xhat * (g * xhat).mean(-1, keepdim=True)) / s, dy, xhat)


def bnb_unbiased_variance(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps, unbiased=True)
    g = gamma * dy
    return _bn_grads((g - g.mean(0) - xhat * (g * xhat).mean(0)) / s, dy, xhat)


def bnb_dgamma_without_xhat(dy, x, gamma, eps=1e-5):
    xhat, s = _bn(x, eps)
    g = gamma * dy
    dx = (g - g.mean(0) - xhat * (g * xhat).mean(0)) / s
    return dx, (dy * x).sum(0), dy.sum(0)                     # dγ needs x̂, not x


def bnb_by_autograd(dy, x, gamma, eps=1e-5):
    x = x.detach().clone().requires_grad_(True)
    g = gamma.detach().clone().requires_grad_(True)
    b = torch.zeros_like(gamma, requires_grad=True)
    F.batch_norm(x, None, None, g, b, training=True, eps=eps).backward(dy)
    return x.grad, g.grad, b.grad


WRONG_ANSWERS = {
    "ch08-layer-norm": [ln_unbiased_variance, ln_std_plus_eps, ln_per_feature, ln_without_affine],
    "ch08-rms-norm": [rms_divide_by_norm, rms_without_eps, rms_without_gain, rms_eps_outside],
    "ch08-running-stats": [running_biased_variance, running_momentum_reversed, running_per_row],
    "ch08-batch-norm-backward": [bnb_dropped_one_over_n, bnb_forgot_gamma, bnb_sigma_constant,
                                 bnb_layer_norm_axis, bnb_unbiased_variance, bnb_dgamma_without_xhat,
                                 bnb_by_autograd],
}

# answers that ask autograd: refused by the "without autograd" wrapper (tests/test_exercises_without_autograd.py)
AUTOGRAD_CHEATS = {"ch08-batch-norm-backward": [bnb_by_autograd]}


# ---------------------------------------------------------------- added with the shortcut table
def running_in_place(x, running_mean, running_var, momentum):
    running_mean.mul_(1 - momentum).add_(momentum * x.mean(0))     # the statement forbids this
    running_var.mul_(1 - momentum).add_(momentum * x.var(0))
    return running_mean, running_var


def running_in_place_clones_returned(x, running_mean, running_var, momentum):
    running_mean, running_var = running_in_place(x, running_mean, running_var, momentum)
    return running_mean.clone(), running_var.clone()


def ln_float32(x, gamma, beta, eps=1e-5):
    x = x.float()
    mu = x.mean(-1, keepdim=True)
    var = ((x - mu) ** 2).mean(-1, keepdim=True)
    return gamma.float() * (x - mu) / torch.sqrt(var + eps) + beta.float()


WRONG_ANSWERS["ch08-running-stats"] += [running_in_place, running_in_place_clones_returned]
WRONG_ANSWERS["ch08-layer-norm"] += [ln_float32]


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch08-layer-norm": [
        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
        "    return F.layer_norm(x, x.shape[-1:], gamma, beta, eps)\n",
        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
        "    ln = nn.LayerNorm(x.shape[-1], eps=eps, dtype=x.dtype)\n"
        "    with torch.no_grad():\n"
        "        ln.weight.copy_(gamma)\n"
        "        ln.bias.copy_(beta)\n"
        "    return ln(x)\n",
        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
        "    return torch.layer_norm(x, [x.shape[-1]], gamma, beta, eps)\n",
        "from mathref.norm import layer_norm\n\n"
        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
        "    return layer_norm(x, x.shape[-1], gamma, beta, eps)\n",
        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"           # one group of all features
        "    d = x.shape[-1]\n"
        "    return F.group_norm(x.reshape(-1, d), 1, gamma, beta, eps).reshape(x.shape)\n",
        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"    # LN(x) = RMSNorm(x - mean) (the
        "    c = x - x.mean(-1, keepdim=True)\n"               # eighth read's M1: the op packet
        "    return torch.ops.aten.rms_norm.default(c, [x.shape[-1]], gamma, eps) + beta\n",
    ],
    "ch08-rms-norm": [
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"
        "    return F.rms_norm(x, (x.shape[-1],), gamma, eps)\n",
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"
        "    norm = nn.RMSNorm(x.shape[-1], eps=eps, dtype=x.dtype)\n"
        "    with torch.no_grad():\n"
        "        norm.weight.copy_(gamma)\n"
        "    return norm(x)\n",
        "import mathref.norm as N\n\n"
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"
        "    return N.rms_norm(x, x.shape[-1], gamma, eps)\n",
        "from mathref.checks.ch08 import _rms_norm_oracle\n\n"
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"
        "    return _rms_norm_oracle(x, (x.shape[-1],), gamma, eps)\n",
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"          # a composite operator called as an
        "    return torch.ops.aten.rms_norm.default(x, [x.shape[-1]], gamma, eps)\n",  # overload
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"          # ... and as its packet
        "    return torch.ops.aten.rms_norm(x, [x.shape[-1]], gamma, eps)\n",
    ],
    "ch08-running-stats": [
        "def update_running_stats(x, running_mean, running_var, momentum):\n"
        "    bn = nn.BatchNorm1d(x.shape[1], momentum=momentum, dtype=x.dtype)\n"
        "    with torch.no_grad():\n"
        "        bn.running_mean.copy_(running_mean)\n"
        "        bn.running_var.copy_(running_var)\n"
        "    bn.train()(x)\n"
        "    return bn.running_mean.clone(), bn.running_var.clone()\n",
        "def update_running_stats(x, running_mean, running_var, momentum):\n"
        "    rm, rv = running_mean.clone(), running_var.clone()\n"
        "    F.batch_norm(x, rm, rv, training=True, momentum=momentum)\n"
        "    return rm, rv\n",
        "from mathref.norm import batch_norm\n\n"
        "def update_running_stats(x, running_mean, running_var, momentum):\n"
        "    rm, rv = running_mean.clone(), running_var.clone()\n"
        "    batch_norm(x, rm, rv, training=True, momentum=momentum)\n"
        "    return rm, rv\n",
    ],
    "ch08-batch-norm-backward": [
        "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"
        "    x = x.detach().clone().requires_grad_(True)\n"
        "    g = gamma.detach().clone().requires_grad_(True)\n"
        "    b = torch.zeros_like(gamma, requires_grad=True)\n"
        "    F.batch_norm(x, None, None, g, b, training=True, eps=eps).backward(dy)\n"
        "    return x.grad, g.grad, b.grad\n",
        "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"         # PyTorch's backward kernel
        "    mean = x.mean(0)\n"
        "    invstd = 1 / torch.sqrt(((x - mean) ** 2).mean(0) + eps)\n"
        "    dx, dgamma, dbeta = torch.ops.aten.native_batch_norm_backward(\n"
        "        dy, x, gamma, None, None, mean, invstd, True, eps, [True, True, True])\n"
        "    return dx, dgamma, dbeta\n",
        # central differences through F.batch_norm: no autograd, but the forward op does the work
        "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"
        "    beta = torch.zeros_like(gamma)\n"
        "    def L(x_, g_, b_):\n"
        "        return (F.batch_norm(x_, None, None, g_, b_, training=True, eps=eps) * dy).sum()\n"
        "    def diff(i, t):\n"
        "        out, h = torch.zeros_like(t), 1e-6\n"
        "        for k in range(t.numel()):\n"
        "            e = torch.zeros_like(t).flatten()\n"
        "            e[k] = h\n"
        "            e = e.reshape(t.shape)\n"
        "            args = [x, gamma, beta]\n"
        "            up, down = list(args), list(args)\n"
        "            up[i], down[i] = args[i] + e, args[i] - e\n"
        "            out.view(-1)[k] = (L(*up) - L(*down)) / (2 * h)\n"
        "        return out\n"
        "    return diff(0, x), diff(1, gamma), diff(2, beta)\n",
        "from mathref.norm import LayerNormFunction\n\n"              # LayerNorm's backward on xᵀ
        "class Ctx:\n"
        "    pass\n\n"
        "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"
        "    ctx = Ctx()\n"
        "    mu = x.mean(0)\n"
        "    s = torch.sqrt(((x - mu) ** 2).mean(0) + eps)\n"
        "    xhat = (x - mu) / s\n"
        "    ctx.saved_tensors = (xhat.T, s[:, None], None)\n"
        "    ctx.has_bias = False\n"
        "    dxT = LayerNormFunction.backward(ctx, (gamma * dy).T)[0]\n"
        "    return dxT.T, (dy * xhat).sum(0), dy.sum(0)\n",
    ],
}

# Correct solutions in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch08-layer-norm": [
        "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
        "    var, mu = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)\n"
        "    return (x - mu) * torch.rsqrt(var + eps) * gamma + beta\n",
    ],
    "ch08-rms-norm": [
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"
        "    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma\n",
        "def rms_norm_rows(x, gamma, eps=1e-5):\n"                    # via the norm: ‖x‖²/d
        "    d = x.shape[-1]\n"
        "    norm = torch.linalg.vector_norm(x, dim=-1, keepdim=True)\n"
        "    return gamma * x / torch.sqrt(norm ** 2 / d + eps)\n",
    ],
    "ch08-running-stats": [
        "def update_running_stats(x, running_mean, running_var, momentum):\n"
        "    var, mean = torch.var_mean(x, dim=0, correction=1)\n"
        "    return running_mean.lerp(mean, momentum), running_var.lerp(var, momentum)\n",
        "def update_running_stats(x, running_mean, running_var, momentum):\n"  # in place on copies
        "    new_mean, new_var = running_mean.clone(), running_var.clone()\n"
        "    new_mean.mul_(1 - momentum).add_(momentum * x.mean(0))\n"
        "    new_var.mul_(1 - momentum).add_(momentum * x.var(0))\n"
        "    return new_mean, new_var\n",
    ],
    "ch08-batch-norm-backward": [
        "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"
        "    n = x.shape[0]\n"
        "    mu = x.mean(0)\n"
        "    var = x.var(0, unbiased=False)\n"
        "    xhat = (x - mu) / torch.sqrt(var + eps)\n"
        "    dbeta, dgamma = dy.sum(0), (dy * xhat).sum(0)\n"
        "    dx = gamma / (n * torch.sqrt(var + eps)) * (n * dy - dbeta - xhat * dgamma)\n"
        "    return dx, dgamma, dbeta\n",
    ],
}


# ---------------------------------------------------------------- added after the review of ch. 8
def _bn_loss(dy, eps):
    def loss(x, g, b):                                               # a hand-written forward pass
        mu = x.mean(0)
        s = torch.sqrt(((x - mu) ** 2).mean(0) + eps)
        return ((g * (x - mu) / s + b) * dy).sum()
    return loss


def _central_differences(loss, args, steps):
    grads = []
    for i, (t, h) in enumerate(zip(args, steps)):
        out = torch.zeros_like(t)
        for k in range(t.numel()):
            e = torch.zeros_like(t)
            e.view(-1)[k] = h.expand_as(t).reshape(-1)[k]
            up, down = list(args), list(args)
            up[i], down[i] = t + e, t - e
            out.view(-1)[k] = (loss(*up) - loss(*down)) / (2 * e.view(-1)[k])
        grads.append(out)
    return tuple(grads)


def bnb_finite_differences(dy, x, gamma, eps=1e-5):
    h = torch.tensor(1e-6, dtype=x.dtype)
    return _central_differences(_bn_loss(dy, eps), [x, gamma, torch.zeros_like(gamma)], [h, h, h])


def bnb_finite_differences_scaled_step(dy, x, gamma, eps=1e-5):
    h = torch.tensor(1e-6, dtype=x.dtype)
    return _central_differences(_bn_loss(dy, eps), [x, gamma, torch.zeros_like(gamma)],
                                [1e-4 * x.std(0, unbiased=False), h, h])   # step per feature scale


WRONG_ANSWERS["ch08-batch-norm-backward"] += [bnb_finite_differences,
                                              bnb_finite_differences_scaled_step]
RIGHT_ANSWERS["ch08-batch-norm-backward"].append(
    "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"             # staged, node by node
    "    n = x.shape[0]\n"
    "    mu = x.mean(0)\n"
    "    xc = x - mu\n"
    "    var = (xc ** 2).mean(0)\n"
    "    inv = 1 / torch.sqrt(var + eps)\n"
    "    xhat = xc * inv\n"
    "    dxhat = dy * gamma\n"
    "    dvar = (dxhat * xc).sum(0) * -0.5 * inv ** 3\n"
    "    dmu = -(dxhat * inv).sum(0) + dvar * (-2 * xc).mean(0)\n"
    "    dx = dxhat * inv + dvar * 2 * xc / n + dmu / n\n"
    "    return dx, (dy * xhat).sum(0), dy.sum(0)\n")


# ---------------------------------------------------------------- added after the second review
def rms_eps_hard_coded(x, gamma, eps=1e-5):
    return gamma * x / torch.sqrt((x ** 2).mean(-1, keepdim=True) + 1e-5)    # ignores eps


def bnb_complex_step(dy, x, gamma, eps=1e-5):
    # complex-step differentiation: Im f(t + ih) / h, exact to rounding, but still a derivative
    # computed numerically instead of derived; core.without_autograd refuses complex tensors
    h = 1e-30
    loss = _bn_loss(dy, eps)
    args = [x, gamma, torch.zeros_like(gamma)]
    grads = []
    for i, t in enumerate(args):
        out = torch.zeros_like(t)
        for k in range(t.numel()):
            e = torch.zeros(t.shape, dtype=torch.complex128)
            e.view(-1)[k] = 1j * h
            shifted = [a.to(torch.complex128) for a in args]
            shifted[i] = shifted[i] + e
            out.view(-1)[k] = loss(*shifted).imag / h
        grads.append(out)
    return tuple(grads)


WRONG_ANSWERS["ch08-rms-norm"] += [rms_eps_hard_coded]
WRONG_ANSWERS["ch08-batch-norm-backward"] += [bnb_complex_step]


# ---------------------------------------------------------------- added after the second read of ch. 8
# the statement forbids running BatchNorm only: the covariance's diagonal and nanmean are allowed
RIGHT_ANSWERS["ch08-running-stats"] += [
    "def update_running_stats(x, running_mean, running_var, momentum):\n"
    "    var = torch.cov(x.T).reshape(x.shape[1], x.shape[1]).diagonal()\n"
    "    return ((1 - momentum) * running_mean + momentum * x.mean(0),\n"
    "            (1 - momentum) * running_var + momentum * var)\n",
    "def update_running_stats(x, running_mean, running_var, momentum):\n"
    "    mean = x.nanmean(0)\n"
    "    var = ((x - mean) ** 2).nansum(0) / (x.shape[0] - 1)\n"
    "    return ((1 - momentum) * running_mean + momentum * mean,\n"
    "            (1 - momentum) * running_var + momentum * var)\n",
]


# ---------------------------------------------------------------- added after the third read of ch. 8
# torch.linalg.norm of a vector is the elementary vector_norm by another name: both must pass
RIGHT_ANSWERS["ch08-rms-norm"].append(
    "def rms_norm_rows(x, gamma, eps=1e-5):\n"
    "    d = x.shape[-1]\n"
    "    return gamma * x / torch.sqrt(torch.linalg.norm(x, dim=-1, keepdim=True) ** 2 / d + eps)\n")
RIGHT_ANSWERS["ch08-layer-norm"].append(
    "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
    "    xc = x - x.mean(-1, keepdim=True)\n"
    "    var = torch.linalg.norm(xc, dim=-1, keepdim=True) ** 2 / x.shape[-1]\n"
    "    return gamma * xc / torch.sqrt(var + eps) + beta\n")


def ln_eps_hard_coded(x, gamma, beta, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    return gamma * (x - mu) / torch.sqrt(((x - mu) ** 2).mean(-1, keepdim=True) + 1e-5) + beta


WRONG_ANSWERS["ch08-layer-norm"] += [ln_eps_hard_coded]


# the statement names what the check refuses beyond autograd: the course's scalar engine and
# Python's decimal (a 60-digit difference quotient reaches rounding accuracy). A scalar engine
# pasted into the answer, or hand-written dual numbers, are not refused: the statement says so.
SHORTCUTS["ch08-batch-norm-backward"] += [
    "from mathref.autograd import Value\n\n"
    "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"
    "    n, C = x.shape\n"
    "    dx, dg, db = torch.zeros_like(x), torch.zeros_like(gamma), torch.zeros_like(gamma)\n"
    "    for c in range(C):\n"
    "        xs = [Value(float(x[i, c])) for i in range(n)]\n"
    "        g, b = Value(float(gamma[c])), Value(0.0)\n"
    "        mu = sum(xs) / n\n"
    "        s = (sum((v - mu) ** 2 for v in xs) / n + eps) ** 0.5\n"
    "        loss = sum((g * (v - mu) / s + b) * float(dy[i, c]) for i, v in enumerate(xs))\n"
    "        loss.backward()\n"
    "        for i in range(n):\n"
    "            dx[i, c] = xs[i].grad\n"
    "        dg[c], db[c] = g.grad, b.grad\n"
    "    return dx, dg, db\n",
    "from decimal import Decimal, getcontext\n\n"
    "def batch_norm_backward(dy, x, gamma, eps=1e-5):\n"
    "    getcontext().prec = 60\n"
    "    n, C = x.shape\n"
    "    X = [[Decimal(float(x[i, c])) for c in range(C)] for i in range(n)]\n"
    "    DY = [[Decimal(float(dy[i, c])) for c in range(C)] for i in range(n)]\n"
    "    G = [Decimal(float(gamma[c])) for c in range(C)]\n"
    "    def loss(X):\n"
    "        total = Decimal(0)\n"
    "        for c in range(C):\n"
    "            col = [X[i][c] for i in range(n)]\n"
    "            m = sum(col) / n\n"
    "            s = (sum((a - m) ** 2 for a in col) / n + Decimal(eps)).sqrt()\n"
    "            total += sum(G[c] * (col[i] - m) / s * DY[i][c] for i in range(n))\n"
    "        return total\n"
    "    h = Decimal('1e-25')\n"
    "    dx = torch.zeros_like(x)\n"
    "    for i in range(n):\n"
    "        for c in range(C):\n"
    "            up, down = [r[:] for r in X], [r[:] for r in X]\n"
    "            up[i][c] += h\n"
    "            down[i][c] -= h\n"
    "            dx[i, c] = float((loss(up) - loss(down)) / (2 * h))\n"
    "    mu = x.mean(0)\n"
    "    xhat = (x - mu) / torch.sqrt(((x - mu) ** 2).mean(0) + eps)\n"
    "    return dx, (dy * xhat).sum(0), dy.sum(0)\n",
]


def bnb_without_eps(dy, x, gamma, eps=1e-5):
    """s = √σ², ε left out (the fifth read: refused, but with no cause named)."""
    xhat, s = _bn(x, 0.0)
    g = gamma * dy
    return _bn_grads((g - g.mean(0) - xhat * (g * xhat).mean(0)) / s, dy, xhat)


WRONG_ANSWERS["ch08-batch-norm-backward"].append(bnb_without_eps)


def bnb_eps_outside_the_root(dy, x, gamma, eps=1e-5):
    """s = σ + ε, the pitfall of the chapter's cell 28 (the sixth read: refused with no cause)."""
    mu = x.mean(0)
    s = ((x - mu) ** 2).mean(0).sqrt() + eps
    xhat, g = (x - mu) / s, gamma * dy
    return _bn_grads((g - g.mean(0) - xhat * (g * xhat).mean(0)) / s, dy, xhat)


def bnb_eps_missing_from_dx_scale(dy, x, gamma, eps=1e-5):
    """x̂ right, but dx's 1/s without ε (the sixth read: refused with no cause)."""
    xhat, _ = _bn(x, eps)
    _, s0 = _bn(x, 0.0)
    g = gamma * dy
    return _bn_grads((g - g.mean(0) - xhat * (g * xhat).mean(0)) / s0, dy, xhat)


def bnb_mu_constant(dy, x, gamma, eps=1e-5):
    """μ treated as a constant: the − mean(g) term dropped (the seventh read: no cause named)."""
    xhat, s = _bn(x, eps)
    g = gamma * dy
    return _bn_grads((g - xhat * (g * xhat).mean(0)) / s, dy, xhat)


WRONG_ANSWERS["ch08-batch-norm-backward"] += [bnb_eps_outside_the_root, bnb_eps_missing_from_dx_scale,
                                              bnb_mu_constant]



def bnb_one_pass_variance(dy, x, gamma, eps=1e-5):
    """The derivation right, the variance as mean(x²) − μ²: it cancels on a feature whose mean is
    large against its spread (the eighth read, L2: the message blamed finite differences)."""
    mu = x.mean(0)
    s = torch.sqrt((x * x).mean(0) - mu * mu + eps)
    xhat, g = (x - mu) / s, gamma * dy
    return _bn_grads((g - g.mean(0) - xhat * (g * xhat).mean(0)) / s, dy, xhat)


def bnb_bessel_in_means(dy, x, gamma, eps=1e-5):
    """n − 1 in dx's two means (the eighth read, L4: named only as a missing 1/n)."""
    xhat, s = _bn(x, eps)
    g, m = gamma * dy, x.shape[0] - 1
    return _bn_grads((g - g.sum(0) / m - xhat * (g * xhat).sum(0) / m) / s, dy, xhat)


WRONG_ANSWERS["ch08-batch-norm-backward"] += [bnb_one_pass_variance, bnb_bessel_in_means]


# ---------------------------------------------------------------- added after the ninth read of ch. 8
def ln_one_pass_variance(x, gamma, beta, eps=1e-5):
    """The variance as mean(x²) − μ²: it cancels on tokens far from 0 against their spread (the
    eighth read, L3: accepted, while ch08-batch-norm-backward refused it)."""
    mu = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mu * mu
    return gamma * (x - mu) / torch.sqrt(var + eps) + beta


def running_one_pass_variance(x, running_mean, running_var, momentum):
    """The unbiased variance as (Σx² − nμ²)/(n − 1) (the eighth read, L3)."""
    n, mu = x.shape[0], x.mean(0)
    var = ((x * x).sum(0) - n * mu * mu) / (n - 1)
    return ((1 - momentum) * running_mean + momentum * mu,
            (1 - momentum) * running_var + momentum * var)


WRONG_ANSWERS["ch08-layer-norm"] += [ln_one_pass_variance]
WRONG_ANSWERS["ch08-running-stats"] += [running_one_pass_variance]
# numerically sound variances other than the reference's: Welford's update, and the squares
# taken after a shift by one of the values (the cancellation is then against the spread only)
RIGHT_ANSWERS["ch08-layer-norm"] += [
    "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
    "    mean = torch.zeros_like(x[..., 0])\n"
    "    m2 = torch.zeros_like(mean)\n"
    "    for k in range(x.shape[-1]):\n"
    "        delta = x[..., k] - mean\n"
    "        mean = mean + delta / (k + 1)\n"
    "        m2 = m2 + delta * (x[..., k] - mean)\n"
    "    var = (m2 / x.shape[-1])[..., None]\n"
    "    return gamma * (x - mean[..., None]) / torch.sqrt(var + eps) + beta\n",
    "def layer_norm_rows(x, gamma, beta, eps=1e-5):\n"
    "    y = x - x[..., :1]\n"
    "    m = y.mean(-1, keepdim=True)\n"
    "    var = (y * y).mean(-1, keepdim=True) - m * m\n"
    "    return gamma * (y - m) / torch.sqrt(var + eps) + beta\n",
]
RIGHT_ANSWERS["ch08-running-stats"] += [
    "def update_running_stats(x, running_mean, running_var, momentum):\n"
    "    n, y = x.shape[0], x - x[0]\n"
    "    m = y.mean(0)\n"
    "    var = ((y * y).sum(0) - n * m * m) / (n - 1)\n"
    "    return ((1 - momentum) * running_mean + momentum * (m + x[0]),\n"
    "            (1 - momentum) * running_var + momentum * var)\n",
]
