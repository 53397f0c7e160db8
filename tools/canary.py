"""The torch-version canary (`make canary`): does the course work where learners run it?

For each torch version (the newest the package registry offers, and the floor that
pyproject.toml declares), in a fresh virtual environment under `~/.cache/mathref/canary/`
($MATHREF_CANARY_DIR overrides it;
cached between runs, rebuilt when its stamp changes):

1. install that torch from the registry (PyPI's Linux wheel, with its CUDA libraries: torch
   does not import without them, even on a CPU-only machine), then install mathref the way
   the notebooks' Colab setup cell does: ``pip install "mathref @ git+<repo>@<ref>"``, with
   <ref> exactly the COURSE_REF the setup cells name (a release tag, or "main" between
   releases) and <repo> a throwaway mirror of this repository (all its branches and tags):
   if that ref does not exist there, learners' setup cells would fail, and so does the canary;
2. execute every notebook in a scratch folder (as in Colab, not in the checkout), with a fake
   ``google.colab`` module imported first so that each setup cell runs its own install line;
   outputs are not compared (torch versions print different rounding), only errors count;
3. run the unit tests (``pytest tests`` without the browser test).

It prints a table version x notebook (✓, or the failing cell and the error) and writes it to
`<cache>/table.md` and into CONTRIBUTING.md between the canary markers.

    python tools/canary.py                  # both versions, notebooks and unit tests
    python tools/canary.py --floor --unit --quick   # the floor's torch-specific unit tests (make test)
    python tools/canary.py --versions 2.12.0 --notebooks notebooks/01_gradient_descent.ipynb

Every torch here is the registry's, so the local cap in /etc/xdg/pip/constraints.txt is
replaced by a constraints file pinning torch to the version under test; the rest of the
environment follows requirements.txt (so the only thing that varies is torch).
"""
import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # tools/release.py

ROOT = Path(__file__).resolve().parents[1]
# Outside the checkout, so every clone on a machine (CI's fresh one too) reuses the venvs.
CACHE = Path(os.environ.get("MATHREF_CANARY_DIR")
             or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mathref" / "canary")
STAMP_VERSION = "2"  # bump to rebuild every cached environment
# The test tools on top of what mathref itself pulls in (versions from requirements.txt).
TEST_PACKAGES = ["pytest", "pytest-xdist", "hypothesis", "nbformat", "nbclient", "ipykernel",
                 "ipywidgets", "PyYAML", "transformers", "nbval"]
NOTEBOOK_TIMEOUT = 1200  # seconds per cell
MARK_START = "<!-- canary-table:start -->"
MARK_END = "<!-- canary-table:end -->"


def log(msg):
    print(f"[canary {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def floor_version():
    """The torch floor declared in pyproject.toml (``torch>=X``), as an installable X.Y.Z."""
    text = (ROOT / "pyproject.toml").read_text()
    match = re.search(r'"torch>=([0-9.]+)"', text)
    if not match:
        sys.exit("canary: no 'torch>=X' in pyproject.toml dependencies")
    parts = match.group(1).split(".")
    return ".".join((parts + ["0", "0"])[:3])


def newest_version():
    """The newest torch release the package registry offers (no local builds like +cpu)."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "torch"],
                         capture_output=True, text=True, env=pip_env(None), check=True).stdout
    match = re.search(r"Available versions: (.*)", out)
    versions = [v.strip() for v in match.group(1).split(",") if "+" not in v]
    return max(versions, key=lambda v: tuple(int(p) for p in re.findall(r"\d+", v)))


def pip_env(constraints):
    env = dict(os.environ)
    env["PIP_CONSTRAINT"] = str(constraints) if constraints else os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.pop("PYTHONPATH", None)
    return env


def mathref_dependencies():
    """mathref's own runtime dependencies but torch (pyproject.toml), so that the unit tests,
    which import the checkout's mathref, find them even when no notebook installs mathref."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return [d for d in deps if not re.match(r"torch\b", d)]


def requirements_without_torch():
    return "".join(line + "\n" for line in (ROOT / "requirements.txt").read_text().splitlines()
                   if not re.match(r"\s*torch\s*==", line))


def head_commit():
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def code_key(name):
    """What one result depends on, from the committed tree: mathref, the pins, and the notebook
    itself (a notebook row) or the tests (a unit-test row). Editing one chapter keeps the
    saved results of the others."""
    # the unit tests also read the notebooks, the book and the tools (not CONTRIBUTING.md,
    # where the table itself is recorded)
    own = ([f"HEAD:{name}"] if name.endswith(".ipynb") else
           ["HEAD:tests", "HEAD:notebooks", "HEAD:book", "HEAD:tools", "HEAD:_toc.yml", "HEAD:_config.yml"])
    paths = ["HEAD:mathref", "HEAD:pyproject.toml", "HEAD:requirements.txt", *own]
    out = subprocess.run(["git", "rev-parse", *paths], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return hashlib.sha256(out.encode()).hexdigest()[:16]


def course_ref():
    """The COURSE_REF every notebook's setup cell names (they must agree)."""
    from release import notebooks, setup_values  # tools/release.py

    refs = {setup_values(path)["COURSE_REF"] for path in notebooks(ROOT)}
    if len(refs) != 1 or None in refs:
        sys.exit(f"canary: the setup cells name different refs {sorted(map(str, refs))}: "
                 "run `python tools/release.py check`")
    return refs.pop()


def mirror_with_ref(ref, where):
    """A throwaway bare mirror of this repository (every branch and tag, as a learner's clone
    of the public repository would see them); exits if `ref` is not in it."""
    mirror = Path(where) / "course.git"
    subprocess.run(["git", "clone", "--quiet", "--mirror", str(ROOT), str(mirror)], check=True)
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                           cwd=mirror, capture_output=True, text=True)
    if found.returncode != 0:
        sys.exit(f"canary: the setup cells install ref {ref!r}, which does not exist in this "
                 "repository: every learner's first cell would fail. Make the release tag "
                 "(make release VERSION=...) or fix COURSE_REF.")
    commit = found.stdout.strip()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()
    if commit != head:
        log(f"note: {ref} is {commit[:10]}, this checkout's HEAD is {head[:10]}; the notebooks "
            f"run from the checkout install mathref from {ref}, as learners' would")
    return mirror


def colab_install_spec(mirror, ref):
    """What the notebooks' setup cell installs, from the mirror instead of the public URL."""
    return f"mathref @ git+file://{mirror}@{ref}"


def venv_for(version, install_from=None):
    """A cached virtual environment with torch==version, the test tools and mathref."""
    venv = CACHE / f"torch-{version}"
    py = venv / "bin" / "python"
    constraints = CACHE / f"constraints-{version}.txt"
    reqs = requirements_without_torch()
    key = hashlib.sha256(f"{STAMP_VERSION}\n{version}\n{reqs}\n{TEST_PACKAGES}\n{mathref_dependencies()}\n{sys.version_info[:2]}"
                         .encode()).hexdigest()[:16]
    stamp = venv / ".canary-stamp"
    if not (stamp.exists() and stamp.read_text().strip() == key and py.exists()):
        log(f"building {venv} (torch {version}); later runs reuse it")
        start = time.time()
        shutil.rmtree(venv, ignore_errors=True)
        CACHE.mkdir(parents=True, exist_ok=True)
        constraints.write_text(f"torch=={version}\n" + reqs)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        env = pip_env(constraints)
        pip = [str(py), "-m", "pip", "install", "--quiet"]
        subprocess.run(pip + ["--upgrade", "pip"], env=env, check=True)
        # torch first (what Colab ships), then the test tools pinned like the course's own.
        subprocess.run(pip + [f"torch=={version}"], env=env, check=True)
        subprocess.run(pip + TEST_PACKAGES + mathref_dependencies(), env=env, check=True)
        stamp.write_text(key + "\n")
        size = subprocess.run(["du", "-sh", str(venv)], capture_output=True, text=True).stdout.split()[0]
        log(f"built in {time.time() - start:.0f} s, {size} on disk")
    # mathref from git, as the Colab setup cell does (the unit tests alone use the checkout).
    if install_from:
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--force-reinstall",
                        "--no-deps", colab_install_spec(*install_from)],
                       env=pip_env(constraints), check=True)
    return venv, constraints


def torch_version_in(venv):
    return subprocess.run([str(venv / "bin" / "python"), "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, env=pip_env(None)).stdout.strip()


# ---- inside a canary environment: execute one notebook the way Colab would ----------------

FAKE_COLAB = '''"""A stand-in for Colab's module: its presence is what the setup cell checks."""\n'''


def execute_notebook(path, repo_url, ref, workdir):
    """Runs in the canary venv. Returns '✓' or 'cell N: Error: message'."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

    nb = nbformat.read(path, as_version=4)
    fake = Path(workdir) / "fake_colab"
    (fake / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (fake / "google" / "__init__.py").write_text("")
    (fake / "google" / "colab" / "__init__.py").write_text(FAKE_COLAB)
    # Colab imports google.colab before any cell runs; point the setup cell at this checkout.
    preamble = nbformat.v4.new_code_cell(f"import sys; sys.path.insert(0, {str(fake)!r}); import google.colab")
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    setup = code_cells[0]
    # the public URL becomes the mirror's; COURSE_REF stays what learners get
    setup.source, n = re.subn(r'^COURSE_REPO = "[^"]*"', f'COURSE_REPO = "{repo_url}"', setup.source, flags=re.M)
    if n != 1 or not re.search(rf'^COURSE_REF = "{re.escape(ref)}"', setup.source, flags=re.M):
        return "cell 1: setup cell has no COURSE_REPO line or names another COURSE_REF"
    nb.cells.insert(0, preamble)
    # and prove that the chapter ran on the Colab-style install, not on a copy of the checkout
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys as _sys, mathref as _mathref\n"
        "assert _mathref.__file__.startswith(_sys.prefix), "
        "f'mathref came from {_mathref.__file__}, not from the Colab-style install'"))
    client = NotebookClient(nb, timeout=NOTEBOOK_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute()
    except (CellExecutionError, CellTimeoutError, DeadKernelError) as err:
        index = next((i for i, c in enumerate(nb.cells)
                      if c.cell_type == "code" and any(o.get("output_type") == "error" for o in c.get("outputs", []))),
                     None)
        if index is not None:
            error = next(o for o in nb.cells[index].outputs if o.get("output_type") == "error")
            message = f"{error['ename']}: {error['evalue']}"
            # cell numbers as in the committed notebook (the preamble is not one of them)
            return f"cell {index - 1}: {message.splitlines()[0][:160]}"
        if isinstance(err, CellTimeoutError):
            return f"CellTimeoutError: a cell ran past {NOTEBOOK_TIMEOUT} s"
        lines = [ln for ln in str(err).strip().splitlines() if ln.strip("- ")]
        return f"{type(err).__name__}: {(lines or ['?'])[-1][:160]}"
    return "✓"


# ---- the orchestration ----------------------------------------------------------------------

def save_result(version, installed, name, result):
    """Merged into this version's saved results at once (an interrupted run keeps its rows;
    a run of one notebook updates its row). Each row is kept while what it depends on
    (``code_key(name)``) is unchanged."""
    saved = CACHE / f"results-{version}.json"
    data = json.loads(saved.read_text()) if saved.exists() else {}
    if data.get("torch") != installed or "keys" not in data:
        data = {}
    data.setdefault("results", {})[name] = result
    data.setdefault("keys", {})[name] = code_key(name)
    data.setdefault("commits", {})[name] = head_commit()
    data.update(torch=installed, python=sys.version.split()[0],
                updated=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    saved.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")


def current_results(data):
    """The saved rows whose key still matches the committed code."""
    keys = data.get("keys", {})
    return {name: result for name, result in data.get("results", {}).items()
            if keys.get(name) == code_key(name)}


def run_notebooks(venv, notebooks, save, mirror, ref):
    results = {}
    py = venv / "bin" / "python"
    env = pip_env(CACHE / f"constraints-{venv.name.removeprefix('torch-')}.txt")
    env.setdefault("MATHREF_DATA", str(ROOT.parent / "shared" / "data"))
    env.update(OMP_NUM_THREADS="2", MKL_NUM_THREADS="2", PYDEVD_DISABLE_FILE_VALIDATION="1",
               MPLBACKEND="agg")
    for nb in notebooks:
        start = time.time()
        with tempfile.TemporaryDirectory(prefix="canary-") as workdir:
            proc = subprocess.run(
                ["nice", str(py), __file__, "--execute", str(ROOT / nb), f"file://{mirror}", ref, workdir],
                capture_output=True, text=True, env=env, cwd=workdir)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        if lines:
            results[nb] = lines[-1][len("RESULT "):]
        else:
            tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            results[nb] = f"runner failed: {tail[:160]}"
        log(f"{venv.name} {Path(nb).stem}: {results[nb]} ({time.time() - start:.0f} s)")
        save(nb, results[nb])
    return results


# Tests that do not depend on the torch version (book structure, the nbval comparator, prose
# numbers) or that execute whole notebooks with the course's own kernel (grader, student
# notebooks): left out of `--quick`, the floor check that `make test` runs.
NOT_TORCH_SPECIFIC = ["tests/test_book_structure.py", "tests/test_output_compare.py",
                      "tests/test_prose_numbers.py", "tests/test_grade.py", "tests/test_student.py",
                      "tests/test_release.py", "tests/test_workflows.py"]


def run_unit(venv, jobs, quick=False):
    """The unit tests against this torch; returns '✓ (N passed)' or a short failure line."""
    py = venv / "bin" / "python"
    env = pip_env(None)
    env.setdefault("MATHREF_DATA", str(ROOT.parent / "shared" / "data"))
    env.update(OMP_NUM_THREADS="2", MKL_NUM_THREADS="2", MATHREF_DEVICE="cpu",
               PYTHONHASHSEED="0", PYDEVD_DISABLE_FILE_VALIDATION="1", MPLBACKEND="agg",
               PYTHONPATH=str(ROOT))
    cmd = ["nice", str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests",
           "--ignore=tests/test_browser.py", "--ignore=tests/test_pdf.py"]
    if quick:
        cmd += [f"--ignore={path}" for path in NOT_TORCH_SPECIFIC]
    if jobs > 1:
        cmd += ["-n", str(jobs)]
    start = time.time()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
    out = proc.stdout.strip().splitlines()
    summary = out[-1].strip("= ") if out else proc.stderr.strip()[-160:]
    if proc.returncode < 0:  # the interpreter died (a signal): no summary line
        summary = f"pytest killed by signal {-proc.returncode}"
    failed = [ln for ln in out if ln.startswith(("FAILED", "ERROR"))]
    log(f"{venv.name} unit tests: {summary} ({time.time() - start:.0f} s)")
    for line in failed[:20]:
        log("  " + line[:1500])
    if proc.returncode and not failed:
        # a crash or an error before any test: pytest's faulthandler names the test and frames
        for line in proc.stderr.strip().splitlines()[-40:]:
            log("  stderr: " + line[:200])
    return ("✓ " if proc.returncode == 0 else "✗ ") + f"({summary.split(' in ')[0]})", proc.returncode


def table(columns, rows):
    """Markdown table: one row per notebook (and the unit tests), one column per version."""
    header = "| | " + " | ".join(columns) + " |"
    lines = [header, "|---" * (len(columns) + 1) + "|"]
    for name, cells in rows:
        lines.append(f"| {name} | " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def record(text):
    contributing = ROOT / "CONTRIBUTING.md"
    body = contributing.read_text()
    if MARK_START in body and MARK_END in body:
        head, rest = body.split(MARK_START, 1)
        _, tail = rest.split(MARK_END, 1)
        contributing.write_text(f"{head}{MARK_START}\n{text}\n{MARK_END}{tail}")
        log("table recorded in CONTRIBUTING.md")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", nargs="*", help="torch versions (default: newest and floor)")
    parser.add_argument("--floor", action="store_true", help="only the floor version")
    parser.add_argument("--unit", action="store_true", help="only the unit tests")
    parser.add_argument("--no-unit", action="store_true", help="only the notebooks")
    parser.add_argument("--notebooks", nargs="*", help="default: every notebook")
    parser.add_argument("--quick", action="store_true",
                        help="unit tests without the ones that do not depend on torch (make test)")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--no-record", action="store_true", help="leave CONTRIBUTING.md alone")
    parser.add_argument("--table-only", action="store_true",
                        help="print (and record) the table from the saved results of this commit")
    parser.add_argument("--execute", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.execute:  # inside a canary environment
        print("RESULT " + execute_notebook(*args.execute), flush=True)
        return 0

    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        log("warning: uncommitted changes; the Colab-style install takes the committed ref the "
            "setup cells name, the unit tests take the working tree")
    if args.floor:
        versions = [floor_version()]
    else:
        versions = args.versions or [newest_version(), floor_version()]
    all_notebooks = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "notebooks").glob("*.ipynb"))
    notebooks = [] if args.unit else (args.notebooks or all_notebooks)

    status = 0
    ref = course_ref()
    scratch = tempfile.TemporaryDirectory(prefix="canary-mirror-")
    mirror = mirror_with_ref(ref, scratch.name) if notebooks and not args.table_only else None
    if mirror:
        log(f"mathref from {ref}, the ref the setup cells name (a mirror of this repository)")
    for version in versions:
        if args.table_only:
            break
        venv, _ = venv_for(version, install_from=(mirror, ref) if notebooks else None)
        installed = torch_version_in(venv)
        log(f"torch {installed}: {venv}")
        save = functools.partial(save_result, version, installed)
        res = run_notebooks(venv, notebooks, save, mirror, ref)
        if not args.no_unit:
            res["unit tests"], rc = run_unit(venv, args.jobs, args.quick)
            # the table's row is the full suite; the quick check is kept apart
            save("unit tests (quick)" if args.quick else "unit tests", res["unit tests"])
            status |= rc != 0
        status |= any(v != "✓" for k, v in res.items() if k != "unit tests")

    # The table: every version's last results that match the committed code, one row per
    # notebook even when this run re-ran only some (the others keep their saved rows).
    shown = [] if args.unit else all_notebooks
    columns, saved_results, complete = [], [], True
    for version in versions:
        saved = CACHE / f"results-{version}.json"
        data = json.loads(saved.read_text()) if saved.exists() else {}
        role = ("floor" if version == floor_version() else
                "newest" if not args.versions and not args.floor else "")
        columns.append(f"torch {data.get('torch', version)}" + (f" ({role})" if role else ""))
        current = current_results(data)
        saved_results.append(current)
        complete &= all(n in current for n in all_notebooks + ["unit tests"])
    names = shown + ["unit tests (quick)" if args.quick else "unit tests"]
    if not args.quick and any("unit tests (quick)" in res for res in saved_results):
        names.append("unit tests (quick)")
    cells = [[res.get(n, "not run") for n in names] for res in saved_results]
    rows = [(Path(n).stem if n.endswith(".ipynb") else n, [c[i] for c in cells])
            for i, n in enumerate(names)]
    text = table(columns, rows)
    stamp = (f"Last run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit "
             f"{head_commit()[:10]}, Python {sys.version.split()[0]}, CPU only "
             "(torch's CUDA wheels from PyPI, no GPU).")
    # a run fails on what it ran; the table alone (--table-only) fails on any cell not ✓
    failed = args.table_only and any(not c.startswith("✓") for col in cells for c in col)
    if not complete:
        stamp += " Incomplete: 'not run' cells have no result for this code yet."
    if (complete or args.table_only) and not args.no_record and not args.versions and not args.floor:
        record(text + "\n\n" + stamp)
    print("\n" + text + "\n\n" + stamp)
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "table.md").write_text(text + "\n\n" + stamp + "\n")
    print(f"canary: {'FAIL' if (status or failed) else 'PASS'}")
    return int(bool(status or failed))


if __name__ == "__main__":
    sys.exit(main())
