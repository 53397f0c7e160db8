"""pytest plugin for the notebook regression run (`make nbval`, loaded with -p).

- stderr is never compared: progress bars and warnings go there;
- each notebook's wall time (kernel start included) is summed and printed as a table, also
  written to _build/notebook_times.txt so `make test` can print it last.
"""
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMES_FILE = ROOT / "_build" / "notebook_times.txt"
BUDGET_S = {"01": 60, "13": 180, "14": 300, "15": 120}  # every other chapter: 90 s
DEFAULT_BUDGET_S = 90

_seconds = defaultdict(float)
_failed = defaultdict(int)


def pytest_collectstart(collector):
    if collector.fspath and str(collector.fspath).endswith(".ipynb"):
        collector.skip_compare = tuple(collector.skip_compare) + ("stderr",)


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    if path.endswith(".ipynb"):
        _seconds[path] += report.duration
        if report.failed:
            _failed[path] += 1


def time_table():
    lines = [f"{'notebook':44s} {'seconds':>8s} {'budget':>7s}  result",
             "-" * 72]
    for path in sorted(_seconds):
        name = Path(path).name
        budget = BUDGET_S.get(name[:2], DEFAULT_BUDGET_S)
        verdict = f"{_failed[path]} failed cells" if _failed[path] else "ok"
        over = "  OVER BUDGET" if _seconds[path] > budget else ""
        lines.append(f"{name:44s} {_seconds[path]:8.1f} {budget:7d}  {verdict}{over}")
    lines.append("-" * 72)
    lines.append(f"{'total':44s} {sum(_seconds.values()):8.1f}")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter):
    if not _seconds:
        return
    table = time_table()
    terminalreporter.write_sep("=", "notebook execution times")
    terminalreporter.write_line(table)
    TIMES_FILE.parent.mkdir(exist_ok=True)
    TIMES_FILE.write_text(f"Notebook execution times, {time.strftime('%Y-%m-%d %H:%M')}\n"
                          f"{table}\n")
