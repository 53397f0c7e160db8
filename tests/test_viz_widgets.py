"""The plotting helpers draw what the math says, and each widget draws its static twin."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from mathref import calculus, viz, widgets  # noqa: E402


def square(x):
    return x ** 2


def d_square(x):
    return 2 * x


def test_plot_learning_rate_plots_the_closed_form_iterates():
    axes = viz.plot_learning_rate(square, d_square, 3.0, 0.3, 8)
    xs, ys = axes[1].lines[0].get_data()
    np.testing.assert_allclose(ys, np.abs(3.0 * (1 - 2 * 0.3) ** np.arange(9)), rtol=1e-12)
    plt.close("all")


def test_learning_rate_grid_has_two_panels_per_rate():
    fig = viz.learning_rate_grid(square, d_square, 3.0, [0.1, 0.6, 1.05], 10)
    assert len(fig.axes) == 6
    plt.close(fig)


def test_explorer_draws_the_same_panels_as_its_static_twin():
    explorer = widgets.learning_rate_explorer(square, d_square, x0=3.0, steps=10, lr=0.2)
    slider = explorer.children[0]
    assert slider.value == pytest.approx(0.2) and slider.max == pytest.approx(1.2)
    plt.close("all")
    explorer.children[0].value = 0.7  # re-draws through viz.plot_learning_rate
    fig = plt.gcf()
    xs, ys = fig.axes[1].lines[0].get_data()
    twin = calculus.gradient_descent(d_square, 3.0, 0.7, 10).abs().numpy()
    np.testing.assert_allclose(ys, twin, rtol=1e-12)
    plt.close("all")


def test_use_course_style_sets_rcparams():
    viz.use_course_style()
    assert plt.rcParams["axes.grid"] is True


def test_plot_contour_paths_draws_each_path_through_its_points():
    path = np.array([[1.0, 1.0], [0.5, 0.2], [0.1, 0.0]])
    ax = viz.plot_contour_paths(lambda X, Y: X ** 2 + 10 * Y ** 2, {"gd": path},
                                xlim=(-1.5, 1.5), ylim=(-1.5, 1.5), log_levels=True)
    xs, ys = ax.lines[0].get_data()
    np.testing.assert_array_equal(np.c_[xs, ys], path)
    assert ax.get_legend().get_texts()[0].get_text() == "gd"
    plt.close("all")


def test_plot_descent_1d_draws_the_curve_and_the_iterates():
    trajectory = calculus.gradient_descent(d_square, 3.0, 0.25, 4)
    ax = viz.plot_descent_1d(square, trajectory)
    curve, path = ax.lines[0], ax.lines[1]
    np.testing.assert_allclose(curve.get_ydata(), curve.get_xdata() ** 2)
    np.testing.assert_allclose(path.get_xdata(), 3.0 * 0.5 ** np.arange(5))   # x_k = (1 − 2η)^k x₀
    np.testing.assert_allclose(path.get_ydata(), path.get_xdata() ** 2)
    plt.close("all")


def test_race_optimizers_take_the_problem_s_learning_rates():
    import torch
    makers = viz.race_optimizers("ravine", lr_scale=0.5)
    assert list(makers) == ["SGD", "momentum", "Nesterov", "RMSProp", "Adam", "AdamW"]
    theta = torch.tensor([-4.0, 1.0], dtype=torch.float64, requires_grad=True)
    opt = makers["SGD"]([theta])
    (0.5 * theta[0] ** 2 + 12.5 * theta[1] ** 2).backward()
    opt.step()                                   # one SGD step with η = 0.5 · 0.06
    np.testing.assert_allclose(theta.detach().numpy(), [-4.0 + 0.03 * 4.0, 1.0 - 0.03 * 25.0])


def test_plot_soft_lookup_bars_are_the_softmax_weights():
    import torch
    scores = np.array([1.0, 3.0, 0.5, 2.0])
    ax = viz.plot_soft_lookup(scores, 0.5)
    heights = [p.get_height() for p in ax.patches]
    np.testing.assert_allclose(heights, torch.softmax(torch.tensor(scores) / 0.5, -1).numpy())
    plt.close("all")


def test_attention_mask_for_each_kind():
    import torch
    T = 4
    causal = viz.attention_mask_for("causal", T)
    assert torch.equal(torch.isinf(causal), torch.ones(T, T, dtype=torch.bool).triu(1))
    assert torch.equal(viz.attention_mask_for("none", T), torch.zeros(T, T, dtype=torch.float64))
    padding = viz.attention_mask_for("padding", T, length=3)
    assert torch.isinf(padding[:, 3]).all() and not torch.isinf(padding[:, :3]).any()
    wrong = viz.attention_mask_for("reversed (wrong)", T)
    assert torch.isinf(wrong[-1]).all()              # the last query sees no key at all
    assert set(viz.ATTENTION_MASKS) == {"none", "causal", "padding", "reversed (wrong)"}
    with pytest.raises(ValueError, match="mask must be one of"):
        viz.attention_mask_for("diagonal", T)


def test_diverging_iterates_stay_inside_the_curve_panel():
    axes = viz.plot_learning_rate(square, d_square, 3.0, 1.05, 20)
    lo, hi = axes[0].get_xlim()
    last = abs(3.0 * (1 - 2 * 1.05) ** 20)             # |x_20| = 3·1.1²⁰ ≈ 20
    assert hi >= last and lo <= -last
    shown = axes[0].lines[1].get_xdata()
    assert len(shown) == 21                             # all iterates drawn, none clipped
    plt.close("all")
