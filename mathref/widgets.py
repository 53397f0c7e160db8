"""Interactive explorers (ipywidgets). Each has a static twin in ``mathref.viz`` that draws the
same panels for fixed settings; the book shows the twin, a running notebook shows both.
"""
import matplotlib.pyplot as plt

from mathref import viz

__all__ = ["learning_rate_explorer", "softmax_temperature_explorer", "attention_explorer"]


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
