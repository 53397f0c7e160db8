"""Argument checks for mathref's public functions: one place, one wording.

Every public entry point checks its arguments once, at the top, with these helpers, so a wrong
call fails at once with a ``ValueError`` or ``TypeError`` that names the argument and the value
received (``n_head must be an integer ≥ 1, got 0``) instead of a PyTorch error from deep inside.
Inner functions trust their callers and stay readable.
"""
import math
import numbers

import torch

__all__ = ["check_int", "check_number", "check_probability", "check_choice", "check_tensor",
           "check_token_ids", "resolve_device", "available_devices"]


def _describe(value):
    text = repr(value)
    return text if len(text) <= 60 else f"{type(value).__name__} {text[:57]}..."


def check_int(name, value, min=None, max=None, optional=False):
    """An integer (a Python or NumPy int, or a 0-d integer tensor; not a bool, not 2.0) within
    [min, max]. Returns it as a Python int (None passes through when ``optional``)."""
    if value is None and optional:
        return None
    if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_floating_point() \
            and value.dtype != torch.bool:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {_describe(value)}")
    value = int(value)
    if (min is not None and value < min) or (max is not None and value > max):
        bounds = (f"in [{min}, {max}]" if min is not None and max is not None
                  else f"≥ {min}" if min is not None else f"≤ {max}")
        raise ValueError(f"{name} must be an integer {bounds}, got {value}")
    return value


def check_number(name, value, min=None, max=None, min_open=False, max_open=False,
                 allow_inf=False, optional=False):
    """A real number (not a bool), not NaN, finite unless ``allow_inf``, within the bounds
    (``min_open``/``max_open`` exclude the bound itself). Returns it as a Python float."""
    if value is None and optional:
        return None
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {_describe(value)}")
    value = float(value)
    if math.isnan(value) or (math.isinf(value) and not allow_inf):
        raise ValueError(f"{name} must be a finite number, got {value}")
    low_bad = min is not None and (value <= min if min_open else value < min)
    high_bad = max is not None and (value >= max if max_open else value > max)
    if low_bad or high_bad:
        low = "" if min is None else ("(" if min_open else "[") + f"{min}, "
        high = "" if max is None else f"{max}" + (")" if max_open else "]")
        if min is None:
            bounds = ("< " if max_open else "≤ ") + f"{max}"
        elif max is None:
            bounds = ("> " if min_open else "≥ ") + f"{min}"
        else:
            bounds = f"in {low}{high}"
        raise ValueError(f"{name} must be {bounds}, got {value}")
    return value


def check_probability(name, value, allow_zero=True, allow_one=True):
    """A probability: a number in [0, 1] (ends excluded on request)."""
    return check_number(name, value, min=0.0, max=1.0, min_open=not allow_zero,
                        max_open=not allow_one)


def check_choice(name, value, choices):
    """One of a fixed set of strings (or values)."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_tensor(name, x, dims=None, kind=None, min_dims=None):
    """A torch.Tensor with ``dims`` dimensions (an int or a tuple of allowed counts), at least
    ``min_dims``, and of ``kind`` "float" (floating point) or "int" (integer, not bool)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    if dims is not None:
        allowed = (dims,) if isinstance(dims, int) else tuple(dims)
        if x.dim() not in allowed:
            want = " or ".join(str(d) for d in allowed)
            raise ValueError(f"{name} must have {want} dimension(s), got shape {tuple(x.shape)}")
    if min_dims is not None and x.dim() < min_dims:
        raise ValueError(f"{name} must have at least {min_dims} dimension(s), got shape "
                         f"{tuple(x.shape)}")
    if kind == "float" and not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {x.dtype}")
    if kind == "int" and (x.is_floating_point() or x.is_complex() or x.dtype == torch.bool):
        raise TypeError(f"{name} must be an integer tensor (token ids, indices), got dtype "
                        f"{x.dtype}; a float tensor would be silently truncated")
    return x


def check_token_ids(name, ids, vocab_size, allow=()):
    """An integer tensor whose entries lie in [0, vocab_size) (values in ``allow``, e.g. an
    ignore_index, are accepted too). An offending id is reported with its position."""
    check_tensor(name, ids, kind="int")
    if ids.numel() == 0:
        return ids
    bad = (ids < 0) | (ids >= vocab_size)
    for value in allow:
        bad &= ids != value
    if bad.any():
        position = tuple(int(i) for i in bad.nonzero()[0])
        value = int(ids[position])
        where = position[0] if len(position) == 1 else position
        raise ValueError(f"{name} holds id {value} at position {where}, outside the vocabulary "
                         f"[0, {vocab_size})")
    return ids


def available_devices():
    """The device names this machine can use, e.g. ['cpu', 'cuda:0', 'mps']."""
    names = ["cpu"]
    if torch.cuda.is_available():
        names += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
    backend = getattr(torch.backends, "mps", None)
    if backend is not None and backend.is_available():
        names.append("mps")
    return names


def resolve_device(device, name="device"):
    """A ``torch.device`` from a string or device, refused with the list of available devices
    when it does not exist here ("gpu", "cuda" without CUDA, "cuda:3" on a one-GPU machine).
    None stays None (the caller's default)."""
    if device is None:
        return None
    if isinstance(device, torch.device):
        parsed = device
    elif isinstance(device, str):
        try:
            parsed = torch.device(device.strip())
        except RuntimeError:
            raise ValueError(f"{name}={device!r} is not a device; available here: "
                             f"{', '.join(available_devices())}") from None
    else:
        raise TypeError(f"{name} must be a string such as 'cpu' or a torch.device, got "
                        f"{type(device).__name__} {_describe(device)}")
    available = available_devices()
    if parsed.type in ("cpu", "meta"):    # meta: shapes only, no data (always available)
        return parsed
    if parsed.type == "cuda" and not torch.cuda.is_available():
        reason = "CUDA is not available"
    elif parsed.type == "cuda" and parsed.index is not None \
            and parsed.index >= torch.cuda.device_count():
        reason = f"there are {torch.cuda.device_count()} CUDA devices"
    elif parsed.type == "mps" and "mps" not in available:
        reason = "MPS is not available"
    elif parsed.type not in ("cuda", "mps"):
        reason = f"mathref runs on cpu, cuda, mps (or meta), not {parsed.type}"
    else:
        return parsed
    raise ValueError(f"{name}={device!r} cannot be used: {reason}; available here: "
                     f"{', '.join(available)}")
