"""pytest plugin for the notebook regression run (`make nbval`, loaded with -p).

- outputs are compared by the number-aware rule of ``tests/output_compare.py`` (text exact,
  numbers within their last printed digit, rounding-level magnitudes one class, a wider
  tolerance only where a cell declares it with an ``nbval-tolerance-...`` tag), not as strings;
- stderr is never compared: progress bars and warnings go there;
- each course notebook's wall time (kernel start included) is summed and printed as a table,
  also written to _build/notebook_times.txt so `make test` can print it last, with the number of
  cells whose fresh text differs from the stored text although every number is within its
  tolerance (the evidence that a pass's arithmetic differs from the one that made the outputs).
  Only notebooks under notebooks/ are timed: a notebook a test writes elsewhere is not. The
  budgets hold for the pinned environment; $NBVAL_BUDGET_FACTOR scales them for the perturbed pass,
  and $NBVAL_TIMES_FILE moves the table (the seed sweep writes its own).
"""
import os
import time
from collections import defaultdict
from pathlib import Path

from nbval import plugin as nbval_plugin

from tests.output_compare import Tolerance, compare

ROOT = Path(__file__).resolve().parents[1]
COURSE_NOTEBOOKS = ROOT / "notebooks"
TIMES_FILE = Path(os.environ.get("NBVAL_TIMES_FILE", ROOT / "_build" / "notebook_times.txt"))
# Budgets in seconds, two notebooks at a time, one thread each, on a 2-core CPU with AVX-512
# (chapter 14 measured 250-258 s in four runs on one). A CPU without AVX-512 (most laptops) runs
# PyTorch's kernels half as wide: chapter 14 took 504 s on an AVX2-only EPYC, so there every
# budget doubles (CPU_KIND_FACTOR; the README states both).
BUDGET_S = {"01": 60, "13": 180, "14": 300, "15": 120, "16": 150}  # every other chapter: 90 s
DEFAULT_BUDGET_S = 90


def _has_avx512():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            return any(line.startswith("flags") and " avx512f" in line for line in f)
    except OSError:
        return True          # not Linux: no way to tell; the AVX-512 budgets


CPU_KIND_FACTOR = 1 if _has_avx512() else 2
BUDGET_FACTOR = float(os.environ.get("NBVAL_BUDGET_FACTOR", "1"))

_seconds = defaultdict(float)
_failed = defaultdict(int)
_digits_moved = defaultdict(int)
DIGITS_MOVED = "nbval-digits-moved"   # user property: this cell's text differed, within tolerance


def pytest_collectstart(collector):
    if collector.fspath and str(collector.fspath).endswith(".ipynb"):
        collector.skip_compare = tuple(collector.skip_compare) + ("stderr",)


def _by_key(outputs, cell, skip):
    """nbval's grouping: every output's fields (a stream's text under its name, each MIME type
    of display data) as key -> list of sanitized values, in order."""
    grouped = defaultdict(list)
    for output in nbval_plugin.transform_streams_for_comparison(outputs):
        for key, value in output.items():
            if key in skip:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in skip:
                        grouped[mime].append(cell.sanitize(data))
            else:
                grouped[key].append(cell.sanitize(value))
    return grouped


def number_aware_compare_outputs(self, test, ref, skip_compare=None):
    """Replaces ``nbval.plugin.IPyNbCell.compare_outputs``: same grouping of outputs, but each
    pair of values is compared by ``tests.output_compare.compare`` with the cell's declared
    tolerance, and a failure names the number or text that changed."""
    skip = skip_compare or self.parent.skip_compare
    tolerance = Tolerance.from_tags(self.cell.metadata.get("tags", []))
    fresh, stored = _by_key(test, self, skip), _by_key(ref, self, skip)
    self.comparison_traceback = []
    if set(fresh) != set(stored):
        self.comparison_traceback.append(
            f"output fields differ: stored {sorted(stored)}, fresh {sorted(fresh)}")
        return False
    for key, stored_values in stored.items():
        fresh_values = fresh[key]
        if len(fresh_values) != len(stored_values):
            self.comparison_traceback.append(
                f"{key}: {len(fresh_values)} outputs where {len(stored_values)} are stored")
            return False
        for a, b in zip(stored_values, fresh_values):
            if not isinstance(a, str) or not isinstance(b, str):
                problem = None if a == b else "non-text output differs"
            else:
                problem = compare(a, b, tolerance)
            if problem:
                self.comparison_traceback.append(f"{key}: {problem}")
                return False
            if a != b and DIGITS_MOVED not in dict(self.user_properties):
                self.user_properties.append((DIGITS_MOVED, 1))
    return True


nbval_plugin.IPyNbCell.compare_outputs = number_aware_compare_outputs

# After a cell's reply, nbval reads the cell's remaining IOPub messages with a fixed 5 s timeout
# for each (nbval 0.11 sets it in IPyNbCell.__init__, not configurable). A training cell sends
# thousands of progress-bar messages, and on a loaded machine the kernel's IOPub thread fell more
# than 5 s behind: chapter 14 failed with "Timeout of 5 seconds exceeded waiting for output"
# after its training had finished, and every later cell was skipped. 60 s keeps a real hang
# bounded (the cell itself still times out after --nbval-cell-timeout).
OUTPUT_TIMEOUT_S = 60
_nbval_cell_init = nbval_plugin.IPyNbCell.__init__


def _cell_init_with_output_timeout(self, *args, **kwargs):
    _nbval_cell_init(self, *args, **kwargs)
    self.output_timeout = OUTPUT_TIMEOUT_S


nbval_plugin.IPyNbCell.__init__ = _cell_init_with_output_timeout


def _is_course_notebook(path):
    return (Path(path) if Path(path).is_absolute() else Path.cwd() / path).resolve().parent \
        == COURSE_NOTEBOOKS


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb") and _is_course_notebook(path):
        _seconds[path] += report.duration
        if report.failed:
            _failed[path] += 1
        if report.when == "call" and DIGITS_MOVED in dict(report.user_properties):
            _digits_moved[path] += 1


def time_table():
    lines = [f"{'notebook':34s} {'seconds':>8s} {'budget':>7s} {'digits moved':>13s}  result",
             "-" * 76]
    for path in sorted(_seconds):
        name = Path(path).name
        budget = round(BUDGET_S.get(name[:2], DEFAULT_BUDGET_S) * CPU_KIND_FACTOR * BUDGET_FACTOR)
        verdict = f"{_failed[path]} failed cells" if _failed[path] else "ok"
        over = "  OVER BUDGET" if _seconds[path] > budget else ""
        lines.append(f"{name:34s} {_seconds[path]:8.1f} {budget:7d} {_digits_moved[path]:13d}  "
                     f"{verdict}{over}")
    lines.append("-" * 76)
    lines.append(f"{'total':34s} {sum(_seconds.values()):8.1f} {'':7s} "
                 f"{sum(_digits_moved.values()):13d}")
    lines.append("digits moved: cells whose fresh text differs from the stored one, every number "
                 "within its tolerance")
    if CPU_KIND_FACTOR != 1:
        lines.append(f"(budgets × {CPU_KIND_FACTOR} on a CPU without AVX-512)")
    if BUDGET_FACTOR != 1:
        lines.append(f"(budgets × {BUDGET_FACTOR:g} for this environment: NBVAL_BUDGET_FACTOR)")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter):
    # under pytest-xdist (the perturbed pass) the controller receives every cell's report and
    # writes the table; a worker has only its own notebooks
    if not _seconds or hasattr(terminalreporter.config, "workerinput"):
        return
    table = time_table()
    terminalreporter.write_sep("=", "notebook execution times")
    terminalreporter.write_line(table)
    TIMES_FILE.parent.mkdir(exist_ok=True)
    TIMES_FILE.write_text(f"Notebook execution times, {time.strftime('%Y-%m-%d %H:%M')}\n"
                          f"{table}\n")
