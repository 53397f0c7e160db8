"""mathref: the from-scratch reference implementations behind the course
"From x² to GPT: the mathematics of deep learning".

One module per idea; import the one a chapter needs, e.g. ``from mathref import calculus``.
Every function is tested against an independent oracle (PyTorch, autograd, a closed form or
finite differences) in ``tests/``.
"""

__version__ = "0.2.0.dev0"

# The oldest torch the course is tested with (`make canary` runs every notebook and the unit
# tests on it; pyproject.toml declares the same floor, a unit test keeps the two equal). Older
# torch lacks what the chapters use (torch.optim.Muon appeared in 2.9, F.rms_norm in 2.4), so
# fail here, with the fix, rather than deep inside a chapter.
TORCH_FLOOR = (2, 9)


def _check_torch(version):
    """Raise ImportError naming the fix when ``version`` (a torch version string) is too old."""
    import re

    numbers = tuple(int(n) for n in re.findall(r"\d+", version.split("+")[0])[:2])
    if numbers < TORCH_FLOOR:
        floor = ".".join(map(str, TORCH_FLOOR))
        raise ImportError(
            f"mathref needs torch >= {floor}, but this Python has torch {version}. "
            f'Upgrade it with:  pip install --upgrade "torch>={floor}"  '
            "(in Colab: run that in a cell, then Runtime > Restart session).")


def _installed_torch_version():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:  # e.g. a torch built from source: ask the module itself
        import torch

        return torch.__version__


_check_torch(_installed_torch_version())
