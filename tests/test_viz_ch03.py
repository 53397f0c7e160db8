"""Chapter 3's plotting helpers draw what the model computes."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from mathref import nn as mnn  # noqa: E402
from mathref import viz  # noqa: E402


def test_decision_regions_boundary_is_the_line_where_the_score_crosses_the_threshold():
    # score = x1 + x2 − 1 > 0 above the line x2 = 1 − x1
    ax = viz.plot_decision_regions(lambda g: g.sum(1) - 1, threshold=0.0, resolution=101,
                                   xlim=(0, 2), ylim=(0, 2))
    boundary = ax.collections[-1]  # the contour line at the threshold
    verts = np.concatenate([p.vertices for p in boundary.get_paths() if len(p.vertices)])
    np.testing.assert_allclose(verts[:, 0] + verts[:, 1], 1.0, atol=1e-9)
    plt.close("all")


def test_decision_regions_draws_both_classes():
    X = torch.tensor([[0.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    y = torch.tensor([0.0, 1.0, 1.0])
    ax = viz.plot_decision_regions(lambda g: g[:, 0], X, y)
    from matplotlib.collections import PathCollection  # what scatter returns

    points = {c.get_label(): c.get_offsets() for c in ax.collections
              if type(c) is PathCollection}
    np.testing.assert_allclose(points["class 0"], [[0.0, 0.0]])
    np.testing.assert_allclose(points["class 1"], [[1.0, 1.0], [0.0, 1.0]])
    plt.close("all")


def test_plot_activation_draws_function_and_derivative():
    ax = viz.plot_activation(mnn.sigmoid, mnn.sigmoid_grad, "sigmoid")
    x, f = ax.lines[0].get_data()
    _, g = ax.lines[1].get_data()
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(f, s, rtol=1e-12)
    np.testing.assert_allclose(g, s * (1 - s), rtol=1e-12)
    plt.close("all")


# The twelfth read (2026-11-30, L5): the x-axis names the variable the text uses (z for a
# pre-activation, b for a gate's input), in the label and the legend
def test_plot_activation_names_its_variable():
    ax = viz.plot_activation(mnn.sigmoid, mnn.sigmoid_grad, "sigmoid", var="z")
    assert ax.get_xlabel() == "z"
    assert [line.get_label() for line in ax.lines[:2]] == ["φ(z)", "φ′(z)"]
    assert viz.plot_activation(mnn.sigmoid, mnn.sigmoid_grad, "sigmoid").get_xlabel() == "x"
    plt.close("all")
