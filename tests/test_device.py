import random

import numpy as np
import pytest
import torch

from mathref import device as dev


def test_get_device_prefers_cuda_then_mps_then_cpu(monkeypatch):
    monkeypatch.delenv("MATHREF_DEVICE", raising=False)
    expected = ("cuda" if torch.cuda.is_available() else
                "mps" if torch.backends.mps.is_available() else "cpu")
    assert dev.get_device().type == expected


def test_get_device_honours_override(monkeypatch):
    monkeypatch.setenv("MATHREF_DEVICE", "cpu")
    assert dev.get_device() == torch.device("cpu")
    assert dev.get_device("cpu") == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error raised without CUDA")
def test_get_device_rejects_missing_cuda():
    with pytest.raises(ValueError, match="CUDA is not available"):
        dev.get_device("cuda")


def test_seed_everything_repeats_all_generators():
    dev.seed_everything(123)
    first = (random.random(), np.random.rand(), torch.rand(3))
    dev.seed_everything(123)
    second = (random.random(), np.random.rand(), torch.rand(3))
    assert first[0] == second[0] and first[1] == second[1]
    assert torch.equal(first[2], second[2])
    with pytest.raises(TypeError, match="seed must be an int"):
        dev.seed_everything(1.5)


def test_autocast_dtype(device):
    dtype = dev.autocast_dtype(device)
    if device.type == "cuda":
        major, _ = torch.cuda.get_device_capability(device)
        assert dtype == (torch.bfloat16 if major >= 8 else torch.float16)
    else:
        assert dtype == torch.float32


def test_describe_environment_names_versions_and_device(device):
    text = dev.describe_environment(device)
    assert torch.__version__ in text and f"device: {device.type}" in text


def test_seeded_adds_the_sweep_offset(monkeypatch):
    monkeypatch.delenv(dev.SEED_OFFSET_ENV, raising=False)
    assert dev.seed_offset() == 0 and dev.seeded(7) == 7
    monkeypatch.setenv(dev.SEED_OFFSET_ENV, "2")
    assert dev.seed_offset() == 2 and dev.seeded(7) == 9
    assert dev.seed_everything(7) == 9
    with_offset = torch.rand(3)
    torch.manual_seed(9)
    assert torch.equal(with_offset, torch.rand(3))
    monkeypatch.setenv(dev.SEED_OFFSET_ENV, "two")
    with pytest.raises(ValueError, match="MATHREF_SEED_OFFSET must be an integer"):
        dev.seeded(7)
    with pytest.raises(TypeError, match="seed must be an int"):
        dev.seeded(1.5)


_PRINTS_RANDOM_NUMBERS = """
import torch
from mathref.device import seed_everything, seeded
seed_everything(0)
print(torch.rand(2).tolist(), torch.randn(2, generator=torch.Generator().manual_seed(seeded(5))).tolist())
"""


def _printed(offset):
    import os
    import subprocess
    import sys
    env = {**os.environ, dev.SEED_OFFSET_ENV: str(offset)}
    return subprocess.run([sys.executable, "-c", _PRINTS_RANDOM_NUMBERS], env=env, check=True,
                          capture_output=True, text=True).stdout


def test_an_offset_changes_the_printed_numbers():
    """What `make seeds` relies on: the same code prints the same numbers at one offset and
    other numbers at another (outputs are compared at offset 0 only)."""
    assert _printed(0) == _printed(0)
    assert _printed(1) != _printed(0) and _printed(2) != _printed(1)


def test_every_seed_a_notebook_sets_goes_through_seeded():
    """The seed sweep reaches a generator only if its seed passes through `seeded` (or
    `seed_everything`, which calls it): a bare `manual_seed(3)` would stay fixed at every offset."""
    import json
    import re
    from pathlib import Path
    raw_seed = re.compile(r"(manual_seed|random\.Random|random\.seed|default_rng|np\.random\.seed|"
                          r"RandomState)\((?!seeded\()[^)]")
    offenders = []
    for nb in sorted(Path(__file__).resolve().parents[1].glob("notebooks/*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] == "code":
                offenders += [f"{nb.name} cell {i}: {m.group(0)}"
                              for m in raw_seed.finditer("".join(cell["source"]))]
    assert not offenders, "seeds set without mathref.device.seeded:\n" + "\n".join(offenders)
