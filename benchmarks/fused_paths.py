"""mathref's fast paths against PyTorch's own, timed side by side in one run (ratios only).

    python benchmarks/fused_paths.py [--device cuda]

- AdamW: one step of mathref.optim.AdamW(foreach=True) vs torch.optim.AdamW(foreach=True) on
  the parameters of a GPT (nanoGPT's CPU size, or its GPU size on CUDA).
- Muon: one step of mathref.optim.Muon on the GPT's groups (``mathref.train.configure_optimizer``)
  vs torch.optim.Muon on the blocks' matrices plus torch.optim.AdamW(foreach=True) on the rest.
- Attention: forward + backward of mathref.attention.MultiHeadAttention(fused=True) vs
  torch.nn.MultiheadAttention with the same sizes and a causal mask.
- For reference, the readable paths (plain AdamW loop, mathref's written-out attention) against
  the same baselines.
- SDPA's own backends on the CPU (gpt_shakespeare.py's recipes (b) and (b32)): forward +
  backward with the flash kernel the dispatcher picks vs the math backend, in bfloat16 and in
  float32, at the benchmark's shape (batch 32, 4 heads, head dimension 32) for contexts 64, 128
  and 256.

Each pair is timed alternately, many rounds, and the ratio of medians is printed (< 1.1 is the
target for the fused paths).
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mathref.attention import MultiHeadAttention  # noqa: E402
from mathref.gpt import GPT, GPTConfig  # noqa: E402
from mathref.optim import AdamW  # noqa: E402
from mathref.train import configure_optimizer  # noqa: E402


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device):
    sync(device)
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start


def compare(name, ours, theirs, device, rounds, warmup=5):
    for _ in range(warmup):
        ours()
        theirs()
    a, b = [], []
    for _ in range(rounds):           # alternate, so drifts in machine load hit both alike
        a.append(timed(ours, device))
        b.append(timed(theirs, device))
    ratio = statistics.median(a) / statistics.median(b)
    print(f"{name:58s} {ratio:6.2f}")
    return ratio


def adamw_pair(device, foreach, size):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=65, **size)).to(device)
    twin = GPT(GPTConfig(vocab_size=65, **size)).to(device)
    twin.load_state_dict(model.state_dict())
    for m in (model, twin):
        for p in m.parameters():
            p.grad = torch.randn_like(p) * 1e-3
    ours = AdamW(model.parameters(), lr=1e-3, weight_decay=0.1, foreach=foreach)
    theirs = torch.optim.AdamW(twin.parameters(), lr=1e-3, weight_decay=0.1, foreach=True)
    return ours.step, theirs.step


def muon_pair(device, size):
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=65, style="modern", **size)).to(device)
    twin = GPT(GPTConfig(vocab_size=65, style="modern", **size)).to(device)
    twin.load_state_dict(model.state_dict())
    for m in (model, twin):
        for p in m.parameters():
            p.grad = torch.randn_like(p) * 1e-3
    ours = configure_optimizer(model, 1e-3, 0.1, betas=(0.9, 0.95), optimizer="muon")
    split = configure_optimizer(twin, 1e-3, 0.1, optimizer="muon").param_groups   # the same split
    hidden, matrices, vectors = (group["params"] for group in split)
    theirs = [torch.optim.Muon(hidden, lr=1e-3, weight_decay=0.1, adjust_lr_fn="match_rms_adamw"),
              torch.optim.AdamW([{"params": matrices, "weight_decay": 0.1},
                                 {"params": vectors, "weight_decay": 0.0}],
                                lr=1e-3, betas=(0.9, 0.95), foreach=True)]

    def step_theirs():
        for opt in theirs:
            opt.step()

    return ours.step, step_theirs


def attention_pair(device, fused, B, T, d, H):
    torch.manual_seed(0)
    ref = nn.MultiheadAttention(d, H, batch_first=True).to(device)
    ours = MultiHeadAttention.from_torch(ref)
    x = torch.randn(B, T, d, device=device, requires_grad=True)
    blocked = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)

    def run_ours():
        ours(x, is_causal=True, fused=fused).sum().backward()

    def run_theirs():
        ref(x, x, x, attn_mask=blocked, need_weights=False)[0].sum().backward()

    return run_ours, run_theirs


def sdpa_backend_pair(B, H, T, d_k, dtype=torch.bfloat16):
    torch.manual_seed(0)
    q, k, v = (torch.randn(B, H, T, d_k, dtype=dtype, requires_grad=True) for _ in range(3))

    def default():   # on the CPU the dispatcher picks its flash kernel for these inputs
        F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    def math_backend():
        with sdpa_kernel(SDPBackend.MATH):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()

    return default, math_backend


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=50)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda":
        size = dict(n_layer=6, n_head=6, d_model=384, block_size=256)
        B, T, d, H = 64, 256, 384, 6
    else:
        size = dict(n_layer=4, n_head=4, d_model=128, block_size=64)
        B, T, d, H = 12, 64, 128, 4
    print(f"device {device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'time ratio, mathref / PyTorch (median of ' + str(args.rounds) + ' alternating runs)':58s} ratio")
    compare("AdamW step, foreach (fast path) vs torch.optim.AdamW",
            *adamw_pair(device, True, size), device, args.rounds)
    compare("AdamW step, plain loop (readable) vs torch.optim.AdamW",
            *adamw_pair(device, False, size), device, args.rounds)
    compare("Muon step (blocks' matrices) + AdamW (the rest) vs torch's",
            *muon_pair(device, size), device, args.rounds)
    compare(f"attention fwd+bwd, fused (SDPA) vs nn.MultiheadAttention",
            *attention_pair(device, True, B, T, d, H), device, args.rounds)
    compare(f"attention fwd+bwd, readable vs nn.MultiheadAttention",
            *attention_pair(device, False, B, T, d, H), device, args.rounds)
    if device.type == "cpu":
        print(f"{'time ratio, SDPA default (flash) / math backend, fwd+bwd':58s} ratio")
        for dtype in (torch.bfloat16, torch.float32):
            for T_ in (64, 128, 256):
                compare(f"  {str(dtype)[6:]}, batch 32, 4 heads, d_k = 32, T = {T_}",
                        *sdpa_backend_pair(32, 4, T_, 32, dtype), device, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
