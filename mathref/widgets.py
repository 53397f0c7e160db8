"""Interactive explorers (ipywidgets). Each has a static twin in ``mathref.viz`` that draws the
same panels for fixed settings; the book shows the twin, a running notebook shows both.
"""
import matplotlib.pyplot as plt

from mathref import viz

__all__ = ["learning_rate_explorer", "softmax_temperature_explorer",
           "optimizer_race_explorer", "temperature_explorer", "attention_explorer",
           "init_scale_explorer"]


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


# ---- chapter 05 ----
def softmax_temperature_explorer(logits, labels=None, temperature=1.0):
    """A slider over the softmax temperature τ (log scale, 0.05 to 20). See chapter 5.

    Draws ``viz.plot_softmax_temperature``, the same panel as the static figure.
    """
    widgets = _ipywidgets()

    def draw(temperature):
        viz.plot_softmax_temperature(logits, temperature, labels=labels)
        plt.show()

    slider = widgets.FloatLogSlider(value=temperature, base=10, min=-1.3, max=1.3, step=0.02,
                                    description="τ", continuous_update=False)
    return widgets.interactive(draw, temperature=slider)


# ---- chapter 06 ----

def optimizer_race_explorer(problem="ravine", steps=200, lr_scale=1.0, momentum=0.9):
    """Sliders for the optimizer race: the problem, the number of steps, a common factor on
    every learning rate, and momentum's β. See chapter 6.

    Draws with ``viz.plot_optimizer_race``, the function of the static figure.
    """
    widgets = _ipywidgets()

    def draw(problem, steps, lr_scale, momentum):
        viz.plot_optimizer_race(problem, steps, lr_scale=lr_scale, momentum=momentum)
        plt.show()

    return widgets.interactive(
        draw,
        problem=widgets.Dropdown(options=list(viz.RACE_PROBLEMS), value=problem,
                                 description="problem"),
        steps=widgets.IntSlider(value=steps, min=10, max=3000, step=10, description="steps",
                                continuous_update=False),
        lr_scale=widgets.FloatLogSlider(value=lr_scale, base=2, min=-3, max=2, step=0.25,
                                        description="lr ×", continuous_update=False),
        momentum=widgets.FloatSlider(value=momentum, min=0.0, max=0.99, step=0.01,
                                     description="β", continuous_update=False))


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


# ---- chapter 09 ----
def temperature_explorer(scores, temperature=1.0, log10_min=-2.0, log10_max=2.0):
    """A slider over log₁₀ τ for the soft lookup w = softmax(s / τ). See chapter 9.

    Draws with ``viz.plot_soft_lookup``, like its static twin ``viz.soft_lookup_grid``.
    """
    import math

    widgets = _ipywidgets()

    def draw(log10_tau):
        viz.plot_soft_lookup(scores, 10 ** log10_tau)
        plt.show()

    slider = widgets.FloatSlider(value=math.log10(temperature), min=log10_min, max=log10_max,
                                 step=0.05, description="log₁₀ τ", continuous_update=False,
                                 readout_format=".2f")
    return widgets.interactive(draw, log10_tau=slider)


# ---- chapter 11 ----
def attention_explorer(q, k, tokens=None, temperature=1.0, mask="causal", head=0, length=None):
    """Sliders over the temperature τ (scores divided by τ√d_k), the mask and the head for the
    attention weights of ``q``, ``k`` [H, T, d_k]. See chapter 11.

    Draws ``viz.plot_attention_weights``, the same panel as the static figure.
    """
    widgets = _ipywidgets()

    def draw(temperature, mask, head):
        viz.plot_attention_weights(q, k, temperature=temperature, mask=mask, head=head,
                                   tokens=tokens, length=length)
        plt.show()

    tau = widgets.FloatLogSlider(value=temperature, base=10, min=-1.3, max=1.3, step=0.02,
                                 description="τ", continuous_update=False)
    kind = widgets.Dropdown(options=list(viz.ATTENTION_MASKS), value=mask, description="mask")
    h = widgets.IntSlider(value=head, min=0, max=len(q) - 1, description="head",
                          continuous_update=False)
    return widgets.interactive(draw, temperature=tau, mask=kind, head=h)
