"""mathref.optim against torch.optim, torch.nn.utils and closed forms, in float64."""
import itertools
import math

import pytest
import torch

from mathref import optim

STEPS = 100
TOL = 1e-12


def _problem(device, seed=0):
    """Two parameter tensors of different shapes and a smooth, non-quadratic loss."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(4, 3, generator=gen, dtype=torch.float64)
    b = torch.randn(3, generator=gen, dtype=torch.float64)
    x = torch.randn(16, 4, generator=gen, dtype=torch.float64)
    y = torch.randn(16, 3, generator=gen, dtype=torch.float64)
    return [w.to(device), b.to(device)], x.to(device), y.to(device)


def _loss(params, x, y):
    w, b = params
    return ((torch.tanh(x @ w + b) - y) ** 2).mean() + 0.1 * (w ** 4).sum()


def _run_both(ours_cls, torch_cls, kwargs, device, steps=STEPS, torch_kwargs=None):
    """Run both optimizers from the same start; assert equality after every step."""
    init, x, y = _problem(device)
    ours = [p.clone().requires_grad_() for p in init]
    theirs = [p.clone().requires_grad_() for p in init]
    opt_ours = ours_cls(ours, **kwargs)
    opt_theirs = torch_cls(theirs, **(torch_kwargs or kwargs))
    for _ in range(steps):
        for params, opt in ((ours, opt_ours), (theirs, opt_theirs)):
            opt.zero_grad()
            _loss(params, x, y).backward()
            opt.step()
        for a, b in zip(ours, theirs):
            torch.testing.assert_close(a, b, rtol=0, atol=TOL)
    # the run really moved the parameters
    assert max((a - b).abs().max().item() for a, b in zip(ours, init)) > 1e-3
    return ours


SGD_CASES = [dict(lr=0.05, momentum=m, dampening=d, weight_decay=wd, nesterov=n)
             for m, d, wd, n in itertools.product([0.0, 0.9], [0.0, 0.3], [0.0, 0.1],
                                                  [False, True])
             if not (n and (m == 0 or d != 0))]


@pytest.mark.parametrize("kwargs", SGD_CASES, ids=str)
def test_sgd_matches_torch(kwargs, float64_device):
    _run_both(optim.SGD, torch.optim.SGD, kwargs, float64_device)


RMSPROP_CASES = [dict(lr=1e-3, alpha=a, eps=1e-8, weight_decay=wd, momentum=m, centered=c)
                 for a, wd, m, c in itertools.product([0.99, 0.9], [0.0, 0.1], [0.0, 0.8],
                                                      [False, True])]


@pytest.mark.parametrize("kwargs", RMSPROP_CASES, ids=str)
def test_rmsprop_matches_torch(kwargs, float64_device):
    _run_both(optim.RMSProp, torch.optim.RMSprop, kwargs, float64_device)


ADAM_CASES = [dict(lr=lr, betas=betas, eps=eps, weight_decay=wd)
              for lr, betas, eps, wd in itertools.product(
                  [1e-3, 1e-2], [(0.9, 0.999), (0.8, 0.95)], [1e-8, 1e-3], [0.0, 0.1])]


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("kwargs", ADAM_CASES, ids=str)
def test_adam_matches_torch(kwargs, foreach, float64_device):
    _run_both(optim.Adam, torch.optim.Adam, dict(kwargs, foreach=foreach), float64_device,
              torch_kwargs=dict(kwargs, foreach=False))


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("kwargs", ADAM_CASES, ids=str)
def test_adamw_matches_torch(kwargs, foreach, float64_device):
    _run_both(optim.AdamW, torch.optim.AdamW, dict(kwargs, foreach=foreach), float64_device,
              torch_kwargs=dict(kwargs, foreach=False))


def test_adamw_default_weight_decay_matches_torch():
    assert optim.AdamW([torch.zeros(1)]).defaults["weight_decay"] == \
        torch.optim.AdamW([torch.zeros(1)]).defaults["weight_decay"]


@pytest.mark.parametrize("cls", [optim.Adam, optim.AdamW])
def test_foreach_path_equals_plain_path(cls, float64_device):
    """Several parameter groups, one parameter without a gradient, 100 steps."""
    init, x, y = _problem(float64_device, seed=3)
    runs = []
    for foreach in (False, True):
        w, b = [p.clone().requires_grad_() for p in init]
        frozen = torch.ones(2, dtype=torch.float64, device=float64_device, requires_grad=True)
        opt = cls([{"params": [w, frozen], "weight_decay": 0.1},
                   {"params": [b], "weight_decay": 0.0, "lr": 3e-3}], lr=1e-2, foreach=foreach)
        for _ in range(STEPS):
            opt.zero_grad()
            _loss([w, b], x, y).backward()
            opt.step()
        runs.append((w, b, frozen))
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=0, atol=TOL)
    assert torch.equal(runs[1][2], torch.ones_like(runs[1][2]))  # no grad: untouched


def test_adam_first_step_is_lr_times_sign():
    """Bias correction makes the first step exactly η·g/(|g| + ε), whatever the scale of g."""
    for scale in (1e-3, 1.0, 1e3):
        g = torch.tensor([scale, -2 * scale, 0.5 * scale], dtype=torch.float64)
        p = torch.zeros(3, dtype=torch.float64, requires_grad=True)
        opt = optim.Adam([p], lr=0.1, eps=1e-8)
        p.grad = g.clone()
        opt.step()
        torch.testing.assert_close(p.detach(), -0.1 * g / (g.abs() + 1e-8), rtol=1e-14, atol=0)


def test_adamw_decay_is_one_minus_lr_lambda():
    """With zero gradient, AdamW only decays: θ_t = (1 − ηλ)ᵗ θ₀ (Adam's update is 0/ε = 0)."""
    p = torch.tensor([2.0, -1.0], dtype=torch.float64, requires_grad=True)
    opt = optim.AdamW([p], lr=0.01, weight_decay=0.5)
    for _ in range(50):
        p.grad = torch.zeros_like(p)
        opt.step()
    expected = torch.tensor([2.0, -1.0], dtype=torch.float64) * (1 - 0.01 * 0.5) ** 50
    torch.testing.assert_close(p.detach(), expected, rtol=1e-14, atol=0)


def test_sgd_momentum_is_ema_with_rescaled_lr():
    """v ← βv + g with η equals the EMA form m ← βm + (1 − β)g with η/(1 − β)."""
    beta, lr = 0.9, 0.01
    p = torch.tensor([1.0, -3.0], dtype=torch.float64, requires_grad=True)
    opt = optim.SGD([p], lr=lr, momentum=beta)
    q, m = torch.tensor([1.0, -3.0], dtype=torch.float64), torch.zeros(2, dtype=torch.float64)
    for k in range(40):
        p.grad = torch.sin(p.detach()) + 0.1 * k
        opt.step()
        g = torch.sin(q) + 0.1 * k
        m = beta * m + (1 - beta) * g if k else (1 - beta) * g
        q = q - lr / (1 - beta) * m
    torch.testing.assert_close(p.detach(), q, rtol=1e-12, atol=1e-12)


def test_optimizers_work_with_closure_and_lr_scheduler():
    p = torch.tensor([3.0], dtype=torch.float64, requires_grad=True)
    opt = optim.AdamW([p], lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: optim.warmup_cosine(s, 5, 50, lr_max=1.0, lr_min=0.1))

    def closure():
        opt.zero_grad()
        loss = (p ** 2).sum()
        loss.backward()
        return loss

    seen = []
    for step in range(60):
        seen.append(opt.param_groups[0]["lr"])
        loss = opt.step(closure)
        sched.step()
    assert loss.item() < 9.0
    for step, lr in enumerate(seen):
        assert lr == pytest.approx(0.1 * optim.warmup_cosine(step, 5, 50, 1.0, 0.1), rel=1e-12)


def test_warmup_cosine_closed_form():
    W, T, hi, lo = 10, 110, 3e-4, 3e-5
    assert optim.warmup_cosine(0, W, T, hi, lo) == pytest.approx(hi / W)
    assert optim.warmup_cosine(W - 1, W, T, hi, lo) == pytest.approx(hi)
    assert optim.warmup_cosine(W, W, T, hi, lo) == pytest.approx(hi)
    assert optim.warmup_cosine(W + 50, W, T, hi, lo) == pytest.approx((hi + lo) / 2)
    assert optim.warmup_cosine(W + 25, W, T, hi, lo) == pytest.approx(lo + (hi - lo) * (2 + 2 ** 0.5) / 4)
    assert optim.warmup_cosine(T, W, T, hi, lo) == pytest.approx(lo)
    assert optim.warmup_cosine(T + 100, W, T, hi, lo) == lo
    assert optim.warmup_cosine(T, W, T, hi) == pytest.approx(0.0, abs=1e-18)
    values = [optim.warmup_cosine(s, W, T, hi, lo) for s in range(T + 1)]
    assert all(a < b for a, b in zip(values[:W - 1], values[1:W]))        # rising warm-up
    assert all(a > b for a, b in zip(values[W:T], values[W + 1:T + 1]))    # falling cosine


def test_warmup_cosine_without_warmup_matches_cosine_annealing_lr():
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.5)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=40, eta_min=0.05)
    for step in range(41):
        assert opt.param_groups[0]["lr"] == pytest.approx(
            optim.warmup_cosine(step, 0, 40, 0.5, 0.05), rel=1e-12)
        opt.step()
        sched.step()


def test_inverse_sqrt_is_the_transformer_schedule():
    d_model, W = 512, 4000
    lr_max = d_model ** -0.5 * W ** -0.5
    for step in [0, 1, 100, 3998, 3999, 4000, 10000, 99999]:
        s = step + 1
        vaswani = d_model ** -0.5 * min(s ** -0.5, s * W ** -1.5)
        assert optim.inverse_sqrt(step, W, lr_max) == pytest.approx(vaswani, rel=1e-12)
    assert optim.inverse_sqrt(W - 1, W, 1.0) == pytest.approx(1.0)
    # after the peak, quadrupling the step halves the lr
    assert optim.inverse_sqrt(4 * W - 1, W, 1.0) == pytest.approx(0.5)


@pytest.mark.parametrize("max_norm", [0.1, 1.0, 1e6])
def test_clip_grad_norm_matches_torch(max_norm, float64_device):
    gen = torch.Generator().manual_seed(1)
    grads = [torch.randn(shape, generator=gen, dtype=torch.float64).to(float64_device)
             for shape in [(3, 4), (5,), (2, 2, 2)]]
    ours = [torch.zeros_like(g, requires_grad=True) for g in grads]
    theirs = [torch.zeros_like(g, requires_grad=True) for g in grads]
    for p, q, g in zip(ours, theirs, grads):
        p.grad, q.grad = g.clone(), g.clone()
    extra = torch.zeros(2, dtype=torch.float64, device=float64_device, requires_grad=True)
    n_ours = optim.clip_grad_norm_(ours + [extra], max_norm)
    n_theirs = torch.nn.utils.clip_grad_norm_(theirs, max_norm)
    torch.testing.assert_close(n_ours, n_theirs, rtol=1e-14, atol=0)
    for p, q in zip(ours, theirs):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-14, atol=0)
    # an independent closed form: the global norm and the clipped norm
    norm = math.sqrt(sum((g ** 2).sum().item() for g in grads))
    assert n_ours.item() == pytest.approx(norm, rel=1e-14)
    clipped = math.sqrt(sum((p.grad ** 2).sum().item() for p in ours))
    assert clipped == pytest.approx(min(norm, max_norm), rel=1e-5)


def test_decay_param_groups_split_matrices_from_biases_and_gains():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4),
                                torch.nn.Linear(4, 2))
    decay, no_decay = optim.decay_param_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    assert {id(p) for p in decay["params"]} == {id(model[0].weight), id(model[2].weight)}
    assert len(no_decay["params"]) == 4  # two biases, LayerNorm weight and bias
    opt = torch.optim.AdamW(optim.decay_param_groups(model, 0.1), lr=1e-3)
    assert len(opt.param_groups) == 2


@pytest.mark.parametrize("shape", [(6, 10), (10, 6), (8, 8)], ids=str)
def test_newton_schulz_maps_each_singular_value_through_the_polynomial(shape):
    """Closed form from the SVD G = U Σ Vᵀ: after k steps X = U p^k(Σ/‖G‖_F) Vᵀ, in float64."""
    G = torch.randn(*shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    U, S, Vh = torch.linalg.svd(G, full_matrices=False)
    a, b, c = optim.MUON_COEFFICIENTS
    s = S / G.norm()
    for steps in range(6):
        expected = U @ torch.diag(s) @ Vh
        torch.testing.assert_close(optim.newton_schulz(G, steps, dtype=torch.float64), expected,
                                   rtol=0, atol=1e-12)
        s = a * s + b * s ** 3 + c * s ** 5                # one more step


def test_newton_schulz_cubic_converges_to_the_orthogonal_factor():
    """With (1.5, −0.5, 0) the iteration converges to the polar factor U Vᵀ; Muon's quintic
    after 5 steps only brings every singular value (all ≥ 0.01 before) into [0.68, 1.14]."""
    G = torch.randn(12, 20, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    U, S, Vh = torch.linalg.svd(G, full_matrices=False)
    assert (S / G.norm()).min() > 0.01
    polar = optim.newton_schulz(G, 60, coefficients=(1.5, -0.5, 0.0), dtype=torch.float64)
    torch.testing.assert_close(polar, U @ Vh, rtol=0, atol=1e-10)
    quintic = torch.linalg.svdvals(optim.newton_schulz(G, 5, dtype=torch.float64))
    assert quintic.min() > 0.68 and quintic.max() < 1.14
    assert (quintic - 1).abs().max() > 0.05          # approximate, not exact


MUON_CASES = [dict(lr=0.02, momentum=m, nesterov=n, weight_decay=wd)
              for m, n, wd in itertools.product([0.9, 0.95], [False, True], [0.0, 0.1])]


@pytest.mark.parametrize("kwargs", MUON_CASES, ids=str)
def test_muon_matches_torch(kwargs):
    """Muon groups against torch.optim.Muon(adjust_lr_fn="match_rms_adamw") (both iterate in
    bfloat16, so equal bit for bit), the AdamW group against torch.optim.AdamW."""
    gen = torch.Generator().manual_seed(0)
    init = [torch.randn(24, 32, generator=gen), torch.randn(32, 24, generator=gen),
            torch.randn(5, generator=gen)]
    ours = [p.clone().requires_grad_() for p in init]
    theirs = [p.clone().requires_grad_() for p in init]
    opt_ours = optim.Muon([{"params": ours[:2]}, {"params": ours[2:], "muon": False}],
                          betas=(0.9, 0.95), **kwargs)
    opt_muon = torch.optim.Muon(theirs[:2], adjust_lr_fn="match_rms_adamw", **kwargs)
    opt_adamw = torch.optim.AdamW(theirs[2:], lr=kwargs["lr"], betas=(0.9, 0.95),
                                  weight_decay=kwargs["weight_decay"])
    x = torch.randn(16, 32, generator=gen)
    for _ in range(10):
        for params, opts in ((ours, [opt_ours]), (theirs, [opt_muon, opt_adamw])):
            w1, w2, b = params
            loss = (torch.tanh(torch.tanh(x @ w1.T + b.sum()) @ w2.T) ** 2).mean() + (b ** 2).sum()
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
        for a, b in zip(ours[:2], theirs[:2]):       # the Muon matrices: bit for bit
            assert torch.equal(a, b), (a - b).abs().max()
        torch.testing.assert_close(ours[2], theirs[2], rtol=0, atol=1e-6)
    assert min((a - b).abs().max().item() for a, b in zip(ours, init)) > 1e-2


def test_muon_step_is_orthogonal_with_rms_one_fifth_of_lr():
    """Without momentum or decay a step of a matrix is −η·0.2·√max(m, n)·O, O = newton_schulz(G):
    all singular values about 1, and an RMS of about 0.2·η whatever the gradient's scale."""
    gen = torch.Generator().manual_seed(2)
    w0 = torch.randn(8, 32, generator=gen)
    w = w0.clone().requires_grad_()
    grad = torch.randn(8, 32, generator=gen)
    w.grad = 1e-3 * grad
    optim.Muon([w], lr=0.1, momentum=0.0, nesterov=False, weight_decay=0.0).step()
    step = (w - w0).detach()
    torch.testing.assert_close(step, -0.1 * 0.2 * math.sqrt(32) * optim.newton_schulz(1e-3 * grad),
                               rtol=0, atol=1e-6)   # fp32 rounding of w0 + step
    sv = torch.linalg.svdvals(step / (0.1 * 0.2 * math.sqrt(32)))
    assert sv.min() > 0.6 and sv.max() < 1.25          # every direction moved about equally
    rms = step.pow(2).mean().sqrt().item() / 0.1
    assert 0.6 * 0.2 < rms < 1.25 * 0.2


def test_bad_input_raises_clear_errors():
    p = [torch.zeros(2, requires_grad=True)]
    with pytest.raises(ValueError, match="lr"):
        optim.SGD(p, lr=-1.0)
    with pytest.raises(ValueError, match="nesterov"):
        optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam(p, betas=(0.9, 1.0))
    with pytest.raises(TypeError, match="betas"):
        optim.AdamW(p, betas=0.9)
    with pytest.raises(ValueError, match="alpha"):
        optim.RMSProp(p, alpha=1.5)
    with pytest.raises(ValueError, match="total_steps"):
        optim.warmup_cosine(3, 10, 10, 1.0)
    with pytest.raises(TypeError, match="step"):
        optim.warmup_cosine(1.5, 2, 10, 1.0)
    with pytest.raises(ValueError, match="max_norm"):
        optim.clip_grad_norm_(p, 0.0)
    with pytest.raises(TypeError, match="model"):
        optim.decay_param_groups(p, 0.1)
    with pytest.raises(ValueError, match="muon=False"):
        optim.Muon(p)                                   # a vector is not a matrix
    with pytest.raises(ValueError, match="momentum"):
        optim.Muon([torch.zeros(2, 2, requires_grad=True)], momentum=1.0)
    with pytest.raises(ValueError, match="matrix"):
        optim.newton_schulz(torch.zeros(2, 2, 2))


def test_optimize_path_follows_gradient_descent_closed_form():
    """Gradient descent on ½(a x² + b y²): x_k = (1 − ηa)ᵏ x₀, y_k = (1 − ηb)ᵏ y₀."""
    a, b, lr = 1.0, 10.0, 0.05
    path = optim.optimize_path(lambda x, y: 0.5 * (a * x ** 2 + b * y ** 2), (2.0, -1.0),
                               lambda ps: optim.SGD(ps, lr=lr), 30)
    k = torch.arange(31, dtype=torch.float64)
    torch.testing.assert_close(path[:, 0], 2.0 * (1 - lr * a) ** k, rtol=1e-12, atol=1e-15)
    torch.testing.assert_close(path[:, 1], -1.0 * (1 - lr * b) ** k, rtol=1e-12, atol=1e-15)
    diverged = optim.optimize_path(lambda x, y: x ** 2 + y ** 2, (1.0, 1.0),
                                   lambda ps: optim.SGD(ps, lr=1e200), 10)
    assert len(diverged) < 11


def test_muon_ns_dtype_sets_the_precision_of_the_orthogonalization():
    """ns_dtype="float32" takes the float32 Newton–Schulz step (closed form: the same iteration
    run directly), "bfloat16" differs from it by bfloat16 rounding, and a bad name is refused."""
    from mathref.optim import Muon, newton_schulz
    torch.manual_seed(0)
    W0, G = torch.randn(8, 5), torch.randn(8, 5)
    results = {}
    for name in ("float32", "bfloat16"):
        W = torch.nn.Parameter(W0.clone())
        opt = Muon([W], lr=0.1, momentum=0.0, nesterov=False, weight_decay=0.0, ns_dtype=name)
        W.grad = G.clone()
        opt.step()
        results[name] = W.detach()
    want = W0 - 0.1 * 0.2 * math.sqrt(8) * newton_schulz(G, 5, dtype=torch.float32)
    torch.testing.assert_close(results["float32"], want, rtol=0, atol=1e-6)
    assert 1e-4 < (results["bfloat16"] - want).abs().max() < 5e-2
    with pytest.raises(ValueError, match="ns_dtype"):
        Muon([torch.nn.Parameter(W0.clone())], ns_dtype="half")


def test_configure_optimizer_runs_newton_schulz_in_float32_on_cpu():
    from mathref.gpt import GPT, GPTConfig
    from mathref.train import configure_optimizer
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16))
    groups = configure_optimizer(model, 1e-3, 0.1, optimizer="muon").param_groups
    assert groups[0]["muon"] and groups[0]["ns_dtype"] == "float32"
