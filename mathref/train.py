"""The training loop for language models. See chapter 14.

One step: for each of ``grad_accum`` micro-batches, loss/grad_accum → backward (the summed
gradient is the large-batch gradient); clip the global norm; set the learning rate from
warmup + cosine; AdamW step (weight decay on matrices only), or a Muon step on the blocks'
weight matrices with AdamW on the rest (``optimizer="muon"``). Every ``eval_interval`` steps the
held-out loss is measured under ``model.eval()`` and ``torch.no_grad()``. A non-finite loss
stops training with a clear message. Checkpoints hold everything needed to resume exactly:
model, optimizer, step, history and every random generator's state.

Data parallelism uses PyTorch's own DistributedDataParallel: launched under ``torchrun``, each
of the W processes takes its slice of the same global batch, DDP averages the gradients, and
the result equals single-process training with that global batch.
"""
import contextlib
import math
import os
import time
from dataclasses import asdict, dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from tqdm.auto import tqdm

from mathref.data import get_batch
from mathref.device import autocast_dtype
from mathref.optim import AdamW, Muon, clip_grad_norm_, decay_param_groups, warmup_cosine

__all__ = ["TrainConfig", "configure_optimizer", "lr_at", "estimate_loss", "train",
           "save_checkpoint", "load_checkpoint", "NonFiniteLossError"]


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or infinite."""


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
    compile: bool = False
    progress: bool = True
    checkpoint_path: str = None
    checkpoint_interval: int = 0   # 0: save only at the end (if checkpoint_path is set)

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        for name in ("max_steps", "batch_size", "block_size", "grad_accum"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be ≥ 1, got {getattr(self, name)}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"batch_size={self.batch_size} is not divisible by "
                             f"grad_accum={self.grad_accum}")


def configure_optimizer(model, lr, weight_decay, betas=(0.9, 0.99), foreach=True, optimizer="adamw"):
    """mathref's AdamW (decoupled weight decay, chapter 6) with decay on matrices (and
    embeddings) only: biases and norm gains (1-D parameters) are not decayed.

    ``optimizer="muon"``: mathref's Muon on the 2-D weight matrices inside the blocks (decayed),
    AdamW on the embeddings and the output head (decayed) and on the 1-D parameters (not)."""
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
                lr=lr, betas=betas, foreach=foreach)


def lr_at(step, cfg):
    """Linear warmup to cfg.lr over warmup_steps, then cosine decay to cfg.min_lr over
    decay_steps (default max_steps): ``mathref.optim.warmup_cosine``. Steps count from 0; step 0
    already uses cfg.lr / warmup_steps (not 0) and step warmup_steps − 1 uses cfg.lr."""
    return warmup_cosine(step, cfg.warmup_steps, cfg.decay_steps or cfg.max_steps, cfg.lr,
                         cfg.min_lr)


def _autocast(device, enabled):
    dtype = autocast_dtype(device)
    return torch.autocast(device_type=device.type, dtype=dtype,
                          enabled=enabled and dtype != torch.float32)


@torch.no_grad()
def estimate_loss(model, data, cfg, device, batches=None):
    """Mean loss over ``batches`` fixed random windows of ``data`` (the same windows at every
    call: a fixed seed), in eval mode without gradients."""
    was_training = model.training
    model.eval()
    generator = torch.Generator().manual_seed(cfg.eval_seed)
    losses = []
    for _ in range(batches or cfg.eval_batches):
        x, y = get_batch(data, cfg.eval_batch_size or cfg.batch_size, cfg.block_size, generator, device)
        with _autocast(device, cfg.autocast):
            _, loss = model(x, y)
        losses.append(loss.item())
    model.train(was_training)
    return sum(losses) / len(losses)


def _rank_and_world():
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def save_checkpoint(path, model, optimizer, step, history, generator, train_config):
    """Everything needed to continue exactly where training stopped."""
    state = {
        "model": _unwrap(model).state_dict(),
        "model_config": _unwrap(model).config.to_dict(),
        "optimizer": optimizer.state_dict(),
        "step": step,
        "history": history,
        "train_config": asdict(train_config),
        "rng": {"torch": torch.get_rng_state(), "batches": generator.get_state(),
                "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None},
    }
    tmp = f"{path}.tmp"
    torch.save(state, tmp)
    os.replace(tmp, path)   # never leave a half-written checkpoint behind


def load_checkpoint(path, map_location="cpu"):
    return torch.load(path, map_location=map_location, weights_only=False)


def _unwrap(model):
    model = getattr(model, "_orig_mod", model)      # torch.compile
    return getattr(model, "module", model)          # DistributedDataParallel


def train(model, train_data, val_data, cfg, device=None, resume_from=None):
    """Train ``model`` on windows of ``train_data``; returns the history dict with lists
    ``step``, ``train_loss`` (per step), ``eval_step``, ``val_loss``, ``lr``, ``seconds``."""
    device = torch.device(device) if device is not None else next(model.parameters()).device
    rank, world = _rank_and_world()
    if cfg.batch_size % (world * cfg.grad_accum):
        raise ValueError(f"batch_size={cfg.batch_size} must be divisible by processes × "
                         f"grad_accum = {world} × {cfg.grad_accum}")
    micro = cfg.batch_size // cfg.grad_accum          # rows of the global micro-batch
    optimizer = configure_optimizer(model, cfg.lr, cfg.weight_decay, cfg.betas,
                                    optimizer=cfg.optimizer)
    generator = torch.Generator().manual_seed(cfg.seed)
    history = {"step": [], "train_loss": [], "lr": [], "eval_step": [], "val_loss": [],
               "seconds": []}
    start_step = 0
    if resume_from is not None:
        state = load_checkpoint(resume_from, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start_step, history = state["step"], state["history"]
        torch.set_rng_state(state["rng"]["torch"])
        generator.set_state(state["rng"]["batches"])
        if state["rng"]["cuda"] is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["rng"]["cuda"])
    net = model
    if world > 1:
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        net = torch.compile(net)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.autocast and autocast_dtype(device) == torch.float16)
    # history["seconds"]: training time only (evaluations are not counted)
    t0 = time.perf_counter() - (history["seconds"][-1] if history["seconds"] else 0.0)
    end_step = cfg.max_steps if cfg.stop_at is None else min(cfg.stop_at, cfg.max_steps)
    bar = tqdm(range(start_step, end_step), initial=start_step, total=cfg.max_steps,
               disable=not cfg.progress or rank != 0, desc="training", unit="step")
    model.train()
    rng_before_step = None   # (step, torch RNG, batch RNG) when the current step began
    try:
        for step in bar:
            rng_before_step = (step, torch.get_rng_state(), generator.get_state())
            _train_step(net, model, optimizer, scaler, generator, train_data, cfg, step, device,
                        rank, world, micro, history)
            last = step == end_step - 1
            if (cfg.eval_interval and (step + 1) % cfg.eval_interval == 0) or last:
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                history["seconds"].append(time.perf_counter() - t0)
                eval_start = time.perf_counter()
                val = estimate_loss(model, val_data, cfg, device)
                t0 += time.perf_counter() - eval_start
                history["eval_step"].append(step + 1)
                history["val_loss"].append(val)
                bar.set_postfix(train=f"{history['train_loss'][-1]:.3f}", val=f"{val:.3f}")
            if cfg.checkpoint_path and rank == 0 and (
                    last or (cfg.checkpoint_interval and (step + 1) % cfg.checkpoint_interval == 0)):
                save_checkpoint(cfg.checkpoint_path, model, optimizer, step + 1, history,
                                generator, cfg)
    except KeyboardInterrupt:
        # nothing lost on interruption: keep every finished step (resume with resume_from),
        # with the random generators as they were when the unfinished step began
        done = history["step"][-1] + 1 if history["step"] else start_step
        if rng_before_step is not None and rng_before_step[0] == done:   # step `done` unfinished
            torch.set_rng_state(rng_before_step[1])
            generator.set_state(rng_before_step[2])
        optimizer.zero_grad(set_to_none=True)
        if cfg.checkpoint_path and rank == 0:
            save_checkpoint(cfg.checkpoint_path, model, optimizer, done, history, generator, cfg)
            print(f"\ninterrupted after step {done}; checkpoint saved to {cfg.checkpoint_path}")
        raise
    finally:
        bar.close()
    return history


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
        with context, _autocast(device, cfg.autocast):
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
            f"training loss is {total} at step {step} (lr {lr:.3g}): stopping. Lower the "
            f"learning rate, check the data for bad ids, or enable gradient clipping.")
    if cfg.grad_clip > 0:
        scaler.unscale_(optimizer)
        clip_grad_norm_(model.parameters(), cfg.grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    history["step"].append(step)
    history["train_loss"].append(total)
    history["lr"].append(lr)
