"""Shared fixtures: every device test runs on CPU and, where present, on CUDA and MPS."""
import os
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]

DEVICES = ["cpu"]
if torch.cuda.is_available():
    DEVICES.append("cuda")
if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
    DEVICES.append("mps")


@pytest.fixture(params=DEVICES)
def device(request):
    """A torch.device: the test runs once per available device."""
    return torch.device(request.param)


@pytest.fixture
def float64_device(device):
    """Like ``device`` but skips MPS, which has no float64 (the oracles are float64)."""
    if device.type == "mps":
        pytest.skip("MPS has no float64")
    return device


@pytest.fixture(scope="session")
def shakespeare_dir():
    """The folder named by MATHREF_DATA; `make test` and CI always set it."""
    folder = os.environ.get("MATHREF_DATA")
    if not folder:
        pytest.fail("MATHREF_DATA is not set: run the tests through `make test` or point it "
                    "at the folder holding tinyshakespeare.txt")
    return Path(folder)
