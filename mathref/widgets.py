"""Interactive explorers (ipywidgets). Each has a static twin in ``mathref.viz`` that draws the
same panels for fixed settings; the book shows the twin, a running notebook shows both.
"""
import matplotlib.pyplot as plt

from mathref import viz

__all__ = ["learning_rate_explorer", "init_scale_explorer"]


def _ipywidgets():
    try:
        import ipywidgets
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("the interactive explorers need ipywidgets: pip install ipywidgets "
                          "(the static figures need nothing more)") from err
    return ipywidgets


def learning_rate_explorer(f, grad, x0=3.0, steps=20, lr=0.1, lr_max=1.2):
    """A slider over the learning rate η for gradient descent on f from x0. See chapter 1.

    Returns the ipywidgets ``interactive`` object (display it, or let it be a cell's value).
    """
    widgets = _ipywidgets()

    def draw(lr):
        viz.plot_learning_rate(f, grad, x0, lr, steps)
        plt.show()

    slider = widgets.FloatSlider(value=lr, min=0.01, max=lr_max, step=0.01,
                                 description="η", continuous_update=False,
                                 readout_format=".2f")
    return widgets.interactive(draw, lr=slider)


# ---- chapter 07 ----
def init_scale_explorer(depth=50, width=256, activation="relu", scale=1.0):
    """A slider over the initialization scale of a deep MLP (scale 1 = He for ReLU). See chapter 7.

    Draws ``viz.plot_init_depth``, the static twin shown in the book.
    """
    widgets = _ipywidgets()

    def draw(scale, activation):
        viz.plot_init_depth(scale, depth=depth, width=width, activation=activation)
        plt.show()

    slider = widgets.FloatSlider(value=scale, min=0.5, max=1.5, step=0.05, description="scale",
                                 continuous_update=False, readout_format=".2f")
    menu = widgets.Dropdown(options=["relu", "tanh", "linear"], value=activation,
                            description="activation")
    return widgets.interactive(draw, scale=slider, activation=menu)
