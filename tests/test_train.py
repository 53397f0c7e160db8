"""mathref.train: schedule, decay groups, accumulation, NaN stop, exact resume, DDP."""
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mathref.data import get_batch, train_val_split
from mathref.gpt import GPT, GPTConfig
from mathref.train import (NonFiniteLossError, TrainConfig, configure_optimizer, lr_at,
                           load_checkpoint, train)

ROOT = Path(__file__).resolve().parents[1]


def small_setup(max_steps=6, dropout=0.1, **overrides):
    """A tiny model and a synthetic corpus with structure (a noisy counting sequence)."""
    torch.manual_seed(0)
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16,
                       dropout=dropout)
    model = GPT(config).double()
    g = torch.Generator().manual_seed(0)
    data = (torch.arange(3000) + torch.randint(0, 2, (3000,), generator=g)) % 11
    train_data, val_data = train_val_split(data, 0.1)
    cfg = dict(max_steps=max_steps, batch_size=8, block_size=8, lr=3e-3, min_lr=3e-4,
               warmup_steps=2, eval_interval=3, eval_batches=2, progress=False)
    cfg.update(overrides)
    return model, train_data, val_data, TrainConfig(**cfg)


def test_get_batch_targets_are_inputs_shifted_by_one():
    data = torch.arange(100)
    x, y = get_batch(data, 4, 10, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 10)
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)
    with pytest.raises(ValueError, match="block_size"):
        get_batch(torch.arange(5), 2, 5)


def test_train_val_split_keeps_order_and_sizes():
    tr, va = train_val_split(torch.arange(100), 0.1)
    assert torch.equal(tr, torch.arange(90)) and torch.equal(va, torch.arange(90, 100))


def test_lr_schedule_matches_closed_form():
    cfg = TrainConfig(max_steps=1000, lr=1e-3, min_lr=1e-4, warmup_steps=100)
    assert lr_at(0, cfg) == pytest.approx(1e-5)
    assert lr_at(99, cfg) == pytest.approx(1e-3)
    mid = 100 + 450
    assert lr_at(mid, cfg) == pytest.approx(1e-4 + 0.5 * 0.9e-3)     # cos(π/2) = 0
    assert lr_at(1000, cfg) == pytest.approx(1e-4)


def test_weight_decay_only_on_matrices():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16))
    opt = configure_optimizer(model, 1e-3, 0.1)
    decayed, plain = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decayed["params"]) and all(p.dim() == 1 for p in plain["params"])
    assert sum(p.numel() for g in opt.param_groups for p in g["params"]) == model.num_parameters()


def test_muon_groups_take_the_block_matrices():
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, d_model=16,
                          style="modern"))
    opt = configure_optimizer(model, 1e-3, 0.1, optimizer="muon")
    muon, matrices, plain = opt.param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    assert muon["muon"] and not matrices["muon"] and not plain["muon"]
    assert sorted(names[id(p)] for p in matrices["params"]) == ["lm_head.weight", "tok_emb.weight"]
    assert all(names[id(p)].startswith("blocks.") and p.dim() == 2 for p in muon["params"])
    assert len(muon["params"]) == 2 * 6           # q, k, v, o, fc, proj per block
    assert muon["weight_decay"] == matrices["weight_decay"] == 0.1 and plain["weight_decay"] == 0.0
    assert sum(p.numel() for g in opt.param_groups for p in g["params"]) == model.num_parameters()
    with pytest.raises(ValueError, match="optimizer"):
        TrainConfig(optimizer="sgd")


def test_training_lowers_the_loss_and_logs_history():
    model, tr, va, cfg = small_setup(max_steps=30)
    history = train(model, tr, va, cfg)
    assert len(history["train_loss"]) == 30 and history["eval_step"][-1] == 30
    assert history["val_loss"][-1] < math.log(11) - 0.5


def test_gradient_accumulation_equals_the_large_batch():
    results = []
    for accum in (1, 4):
        model, tr, va, cfg = small_setup(max_steps=3, dropout=0.0, grad_accum=accum)
        train(model, tr, va, cfg)
        results.append(torch.cat([p.flatten() for p in model.parameters()]))
    torch.testing.assert_close(results[0], results[1], atol=1e-12, rtol=1e-10)


def test_non_finite_loss_stops_with_a_clear_message():
    model, tr, va, cfg = small_setup(max_steps=3)
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteLossError, match="step 0"):
        train(model, tr, va, cfg)


@pytest.mark.parametrize("optimizer", ["adamw", "muon"])
def test_resume_is_bitwise_exact(tmp_path, optimizer):
    """Train 8 steps straight == train 4 (stop_at), checkpoint, load into a fresh model, train
    4 more (with dropout on, so the random generators must be restored too)."""
    model_a, tr, va, cfg = small_setup(max_steps=8, optimizer=optimizer)
    history_a = train(model_a, tr, va, cfg)

    path = tmp_path / "ckpt.pt"
    model_b, _, _, _ = small_setup()
    train(model_b, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path),
                                          "stop_at": 4}))
    assert load_checkpoint(path)["step"] == 4

    model_c, _, _, _ = small_setup()
    torch.manual_seed(999)   # the checkpoint must restore every generator itself
    history_c = train(model_c, tr, va, cfg, resume_from=path)
    for (name, a), c in zip(model_a.state_dict().items(), model_c.state_dict().values()):
        assert torch.equal(a, c), name
    assert history_a["train_loss"] == history_c["train_loss"]


def test_interrupting_saves_every_finished_step(tmp_path):
    model_a, tr, va, cfg = small_setup(max_steps=6)
    train(model_a, tr, va, cfg)
    path = tmp_path / "ckpt.pt"
    model_b, _, _, _ = small_setup()
    calls = {"n": 0}

    def interrupt_on_third_forward(module, args):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt

    handle = model_b.register_forward_pre_hook(interrupt_on_third_forward)
    with pytest.raises(KeyboardInterrupt):
        train(model_b, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path)}))
    handle.remove()
    assert load_checkpoint(path)["step"] == 2
    model_c, _, _, _ = small_setup()
    train(model_c, tr, va, cfg, resume_from=path)
    for a, c in zip(model_a.parameters(), model_c.parameters()):
        assert torch.equal(a, c)


def test_ddp_on_two_cpu_processes_matches_single_process(tmp_path):
    out = tmp_path / "ddp.pt"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc_per_node", "2", str(ROOT / "tests" / "ddp_worker.py"), str(out)],
                   check=True, env=env, cwd=ROOT, capture_output=True, timeout=240)
    ddp = torch.load(out, weights_only=False)
    model, tr, va, cfg = small_setup(dropout=0.0)   # dropout masks would differ per process
    history = train(model, tr, va, cfg)
    for name, p in model.state_dict().items():
        torch.testing.assert_close(ddp["params"][name], p, atol=1e-10, rtol=1e-8, msg=name)
    assert ddp["loss"] == pytest.approx(history["train_loss"], rel=1e-10)


def test_estimate_loss_is_the_mean_cross_entropy_over_fixed_windows():
    from mathref.train import estimate_loss
    model, _, val_data, cfg = small_setup(dropout=0.5)
    model.train()
    g = torch.Generator().manual_seed(cfg.eval_seed)
    by_hand = []
    with torch.no_grad():
        model.eval()
        for _ in range(3):
            x, y = get_batch(val_data, cfg.batch_size, cfg.block_size, g)
            logits, _ = model(x)
            by_hand.append(torch.nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten()).item())
        model.train()
    got = estimate_loss(model, val_data, cfg, torch.device("cpu"), batches=3)
    assert got == pytest.approx(sum(by_hand) / 3, rel=1e-12)
    assert model.training                      # the mode is restored (dropout back on)
    assert estimate_loss(model, val_data, cfg, torch.device("cpu"), batches=3) == got  # same windows
    # eval_batch_size fixes the windows whatever the training batch size
    a, b = (TrainConfig(**{**cfg.__dict__, "batch_size": bs, "eval_batch_size": 4}) for bs in (2, 8))
    assert estimate_loss(model, val_data, a, torch.device("cpu"), batches=3) == \
        estimate_loss(model, val_data, b, torch.device("cpu"), batches=3)
    assert estimate_loss(model, val_data, TrainConfig(**{**cfg.__dict__, "eval_batch_size": cfg.batch_size}),
                         torch.device("cpu"), batches=3) == got


def test_save_checkpoint_holds_everything_to_continue(tmp_path):
    from mathref.train import save_checkpoint
    model, _, _, cfg = small_setup()
    opt = configure_optimizer(model, 1e-3, 0.1)
    model(torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 8, dtype=torch.long))[1].backward()
    opt.step()
    gen = torch.Generator().manual_seed(5)
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, model, opt, 7, {"step": [1]}, gen, cfg)
    state = load_checkpoint(path)
    assert state["step"] == 7 and state["history"] == {"step": [1]}
    assert state["train_config"]["max_steps"] == cfg.max_steps
    for name, tensor in model.state_dict().items():
        assert torch.equal(state["model"][name], tensor)
    assert torch.equal(state["rng"]["batches"], gen.get_state())
    saved = state["optimizer"]["state"]
    assert all(torch.equal(saved[i]["exp_avg"], s["exp_avg"]) for i, s in opt.state_dict()["state"].items())
    assert not (tmp_path / "ckpt.pt.tmp").exists()   # written atomically


def test_cpu_bf16_autocasts_the_matrix_products_and_trains_like_float32():
    """cpu_bf16=True: the forward's matrix products run in bfloat16 on the CPU (the weights
    stay float32), and 40 steps end within 0.1 nats of the same run in float32."""
    from mathref.train import _autocast
    cfg = TrainConfig(cpu_bf16=True, progress=False)
    with _autocast(torch.device("cpu"), cfg):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.bfloat16
    with _autocast(torch.device("cpu"), TrainConfig(progress=False)):
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32
    final = {}
    for bf16 in (False, True):
        model, tr, va, cfg = small_setup(max_steps=40, dropout=0.0, cpu_bf16=bf16)
        model = model.float()
        final[bf16] = train(model, tr, va, cfg)["val_loss"][-1]
        assert all(p.dtype == torch.float32 for p in model.parameters())
    assert final[True] < math.log(11) - 0.5 and abs(final[True] - final[False]) < 0.1, final
    with pytest.raises(TypeError, match="cpu_bf16"):
        TrainConfig(cpu_bf16="yes")
