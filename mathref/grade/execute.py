"""Grading the submissions: each is copied to a private folder, executed in the sandbox for
the record (:mod:`mathref.grade.record`), and verified exercise by exercise by the trusted
verifier (:mod:`mathref.grade.verify`), which runs the checkers and calls the student's
functions in a sandboxed worker (:mod:`mathref.grade.worker`). :func:`grade_folder` does this
for a whole folder, several at a time."""
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

from mathref.grade.collect import (MAX_SUBMISSION_BYTES, _one_line, _submissions, find_solution,
                                   load_assignment, read_submission, report_safe, student_name)

_PACKAGE = Path(__file__).resolve().parents[1]          # .../mathref


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
    argv = sandbox.trusted([sandbox.python(), "-m", "mathref.grade.verify", str(job_file),
                            str(result_file)])
    process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
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
