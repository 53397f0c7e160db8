"""Grade submitted student notebooks: ``python -m mathref.grade SUBMISSIONS_DIR --assignment NB``.

``NB`` is the notebook the instructor handed out (a chapter, or its student version from
``make student``): the grader takes from it, and only from it, the exercises (their labels), the
setup cell and the check cells. SUBMISSIONS_DIR holds one file per student, named
``<student>.ipynb``; hidden files, other files, folders and links are skipped and listed.

Each submission is copied to a private temporary folder and, by default, executed top to bottom
for the record (``--executed DIR`` keeps the executed notebooks). Its verdicts come from a
separate verification (:mod:`mathref.grade.verify`): for each exercise, a sandboxed worker runs
the assignment's setup cell and the student's solution cell; the checker, imported from the
grader's own snapshot of mathref, runs in a trusted process and calls the student's function
through a data-only channel (:mod:`mathref.grade.rpc`). Nothing the submission prints, patches
or defines decides a verdict, and check calls the assignment does not have count for nothing.

Verdicts: ``pass``; ``fail`` (the checker found a wrong result); ``not attempted`` (the solution
still raises NotImplementedError); ``error`` (the solution cell or the student's process failed);
``timeout``; ``missing`` (no solution cell for the exercise); ``not run`` (the file is not a
notebook). The CSV has one row per student: ``student, status, score`` and one column per
exercise of the assignment. Isolation: :mod:`mathref.grade.sandbox`.
"""
import argparse
import ast
import csv
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

__all__ = ["EXERCISE_LABEL", "VERDICTS", "checker_name", "exercise_labels", "check_calls",
           "load_assignment", "find_solution", "read_submission", "student_name",
           "csv_safe", "report_safe", "grade_folder", "write_csv",
           "format_report", "main"]

EXERCISE_LABEL = re.compile(r"\{exercise(?:-start)?\}[^\n]*\n(?:\s*:[^\n]*\n)*?\s*:label:\s*(\S+)")
_CHECK_CALL = re.compile(r"checks\.(check_\w+)\s*\(")
VERDICTS = ("pass", "fail", "not attempted", "error", "timeout", "missing", "not run")
MAX_SUBMISSION_BYTES = 20 * 2 ** 20
_PACKAGE = Path(__file__).resolve().parents[1]          # .../mathref


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


def _defined_names(source):
    """Top-level names a cell defines (functions, classes, assignments); None if it does not
    parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.add(leaf.id)
    return names


def _is_solution(cell):
    return cell.cell_type == "code" and "solution" in cell.metadata.get("tags", [])


def _up_to_check_call(source, label):
    """The check cell's source up to the statement that calls the checker (what follows, e.g.
    a plot of the student's function, is not needed to grade and could only fail or hang)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    call = re.compile(r"checks\." + checker_name(label) + r"\s*\(")
    for i, node in enumerate(tree.body):
        if call.search(ast.get_source_segment(source, node) or ""):
            return ast.unparse(ast.Module(body=tree.body[: i + 1], type_ignores=[]))
    return source


def load_assignment(path):
    """What the grader takes from the instructor's notebook: ``{"path", "setup", "exercises"}``
    with, per exercise (in the notebook's order), its ``label``, ``checker`` name, ``check``
    cell source and the ``names`` its solution cell defines."""
    nb = nbformat.read(Path(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code:
        raise ValueError(f"{path}: no code cells")
    exercises, seen, previous_check = [], set(), -1
    for index, label in check_calls(nb):
        if label in seen:
            continue
        seen.add(label)
        before = [c for c in nb.cells[previous_check + 1:index] if _is_solution(c)]
        previous_check = index
        names = _defined_names(before[-1].source) if before else None
        exercises.append({"label": label, "checker": checker_name(label),
                          "check": _up_to_check_call(nb.cells[index].source, label),
                          "names": sorted(names or [])})
    if not exercises:
        raise ValueError(f"{path}: no check cells (checks.check_<label>(...))")
    return {"path": str(path), "setup": code[0].source, "exercises": exercises}


def find_solution(nb, names, ordinal):
    """The student's solution cell for an exercise whose reference solution defines ``names``:
    the last cell tagged ``solution`` that defines all of them, else the ``ordinal``-th cell
    tagged ``solution`` (if the tags are intact), else the last code cell defining them; None if
    there is none."""
    tagged = [c for c in nb.cells if _is_solution(c)]
    wanted = set(names)

    def defines(cell):
        found = _defined_names(cell.source)
        if found is None:  # a syntax error: still the student's cell if it names the function
            return all(re.search(rf"\b(def|class)\s+{re.escape(n)}\b", cell.source)
                       for n in wanted)
        return wanted <= found

    if wanted:
        matches = [c for c in tagged if defines(c)]
        if matches:
            return matches[-1].source
    if ordinal < len(tagged):
        return tagged[ordinal].source
    if wanted:
        matches = [c for c in nb.cells if c.cell_type == "code" and defines(c)]
        if matches:
            return matches[-1].source
    return None


def read_submission(path):
    """The notebook at ``path`` (nbformat 4), or raise ValueError saying why it is not one."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise ValueError(f"cannot be read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:
        raise ValueError(f"larger than {MAX_SUBMISSION_BYTES // 2 ** 20} MB")
    return _parse_submission(data)


def _parse_submission(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not a text file (not valid UTF-8)") from None
    try:
        json.loads(text)
    except RecursionError:
        raise ValueError("not a valid Jupyter notebook: nested too deeply") from None
    except ValueError as err:
        raise ValueError(f"not valid JSON: {_one_line(err)}") from None
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except RecursionError:
        raise ValueError("not a valid Jupyter notebook: nested too deeply") from None
    except Exception as err:  # a missing key, an unknown version, a wrong type...
        raise ValueError(f"not a valid Jupyter notebook: {_one_line(err)}") from None
    return nb


def _one_line(text, limit=200):
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


# ------------------------------------------------------------------------------------- names

def student_name(file_name):
    """The student column for ``file_name``: the name without ``.ipynb``, Unicode-normalized
    (NFKC), with control and format characters (newlines, escapes, bidi overrides) replaced by
    ``?``."""
    stem = file_name[: -len(".ipynb")] if file_name.endswith(".ipynb") else file_name
    stem = unicodedata.normalize("NFKC", stem)
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co")
                   else ch for ch in stem).strip() or "?"


def report_safe(text):
    """``text`` with control and format characters shown as ``?`` (one line, no escapes)."""
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co")
                   else ch for ch in str(text))


def csv_safe(text):
    """A CSV cell a spreadsheet will not read as a formula: a leading =, +, -, @ (or tab, CR)
    gets a ``'`` in front."""
    text = report_safe(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def _submissions(folder):
    """(files, skipped): the ``<student>.ipynb`` regular files, and every other entry with the
    reason it was skipped."""
    files, skipped = [], []
    for entry in sorted(Path(folder).iterdir(), key=lambda p: p.name):
        name = report_safe(entry.name)
        if entry.name.startswith("."):
            skipped.append(f"{name} (hidden)")
        elif entry.is_symlink():
            skipped.append(f"{name} (a link)")
        elif entry.is_dir():
            skipped.append(f"{name}/ (a folder)")
        elif not entry.name.endswith(".ipynb"):
            skipped.append(f"{name} (not .ipynb)")
        elif not stat.S_ISREG(entry.lstat().st_mode):
            skipped.append(f"{name} (not a regular file)")
        else:
            files.append(entry)
    return files, skipped


# ----------------------------------------------------------------------------------- grading

class _Session:
    """What a grading run shares: the temporary root, the snapshot of mathref the checkers and
    workers import, the sandbox's hidden paths, and the options."""

    def __init__(self, assignment, submissions, outputs=(), timeout=120, exercise_timeout=60,
                 execute=True, limits=None, unsafe=False):
        self.assignment = assignment
        self.timeout, self.exercise_timeout, self.execute = timeout, exercise_timeout, execute
        self.limits = limits or {}
        self.unsafe = unsafe
        self.root = Path(tempfile.mkdtemp(prefix="mathref-grade-"))
        os.chmod(self.root, 0o711)
        self.lib = self.root / "lib"
        shutil.copytree(_PACKAGE, self.lib / "mathref",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for path in [self.lib, *self.lib.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        self.digest = self._digest()
        # hidden from students' code: the submissions, the grader's outputs, and this folder
        # (the other students' work folders, job and result files); its lib/ and the student's
        # own work folder are bound back in
        self.hidden = [str(Path(submissions).resolve())] + \
            [str(Path(p).resolve()) for p in outputs] + [str(self.root.resolve())]
        self.counter = 0
        self.lock = threading.Lock()

    def _digest(self):
        """Every entry of the snapshot (a planted .pyc or a new file counts, not only *.py)."""
        h = hashlib.sha256()
        for path in sorted(self.lib.rglob("*")):
            h.update(str(path).encode() + (b"<link>" if path.is_symlink() else
                                           b"<dir>" if path.is_dir() else path.read_bytes()))
        return h.hexdigest()

    def intact(self):
        """Whether the snapshot is unchanged; if not, restore it (and say so)."""
        if self._digest() == self.digest:
            return True
        shutil.rmtree(self.lib / "mathref", ignore_errors=True)
        shutil.copytree(_PACKAGE, self.lib / "mathref",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        return False

    def workdir(self):
        with self.lock:
            self.counter += 1
            path = self.root / f"s{self.counter}"
        path.mkdir(mode=0o700)
        return path

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)


def _run_guarded(argv, options, env, wall):
    """Run a sandboxed command with a wall-clock limit; kill its process group at the end.
    Returns True if it finished in time."""
    from mathref.grade import sandbox
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **options)
    try:
        process.wait(timeout=wall)
        return True
    except subprocess.TimeoutExpired:
        return False
    finally:
        sandbox.kill_group(process)


def _record(session, workdir, executed_dir, student):
    from mathref.grade import sandbox
    argv, options = sandbox.command(
        [sandbox.python(), "-m", "mathref.grade.record", "submission.ipynb", "executed.ipynb",
         str(session.timeout)], workdir, readable=[session.lib], hidden=session.hidden,
        limits=session.limits, unsafe=session.unsafe)
    env = sandbox.environment(workdir, session.lib)
    start = time.monotonic()
    finished = _run_guarded(argv, options, env, session.timeout + 30)
    seconds = time.monotonic() - start
    info = {}
    try:
        if (workdir / "executed.ipynb.json").stat().st_size < 100_000:
            info = json.loads((workdir / "executed.ipynb.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    status = str(info.get("status", "")) if finished else "timeout"
    if status not in ("ok", "timeout", "kernel died", "hang", "grader error"):
        status, detail = ("kernel died", "the execution ended without a record") if finished \
            else ("timeout", f"still running after {session.timeout} s (stopped by the grader)")
    else:
        detail = str(info.get("detail", ""))[:300]
        cell = info.get("cell")
        if isinstance(cell, int) and status != "ok":
            detail += f" (cell {cell + 1})"
    if executed_dir is not None:
        target = workdir / "executed.ipynb"
        try:
            if target.is_file() and not target.is_symlink() \
                    and target.stat().st_size <= 4 * MAX_SUBMISSION_BYTES:
                shutil.copyfile(target, Path(executed_dir) / "pending" / f"{student}.ipynb")
        except OSError:
            pass
    return status, detail, seconds


def _verify(session, workdir, nb):
    """{label: (verdict, message)} from the trusted verifier process."""
    from mathref.grade import sandbox
    exercises = []
    for ordinal, exercise in enumerate(session.assignment["exercises"]):
        solution = find_solution(nb, exercise["names"], ordinal)
        exercises.append({"label": exercise["label"], "checker": exercise["checker"],
                          "check": exercise["check"], "solution": solution,
                          "why": "no solution cell defining " + ", ".join(exercise["names"])})
    job = {"workdir": str(workdir), "setup": session.assignment["setup"],
           "exercises": exercises, "exercise_timeout": session.exercise_timeout,
           "readable": [str(session.lib)], "hidden": session.hidden,
           "pythonpath": str(session.lib), "limits": session.limits,
           "unsafe": session.unsafe}
    job_file = Path(str(workdir) + ".job.json")
    result_file = Path(str(workdir) + ".result.json")
    job_file.write_text(json.dumps(job), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env["PYTHONPATH"] = str(session.lib)
    env["PYTHONDONTWRITEBYTECODE"] = "1"   # the snapshot stays exactly as copied (see intact)
    env["OMP_NUM_THREADS"] = "1"
    wall = (len(exercises) + 1) * session.exercise_timeout + 60
    process = subprocess.Popen([sandbox.python(), "-m", "mathref.grade.verify", str(job_file),
                                str(result_file)], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               start_new_session=True, cwd=str(session.root))
    try:
        _, err = process.communicate(timeout=wall)
    except subprocess.TimeoutExpired:
        sandbox.kill_group(process)
        err = b"the verification ran out of time"
    verdicts = {}
    try:
        verdicts = {k: tuple(v) for k, v in
                    json.loads(result_file.read_text(encoding="utf-8"))["verdicts"].items()}
    except (OSError, ValueError, KeyError):
        message = _one_line((err or b"").decode("utf-8", "replace").strip().splitlines()[-1:]
                            or ["the verification failed"])
        verdicts = {e["label"]: ("error", f"grader: {message}") for e in exercises}
    return verdicts


def _grade_submission(path, session, executed_dir=None, student=None, flag=""):
    """Grade one file; return a dict with ``student`` (the row's name: ``student`` or the file's
    normalized name), ``file``, ``status``, ``detail``, ``flag`` (e.g. a name clash),
    ``verdicts`` ({label: (verdict, message)}), ``score`` and ``seconds``."""
    path = Path(path)
    start = time.monotonic()
    labels = [e["label"] for e in session.assignment["exercises"]]
    result = {"student": student or student_name(path.name), "file": report_safe(path.name),
              "status": "ok" if session.execute else "not executed", "detail": "",
              "flag": flag, "verdicts": {}, "seconds": 0.0}
    try:
        try:
            nb = read_submission(path)
        except ValueError as err:
            result.update(status="invalid notebook", detail=str(err),
                          verdicts={label: ("not run", "") for label in labels})
            return result
        workdir = session.workdir()
        try:
            nbformat.write(nb, workdir / "submission.ipynb")
            if session.execute:
                status, detail, _ = _record(session, workdir, executed_dir, result["student"])
                result.update(status=status, detail=detail)
            result["verdicts"] = _verify(session, workdir, nb)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            for suffix in (".job.json", ".result.json"):
                Path(str(workdir) + suffix).unlink(missing_ok=True)
        if not session.intact():
            result.update(status="tampered", detail="the grader's copy of mathref was modified "
                          "during this submission (restored); verdicts withheld",
                          verdicts={label: ("error", "tampered with the grader") for label in labels})
    except Exception as err:  # never lose the run for one submission
        result.update(status="grader error", detail=_one_line(f"{type(err).__name__}: {err}"))
    finally:
        for label in labels:
            result["verdicts"].setdefault(label, ("error", "no verdict"))
        result["score"] = sum(v == "pass" for v, _ in result["verdicts"].values())
        result["seconds"] = time.monotonic() - start
    return result


def grade_folder(folder, assignment, timeout=120, exercise_timeout=60, jobs=1, execute=True,
                 log=None, progress=None, executed_dir=None, outputs=(), limits=None,
                 unsafe=False):
    """Grade every ``<student>.ipynb`` in ``folder`` against ``assignment`` (a path or the
    dict of :func:`load_assignment`); return (results, labels, skipped). ``progress`` (a path)
    gets one JSON line per student as each finishes. Without a working sandbox it raises
    :class:`mathref.grade.sandbox.SandboxUnavailable` unless ``unsafe`` is true."""
    from mathref.grade import sandbox
    sandbox.require(unsafe)
    if not isinstance(assignment, dict):
        assignment = load_assignment(assignment)
    labels = [e["label"] for e in assignment["exercises"]]
    files, skipped = _submissions(folder)
    by_name = {}
    for f in files:
        by_name.setdefault(student_name(f.name), []).append(f)
    # names that normalize to one string (zoe.ipynb and ｚｏｅ.ipynb) are all graded, each under a
    # row of its own, and flagged: the file already spelled as its normalized name keeps it
    to_grade = []
    for name, group in by_name.items():
        for f in group:
            if len(group) == 1:
                to_grade.append((f, name, ""))
                continue
            row = name if f.name == name + ".ipynb" else f"{name} [name clash: {report_safe(f.name)}]"
            to_grade.append((f, row, f"name clash: {len(group)} files normalize to {name!r}: "
                                     + ", ".join(report_safe(g.name) for g in group)))
    session = _Session(assignment, folder, outputs=list(outputs) + ([progress] if progress else []),
                      timeout=timeout, exercise_timeout=exercise_timeout, execute=execute,
                      limits=limits, unsafe=unsafe)
    results = []
    lock = threading.Lock()

    def done(result):
        with lock:
            results.append(result)
            if progress:
                with open(progress, "a", encoding="utf-8") as f:
                    f.write(json.dumps(result, ensure_ascii=False) + "\n")
                    f.flush()
                    os.fsync(f.fileno())
            if log:
                log(_progress(result, len(labels)))

    try:
        if executed_dir is not None:
            (Path(executed_dir) / "pending").mkdir(parents=True, exist_ok=True)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(_grade_submission, f, session, executed_dir, row, flag)
                       for f, row, flag in to_grade]
            for future in as_completed(futures):
                done(future.result())
    finally:
        session.close()
    results.sort(key=lambda r: r["student"])
    return results, labels, skipped


def _progress(result, total):
    return (f"graded {report_safe(result['file'])}: {result['score']}/{total} passed, "
            f"{result['status']}")


def _atomic_write(path, text):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)


def write_csv(results, labels, path):
    """Write the grades atomically (a temporary file renamed over ``path``)."""
    import io
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["student", "status", "score"] + [csv_safe(label) for label in labels])
    for r in results:
        writer.writerow([csv_safe(r["student"]), csv_safe(r["status"]), r["score"]]
                        + [r["verdicts"][label][0] for label in labels])
    _atomic_write(path, buffer.getvalue())


def format_report(results, labels, folder, timeout, skipped=(), mode=""):
    lines = [f"{mode}."] if mode.startswith("UNSAFE") else []   # said first, never buried
    lines.append(f"Graded {len(results)} submission(s) in {report_safe(folder)}: {len(labels)} "
                 f"exercise(s), time limit {timeout} s per notebook.")
    if mode:
        lines.append(f"Isolation: {mode}.")
    lines.append("")
    for r in results:
        head = f"{report_safe(r['student'])}: {r['score']}/{len(labels)}"
        if r["status"] not in ("ok", "not executed"):
            head += f" ({r['status']}: {report_safe(r['detail'])})"
        if r.get("flag"):
            head += f" [FLAGGED: {report_safe(r['flag'])}]"
        lines.append(head)
        grouped = {}
        for label in labels:
            verdict, message = r["verdicts"][label]
            if verdict in ("fail", "error", "timeout", "missing"):
                lines.append(f"  {label}: {verdict}: {report_safe(message)}")
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
    if skipped:
        lines += ["", "Skipped (not <student>.ipynb): " + ", ".join(skipped)]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m mathref.grade",
        description="Grade every submitted student notebook against the assignment: a CSV "
                    "and a short report.",
        epilog="SUBMISSIONS_DIR holds one notebook per student, named <student>.ipynb; the file "
               "name without .ipynb is the student column. Hidden files, links, folders and "
               "other files are skipped (and listed). The students' code runs sandboxed: see "
               "the instructors' guide.")
    parser.add_argument("submissions", type=Path, metavar="SUBMISSIONS_DIR",
                        help="folder of <student>.ipynb files")
    parser.add_argument("--assignment", type=Path, required=True, metavar="NOTEBOOK",
                        help="the notebook handed out (e.g. notebooks/06_optimizers.ipynb or "
                             "student/06_optimizers.ipynb): its exercises are graded")
    parser.add_argument("--out", type=Path, default=Path("grades.csv"),
                        help="CSV to write (default: grades.csv)")
    parser.add_argument("--report", type=Path, default=None,
                        help="also write the report (always printed) to this file")
    parser.add_argument("--timeout", type=int, default=120,
                        help="wall-clock seconds to execute each notebook for the record "
                             "(default: 120; chapters 13-15 need 300-600)")
    parser.add_argument("--exercise-timeout", type=int, default=60,
                        help="seconds for each exercise's verification, the worker's start "
                             "included (default: 60)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="submissions graded at the same time (default: 1)")
    parser.add_argument("--no-execute", action="store_true",
                        help="skip executing the notebooks for the record (verdicts only)")
    parser.add_argument("--unsafe", action="store_true",
                        help="grade even without a working bubblewrap sandbox: students' code "
                             "then runs with rlimits only and can read and change what this "
                             "user can (the report's first line says so)")
    parser.add_argument("--executed", type=Path, default=None, metavar="DIR",
                        help="keep the executed notebooks in DIR (written at the end)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    if args.timeout < 1 or args.jobs < 1 or args.exercise_timeout < 1:
        parser.error("--timeout, --exercise-timeout and --jobs must be at least 1")
    try:
        assignment = load_assignment(args.assignment)
    except (OSError, ValueError) as err:
        parser.error(f"--assignment: {_one_line(err)}")
    files, _ = _submissions(args.submissions)
    if not files:
        parser.error(f"no <student>.ipynb files in {args.submissions}")
    for output in [args.out, args.report, args.executed]:
        if output is not None and Path(output).resolve().is_relative_to(args.submissions.resolve()):
            parser.error(f"{output}: outputs must not be inside the submissions folder")

    def log(line):
        print(line, file=sys.stderr, flush=True)

    from mathref.grade import sandbox
    try:
        mode = sandbox.require(args.unsafe)
    except sandbox.SandboxUnavailable as err:
        print(f"python -m mathref.grade: refusing to grade: {err}", file=sys.stderr)
        return 2
    log(f"isolation: {mode}")
    progress = args.out.with_name(args.out.name + ".partial.jsonl")
    progress.write_text("", encoding="utf-8")
    outputs = [args.out] + ([args.report] if args.report else []) + \
        ([args.executed] if args.executed else [])
    executed_tmp = None
    if args.executed:
        executed_tmp = Path(tempfile.mkdtemp(prefix=".executed-", dir=args.executed.resolve().parent))
    try:
        results, labels, skipped = grade_folder(
            args.submissions, assignment, args.timeout, args.exercise_timeout, args.jobs,
            execute=not args.no_execute, log=log, progress=progress, executed_dir=executed_tmp,
            outputs=outputs + ([executed_tmp] if executed_tmp else []), unsafe=args.unsafe)
        write_csv(results, labels, args.out)
        report = format_report(results, labels, args.submissions, args.timeout, skipped, mode)
        if args.report:
            _atomic_write(args.report, report)
        if executed_tmp is not None:
            if args.executed.exists():
                shutil.rmtree(args.executed)
            os.replace(executed_tmp / "pending", args.executed)
    finally:
        if executed_tmp is not None:
            shutil.rmtree(executed_tmp, ignore_errors=True)
    progress.unlink(missing_ok=True)
    print(report, end="")
    print(f"Wrote {args.out}" + (f" and {args.report}" if args.report else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
