"""Transformer building blocks. See chapter 13.

    FFN(x) = φ(x W₁ + b₁) W₂ + b₂                 (position-wise: each token on its own)
    SwiGLU(x) = (SiLU(x W₁) ⊙ x W₃) W₂             (gated, d_ff ≈ 8d/3 keeps the parameter count)
"""
import math

import torch.nn.functional as F
from torch import nn

__all__ = ["ACTIVATIONS", "FeedForward"]

ACTIVATIONS = {
    "relu": F.relu,
    "gelu": F.gelu,                                          # x·Φ(x), exact
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),    # GPT-2's approximation
    "relu2": lambda x: F.relu(x).square(),                   # squared ReLU
    "silu": F.silu,
}


def default_d_ff(d_model, activation):
    """4d, or for SwiGLU 8d/3 rounded up to a multiple of 8 (same parameters as a 4d FFN)."""
    if activation == "swiglu":
        return 8 * math.ceil(8 * d_model / 3 / 8)
    return 4 * d_model


class FeedForward(nn.Module):
    """Position-wise feed-forward network with activation relu | gelu | gelu_tanh | relu2 | silu,
    or the gated "swiglu". Acts on the last dimension only, so tokens never mix here."""

    def __init__(self, d_model, d_ff=None, activation="gelu", bias=True, dropout=0.0):
        super().__init__()
        if activation != "swiglu" and activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS) + ['swiglu']}, "
                             f"got {activation!r}")
        self.activation = activation
        d_ff = default_d_ff(d_model, activation) if d_ff is None else d_ff
        self.fc = nn.Linear(d_model, d_ff, bias=bias)
        if activation == "swiglu":
            self.gate = nn.Linear(d_model, d_ff, bias=bias)
        self.proj = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        if self.activation == "swiglu":
            h = F.silu(self.gate(x)) * self.fc(x)
        else:
            h = ACTIVATIONS[self.activation](self.fc(x))
        return self.dropout(self.proj(h))
