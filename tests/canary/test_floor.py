"""The torch floor is one number: pyproject.toml's `torch>=X` is mathref.TORCH_FLOOR, the
version `make canary` tests (tools/canary.py reads pyproject), and importing mathref with an
older torch fails with the fix in the message."""
import re
import sys
from pathlib import Path

import pytest
import torch

import mathref

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import canary  # noqa: E402


def test_pyproject_floor_is_mathref_floor():
    declared = re.search(r'"torch>=([0-9.]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert tuple(int(p) for p in declared.split(".")) == mathref.TORCH_FLOOR
    assert canary.floor_version() == ".".join(map(str, mathref.TORCH_FLOOR)) + ".0"


@pytest.mark.parametrize("version", ["2.8.0+cu126", "2.8.0", "2.1.2", "1.13.1"])
def test_older_torch_is_refused_with_the_fix(version):
    with pytest.raises(ImportError, match=r'pip install --upgrade "torch>=2\.\d+"') as err:
        mathref._check_torch(version)
    assert version in str(err.value)


@pytest.mark.parametrize("version", ["2.9.0", "2.9.1+cpu", "2.10.0a0+git1234", "2.15.0", "3.0.0"])
def test_floor_and_newer_are_accepted(version):
    floor = ".".join(map(str, mathref.TORCH_FLOOR))
    expected_ok = tuple(int(p) for p in re.findall(r"\d+", version)[:2]) >= mathref.TORCH_FLOOR
    assert expected_ok, (version, floor)
    mathref._check_torch(version)  # no exception


def test_this_torch_passes_the_check():
    mathref._check_torch(torch.__version__)


def test_canary_table_format():
    text = canary.table(["torch 2.15.0 (newest)", "torch 2.9.0 (floor)"],
                        [("01_gradient_descent", ["✓", "cell 64: AttributeError: a|b"])])
    lines = text.splitlines()
    assert lines[0] == "| | torch 2.15.0 (newest) | torch 2.9.0 (floor) |"
    assert lines[1] == "|---|---|---|"
    assert lines[2] == "| 01_gradient_descent | ✓ | cell 64: AttributeError: a\\|b |"
