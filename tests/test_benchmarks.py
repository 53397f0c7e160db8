"""The benchmark recipes build what they say, including the GPU ones that CI cannot run."""
import importlib.util
from dataclasses import replace

import pytest
import torch

from tests.conftest import ROOT
from mathref.gpt import GPT, GPTConfig
from mathref.train import TrainConfig, configure_optimizer, train

spec = importlib.util.spec_from_file_location("gpt_shakespeare", ROOT / "benchmarks" / "gpt_shakespeare.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)

# nanoGPT's model.py prints "number of parameters" without the position table:
# 0.80M for the CPU recipe and 10.65M for the GPU recipe (vocabulary 65, no biases, tied head).
NANOGPT_COUNTS = {"cpu": 0.80, "cuda": 10.65}   # millions


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_recipe_a_has_nanogpts_parameter_count(device):
    _, model_kw, _ = bench.RECIPES[device]["a"]
    model = GPT(GPTConfig(vocab_size=65, **model_kw))
    L, d, T = model_kw["n_layer"], model_kw["d_model"], model_kw["block_size"]
    closed_form = 12 * L * d * d + 65 * d + T * d + (2 * L + 1) * d   # matrices, tables, LN gains
    assert model.num_parameters() == closed_form
    without_positions = model.num_parameters() - T * d
    assert round(without_positions / 1e6, 2) == NANOGPT_COUNTS[device]


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("name", ["a", "b"])
def test_recipe_trains_two_steps_at_a_small_size(device, name, tmp_path):
    """Every recipe's model and training config (optimizer, schedule, evaluation) run, shrunk to
    a tiny width and two steps; the loss is finite and the parameters move."""
    _, model_kw, train_kw = bench.RECIPES[device][name]
    small = dict(model_kw, n_layer=1, d_model=4 * model_kw["n_head"], block_size=16)
    model = GPT(GPTConfig(vocab_size=65, **small))
    before = [p.detach().clone() for p in model.parameters()]
    cfg = TrainConfig(**{**bench.EVAL, **train_kw, "progress": False})
    cfg = replace(cfg, max_steps=2, warmup_steps=1, batch_size=4, block_size=16, eval_batches=1,
                  eval_batch_size=4, eval_interval=1)
    data = torch.randint(0, 65, (500,), generator=torch.Generator().manual_seed(0))
    history = train(model, data[:400], data[400:], cfg)
    assert len(history["val_loss"]) == 2 and all(torch.isfinite(torch.tensor(history["val_loss"])))
    assert all(not torch.equal(a, p) for a, p in zip(before, model.parameters()) if p.dim() == 2)
    kind = type(configure_optimizer(model, 1e-3, 0.1, optimizer=cfg.optimizer)).__name__
    assert kind == ("Muon" if train_kw.get("optimizer") == "muon" else "AdamW")


def test_main_runs_every_summary_over_two_seeds(monkeypatch, capsys):
    """The whole script, with its recipes shrunk to a tiny width and a few steps: two seeds per
    config, the (a)-vs-nanoGPT line, the ratio, the bf16 and (c) lines all print."""
    tiny = {}
    for name, recipe in bench.RECIPES["cpu"].items():
        if name == "target":
            tiny[name] = 99.0   # every run "reaches" the target
            continue
        label, model_kw, train_kw = recipe
        tiny[name] = (label, dict(model_kw, n_layer=1, d_model=16, block_size=16),
                      dict(train_kw, max_steps=4, warmup_steps=1, batch_size=4, block_size=16))
    monkeypatch.setitem(bench.RECIPES, "cpu", tiny)
    monkeypatch.setattr(bench, "NANOGPT_CPU_SEEDS", {2: (2.0, 2.1, 2.2), 1500: (1.9, 1.9, 1.9)})
    monkeypatch.setattr(bench, "EVAL", dict(eval_batches=2, eval_batch_size=4))
    estimates = bench.nanogpt_style_estimates
    monkeypatch.setattr(bench, "nanogpt_style_estimates",
                        lambda *args: estimates(*args, draws=3))
    assert bench.main(["--configs", "a,b,b32,c", "--seeds", "0,1", "--eval-interval", "2"]) == 0
    out = capsys.readouterr().out
    assert out.count("(a) final val loss") == 2 and out.count("(b) final val loss") == 2
    assert "step 2: (a)" in out and "step 1500" not in out       # only steps that were evaluated
    assert "means over seeds [0, 1]" in out
    assert "(b) / (a) =" in out and "(b) / (b32) =" in out and "within (a)'s time" in out


@pytest.mark.parametrize("slow", [True, False])
def test_main_chooses_the_precision_the_probe_measures(monkeypatch, capsys, slow):
    """(b) and (c) follow the CPU probe, forced here: bf16 75 ms against 2.2 ms in float32 (the
    AVX2-only EPYC of issue 36) -> float32 and flash attention; bf16 twice as fast -> bf16
    autocast and SDPA's math backend. (b32) stays float32 either way; the choice and the
    measured ratio are printed; FLOAT32_CHANGES apply to (b) in float32 only."""
    from mathref.device import cpu_bf16_probe
    ms = (2.2, 75.0) if slow else (1.0, 0.5)
    fake = lambda dtype: ms[dtype == torch.bfloat16] / 1e3   # noqa: E731
    monkeypatch.delenv("MATHREF_CPU_BF16", raising=False)
    monkeypatch.setattr(bench, "cpu_bf16_probe", lambda: cpu_bf16_probe(time_matmul=fake))
    tiny = {"target": 99.0}
    for name in ("b", "c", "b32"):
        label, model_kw, train_kw = bench.RECIPES["cpu"][name]
        tiny[name] = (label, dict(model_kw, n_layer=1, d_model=16, block_size=16),
                      dict(train_kw, max_steps=2, warmup_steps=1, batch_size=4, block_size=16))
    monkeypatch.setitem(bench.RECIPES, "cpu", tiny)
    monkeypatch.setattr(bench, "EVAL", dict(eval_batches=1, eval_batch_size=4))
    monkeypatch.setattr(bench, "FLOAT32_CHANGES", {"b": ({"n_head": 2}, {"max_steps": 3})})
    seen, steps = [], []

    def spy(model, train_ids, val_ids, cfg, device=None):
        seen.append((cfg.cpu_bf16, torch.backends.cuda.flash_sdp_enabled()))   # flash allowed?
        steps.append((cfg.max_steps, model.config.n_head))
        return train(model, train_ids, val_ids, cfg, device=device)
    monkeypatch.setattr(bench, "train", spy)
    assert bench.main(["--configs", "b,c,b32", "--eval-interval", "1"]) == 0
    out = capsys.readouterr().out
    if slow:
        assert "precision of (b) and (c): float32 on the CPU: a bf16 product takes 34.1×" in out
        assert seen[0] == (False, True) and seen[1] == (False, True)
        assert "(b) in float32 reaches" in out
    else:
        assert "precision of (b) and (c): bfloat16 autocast on the CPU: it multiplies bf16 2.00×" in out
        assert seen[0] == (True, False) and seen[1] == (True, False)
        assert "(b) in bfloat16 reaches" in out
    assert seen[2] == (False, True)                                     # (b32)
    assert steps == [(3, 2) if slow else (2, 4), (2, 4), (2, 4)]          # (b), (c), (b32)
    assert ("in float32, (b) changes n_head=2, max_steps=3" in out) == slow
    assert out.count("seed 0; float32") == (3 if slow else 1)


def test_float32_changes_build_a_valid_recipe():
    """(b)'s float32 variant is a valid model and training config, smaller than its bf16 one
    (only changes it names differ)."""
    for name, (model_changes, train_changes) in bench.FLOAT32_CHANGES.items():
        _, model_kw, train_kw = bench.RECIPES["cpu"][name]
        changed = GPT(GPTConfig(vocab_size=65, **dict(model_kw, **model_changes)))
        TrainConfig(**dict(train_kw, **train_changes, progress=False))
        assert changed.num_parameters() < GPT(GPTConfig(vocab_size=65, **model_kw)).num_parameters()
