"""Plotting helpers shared by the chapters (matplotlib only).

Each helper draws on axes it is given (or makes its own) and returns them, so a notebook can
combine panels; the interactive explorers in ``mathref.widgets`` call the same helpers, which
is what makes every widget's static twin show exactly what the widget shows.
"""
import matplotlib.pyplot as plt
import numpy as np
import torch

from mathref.device import seeded

__all__ = ["use_course_style", "new_axes", "plot_descent_1d", "plot_learning_rate",
           "learning_rate_grid", "plot_contour_paths", "plot_softmax_temperature",
           "softmax_temperature_grid", "plot_decision_regions", "plot_activation",
           "RACE_PROBLEMS", "race_optimizers", "race_paths", "plot_optimizer_race",
           "plot_soft_lookup", "soft_lookup_grid", "ATTENTION_MASKS",
           "attention_mask_for", "plot_attention_weights", "attention_weights_grid",
           "plot_init_depth"]

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#17becf"]


def use_course_style():
    """One look for every figure of the course (called by each chapter's setup cell)."""
    plt.rcParams.update({
        "figure.figsize": (6.4, 4.0),
        "figure.dpi": 90,
        "axes.grid": True,
        "grid.alpha": 0.3,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": plt.cycler(color=COLORS),
        "font.size": 10,
        "legend.frameon": False,
        "savefig.bbox": "tight",
    })


def new_axes(ncols=1, nrows=1, width=4.4, height=3.3):
    """A figure with a grid of axes of the given size per panel; returns (fig, axes)."""
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows),
                             squeeze=False, constrained_layout=True)
    return fig, axes[0, 0] if nrows == ncols == 1 else axes.ravel()


def _to_numpy(x):
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)


def plot_descent_1d(f, trajectory, ax=None, xlim=None, color=COLORS[1], label=None):
    """Draw the curve y = f(x) and the iterates (x_k, f(x_k)) joined in order.

    ``f`` maps a NumPy array to a NumPy array; ``trajectory`` is a 1-D sequence of iterates.
    """
    if ax is None:
        _, ax = new_axes()
    xs = _to_numpy(trajectory).astype(float)
    finite = xs[np.isfinite(xs)]
    reach = max(np.abs(finite).max() if finite.size else 1.0, 1.0) * 1.15
    lo, hi = xlim if xlim is not None else (-reach, reach)
    grid = np.linspace(lo, hi, 400)
    ax.plot(grid, f(grid), color="0.35", lw=1.5)
    shown = xs[(xs >= lo) & (xs <= hi)]
    ax.plot(shown, f(shown), "o-", color=color, ms=4, lw=1, alpha=0.85, label=label)
    ax.plot(xs[:1], f(xs[:1]), "s", color="black", ms=6)
    ax.set_xlim(lo, hi)
    ax.set_xlabel("x")
    ax.set_ylabel("f(x)")
    return ax


def plot_learning_rate(f, grad, x0, lr, steps, axes=None):
    """Two panels for gradient descent with one learning rate: the iterates on the curve, and
    |x_k| against k on a log scale (a straight line means geometric convergence or divergence).
    """
    from mathref.calculus import gradient_descent

    if axes is None:
        _, axes = new_axes(ncols=2)
    trajectory = gradient_descent(grad, x0, lr, steps)
    xs = trajectory.numpy()
    finite = np.abs(xs[np.isfinite(xs)])
    reach = 1.15 * max(abs(x0), finite.max() if finite.size else 0.0)   # every iterate in view
    plot_descent_1d(f, xs, ax=axes[0], xlim=(-reach, reach))
    axes[0].set_title(f"η = {lr:g}: iterates on f")
    axes[1].semilogy(np.arange(steps + 1), np.abs(xs) + 1e-300, "o-", ms=3)
    axes[1].set_xlabel("step k")
    axes[1].set_ylabel("|x_k|")
    axes[1].set_title(f"η = {lr:g}: |x_k| per step")
    return axes


def learning_rate_grid(f, grad, x0, lrs, steps):
    """The static twin of ``widgets.learning_rate_explorer``: one row of two panels per lr."""
    fig, axes = new_axes(ncols=2, nrows=len(lrs), width=4.2, height=2.6)
    for row, lr in enumerate(lrs):
        plot_learning_rate(f, grad, x0, lr, steps, axes=axes[2 * row: 2 * row + 2])
    return fig


def plot_contour_paths(loss, paths=None, xlim=(-2, 2), ylim=(-2, 2), ax=None, levels=20,
                       log_levels=False, resolution=200):
    """Contours of a 2-D loss with optimization paths drawn on top. See chapters 2 and 6.

    ``loss(X, Y)`` takes two NumPy arrays of the same shape (a grid) and returns the loss on
    it; ``paths`` maps a label to a sequence of points of shape [K, 2] (NumPy or torch).
    With ``log_levels`` the contour levels are spaced geometrically (for ravines).
    """
    if ax is None:
        _, ax = new_axes(width=5.0, height=4.0)
    X, Y = np.meshgrid(np.linspace(*xlim, resolution), np.linspace(*ylim, resolution))
    Z = np.asarray(loss(X, Y), dtype=float)
    if log_levels:
        lo = max(Z.min(), 1e-12)
        levels = np.geomspace(lo + 1e-3 * (Z.max() - lo), Z.max(), levels)
    ax.contour(X, Y, Z, levels=levels, cmap="viridis", linewidths=0.8)
    for i, (label, path) in enumerate((paths or {}).items()):
        pts = _to_numpy(path).astype(float).reshape(-1, 2)
        color = COLORS[(i + 1) % len(COLORS)]
        ax.plot(pts[:, 0], pts[:, 1], "o-", ms=2.5, lw=1.2, color=color, label=label)
        ax.plot(pts[-1, 0], pts[-1, 1], "*", ms=9, color=color)
    ax.set(xlim=xlim, ylim=ylim, xlabel="θ₁", ylabel="θ₂")
    if paths:
        ax.legend(fontsize=8, loc="best")
    return ax


# ---- chapter 03 ----
def plot_decision_regions(predict, X=None, y=None, ax=None, xlim=(-0.5, 1.5), ylim=(-0.5, 1.5),
                          threshold=0.5, resolution=200, title=None):
    """Shade where a 2-D classifier says 1 (score > threshold) and draw the boundary
    score = threshold, with the data points on top. See chapter 3.

    ``predict`` maps a float64 tensor of points of shape [M, 2] to M scores (any shape with M
    elements); ``X`` [N, 2] and labels ``y`` [N] in {0, 1} are drawn as circles and crosses.
    """
    if ax is None:
        _, ax = new_axes(width=4.0, height=3.6)
    gx, gy = np.meshgrid(np.linspace(*xlim, resolution), np.linspace(*ylim, resolution))
    grid = torch.tensor(np.stack([gx.ravel(), gy.ravel()], axis=1), dtype=torch.float64)
    with torch.no_grad():
        scores = _to_numpy(predict(grid)).astype(float).reshape(gx.shape)
    ax.contourf(gx, gy, (scores > threshold).astype(float), levels=[-0.5, 0.5, 1.5],
                colors=["#c6dbef", "#fcbba1"], alpha=0.9)
    if scores.min() < threshold < scores.max():
        ax.contour(gx, gy, scores, levels=[threshold], colors="k", linewidths=1.2)
    if X is not None:
        pts, labels = _to_numpy(X).astype(float), _to_numpy(y).astype(float).ravel()
        ax.scatter(pts[labels <= 0.5, 0], pts[labels <= 0.5, 1], marker="o", s=28,
                   facecolors="white", edgecolors=COLORS[0], linewidths=1.3, label="class 0")
        ax.scatter(pts[labels > 0.5, 0], pts[labels > 0.5, 1], marker="x", s=32,
                   color=COLORS[1], linewidths=1.6, label="class 1")
    ax.set(xlim=xlim, ylim=ylim, xlabel="x₁", ylabel="x₂")
    ax.grid(False)
    if title:
        ax.set_title(title)
    return ax


def plot_activation(fn, grad, name, ax=None, xlim=(-4, 4), var="x"):
    """One activation φ (solid) and its derivative φ′ (dashed) on the same axes. See chapter 3.

    ``fn`` and ``grad`` map a float64 tensor to a tensor of the same shape; ``var`` names the
    input on the x-axis and in the legend (chapter 3 writes z for a pre-activation).
    """
    if ax is None:
        _, ax = new_axes(width=3.2, height=2.6)
    x = torch.linspace(*xlim, 801, dtype=torch.float64)
    ax.plot(x.numpy(), _to_numpy(fn(x)), color=COLORS[0], lw=2, label=f"φ({var})")
    ax.plot(x.numpy(), _to_numpy(grad(x)), "--", color=COLORS[1], lw=1.6, label=f"φ′({var})")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.axvline(0, color="0.6", lw=0.8)
    ax.set(xlim=xlim, title=name, xlabel=var)
    return ax


# ---- chapter 05 ----
def plot_softmax_temperature(logits, temperature, labels=None, ax=None):
    """Bar chart of softmax(logits / τ), titled with τ, the top probability and the entropy in
    bits. See chapter 5; the static twin of ``widgets.softmax_temperature_explorer``.
    """
    from mathref.losses import entropy, softmax

    z = torch.as_tensor(logits, dtype=torch.float64)
    p = softmax(z, temperature=temperature)
    if ax is None:
        _, ax = new_axes(width=4.4, height=3.0)
    names = list(labels) if labels is not None else [str(i) for i in range(len(p))]
    ax.bar(names, p.numpy(), color=COLORS[0])
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("probability")
    bits = entropy(p).item() / np.log(2)
    ax.set_title(f"τ = {temperature:g}: max p = {p.max().item():.3f}, H = {bits:.2f} bits",
                 fontsize=9)
    return ax


def softmax_temperature_grid(logits, temperatures, labels=None):
    """One panel of ``plot_softmax_temperature`` per temperature, side by side. See chapter 5."""
    fig, axes = new_axes(ncols=len(temperatures), width=2.9, height=2.7)
    for ax, t in zip(np.atleast_1d(axes), temperatures):
        plot_softmax_temperature(logits, t, labels=labels, ax=ax)
    return fig


# ---- chapter 06 ----

def _ravine(x, y):
    return 0.5 * x ** 2 + 12.5 * y ** 2


def _rosenbrock(x, y):
    return (1 - x) ** 2 + 100 * (y - x ** 2) ** 2


# The two test functions of the optimizer race. ``lrs`` holds one learning rate per optimizer
# (the best power of two on a coarse grid, rounded); ``minimum`` is the minimizer, f* = 0.
RACE_PROBLEMS = {
    "ravine": dict(loss=_ravine, start=(-4.0, 1.0), minimum=(0.0, 0.0),
                   xlim=(-4.5, 1.0), ylim=(-1.3, 1.3), title="ravine ½x² + 12.5y² (κ = 25)",
                   lrs={"SGD": 0.06, "momentum": 0.03, "Nesterov": 0.03, "RMSProp": 0.06,
                        "Adam": 0.25, "AdamW": 0.25}),
    "rosenbrock": dict(loss=_rosenbrock, start=(-1.2, 1.0), minimum=(1.0, 1.0),
                       xlim=(-1.6, 1.4), ylim=(-0.5, 1.6),
                       title="Rosenbrock (1 − x)² + 100(y − x²)²",
                       lrs={"SGD": 1e-3, "momentum": 2e-3, "Nesterov": 1e-3, "RMSProp": 1e-3,
                            "Adam": 0.06, "AdamW": 0.06}),
}


def race_optimizers(problem, lr_scale=1.0, momentum=0.9, weight_decay=0.01):
    """label -> make_optimizer(params) for the six optimizers of the race. See chapter 6.

    Each optimizer gets the problem's learning rate times ``lr_scale``; SGD with momentum and
    Nesterov use ``momentum`` as β; AdamW uses ``weight_decay`` as λ.
    """
    from mathref import optim

    lrs = {k: v * lr_scale for k, v in RACE_PROBLEMS[problem]["lrs"].items()}
    return {
        "SGD": lambda ps: optim.SGD(ps, lr=lrs["SGD"]),
        "momentum": lambda ps: optim.SGD(ps, lr=lrs["momentum"], momentum=momentum),
        "Nesterov": lambda ps: optim.SGD(ps, lr=lrs["Nesterov"], momentum=momentum,
                                         nesterov=True),
        "RMSProp": lambda ps: optim.RMSProp(ps, lr=lrs["RMSProp"]),
        "Adam": lambda ps: optim.Adam(ps, lr=lrs["Adam"]),
        "AdamW": lambda ps: optim.AdamW(ps, lr=lrs["AdamW"], weight_decay=weight_decay),
    }


def race_paths(problem, steps, lr_scale=1.0, momentum=0.9, weight_decay=0.01):
    """Run every optimizer of the race on ``RACE_PROBLEMS[problem]``: label -> path [K+1, 2]."""
    from mathref import optim

    spec = RACE_PROBLEMS[problem]
    return {label: optim.optimize_path(spec["loss"], spec["start"], make, steps)
            for label, make in race_optimizers(problem, lr_scale, momentum, weight_decay).items()}


def plot_optimizer_race(problem, steps, lr_scale=1.0, momentum=0.9, weight_decay=0.01,
                        axes=None):
    """Two panels: the race's paths on the contours, and loss f(θ_k) per step (log scale).
    The static twin of ``widgets.optimizer_race_explorer``. See chapter 6. Returns the paths.
    """
    if axes is None:
        _, axes = new_axes(ncols=2, width=5.0, height=3.9)
    spec = RACE_PROBLEMS[problem]
    paths = race_paths(problem, steps, lr_scale, momentum, weight_decay)
    plot_contour_paths(spec["loss"], paths, xlim=spec["xlim"], ylim=spec["ylim"], ax=axes[0],
                       levels=25, log_levels=True)
    axes[0].plot(*spec["minimum"], "k+", ms=12, mew=2)
    axes[0].set_title(spec["title"], fontsize=9)
    for i, (label, path) in enumerate(paths.items()):
        losses = spec["loss"](path[:, 0], path[:, 1]).numpy()
        axes[1].semilogy(np.arange(len(losses)), losses + 1e-300,
                         color=COLORS[(i + 1) % len(COLORS)], lw=1.3, label=label)
    axes[1].set(xlabel="step k", ylabel="f(θ_k) − f*", ylim=(1e-10, None),
                title=f"loss per step (lr × {lr_scale:g})")
    axes[1].legend(fontsize=8)
    return paths


# ---- chapter 07 ----
def plot_init_depth(scale, depth=50, width=256, batch=256, activation="relu", ax=None, seed=0):
    """Activation std layer by layer in a deep MLP whose weights have Var(w) = scale² · g²/n.
    See chapter 7.

    g² = 2 for ReLU (He) and 1 for tanh/linear; scale = 1 is the variance-preserving choice.
    The dashed line is the prediction std(h_l) = std(h_1) · scale^(l−1): the measured first
    layer, then the variance multiplied by scale² at every further layer. That factor is exact
    only in expectation for ReLU and linear layers (at finite width each layer multiplies the
    std by a random factor, so the measured curve drifts away from the line) and a small-signal
    approximation for tanh.
    """
    acts = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z}
    if activation not in acts:
        raise ValueError(f"activation must be one of {sorted(acts)}, got {activation!r}")
    gain2 = 2.0 if activation == "relu" else 1.0
    gen = torch.Generator().manual_seed(seeded(seed))
    h = torch.randn(batch, width, generator=gen)
    stds = []
    for _ in range(depth):
        w = torch.randn(width, width, generator=gen) * scale * (gain2 / width) ** 0.5
        h = acts[activation](h @ w.T)
        stds.append(h.std().item())
    if ax is None:
        _, ax = new_axes(width=5.0, height=3.4)
    layers = np.arange(1, depth + 1)
    ax.semilogy(layers, np.maximum(stds, 1e-300), "o-", ms=3, label="measured std(h_l)")
    ax.semilogy(layers, stds[0] * float(scale) ** (layers - 1.0), "k--", lw=1,
                label="prediction std(h_1)·scale^(l−1)")
    shown = [v for v in stds if v > 0] + [stds[0] * float(scale) ** (depth - 1.0)]
    lo, hi = min(shown), max(shown)
    if hi / lo < 100:  # keep at least two decades visible, so that noise is not magnified
        mid = (hi * lo) ** 0.5
        lo, hi = mid / 10, mid * 10
    ax.set_ylim(lo / 1.5, hi * 1.5)
    ax.set(xlabel="layer l", ylabel="std of activations",
           title=f"{depth} {activation} layers, Var(w) = {scale:g}² · {gain2:g}/n")
    ax.legend(fontsize=8)
    return ax


# ---- chapter 09 ----
def plot_soft_lookup(scores, temperature, ax=None):
    """Bars of the softmax weights w = softmax(s / τ) over keys, the best key (hard argmax)
    in red, with the entropy of w in the title. See chapter 9."""
    if ax is None:
        _, ax = new_axes()
    s = torch.as_tensor(_to_numpy(scores), dtype=torch.float64)
    w = torch.softmax(s / temperature, dim=-1)
    entropy = -(w * torch.log(w.clamp_min(1e-300))).sum().item()
    colors = [COLORS[0]] * len(s)
    colors[int(s.argmax())] = COLORS[1]
    ax.bar(np.arange(len(s)), w.numpy(), color=colors)
    ax.set_ylim(0, 1.05)
    ax.set_xticks(np.arange(len(s)))
    ax.set_xlabel("key j")
    ax.set_ylabel("weight w_j")
    ax.set_title(f"τ = {temperature:g}: entropy {entropy:.2f} nats")
    return ax


def soft_lookup_grid(scores, temperatures):
    """The static twin of ``widgets.temperature_explorer``: one panel per temperature."""
    fig, axes = new_axes(ncols=len(temperatures), width=3.0, height=2.6)
    for ax, tau in zip(np.atleast_1d(axes), temperatures):
        plot_soft_lookup(scores, tau, ax=ax)
    return fig


# ---- chapter 11 ----
ATTENTION_MASKS = ("none", "causal", "padding", "reversed (wrong)")


def attention_mask_for(kind, T, length=None, dtype=torch.float64):
    """The additive [T, T] mask the chapter-11 heat maps use. See chapter 11.

    "none": all zeros; "causal": −∞ where j > i; "padding": −∞ for keys j ≥ ``length``
    (default T − 2); "reversed (wrong)": the classic mistake, −∞ where j < i *and* on the
    diagonal, which leaves the last query row with no key at all.
    """
    from mathref.attention import causal_mask, padding_mask

    if kind == "none":
        return torch.zeros(T, T, dtype=dtype)
    if kind == "causal":
        return causal_mask(T, dtype=dtype)
    if kind == "padding":
        length = T - 2 if length is None else length
        return padding_mask([length], T, dtype=dtype)[0, 0].expand(T, T)
    if kind == "reversed (wrong)":
        blocked = torch.ones(T, T, dtype=torch.bool).tril()
        return torch.zeros(T, T, dtype=dtype).masked_fill(blocked, float("-inf"))
    raise ValueError(f"mask must be one of {ATTENTION_MASKS}, got {kind!r}")


def plot_attention_weights(q, k, temperature=1.0, mask="causal", head=0, tokens=None,
                           length=None, ax=None, annotate=True):
    """Heat map of one head's weights P = softmax(Q Kᵀ / (τ √d_k) + M). See chapter 11.

    ``q``, ``k``: [H, T, d_k] for one sequence; row i of the picture is query i, column j is
    key j. ``mask`` is one of ``ATTENTION_MASKS`` (see ``attention_mask_for``). A query row
    whose keys are all blocked is drawn as zeros, as ``F.scaled_dot_product_attention``
    returns. The title gives τ and the mean entropy of the rows in nats.
    The static twin of ``widgets.attention_explorer``.
    """
    from mathref.attention import attention_weights

    q, k = torch.as_tensor(q, dtype=torch.float64), torch.as_tensor(k, dtype=torch.float64)
    if q.dim() != 3 or k.shape != q.shape:
        raise ValueError(f"q and k must both be [H, T, d_k], got {tuple(q.shape)} and "
                         f"{tuple(k.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature!r}")
    H, T, d_k = q.shape
    if not 0 <= head < H:
        raise ValueError(f"head must be in 0..{H - 1}, got {head}")
    M = attention_mask_for(mask, T, length=length)
    P = attention_weights(q[head], k[head], mask=M, scale=1.0 / (temperature * np.sqrt(d_k)))
    P = P.numpy()
    if ax is None:
        _, ax = new_axes(width=4.4, height=3.8)
    im = ax.imshow(P, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="weight P_ij")
    names = list(tokens) if tokens is not None else [str(i) for i in range(T)]
    ax.set_xticks(range(T), names, rotation=60, fontsize=8)
    ax.set_yticks(range(T), names, fontsize=8)
    ax.set(xlabel="key j", ylabel="query i")
    ax.grid(False)
    if annotate and T <= 10:
        for i in range(T):
            for j in range(T):
                ax.text(j, i, f"{P[i, j]:.2f}", ha="center", va="center", fontsize=6,
                        color="white" if P[i, j] < 0.6 else "black")
    live = P.sum(axis=1) > 0
    ent = -(P[live] * np.log(np.where(P[live] > 0, P[live], 1.0))).sum(axis=1).mean()
    ax.set_title(f"head {head}, τ = {temperature:g}, mask: {mask}\n"
                 f"mean row entropy {ent:.2f} nats", fontsize=9)
    return ax


def attention_weights_grid(q, k, settings, tokens=None, length=None, ncols=None):
    """One ``plot_attention_weights`` panel per dict of settings (temperature, mask, head),
    ``ncols`` per row (default: all in one row). See chapter 11."""
    ncols = len(settings) if ncols is None else ncols
    nrows = -(-len(settings) // ncols)
    fig, axes = new_axes(ncols=ncols, nrows=nrows, width=4.0, height=3.7)
    for ax, s in zip(np.atleast_1d(axes), settings):
        plot_attention_weights(q, k, tokens=tokens, length=length, ax=ax, **s)
    return fig
