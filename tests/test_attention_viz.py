"""Chapter 11's attention heat map and its explorer draw softmax(QKᵀ/(τ√d_k) + M)."""
import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from mathref import viz, widgets  # noqa: E402


def qk(H=2, T=5, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(H, T, d, generator=g, dtype=torch.float64),
            torch.randn(H, T, d, generator=g, dtype=torch.float64))


def expected(q, k, tau, blocked):
    """Independent oracle: torch.softmax over masked scores, fully blocked rows set to 0."""
    s = (q @ k.T) / (tau * math.sqrt(q.shape[-1]))
    s = s.masked_fill(blocked, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.nan_to_num(p, nan=0.0).numpy()


def image(ax):
    return np.asarray(ax.images[0].get_array())


@pytest.mark.parametrize("tau", [0.3, 1.0, 4.0])
def test_heatmap_is_the_causal_softmax(tau):
    q, k = qk()
    ax = viz.plot_attention_weights(q, k, temperature=tau, mask="causal", head=1)
    blocked = torch.ones(5, 5, dtype=torch.bool).triu(1)
    np.testing.assert_allclose(image(ax), expected(q[1], k[1], tau, blocked), atol=1e-12)
    plt.close("all")


def test_padding_and_reversed_masks():
    q, k = qk(T=6)
    ax = viz.plot_attention_weights(q, k, mask="padding", length=4)
    blocked = torch.zeros(6, 6, dtype=torch.bool)
    blocked[:, 4:] = True
    np.testing.assert_allclose(image(ax), expected(q[0], k[0], 1.0, blocked), atol=1e-12)
    ax = viz.plot_attention_weights(q, k, mask="reversed (wrong)")
    P = image(ax)
    assert np.isfinite(P).all() and (P[-1] == 0).all()          # the all-blocked last row
    np.testing.assert_allclose(P[0], expected(q[0], k[0], 1.0, torch.ones(6, 6, dtype=torch.bool).tril())[0])
    with pytest.raises(ValueError, match="mask must be one of"):
        viz.plot_attention_weights(q, k, mask="diagonal")
    plt.close("all")


def test_grid_has_one_heatmap_per_setting():
    q, k = qk()
    fig = viz.attention_weights_grid(q, k, [dict(temperature=1.0, mask="none"),
                                            dict(temperature=0.2, mask="causal", head=1)])
    assert sum(1 for ax in fig.axes if ax.images) == 2
    plt.close(fig)
    fig = viz.attention_weights_grid(q, k, [dict(head=h) for h in (0, 1, 0, 1)], ncols=2)
    assert sum(1 for ax in fig.axes if ax.images) == 4
    plt.close(fig)


def test_explorer_redraws_its_static_twin():
    q, k = qk(H=3)
    explorer = widgets.attention_explorer(q, k, temperature=1.0, mask="causal", head=0)
    tau, mask, head = explorer.children[:3]
    assert head.max == 2 and mask.value == "causal"
    plt.close("all")
    tau.value, mask.value, head.value = 0.5, "none", 2   # each change re-draws the panel
    P = image(plt.gcf().axes[0])
    np.testing.assert_allclose(P, expected(q[2], k[2], 0.5, torch.zeros(5, 5, dtype=torch.bool)),
                               atol=1e-12)
    plt.close("all")
