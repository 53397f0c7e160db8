"""Chapter 6's race figure draws the optimizers' real paths, and its widget draws the same."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mathref import viz, widgets  # noqa: E402


def test_race_gradient_descent_path_is_the_closed_form():
    """On the ravine ½x² + 12.5y², SGD multiplies x by (1 − η) and y by (1 − 25η) per step."""
    paths = viz.race_paths("ravine", 20)
    assert list(paths) == ["SGD", "momentum", "Nesterov", "RMSProp", "Adam", "AdamW"]
    lr = viz.RACE_PROBLEMS["ravine"]["lrs"]["SGD"]
    k = torch.arange(21, dtype=torch.float64)
    torch.testing.assert_close(paths["SGD"][:, 0], -4.0 * (1 - lr) ** k)
    torch.testing.assert_close(paths["SGD"][:, 1], 1.0 * (1 - 25 * lr) ** k)


def test_plot_optimizer_race_draws_every_path_and_its_loss():
    axes = viz.new_axes(ncols=2)[1]
    paths = viz.plot_optimizer_race("rosenbrock", 30, axes=axes)
    xs, ys = axes[0].lines[0].get_data()
    np.testing.assert_array_equal(np.c_[xs, ys], paths["SGD"].numpy())
    _, losses = axes[1].lines[4].get_data()        # Adam's loss curve
    x, y = paths["Adam"].numpy().T
    np.testing.assert_allclose(losses, (1 - x) ** 2 + 100 * (y - x ** 2) ** 2, rtol=1e-12)
    plt.close("all")


def test_race_explorer_draws_its_static_twin():
    explorer = widgets.optimizer_race_explorer(problem="ravine", steps=40)
    problem, steps, lr_scale, momentum = explorer.children[:4]
    assert problem.value == "ravine" and steps.value == 40 and lr_scale.value == pytest.approx(1)
    plt.close("all")
    lr_scale.value = 0.5  # re-draws through viz.plot_optimizer_race
    fig = plt.gcf()
    twin = viz.race_paths("ravine", 40, lr_scale=0.5)
    for line, (label, path) in zip(fig.axes[0].lines[::2], twin.items()):
        np.testing.assert_allclose(np.c_[line.get_data()], path.numpy(), rtol=1e-12)
    plt.close("all")
