"""`python -m mathref.grade`: verdicts from the grader, never from the submission.

The submissions are built here, from the grader's self-test assignment
(:mod:`mathref.grade.selftest`, three small exercises) and, for one test, from chapter 1's
notebook (its reference solutions and its student version), so nothing depends on a chapter's
exact exercises. ``tests/grade_hostile.py`` makes one submission per cheat and attack of issues
15 and 33; issue 33's findings are tested here through the CLI (the escape through ch13's
modules and its NaN answer, the memory and disk totals, the worker patch in every all-shortcuts
chapter, the frame read, lookup table, traversal names and file-system read in the hostile
folder) and piece by piece in tests/test_grade_boundary.py (the channel, the decoding budget,
the policy).
"""
import csv
import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

import nbformat
import pytest
import torch

from mathref.grade import (check_calls, csv_safe, find_solution, grade_folder,
                           load_assignment, read_submission, report_safe, student_name)
from mathref.grade.selftest import LABELS, selftest_assignment
from mathref.student import make_student_notebook
from tests.grade_hostile import make_hostile_folder
from tests.notebooks import NOTEBOOKS, ROOT, exercise_labels, read


def grade_cli(*args, env=None, **options):
    """Run ``python -m mathref.grade`` with this checkout's mathref."""
    env = dict(os.environ if env is None else env, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "mathref.grade", *map(str, args)],
                          capture_output=True, text=True, env=env, **options)


def digest(folder):
    """{name: sha256} of every entry of a folder (links not followed)."""
    out = {}
    for p in sorted(Path(folder).iterdir()):
        out[p.name] = ("link" if p.is_symlink() else "dir" if p.is_dir()
                       else hashlib.sha256(p.read_bytes()).hexdigest())
    return out


ALL = ["pass"] * 3
NONE = ["not attempted"] * 3
INVALID = ["not run"] * 3
REST = ["not attempted"] * 2
REFUSED = ["fail"] + REST    # refused before running (tests/test_grade_policy.py), or wrong
EXPECTED = {   # student: (status, score, verdicts of selftest-square, -descent, -grad)
    "'=HYPERLINK(\"x.example\",\"y\")": ("ok", 3, ALL),   # a formula neutralised
    "ada": ("ok", 3, ALL),
    "ben": ("ok", 0, NONE),
    "binary": ("invalid notebook", 0, INVALID),
    "copier": ("ok", 0, REFUSED),           # cannot see the others' files
    "deep": ("invalid notebook", 0, INVALID),               # 100,000 "[": no crash
    "dunder": ("ok", 0, REFUSED),           # issue 33: dunders, computed getattr
    "empty": ("invalid notebook", 0, INVALID),
    "envreader": ("ok", 0, REFUSED),        # "no secret seen"
    "escaper": ("ok", 0, REFUSED),          # issue 33, finding 1: a frame's builtins
    "esc?[31mred": ("ok", 0, NONE),                         # escape code shown as ?
    "framereader": ("ok", 0, REFUSED),      # issue 33, finding 1: the checker's frame
    "implant": ("ok", 0, REFUSED),          # checkers read-only
    "inventor": ("ok", 0, NONE),                            # ch99-bonus counts for nothing
    "kbint": ("ok", 0, ["fail"] + REST),    # printed line + KeyboardInterrupt
    "killer": ("kernel died", 0, REFUSED),  # the run goes on
    "lookup": ("ok", 0, ["fail"] + REST),   # issue 33, finding 3: fresh inputs each run
    "looper": ("ok", 0, ["timeout"] + REST),
    "lurker": ("ok", 0, REFUSED),           # its background job dies with it
    "new?line: 3 of 3": ("ok", 0, NONE),                    # no forged report line
    "notnb": ("invalid notebook", 0, INVALID),
    "patcher": ("ok", 0, REFUSED),          # no-op expect, replaced checker
    "printer": ("ok", 0, NONE),                             # printed "passed" line
    "reader": ("ok", 0, REFUSED),           # issue 33, finding 5: nothing to read
    "skiptag": ("ok", 0, NONE),                             # skip-execution + stored output
    "trunc": ("invalid notebook", 0, INVALID),
    "tryexcept": ("ok", 0, NONE),                           # try/except around the check
    "vandal": ("ok", 0, REFUSED),           # cannot touch the others' files
    "workerpatch": ("ok", 0, REFUSED),      # issue 33, finding 2: the rules stay on
    # zoe.ipynb and ｚｏｅ.ipynb are one name after NFKC: both graded, both flagged
    "zoe [name clash: zoe.ipynb]": ("ok", 0, NONE),
    "zoe [name clash: \uff5a\uff4f\uff45.ipynb]": ("ok", 3, ALL),
}


def _lookup_table():
    """The answers to selftest-square's inputs when its generator is the fixed default: what a
    submission could record offline and hand in as a table."""
    from mathref.grade.selftest import CHECKS
    table = {}

    def record(x):
        key = tuple(x.tolist()) if isinstance(x, torch.Tensor) else x
        table[key] = (x * x).tolist() if isinstance(x, torch.Tensor) else x * x
        return x * x
    CHECKS["selftest-square"](record)
    return table


def test_every_cheat_and_attack_fails_and_harms_no_one(tmp_path):
    """The whole CLI (main: grade_folder, then write_csv and format_report) on a hostile folder,
    each submission also executed for the record (where its code runs unread by the policy, in
    the sandbox only)."""
    from mathref.grade import sandbox
    from mathref.grade.selftest import CHECKS
    assert sandbox.bwrap_works(), ("the grader's sandbox needs bubblewrap: apt-get install "
                                   "bubblewrap (without it, plain limits only: see the guide)")
    folder, out, report = tmp_path / "subs", tmp_path / "grades.csv", tmp_path / "report.txt"
    previous = tmp_path / "previous-run"       # another run's executed notebooks
    previous.mkdir()
    nbformat.write(selftest_assignment(), previous / "carol.ipynb")
    os.chmod(previous / "carol.ipynb", 0o644)
    table = _lookup_table()
    make_hostile_folder(folder, selftest_assignment(), outputs=[out, report], repos=[ROOT],
                        readable=[ROOT / "notebooks", previous], lookup=table)
    # the table answers the fixed inputs: in the notebook (default generator) it passes
    namespace = {}
    lookup_source = next(c.source for c in nbformat.read(folder / "lookup.ipynb", 4).cells
                         if "TABLE" in c.source)
    exec(lookup_source, namespace)  # noqa: S102 - the test's own submission
    CHECKS["selftest-square"](namespace["square"])
    assignment = tmp_path / "assignment.ipynb"
    nbformat.write(selftest_assignment(solved=False), assignment)
    before, checks_before = digest(folder), digest(ROOT / "mathref" / "checks")
    notebooks_before = digest(ROOT / "notebooks")
    env = dict(os.environ, GRADER_SECRET="s3cret", HTTPS_PROXY="http://proxy.invalid:1")
    executed = tmp_path / "executed"
    run = grade_cli(folder, "--assignment", assignment, "--out", out, "--report", report,
                    "--executed", executed, "--timeout", "120", "--jobs", "2",
                    "--exercise-timeout", "30", env=env, timeout=2400, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", "status", "score"] + LABELS
    got = {r[0]: (r[1], int(r[2]), r[3:]) for r in rows[1:]}
    assert got == EXPECTED, run.stdout
    # nothing was written, deleted or added in the submissions, the checkers, the notebooks
    assert digest(folder) == before
    assert digest(ROOT / "mathref" / "checks") == checks_before
    assert digest(ROOT / "notebooks") == notebooks_before
    # outputs: written once, atomically; the lurker's late write never comes
    text = report.read_text(encoding="utf-8")
    assert text == run.stdout.split("Wrote ")[0]
    csv_text = out.read_text(encoding="utf-8")
    time.sleep(6)
    assert out.read_text(encoding="utf-8") == csv_text and "lurker,ok,99" not in csv_text
    assert report.read_text(encoding="utf-8") == text
    assert not (tmp_path / "grades.csv.partial.jsonl").exists()
    # executed notebooks: one per graded row, under a label that is never a path, 0600
    kept = sorted(p.name for p in executed.iterdir())
    assert all(re.fullmatch(r"[A-Za-z0-9_-]+\.ipynb", name) for name in kept), kept
    assert all(stat.S_IMODE((executed / n).stat().st_mode) == 0o600 for n in kept)
    assert "ada.ipynb" in kept and "reader.ipynb" in kept
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["subs", "grades.csv", "report.txt", "previous-run", "assignment.ipynb", "executed"])
    # the reader, run for the record, saw neither the notebooks nor the other run's outputs
    outputs = [o.get("text", "") for c in nbformat.read(executed / "reader.ipynb", 4).cells
               if c.cell_type == "code" for o in c.outputs]
    assert "SEEN []\n" in outputs, outputs
    # the report: one line per student, no control characters, the skipped files listed
    assert not [ch for ch in text if unicodedata.category(ch) == "Cc" and ch != "\n"]
    assert "ada: 3/3" in text.splitlines() and "new?line: 3 of 3: 0/3" in text.splitlines()
    assert ("Skipped (not <student>.ipynb): .hidden.ipynb (hidden), extra/ (a folder), "
            "link.ipynb (a link), notes.txt (not .ipynb)") in text
    assert text.count("(a name that becomes a path after Unicode normalization)") == 2
    assert "Isolation: bubblewrap sandbox" in text and not text.startswith("UNSAFE")
    assert "[FLAGGED: name clash: 2 files normalize to 'zoe'" in text
    assert "workerpatch: 0/3" in text and "refused before running: line 1:" in text


def test_reference_solutions_pass_and_the_student_notebook_is_not_attempted(tmp_path):
    """Generic over chapter 1's exercises, whatever they are. A solution cell left exactly as
    handed out is marked not attempted on the trusted side, without a worker; one changed in
    any way (here a comment) runs, and its NotImplementedError says the same. Where the
    assignment is the reference notebook there is no stub: a copy of a solution is graded."""
    from mathref.grade.execute import NOT_ATTEMPTED
    source = read(NOTEBOOKS[0])
    student = make_student_notebook(source)
    labels = exercise_labels(student)
    assert [label for _, label in check_calls(student)] == labels
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(source, folder / "ref.ipynb")
    nbformat.write(student, folder / "stu.ipynb")
    touched = nbformat.from_dict(student)
    for cell in touched.cells:
        if "solution" in cell.metadata.get("tags", []):
            cell.source = "# my turn\n" + cell.source
    nbformat.write(touched, folder / "touched.ipynb")
    nbformat.write(student, tmp_path / "assignment.ipynb")
    assert all(e["stub"] is None for e in load_assignment(NOTEBOOKS[0])["exercises"])
    assert all("raise NotImplementedError()" in e["stub"]
               for e in load_assignment(tmp_path / "assignment.ipynb")["exercises"])
    results, got_labels, skipped = grade_folder(folder, tmp_path / "assignment.ipynb",
                                                exercise_timeout=120, execute=False, jobs=2)
    assert got_labels == labels and skipped == []
    by = {r["student"]: r for r in results}
    assert {label: v for label, (v, _) in by["ref"]["verdicts"].items()} == \
        {label: "pass" for label in labels}, by["ref"]["verdicts"]
    assert set(by["stu"]["verdicts"].values()) == {("not attempted", NOT_ATTEMPTED)}
    assert {v for v, _ in by["touched"]["verdicts"].values()} == {"not attempted"}
    assert all("still raises NotImplementedError" in message
               for _, message in by["touched"]["verdicts"].values()), by["touched"]


def test_execution_for_the_record_has_a_real_wall_clock_limit_and_ignores_skip_tags(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    solved = selftest_assignment()
    sleepy = nbformat.from_dict(solved)
    sleepy.cells += [nbformat.v4.new_code_cell("import time\ntime.sleep(0.9)")
                     for _ in range(60)]
    nbformat.write(sleepy, folder / "sleepy.ipynb")
    noisy = nbformat.from_dict(solved)
    noisy.cells.insert(2, nbformat.v4.new_code_cell("for i in range(2 * 10**4):\n    print(i)"))
    skip = nbformat.v4.new_code_cell("1 / 0")
    skip.metadata["tags"] = ["skip-execution", "raises-exception"]
    noisy.cells.append(skip)
    nbformat.write(noisy, folder / "noisy.ipynb")
    nbformat.write(selftest_assignment(False), tmp_path / "assignment.ipynb")
    executed = tmp_path / "executed"
    start = time.monotonic()
    results, _, _ = grade_folder(folder, tmp_path / "assignment.ipynb", timeout=30,
                                 exercise_timeout=120, execute=True, executed_dir=executed)
    by = {r["student"]: r for r in results}
    assert by["sleepy"]["status"] == "timeout", by["sleepy"]
    assert by["sleepy"]["score"] == 3          # the verdicts do not depend on the record
    assert by["noisy"]["status"] == "ok", by["noisy"]
    assert time.monotonic() - start < 600
    nb = nbformat.read(executed / "pending" / "noisy.ipynb", as_version=4)
    assert sum(len(str(o)) for o in nb.cells[2].outputs) < 30_000   # output capped
    assert nb.cells[-1].outputs[0]["ename"] == "ZeroDivisionError"   # the skip tag ignored


@pytest.mark.parametrize("name, shown", [("ada.ipynb", "ada"), ("ｚｏｅ.ipynb", "zoe"),
                                         ("a\nb.ipynb", "a?b"), ("x\x1b[2J.ipynb", "x?[2J"),
                                         ("r\u202eevil.ipynb", "r?evil")])
def test_student_names_are_normalized_and_have_no_control_characters(name, shown):
    assert student_name(name) == shown


@pytest.mark.parametrize("text, safe", [("=1+1", "'=1+1"), ("+x", "'+x"), ("-2", "'-2"),
                                        ("@a", "'@a"), ("ada", "ada"), ("a=b", "a=b")])
def test_csv_cells_are_never_formulas(text, safe):
    assert csv_safe(text) == safe
    assert report_safe("a\x07b\u200bc") == "a?b?c"


@pytest.mark.parametrize("text, why", [(b"", "not valid JSON"), (b"{not json", "not valid JSON"),
                                        (b"[" * 100_000, "nested too deeply"),
                                        (bytes(range(256)), "not valid UTF-8"),
                                        (b'{"cells": 3, "nbformat": 4, "nbformat_minor": 5, '
                                         b'"metadata": {}}', "not a valid Jupyter notebook")])
def test_read_submission_says_why_a_file_is_not_a_notebook(tmp_path, text, why):
    path = tmp_path / "x.ipynb"
    path.write_bytes(text)
    with pytest.raises(ValueError, match=why):
        read_submission(path)


def test_the_assignment_gives_labels_check_calls_and_solution_names(tmp_path):
    path = tmp_path / "a.ipynb"
    nbformat.write(selftest_assignment(False), path)
    assignment = load_assignment(path)
    assert [e["label"] for e in assignment["exercises"]] == LABELS
    assert [e["names"] for e in assignment["exercises"]] == [["square"], ["descend"],
                                                              ["grad_of_sum_of_squares"]]
    assert assignment["dtype"] == "float32"
    # the default dtype in force at the first check cell: chapter 6 sets float64
    assert load_assignment(ROOT / "notebooks" / "06_optimizers.ipynb")["dtype"] == "float64"
    assert load_assignment(ROOT / "notebooks" / "05_losses.ipynb")["dtype"] == "float32"
    nb = selftest_assignment()
    assert find_solution(nb, ["descend"], 1).startswith("def descend(")
    nb.cells = [c for c in nb.cells if "def descend" not in c.source]
    assert find_solution(nb, ["descend"], 5) is None


def test_cli_needs_an_assignment_and_a_non_empty_folder(tmp_path):
    nbformat.write(selftest_assignment(False), tmp_path / "a.ipynb")
    run = grade_cli(tmp_path / "subs" if False else tmp_path, cwd=tmp_path)
    assert run.returncode == 2 and "--assignment" in run.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    run = grade_cli(empty, "--assignment", tmp_path / "a.ipynb", cwd=tmp_path)
    assert run.returncode == 2 and "no <student>.ipynb files" in run.stderr
    assert not (tmp_path / "grades.csv").exists()


def _one_submission(tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(selftest_assignment(), folder / "ada.ipynb")
    nbformat.write(selftest_assignment(False), tmp_path / "assignment.ipynb")
    return folder


def test_without_a_sandbox_the_grader_refuses_unless_told_unsafe(tmp_path):
    """No bubblewrap on PATH: no grading, and the message says how to get the sandbox."""
    folder = _one_submission(tmp_path)
    env = dict(os.environ, PATH=str(tmp_path / "no-bin"))     # bwrap cannot be found
    args = [folder, "--assignment", tmp_path / "assignment.ipynb", "--no-execute",
            "--out", tmp_path / "grades.csv"]
    run = grade_cli(*args, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 2, run.stdout + run.stderr
    assert "refusing to grade" in run.stderr and "apt-get install bubblewrap" in run.stderr
    assert "--unsafe" in run.stderr and not (tmp_path / "grades.csv").exists()
    # grade_folder itself fails closed too (a script that skips the CLI)
    direct = subprocess.run(
        [sys.executable, "-c", "from mathref.grade import grade_folder\n"
         f"grade_folder({str(folder)!r}, {str(tmp_path / 'assignment.ipynb')!r}, execute=False)"],
        env=dict(env, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=600)
    assert direct.returncode != 0 and "SandboxUnavailable" in direct.stderr, direct.stderr
    run = grade_cli(*args, "--unsafe", env=env, cwd=tmp_path, timeout=600)
    if os.geteuid() == 0 and "nobody cannot run this Python" in run.stderr:
        # as root, where the user nobody cannot run this interpreter, even --unsafe refuses:
        # students' code would otherwise run as root
        assert run.returncode == 2 and "refusing even with --unsafe" in run.stderr
    else:
        assert run.returncode == 0, run.stderr
        report = run.stdout
        assert report.startswith("UNSAFE: no sandbox (--unsafe)"), report
        assert "ada: 3/3" in report.splitlines()


def test_sandboxed_code_never_runs_as_root_and_sees_only_what_it_needs(tmp_path):
    """Issue 33, finding 5: the sandbox has no `/`: not the course's notebooks (the reference
    solutions), not another folder, not /etc/shadow; its work folder is its own tmpfs."""
    from mathref.grade import sandbox
    workdir, other = tmp_path / "work", tmp_path / "other"
    workdir.mkdir()
    other.mkdir()
    (other / "secret.txt").write_text("another student's work")
    probe = ("import os, json\n"
             "def can(f):\n    try:\n        open(f).read(); return True\n"
             "    except OSError:\n        return False\n"
             f"print(json.dumps({{'uid': os.getuid(), 'euid': os.geteuid(), "
             f"'shadow': can('/etc/shadow'), 'other': can({str(other / 'secret.txt')!r}), "
             f"'notebook': can({str(NOTEBOOKS[0])!r}), 'cwd': os.getcwd(), "
             f"'checks': os.path.exists({str(ROOT / 'mathref' / 'checks' / 'ch01.py')!r})}}))\n")
    from mathref.grade import load_assignment
    from mathref.grade.execute import _Session
    nbformat.write(selftest_assignment(False), tmp_path / "a.ipynb")
    session = _Session(load_assignment(tmp_path / "a.ipynb"))
    try:   # what the grader gives a submission: its snapshot of mathref without checkers
        argv, options = sandbox.command([sandbox.python(), "-c", probe], session.student_lib,
                                        workdir)
        run = subprocess.run(argv, capture_output=True, text=True, timeout=120, **options)
    finally:
        session.close()
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    assert seen["uid"] != 0 and seen["euid"] != 0, seen
    assert not seen["shadow"] and not seen["other"] and not seen["notebook"], seen
    assert seen["cwd"] == sandbox.WORK, seen


def test_a_sandbox_that_takes_every_process_slot_leaves_another_sandbox_its_own(tmp_path):
    """Issue 33's red team, H5 (and F1): every sandbox ran as the one uid nobody, whose process
    count RLIMIT_NPROC limits machine-wide, so with --jobs 2 a submission that kept forking
    starved a classmate's sandbox and its right answer scored 0. As root each sandbox now has a
    uid of its own (its keyring too). A grader that is not root runs every sandbox as its own user
    in a user namespace, where the kernel counts that one user: the limitation is stated here."""
    from mathref.grade import sandbox
    hog = ("import os, sys, time\n"
           "n = 0\n"
           "try:\n"
           "    while True:\n"
           "        if os.fork() == 0:\n"
           "            time.sleep(60)\n"
           "            os._exit(0)\n"
           "        n += 1\n"
           "except OSError:\n"
           "    pass\n"
           "print(os.getuid(), n, flush=True)\n"
           "sys.stdin.readline()\n")
    other = ("import os, time\n"
             "pids = []\n"
             "for _ in range(10):\n"
             "    pid = os.fork()\n"
             "    if pid == 0:\n"
             "        time.sleep(1)\n"
             "        os._exit(0)\n"
             "    pids.append(pid)\n"
             "for pid in pids:\n"
             "    os.waitpid(pid, 0)\n"
             "print(os.getuid(), 'forked 10', flush=True)\n")
    limits = {"nproc": 30}
    argv, options = sandbox.command([sandbox.python(), "-c", hog], ROOT, tmp_path, limits=limits)
    first = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             **options)
    try:
        uid_first, taken = map(int, first.stdout.readline().split())
        argv, options = sandbox.command([sandbox.python(), "-c", other], ROOT, tmp_path,
                                        limits=limits)
        run = subprocess.run(argv, capture_output=True, text=True, timeout=60, **options)
    finally:
        sandbox.kill_group(first)
    if os.geteuid() == 0:
        assert 20 <= taken < 30, taken                   # the first sandbox took its slots ...
        assert run.returncode == 0 and "forked 10" in run.stdout, run.stderr   # ... not the other's
        uid_second = int(run.stdout.split()[0])
        assert uid_first != uid_second, (uid_first, uid_second)
        assert {uid_first, uid_second} <= set(sandbox.SANDBOX_UIDS)
    else:
        assert uid_first == os.getuid()


def test_the_trusted_verifier_runs_under_its_own_memory_limit(tmp_path):
    from mathref.grade import sandbox
    probe = "import os, resource; print(resource.getrlimit(resource.RLIMIT_AS)[0], os.geteuid())"
    argv, options = sandbox.command([sandbox.python(), "-c", probe], ROOT, tmp_path,
                                    limits=sandbox.VERIFIER_LIMITS)
    run = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=True, **options)
    limit, euid = map(int, run.stdout.split())
    assert limit == sandbox.VERIFIER_LIMITS["as"] == 4 * 2 ** 30 and euid != 0


def test_the_verifier_refuses_a_forged_expanded_tensor(monkeypatch):
    """A 1.5 KB message carrying a stride-0 view of 10^10 elements (an 'expand' of a tiny
    storage): the trusted side refuses it at decoding, before any arithmetic materializes it."""
    import io

    from mathref.grade import rpc
    huge = torch.zeros(1).expand(100_000, 100_000)
    buffer = io.BytesIO()
    torch.save({"kind": "reply", "value": ("T", huge, False)}, buffer)
    assert len(buffer.getvalue()) < 4096
    loaded = torch.load(io.BytesIO(buffer.getvalue()), weights_only=True)
    assert loaded["value"][1].stride() == (0, 0)          # the view survives the trip
    endpoint = rpc.Endpoint(None, None, trusted=True)
    with pytest.raises(rpc.ChannelClosed, match="overlap|grader does not accept"):
        endpoint.decode(loaded["value"])
    small = torch.zeros(4).expand(3, 4)                   # overlapping even when small
    with pytest.raises(rpc.ChannelClosed, match="overlap"):
        endpoint.decode(("T", small, False))
    monkeypatch.setattr(rpc, "MAX_ELEMENTS", 100)           # real, but over the size cap
    with pytest.raises(rpc.ChannelClosed, match="grader does not accept"):
        endpoint.decode(("T", torch.zeros(101), False))
    honest = torch.arange(24.0).view(2, 3, 4).transpose(0, 2)[::2]   # a strided, honest view
    assert torch.equal(endpoint.decode(("T", honest, False)), honest)


# one chapter per kind of rule: autograd refused, optimizer internals, aten operators, torch
# built-ins and methods, modules handed to the solution as handles. All fifteen cost make test
# two minutes: GRADE_ALL_CHAPTERS=1 runs every chapter.
ALL_SHORTCUT_CHAPTERS = ([path.stem for path in NOTEBOOKS] if os.environ.get("GRADE_ALL_CHAPTERS")
                         else ["04_autodiff", "06_optimizers", "08_normalization", "11_attention",
                               "13_transformer"])


def _grade_folder_cli(folder, source, tmp_path):
    """``python -m mathref.grade`` on every notebook in ``folder`` against the student version of
    ``source`` (two jobs, no execution): the finished run and grades.csv's rows by student."""
    nbformat.write(make_student_notebook(source), tmp_path / "assignment.ipynb")
    out = tmp_path / "grades.csv"
    run = grade_cli(folder, "--assignment", tmp_path / "assignment.ipynb", "--no-execute",
                    "--jobs", "2", "--exercise-timeout", "120", "--out", out, cwd=tmp_path,
                    timeout=1200, env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    with open(out, newline="", encoding="utf-8") as f:
        return run, {r["student"]: r for r in csv.DictReader(f)}


def _section(report, student):
    """The report's lines about one student (after its ``student: k/n`` line)."""
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{student}: "))
    section = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        section.append(line)
    return section


def _attempting(source, bodies):
    """The student version of ``source`` with only the solution cells of ``bodies`` ({label:
    source}) written: a submission that attempts those exercises alone. The grader marks the
    others, still the handed-out stubs, not attempted without running them."""
    from tests.notebooks import solution_cell
    student = make_student_notebook(source)
    given = [c for c in source.cells if "solution" in c.metadata.get("tags", [])]
    stubs = [c for c in student.cells if "solution" in c.metadata.get("tags", [])]
    assert len(given) == len(stubs)
    for label, body in bodies.items():
        cell = solution_cell(source, label)
        stubs[next(i for i, c in enumerate(given) if c is cell)].source = body
    return student


def _others_not_attempted(row, attempted):
    """Every exercise of a grades.csv row other than ``attempted`` is 'not attempted'."""
    return all(verdict == "not attempted" for label, verdict in row.items()
               if label.startswith("ch") and label not in attempted)


PATCH = ("import sys\n"        # issue 33's one line that turned the worker's rules off
         "sys.modules['__main__'].WorkerEndpoint.call_local = lambda self, t, a, k: t(*a, **k)\n")


@pytest.mark.parametrize("chapter", ALL_SHORTCUT_CHAPTERS)
def test_an_all_shortcuts_notebook_scores_zero_and_the_reference_full_marks(tmp_path, chapter):
    """Through ``python -m mathref.grade`` (bubblewrap): a notebook whose every solution cell is
    the first shortcut of tests/exercises' table (a call to the mathref function or PyTorch
    built-in the exercise re-derives) scores 0, each refusal naming the call; the reference
    notebook scores full marks. The rules are applied in the worker, where the code runs."""
    from tests.notebooks import solution_cell
    from tests.test_shortcuts import REFUSALS, SHORTCUTS
    source = read(ROOT / "notebooks" / f"{chapter}.ipynb")
    labels = exercise_labels(source)
    cheat, patched = nbformat.from_dict(source), nbformat.from_dict(source)
    for label in labels:
        solution_cell(cheat, label).source = SHORTCUTS[label][0]
        solution_cell(patched, label).source = PATCH + SHORTCUTS[label][0]
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(source, folder / "reference.ipynb")
    nbformat.write(cheat, folder / "shortcuts.ipynb")
    nbformat.write(patched, folder / "patched.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["reference"]["score"] == str(len(labels)), run.stdout
    assert rows["shortcuts"]["score"] == "0", run.stdout
    for label in labels:
        assert rows["shortcuts"][label] == "fail", (label, run.stdout)
    refusals = [line for line in _section(run.stdout, "shortcuts")
                if line.startswith("  ch") and ": fail: " in line]
    assert len(refusals) == len(labels) and all(   # refused when called, or before running
        any(r in line for r in REFUSALS) or "refused before running" in line
        for line in refusals), run.stdout
    # issue 33, finding 2: the line that switched the worker's rules off is refused first
    assert rows["patched"]["score"] == "0", run.stdout
    assert sum("fail: refused before running: line 1: " in line
               for line in _section(run.stdout, "patched")) == len(labels), run.stdout


def test_ch02_least_squares_rules_are_applied_in_the_worker(tmp_path):
    """ch02-least-squares allows lstsq and pinv on the design matrix only (a forbid name with
    a condition, ``name|rows=N|dtype=D``): through the grader, X̃ᵀX̃ in float64 handed to pinv
    fails there too, with the same refusal as in the notebook. Chapter 2's sixth read (M2):
    inside the float32 call, the normal equations on a float64 copy solved by LU, and
    torch.ops.aten.linalg_lstsq on a promoted float64 copy, passed under the grader; the float32
    call's rules (a conversion refused, the factorizations under their aten names too) are
    applied in the worker: both fail there. The fourth read's P1: the SVD in ch02-ridge-svd on
    X itself only, by value, in the worker too. One grading run for all."""
    from tests.test_shortcuts import SHORTCUTS
    source = read(ROOT / "notebooks" / "02_linear_regression.ipynb")
    branch = ("import torch\n\n"
              "def solve_least_squares(X, y):\n"
              "    A = torch.cat([X, torch.ones_like(X[:, :1])], dim=1)\n"
              "    if X.dtype == torch.float32:\n"
              "{route}"
              "        return theta[:-1].float(), theta[-1].float()\n"
              "    theta = torch.linalg.lstsq(A, y[:, None]).solution[:, 0]\n"
              "    return theta[:-1], theta[-1]\n")
    attacks = {
        "gram": (next(s for s in SHORTCUTS["ch02-least-squares"] if "pinv(Xt.T @ Xt)" in s),
                 "torch.linalg.pinv on something other than the 40-row float64 matrix"),
        "lu64": (branch.format(route="        A, y = A.double(), y.double()\n"
                               "        LU, piv = torch.linalg.lu_factor(A.T @ A)\n"
                               "        theta = torch.linalg.lu_solve(LU, piv, (A.T @ y)[:, None])"
                               "[:, 0]\n"), "design matrix in X's dtype"),
        "aten64": (branch.format(route="        one = torch.ones(1, dtype=torch.float64)\n"
                                 "        theta = torch.ops.aten.linalg_lstsq(A * one, (y * one)"
                                 "[:, None])[0][:, 0]\n"), "design matrix in X's dtype")}
    folder = tmp_path / "subs"
    folder.mkdir()
    for name, (code, _) in attacks.items():
        nbformat.write(_attempting(source, {"ch02-least-squares": code}),
                       folder / f"{name}.ipynb")
    # chapter 2's seventh read, M1: a tensor subclass made when the cell runs, whose detach (run
    # when the worker sent the result) computed the refused shortcut, passed both exercises
    later = ("import torch\nimport torch.nn.functional as F\n"
             "import mathref.linear_regression as linreg\n\n"
             "class Later(torch.Tensor):\n"
             "    def keep(self, f):\n"
             "        self.f = f\n"
             "        return self\n"
             "    def detach(self):\n"
             "        return self.f()\n\n"
             "POOL = [Later(1) for k in range(200)]\n\n")
    subclass = {"ch02-steepest-descent": later + (
                    "def steepest_descent_direction(grad):\n"
                    "    return POOL.pop().keep(lambda: -F.normalize(grad.flatten(), dim=0)"
                    ".reshape(grad.shape))\n"),
                "ch02-least-squares": later + (
                    "def solve_least_squares(X, y):\n"
                    "    return tuple(POOL.pop().keep(lambda i=i: linreg.fit_least_squares(X, y)"
                    "[i]) for i in (0, 1))\n")}
    nbformat.write(_attempting(source, subclass), folder / "subclass.ipynb")
    # chapter 2's fourth read, P1: ch02-ridge-svd allowed the SVD on any matrix of X's shape,
    # and [XᵀX; 0] ([XXᵀ, 0] where N < d) or [XᵀX + λI; 0] per λ scored pass under the grader.
    # It allows the SVD of X itself only (by value, a condition ``name|equals=...`` that the
    # rule carries to the worker): the padded forms fail there, the SVD of X in float64 passes
    padded = [s for s in SHORTCUTS["ch02-ridge-svd"] if "torch.zeros(N - d, d" in s]
    assert len(padded) == 2, padded         # [XᵀX; 0] and [XᵀX + λI; 0]
    ridge = {"padgram": (padded[0], "fail"),
             "padsystem": (padded[1], "fail"),
             "svd64": ("import torch\n\n"
                       "def ridge_svd(X, y, lams):\n"
                       "    U, S, Vh = torch.linalg.svd(X.double(), full_matrices=False)\n"
                       "    w = (S * (U.T @ y.double()) / (S ** 2 + lams.double()[:, None])) @ Vh\n"
                       "    return w.to(X.dtype)\n", "pass")}
    for name, (code, _) in ridge.items():
        nbformat.write(_attempting(source, {"ch02-ridge-svd": code}), folder / f"{name}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert sorted(rows) == sorted([*attacks, "subclass", *ridge]), run.stdout
    for name, (_, verdict) in ridge.items():
        assert rows[name]["ch02-ridge-svd"] == verdict, (name, run.stdout)
        assert _others_not_attempted(rows[name], ["ch02-ridge-svd"]), (name, run.stdout)
    for name in ("padgram", "padsystem"):
        assert "torch.linalg.svd on something other than the 30×4 matrix" in "\n".join(
            _section(run.stdout, name)), (name, run.stdout)
    for name, (_, message) in attacks.items():
        assert rows[name]["ch02-least-squares"] == "fail", (name, run.stdout)
        assert _others_not_attempted(rows[name], ["ch02-least-squares"]), (name, run.stdout)
        assert message in "\n".join(_section(run.stdout, name)), (name, run.stdout)
    for label in subclass:
        assert rows["subclass"][label] == "fail", run.stdout
    assert _others_not_attempted(rows["subclass"], list(subclass)), run.stdout
    assert "\n".join(_section(run.stdout, "subclass")).count("subclass of torch.Tensor") == 2, \
        run.stdout


def test_ch14_complex_rope_passes_and_numpy_is_refused_under_the_grader(tmp_path):
    """Chapter 14's eighth read, M1: RoPE written as a complex product (chapter 12's method:
    torch.complex and torch.polar, or view_as_complex) failed ch14-rope-decode-step under the
    grader ("aten.polar") as in the notebook. Both forms pass in the worker now; with the
    rotation in complex numbers, F.scaled_dot_product_attention is still refused. L3 of the
    same read: np.exp and np.log on plain numbers passed ch14-perplexity-bpb under the grader;
    NumPy is refused there as in the notebook. The delta read's N-M1: the parts taken by
    torch.imag(z) (not z.imag) still failed under the grader ("ran torch imag"). One run."""
    from tests.exercises import ch14
    from tests.test_checks_ch14 import NUMPY_PPL_BPB
    source = read(ROOT / "notebooks" / "14_gpt.ipynb")
    rope, ppl = "ch14-rope-decode-step", "ch14-perplexity-bpb"
    bodies = {"polar": (rope, ch14.COMPLEX_ROPE_DECODE),
              "viewcomplex": (rope, ch14.VIEW_AS_COMPLEX_ROPE_DECODE),
              "imag": (rope, ch14.IMAG_ROPE_DECODE),
              "sdpa": (rope, ch14.COMPLEX_ROPE_SDPA), "numpy": (ppl, NUMPY_PPL_BPB)}
    folder = tmp_path / "subs"
    folder.mkdir()
    for name, (label, body) in bodies.items():
        nbformat.write(_attempting(source, {label: body}), folder / f"{name}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert sorted(rows) == sorted(bodies), run.stdout
    assert rows["polar"][rope] == rows["viewcomplex"][rope] == rows["imag"][rope] == "pass", \
        run.stdout
    assert rows["sdpa"][rope] == rows["numpy"][ppl] == "fail", run.stdout
    assert "scaled_dot_product_attention" in "\n".join(_section(run.stdout, "sdpa")), run.stdout
    assert "numpy" in "\n".join(_section(run.stdout, "numpy")).lower(), run.stdout
    for name, (label, _) in bodies.items():
        assert _others_not_attempted(rows[name], [label]), (name, run.stdout)


def test_the_exercise_gate_holds_in_the_worker(tmp_path):
    """The gate on what runs (an allowlist of operators, Python code judged by where it lives)
    holds under the grader as in the notebook, not only the names an exercise forbids: chapter
    1's twelfth read scored 4/4 under the grader with torch.linalg.cond (an operator outside
    ch01-best-constant-step's allowance, named nowhere) and NumPy's np.gradient stencil for
    central_difference, both refused by the notebook's check. The allowance holds there too:
    torch.trace is allowed, so 2/tr(H) gets the checker's own hint (the read's L1), not a
    refusal. One grading run."""
    source = read(ROOT / "notebooks" / "01_gradient_descent.ipynb")
    folder = tmp_path / "subs"
    folder.mkdir()
    trace = _attempting(source, {"ch01-best-constant-step": (
        "import torch\n\n"
        "def best_constant_step(H):\n"
        "    lam = torch.linalg.eigvalsh(H)\n"
        "    lo, hi = float(lam[0]), float(lam[-1])\n"
        "    return 2 / float(torch.trace(H)), (hi - lo) / (hi + lo)\n")})
    nbformat.write(trace, folder / "trace.ipynb")
    attack = _attempting(source, {"ch01-best-constant-step": (
        "import torch\n\n"
        "def best_constant_step(H):\n"
        "    k = float(torch.linalg.cond(H))\n"
        "    hi = float(torch.linalg.eigvalsh(H)[-1])\n"
        "    lo = hi / k\n"
        "    return 2 / (lo + hi), (k - 1) / (k + 1)\n"),
        "ch01-central-difference": (
        "import numpy as np\n\n"
        "def central_difference(f, x, h):\n"
        "    ys = np.array([float(f(x - h)), float(f(x)), float(f(x + h))])\n"
        "    return float(np.gradient(ys, h)[1])\n")})
    nbformat.write(attack, folder / "gate.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["gate"]["ch01-best-constant-step"] == "fail", run.stdout
    assert rows["gate"]["ch01-central-difference"] == "fail", run.stdout
    assert _others_not_attempted(rows["gate"], ["ch01-best-constant-step",
                                                "ch01-central-difference"]), run.stdout
    report = "\n".join(_section(run.stdout, "gate"))
    assert "your solution ran torch linalg_cond" in report, run.stdout
    assert "numpy" in report.lower() and report.count("your solution ran") == 2, run.stdout
    assert rows["trace"]["ch01-best-constant-step"] == "fail", run.stdout
    assert _others_not_attempted(rows["trace"], ["ch01-best-constant-step"]), run.stdout
    report = "\n".join(_section(run.stdout, "trace"))
    assert "= 2/tr(H): the trace sums all eigenvalues" in report, run.stdout
    assert "your solution ran" not in report, run.stdout


def test_f_linear_and_torch_inner_pass_the_two_layer_backward_in_the_worker(tmp_path):
    """Chapter 3's twelfth read (L3): the products of ch03-two-layer-backward written with
    F.linear and torch.inner are right answers, allowed in allowances.py as chapter 4 allows
    them; the worker's gate, built from the same file, accepts them as the notebook's check
    does. One grading run."""
    source = read(ROOT / "notebooks" / "03_neural_networks.ipynb")
    answer = _attempting(source, {"ch03-two-layer-backward": (
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "def two_layer_backward(X, Y, W1, b1, W2, b2):\n"
        "    A1 = torch.tanh(F.linear(X, W1.T, b1))\n"
        "    d2 = 2 / X.shape[0] * (F.linear(A1, W2.T, b2) - Y)\n"
        "    d1 = torch.inner(d2, W2) * (1 - A1 ** 2)\n"
        "    return d1, X.T @ d1, d1.sum(0), A1.T @ d2, d2.sum(0)\n")})
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(answer, folder / "products.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["products"]["ch03-two-layer-backward"] == "pass", run.stdout


# what H1 and H2 do once they hold exec: switch the worker's rules off, then answer with
# torch.optim.Adam itself
_UNRULED_TORCH_ADAM = (
    'ex("import sys\\nw = sys.modules[m]\\nw.WorkerEndpoint.call_local = lambda self, target, args, kwargs: target(*args, **kwargs)\\n", {"m": D + "main" + D})\n'
    'import torch\n'
    'def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):\n'
    '    p = theta.detach().clone()\n'
    '    opt = torch.optim.Adam([p], lr=lr, betas=(beta1, beta2), eps=eps)\n'
    '    self = p\n'
    '    self.grad = grad.detach().clone()\n'
    '    st = opt.state[p]\n'
    '    st["step"] = torch.tensor(float(t - 1))\n'
    '    st["exp_avg"] = m.detach().clone()\n'
    '    st["exp_avg_sq"] = v.detach().clone()\n'
    '    opt.step()\n'
    '    return p.detach(), st["exp_avg"], st["exp_avg_sq"]\n'
)

# the red team's reproducers (issue 33's follow-up): computed attribute access through
# functools.update_wrapper (H1) and a match class pattern (H2), each switching the worker's
# rules off; a decoy bound through an alias named self (H3)
RED_TEAM = {
    "h1": ("ch06-adam-step", (
        'import functools\n'
        'D = "_" * 2\n'
        'store = []\n'
        'class Grab:\n'
        '    def __setattr__(self, name, value):\n'
        '        store.append(value)\n'
        'def peek(obj, name):\n'
        '    store.clear()\n'
        '    functools.update_wrapper(Grab(), obj, assigned=(name,), updated=())\n'
        '    return store[0]\n'
        'def helper():\n'
        '    pass\n'
        'g = peek(helper, D + "globals" + D)\n'
        'b = g[D + "builtins" + D]\n'
        'ex = b["exec"] if isinstance(b, dict) else peek(b, "exec")\n'
    ) + _UNRULED_TORCH_ADAM),
    "h2": ("ch06-adam-step", (
        'D = "_" * 2\n'
        'def helper():\n'
        '    pass\n'
        'match helper:\n'
        '    case object(__globals__=g):\n'
        '        pass\n'
        'b = g[D + "builtins" + D]\n'
        'match b:\n'
        '    case dict():\n'
        '        ex = b["exec"]\n'
        '    case object(exec=e):\n'
        '        ex = e\n'
    ) + _UNRULED_TORCH_ADAM),
    "h3": ("ch06-warmup-cosine", (
        'import mathref.optim\n'
        'import functools\n'
        'real = mathref.optim.warmup_cosine\n'
        'def decoy(*a, **k):\n'
        '    return 0.0\n'
        'self = mathref.optim\n'
        'self.warmup_cosine = decoy\n'
        'def lr_at(step, warmup_steps, total_steps, lr_max, lr_min):\n'
        '    return real(step, warmup_steps, total_steps, lr_max, lr_min)\n'
    )),
}


# right answers that make tensors of Python numbers without a dtype: chapter 6 sets float64 as
# the default before its checks, so these pass in the notebook, and must under the grader too
# (chapter 6's delta read, M-a: the grader ran them under float32 and failed them)
DEFAULT_FLOAT64 = {
    "ch06-adam-step": (
        "import torch\n\n"
        "def adam_step(theta, grad, m, v, t, lr, beta1, beta2, eps):\n"
        "    m = beta1 * m + (1 - beta1) * grad\n"
        "    v = beta2 * v + (1 - beta2) * grad ** 2\n"
        "    v_hat = v / (1 - beta2 ** t)\n"
        "    theta = theta - lr * (m / (1 - beta1 ** t)) / (v_hat.sqrt() + torch.tensor(eps))\n"
        "    return theta, m, v\n"),
    "ch06-warmup-cosine": (
        "import math\n"
        "import torch\n\n"
        "def lr_at(step, warmup_steps, total_steps, lr_max, lr_min):\n"
        "    if step < warmup_steps:\n"
        "        return lr_max * (step + 1) / warmup_steps\n"
        "    if step > total_steps:\n"
        "        return lr_min\n"
        "    angle = math.pi * (step - warmup_steps) / (total_steps - warmup_steps)\n"
        "    return lr_min + 0.5 * (lr_max - lr_min) * (1 + torch.cos(torch.tensor(angle)).item())\n")}


def test_the_red_teams_reproducers_are_refused_before_running(tmp_path):
    """Red team H1-H3 through ``python -m mathref.grade``: each reproducer is refused before
    it runs, naming the construct; the submission's other exercises are graded as usual. In
    the same run, answers that rely on chapter 6's default dtype, float64, pass."""
    source = read(ROOT / "notebooks" / "06_optimizers.ipynb")
    folder = tmp_path / "subs"
    folder.mkdir()
    for name, (label, body) in RED_TEAM.items():
        nbformat.write(_attempting(source, {label: body}), folder / f"{name}.ipynb")
    nbformat.write(_attempting(source, DEFAULT_FLOAT64), folder / "float64.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    for label in DEFAULT_FLOAT64:
        assert rows["float64"][label] == "pass", run.stdout
    why = {"h1": "defining `__setattr__`", "h2": "class patterns in `match`",
           "h3": "binding the name `self`"}
    for name, (label, _) in RED_TEAM.items():
        assert rows[name][label] == "fail", (name, run.stdout)
        assert any(line.startswith(f"  {label}: fail: refused before running: line ")
                   and why[name] in line for line in _section(run.stdout, name)), run.stdout
        assert _others_not_attempted(rows[name], [label]), (name, run.stdout)


ESCAPE = '''def pre_norm_block(x, attn, ffn, norm1, norm2):
    ### BEGIN SOLUTION
    # issue 33's proof: a generator from the module, its frame's builtins, exec on the other side
    run = attn.named_modules().gi_frame.f_builtins["exec"]
    run("open('/tmp/mathref-pwned', 'w').write('1')")
    return x
    ### END SOLUTION
'''
NAN = '''def pre_norm_block(x, attn, ffn, norm1, norm2):
    ### BEGIN SOLUTION
    return x * float("nan")
    ### END SOLUTION
'''
FRACTION = '''import math
from fractions import Fraction

def swiglu_d_ff(d_model, multiple_of):
    ### BEGIN SOLUTION
    return math.ceil(Fraction(8 * d_model, 3 * multiple_of)) * multiple_of
    ### END SOLUTION
'''


@pytest.fixture(scope="module")
def ch13_attacks(tmp_path_factory):
    """One CLI run on chapter 13 (ch13-pre-norm-block passes four modules to the solution):
    the escape of issue 33's finding 1 and an answer of NaNs (finding 8), and a right answer
    to ch13-swiglu-width in exact fractions, which the exercise allows. (rows, report)."""
    tmp_path = tmp_path_factory.mktemp("ch13")
    source = read(ROOT / "notebooks" / "13_transformer.ipynb")
    folder = tmp_path / "subs"
    folder.mkdir()
    students = {"escape": ("ch13-pre-norm-block", ESCAPE), "nan": ("ch13-pre-norm-block", NAN),
                "fraction": ("ch13-swiglu-width", FRACTION)}
    for name, (label, body) in students.items():
        nbformat.write(_attempting(source, {label: body}), folder / f"{name}.ipynb")
    Path("/tmp/mathref-pwned").unlink(missing_ok=True)
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    for name, (label, _) in students.items():      # each exercise has its own verdict
        assert _others_not_attempted(rows[name], [label]), run.stdout
    return rows, run.stdout


def test_the_escape_through_the_modules_gets_no_credit_and_runs_nothing(ch13_attacks):
    """Finding 1 through the CLI: the proof-of-concept is refused before it runs (and the
    modules it was after are copies rebuilt in the worker: tests/test_grade_boundary.py);
    nothing was written by the grader's side."""
    rows, report = ch13_attacks
    assert rows["escape"]["ch13-pre-norm-block"] == "fail", report
    assert "refused before running: line 4: attribute `.gi_frame`" in report, report
    assert not Path("/tmp/mathref-pwned").exists()


def test_an_answer_of_nans_fails_the_pre_norm_block(ch13_attacks):
    """Finding 8: NaN compares False with everything, so ``if err >= 1e-10: fail`` lets it
    pass; the checker must test ``if not err < 1e-10`` (mathref/checks/ch13.py)."""
    rows, report = ch13_attacks
    assert rows["nan"]["ch13-pre-norm-block"] == "fail", report


def test_a_right_answer_in_exact_fractions_passes_the_swiglu_width(ch13_attacks):
    """Chapter 13's read of 2026-11-30, L1 (its delta read's N2): ``math.ceil(Fraction(8d, 3m))
    * m`` passed in the notebook (the exercise allows ``fractions``) and the grader's import
    policy refused it."""
    rows, report = ch13_attacks
    assert rows["fraction"]["ch13-swiglu-width"] == "pass", report


HOG = '''import subprocess, sys
children = [subprocess.Popen([sys.executable, "-c", "x = b'1' * 700_000_000\\nimport time\\ntime.sleep(4)"])
            for _ in range(3)]
print("EXIT", sorted(child.wait() for child in children))
'''
FILLER = '''written, stopped = 0, None
try:
    for i in range(6):
        with open(f"big{i}", "wb") as f:
            for _ in range(40):
                f.write(b"0" * 2 ** 20)
                f.flush()
                written += 2 ** 20
except OSError as err:
    stopped = err.errno
print("WRITTEN", written, stopped)
'''


def test_a_submission_is_capped_in_memory_and_disk_as_a_whole(tmp_path):
    """Issue 33, finding 7: three children of 700 MB each under a 1200 MiB total (a memory
    cgroup, where the grader can make one: as root here), six files of 40 MB in a work folder
    of 64 MiB (a tmpfs); the other submission is graded as usual."""
    from mathref.grade import sandbox
    folder = tmp_path / "subs"
    folder.mkdir()
    solved = selftest_assignment()
    for name, extra in (("hog", HOG), ("filler", FILLER)):
        nb = nbformat.from_dict(solved)
        nb.cells.insert(2, nbformat.v4.new_code_cell(extra))
        nbformat.write(nb, folder / f"{name}.ipynb")
    nbformat.write(solved, folder / "ada.ipynb")
    nbformat.write(selftest_assignment(False), tmp_path / "assignment.ipynb")
    executed = tmp_path / "executed"
    run = grade_cli(folder, "--assignment", tmp_path / "assignment.ipynb", "--timeout", "240",
                    "--memory", "1200", "--disk", "64", "--executed", executed,
                    "--out", tmp_path / "grades.csv", cwd=tmp_path, timeout=1200,
                    env=dict(os.environ))
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "ada: 3/3" in lines and "hog: 3/3" in lines and "filler: 3/3" in lines, run.stdout

    def printed(name, word):
        nb = nbformat.read(executed / f"{name}.ipynb", as_version=4)
        text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                       for o in c.outputs)
        return next(line.split(" ", 1)[1] for line in text.splitlines() if line.startswith(word))

    written, stopped = printed("filler", "WRITTEN").split()
    assert int(written) <= 64 * 2 ** 20 and stopped == "28", (written, stopped)   # ENOSPC
    codes = printed("hog", "EXIT")
    if sandbox.memory_group_root() is not None:
        assert "-9" in codes, codes          # the cgroup's OOM killer stopped at least one
    else:                                    # the documented fallback: per-process limits only
        assert codes == "[0, 0, 0]", codes


def test_ch16_graphs_and_the_sixth_reads_attacks_under_the_grader(tmp_path):
    """One CLI run on chapter 16: the reference, right forward passes
    whose graph is cut (the fourth read), the sixth read's attacks and right answers in other
    forms.

    Chapter 16's fourth read, F1: a remote output comes back as data without a graph, so the
    checks of chapter 16 compute the probe gradients in the student's process (a checker's
    plain function sent there, mathref.grade.rpc.apply) and compare them in the grader. Right
    forward passes with a cut or missing graph fail through the CLI; the reference passes.

    Chapter 16's sixth read: a train step whose gradients add up across steps
    (loss.backward() and p.grad, never cleared: the check's six steps now share their leaves in
    the student's process, as the payoff's loop does), a RoPE that returns float64 for a float32
    input, and a decoder whose softmax is float32 (the distributions passed to draw now come
    back from the student's process and are compared, as in the notebook) all fail, each
    message naming its cause; right answers in other forms (backward with the gradients cleared
    after use, RoPE as complex multiplication, the reference decoder) pass. The attack read's
    train step that decays by position (no decay for params[2]) fails: the check's second case
    orders the parameters another way. Right answers that use F.linear and F.one_hot pass."""
    from tests.exercises.ch16 import RIGHT_ANSWERS
    from tests.notebooks import solution_cell
    source = read(ROOT / "notebooks" / "16_build_it_yourself.ipynb")

    def edited(label, old, new):
        body = solution_cell(source, label).source
        assert old in body, label
        return body.replace(old, new)

    cut = {"ch16-rms-norm": (
        "def rms_norm(x, weight, eps=1e-5):\n"
        "    return x / torch.sqrt(x.detach().pow(2).mean(dim=-1, keepdim=True) + eps) * weight\n"),
        "ch16-swiglu": (
        "def swiglu_mlp(x, w_gate, w_up, w_down):\n"
        "    gate = x @ w_gate.T\n"
        "    return ((gate * torch.sigmoid(gate) * (x @ w_up.T)) @ w_down.T)"
        ".detach().requires_grad_()\n"),
        "ch16-attention": edited("ch16-attention", "out = torch.softmax(scores, dim=-1) @ v",
                                 "out = torch.softmax(scores, dim=-1).detach() @ v"),
        "ch16-gpt-forward": edited("ch16-gpt-forward", 'x = params["tok_emb.weight"][idx]',
                                   'x = params["tok_emb.weight"].detach()[idx]')}
    attacks = {
        "ch16-train-step": edited(
            "ch16-train-step",
            "grads, _ = parts[\"clip\"](list(torch.autograd.grad(loss, params)), cfg.grad_clip)",
            "loss.backward()\n    grads, _ = parts[\"clip\"]([p.grad for p in params], "
            "cfg.grad_clip)"),
        "ch16-rope": edited(
            "ch16-rope",
            "cos, sin = angle.cos().to(x.device, x.dtype), angle.sin().to(x.device, x.dtype)",
            "cos, sin = angle.cos(), angle.sin()"),
        "ch16-generate": edited(
            "ch16-generate", "probs = torch.softmax(last, dim=-1)",
            "probs = torch.softmax(last.float(), dim=-1).double()\n"
            "            probs = probs / probs.sum(dim=-1, keepdim=True)")}
    # chapter 16's attack read: weight decay chosen by the parameter's place, not its shape
    decay = {"ch16-train-step": edited(
        "ch16-train-step",
        "for p, g, m_i, v_i in zip(params, grads, m, v):\n"
        "            decay = cfg.weight_decay if p.dim() >= 2 else 0.0",
        "for i, (p, g, m_i, v_i) in enumerate(zip(params, grads, m, v)):\n"
        "            decay = 0.0 if i == 2 else cfg.weight_decay")}
    right = {"ch16-train-step": RIGHT_ANSWERS["ch16-train-step"][1],
             "ch16-rope": RIGHT_ANSWERS["ch16-rope"][0],
             # F.linear and F.one_hot (chapter 16's read, M1: refused before)
             "ch16-swiglu": RIGHT_ANSWERS["ch16-swiglu"][1],
             "ch16-attention": RIGHT_ANSWERS["ch16-attention"][0],
             "ch16-gpt-forward": RIGHT_ANSWERS["ch16-gpt-forward"][0],
             "ch16-generate": solution_cell(source, "ch16-generate").source}
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(source, folder / "reference.ipynb")
    for name, bodies in (("cut", cut), ("attacks", attacks), ("decay", decay),
                         ("right", right)):
        nbformat.write(_attempting(source, bodies), folder / f"{name}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["reference"]["score"] == str(len(exercise_labels(source))), run.stdout
    assert all(rows["cut"][label] == "fail" for label in cut), run.stdout
    assert _others_not_attempted(rows["cut"], cut), run.stdout
    report = "\n".join(_section(run.stdout, "cut"))
    assert "the gradient with respect to x differs" in report, report
    assert "new leaf tensor" in report, report
    assert "does not depend on tok_emb.weight" in report, report
    assert all(rows["attacks"][label] == "fail" for label in attacks), run.stdout
    assert all(rows["right"][label] == "pass" for label in right), run.stdout
    assert _others_not_attempted(rows["attacks"], attacks), run.stdout
    report = "\n".join(_section(run.stdout, "attacks"))
    assert "add up across steps" in report, report
    assert "x of dtype float32: your output is torch.float64" in report, report
    assert "the probabilities of new token 0 differ from the statement's" in report, report
    assert rows["decay"]["ch16-train-step"] == "fail", run.stdout
    report = "\n".join(_section(run.stdout, "decay"))
    assert "the gain (1-D: not decayed) was decayed" in report, report


def test_ch10_gradients_and_tables_of_answers_under_the_grader(tmp_path):
    """Chapter 10's tenth read, M1: under the grader the answer's output comes back without a
    graph, so ch10-one-hot-embedding's gradient test never ran and a detached copy marked
    requires_grad, or a product with a zero gradient, scored pass; the gradient is now computed
    in the student's process (mathref.checks.remote.grads_where_run, sent by
    mathref.grade.rpc.apply) and compared by the grader. M2: every input of ch10-bpe-encode
    was fixed, so a table of answers made offline passed whatever the secret seed; its random
    cases are now drawn from the grader's generator, and (the delta read's N1) kept only where
    common wrong encoders differ from BPE, so a table plus greedy longest match fails too; and
    (the eleventh read's M1) the fixed cases are renamed by the generator, so a table of the
    notebook's answers plus a wrong encoder the checker does not list (each merge once, to its
    first occurrence) fails on them. The right answers pass. One grading run."""
    from tests.notebooks import solution_cell
    from tests.test_checks_ch10 import (_bpe_table_and_greedy_answer,
                                        _bpe_table_and_once_answer, _bpe_table_answer)
    source = read(ROOT / "notebooks" / "10_tokenization.ipynb")
    hot, bpe = "ch10-one-hot-embedding", "ch10-bpe-encode"
    one_hot = ("def one_hot_lookup(ids, E):\n"
               "    one_hot = F.one_hot(ids, num_classes=E.shape[0]).to(E.dtype)\n")
    submissions = {
        "right": {hot: one_hot + "    return one_hot @ E\n",
                  bpe: solution_cell(source, bpe).source},
        "detached": {hot: one_hot + "    return (one_hot @ E).detach().requires_grad_()\n"},
        "zerograd": {hot: one_hot + "    return one_hot @ E.detach() + 0 * E.sum()\n"},
        "table": {bpe: _bpe_table_answer()},
        "tablegreedy": {bpe: _bpe_table_and_greedy_answer()},
        "tableonce": {bpe: _bpe_table_and_once_answer()}}
    folder = tmp_path / "subs"
    folder.mkdir()
    for student, bodies in submissions.items():
        nbformat.write(_attempting(source, bodies), folder / f"{student}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    report = {student: "\n".join(_section(run.stdout, student)) for student in submissions}
    assert rows["right"][hot] == "pass" and rows["right"][bpe] == "pass", run.stdout
    assert rows["detached"][hot] == "fail" and "no history" in report["detached"], run.stdout
    assert rows["zerograd"][hot] == "fail" and "one_hot(ids)ᵀ G" in report["zerograd"], run.stdout
    for student in ("table", "tablegreedy", "tableonce"):
        assert rows[student][bpe] == "fail", run.stdout


def test_ch15_numpy_in_the_online_softmax_exercises_is_refused_by_the_grader(tmp_path):
    """Chapter 15's two online-softmax exercises refuse NumPy (their checkers'
    ``refused_modules``): under the grader the answer runs in another process, where the
    notebook's watch on NumPy does not reach, so the trusted side reads the solution cells: the
    fourth read's M2 (np.logaddexp on Python floats, named directly, scored pass) fails both, as
    does an import of numpy and ``t.numpy()``; a right merge that tests for the empty state with
    the float ``-np.inf`` passes, and so does the reference."""
    from tests.exercises.ch15 import MERGE_NUMPY_ON_FLOATS, TILE_NUMPY_ON_FLOATS
    source = read(ROOT / "notebooks" / "15_efficient_attention.ipynb")
    merge, tile = "ch15-merge-softmax-states", "ch15-flash-tile-step"
    body = {
        "floats": (MERGE_NUMPY_ON_FLOATS.format(logaddexp="np.logaddexp")
                   .replace("import numpy as np\n", ""),
                   TILE_NUMPY_ON_FLOATS.format(logaddexp="np.logaddexp")
                   .replace("import numpy as np\n", "")),
        "imported": (MERGE_NUMPY_ON_FLOATS.format(logaddexp="np.logaddexp"),
                     TILE_NUMPY_ON_FLOATS.format(logaddexp="numpy.logaddexp")
                     .replace("import numpy as np\n", "import numpy\n")),
    }
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(source, folder / "reference.ipynb")
    for name, (merge_body, tile_body) in body.items():
        nbformat.write(_attempting(source, {merge: merge_body.replace("import sys\n", ""),
                                            tile: tile_body.replace("import sys\n", "")}),
                       folder / f"{name}.ipynb")
    constant = _attempting(source, {merge: (
        "import torch\n\n"
        "def merge_softmax_states(m1, l1, acc1, m2, l2, acc2):\n"
        "    if float(m1) == -np.inf:\n"
        "        return m2, l2, acc2\n"
        "    m = torch.maximum(m1, m2)\n"
        "    c1, c2 = torch.exp(m1 - m), torch.exp(m2 - m)\n"
        "    return m, c1 * l1 + c2 * l2, c1 * acc1 + c2 * acc2\n")})
    nbformat.write(constant, folder / "constant.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    labels = exercise_labels(source)
    assert rows["reference"]["score"] == str(len(labels)), run.stdout
    assert rows["constant"][merge] == "pass", run.stdout
    for name in body:
        for label in (merge, tile):
            assert rows[name][label] == "fail", (name, label, run.stdout)
            assert any(line.startswith(f"  {label}: fail: refused before running: line ")
                       and "this exercise does not allow numpy" in line
                       for line in _section(run.stdout, name)), run.stdout
        assert _others_not_attempted(rows[name], [merge, tile]), (name, run.stdout)


def test_ch09_library_kernels_by_other_names_are_refused_by_the_grader(tmp_path):
    """Chapter 9's ninth and tenth reads, when under the grader only an exercise's refused names
    reached the worker (its gate does too since; test_the_exercise_gate_holds_in_the_worker).
    torch.ops.aten.cdist,
    torch.pdist, aten.pairwise_distance, aten.linalg_vector_norm of the broadcast difference,
    torch.nuclear_norm and torch.linalg.svdvals of its [d, 1] slices scored pass in
    ch09-unit-distance; mathref's FlashAttention (function and autograd Function) and the
    quantizable MultiheadAttention with identity projections in ch09-soft-lookup. Each now
    fails; the reference passes."""
    source = read(ROOT / "notebooks" / "09_similarity.ipynb")
    distance, lookup = "ch09-unit-distance", "ch09-soft-lookup"
    header = "import torch\n\ndef unit_distances(U, V):\n"
    lookup_header = ("import math\nimport torch\n\ndef soft_lookup(query, keys, values, "
                     "temperature):\n    one = query.dim() == 1\n"
                     "    Q = query[None] if one else query\n")
    bodies = {
        "cdist": (distance, header + "    return torch.ops.aten.cdist(U, V, 2.0, 2)\n"),
        "pdist": (distance, header + "    n, m = U.shape[0], V.shape[0]\n"
                  "    d = torch.pdist(torch.cat([U, V]))\n"
                  "    rows, cols = torch.triu_indices(n + m, n + m, 1)\n"
                  "    full = torch.zeros(n + m, n + m, dtype=U.dtype)\n"
                  "    full[rows, cols] = d\n"
                  "    full = full + full.T\n"
                  "    return full[:n, n:]\n"),
        "pairwise": (distance, header + "    return torch.ops.aten.pairwise_distance("
                     "U[:, None], V[None], 2.0, 0.0, False)\n"),
        "vector_norm": (distance, header + "    return torch.ops.aten.linalg_vector_norm("
                        "U[:, None] - V[None], 2, [-1])\n"),
        "nuclear": (distance, header + "    return torch.nuclear_norm((U[:, None] - V[None])"
                    "[..., None], dim=(-2, -1))\n"),
        "svdvals": (distance, header + "    return torch.linalg.svdvals((U[:, None] - V[None])"
                    "[..., None])[..., 0]\n"),
        "flash": (lookup, lookup_header + "    from mathref.efficient import flash_attention\n"
                  "    out = flash_attention(Q, keys, values, scale=1.0 / temperature)\n"
                  "    return out[0] if one else out\n"),
        "flash_function": (lookup, lookup_header +
                           "    from mathref.efficient import FlashAttentionFunction\n"
                           "    Q = Q * math.sqrt(keys.shape[-1]) / temperature\n"
                           "    out = FlashAttentionFunction.apply(Q, keys, values)\n"
                           "    return out[0] if one else out\n"),
        "quantizable": (lookup, lookup_header +
                        "    from torch.ao.nn.quantizable import MultiheadAttention\n"
                        "    d, dv = keys.shape[-1], values.shape[-1]\n"
                        "    E = max(d, dv)\n"
                        "    pad = lambda x: torch.cat([x, x.new_zeros(*x.shape[:-1], "
                        "E - x.shape[-1])], -1)\n"
                        "    m = MultiheadAttention(E, 1, bias=False).double()\n"
                        "    with torch.no_grad():\n"
                        "        for lin in (m.linear_Q, m.linear_K, m.linear_V, m.out_proj):\n"
                        "            lin.weight.copy_(torch.eye(E, dtype=torch.float64))\n"
                        "    out, _ = m(pad(Q)[:, None] * math.sqrt(E) / temperature, "
                        "pad(keys)[:, None], pad(values)[:, None], need_weights=False)\n"
                        "    out = out[:, 0, :dv]\n"
                        "    return out[0] if one else out\n"),
    }
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(source, folder / "reference.ipynb")
    for name, (label, body) in bodies.items():
        nbformat.write(_attempting(source, {label: body}), folder / f"{name}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    labels = exercise_labels(source)
    assert rows["reference"]["score"] == str(len(labels)), run.stdout
    for name, (label, _) in bodies.items():
        assert rows[name][label] == "fail", (name, run.stdout)
        assert _others_not_attempted(rows[name], [label]), (name, run.stdout)


def test_ch09_unit_distance_meter_runs_in_the_worker(tmp_path):
    """Chapter 9's read at 81f456b, L6: under the grader the answer ran in the worker, where the
    check's operation meter did not see its tensor operations, so the broadcast difference, a
    row loop and distances computed in Python scored pass on their values alone. The meter now
    runs there (mathref.checks.ch09._meter_counts, sent by mathref.grade.rpc.apply): each fails
    with the notebook's message; the reference and the einsum form pass."""
    source = read(ROOT / "notebooks" / "09_similarity.ipynb")
    label = "ch09-unit-distance"
    header = "import torch\n\ndef unit_distances(U, V):\n"
    bodies = {
        "broadcast": header + "    return (U[:, None] - V[None]).pow(2).sum(-1).sqrt()\n",
        "outbuffer": header + "    buf = U.new_empty(0)\n"
                     "    torch.sub(U[:, None], V[None], out=buf)\n"
                     "    return buf.pow_(2).sum(-1).sqrt()\n",
        "rowloop": header + "    return torch.stack([(2 - 2 * V @ u).clamp_min(0).sqrt() "
                   "for u in U])\n",
        "python": header + "    rows = [[float(x) for x in u] for u in U]\n"
                  "    cols = [[float(x) for x in v] for v in V]\n"
                  "    return torch.tensor([[sum((a - b) ** 2 for a, b in zip(u, v)) ** 0.5 "
                  "for v in cols] for u in rows], dtype=U.dtype)\n",
        "einsum": header + "    return (torch.einsum('id,id->i', U, U)[:, None]\n"
                  "            + torch.einsum('jd,jd->j', V, V)[None]\n"
                  "            - 2 * torch.einsum('id,jd->ij', U, V)).clamp_min(0).sqrt()\n",
    }
    words = {"broadcast": "coordinate by coordinate", "outbuffer": "coordinate by coordinate",
             "rowloop": "it loops over pairs or rows",
             "python": "not computed from U and V by tensor operations"}
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(source, folder / "reference.ipynb")
    for name, body in bodies.items():
        nbformat.write(_attempting(source, {label: body}), folder / f"{name}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["reference"]["score"] == str(len(exercise_labels(source))), run.stdout
    assert rows["einsum"][label] == "pass", run.stdout
    for name, expected in words.items():
        assert rows[name][label] == "fail", (name, run.stdout)
        assert expected in "\n".join(_section(run.stdout, name)), (name, run.stdout)


def test_a_table_stashed_in_a_library_by_an_earlier_exercise_gets_no_credit(tmp_path):
    """Chapter 12's ninth read, M1: ex1's solution cell, where alibi_bias is not refused, put its
    table into a library dict (mathref.nn.ACTIVATIONS); ex2, which refuses it, read the table
    back and scored pass, as ex4 did with a rope_cache table stored by ex2. Each exercise now
    runs in a fresh worker: the stash is gone, the two fail, ex1 and ex3 still pass."""
    from tests.notebooks import solution_cell
    source = read(ROOT / "notebooks" / "12_positions.ipynb")
    nb = nbformat.from_dict(source)
    first, alibi, rope = "ch12-sinusoidal-entry", "ch12-alibi-matrix", "ch12-rope-half"
    solution_cell(nb, first).source = (
        "from mathref import positions as P\nfrom mathref.nn import ACTIVATIONS\n"
        "ACTIVATIONS['stash_alibi'] = (P.alibi_bias(1, 16, dtype=torch.float64)[0]\n"
        "                              / P.alibi_slopes(1)[0].item())\n\n"
        "def sinusoidal_entry(p, j, d):\n"
        "    angle = p / 10000 ** (2 * (j // 2) / d)\n"
        "    return math.sin(angle) if j % 2 == 0 else math.cos(angle)\n")
    solution_cell(nb, alibi).source = (
        "from mathref import positions as P\nfrom mathref.nn import ACTIVATIONS\n"
        "ACTIVATIONS['stash_rope'] = {(d, b): P.rope_cache(torch.arange(2001), d, b,\n"
        "                                                  dtype=torch.float64)\n"
        "                             for d in (4, 6, 8, 16) for b in (10000.0, 500.0)}\n\n"
        "def alibi_matrix(slope, T):\n"
        "    return ACTIVATIONS['stash_alibi'][:T, :T] * slope\n")
    solution_cell(nb, rope).source = (
        "from mathref.nn import ACTIVATIONS\n\n"
        "def rope_half_split(x, positions, base=10000.0):\n"
        "    cos, sin = (t[positions].to(x.dtype) for t in ACTIVATIONS['stash_rope'][x.shape[-1], base])\n"
        "    h = x.shape[-1] // 2\n"
        "    x1, x2 = x[..., :h], x[..., h:]\n"
        "    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)\n")
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(nb, folder / "stash.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["stash"][alibi] == "fail" and rows["stash"][rope] == "fail", run.stdout
    assert rows["stash"][first] == "pass" and rows["stash"]["ch12-adjacent-to-half"] == "pass", \
        run.stdout


def test_a_refused_function_at_the_solution_cells_top_level_is_refused_by_the_grader(tmp_path):
    """Chapter 12's fourth read, M1: the exercise's refusals held only while the checker called
    the student's function, so a table built by the refused ``P.alibi_bias`` at the top of the
    solution cell, then cropped and scaled by the function, scored pass. The worker now runs the
    solution cell under the exercise's named refusals; the reference still passes."""
    from tests.notebooks import solution_cell
    source = read(ROOT / "notebooks" / "12_positions.ipynb")
    label = "ch12-alibi-matrix"
    table = nbformat.from_dict(source)
    solution_cell(table, label).source = (
        "import torch\n"
        "import mathref.positions as P\n"
        "_UNIT = P.alibi_bias(1, 64, dtype=torch.float64)[0] / P.alibi_slopes(1)[0]\n\n"
        "def alibi_matrix(slope, T):\n"
        "    return _UNIT[:T, :T] * slope\n")
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(source, folder / "reference.ipynb")
    nbformat.write(table, folder / "table.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["reference"]["score"] == str(len(exercise_labels(source))), run.stdout
    assert rows["table"][label] in ("fail", "error"), run.stdout
    report = "\n".join(_section(run.stdout, "table"))
    assert "mathref.positions.alibi_bias" in report, report





def test_reading_a_students_object_runs_under_the_exercises_rules(tmp_path):
    """A checker that reads an object a solution returned (its items, length, attributes) runs
    the student's code: the worker serves those reads under the exercise's rules, as it serves
    calls. Before, they ran outside them: a topo_sort returning an object whose __iter__ called
    mathref's topological_order passed ch04-topological-order under the grader. The same class
    ordering the graph itself passes, and a generator calling topological_order fails (a
    generator's body runs within the call, in the notebook's check too). One run."""
    source = read(ROOT / "notebooks" / "04_autodiff.ipynb")
    lazy = ("class Order:\n"
            "    def __init__(self, root):\n"
            "        self.root = root\n"
            "    def __iter__(self):\n"
            "{body}\n"
            "def topo_sort(root):\n"
            "    return Order(root)\n")
    bodies = {
        "library": lazy.format(body="        from mathref.autograd import topological_order\n"
                                    "        return iter(topological_order(self.root))\n"),
        "own": lazy.format(body="        order, seen = [], set()\n"
                                "        def visit(node):\n"
                                "            if id(node) not in seen:\n"
                                "                seen.add(id(node))\n"
                                "                for child in node._prev:\n"
                                "                    visit(child)\n"
                                "                order.append(node)\n"
                                "        visit(self.root)\n"
                                "        return iter(order)\n"),
        "generator": ("def topo_sort(root):\n"
                      "    from mathref.autograd import topological_order\n"
                      "    yield from topological_order(root)\n")}
    label = "ch04-topological-order"
    folder = tmp_path / "subs"
    folder.mkdir()
    for name, body in bodies.items():
        nbformat.write(_attempting(source, {label: body}), folder / f"{name}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert rows["own"][label] == "pass", run.stdout
    for name in ("library", "generator"):
        assert rows[name][label] == "fail", (name, run.stdout)
        assert "topological_order" in "\n".join(_section(run.stdout, name)), (name, run.stdout)
    for name in bodies:
        assert _others_not_attempted(rows[name], [label]), (name, run.stdout)


ROWS = '''import torch
import torch.nn.functional as F


class Rows:
    """ce_gradient's rows, computed only when the grader reads them."""
    def __init__(self, logits, targets, eps, ignore_index):
        self.args = (logits, targets, eps, ignore_index)

    def __len__(self):
        return self.args[0].shape[0]

    def __getitem__(self, i):
        logits, targets, eps, ignore_index = self.args
        if i >= logits.shape[0]:
            raise IndexError(i)
        with torch.inference_mode(False), torch.enable_grad():
            z = logits.clone().requires_grad_(True)
            loss = F.cross_entropy(z, targets, label_smoothing=eps, ignore_index=ignore_index)
            g, = torch.autograd.grad(loss, z)
        return g[i].tolist()


def ce_gradient(logits, targets, label_smoothing=0.0, ignore_index=-100):
    return Rows(logits, targets, label_smoothing, ignore_index)
'''


def test_ch05_ce_gradient_read_lazily_is_still_refused_by_the_grader(tmp_path):
    """Chapter 5's read (M2): ce_gradient returning a sequence-like object whose __getitem__
    runs autograd through F.cross_entropy (both refused by the exercise) scored 5/5 under the
    grader: the checker's torch.as_tensor read the rows through len/getitem requests, which the
    worker served outside the exercise's rules. It fails now, and the reference passes. One
    run."""
    source = read(ROOT / "notebooks" / "05_losses.ipynb")
    label = "ch05-ce-gradient"
    folder = tmp_path / "subs"
    folder.mkdir()
    nbformat.write(_attempting(source, {label: ROWS}), folder / "rows.ipynb")
    nbformat.write(source, folder / "reference.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert sorted(rows) == ["reference", "rows"], run.stdout
    assert rows["reference"]["score"] == str(len(exercise_labels(source))), run.stdout
    assert rows["rows"][label] == "fail", run.stdout
    assert "expected a torch.Tensor, got Rows" in "\n".join(_section(run.stdout, "rows")), \
        run.stdout
    assert _others_not_attempted(rows["rows"], [label]), run.stdout


def test_every_ch05_shortcut_fails_under_the_grader(tmp_path):
    """Chapter 5's read (L2): the shortcut bodies of tests/test_shortcuts.py for chapter 5 (the
    library call each exercise re-derives, under every name the reads found: torch.special,
    logaddexp folds, softplus and logsigmoid folds, kl_div, Categorical, ...) were run in the
    notebook's check only. Through the grader, submission k attempts every exercise with its
    k-th shortcut: each one fails. By default three of the submissions holding the bodies the
    reads named (k = 5: kl_div, Categorical; 12: torch.special.softmax; 15: the softplus fold;
    make test's time is short), all 17 under GRADE_ALL_CHAPTERS=1. One run."""
    from tests.test_shortcuts import SHORTCUTS
    source = read(ROOT / "notebooks" / "05_losses.ipynb")
    labels = exercise_labels(source)
    folder = tmp_path / "subs"
    folder.mkdir()
    attempted = {}
    every = range(max(len(SHORTCUTS[label]) for label in labels))
    for k in (every if os.environ.get("GRADE_ALL_CHAPTERS") else (5, 12, 15)):
        bodies = {label: SHORTCUTS[label][k] for label in labels if k < len(SHORTCUTS[label])}
        attempted[f"k{k:02d}"] = list(bodies)
        nbformat.write(_attempting(source, bodies), folder / f"k{k:02d}.ipynb")
    run, rows = _grade_folder_cli(folder, source, tmp_path)
    assert sorted(rows) == sorted(attempted), run.stdout
    for name, tried in attempted.items():
        assert rows[name]["score"] == "0", (name, run.stdout)
        assert all(rows[name][label] == "fail" for label in tried), (name, run.stdout)
        assert _others_not_attempted(rows[name], tried), (name, run.stdout)
