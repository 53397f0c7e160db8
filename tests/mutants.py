"""`make mutants`: prove that the tests catch the mistakes a careless edit of mathref could make.

Each mutant changes one line of mathref (an exact text substitution). For each, in a scratch
copy of this checkout, three suites run against the mutated package and the table says which
of them caught it (a suite catches a mutant when it fails):

    unit       pytest on the mutated module's own test file (tests/test_<module>.py), then,
               if that misses, on all of tests/ (mathref's unit and structure tests, not the
               checkers)
    checkers   pytest tests/test_exercises.py (reference solutions vs the checkers)
    nbval      the chapters that use the mutated code, with the number-aware comparison

A mutant whose line is no longer in the source is reported as "stale" (update its pattern);
a mutant no suite catches is a "SURVIVOR": a test to add. Exit status 1 if any mutant
survives or is stale.

    python -m tests.mutants [--only NAME ...] [--suites unit,checkers,nbval] [--first]

``--first`` stops at the first suite that catches a mutant (faster; the other columns read
"-"). ``--control`` first runs every chosen suite on an unmutated copy, for every chapter the
chosen mutants name, and stops if any fails: a suite that fails without a mutation would
"catch" every mutant.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str          # file under the repository root
    old: str           # text that must occur exactly once in that file
    new: str
    notebooks: tuple   # chapters nbval re-executes for this mutant


MUTANTS = [
    Mutant("adamw-decay-without-lr", "mathref/optim.py",
           "p.mul_(1 - lr * wd)                  # AdamW", "p.mul_(1 - wd)                  # AdamW",
           ("06",)),
    Mutant("adam-no-bias-correction", "mathref/optim.py",
           "p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** t))", "p.addcdiv_(m, denom, value=-lr)",
           ("06",)),
    Mutant("causal-mask-excludes-diagonal", "mathref/attention.py",
           "tril(diagonal=S - T)", "tril(diagonal=S - T - 1)", ("11",)),
    Mutant("scale-by-sqrt-d-model", "mathref/attention.py",
           "q, k, v, mask=mask, is_causal=is_causal, dropout_p=p, training=self.training,",
           "q, k, v, mask=mask, is_causal=is_causal, dropout_p=p, training=self.training, "
           "scale=1 / math.sqrt(self.d_model),", ("11",)),
    Mutant("layernorm-unbiased-variance", "mathref/norm.py",
           "var = ((x - mu) ** 2).mean(dim=dims, keepdim=True)",
           "var = x.var(dim=dims, keepdim=True)", ("08",)),
    Mutant("rope-angle-sign", "mathref/positions.py",
           "r1 = x1 * cos - x2 * sin", "r1 = x1 * cos + x2 * sin", ("12",)),
    Mutant("label-smoothing-over-v-minus-1", "mathref/losses.py",
           "label_smoothing * (-logp.mean(dim=1))",
           "label_smoothing * (-logp.sum(dim=1) / (V - 1))", ("05",)),
    Mutant("bits-per-byte-without-ln2", "mathref/losses.py",
           "\n    return total_nll_nats / (math.log(2) * n_bytes)",   # the float path (not indented)
           "\n    return total_nll_nats / n_bytes",
           ("14",)),
    Mutant("lm-loss-mean-over-all-rows", "mathref/losses.py",
           "return losses.sum() / keep.sum()", "return losses.sum() / keep.numel()",
           ("14",)),
    Mutant("warmup-off-by-one", "mathref/optim.py",
           "return lr_max * (step + 1) / warmup_steps", "return lr_max * step / warmup_steps",
           ("06",)),
    Mutant("gelu-tanh-constant", "mathref/nn.py",
           "_GELU_CUBIC = 0.044715", "_GELU_CUBIC = 0.04715", ("03",)),
    Mutant("he-init-gain", "mathref/deep.py",
           "return math.sqrt(2.0)", "return 2.0", ("07",)),
    Mutant("rmsnorm-eps-outside-sqrt", "mathref/norm.py",
           "y = x / torch.sqrt((x ** 2).mean(dim=dims, keepdim=True) + eps)",
           "y = x / (torch.sqrt((x ** 2).mean(dim=dims, keepdim=True)) + eps)", ("08",)),
    Mutant("top-p-one-token-too-few", "mathref/gpt.py",
           "sorted_probs.masked_fill(before >= top_p, 0.0)",
           "sorted_probs.masked_fill(before + sorted_probs >= top_p, 0.0)", ("14",)),
    Mutant("kv-cache-position-offset", "mathref/gpt.py",
           "start = len(cache) if cache is not None else 0", "start = 0", ("14",)),
    Mutant("sigmoid-derivative", "mathref/nn.py",
           "return s * (1 - s)", "return s * (1 + s)", ("03",)),
    Mutant("sgd-momentum-dampening", "mathref/optim.py",
           "v.mul_(beta).add_(g, alpha=1 - group[\"dampening\"])",
           "v.mul_(beta).add_(g, alpha=1 - beta)", ("06",)),
    Mutant("clip-grad-norm-no-cap", "mathref/optim.py",
           "scale = torch.clamp(max_norm / (total + eps), max=1.0)",
           "scale = max_norm / (total + eps)", ("06",)),
    Mutant("sinusoidal-cos-own-exponent", "mathref/positions.py",
           "pe[:, 1::2] = torch.cos(p * inv_freq)",
           "pe[:, 1::2] = torch.cos(p * inv_freq / base ** (2 / d))", ("12",)),
    Mutant("batchnorm-running-var-biased", "mathref/norm.py",
           "add_(momentum * var.detach() * n / (n - 1))", "add_(momentum * var.detach())",
           ("08",)),
]

SUITES = ("unit", "checkers", "nbval")


def copy_checkout(dest):
    """The tracked and untracked (not ignored) files of this checkout, plus its .venv link."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, files):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def apply(mutant, tree):
    path = tree / mutant.path
    text = path.read_text()
    if text.count(mutant.old) != 1:
        return False
    path.write_text(text.replace(mutant.old, mutant.new))
    return True


def suite_commands(suite, mutant, tree):
    """The commands that make up one suite, cheapest first: the suite catches the mutant when
    any of them fails."""
    python = str(ROOT / ".venv" / "bin" / "python")
    pytest = [python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
    if suite == "unit":
        own = tree / "tests" / f"test_{Path(mutant.path).stem}.py"
        everything = pytest + ["-n", "2", "tests", "--ignore=tests/test_browser.py",
                               "--ignore=tests/test_exercises.py",
                               "--ignore=tests/test_output_compare.py",
                               "--ignore=tests/test_prose_numbers.py"]
        return ([pytest + [str(own)]] if own.exists() else []) + [everything]
    if suite == "checkers":
        return [pytest + ["-n", "2", "tests/test_exercises.py"]]
    notebooks = [str(p) for chapter in mutant.notebooks
                 for p in sorted((tree / "notebooks").glob(f"{chapter}_*.ipynb"))]
    return [pytest + ["-p", "tests.nbval_conftest", "--nbval", "--nbval-current-env",
                      "--nbval-sanitize-with", "tests/nbval-sanitize.cfg",
                      "--nbval-cell-timeout", "600", *notebooks]]


def run_suite(suite, mutant, tree):
    env = dict(os.environ, PYTHONPATH=str(tree), MATHREF_DEVICE="cpu", OMP_NUM_THREADS="1",
               PYTHONHASHSEED="0")
    for command in suite_commands(suite, mutant, tree):
        result = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True,
                                timeout=1800)
        summary = (result.stdout + result.stderr).strip().splitlines()[-1:] or [""]
        # exit 1: tests failed; exit 2 with a failure count: -x stopped xdist after a failure
        if result.returncode == 1 or (result.returncode == 2 and " failed" in summary[0]):
            # "FAILED notebooks/14_gpt.ipynb::Cell 18 - ..." -> the test id, spaces included
            failed = [line[len("FAILED "):].split(" - ")[0] for line in result.stdout.splitlines()
                      if line.startswith("FAILED ")]
            return "caught" + (f" by {failed[0]}" if failed else "")
        if result.returncode != 0:
            return "error: " + summary[0]
    return "missed"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=None, help="mutant names to run")
    parser.add_argument("--suites", default=",".join(SUITES))
    parser.add_argument("--first", action="store_true",
                        help="stop at the first suite that catches each mutant")
    parser.add_argument("--control", action="store_true",
                        help="first check that the suites pass without any mutation")
    args = parser.parse_args(argv)
    suites = [s for s in args.suites.split(",") if s]
    unknown = set(suites) - set(SUITES)
    if unknown:
        parser.error(f"unknown suites {sorted(unknown)}; choose from {SUITES}")
    chosen = [m for m in MUTANTS if args.only is None or m.name in args.only]
    if args.only and len(chosen) != len(args.only):
        parser.error(f"unknown mutants; known: {[m.name for m in MUTANTS]}")
    data = Path(os.environ.get("MATHREF_DATA") or Path.home() / ".cache" / "mathref")
    if "nbval" in suites and not (data / "tinyshakespeare.txt").exists():
        # a notebook that stops at a missing file would "catch" every mutant
        parser.error(f"no tinyshakespeare.txt in {data}: set MATHREF_DATA (make mutants does it)")

    if args.control:
        chapters = tuple(sorted({c for m in chosen for c in m.notebooks}))
        control = Mutant("control", chosen[0].path, "", "", chapters)
        with tempfile.TemporaryDirectory(prefix="mutant-control-") as scratch:
            copy_checkout(Path(scratch))
            for suite in suites:
                verdict = run_suite(suite, control, Path(scratch))
                print(f"control (no mutation), {suite}: "
                      f"{'passes' if verdict == 'missed' else verdict}", flush=True)
                if verdict != "missed":
                    return 2

    rows, bad = [], 0
    for mutant in chosen:
        start = time.time()
        with tempfile.TemporaryDirectory(prefix="mutant-") as scratch:
            tree = Path(scratch)
            copy_checkout(tree)
            if not apply(mutant, tree):
                verdicts = {s: "-" for s in suites}
                status = "stale"
            else:
                verdicts = {}
                for suite in suites:
                    if args.first and any(v.startswith("caught") for v in verdicts.values()):
                        verdicts[suite] = "-"
                        continue
                    verdicts[suite] = run_suite(suite, mutant, tree)
                status = ("caught" if any(v.startswith("caught") for v in verdicts.values())
                          else "SURVIVOR")
        bad += status != "caught"
        rows.append((mutant.name, verdicts, status, time.time() - start))
        print(f"{mutant.name}: {status} {verdicts} ({time.time() - start:.0f} s)", flush=True)

    width = max(len(r[0]) for r in rows)
    print()
    print(f"{'mutant':{width}s}  " + "  ".join(f"{s:9s}" for s in suites) + "  verdict")
    print("-" * (width + 11 * len(suites) + 10))
    for name, verdicts, status, _ in rows:
        print(f"{name:{width}s}  " + "  ".join(f"{verdicts[s][:6]:9s}" for s in suites)
              + f"  {status}")
    print()
    for name, verdicts, _, _ in rows:   # the first failing test of each suite that caught it
        for suite in suites:
            if verdicts[suite].startswith("caught by "):
                print(f"{name}: {suite} {verdicts[suite][len('caught by '):]}")
    print(f"{len(rows) - bad} of {len(rows)} mutants caught")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
