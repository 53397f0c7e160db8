"""The training loop for language models. See chapter 14.

One step: for each of ``grad_accum`` micro-batches, loss/grad_accum → backward (the summed
gradient is the large-batch gradient); clip the global norm; set the learning rate from
warmup + cosine; AdamW step (weight decay on matrices only), or a Muon step on the blocks'
weight matrices with AdamW on the rest (``optimizer="muon"``). Every ``eval_interval`` steps the
held-out loss is measured under ``model.eval()`` and ``torch.no_grad()``. A non-finite loss
or gradient norm stops training *before* the optimizer step, with a clear message and a
checkpoint of the last finite state. Checkpoints hold everything needed to resume exactly:
model, optimizer, loss scaler, step, history and every random generator's state.

Checkpoint files (``save_checkpoint``/``load_checkpoint``, for any ``nn.Module`` and optimizer)
start with a one-line header carrying the sha256 of the rest; loading verifies it, then reads
the tensors with ``torch.load(weights_only=True)``, which never runs code from the file.

Data parallelism uses PyTorch's own DistributedDataParallel: launched under ``torchrun``, each
of the W processes takes its slice of the same global batch, DDP averages the gradients, and
the result equals single-process training with that global batch.
"""
import contextlib
import hashlib
import io
import math
import os
import pickle
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from mathref.data import get_batch
from mathref.device import autocast_dtype, cpu_bf16_probe, seeded
from mathref.optim import AdamW, Muon, clip_grad_norm_, decay_param_groups, warmup_cosine
from mathref._validation import (check_choice, check_int, check_number, check_tensor,
                                check_token_ids, resolve_device)

__all__ = ["TrainConfig", "configure_optimizer", "lr_at", "estimate_loss", "train",
           "save_checkpoint", "load_checkpoint", "NonFiniteLossError", "CheckpointError"]


class NonFiniteLossError(FloatingPointError):
    """The loss or the gradient norm became NaN or infinite."""


class CheckpointError(ValueError):
    """A checkpoint file is empty, truncated, corrupted, foreign or for another model."""


OPTIMIZERS = ("adamw", "muon")


@dataclass
class TrainConfig:
    max_steps: int = 2000          # the length of the schedule
    stop_at: int = None            # stop early (checkpointing) as if interrupted; resume later
    batch_size: int = 12           # the global batch (split across processes under DDP)
    block_size: int = 64           # context length of the training windows
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup_steps: int = 100
    decay_steps: int = None        # cosine from lr to min_lr over this many steps (default max_steps)
    weight_decay: float = 0.1
    betas: tuple = (0.9, 0.99)
    optimizer: str = "adamw"       # "adamw" | "muon" (Muon on the blocks' matrices, chapter 6)
    grad_clip: float = 1.0         # global-norm clipping; 0 disables
    grad_accum: int = 1
    eval_interval: int = 250
    eval_batches: int = 20
    eval_batch_size: int = None    # windows per evaluation batch (default batch_size)
    eval_seed: int = 1234
    seed: int = 0
    autocast: bool = True          # bf16/fp16 on GPUs (mathref.device.autocast_dtype), fp32 on CPU
    cpu_bf16: bool = False         # bf16 autocast on the CPU too (fast only where it has AVX512-BF16
                                   # or AMX); "auto": where cpu_bf16_probe measures it faster
    compile: bool = False
    progress: bool = True
    checkpoint_path: str = None
    checkpoint_interval: int = 0   # 0: save only at the end (if checkpoint_path is set)

    def __post_init__(self):
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        for name in ("max_steps", "batch_size", "block_size", "grad_accum", "eval_batches"):
            check_int(name, getattr(self, name), min=1)
        for name in ("stop_at", "decay_steps", "eval_batch_size"):
            check_int(name, getattr(self, name), min=1, optional=True)
        for name in ("warmup_steps", "eval_interval", "checkpoint_interval"):
            check_int(name, getattr(self, name), min=0)    # eval_interval=0: only at the end
        check_int("seed", self.seed)
        check_int("eval_seed", self.eval_seed)
        check_number("lr", self.lr, min=0.0, min_open=True)
        check_number("min_lr", self.min_lr, min=0.0, max=self.lr)
        check_number("weight_decay", self.weight_decay, min=0.0)
        check_number("grad_clip", self.grad_clip, min=0.0)      # 0 disables clipping
        if not isinstance(self.betas, (tuple, list)) or len(self.betas) != 2:
            raise TypeError(f"betas must be a pair (beta1, beta2), got {self.betas!r}")
        for k, beta in enumerate(self.betas):
            check_number(f"betas[{k}]", beta, min=0.0, max=1.0, max_open=True)
        if self.warmup_steps >= (self.decay_steps or self.max_steps):
            raise ValueError(f"warmup_steps={self.warmup_steps} must be smaller than decay_steps "
                             f"(default max_steps) = {self.decay_steps or self.max_steps}")
        for name in ("autocast", "cpu_bf16", "compile", "progress"):
            if not isinstance(getattr(self, name), bool) and not (name == "cpu_bf16"
                                                                  and self.cpu_bf16 == "auto"):
                extra = ' or "auto"' if name == "cpu_bf16" else ""
                raise TypeError(f"{name} must be True or False{extra}, got "
                                f"{getattr(self, name)!r}")
        if self.checkpoint_path is not None and not isinstance(self.checkpoint_path,
                                                               (str, os.PathLike)):
            raise TypeError(f"checkpoint_path must be a path or None, got "
                            f"{type(self.checkpoint_path).__name__}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size={self.batch_size} is not divisible by "
                             f"grad_accum={self.grad_accum}")


def configure_optimizer(model, lr, weight_decay, betas=(0.9, 0.99), foreach=True, optimizer="adamw"):
    """mathref's AdamW (decoupled weight decay, chapter 6) with decay on matrices (and
    embeddings) only: biases and norm gains (1-D parameters) are not decayed.

    ``optimizer="muon"``: mathref's Muon on the 2-D weight matrices inside the blocks (decayed),
    AdamW on the embeddings and the output head (decayed) and on the 1-D parameters (not). Its
    Newton–Schulz iteration runs in bfloat16 on a GPU and in float32 on any CPU, for portability:
    a CPU without bfloat16 instructions emulates those products (chapter 14.4)."""
    if optimizer == "adamw":
        return AdamW(decay_param_groups(model, weight_decay), lr=lr, betas=betas,
                     weight_decay=weight_decay, foreach=foreach)
    if optimizer != "muon":
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    hidden = [p for n, p in named if n.startswith("blocks.") and p.dim() == 2]
    rest = [p for n, p in named if not (n.startswith("blocks.") and p.dim() == 2)]
    return Muon([{"params": hidden, "muon": True, "weight_decay": weight_decay},
                 {"params": [p for p in rest if p.dim() >= 2], "muon": False,
                  "weight_decay": weight_decay},
                 {"params": [p for p in rest if p.dim() < 2], "muon": False, "weight_decay": 0.0}],
                lr=lr, betas=betas, foreach=foreach,
                ns_dtype="float32" if hidden and hidden[0].device.type == "cpu" else "bfloat16")


def lr_at(step, cfg):
    """Linear warmup to cfg.lr over warmup_steps, then cosine decay to cfg.min_lr over
    decay_steps (default max_steps): ``mathref.optim.warmup_cosine``. Steps count from 0; step 0
    already uses cfg.lr / warmup_steps (not 0) and step warmup_steps − 1 uses cfg.lr."""
    return warmup_cosine(step, cfg.warmup_steps, cfg.decay_steps or cfg.max_steps, cfg.lr,
                         cfg.min_lr)


_CPU_BF16_PROBED = {}   # MATHREF_CPU_BF16's value -> the probe's choice, measured once a process


def cpu_bf16_enabled(cfg):
    """cfg.cpu_bf16 as a bool: "auto" asks ``mathref.device.cpu_bf16_probe`` (once a process)."""
    if cfg.cpu_bf16 != "auto":
        return cfg.cpu_bf16
    key = os.environ.get("MATHREF_CPU_BF16", "auto")
    if key not in _CPU_BF16_PROBED:
        _CPU_BF16_PROBED[key] = cpu_bf16_probe()[0]
    return _CPU_BF16_PROBED[key]


def _autocast(device, cfg):
    """Mixed precision (chapter 15) as cfg asks: the device's low-precision dtype, and bf16 on
    the CPU only when cfg.cpu_bf16 (or "auto" and the probe finds bf16 faster); the weights and
    the optimizer stay in float32."""
    dtype = autocast_dtype(device)
    if device.type == "cpu" and cpu_bf16_enabled(cfg):
        dtype = torch.bfloat16
    return torch.autocast(device_type=device.type, dtype=dtype,
                          enabled=cfg.autocast and dtype != torch.float32)


@torch.no_grad()
def estimate_loss(model, data, cfg, device, batches=None):
    """Mean loss over ``batches`` fixed random windows of ``data`` (the same windows at every
    call: a fixed seed), in eval mode without gradients."""
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(seeded(cfg.eval_seed))
    losses = []
    for _ in range(batches or cfg.eval_batches):
        x, y = get_batch(data, cfg.eval_batch_size or cfg.batch_size, cfg.block_size, generator, device)
        with _autocast(device, cfg):
            _, loss = model(x, y)
        losses.append(loss.item())
    model.train(was_training)
    return sum(losses) / len(losses)


def _rank_and_world():
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


_MAGIC = b"MATHREF-CHECKPOINT 2 sha256="   # the header line: magic, digest of the rest, newline


def save_checkpoint(path, model, optimizer=None, step=None, history=None, generator=None,
                    train_config=None, *, scaler=None, extra=None):
    """Save ``model`` (any ``nn.Module``) and, when given, its optimizer, a ``GradScaler``, the
    step, the history, the random generators (torch's and ``generator``'s), the TrainConfig and
    ``extra`` (plain data: numbers, strings, lists, dicts, tensors) to ``path``.

    The file is a header line with the sha256 of the payload, then the payload (``torch.save``
    format). It is written to ``path.tmp``, flushed to disk and renamed, so an interrupted save
    never replaces the previous checkpoint with half a file."""
    core = _unwrap(model)
    if not isinstance(core, torch.nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer or None, got "
                        f"{type(optimizer).__name__}")
    state = {"model": core.state_dict(), "model_class": type(core).__name__}
    if hasattr(core, "config") and hasattr(core.config, "to_dict"):
        state["model_config"] = core.config.to_dict()
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    if scaler is not None:
        state["scaler"] = scaler.state_dict()
    if step is not None:
        state["step"] = check_int("step", step, min=0)
    if history is not None:
        state["history"] = history
    if train_config is not None:
        state["train_config"] = asdict(train_config)
    if generator is not None:
        state["rng"] = {"torch": torch.get_rng_state(), "batches": generator.get_state(),
                        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}
    if extra is not None:
        state["extra"] = extra
    buffer = io.BytesIO()
    torch.save(state, buffer)
    payload = buffer.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(_MAGIC + digest + b"\n")
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)   # never leave a half-written checkpoint behind


def load_checkpoint(path, model=None, optimizer=None, *, scaler=None, map_location="cpu",
                    allow_config_change=False):
    """Read a checkpoint written by ``save_checkpoint`` and return its dict. With ``model``
    (and ``optimizer``, ``scaler``) given, their states are restored from it as well.

    The header's sha256 is checked before anything is unpickled, and the payload is read with
    ``weights_only=True``: a corrupted, truncated or malicious file is refused with a
    ``CheckpointError``, never executed. A checkpoint of a model with another config (GPTConfig
    sizes, style, ...) is refused unless ``allow_config_change=True``."""
    if model is not None and not isinstance(_unwrap(model), torch.nn.Module):
        raise TypeError(f"model must be an nn.Module or None, got {type(model).__name__} "
                        f"(pass the device as map_location=...)")
    map_location = resolve_device(map_location, "map_location")
    try:
        with open(path, "rb") as fh:
            header = fh.readline()
            payload = fh.read()
    except IsADirectoryError:
        raise CheckpointError(f"checkpoint {path} is a directory, not a file") from None
    if not header:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes): it was never written "
                              f"completely; delete it and resume from an earlier one")
    if not header.startswith(_MAGIC):
        raise CheckpointError(f"{path} is not a mathref checkpoint (no "
                              f"{_MAGIC[:18].decode()} header): save it with "
                              f"mathref.train.save_checkpoint, or read a plain torch.save file "
                              f"with torch.load(path, weights_only=True)")
    stored = header[len(_MAGIC):].strip().decode("ascii", errors="replace")
    actual = hashlib.sha256(payload).hexdigest()
    if stored != actual:
        raise CheckpointError(f"checkpoint {path} is corrupted or truncated: the header "
                              f"records sha256 {stored}, the {len(payload):,} bytes after it "
                              f"have sha256 {actual}")
    try:
        state = torch.load(io.BytesIO(payload), map_location=map_location, weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as err:
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"checkpoint {path} holds something other than tensors and plain "
                              f"data, refused without running it ({first})") from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"checkpoint {path} has no model state")
    if model is not None:
        _restore(state, path, _unwrap(model), optimizer, scaler, allow_config_change)
    return state


def _restore(state, path, model, optimizer, scaler, allow_config_change):
    saved = state.get("model_config")
    if saved is not None and hasattr(model, "config") and hasattr(model.config, "to_dict"):
        current = model.config.to_dict()
        changed = {k: (saved.get(k), v) for k, v in current.items() if saved.get(k) != v}
        if changed and not allow_config_change:
            listed = ", ".join(f"{k}: {old!r} in the checkpoint, {new!r} now"
                               for k, (old, new) in changed.items())
            raise CheckpointError(f"checkpoint {path} was saved for another model config "
                                  f"({listed}); pass allow_config_change=True to load it anyway")
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint {path} does not fit this model: "
                              f"{str(err).splitlines()[0]}") from None
    for name, obj in (("optimizer", optimizer), ("scaler", scaler)):
        if obj is None:
            continue
        if name not in state:
            raise CheckpointError(f"checkpoint {path} holds no {name} state (saved without one)")
        try:
            obj.load_state_dict(state[name])
        except (ValueError, KeyError, RuntimeError) as err:
            raise CheckpointError(f"checkpoint {path}: the {name} state does not fit "
                                  f"({err})") from None


def _all_finite(model):
    return all(bool(torch.isfinite(t).all()) for t in _unwrap(model).state_dict().values()
               if t.is_floating_point())


def _unwrap(model):
    model = getattr(model, "_orig_mod", model)      # torch.compile
    return getattr(model, "module", model)          # DistributedDataParallel


def train(model, train_data, val_data, cfg, device=None, resume_from=None,
          allow_config_change=False):
    """Train ``model`` on windows of ``train_data``; returns the history dict with lists
    ``step``, ``train_loss`` (per step), ``eval_step``, ``val_loss``, ``lr``, ``seconds``.

    ``resume_from``: a checkpoint of the same model config (``allow_config_change=True``
    accepts another). A NaN/inf loss or gradient norm stops training before the step with
    ``NonFiniteLossError``; with ``checkpoint_path`` set, the last finite state is saved first
    (whatever ``checkpoint_interval``), and a checkpoint is never overwritten by non-finite
    weights."""
    _check_train_args(model, train_data, val_data, cfg)
    device = resolve_device(device) if device is not None else next(model.parameters()).device
    rank, world = _rank_and_world()
    if cfg.batch_size % (world * cfg.grad_accum):
        raise ValueError(f"batch_size={cfg.batch_size} must be divisible by processes × "
                         f"grad_accum = {world} × {cfg.grad_accum}")
    micro = cfg.batch_size // cfg.grad_accum          # rows of the global micro-batch
    optimizer = configure_optimizer(model, cfg.lr, cfg.weight_decay, cfg.betas,
                                    optimizer=cfg.optimizer)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.autocast and autocast_dtype(device) == torch.float16)
    generator = torch.Generator().manual_seed(seeded(cfg.seed))
    history = {"step": [], "train_loss": [], "lr": [], "eval_step": [], "val_loss": [],
               "seconds": []}
    start_step = 0
    pending_eval = None
    if cfg.checkpoint_path and rank == 0 and os.path.exists(f"{cfg.checkpoint_path}.tmp"):
        os.remove(f"{cfg.checkpoint_path}.tmp")       # left by a save that was killed midway
    if resume_from is not None:
        state = load_checkpoint(resume_from, model, optimizer, map_location=device,
                                allow_config_change=allow_config_change)
        missing = [k for k in ("step", "history", "rng") if k not in state]
        if missing:
            raise CheckpointError(f"checkpoint {resume_from} cannot resume training: it has no "
                                  f"{', '.join(missing)} (saved without them)")
        if "scaler" in state and scaler.is_enabled():
            scaler.load_state_dict(state["scaler"])
        start_step, history = state["step"], state["history"]
        pending_eval = state.get("extra", {}).get("pending_eval")
        torch.set_rng_state(state["rng"]["torch"])
        generator.set_state(state["rng"]["batches"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    net = model
    if world > 1:
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        net = torch.compile(net)

    def save(step, extra=None):
        if not (cfg.checkpoint_path and rank == 0):
            return False
        if not _all_finite(model):   # keep the last good checkpoint
            print(f"\nnot saving step {step}: the weights are not finite; "
                  f"{cfg.checkpoint_path} keeps the last good checkpoint")
            return False
        save_checkpoint(cfg.checkpoint_path, model, optimizer, step, history, generator, cfg,
                        scaler=scaler if scaler.is_enabled() else None, extra=extra)
        return True

    def evaluate(step, seconds):
        history["seconds"].append(seconds)
        val = estimate_loss(model, val_data, cfg, device)
        history["eval_step"].append(step)
        history["val_loss"].append(val)
        return val

    if pending_eval is not None:   # the run was interrupted during this evaluation: redo it
        evaluate(*pending_eval)
    # history["seconds"]: training time only (evaluations are not counted)
    t0 = time.perf_counter() - (history["seconds"][-1] if history["seconds"] else 0.0)
    end_step = cfg.max_steps if cfg.stop_at is None else min(cfg.stop_at, cfg.max_steps)
    bar = tqdm(range(start_step, end_step), initial=start_step, total=cfg.max_steps,
               disable=not cfg.progress or rank != 0, desc="training", unit="step")
    model.train()
    rng_before_step = None   # (step, torch RNG, batch RNG) when the current step began
    evaluating = None        # (step, seconds) while an evaluation runs
    try:
        for step in bar:
            rng_before_step = (step, torch.get_rng_state(), generator.get_state())
            _train_step(net, model, optimizer, scaler, generator, train_data, cfg, step, device,
                        rank, world, micro, history)
            last = step == end_step - 1
            if (cfg.eval_interval and (step + 1) % cfg.eval_interval == 0) or last:
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                evaluating = (step + 1, time.perf_counter() - t0)
                eval_start = time.perf_counter()
                val = evaluate(*evaluating)
                evaluating = None
                t0 += time.perf_counter() - eval_start
                bar.set_postfix(train=f"{history['train_loss'][-1]:.3f}", val=f"{val:.3f}")
            if last or (cfg.checkpoint_interval and (step + 1) % cfg.checkpoint_interval == 0):
                save(step + 1)
    except (KeyboardInterrupt, NonFiniteLossError) as stop:
        # nothing lost: keep every finished step (resume with resume_from), with the random
        # generators as they were when the unfinished step began
        done = history["step"][-1] + 1 if history["step"] else start_step
        if rng_before_step is not None and rng_before_step[0] == done:   # step `done` unfinished
            torch.set_rng_state(rng_before_step[1])
            generator.set_state(rng_before_step[2])
        optimizer.zero_grad(set_to_none=True)
        if evaluating is not None:    # drop the half-done evaluation; resume re-runs it
            del history["seconds"][len(history["val_loss"]):]
        if save(done, extra={"pending_eval": evaluating} if evaluating is not None else None):
            why = "interrupted" if isinstance(stop, KeyboardInterrupt) else "stopped"
            print(f"\n{why} after step {done}; checkpoint saved to {cfg.checkpoint_path}")
        raise
    finally:
        bar.close()
    return history


def _check_train_args(model, train_data, val_data, cfg):
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(cfg, TrainConfig):
        raise TypeError(f"cfg must be a TrainConfig, got {type(cfg).__name__}")
    config = getattr(_unwrap(model), "config", None)
    for name, data in (("train_data", train_data), ("val_data", val_data)):
        check_tensor(name, data, dims=1, kind="int")
        if len(data) <= cfg.block_size:
            raise ValueError(f"{name} has {len(data)} tokens, need more than "
                             f"block_size={cfg.block_size}")
        if config is not None:
            check_token_ids(name, data, config.vocab_size)
    if config is not None and cfg.block_size > config.block_size:
        raise ValueError(f"block_size={cfg.block_size} exceeds the model's context "
                         f"block_size={config.block_size}")


def _train_step(net, model, optimizer, scaler, generator, train_data, cfg, step, device, rank,
                world, micro, history):
    """One optimizer step over grad_accum micro-batches (this process's rows of each)."""
    lr = lr_at(step, cfg)
    for group in optimizer.param_groups:
        group["lr"] = lr
    total = 0.0
    for micro_step in range(cfg.grad_accum):
        x, y = get_batch(train_data, micro, cfg.block_size, generator)
        rows = slice(rank * micro // world, (rank + 1) * micro // world)  # this process's share
        x, y = x[rows].to(device), y[rows].to(device)
        sync = world == 1 or micro_step == cfg.grad_accum - 1
        context = net.no_sync() if not sync else contextlib.nullcontext()
        with context, _autocast(device, cfg):
            _, loss = net(x, y)
            loss = loss / cfg.grad_accum
        scaler.scale(loss).backward()
        total += loss.item()
    if world > 1:   # report the global mean loss (gradients are already averaged by DDP)
        t = torch.tensor(total, dtype=torch.float64, device=device)
        dist.all_reduce(t)
        total = t.item() / world
    if not math.isfinite(total):
        raise NonFiniteLossError(
            f"training loss is {total} at step {step} (lr {lr:.3g}): stopping before the step. "
            f"Lower the learning rate, enable gradient clipping (grad_clip), or check the model "
            f"(token ids were checked against the vocabulary before training).")
    scaler.unscale_(optimizer)
    norm = clip_grad_norm_(model.parameters(), cfg.grad_clip if cfg.grad_clip > 0 else math.inf)
    if not scaler.is_enabled() and not torch.isfinite(norm):
        # with fp16 loss scaling an overflow is expected: the scaler skips the step instead
        raise NonFiniteLossError(
            f"gradient norm is {norm.item()} at step {step} (loss {total:.4g}, lr {lr:.3g}): "
            f"stopping before the step. Lower the learning rate or enable gradient clipping.")
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    history["step"].append(step)
    history["train_loss"].append(total)
    history["lr"].append(lr)
