"""Typical wrong answers to chapter 1's exercises: each must fail its checker."""
import math

import torch


def forward_difference(f, x, h):
    return (f(x + h) - f(x)) / h


def central_without_two(f, x, h):
    return (f(x + h) - f(x - h)) / h


def central_sign_flipped(f, x, h):
    return (f(x - h) - f(x + h)) / (2 * h)


def gd_plus_sign(df, x0, lr, steps):
    xs = [x0]
    for _ in range(steps):
        xs.append(xs[-1] + lr * df(xs[-1]))
    return xs


def gd_missing_start(df, x0, lr, steps):
    xs, x = [], x0
    for _ in range(steps):
        x = x - lr * df(x)
        xs.append(x)
    return xs


def gd_one_step_short(df, x0, lr, steps):       # starts with x0, runs steps − 1 updates
    xs = [x0]
    for _ in range(steps - 1):
        xs.append(xs[-1] - lr * df(xs[-1]))
    return xs


def gd_gradient_at_start_only(df, x0, lr, steps):
    g = df(x0)
    return [x0 - k * lr * g for k in range(steps + 1)]


def steps_float_not_ceiled(x0, lr, tol):
    r = abs(1 - 2 * lr)
    if r >= 1:
        return math.inf
    return math.log(tol / abs(x0)) / math.log(r) if r > 0 else 1


def steps_no_divergence_case(x0, lr, tol):
    if abs(x0) <= tol:
        return 0
    r = abs(1 - 2 * lr)
    if r == 0:
        return 1
    return math.ceil(math.log(tol / abs(x0)) / math.log(r))


def steps_off_by_one(x0, lr, tol):
    r = abs(1 - 2 * lr)
    if r >= 1:
        return math.inf
    if r == 0:
        return 1
    return math.floor(math.log(tol / abs(x0)) / math.log(r)) + 1


def steps_divergence_tested_on_lr(x0, lr, tol):   # lr >= 1 instead of |1 − 2η| ≥ 1: η = 0 breaks
    if abs(x0) <= tol:
        return 0
    if lr == 0.5:
        return 1
    if lr >= 1:
        return math.inf
    return _settled(x0, abs(1 - 2 * lr), tol)


def _steps_from_logs(x0, lr, tol, slack=0.0):
    """ceil(log(tol/|x0|) / log r − slack): the closed form computed in floating point."""
    if abs(x0) <= tol:
        return 0
    r = abs(1 - 2 * lr)
    if r == 0:
        return 1
    if r >= 1:
        return math.inf
    return math.ceil(math.log(tol / abs(x0)) / math.log(r) - slack)


def steps_ceil_of_logs(x0, lr, tol):   # right except at a tie: x0 = 1, η = 0.25, tol = 2⁻²⁹ gives 30
    return _steps_from_logs(x0, lr, tol)


def steps_ceil_with_epsilon(x0, lr, tol):   # the tie "fixed" by an epsilon: 29 for tol = 2⁻²⁹(1 − 2⁻⁴⁰)
    return _steps_from_logs(x0, lr, tol, slack=1e-9)


def steps_by_running_descent(x0, lr, tol):   # runs gradient descent: 2·10¹⁰ steps for η = 2⁻³⁴
    if abs(1 - 2 * lr) >= 1 and abs(x0) > tol:
        return math.inf
    x, k = x0, 0
    while abs(x) > tol:
        x -= lr * 2 * x
        k += 1
    return k


def steps_by_multiplying(x0, lr, tol):       # the closed form, one multiplication per step
    r, size, k = abs(1 - 2 * lr), abs(x0), 0
    if size > tol and r >= 1:
        return math.inf
    while size > tol:
        size, k = size * r, k + 1
    return k


def steps_by_recursion(x0, lr, tol, k=0):   # one call per step: right on small cases, not 2·10¹⁰ deep
    if abs(x0) <= tol:
        return k
    r = abs(1 - 2 * lr)
    if r == 0:
        return k + 1
    if r >= 1:
        return math.inf
    return steps_by_recursion(abs(x0) * r, lr, tol, k + 1)


def _eigenvalues(H):
    lam = torch.linalg.eigvalsh(H)
    return float(lam.min()), float(lam.max())


def step_stability_bound(H):          # 2/λ_max: the edge of divergence, not the best step
    lo, hi = _eigenvalues(H)
    return 2 / hi, abs(1 - 2 / hi * lo)


def step_one_over_lmax(H):            # the safe default 1/λ_max of chapter 2
    lo, hi = _eigenvalues(H)
    return 1 / hi, 1 - lo / hi


def step_from_trace(H):               # 2/tr(H) equals 2/(λ_min + λ_max) only in two dimensions
    lo, hi = _eigenvalues(H)
    return 2 / float(torch.trace(H)), (hi - lo) / (hi + lo)


def step_rate_wrong(H):               # the right step, the factor of 1/λ_max
    lo, hi = _eigenvalues(H)
    return 2 / (lo + hi), (hi - lo) / hi


def step_from_entries(H):             # the smallest and largest entries are not the eigenvalues
    lo, hi = float(H.min()), float(H.max())
    return 2 / (lo + hi), abs(hi - lo) / abs(hi + lo)


def step_from_diagonal(H):            # reads curvatures off the diagonal (only right if H is diagonal)
    lo, hi = float(H.diagonal().min()), float(H.diagonal().max())
    return 2 / (lo + hi), (hi - lo) / (hi + lo)


def step_float32_eigenvalues(H):     # the right formula, eigenvalues computed in float32
    lam = torch.linalg.eigvalsh(H.float())
    lo, hi = float(lam.min()), float(lam.max())
    return 2 / (lo + hi), (hi - lo) / (hi + lo)


WRONG_ANSWERS = {
    "ch01-central-difference": [forward_difference, central_without_two, central_sign_flipped],
    "ch01-gradient-descent-loop": [gd_plus_sign, gd_missing_start, gd_one_step_short,
                                   gd_gradient_at_start_only],
    "ch01-best-constant-step": [step_stability_bound, step_one_over_lmax, step_from_trace,
                                step_rate_wrong, step_from_diagonal, step_from_entries,
                                step_float32_eigenvalues],
    "ch01-steps-to-tolerance": [steps_float_not_ceiled, steps_no_divergence_case,
                                steps_off_by_one, steps_ceil_of_logs, steps_ceil_with_epsilon,
                                steps_by_running_descent, steps_by_multiplying,
                                steps_by_recursion, steps_divergence_tested_on_lr],
}


# Solutions written as a student would, calling what the exercise asks them to write (tests/test_shortcuts.py)
SHORTCUTS = {
    "ch01-central-difference": [
        "from mathref.calculus import numerical_derivative\n\n"
        "def central_difference(f, x, h):\n"
        "    return numerical_derivative(f, x, h, method=\"central\")\n",
        "import mathref.calculus as calc\n\n"
        "def central_difference(f, x, h):\n"
        "    return calc.numerical_derivative(f, x, h=h)\n",
        "import torch\n"
        "from mathref.calculus import numerical_gradient as grad_fd\n\n"
        "def central_difference(f, x, h):\n"
        "    t = torch.tensor([float(x)], dtype=torch.float64)\n"
        "    return grad_fd(lambda v: f(v.item()), t, h=h).item()\n",
    ],
    "ch01-gradient-descent-loop": [
        "from mathref.calculus import gradient_descent as gd\n\n"
        "def gradient_descent_1d(df, x0, lr, steps):\n"
        "    return gd(df, x0, lr, steps).tolist()\n",
        "import torch\n\n"
        "def gradient_descent_1d(df, x0, lr, steps):\n"
        "    x = torch.tensor(float(x0), dtype=torch.float64, requires_grad=True)\n"
        "    opt = torch.optim.SGD([x], lr=lr)\n"
        "    xs = [x0]\n"
        "    for _ in range(steps):\n"
        "        x.grad = torch.tensor(df(x.item()), dtype=torch.float64)\n"
        "        opt.step()\n"
        "        xs.append(x.item())\n"
        "    return xs\n",
    ],
    "ch01-steps-to-tolerance": [
        "import math\n"
        "import mathref\n\n"
        "def steps_to_tolerance(x0, lr, tol):\n"
        "    xs = mathref.calculus.gradient_descent(lambda x: 2 * x, x0, lr, 2000)\n"
        "    hits = (xs.abs() <= tol).nonzero()\n"
        "    return int(hits[0]) if len(hits) else math.inf\n",
    ],
    "ch01-best-constant-step": [
        # a numerical search for the step: minimize ρ(η) by gradient descent with autograd
        "import torch\n\n"
        "def best_constant_step(H):\n"
        "    lam = torch.linalg.eigvalsh(H)\n"
        "    eta = torch.tensor(1.0 / lam[-1].item(), dtype=torch.float64, requires_grad=True)\n"
        "    opt = torch.optim.SGD([eta], lr=1e-3)\n"
        "    for _ in range(2000):\n"
        "        opt.zero_grad()\n"
        "        (1 - eta * lam).abs().max().backward()\n"
        "        opt.step()\n"
        "    return eta.item(), (1 - eta * lam).abs().max().item()\n",
        # the same search with mathref's loop and a finite-difference slope
        "import torch\n"
        "from mathref.calculus import gradient_descent, numerical_derivative\n\n"
        "def best_constant_step(H):\n"
        "    lam = torch.linalg.eigvalsh(H).tolist()\n"
        "    rho = lambda eta: max(abs(1 - eta * l) for l in lam)\n"
        "    path = gradient_descent(lambda e: numerical_derivative(rho, float(e)), 1 / lam[-1],\n"
        "                            1e-3, 2000)\n"
        "    return path[-1].item(), rho(path[-1].item())\n",
    ],
}

# Right answers in other forms than the reference solution: each must pass.
RIGHT_ANSWERS = {
    "ch01-central-difference": [
        "def central_difference(f, x, h):\n"
        "    return 0.5 * (f(x + h) - f(x - h)) / h\n",
        # the mean of the forward and backward quotients is the central quotient
        "def central_difference(f, x, h):\n"
        "    forward = (f(x + h) - f(x)) / h\n"
        "    backward = (f(x) - f(x - h)) / h\n"
        "    return (forward + backward) / 2\n",
    ],
    "ch01-gradient-descent-loop": [
        # a float64 tensor of iterates instead of a list
        "import torch\n\n"
        "def gradient_descent_1d(df, x0, lr, steps):\n"
        "    xs = torch.empty(steps + 1, dtype=torch.float64)\n"
        "    xs[0] = x0\n"
        "    for k in range(steps):\n"
        "        xs[k + 1] = xs[k] - lr * df(xs[k].item())\n"
        "    return xs\n",
        "def gradient_descent_1d(df, x0, lr, steps):\n"
        "    x, xs = x0, [x0]\n"
        "    while len(xs) <= steps:\n"
        "        x -= lr * df(x)\n"
        "        xs.append(x)\n"
        "    return xs\n",
    ],
    "ch01-steps-to-tolerance": [
        # float('inf') and a whole float are fine
        "import math\n\n"
        "def steps_to_tolerance(x0, lr, tol):\n"
        "    r = abs(1 - 2 * lr)\n"
        "    if abs(x0) <= tol:\n"
        "        return 0\n"
        "    if r == 0:\n"
        "        return 1.0\n"
        "    if r >= 1:\n"
        "        return float('inf')\n"
        "    k = math.ceil((math.log(tol) - math.log(abs(x0))) / math.log(r))\n"
        "    while k > 0 and abs(x0) * r ** (k - 1) <= tol:   # the logarithms are rounded\n"
        "        k -= 1\n"
        "    while abs(x0) * r ** k > tol:\n"
        "        k += 1\n"
        "    return float(k)\n",
        # in torch: a 0-d tensor holding the count
        "import math\n"
        "import torch\n\n"
        "def steps_to_tolerance(x0, lr, tol):\n"
        "    r = torch.tensor(abs(1 - 2 * lr), dtype=torch.float64)\n"
        "    if abs(x0) <= tol:\n"
        "        return 0\n"
        "    if r == 0:\n"
        "        return 1\n"
        "    if r >= 1:\n"
        "        return math.inf\n"
        "    k = torch.ceil(torch.log(torch.tensor(tol / abs(x0), dtype=torch.float64)) / torch.log(r)).long()\n"
        "    if k > 0 and abs(x0) * r ** (k - 1) <= tol:       # a tie that the logarithms rounded up\n"
        "        k = k - 1\n"
        "    elif abs(x0) * r ** k > tol:                      # a near-tie they rounded down\n"
        "        k = k + 1\n"
        "    return k\n",
    ],
    "ch01-best-constant-step": [
        # singular values of a symmetric positive definite H are its eigenvalues (descending)
        "import torch\n\n"
        "def best_constant_step(H):\n"
        "    s = torch.linalg.svdvals(H)\n"
        "    hi, lo = s[0], s[-1]\n"
        "    return 2 / (lo + hi), (hi - lo) / (hi + lo)\n",
        # through the condition number κ = λ_max/λ_min
        "import torch\n\n"
        "def best_constant_step(H):\n"
        "    lam = torch.linalg.eigvalsh(H)\n"
        "    kappa = (lam[-1] / lam[0]).item()\n"
        "    return 2.0 / (lam[0].item() + lam[-1].item()), (kappa - 1) / (kappa + 1)\n",
    ],
}


# The same shortcuts as functions: each must fail its checker (they are in WRONG_ANSWERS too).
def central_by_mathref(f, x, h):
    from mathref.calculus import numerical_derivative
    return numerical_derivative(f, x, h)


def gd_by_mathref(df, x0, lr, steps):
    from mathref.calculus import gradient_descent
    return gradient_descent(df, x0, lr, steps).tolist()


WRONG_ANSWERS["ch01-central-difference"].append(central_by_mathref)
WRONG_ANSWERS["ch01-gradient-descent-loop"].append(gd_by_mathref)


def steps_ceil_of_log2(x0, lr, tol):    # exact at ties with r = 1/2; 4 for x0 = 1, η = 0.125, tol = 0.75³
    if abs(x0) <= tol:
        return 0
    r = abs(1 - 2 * lr)
    if r == 0:
        return 1
    if r >= 1:
        return math.inf
    return math.ceil(math.log2(tol / abs(x0)) / math.log2(r))


def steps_settled_downward_only(x0, lr, tol):  # 5 for tol one rounding unit below 2⁻⁵ (η = 0.25)
    k = _steps_from_logs(x0, lr, tol)
    if k in (0, 1, math.inf):
        return k
    r = abs(1 - 2 * lr)
    while k > 0 and abs(x0) * r ** (k - 1) <= tol:
        k -= 1
    return k


def steps_settled_with_strict_comparison(x0, lr, tol):   # |x_k| < tol: one too many at a tie
    k = _steps_from_logs(x0, lr, tol)
    if k in (0, 1, math.inf):
        return k
    r = abs(1 - 2 * lr)
    while k > 0 and abs(x0) * r ** (k - 1) < tol:
        k -= 1
    while abs(x0) * r ** k >= tol:
        k += 1
    return k


def steps_without_absolute_values(x0, lr, tol):   # log of 1 − 2η < 0 for η > 0.5
    if abs(x0) <= tol:
        return 0
    r = 1 - 2 * lr
    if r == 0:
        return 1
    if abs(r) >= 1:
        return math.inf
    return math.ceil(math.log(tol / abs(x0)) / math.log(r))


def steps_float32_logs_settled(x0, lr, tol):   # float32 rounds 1 − 2⁻³³ to 1: log r = 0
    if abs(x0) <= tol:
        return 0
    r = abs(1 - 2 * lr)
    if r == 0:
        return 1
    if r >= 1:
        return math.inf
    k = math.ceil((torch.log(torch.tensor(tol / abs(x0))) / torch.log(torch.tensor(r))).item())
    while k > 0 and abs(x0) * r ** (k - 1) <= tol:
        k -= 1
    while abs(x0) * r ** k > tol:
        k += 1
    return k


WRONG_ANSWERS["ch01-steps-to-tolerance"] += [
    steps_ceil_of_log2, steps_settled_downward_only, steps_settled_with_strict_comparison,
    steps_without_absolute_values, steps_float32_logs_settled]


def central_difference_float32(f, x, h):   # float32: 6.760001183 for 6.76
    x = torch.tensor(x, dtype=torch.float32)
    return (f(x + h) - f(x - h)) / (2 * h)


def gd_float32(df, x0, lr, steps):          # float32 iterates: 2.400000095 for 2.4
    xs = [torch.tensor(x0, dtype=torch.float32)]
    for _ in range(steps):
        xs.append(xs[-1] - lr * df(xs[-1]))
    return xs


def gd_accumulated_gradient(df, x0, lr, steps):   # a gradient summed over the steps, never reset
    xs, total = [x0], 0.0
    for _ in range(steps):
        total += df(xs[-1])
        xs.append(xs[-1] - lr * total)
    return xs


WRONG_ANSWERS["ch01-central-difference"].append(central_difference_float32)
WRONG_ANSWERS["ch01-gradient-descent-loop"] += [gd_float32, gd_accumulated_gradient]


def central_derivative_plus_h_squared(f, x, h):   # exact on x³ (3x² + h²), not the quotient elsewhere
    return (f(x + 1e-5) - f(x - 1e-5)) / 2e-5 + h * h


def _settled(x0, r, tol):
    """The closed form's ceiling, settled by exact comparisons |x0|·r^k ≤ tol (0 < r < 1)."""
    k = math.ceil(math.log(tol / abs(x0)) / math.log(r))
    while k > 0 and abs(x0) * r ** (k - 1) <= tol:
        k -= 1
    while abs(x0) * r ** k > tol:
        k += 1
    return k


def steps_special_cases_in_wrong_order(x0, lr, tol):   # inf for x0 = 0.5, η = 1, tol = 1: should be 0
    r = abs(1 - 2 * lr)
    if r >= 1:
        return math.inf
    if r == 0:
        return 1
    if abs(x0) <= tol:
        return 0
    return _settled(x0, r, tol)


WRONG_ANSWERS["ch01-central-difference"].append(central_derivative_plus_h_squared)
WRONG_ANSWERS["ch01-steps-to-tolerance"].append(steps_special_cases_in_wrong_order)


def steps_strict_first_test(x0, lr, tol):   # |x0| < tol first: inf for x0 = -0.5, η = 1.5, tol = 0.5
    if abs(x0) < tol:
        return 0
    r = abs(1 - 2 * lr)
    if r == 0:
        return 1
    if r >= 1:
        return math.inf
    return _settled(x0, r, tol)


def steps_floor_plus_one(x0, lr, tol):   # floor + 1 for the ceiling: one too many at every tie
    return 0 if abs(x0) <= tol else steps_off_by_one(x0, lr, tol)


WRONG_ANSWERS["ch01-steps-to-tolerance"] += [steps_strict_first_test, steps_floor_plus_one]


def steps_settled_up_without_abs(x0, lr, tol):   # (1 − 2η)^k, not |1 − 2η|^k, in the upward settle
    # read 8's L3: for 1 − 2η < 0 and an odd k the power is negative and the settle never steps
    # up: 5 for x0 = 1, η = 0.75, tol one rounding unit below 2⁻⁵ (the answer is 6)
    if abs(x0) <= tol:
        return 0
    r = 1 - 2 * lr
    if r == 0:
        return 1
    if abs(r) >= 1:
        return math.inf
    k = math.ceil(math.log(tol / abs(x0)) / math.log(abs(r)))
    while k > 0 and abs(x0) * abs(r) ** (k - 1) <= tol:
        k -= 1
    while abs(x0) * r ** k > tol:
        k += 1
    return k


WRONG_ANSWERS["ch01-steps-to-tolerance"] += [steps_settled_up_without_abs]

# read 8's L1 and L2: PyTorch's own central difference (torch.autograd.gradcheck's numerical
# helpers, the private and the deprecated public form) and SGD's kernels or ASGD as plain SGD
SHORTCUTS["ch01-central-difference"] += [
    "import importlib\n"
    "import torch\n\n"
    "def central_difference(f, x, h):\n"
    "    gc = importlib.import_module('torch.autograd.gradcheck')\n"
    "    t = torch.tensor(float(x), dtype=torch.float64, requires_grad=True)\n"
    "    fn = lambda u: torch.tensor(f(u.item()), dtype=torch.float64)\n"
    "    return gc._get_numerical_jacobian(fn, (t,), eps=h)[0][0].reshape(-1)[0].item()\n",
    "import importlib\n"
    "import torch\n\n"
    "def central_difference(f, x, h):\n"
    "    gc = importlib.import_module('torch.autograd.gradcheck')\n"
    "    t = torch.tensor(float(x), dtype=torch.float64, requires_grad=True)\n"
    "    fn = lambda inputs: torch.tensor(f(inputs[0].item()), dtype=torch.float64)\n"
    "    return gc.get_numerical_jacobian(fn, (t,), eps=h)[0].reshape(-1)[0].item()\n",
]
SHORTCUTS["ch01-gradient-descent-loop"] += [
    "import importlib\n"
    "import torch\n\n"
    "def gradient_descent_1d(df, x0, lr, steps):\n"
    "    sgd = importlib.import_module('torch.optim.sgd')\n"
    "    p, xs = torch.tensor(float(x0), dtype=torch.float64), [x0]\n"
    "    for _ in range(steps):\n"
    "        g = torch.tensor(df(p.item()), dtype=torch.float64)\n"
    "        sgd._single_tensor_sgd([p], [g], [None], grad_scale=None, found_inf=None,\n"
    "                               weight_decay=0.0, momentum=0.0, lr=lr, dampening=0.0,\n"
    "                               nesterov=False, maximize=False, has_sparse_grad=False)\n"
    "        xs.append(p.item())\n"
    "    return xs\n",
    # ASGD with lambd = 0 (and no averaging) is plain SGD; float64 state for η
    "import torch\n\n"
    "def gradient_descent_1d(df, x0, lr, steps):\n"
    "    old = torch.get_default_dtype()\n"
    "    torch.set_default_dtype(torch.float64)\n"
    "    try:\n"
    "        p = torch.nn.Parameter(torch.tensor(float(x0), dtype=torch.float64))\n"
    "        opt, xs = torch.optim.ASGD([p], lr=lr, lambd=0, alpha=0, t0=1e12), [x0]\n"
    "        for _ in range(steps):\n"
    "            p.grad = torch.tensor(df(p.item()), dtype=torch.float64)\n"
    "            opt.step()\n"
    "            xs.append(p.item())\n"
    "        return xs\n"
    "    finally:\n"
    "        torch.set_default_dtype(old)\n",
]


def gd_float32_items(df, x0, lr, steps):    # float32 (torch.tensor's default) handed back as floats
    x, xs = torch.tensor(x0), [x0]
    for _ in range(steps):
        x = x - lr * df(x.item())
        xs.append(x.item())
    return xs


def step_by_ternary_search(H):   # a search on ρ(η) that stops at relative tolerance 1e-6
    lam = torch.linalg.eigvalsh(H).tolist()
    rho = lambda eta: max(abs(1 - eta * l) for l in lam)
    a, b = 0.0, 2 / lam[-1]
    while b - a > 1e-6 * b:
        m1, m2 = a + (b - a) / 3, b - (b - a) / 3
        a, b = (a, m2) if rho(m1) < rho(m2) else (m1, b)
    eta = (a + b) / 2
    return eta, rho(eta)


WRONG_ANSWERS["ch01-gradient-descent-loop"].append(gd_float32_items)
WRONG_ANSWERS["ch01-best-constant-step"].append(step_by_ternary_search)


def central_difference_float32_items(f, x, h):   # float32 (torch.tensor's default) as a float
    return ((f(torch.tensor(x + h)) - f(torch.tensor(x - h))) / (2 * h)).item()


def central_difference_float32_float(f, x, h):   # the same, through float()
    return float((f(torch.tensor(x + h)) - f(torch.tensor(x - h))) / (2 * h))


WRONG_ANSWERS["ch01-central-difference"] += [central_difference_float32_items,
                                             central_difference_float32_float]
