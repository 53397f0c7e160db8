"""Plotting helpers shared by the chapters (matplotlib only).

Each helper draws on axes it is given (or makes its own) and returns them, so a notebook can
combine panels; the interactive explorers in ``mathref.widgets`` call the same helpers, which
is what makes every widget's static twin show exactly what the widget shows.
"""
import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["use_course_style", "new_axes", "plot_descent_1d", "plot_learning_rate",
           "learning_rate_grid", "plot_contour_paths", "plot_init_depth"]

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
    plot_descent_1d(f, xs, ax=axes[0], xlim=(-1.3 * abs(x0), 1.3 * abs(x0)))
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


# ---- chapter 07 ----
def plot_init_depth(scale, depth=50, width=256, batch=256, activation="relu", ax=None, seed=0):
    """Activation std layer by layer in a deep MLP whose weights have Var(w) = scale² · g²/n.
    See chapter 7.

    g² = 2 for ReLU (He) and 1 for tanh/linear; scale = 1 is the variance-preserving choice.
    The dashed line is the prediction std(h_l) = scale^l · std(h_0·gain-adjusted), i.e. the
    variance is multiplied by scale² at every layer (exact for ReLU and linear, a small-signal
    approximation for tanh).
    """
    acts = {"relu": torch.relu, "tanh": torch.tanh, "linear": lambda z: z}
    if activation not in acts:
        raise ValueError(f"activation must be one of {sorted(acts)}, got {activation!r}")
    gain2 = 2.0 if activation == "relu" else 1.0
    gen = torch.Generator().manual_seed(seed)
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
