"""Faults during training and in checkpoint and data files (issue 16 items 3-5, issue 14's
checkpoint lines): every fault is refused with a readable error or survived without losing
or poisoning a run."""
import hashlib
import io
import os
import pickle
import urllib.error

import pytest
import torch
from torch import nn

from mathref import data
from mathref.train import (CheckpointError, NonFiniteLossError, TrainConfig, load_checkpoint,
                           save_checkpoint, train)
from tests.test_train import small_setup


def _trained_checkpoint(tmp_path, **overrides):
    model, tr, va, cfg = small_setup(max_steps=4, **overrides)
    path = tmp_path / "ckpt.pt"
    train(model, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path)}))
    return path, model


# ---- the general save/load ----------------------------------------------------------------
def test_any_module_and_optimizer_round_trip(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    model(torch.randn(5, 3)).sum().backward()
    opt.step()
    path = tmp_path / "any.pt"
    save_checkpoint(path, model, opt, extra={"epoch": 3})
    fresh = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=1e-2)
    state = load_checkpoint(path, fresh, fresh_opt)
    assert state["extra"] == {"epoch": 3}
    for a, b in zip(model.parameters(), fresh.parameters()):
        assert torch.equal(a, b)
    saved, restored = opt.state_dict()["state"], fresh_opt.state_dict()["state"]
    assert all(torch.equal(saved[k]["exp_avg_sq"], restored[k]["exp_avg_sq"]) for k in saved)


def test_grad_scaler_state_is_saved_and_restored(tmp_path):
    model = nn.Linear(2, 1)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 10, growth_interval=1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):   # three overflowing steps: the scale halves each time
        scaler.scale(model(torch.ones(1, 2)).sum() * float("inf")).backward()
        scaler.step(opt)
        scaler.update()
    assert scaler.get_scale() == 2.0 ** 7
    save_checkpoint(tmp_path / "s.pt", model, opt, scaler=scaler)
    fresh = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    load_checkpoint(tmp_path / "s.pt", nn.Linear(2, 1), scaler=fresh)
    assert fresh.get_scale() == 2.0 ** 7


def test_fp16_resume_keeps_the_loss_scale(tmp_path, monkeypatch):
    """train() with loss scaling (fp16 autocast, forced on CPU): the checkpoint holds the
    scaler and a resume continues with its scale, not a fresh 65536."""
    import mathref.train as mt
    monkeypatch.setattr(mt, "autocast_dtype", lambda device: torch.float16)
    model, tr, va, cfg = small_setup(max_steps=4, dropout=0.0)
    model.float()
    path = tmp_path / "fp16.pt"
    cfg = TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path), "stop_at": 2})
    train(model, tr, va, cfg)
    state = load_checkpoint(path)
    assert "scaler" in state
    state_scale = state["scaler"]["scale"]
    seen = {}
    original = torch.amp.GradScaler.load_state_dict

    def spy(self, sd):
        seen["scale"] = sd["scale"]
        return original(self, sd)

    monkeypatch.setattr(torch.amp.GradScaler, "load_state_dict", spy)
    model2, _, _, _ = small_setup(dropout=0.0)
    model2.float()
    train(model2, tr, va, TrainConfig(**{**cfg.__dict__, "stop_at": None}), resume_from=path)
    assert seen["scale"] == state_scale


# ---- refused files --------------------------------------------------------------------------
def test_flipped_bytes_are_refused_with_both_digests(tmp_path):
    path, _ = _trained_checkpoint(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    header, payload = bytes(raw).split(b"\n", 1)
    stored = header.split(b"=")[1].decode()
    actual = hashlib.sha256(payload).hexdigest()
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(path)
    assert stored in str(err.value) and actual in str(err.value)


@pytest.mark.parametrize("damage, words", [
    (lambda raw: b"", "empty"),
    (lambda raw: raw[: len(raw) // 3], "truncated"),
    (lambda raw: raw[:20], "truncated"),
])
def test_empty_and_truncated_checkpoints_are_readable_errors(tmp_path, damage, words):
    path, _ = _trained_checkpoint(tmp_path)
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError, match=words):
        load_checkpoint(path)


def test_foreign_file_is_refused(tmp_path):
    path = tmp_path / "foreign.pt"
    torch.save({"weights": torch.ones(2)}, path)
    with pytest.raises(CheckpointError, match="not a mathref checkpoint"):
        load_checkpoint(path)
    path.write_text("hello")
    with pytest.raises(CheckpointError, match="not a mathref checkpoint"):
        load_checkpoint(path)


class _Payload:
    """Unpickling this object would create a marker file: the attack a checkpoint can carry."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def test_malicious_pickle_never_executes(tmp_path):
    marker = tmp_path / "pwned"
    buffer = io.BytesIO()
    torch.save({"model": {}, "evil": _Payload(str(marker))}, buffer)
    payload = buffer.getvalue()
    # even with a correct header and checksum, weights_only=True refuses the object
    path = tmp_path / "evil.pt"
    path.write_bytes(b"MATHREF-CHECKPOINT 2 sha256=" + hashlib.sha256(payload).hexdigest().encode()
                     + b"\n" + payload)
    with pytest.raises(CheckpointError, match="refused without running it"):
        load_checkpoint(path)
    assert not marker.exists()
    # a bare pickle file is refused before unpickling; resume through train() likewise
    bare = tmp_path / "bare.pt"
    bare.write_bytes(pickle.dumps(_Payload(str(marker))))
    model, tr, va, cfg = small_setup(max_steps=3)
    for candidate in (path, bare):
        with pytest.raises(CheckpointError):
            train(model, tr, va, cfg, resume_from=candidate)
    assert not marker.exists()


def test_resume_with_another_model_config_is_refused_unless_asked(tmp_path):
    from mathref.gpt import GPT, GPTConfig
    path, _ = _trained_checkpoint(tmp_path)
    other = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=16,
                          dropout=0.0)).double()     # dropout differs: 0.1 in the checkpoint
    _, tr, va, cfg = small_setup(max_steps=6)
    with pytest.raises(CheckpointError, match=r"dropout: 0\.1 in the checkpoint, 0\.0 now"):
        train(other, tr, va, cfg, resume_from=path)
    train(other, tr, va, cfg, resume_from=path, allow_config_change=True)
    wider = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=2, d_model=32))
    with pytest.raises(CheckpointError, match="d_model"):
        load_checkpoint(path, wider)
    with pytest.raises(CheckpointError, match="does not fit"):
        load_checkpoint(path, wider.double(), allow_config_change=True)


def test_checkpoint_without_optimizer_cannot_resume(tmp_path):
    model, tr, va, cfg = small_setup(max_steps=3)
    save_checkpoint(tmp_path / "w.pt", model)
    with pytest.raises(CheckpointError, match="no optimizer state"):
        train(model, tr, va, cfg, resume_from=tmp_path / "w.pt")


def test_stale_tmp_file_is_cleaned(tmp_path):
    model, tr, va, cfg = small_setup(max_steps=3)
    path = tmp_path / "ckpt.pt"
    stale = tmp_path / "ckpt.pt.tmp"
    stale.write_bytes(b"half a checkpoint from a killed save")
    train(model, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path)}))
    assert not stale.exists() and load_checkpoint(path)["step"] == 3


# ---- non-finite values during training ------------------------------------------------------
def _nan_gradient_at(model, step_to_poison):
    """A NaN gradient with a finite loss at one step (a hook on the head's weight)."""
    calls = {"n": 0}

    def hook(grad):
        calls["n"] += 1
        return grad * float("nan") if calls["n"] == step_to_poison + 1 else grad

    model.lm_head.weight.register_hook(hook)


def test_nan_gradient_stops_before_the_step_and_keeps_a_good_resumable_checkpoint(tmp_path):
    model, tr, va, cfg = small_setup(max_steps=6, dropout=0.0)
    path = tmp_path / "ckpt.pt"
    cfg = TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path), "checkpoint_interval": 1})
    _nan_gradient_at(model, 3)
    with pytest.raises(NonFiniteLossError, match="gradient norm is nan at step 3"):
        train(model, tr, va, cfg)
    assert all(torch.isfinite(p).all() for p in model.parameters())   # the step was not taken
    state = load_checkpoint(path)
    assert state["step"] == 3
    assert all(torch.isfinite(t).all() for t in state["model"].values() if t.is_floating_point())
    # the resumed run equals an uninterrupted one
    reference, _, _, _ = small_setup(max_steps=6, dropout=0.0)
    history_ref = train(reference, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": None}))
    resumed, _, _, _ = small_setup(max_steps=6, dropout=0.0)
    history = train(resumed, tr, va, cfg, resume_from=path)
    assert history["train_loss"] == history_ref["train_loss"]
    for a, b in zip(reference.parameters(), resumed.parameters()):
        assert torch.equal(a, b)


def test_nan_stop_leaves_a_checkpoint_with_the_default_interval(tmp_path):
    model, tr, va, cfg = small_setup(max_steps=6)
    path = tmp_path / "ckpt.pt"
    _nan_gradient_at(model, 2)
    assert cfg.checkpoint_interval == 0
    with pytest.raises(NonFiniteLossError):
        train(model, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path)}))
    assert load_checkpoint(path)["step"] == 2


def test_non_finite_weights_never_replace_the_last_good_checkpoint(tmp_path):
    path, _ = _trained_checkpoint(tmp_path)
    good = path.read_bytes()
    model, tr, va, cfg = small_setup(max_steps=6)
    with torch.no_grad():
        model.lm_head.weight[0, 0] = float("nan")
    with pytest.raises(NonFiniteLossError, match="step 0"):
        train(model, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path)}))
    assert path.read_bytes() == good


def test_interrupted_evaluation_is_rerun_on_resume(tmp_path):
    model_a, tr, va, cfg = small_setup(max_steps=6)
    history_a = train(model_a, tr, va, cfg)
    path = tmp_path / "ckpt.pt"
    model_b, _, _, _ = small_setup()
    calls = {"n": 0}

    def interrupt_in_first_evaluation(module, args):
        if not module.training:
            calls["n"] += 1
            if calls["n"] == 2:        # the second of eval_batches=2 forward passes
                raise KeyboardInterrupt

    handle = model_b.register_forward_pre_hook(interrupt_in_first_evaluation)
    with pytest.raises(KeyboardInterrupt):
        train(model_b, tr, va, TrainConfig(**{**cfg.__dict__, "checkpoint_path": str(path)}))
    handle.remove()
    state = load_checkpoint(path)
    assert state["step"] == 3 and state["history"]["eval_step"] == []
    assert len(state["history"]["seconds"]) == 0
    model_c, _, _, _ = small_setup()
    history_c = train(model_c, tr, va, cfg, resume_from=path)
    assert history_c["eval_step"] == history_a["eval_step"] == [3, 6]
    assert history_c["val_loss"] == history_a["val_loss"]
    assert len(history_c["seconds"]) == 2


# ---- data -------------------------------------------------------------------------------------
def test_explicit_mathref_data_without_the_file_is_an_error(tmp_path, monkeypatch,
                                                           shakespeare_dir):
    cache = tmp_path / "cache"
    (cache / "mathref").mkdir(parents=True)
    (cache / "mathref" / "tinyshakespeare.txt").write_bytes(
        (shakespeare_dir / "tinyshakespeare.txt").read_bytes())
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))      # a valid cached copy exists
    monkeypatch.setenv("MATHREF_DATA", str(tmp_path / "typo"))
    monkeypatch.setattr(data.urllib.request, "urlopen",
                        lambda *a, **k: pytest.fail("must not download"))
    with pytest.raises(FileNotFoundError, match="MATHREF_DATA=.*typo.* is set but"):
        data.tiny_shakespeare_path()


def test_offline_error_is_short(tmp_path, monkeypatch):
    monkeypatch.delenv("MATHREF_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))

    def offline(url, timeout=None):
        raise urllib.error.URLError(OSError(-3, "Temporary failure in name resolution"))

    monkeypatch.setattr(data.urllib.request, "urlopen", offline)
    with pytest.raises(FileNotFoundError) as err:
        data.tiny_shakespeare_path()
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert "name resolution" in str(err.value) and "MATHREF_DATA" in str(err.value)
    assert not list((tmp_path / "mathref").glob("*.part"))


def test_download_uses_a_short_connect_timeout(tmp_path, monkeypatch):
    monkeypatch.delenv("MATHREF_DATA", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    seen = {}

    def never_answers(url, timeout=None):
        seen["timeout"] = timeout
        raise TimeoutError("timed out")

    monkeypatch.setattr(data.urllib.request, "urlopen", never_answers)
    with pytest.raises(FileNotFoundError, match="timed out"):
        data.tiny_shakespeare_path()
    assert seen["timeout"] is not None and seen["timeout"] <= 15
