"""The perturbed nbval pass (``make nbval-perturbed``) must really change the arithmetic, or the
second pass is the first one run twice. Its environment (the Makefile's ``PERTURBED``) is run
beside the pinned one on float32 kernels that every training step uses; the bits must differ
somewhere, and on a CPU with AVX-512 the vector kernels must stay on (AVX2, not the scalar
fallback that makes the pass 2.4 times slower)."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import hashlib, json, torch
import torch.nn.functional as F
g = torch.Generator().manual_seed(0)
x = torch.randn(1_000_003, generator=g)
a, b = torch.randn(256, 256, generator=g), torch.randn(256, 256, generator=g)
t = torch.randn(64, 1000, generator=g)
values = {"sum": x.sum(), "softmax": torch.softmax(t, -1), "log_softmax": F.log_softmax(t, -1),
          "cross_entropy": F.cross_entropy(t, torch.arange(64)), "matmul": a @ b,
          "layer_norm": F.layer_norm(t, (1000,)), "gelu": F.gelu(t), "exp": t.exp()}
print(json.dumps({"capability": torch.backends.cpu.get_cpu_capability(),
                  "bits": {k: hashlib.sha256(v.numpy().tobytes()).hexdigest()
                           for k, v in values.items()}}))
"""


def perturbed_environment():
    out = subprocess.run(["make", "-s", "--no-print-directory", "perturbed-env"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out and all(re.fullmatch(r"[A-Z_]+=\S+", word) for word in out), out
    return dict(word.split("=", 1) for word in out)


def probe(extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", **extra)
    run = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(run.stdout)


def test_the_perturbed_pass_changes_float32_results():
    perturbed = perturbed_environment()
    pinned, other = probe({}), probe(perturbed)
    moved = [k for k in pinned["bits"] if pinned["bits"][k] != other["bits"][k]]
    assert moved, (f"{perturbed} leaves every probed kernel bit for bit as it was: the perturbed "
                   f"nbval pass would not perturb anything")
    # softmax is in every training step's loss: a perturbation there reaches every trained number
    assert {"softmax", "cross_entropy"} & set(moved), moved


def test_the_perturbed_pass_keeps_vector_kernels_where_it_can():
    has_avx512 = "avx512f" in Path("/proc/cpuinfo").read_text().split()
    capability = probe(perturbed_environment())["capability"]
    if has_avx512:
        assert capability == "AVX2", capability
    else:
        assert capability == "DEFAULT", capability
