"""Typical wrong answers to chapter 7's exercises: each must fail its checker."""
import math

import numpy as np

import torch


def leaky_he_ignores_slope(fan_in, negative_slope):
    return math.sqrt(2.0 / fan_in)


def leaky_one_plus_a(fan_in, negative_slope):
    return math.sqrt(2.0 / ((1 + negative_slope) * fan_in))


def leaky_variance_not_std(fan_in, negative_slope):
    return 2.0 / ((1 + negative_slope ** 2) * fan_in)


def leaky_linear_value(fan_in, negative_slope):
    return math.sqrt(1.0 / fan_in)


def _e_tanh2(q, n=200_001):
    z = torch.linspace(-12, 12, n, dtype=torch.float64)
    density = torch.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi)
    return torch.trapezoid(torch.tanh(math.sqrt(q) * z) ** 2 * density, z).item()


def _iterate(update, steps=3000):
    q = 1.0
    for _ in range(steps):
        q = update(q)
    return q


def tanh_gain_not_squared(gain):
    return _iterate(lambda q: gain * _e_tanh2(q), steps=300) if gain > 1 else 0.0


def tanh_small_q_expansion(gain):
    return max(0.0, (gain ** 2 - 1) / (2 * gain ** 2))


def tanh_mean_squared(gain):
    # E[tanh(z)]² instead of E[tanh(z)²]: the mean of an odd function is 0
    return 0.0


def tanh_linear_map(gain):
    return gain ** 2 - 1 if gain > 1 else 0.0


def dropout_without_scaling(x, p):
    return x * (torch.rand(x.shape, dtype=x.dtype) >= p)


def dropout_scaled_by_keep(x, p):
    return x * (torch.rand(x.shape, dtype=x.dtype) >= p) * (1 - p)


def dropout_keeps_with_p(x, p):
    return x * (torch.rand(x.shape, dtype=x.dtype) < p) / (1 - p)


def dropout_exact_fraction(x, p):
    flat = x.reshape(-1)
    keep = torch.zeros(flat.numel(), dtype=torch.bool)
    keep[torch.randperm(flat.numel())[:round((1 - p) * flat.numel())]] = True
    return (flat * keep / (1 - p)).reshape(x.shape)


def residual_no_identity(jacobians, grad_out):
    g = grad_out
    for jac in reversed(jacobians):
        g = g @ jac
    return g


def residual_wrong_order(jacobians, grad_out):
    g = grad_out
    for jac in jacobians:  # multiplies J_1 first: the chain rule runs from the output backwards
        g = g @ (torch.eye(len(g), dtype=jac.dtype) + jac)
    return g


def residual_transposed(jacobians, grad_out):
    g = grad_out
    for jac in reversed(jacobians):
        g = (torch.eye(len(g), dtype=jac.dtype) + jac) @ g
    return g


WRONG_ANSWERS = {
    "ch07-leaky-relu-init": [leaky_he_ignores_slope, leaky_one_plus_a, leaky_variance_not_std,
                             leaky_linear_value],
    "ch07-tanh-fixed-point": [tanh_gain_not_squared, tanh_small_q_expansion, tanh_mean_squared,
                              tanh_linear_map],
    "ch07-inverted-dropout": [dropout_without_scaling, dropout_scaled_by_keep,
                              dropout_keeps_with_p, dropout_exact_fraction],
    "ch07-residual-backward": [residual_no_identity, residual_wrong_order, residual_transposed],
}


# ---------------------------------------------------------------- added with the shortcut table
def dropout_mask_shared_across_batch(x, p):
    keep = torch.rand(x.shape[-1], dtype=x.dtype) >= p             # one mask for every row
    return x * keep / (1 - p)


def dropout_mask_per_example(x, p):
    keep = torch.rand(x.shape[:1] + (1,) * (x.dim() - 1), dtype=x.dtype) >= p  # whole rows
    return x * keep / (1 - p)


def dropout_in_float32(x, p):
    keep = torch.rand(x.shape) >= p
    return x.float() * keep / (1 - p)                              # float32 for a float64 x


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_mask_shared_across_batch,
                                           dropout_mask_per_example, dropout_in_float32]


def dropout_float32_scale_tensor(x, p):
    # torch.tensor without dtype makes a float32 scale: 1/(1 − p) rounded to float32
    return x * (torch.rand_like(x) >= p) * torch.tensor(1 / (1 - p))


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_float32_scale_tensor]


# Solutions written as a student would, calling what the exercise re-derives (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch07-leaky-relu-init": [
        "def leaky_relu_std(fan_in, negative_slope):\n"
        "    return nn.init.calculate_gain('leaky_relu', negative_slope) / math.sqrt(fan_in)\n",
        "from torch.nn.init import calculate_gain as gain\n\n"
        "def leaky_relu_std(fan_in, negative_slope):\n"
        "    return gain('leaky_relu', negative_slope) / fan_in ** 0.5\n",
        "from mathref.deep import calculate_gain\n\n"
        "def leaky_relu_std(fan_in, negative_slope):\n"
        "    return calculate_gain('leaky_relu', negative_slope) / math.sqrt(fan_in)\n",
        "def leaky_relu_std(fan_in, negative_slope):\n"
        "    w = torch.empty(1, fan_in, dtype=torch.float64)\n"
        "    gain = torch.nn.init.calculate_gain('leaky_relu', negative_slope)\n"
        "    return gain * math.sqrt(1.0 / torch.nn.init._calculate_correct_fan(w, 'fan_in'))\n",
    ],
    "ch07-inverted-dropout": [
        "def inverted_dropout(x, p):\n"
        "    return F.dropout(x, p, training=True)\n",
        "def inverted_dropout(x, p):\n"
        "    return torch.dropout(x, p, True)\n",
        "def inverted_dropout(x, p):\n"
        "    return nn.Dropout(p).train()(x)\n",
        "from torch.nn.functional import dropout as drop\n\n"
        "def inverted_dropout(x, p):\n"
        "    return drop(x, p=p)\n",
        "from mathref.deep import dropout\n\n"
        "def inverted_dropout(x, p):\n"
        "    return dropout(x, p)\n",
        "def inverted_dropout(x, p):\n"
        "    return torch.native_dropout(x, p, True)[0]\n",
    ],
    "ch07-residual-backward": [
        "def residual_backward(jacobians, grad_out):\n"
        "    h0 = torch.zeros_like(grad_out, requires_grad=True)\n"
        "    h = h0\n"
        "    for J in jacobians:\n"
        "        h = h + h @ J.T\n"
        "    h.backward(grad_out)\n"
        "    return h0.grad\n",
        "from torch.func import vjp\n\n"
        "def residual_backward(jacobians, grad_out):\n"
        "    def net(h):\n"
        "        for J in jacobians:\n"
        "            h = h + J @ h\n"
        "        return h\n"
        "    _, pullback = vjp(net, torch.zeros_like(grad_out))\n"
        "    return pullback(grad_out)[0]\n",
        "def residual_backward(jacobians, grad_out):\n"
        "    def net(h):\n"
        "        for J in jacobians:\n"
        "            h = h + J @ h\n"
        "        return h\n"
        "    return torch.autograd.functional.vjp(net, torch.zeros_like(grad_out), grad_out)[1]\n",
    ],
    "ch07-tanh-fixed-point": [
        "from mathref.checks.ch07 import _tanh_fixed_point\n\n"
        "def tanh_fixed_point(gain):\n"
        "    return _tanh_fixed_point(gain)\n",
        "import mathref.checks.ch07 as c7\n\n"
        "def tanh_fixed_point(gain):\n"
        "    lo, hi = 1e-12, gain ** 2\n"
        "    if gain <= 1:\n"
        "        return 0.0\n"
        "    for _ in range(100):\n"
        "        mid = (lo + hi) / 2\n"
        "        lo, hi = (mid, hi) if gain ** 2 * c7._tanh_second_moment(mid) > mid else (lo, mid)\n"
        "    return (lo + hi) / 2\n",
    ],
}

# Correct solutions in other forms than the reference: each must pass
RIGHT_ANSWERS = {
    "ch07-leaky-relu-init": [
        "def leaky_relu_std(fan_in, negative_slope):\n"                 # a float32 0-D tensor
        "    return torch.sqrt(torch.tensor(2.0 / ((1 + negative_slope ** 2) * fan_in)))\n",
        "def leaky_relu_std(fan_in, negative_slope):\n"                 # gain / √fan_in
        "    gain = math.sqrt(2 / (1 + negative_slope * negative_slope))\n"
        "    return gain / math.sqrt(fan_in)\n",
        "import numpy as np\n\n"
        "def leaky_relu_std(fan_in, negative_slope):\n"                 # a float32 NumPy scalar
        "    return np.float32(np.sqrt(2.0 / ((1.0 + negative_slope ** 2) * fan_in)))\n",
    ],
    "ch07-inverted-dropout": [
        "def inverted_dropout(x, p):\n"                                 # Bernoulli mask
        "    if p == 1:\n"
        "        return torch.zeros_like(x)\n"
        "    keep = torch.bernoulli(torch.full_like(x, 1 - p))\n"
        "    return x * keep / (1 - p)\n",
        "def inverted_dropout(x, p):\n"                                 # where, rand_like, >
        "    return torch.where(torch.rand_like(x) > p, x / (1 - p), torch.zeros_like(x))\n",
    ],
    "ch07-residual-backward": [
        "def residual_backward(jacobians, grad_out):\n"
        "    g = grad_out.clone()\n"
        "    for J in jacobians[::-1]:\n"
        "        g = g + g @ J\n"
        "    return g\n",
    ],
    "ch07-tanh-fixed-point": [
        "import numpy as np\n\n"
        "def tanh_fixed_point(gain):\n"                                # Gauss–Hermite, iterate
        "    if gain <= 1:\n"
        "        return 0.0\n"
        "    z, w = np.polynomial.hermite_e.hermegauss(120)\n"
        "    q = 1.0\n"
        "    for _ in range(2000):\n"
        "        q = gain ** 2 * float(np.sum(w * np.tanh(np.sqrt(q) * z) ** 2)) / math.sqrt(2 * math.pi)\n"
        "    return q\n",
    ],
}


def residual_by_autograd(jacobians, grad_out):
    h0 = grad_out.detach().clone().zero_().requires_grad_(True)
    h = h0
    for jac in jacobians:
        h = h + jac @ h
    h.backward(grad_out)
    return h0.grad


WRONG_ANSWERS["ch07-residual-backward"] += [residual_by_autograd]

# answers that ask autograd: refused by the "without autograd" wrapper
# (tests/test_exercises_without_autograd.py)
AUTOGRAD_CHEATS = {"ch07-residual-backward": [residual_by_autograd]}


# ---------------------------------------------------------------- added after the review of ch. 7
def dropout_scale_in_float32(x, p):
    return x * ((torch.rand(x.shape) >= p) / (1 - p))               # float32 mask / (1 − p)


def residual_in_float32(jacobians, grad_out):
    g = grad_out.float()
    for jac in reversed(jacobians):
        g = g @ (torch.eye(len(g)) + jac.float())
    return g.double()                                                # float64 again, float32 digits


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_scale_in_float32]
WRONG_ANSWERS["ch07-residual-backward"] += [residual_in_float32]


# ---------------------------------------------------------------- added after the third read
def dropout_sorted_mask(x, p):
    keep = (torch.rand(x.shape, dtype=x.dtype) >= p).to(x.dtype)
    keep = keep.sort(dim=-1, descending=True).values          # right count, kept units first
    return x * keep / (1 - p)


def dropout_first_k(x, p):
    k = (torch.rand(x.shape, dtype=x.dtype) >= p).sum(-1, keepdim=True)   # Binomial count
    keep = (torch.arange(x.shape[-1]) < k).to(x.dtype)                   # the first k units
    return x * keep / (1 - p)


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_sorted_mask, dropout_first_k]


def tanh_thirty_iterations(gain):
    # the map iterated a fixed 30 times from q = 1: near gain 1 it has not converged
    return _iterate(lambda q: gain ** 2 * _e_tanh2(q), steps=30) if gain > 1 else 0.0


WRONG_ANSWERS["ch07-tanh-fixed-point"] += [tanh_thirty_iterations]

# the product of the (I + J_l) by torch's own chain-product routines (a read found them refused)
RIGHT_ANSWERS["ch07-residual-backward"] += [
    "def residual_backward(jacobians, grad_out):\n"
    "    eye = torch.eye(len(grad_out), dtype=grad_out.dtype)\n"
    "    factors = [eye + J for J in reversed(jacobians)]\n"
    "    return torch.linalg.multi_dot([grad_out[None]] + factors)[0]\n",
    "def residual_backward(jacobians, grad_out):\n"
    "    eye = torch.eye(len(grad_out), dtype=grad_out.dtype)\n"
    "    return torch.chain_matmul(grad_out[None], *[eye + J for J in reversed(jacobians)])[0]\n",
]


# ---------------------------------------------------------------- added after the sixth read
def _bisect(excess, gain):
    lo, hi = 1e-12, gain ** 2
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
    return (lo + hi) / 2


def tanh_post_activation_variance(gain):
    # the right fixed point q*, then E[h²] = E[tanh(z)²] = q*/gain² returned instead of q*
    if gain <= 1:
        return 0.0
    return _bisect(lambda q: gain ** 2 * _e_tanh2(q) - q, gain) / gain ** 2


def tanh_grid_cut_at_four(gain):
    # a 41-point grid on [−4, 4]: the tails beyond ±4 standard deviations are lost
    if gain <= 1:
        return 0.0
    z = torch.linspace(-4, 4, 41, dtype=torch.float64)
    density = torch.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi)
    e_tanh2 = lambda q: torch.trapezoid(torch.tanh(math.sqrt(q) * z) ** 2 * density, z).item()
    return _bisect(lambda q: gain ** 2 * e_tanh2(q) - q, gain)


WRONG_ANSWERS["ch07-tanh-fixed-point"] += [tanh_post_activation_variance, tanh_grid_cut_at_four]


def dropout_pair_coupled(x, p):
    # each odd entry copies its even neighbour's uniform with probability 0.25: every entry is
    # kept with probability 1 − p and the counts look Binomial, but pairs are correlated (0.25)
    u = torch.rand(x.shape, dtype=x.dtype).reshape(-1)
    pairs = u.numel() // 2
    share = torch.rand(pairs, dtype=x.dtype) < 0.25
    u[1::2][:pairs] = torch.where(share, u[0::2][:pairs], u[1::2][:pairs])
    return x * (u.reshape(x.shape) >= p) / (1 - p)


def dropout_far_coupled(x, p):
    # the last dimension's second half copies the first half's uniforms with probability 0.25
    u = torch.rand(x.shape, dtype=x.dtype)
    half = x.shape[-1] // 2
    share = torch.rand(x.shape[:-1] + (half,), dtype=x.dtype) < 0.25
    u[..., half:2 * half] = torch.where(share, u[..., :half], u[..., half:2 * half])
    return x * (u >= p) / (1 - p)


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_pair_coupled, dropout_far_coupled]


# ---------------------------------------------------------------- added with the eighth read (L7, L8)
def tanh_q_as_std(gain):
    # z = q·u instead of √q·u: gain²·E[tanh(q·u)²] − q is negative for every small q, so the
    # bisection slides to its lower end, the trivial fixed point 0
    if gain <= 1:
        return 0.0
    lo, hi = 1e-12, gain ** 2
    z = torch.linspace(-10, 10, 20_001, dtype=torch.float64)
    density = torch.exp(-z ** 2 / 2) / math.sqrt(2 * math.pi)
    for _ in range(100):
        mid = (lo + hi) / 2
        excess = gain ** 2 * torch.trapezoid(torch.tanh(mid * z) ** 2 * density, z).item() - mid
        lo, hi = (mid, hi) if excess > 0 else (lo, mid)
    return (lo + hi) / 2


def dropout_private_fixed_generator(x, p):
    # a generator seeded afresh on every call: random across units, the same mask on every call
    generator = torch.Generator().manual_seed(123)
    return x * (torch.rand(x.shape, dtype=x.dtype, generator=generator) >= p) / (1 - p)


def dropout_reseeds_global(x, p):
    torch.manual_seed(0)                                          # the same mask on every call
    return x * (torch.rand(x.shape, dtype=x.dtype) >= p) / (1 - p)


WRONG_ANSWERS["ch07-tanh-fixed-point"] += [tanh_q_as_std]
WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_private_fixed_generator, dropout_reseeds_global]


# ---------------------------------------------------------------- added with the ninth read (M2, L2-L4)
def tanh_gauss_hermite_60(gain):
    # the statement's Gauss–Hermite quadrature with a textbook 60 nodes: at gain 4 (q* ≈ 12.5)
    # tanh(√q·u)² is nearly a step and the rule is about 1% off
    if gain <= 1:
        return 0.0
    z, w = np.polynomial.hermite_e.hermegauss(60)
    e_tanh2 = lambda q: float(np.sum(w * np.tanh(math.sqrt(q) * z) ** 2)) / math.sqrt(2 * math.pi)
    return _bisect(lambda q: gain ** 2 * e_tanh2(q) - q, gain)


def dropout_numpy_mask(x, p):
    # right in law, but drawn from NumPy's generator: torch.manual_seed does not repeat it
    keep = torch.from_numpy(np.random.rand(*x.shape) >= p)
    return x * keep / (1 - p)


def dropout_nan_at_p_one(x, p):
    # the usual formula: at p = 1 it is x·0/0, NaN
    keep = torch.rand(x.shape, dtype=x.dtype) >= p
    return x * keep / (1 - p)


WRONG_ANSWERS["ch07-tanh-fixed-point"] += [tanh_gauss_hermite_60]
WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_numpy_mask, dropout_nan_at_p_one]


# ---------------------------------------------------------------- added with the eleventh read (M1, L1)
def dropout_scales_positive_survivors(x, p):
    # the post-ReLU habit: scale the entries that are still > 0; a kept negative entry is left
    # unscaled (at x = −1, p = 0.5 the mean output is −0.5, not −1)
    y = x * (torch.rand(x.shape, dtype=x.dtype) >= p)
    y[y > 0] = y[y > 0] / (1 - p)
    return y


def dropout_drops_negatives(x, p):
    # keeps an entry only where x·mask > 0: every negative entry is zeroed (x itself at p = 0)
    if p == 0:
        return x
    keep = torch.rand(x.shape, dtype=x.dtype) >= p
    return torch.where(x * keep > 0, x / (1 - p), torch.zeros_like(x))


def dropout_never_drops_negatives(x, p):
    # a mask that keeps every negative entry: E[y] = x/(1 − p) there, not x
    if p == 1:
        return torch.zeros_like(x)
    keep = (torch.rand(x.shape, dtype=x.dtype) >= p) | (x < 0)
    return x * keep / (1 - p)


def dropout_p_in_tenths(x, p):
    # the keep probability rounded to tenths: right at p = 0.1, 0.5, 0.8, 20% dropped at p = 0.25
    if p == 1:
        return torch.zeros_like(x)
    keep = torch.randint(0, 10, x.shape) >= round(10 * p)
    return x * keep / (1 - p)


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_scales_positive_survivors,
                                           dropout_drops_negatives, dropout_never_drops_negatives,
                                           dropout_p_in_tenths]


# ---------------------------------------------------------------- added with the fifteenth read (L3)
def dropout_exact_fraction_on_negatives(x, p):
    # independent draws on the positive entries, but exactly a fraction p of the negative ones
    # dropped (a permutation): the right zero fraction by sign, yet the negative entries are not
    # dropped independently
    if p == 1:
        return torch.zeros_like(x)
    keep = (torch.rand(x.shape, dtype=x.dtype) >= p).reshape(-1)
    negative = (x.reshape(-1) < 0).nonzero().flatten()
    if len(negative):
        order = negative[torch.randperm(len(negative))]
        k = round((1 - p) * len(negative))
        keep[order[:k]], keep[order[k:]] = True, False
    return x * keep.reshape(x.shape) / (1 - p)


def dropout_by_magnitude(x, p):
    # a drop probability that depends on |x|: p + ½·min(p, 1 − p)·P₃(2(|x| − 1)), P₃ the Legendre
    # polynomial. P₃ is orthogonal to 1 and to |x| on |x| ~ U[0.5, 1.5) and vanishes at |x| = 1, so
    # the zero fraction, the mean of y and the counts of ten units of x = 1 all come out right,
    # while entries with |x| near 1.5 are dropped more often than those near 0.5
    if p == 1:
        return torch.zeros_like(x)
    u = (2 * (x.abs() - 1)).clamp(-1, 1)
    drop = p + 0.5 * min(p, 1 - p) * (5 * u ** 3 - 3 * u) / 2
    return x * (torch.rand(x.shape, dtype=x.dtype) >= drop) / (1 - p)


def dropout_p_in_twentieths(x, p):
    # the keep probability rounded to twentieths: off on both signs alike, not a sign dependence
    if p == 1:
        return torch.zeros_like(x)
    keep = torch.randint(0, 20, x.shape) >= round(20 * p)
    return x * keep / (1 - p)


def dropout_epsilon_in_scale(x, p):
    # 1/(1 − p + 1e-8): a float64 scale, off by about 1e-8 relative, nothing rounded to float32
    keep = torch.rand(x.shape, dtype=x.dtype) >= p
    return x * keep / (1 - p + 1e-8)


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_exact_fraction_on_negatives, dropout_by_magnitude,
                                           dropout_p_in_twentieths, dropout_epsilon_in_scale]


def dropout_bin_orthogonal(x, p):
    # a drop probability p + (min(p, 1 − p)/1.5)·g(|x| − ½), g(u) = sin(16πu) − ½ sin(8πu): g
    # integrates to 0 on each quarter of |x| ∈ [0.5, 1.5), is orthogonal to u there and vanishes at
    # |x| = 1, so the four quarter bins, the mean of y and ten units of ±1 all come out right
    if p == 1:
        return torch.zeros_like(x)
    u = x.abs() - 0.5
    g = torch.sin(16 * math.pi * u) - 0.5 * torch.sin(8 * math.pi * u)
    drop = p + min(p, 1 - p) / 1.5 * g
    return x * (torch.rand(x.shape, dtype=x.dtype) >= drop) / (1 - p)


def dropout_high_frequency(x, p):
    # p ± 0.8·min(p, 1 − p) by the parity of the thousandths of |x| (exactly p where 1000|x| is an
    # integer, as for x = ±1): right on average over any bin of |x|, wrong entry by entry
    if p == 1:
        return torch.zeros_like(x)
    thousandths = torch.floor(1000 * x.abs())
    on_grid = 1000 * x.abs() == thousandths
    sign = torch.where(thousandths % 2 == 0, 1.0, -1.0).to(x.dtype)
    drop = torch.where(on_grid, torch.full_like(x, p), p + 0.8 * min(p, 1 - p) * sign)
    return x * (torch.rand(x.shape, dtype=x.dtype) >= drop) / (1 - p)


def dropout_epsilon_1e6_in_scale(x, p):
    # 1/(1 − p + 1e-6): off by about 1e-6 relative, just outside rtol 1e-6
    keep = torch.rand(x.shape, dtype=x.dtype) >= p
    return x * keep / (1 - p + 1e-6)


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_bin_orthogonal, dropout_high_frequency,
                                           dropout_epsilon_1e6_in_scale]


# chapter 7's ninth read, L2: the same two masks, honest at p = 0.5 (where the χ² test ran)
def dropout_bin_orthogonal_not_half(x, p):
    if p == 0.5:
        return x * (torch.rand(x.shape, dtype=x.dtype) >= p) / (1 - p)
    return dropout_bin_orthogonal(x, p)


def dropout_high_frequency_not_half(x, p):
    if p == 0.5:
        return x * (torch.rand(x.shape, dtype=x.dtype) >= p) / (1 - p)
    return dropout_high_frequency(x, p)


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_bin_orthogonal_not_half,
                                           dropout_high_frequency_not_half]


# the delta read of the fix: the mask looking at x only at p < 0.5 (only the drawn p above ½ was
# tested besides 0.5), or at any size of x but the one the χ² test used (1000 entries)
def dropout_high_frequency_below_half(x, p):
    if p >= 0.5:
        return x * (torch.rand(x.shape, dtype=x.dtype) >= p) / (1 - p)
    return dropout_high_frequency(x, p)


def dropout_high_frequency_unless_1000(x, p):
    if x.numel() == 1000:
        return x * (torch.rand(x.shape, dtype=x.dtype) >= p) / (1 - p)
    return dropout_high_frequency(x, p)


WRONG_ANSWERS["ch07-inverted-dropout"] += [dropout_high_frequency_below_half,
                                           dropout_high_frequency_unless_1000]
