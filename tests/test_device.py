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
