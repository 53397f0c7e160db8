"""``python -m mathref.grade``: the command line (arguments, the sandbox check, the run, the
outputs)."""
import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from mathref.grade.collect import _one_line, _submissions, load_assignment
from mathref.grade.execute import grade_folder
from mathref.grade.report import _atomic_write, format_report, write_csv


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
                             "(default: 120; chapters 13-16 need 300-600)")
    parser.add_argument("--exercise-timeout", type=int, default=60,
                        help="seconds for each exercise's verification, the worker's start "
                             "included (default: 60)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="submissions graded at the same time (default: 1)")
    parser.add_argument("--no-execute", action="store_true",
                        help="skip executing the notebooks for the record (verdicts only)")
    parser.add_argument("--memory", type=int, default=8192, metavar="MIB",
                        help="memory for all of one submission's processes together, in MiB "
                             "(a cgroup, where the grader runs as root and can make one; "
                             "default: 8192)")
    parser.add_argument("--disk", type=int, default=256, metavar="MIB",
                        help="size of the sandbox's work folder and of its /tmp, in MiB "
                             "(each a tmpfs; default: 256)")
    parser.add_argument("--unsafe", action="store_true",
                        help="grade even without a working bubblewrap sandbox: students' code "
                             "then runs with rlimits only and can read and change what this "
                             "user can (the report's first line says so)")
    parser.add_argument("--executed", type=Path, default=None, metavar="DIR",
                        help="keep the executed notebooks in DIR (written at the end)")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        parser.error(f"{args.submissions} is not a folder")
    if min(args.timeout, args.jobs, args.exercise_timeout, args.memory, args.disk) < 1:
        parser.error("--timeout, --exercise-timeout, --jobs, --memory and --disk must be at "
                     "least 1")
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
    executed_tmp = None
    if args.executed:
        executed_tmp = Path(tempfile.mkdtemp(prefix=".executed-", dir=args.executed.resolve().parent))
    try:
        results, labels, skipped = grade_folder(
            args.submissions, assignment, args.timeout, args.exercise_timeout, args.jobs,
            execute=not args.no_execute, log=log, progress=progress, executed_dir=executed_tmp,
            unsafe=args.unsafe, limits={"memory": args.memory * 2 ** 20,
                                        "disk": args.disk * 2 ** 20})
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
