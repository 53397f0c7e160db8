"""Grading the submissions: each is executed in the sandbox for the record
(:mod:`mathref.grade.record`), its solution cells are read on the trusted side
(:mod:`mathref.grade.policy`), and its exercises are verified one by one by the trusted
verifier (:mod:`mathref.grade.verify`), which runs the checkers in a sandbox of its own and
calls the student's functions in another, the worker (:mod:`mathref.grade.worker`), through two
pipes. :func:`grade_folder` does this for a whole folder, several at a time."""
import hashlib
import json
import os
import secrets
import select
import shutil
import subprocess
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import nbformat

from mathref.grade.collect import (MAX_SUBMISSION_BYTES, VERDICTS, _one_line, _submissions,
                                   file_label, find_solution, load_assignment, read_submission,
                                   report_safe, student_name)

_PACKAGE = Path(__file__).resolve().parents[1]          # .../mathref


# A solution cell left exactly as handed out: its verdict is known without running it.
NOT_ATTEMPTED = ("not attempted yet: the solution cell is the handed-out stub, unchanged (it "
                 "raises NotImplementedError)")

# the checker machinery the student's process runs (the rules and the gate on what runs, and each
# exercise's allowance); no checker, no oracle
_STUDENT_CHECK_FILES = {"core.py", "gate.py", "allowances.py"}
_STUDENT_CHECKS = '''"""No checkers here: they stay with the grader, which runs them outside this sandbox."""
from mathref.checks.core import CHECKS, CheckFailure, ExerciseCheckFailed, exercise  # noqa: F401


def __getattr__(name):
    if not name.startswith("check_"):
        raise AttributeError(name)

    def check(*args, **kwargs):
        print(f"({name[6:].replace('_', '-')}: checked by the grader, not here)")
    return check
'''


class _Session:
    """What a grading run shares: the temporary root, the two snapshots of mathref (``lib``
    with the checkers, for the verifier; ``student_lib`` without them, for the students'
    code), the run's secret seed, and the options."""

    def __init__(self, assignment, timeout=120, exercise_timeout=60, execute=True, limits=None,
                 unsafe=False):
        self.assignment = assignment
        self.timeout, self.exercise_timeout, self.execute = timeout, exercise_timeout, execute
        self.limits = limits or {}
        self.unsafe = unsafe
        self.seed = secrets.randbits(63)       # fresh inputs for this run's checkers
        self.root = Path(tempfile.mkdtemp(prefix="mathref-grade-"))
        os.chmod(self.root, 0o711)
        self.lib = self.root / "lib"
        self.student_lib = self.root / "student-lib"
        self._copy()
        self.digest = self._digest()
        self.counter = 0
        self.lock = threading.Lock()

    def _copy(self):
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(_PACKAGE, self.lib / "mathref", ignore=ignore)
        shutil.copytree(_PACKAGE, self.student_lib / "mathref",
                        ignore=lambda folder, names: ignore(folder, names) | (
                            {n for n in names if n not in _STUDENT_CHECK_FILES}
                            if Path(folder).name == "checks" else set()))
        (self.student_lib / "mathref" / "checks" / "__init__.py").write_text(
            _STUDENT_CHECKS, encoding="utf-8")
        for lib in (self.lib, self.student_lib):
            for path in [lib, *lib.rglob("*")]:
                os.chmod(path, 0o755 if path.is_dir() else 0o644)

    def _digest(self):
        """Every entry of both snapshots (a planted .pyc or a new file counts, not only *.py)."""
        h = hashlib.sha256()
        for lib in (self.lib, self.student_lib):
            for path in sorted(lib.rglob("*")):
                h.update(str(path).encode() + (b"<link>" if path.is_symlink() else
                                               b"<dir>" if path.is_dir() else path.read_bytes()))
        return h.hexdigest()

    def intact(self):
        """Whether the snapshots are unchanged; if not, restore them (and say so)."""
        if self._digest() == self.digest:
            return True
        shutil.rmtree(self.lib, ignore_errors=True)
        shutil.rmtree(self.student_lib, ignore_errors=True)
        self._copy()
        return False

    def workdir(self):
        with self.lock:
            self.counter += 1
            path = self.root / f"s{self.counter}"
        path.mkdir(mode=0o700)
        return path

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)



def _read_until(fd, deadline, cap, on_line=None):
    """What ``fd`` gives until it closes, the deadline or ``cap`` bytes; (data, closed).
    With ``on_line``, complete lines are handed to it as they come."""
    chunks, size, buffer = [], 0, b""
    while size <= cap:
        left = deadline - time.monotonic()
        ready = select.select([fd], [], [], max(0.0, left))[0] if left > 0 else []
        if not ready:
            return b"".join(chunks), False
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks), True
        size += len(chunk)
        if on_line is None:
            chunks.append(chunk)
            continue
        *lines, buffer = (buffer + chunk).split(b"\n")
        for line in lines:
            on_line(line)
    return b"".join(chunks), False


def _record(session, workdir, nb, group):
    """Execute the notebook for the record in the sandbox: (status, detail, executed notebook
    text or None). The notebook goes in on stdin, the record comes back on stdout."""
    from mathref.grade import sandbox
    argv, options = sandbox.command(
        [sandbox.python(), "-m", "mathref.grade.record", str(session.timeout)],
        session.student_lib, workdir, limits=session.limits, unsafe=session.unsafe, group=group)
    submission = workdir / "submission.ipynb"
    submission.write_text(nbformat.writes(nb), encoding="utf-8")
    with open(submission, "rb") as stdin:
        process = subprocess.Popen(argv, stdin=stdin, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, **options)
    try:
        data, finished = _read_until(process.stdout.fileno(),
                                     time.monotonic() + session.timeout + 30,
                                     4 * MAX_SUBMISSION_BYTES)
    finally:
        sandbox.kill_group(process)
        process.stdout.close()
    info = {}
    if finished:
        try:
            info = json.loads(data)
        except ValueError:
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
    executed = info.get("notebook")
    return status, detail, executed if isinstance(executed, str) else None


def _keep_executed(text, folder, student):
    """Write the executed notebook to ``folder``, under a file name made from the student's row
    (never a path: :func:`~mathref.grade.collect.file_label`), readable by the grader's user
    only, never over another file."""
    stem = file_label(student)
    for n in range(1, 100):
        name = f"{stem}.ipynb" if n == 1 else f"{stem}-{n}.ipynb"
        try:
            fd = os.open(Path(folder) / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL
                         | getattr(os, "O_NOFOLLOW", 0), 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        return


def _verify(session, workdir, nb, group=None):
    """{label: (verdict, message)}: the trusted verifier's, each exercise against a worker of its
    own (nothing an earlier solution cell leaves in a library's dicts or lists reaches a later
    one); the solution cells the policy refuses are never run."""
    from mathref.checks import CHECKS
    from mathref.grade import policy
    modules = policy.imported_names(session.assignment["setup"])
    setup = policy.module_bindings(session.assignment["setup"])
    exercises, verdicts = [], {}
    for ordinal, exercise in enumerate(session.assignment["exercises"]):
        solution = find_solution(nb, exercise["names"], ordinal)
        if solution is not None and exercise.get("stub") is not None \
                and solution.strip() == exercise["stub"].strip():
            verdicts[exercise["label"]] = ("not attempted", NOT_ATTEMPTED)  # nothing to run
            continue
        try:
            refused = getattr(CHECKS.get(exercise["label"]), "refused_modules", ())
            policy.check(solution or "", modules, refused, setup)
        except policy.Refused as refused:   # read here, on the trusted side: never run
            verdicts[exercise["label"]] = ("fail", f"refused before running: {refused}")
            continue
        exercises.append({"label": exercise["label"], "number": ordinal,
                          "checker": exercise["checker"], "check": exercise["check"],
                          "solution": solution,
                          "why": "no solution cell defining " + ", ".join(exercise["names"])})
    while exercises:    # a verifier that died or ran out of time: a fresh one for the rest
        verdicts.update(_verify_some(session, workdir, exercises, group))
        if exercises[0]["label"] not in verdicts:     # the one it was on when it ended
            verdicts[exercises[0]["label"]] = ("error", "grader: the verification failed")
        exercises = [e for e in exercises if e["label"] not in verdicts]
    return verdicts


def _verify_some(session, workdir, exercises, group):
    """One verifier in its own sandbox and, for each exercise, a worker in another, joined to it
    by a pair of pipes of its own; a worker is started one exercise ahead and killed when its
    exercise's verdict comes. The verdicts the verifier wrote before it ended or its time ran
    out."""
    from mathref.grade import sandbox
    job_dir = Path(str(workdir) + ".job")
    job_dir.mkdir(mode=0o755)
    exercises = [dict(e) for e in exercises]
    fds, pending, workers, verdicts = [], [], {}, {}

    def pipe():
        r, w = os.pipe()
        fds.extend((r, w))
        return r, w

    for exercise in exercises:
        if exercise["solution"] is None:
            continue
        to_worker, from_worker = pipe(), pipe()
        exercise["channel"] = [from_worker[0], to_worker[1]]        # the verifier's ends
        pending.append((exercise["label"], (to_worker[0], from_worker[1])))
    out_r, out_w = pipe()
    job = {"setup": session.assignment["setup"], "dtype": session.assignment["dtype"],
           "exercises": exercises,
           "exercise_timeout": session.exercise_timeout, "seed": session.seed}
    (job_dir / "job.json").write_text(json.dumps(job), encoding="utf-8")
    os.chmod(job_dir / "job.json", 0o644)
    processes = []

    def start_workers():
        while pending and len(workers) < 2:
            label, ends = pending.pop(0)
            argv, options = sandbox.command(
                [sandbox.python(), "-m", "mathref.grade.worker", *map(str, ends)],
                session.student_lib, workdir, limits=session.limits, unsafe=session.unsafe,
                group=group)
            workers[label] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, pass_fds=ends, **options)
            processes.append(workers[label])
            for fd in ends:
                fds.remove(fd)
                os.close(fd)

    def on_line(line):
        try:
            label, verdict, message = json.loads(line)
        except (ValueError, TypeError):
            return
        if label in {e["label"] for e in exercises} and verdict in VERDICTS \
                and label not in verdicts:
            verdicts[label] = (verdict, str(message)[:2000])
            if label in workers:
                sandbox.kill_group(workers.pop(label))
            start_workers()

    try:
        start_workers()
        ends = [fd for e in exercises for fd in e.get("channel", ())] + [out_w]
        argv, options = sandbox.command(
            [sandbox.python(), "-m", "mathref.grade.verify", str(job_dir / "job.json"),
             str(out_w)],
            session.lib, job_dir, readable=[job_dir], limits=sandbox.VERIFIER_LIMITS,
            unsafe=session.unsafe)
        processes.append(subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=ends, **options))
        for fd in ends:
            fds.remove(fd)
            os.close(fd)
        wall = (len(exercises) + 1) * session.exercise_timeout + 60
        _read_until(out_r, time.monotonic() + wall, 2 ** 22, on_line)
        return verdicts
    finally:
        for fd in fds:
            os.close(fd)
        for process in processes:
            sandbox.kill_group(process)
        shutil.rmtree(job_dir, ignore_errors=True)



def _grade_submission(path, session, executed_dir=None, student=None, flag=""):
    """Grade one file; return a dict with ``student`` (the row's name: ``student`` or the file's
    normalized name), ``file``, ``status``, ``detail``, ``flag`` (e.g. a name clash),
    ``verdicts`` ({label: (verdict, message)}), ``score`` and ``seconds``."""
    from mathref.grade import sandbox
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
        group = sandbox.memory_group(workdir.parent.name + "-" + workdir.name,
                                     session.limits.get("memory", sandbox.DEFAULT_LIMITS["memory"]))
        try:
            if session.execute:
                status, detail, executed = _record(session, workdir, nb, group)
                result.update(status=status, detail=detail)
                if executed is not None and executed_dir is not None:
                    _keep_executed(executed, Path(executed_dir) / "pending", result["student"])
            result["verdicts"] = _verify(session, workdir, nb, group)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
            sandbox.remove_memory_group(group)
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
                 log=None, progress=None, executed_dir=None, limits=None,
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
    # row of its own naming its file, and flagged; none keeps the plain name: which file is
    # "already spelled" so depends on how the platform wrote it (NFC or NFD, the grader's fifth
    # attack, H4: an NFC name took the plain row of an NFD classmate)
    to_grade = []
    for name, group in by_name.items():
        for f in group:
            if len(group) == 1:
                to_grade.append((f, name, ""))
                continue
            row = f"{name} [name clash: {report_safe(f.name)}]"
            to_grade.append((f, row, f"name clash: {len(group)} files normalize to {name!r}: "
                                     + ", ".join(report_safe(g.name) for g in group)))
    session = _Session(assignment, timeout=timeout, exercise_timeout=exercise_timeout,
                       execute=execute, limits=limits, unsafe=unsafe)
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
            (Path(executed_dir) / "pending").mkdir(mode=0o700, parents=True, exist_ok=True)
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
