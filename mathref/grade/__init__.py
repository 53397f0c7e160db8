"""Grade submitted student notebooks: ``python -m mathref.grade SUBMISSIONS_DIR --assignment NB``.

``NB`` is the notebook the instructor handed out (a chapter, or its student version from
``make student``): the grader takes from it, and only from it, the exercises (their labels), the
setup cell and the check cells. SUBMISSIONS_DIR holds one file per student, named
``<student>.ipynb``; hidden files, other files, folders and links are skipped and listed.

Each submission is, by default, executed top to bottom in the sandbox for the record
(``--executed DIR`` keeps the executed notebooks). Its verdicts come from a separate
verification (:mod:`mathref.grade.verify`): each solution cell is first read on the trusted
side (:mod:`mathref.grade.policy`: what no honest solution needs is refused); then, for each
exercise, a sandboxed worker runs the assignment's setup cell and the student's solution cell,
and the checker, imported from the grader's own snapshot of mathref, runs in the verifier (a
sandbox of its own) and calls the student's function through a data-only channel
(:mod:`mathref.grade.rpc`), on inputs drawn afresh each run. Nothing the submission prints,
patches or defines decides a verdict, and check calls the assignment does not have count for
nothing.

Verdicts: ``pass``; ``fail`` (the checker found a wrong result); ``not attempted`` (the solution
still raises NotImplementedError; a cell left as handed out is not even run); ``error`` (the solution cell or the student's process failed);
``timeout``; ``missing`` (no solution cell for the exercise); ``not run`` (the file is not a
notebook). The CSV has one row per student: ``student, status, score`` and one column per
exercise of the assignment. Isolation: :mod:`mathref.grade.sandbox`.

The steps, one module each: :mod:`~mathref.grade.collect` (what to grade),
:mod:`~mathref.grade.execute` (each submission in the sandbox: :mod:`~mathref.grade.record`
executes it for the record, :mod:`~mathref.grade.policy` reads its solution cells,
:mod:`~mathref.grade.verify` runs the checkers against :mod:`~mathref.grade.worker`),
:mod:`~mathref.grade.report` (the CSV and the report) and :mod:`~mathref.grade.cli` (the
command line).
"""
from mathref.grade.collect import (EXERCISE_LABEL, VERDICTS, check_calls, checker_name,
                                   csv_safe, exercise_labels, find_solution, load_assignment,
                                   read_submission, report_safe, student_name)
from mathref.grade.execute import grade_folder
from mathref.grade.report import format_report, write_csv
from mathref.grade.cli import main

__all__ = ["EXERCISE_LABEL", "VERDICTS", "checker_name", "exercise_labels", "check_calls",
           "load_assignment", "find_solution", "read_submission", "student_name",
           "csv_safe", "report_safe", "grade_folder", "write_csv",
           "format_report", "main"]
