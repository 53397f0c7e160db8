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
