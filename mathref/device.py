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


def cpu_bf16_probe(shape=(768, 128, 512), repeats=5, margin=1.25, time_matmul=None):
    """Whether bfloat16 autocast pays on this CPU: a measured probe, not a guess from the CPU name.

    Times one matrix product of ``shape`` = (m, k, n), float32 inputs, as autocast runs it: plain
    float32, and cast to bfloat16 (one thread, the two interleaved, best of ``repeats`` after a
    warm-up round). bfloat16 is chosen only where it is at least ``margin`` times faster: CPUs with
    AVX512-BF16 or AMX multiply bf16 natively (about twice as fast as float32 on the benchmark's
    machine); others emulate it, many times slower (34× on an AVX2-only EPYC). PyTorch's
    ``torch.backends.cpu.get_cpu_capability()`` says "AVX512" or "AVX2" but not whether bf16 is
    native, so it is only reported. The environment variable ``MATHREF_CPU_BF16`` overrides the
    probe: "1" (bf16), "0" (float32) or "auto" (measure; the default). ``time_matmul(dtype)``,
    returning the seconds of one product, replaces the measurement (tests force a slow or fast result with it).

    Returns ``(use_bf16, ratio, reason)``: ratio is float32's time over bfloat16's (None when the
    environment decided), reason one sentence saying which and why.
    """
    import time

    setting = os.environ.get("MATHREF_CPU_BF16", "auto").strip().lower() or "auto"
    if setting not in ("0", "1", "auto"):
        raise ValueError(f"MATHREF_CPU_BF16 must be 0, 1 or auto, got {setting!r}")
    if setting != "auto":
        use = setting == "1"
        return use, None, (f"{'bfloat16' if use else 'float32'} on the CPU: set by "
                           f"MATHREF_CPU_BF16={setting} (no probe)")
    if time_matmul is None:
        m, k, n = shape
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(m, k, generator=generator)
        b = torch.randn(k, n, generator=generator)

        def time_matmul(dtype):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
                start = time.perf_counter()
                a @ b
                return time.perf_counter() - start

    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # one thread: a busy machine's other processes disturb it least
    try:
        times = {torch.float32: [], torch.bfloat16: []}
        for _ in range(repeats + 1):                   # interleaved; the first round warms up
            for dtype in times:
                times[dtype].append(time_matmul(dtype))
    finally:
        torch.set_num_threads(threads)
    t32, t16 = min(times[torch.float32][1:]), min(times[torch.bfloat16][1:])
    ratio = t32 / t16
    use = ratio >= margin
    size = "×".join(map(str, shape))
    if use:
        verdict = f"bfloat16 autocast on the CPU: it multiplies bf16 {ratio:.2f}× as fast as float32"
    elif ratio < 1:
        verdict = f"float32 on the CPU: a bf16 product takes {1 / ratio:.1f}× float32's time here"
    else:
        verdict = (f"float32 on the CPU: bf16 is only {ratio:.2f}× as fast as float32, below the "
                   f"{margin:g}× that would make autocast pay")
    return use, ratio, (f"{verdict} (probe: a {size} product, best of {repeats}, "
                        f"one thread; PyTorch's CPU capability "
                        f"{torch.backends.cpu.get_cpu_capability()})")
