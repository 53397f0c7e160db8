"""Devices, seeds and precision: the few lines every chapter starts with.

The course code never hard-codes a device or dtype; notebooks pick one with ``get_device()``
and every function follows the device and dtype of its inputs.
"""
import os
import random

import numpy as np
import torch

from mathref._validation import resolve_device

__all__ = ["get_device", "seed_everything", "seeded", "seed_offset", "autocast_dtype",
           "describe_environment"]

_DEVICE_ENV = "MATHREF_DEVICE"


def get_device(prefer=None):
    """Return the best available ``torch.device``: CUDA, then Apple MPS, then CPU.

    ``prefer`` (or the environment variable ``MATHREF_DEVICE``) forces a choice, e.g. "cpu";
    the course's stored outputs are generated with ``MATHREF_DEVICE=cpu``.
    """
    choice = prefer if prefer is not None else os.environ.get(_DEVICE_ENV, "").strip()
    if choice:
        return resolve_device(choice, "prefer" if prefer is not None else _DEVICE_ENV)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def _mps_available():
    backend = getattr(torch.backends, "mps", None)
    return backend is not None and backend.is_available()


SEED_OFFSET_ENV = "MATHREF_SEED_OFFSET"


def seed_offset():
    """The seed sweep's shift: the integer in ``$MATHREF_SEED_OFFSET``, 0 when it is unset.

    ``make seeds`` runs every notebook at offsets 1 and 2, so that an ``assert`` that holds on
    the printed seed only fails there (outputs are compared at offset 0 only).
    """
    raw = os.environ.get(SEED_OFFSET_ENV, "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{SEED_OFFSET_ENV} must be an integer, got {raw!r}") from None


def seeded(seed):
    """``seed + seed_offset()``: every seed the course sets passes through here.

    At offset 0 (the default, and how stored outputs are made) it is ``seed`` itself.
    """
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    return seed + seed_offset()


def seed_everything(seed=0):
    """Seed Python's, NumPy's and PyTorch's generators (all devices) with ``seeded(seed)``.

    Returns the seed used (``seed`` itself unless the seed sweep's offset is set).
    """
    seed = seeded(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
    return seed


def autocast_dtype(device):
    """The low-precision dtype to use under ``torch.autocast`` on ``device``.

    bfloat16 on CUDA GPUs of compute capability 8.0+ (A100, H100, ...), float16 on older CUDA
    GPUs (they need loss scaling, see chapter 15), float32 (no autocast) on CPU and MPS.
    """
    device = resolve_device(device)
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        return torch.bfloat16 if major >= 8 else torch.float16
    return torch.float32


def describe_environment(device=None):
    """One line naming the versions and the device: printed by every chapter's setup cell."""
    from mathref import __version__

    device = resolve_device(device) if device is not None else get_device()
    name = "CPU"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    elif device.type == "mps":
        name = "Apple GPU (MPS)"
    return f"mathref {__version__} | torch {torch.__version__} | device: {device.type} ({name})"
