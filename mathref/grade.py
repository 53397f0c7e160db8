"""Grade submitted student notebooks: ``python -m mathref.grade SUBMISSIONS_DIR``.

Convention: SUBMISSIONS_DIR holds one file per student, named ``<student>.ipynb`` (the
student's name or id is the file name without ``.ipynb``). Other files and sub-folders are
listed as ignored.

Each notebook runs top to bottom in a fresh kernel (nbclient, errors allowed so every check
cell runs), in an empty temporary folder, without proxy variables, under a time limit for the
whole notebook. Every check cell ``checks.check_<label>(answer)`` gives its exercise a verdict:

``pass``           the cell printed ``✅ <label>: passed``
``fail``           the check raised ExerciseCheckFailed (a wrong answer)
``not attempted``  the solution still raises NotImplementedError
``error``          the check cell crashed otherwise (e.g. the function is not defined)
``timeout``        the notebook's time ran out during this exercise
``not run``        the notebook stopped (timeout, kernel died, invalid file) before it
``missing``        this submission has no check cell for an exercise other submissions have

The CSV has one row per submitted file: ``student, status, score`` (the number of passed
exercises), then one column per exercise label. ``status`` is ``ok`` (ran to the end),
``timeout``, ``kernel died``, ``invalid notebook`` or ``grader error``. A short text report
(per student: score and every exercise not passed with its one-line message; totals per
exercise) is printed and, with ``--report``, written to a file.

The grader executes the students' code: run it in a container or an account with nothing to
lose. See the instructors' guide.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat

__all__ = ["EXERCISE_LABEL", "VERDICTS", "checker_name", "exercise_labels", "check_calls",
           "kernel_environment", "read_submission", "verdicts_from_outputs", "grade_notebook",
           "grade_folder", "write_csv", "format_report", "main"]

EXERCISE_LABEL = re.compile(r"\{exercise(?:-start)?\}[^\n]*\n(?:\s*:[^\n]*\n)*?\s*:label:\s*(\S+)")
_CHECK_CALL = re.compile(r"checks\.(check_\w+)\s*\(")
VERDICTS = ("pass", "fail", "not attempted", "error", "timeout", "not run", "missing")
_PROXY_VARIABLES = {"http_proxy", "https_proxy", "ftp_proxy", "all_proxy", "no_proxy",
                    "socks_proxy", "rsync_proxy"}


def exercise_labels(nb):
    """The labels of the ``{exercise}`` blocks in notebook ``nb``, in order."""
    return [label for c in nb.cells if c.cell_type == "markdown"
            for label in EXERCISE_LABEL.findall(c.source)]


def checker_name(label):
    """``ch06-adam-step`` -> ``check_ch06_adam_step``, the name of its checker."""
    return "check_" + label.replace("-", "_")


def check_calls(nb):
    """``(cell index, label)`` for every ``checks.check_<label>(`` call in a code cell.

    Labels are recovered from the notebook's ``{exercise}`` blocks, else by turning the
    underscores of the checker's name back into dashes (the labels' convention)."""
    known = {checker_name(label): label for label in exercise_labels(nb)}
    calls = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for name in _CHECK_CALL.findall(cell.source):
            calls.append((index, known.get(name, name[len("check_"):].replace("_", "-"))))
    return calls


def read_submission(path):
    """The notebook at ``path`` (nbformat 4), or raise ValueError saying why it is not one."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError("not a text file (not valid UTF-8)") from None
    try:
        json.loads(text)
    except ValueError as err:
        raise ValueError(f"not valid JSON: {_one_line(err)}") from None
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except Exception as err:  # a missing key, an unknown version, a wrong type...
        raise ValueError(f"not a valid Jupyter notebook: {_one_line(err)}") from None
    return nb


def _one_line(text, limit=200):
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _text(output):
    return output.get("text", "") if output.get("output_type") == "stream" else ""


def verdicts_from_outputs(nb, stopped_at=None, stop_verdict="timeout", stop_message=""):
    """``{label: (verdict, message)}`` from an executed notebook's check cells.

    ``stopped_at`` is the index of the cell during which execution stopped (None if the
    notebook ran to the end): the first exercise whose check cell is at or after it gets
    ``stop_verdict`` with ``stop_message``, later ones ``not run``."""
    verdicts = {}
    stop_given = False
    for index, label in check_calls(nb):
        if label in verdicts:  # a second check of the same exercise: the first one counts
            continue
        if stopped_at is not None and index >= stopped_at:
            if stop_given:
                verdicts[label] = ("not run", "")
            else:
                verdicts[label] = (stop_verdict, stop_message)
                stop_given = True
            continue
        outputs = nb.cells[index].get("outputs", [])
        errors = [o for o in outputs if o.get("output_type") == "error"]
        failed = [o for o in errors if o.get("ename") == "ExerciseCheckFailed"
                  and o.get("evalue", "").startswith(f"{label}: ")]
        if failed:  # a failed check wins over any "passed" text the student's code printed
            message = failed[0]["evalue"][len(label) + 2:]
            verdict = "not attempted" if message.startswith("not attempted") else "fail"
            verdicts[label] = (verdict, _one_line(message, 300))
        elif any(f"✅ {label}: passed" in _text(o) for o in outputs):
            verdicts[label] = ("pass", "")  # a later line of the check cell may still crash
        elif errors:
            ename, evalue = errors[0].get("ename", ""), errors[0].get("evalue", "")
            verdicts[label] = ("error", _one_line(f"{ename}: {evalue}" if evalue else ename))
        else:
            verdicts[label] = ("error", "the check cell printed no verdict (was it changed?)")
    return verdicts


def kernel_environment():
    """The grader's environment without proxy variables, with this mathref importable first."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in _PROXY_VARIABLES}
    package_root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def grade_notebook(path, timeout=120, kernel_name="python3"):
    """Execute one submission; return a dict with ``student``, ``file``, ``status``,
    ``detail``, ``verdicts`` ({label: (verdict, message)}) and ``seconds``."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    path = Path(path)
    result = {"student": path.stem, "file": path.name, "status": "ok", "detail": "",
              "verdicts": {}, "seconds": 0.0}
    start = time.monotonic()
    try:
        nb = read_submission(path)
    except (OSError, ValueError) as err:
        result.update(status="invalid notebook", detail=str(err))
        return result

    state = {"deadline": None, "cell": None}

    def cell_timeout(cell):  # what is left of the notebook's time, counted from its first cell
        if state["deadline"] is None:
            state["deadline"] = time.monotonic() + timeout
        return max(1, round(state["deadline"] - time.monotonic()))

    def on_cell_start(cell, cell_index):
        state["cell"] = cell_index

    stopped_at, stop_verdict, stop_message = None, "timeout", ""
    with tempfile.TemporaryDirectory(prefix="mathref-grade-") as workdir:
        client = NotebookClient(
            nb, timeout=timeout, timeout_func=cell_timeout, kernel_name=kernel_name,
            allow_errors=True, record_timing=False, interrupt_on_timeout=False,
            on_cell_start=on_cell_start, resources={"metadata": {"path": workdir}})
        try:
            # the kernel's own stdout/stderr (not the cells' outputs) would only add noise
            client.execute(env=kernel_environment(), stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
        except CellTimeoutError:
            stopped_at = state["cell"]
            stop_message = f"still running when the notebook's {timeout} s ran out"
            result.update(status="timeout", detail=f"still running after {timeout} s in "
                          f"{_cell_name(nb, stopped_at)}")
        except DeadKernelError:
            stopped_at, stop_verdict = state["cell"], "error"
            stop_message = "the kernel died during this exercise (out of memory or a crash)"
            where = f" in {_cell_name(nb, stopped_at)}" if stopped_at is not None else ""
            result.update(status="kernel died", detail=f"the kernel died{where}")
        except Exception as err:  # the kernel did not start, a broken kernel spec...
            stopped_at, stop_verdict = state["cell"] or 0, "not run"
            result.update(status="grader error", detail=_one_line(f"{type(err).__name__}: {err}"))
    result["verdicts"] = verdicts_from_outputs(nb, stopped_at, stop_verdict, stop_message)
    result["seconds"] = time.monotonic() - start
    return result


def _cell_name(nb, index):
    first = _one_line(nb.cells[index].source, 60) if index < len(nb.cells) else ""
    return f"cell {index + 1}" + (f" ({first})" if first else "")


def _submissions(folder):
    files, ignored = [], []
    for entry in sorted(Path(folder).iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_file() and entry.suffix == ".ipynb":
            files.append(entry)
        else:
            ignored.append(entry.name + ("/" if entry.is_dir() else ""))
    return files, ignored


def grade_folder(folder, timeout=120, jobs=1, log=None):
    """Grade every ``<student>.ipynb`` in ``folder``; return (results, labels, ignored)."""
    files, ignored = _submissions(folder)
    if jobs > 1 and len(files) > 1:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(grade_notebook, f, timeout) for f in files]
            results = []
            for future in futures:
                results.append(future.result())
                if log:
                    log(_progress(results[-1]))
    else:
        results = []
        for f in files:
            results.append(grade_notebook(f, timeout))
            if log:
                log(_progress(results[-1]))
    labels = []
    for result in results:  # exercise columns in the order the notebooks have them
        labels += [label for label in result["verdicts"] if label not in labels]
    for result in results:
        default = "not run" if result["status"] == "invalid notebook" else "missing"
        for label in labels:
            result["verdicts"].setdefault(label, (default, ""))
        result["score"] = sum(v == "pass" for v, _ in result["verdicts"].values())
    return results, labels, ignored


def _progress(result):
    if not result["verdicts"]:
        return f"graded {result['file']}: {result['status']}"
    passed = sum(v == "pass" for v, _ in result["verdicts"].values())
    return (f"graded {result['file']}: {passed}/{len(result['verdicts'])} passed, "
            f"{result['status']}")


def write_csv(results, labels, path):
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "status", "score"] + labels)
        for r in results:
            writer.writerow([r["student"], r["status"], r["score"]]
                            + [r["verdicts"][label][0] for label in labels])


def format_report(results, labels, folder, timeout, ignored=()):
    lines = [f"Graded {len(results)} submission(s) in {folder}: {len(labels)} exercise(s), "
             f"time limit {timeout} s per notebook.", ""]
    for r in results:
        head = f"{r['student']}: {r['score']}/{len(labels)}"
        if r["status"] != "ok":
            head += f" ({r['status']}: {r['detail']})"
        lines.append(head)
        grouped = {}
        for label in labels:
            verdict, message = r["verdicts"][label]
            if verdict in ("fail", "error", "timeout"):
                lines.append(f"  {label}: {verdict}: {message}")
            elif verdict != "pass":
                grouped.setdefault(verdict, []).append(label)
        for verdict, names in grouped.items():
            lines.append(f"  {verdict}: {', '.join(names)}")
    if labels:
        lines += ["", "Per exercise (number of students):"]
        width = max(len(label) for label in labels)
        present = [v for v in VERDICTS if any(r["verdicts"][label][0] == v
                                               for r in results for label in labels)]
        lines.append("  " + " " * width + "".join(f"  {v:>{max(len(v), 4)}}" for v in present))
        for label in labels:
            counts = [sum(r["verdicts"][label][0] == v for r in results) for v in present]
            lines.append(f"  {label:<{width}}" + "".join(
                f"  {c:>{max(len(v), 4)}}" for c, v in zip(counts, present)))
    if ignored:
        lines += ["", "Ignored (not <student>.ipynb): " + ", ".join(ignored)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m mathref.grade",
        description="Execute every submitted student notebook and collect its exercise "
                    "checks into a CSV and a short report.",
        epilog="Naming convention: SUBMISSIONS_DIR holds one notebook per student, named "
               "<student>.ipynb (e.g. submissions/ada.ipynb, submissions/s1234567.ipynb); the "
               "file name without .ipynb is the student column. Sub-folders and other files "
               "are ignored (and listed). The notebooks run the students' code: grade in a "
               "container or an account with nothing to lose.")
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR",
                        help="folder of <student>.ipynb files")
    parser.add_argument("--out", type=Path, default=Path("grades.csv"),
                        help="CSV to write (default: grades.csv)")
    parser.add_argument("--report", type=Path, default=None,
                        help="also write the report (always printed) to this file")
    parser.add_argument("--timeout", type=int, default=120,
                        help="seconds allowed per notebook, from its first cell (default: 120; "
                             "the chapters' CPU budgets are 60 s to 5 min)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="notebooks graded at the same time (default: 1)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    if args.timeout < 1 or args.jobs < 1:
        parser.error("--timeout and --jobs must be at least 1")
    files, _ = _submissions(args.submissions)
    if not files:
        parser.error(f"no <student>.ipynb files in {args.submissions}")

    def log(line):
        print(line, file=sys.stderr, flush=True)

    results, labels, ignored = grade_folder(args.submissions, args.timeout, args.jobs, log)
    write_csv(results, labels, args.out)
    report = format_report(results, labels, args.submissions, args.timeout, ignored)
    if args.report:
        args.report.write_text(report, encoding="utf-8")
    print(report, end="")
    print(f"Wrote {args.out}" + (f" and {args.report}" if args.report else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
