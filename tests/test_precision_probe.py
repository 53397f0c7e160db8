"""The CPU precision probe: bfloat16 autocast only where this CPU multiplies bf16 faster."""
import os
import subprocess
import sys

import pytest
import torch

from tests.conftest import ROOT
from mathref import train as train_module
from mathref.device import cpu_bf16_probe
from mathref.train import TrainConfig, _autocast, cpu_bf16_enabled


def fake_timer(ms32, ms16):
    """A stand-in for one timed product: fixed milliseconds per dtype, counting its calls."""
    calls = []

    def time_matmul(dtype):
        calls.append(dtype)
        return (ms32 if dtype == torch.float32 else ms16) / 1e3
    return time_matmul, calls


@pytest.fixture(autouse=True)
def no_override(monkeypatch):
    monkeypatch.delenv("MATHREF_CPU_BF16", raising=False)
    monkeypatch.setattr(train_module, "_CPU_BF16_PROBED", {})


def test_forced_slow_bf16_chooses_float32_and_says_why():
    """The AVX2-only EPYC of issue 36: 2.2 ms in float32, 75 ms in bf16."""
    timer, calls = fake_timer(2.2, 75.0)
    use, ratio, reason = cpu_bf16_probe(time_matmul=timer, repeats=3)
    assert use is False and ratio == pytest.approx(2.2 / 75.0)
    assert reason.startswith("float32") and "takes 34.1× float32's time" in reason
    assert calls == [torch.float32, torch.bfloat16] * 4        # interleaved, warm-up round + 3


def test_forced_fast_bf16_chooses_bf16_and_says_why():
    timer, _ = fake_timer(1.0, 0.5)
    use, ratio, reason = cpu_bf16_probe(time_matmul=timer)
    assert use is True and ratio == pytest.approx(2.0)
    assert reason.startswith("bfloat16") and "2.00×" in reason


def test_margin_decides_a_close_call_and_the_best_time_counts():
    """bf16 1.1× faster is not enough at the default margin of 1.25; a slow first (warm-up)
    call and one slow repeat do not count."""
    use, _, reason = cpu_bf16_probe(time_matmul=fake_timer(1.1, 1.0)[0])
    assert use is False and "only 1.10× as fast as float32, below the 1.25×" in reason
    assert cpu_bf16_probe(time_matmul=fake_timer(1.1, 1.0)[0], margin=1.05)[0] is True
    times = iter([100.0, 100.0, 1.0, 0.5, 1.0, 9.0])            # ms: f32, bf16, f32, bf16, ...
    use, ratio, _ = cpu_bf16_probe(time_matmul=lambda dtype: next(times) / 1e3, repeats=2)
    assert use is True and ratio == pytest.approx(2.0)


def test_environment_overrides_the_probe(monkeypatch):
    timer, calls = fake_timer(1.0, 0.5)
    monkeypatch.setenv("MATHREF_CPU_BF16", "0")
    assert cpu_bf16_probe(time_matmul=timer) == (False, None, cpu_bf16_probe()[2])
    assert "MATHREF_CPU_BF16=0" in cpu_bf16_probe()[2] and calls == []
    monkeypatch.setenv("MATHREF_CPU_BF16", "1")
    assert cpu_bf16_probe(time_matmul=fake_timer(2.2, 75.0)[0])[0] is True
    monkeypatch.setenv("MATHREF_CPU_BF16", "yes")
    with pytest.raises(ValueError, match="MATHREF_CPU_BF16"):
        cpu_bf16_probe()


def test_real_probe_restores_the_thread_count_and_gives_a_finite_ratio():
    threads = torch.get_num_threads()
    use, ratio, reason = cpu_bf16_probe(repeats=2)
    assert torch.get_num_threads() == threads
    assert 0 < ratio < float("inf") and use == (ratio >= 1.25) and "768×128×512" in reason


def test_emulated_bf16_is_measured_slow():
    """With oneDNN limited to AVX2 (no bf16 instructions; on an AVX2-only CPU it has none
    anyway), bf16 products are emulated: the real probe must measure that and pick float32."""
    env = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2",
               PYTHONPATH=str(ROOT), MATHREF_CPU_BF16="auto")
    code = "from mathref.device import cpu_bf16_probe; print(cpu_bf16_probe(repeats=2)[:2])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    use, ratio = eval(out)
    assert use is False and ratio < 1.0, out


def test_train_config_auto_follows_the_probe(monkeypatch):
    """cpu_bf16="auto": the CPU autocasts to bf16 exactly when the probe (here the override)
    says so; True/False stay as they are; other strings are refused."""
    cpu = torch.device("cpu")
    cfg = TrainConfig(cpu_bf16="auto", progress=False)
    for setting, dtype in (("0", torch.float32), ("1", torch.bfloat16)):
        monkeypatch.setenv("MATHREF_CPU_BF16", setting)
        assert cpu_bf16_enabled(cfg) is (setting == "1")
        with _autocast(cpu, cfg):
            assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == dtype
    monkeypatch.setenv("MATHREF_CPU_BF16", "0")
    assert cpu_bf16_enabled(TrainConfig(cpu_bf16=True, progress=False)) is True
    with pytest.raises(TypeError, match='cpu_bf16 must be True or False or "auto"'):
        TrainConfig(cpu_bf16="fast")


def test_auto_probes_once_per_setting(monkeypatch):
    calls = []
    monkeypatch.setattr(train_module, "cpu_bf16_probe",
                        lambda: calls.append(1) or (False, 0.03, "slow"))
    cfg = TrainConfig(cpu_bf16="auto", progress=False)
    assert [cpu_bf16_enabled(cfg) for _ in range(3)] == [False] * 3 and len(calls) == 1
