"""`python -m mathref.grade`: grading submitted student notebooks of chapter 1.

Five generated submissions, all made from chapter 1's student notebook: every exercise solved
(the reference solutions put back), none solved (the raw student notebook), one wrong answer,
an endless loop in a solution, and a file that is not JSON.
"""
import csv
import os
import re
import subprocess
import sys
import time

import nbformat
import pytest

from mathref.grade import (check_calls, format_report, grade_notebook, read_submission,
                           verdicts_from_outputs)
from mathref.student import make_student_notebook
from tests.notebooks import ROOT, exercise_labels, read

CHAPTER = ROOT / "notebooks" / "01_gradient_descent.ipynb"
LABELS = ["ch01-central-difference", "ch01-gradient-descent-loop", "ch01-steps-to-tolerance",
          "ch01-best-constant-step"]
TIMEOUT = 45  # per notebook; chapter 1 runs in about 10 s alone, 25 s on a busy machine

WRONG_BEST_STEP = '''def best_constant_step(H):
    # a typical slip: the edge of stability 2/λ_max instead of the best step 2/(λ_min + λ_max)
    return 2.0 / torch.linalg.eigvalsh(H)[-1].item(), 1.0
'''
LOOPING_GRADIENT_DESCENT = '''def gradient_descent_1d(df, x0, lr, steps):
    while True:
        pass
'''


def grade_cli(*args, **options):
    """Run ``python -m mathref.grade`` with this checkout's mathref."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    return subprocess.run([sys.executable, "-m", "mathref.grade", *map(str, args)],
                          capture_output=True, text=True, env=env, **options)


def solved(student, source):
    """The student notebook with every solution cell replaced by the reference solution."""
    nb = nbformat.from_dict(student)
    reference = [c.source for c in source.cells if "solution" in c.metadata.get("tags", [])]
    mine = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    assert len(mine) == len(reference) == len(LABELS)
    for cell, src in zip(mine, reference):
        cell.source = src
    return nb


def replace_solution(nb, function, new_source):
    nb = nbformat.from_dict(nb)
    cell = next(c for c in nb.cells if "solution" in c.metadata.get("tags", [])
                and c.source.startswith(f"def {function}("))
    cell.source = new_source
    return nb


def make_submissions(folder):
    source = read(CHAPTER)
    student = make_student_notebook(source)
    everything = solved(student, source)
    nbformat.write(everything, folder / "ada.ipynb")
    nbformat.write(student, folder / "ben.ipynb")
    nbformat.write(replace_solution(everything, "best_constant_step", WRONG_BEST_STEP),
                   folder / "chen.ipynb")
    nbformat.write(replace_solution(everything, "gradient_descent_1d", LOOPING_GRADIENT_DESCENT),
                   folder / "dana.ipynb")
    (folder / "eli.ipynb").write_text('{"cells": [ {"cell_type": "code", "sour')  # cut short
    (folder / "notes.txt").write_text("not a submission")


EXPECTED_CSV = [
    ["student", "status", "score"] + LABELS,
    ["ada", "ok", "4", "pass", "pass", "pass", "pass"],
    ["ben", "ok", "0", "not attempted", "not attempted", "not attempted", "not attempted"],
    ["chen", "ok", "3", "pass", "pass", "pass", "fail"],
    ["dana", "timeout", "1", "pass", "timeout", "not run", "not run"],
    ["eli", "invalid notebook", "0", "not run", "not run", "not run", "not run"],
]


def test_labels_come_from_the_check_cells():
    nb = make_student_notebook(read(CHAPTER))
    assert [label for _, label in check_calls(nb)] == LABELS == exercise_labels(nb)
    # without the exercise blocks, the checker's name still gives the label
    nb.cells = [c for c in nb.cells if c.cell_type == "code"]
    assert [label for _, label in check_calls(nb)] == LABELS


def test_verdicts_from_outputs_reads_each_kind_of_check_output():
    def cell(source, *outputs):
        c = nbformat.v4.new_code_cell(source)
        c.outputs = [nbformat.from_dict(o) for o in outputs]
        return c

    def error(ename, evalue):
        return {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}

    nb = nbformat.v4.new_notebook(cells=[
        cell("checks.check_ch09_a(f)", {"output_type": "stream", "name": "stdout",
                                         "text": "✅ ch09-a: passed (note)\n"}),
        cell("checks.check_ch09_b(f)", error("ExerciseCheckFailed", "ch09-b: f(1): expected 2")),
        cell("checks.check_ch09_c(f)", error("ExerciseCheckFailed",
                                             "ch09-c: not attempted yet: ...")),
        cell("checks.check_ch09_d(g)", error("NameError", "name 'g' is not defined")),
        cell("checks.check_ch09_e(f)"),
        cell("checks.check_ch09_h(f)", {"output_type": "stream", "name": "stdout",
                                         "text": "✅ ch09-h: passed\n"},
             error("ExerciseCheckFailed", "ch09-h: f(2): expected 4")),
        cell("x = 1"),
        cell("checks.check_ch09_f(f)"),
        cell("checks.check_ch09_g(f)"),
    ])
    assert verdicts_from_outputs(nb) == {
        "ch09-a": ("pass", ""), "ch09-b": ("fail", "f(1): expected 2"),
        "ch09-c": ("not attempted", "not attempted yet: ..."),
        "ch09-d": ("error", "NameError: name 'g' is not defined"),
        "ch09-e": ("error", "the check cell printed no verdict (was it changed?)"),
        "ch09-h": ("fail", "f(2): expected 4"),
        "ch09-f": ("error", "the check cell printed no verdict (was it changed?)"),
        "ch09-g": ("error", "the check cell printed no verdict (was it changed?)")}
    stopped = verdicts_from_outputs(nb, stopped_at=6, stop_message="out of time")
    assert stopped["ch09-e"] == ("error", "the check cell printed no verdict (was it changed?)")
    assert stopped["ch09-f"] == ("timeout", "out of time")
    assert stopped["ch09-g"] == ("not run", "")


@pytest.mark.parametrize("text, why", [("", "not valid JSON"),
                                        ("{not json", "not valid JSON"),
                                        ('{"cells": 3, "nbformat": 4, "nbformat_minor": 5, '
                                         '"metadata": {}}', "not a valid Jupyter notebook")])
def test_read_submission_says_why_a_file_is_not_a_notebook(tmp_path, text, why):
    path = tmp_path / "x.ipynb"
    path.write_text(text)
    with pytest.raises(ValueError, match=why):
        read_submission(path)
    result = grade_notebook(path)
    assert result["status"] == "invalid notebook" and why in result["detail"]


def test_grade_five_kinds_of_submission(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    make_submissions(folder)
    out, report = tmp_path / "grades.csv", tmp_path / "report.txt"
    start = time.monotonic()
    run = grade_cli(folder, "--out", out, "--report", report, "--timeout", TIMEOUT, "--jobs", 2,
                    timeout=6 * TIMEOUT, cwd=tmp_path)
    elapsed = time.monotonic() - start
    assert run.returncode == 0, run.stderr
    with open(out, newline="", encoding="utf-8") as f:
        assert list(csv.reader(f)) == EXPECTED_CSV
    # the endless loop is stopped at the limit; the run never waits much longer than that
    assert elapsed < 4 * TIMEOUT, elapsed

    text = report.read_text(encoding="utf-8")
    assert text == run.stdout.split("Wrote ")[0]
    lines = text.splitlines()
    assert "ada: 4/4" in lines
    assert "ben: 0/4" in lines
    assert "  not attempted: " + ", ".join(LABELS) in lines
    assert ("  ch01-best-constant-step: fail: η* for H with eigenvalues [1.0, 25.0]: expected "
            "0.07692307692, got 0.08" in lines)
    assert re.fullmatch(rf"dana: 1/4 \(timeout: still running after {TIMEOUT} s in cell \d+ "
                        r"\(checks.check_ch01_gradient_descent_loop\(gradient_descent_1d\)\)\)",
                        next(line for line in lines if line.startswith("dana:")))
    assert (f"  ch01-gradient-descent-loop: timeout: still running when the notebook's "
            f"{TIMEOUT} s ran out") in lines
    assert any(line.startswith("eli: 0/4 (invalid notebook: not valid JSON")
               for line in lines)
    assert "Ignored (not <student>.ipynb): notes.txt" in lines
    totals = lines[lines.index("Per exercise (number of students):") + 1:]
    assert totals[0].split() == ["pass", "fail", "not", "attempted", "timeout", "not", "run"]
    assert totals[1].split() == ["ch01-central-difference", "3", "0", "1", "0", "1"]
    assert totals[2].split() == ["ch01-gradient-descent-loop", "2", "0", "1", "1", "1"]
    assert totals[3].split() == ["ch01-steps-to-tolerance", "2", "0", "1", "0", "2"]
    assert totals[4].split() == ["ch01-best-constant-step", "1", "1", "1", "0", "2"]


def test_format_report_marks_missing_exercises():
    results = [{"student": "a", "status": "ok", "detail": "", "score": 1,
                "verdicts": {"ch09-x": ("pass", ""), "ch09-y": ("missing", "")}}]
    text = format_report(results, ["ch09-x", "ch09-y"], "subs", 60)
    assert "a: 1/2\n  missing: ch09-y\n" in text


def test_cli_rejects_an_empty_folder(tmp_path):
    run = grade_cli(tmp_path, cwd=tmp_path)
    assert run.returncode == 2 and "no <student>.ipynb files" in run.stderr
    assert not (tmp_path / "grades.csv").exists()


def tiny_notebook(path, *sources):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nbformat.write(nb, path)
    return path


# a stand-in for mathref.checks that imports nothing heavy
FAKE_CHECKS = ("import types\nchecks = types.SimpleNamespace(\n"
               "    check_ch99_tiny=lambda f: print('✅ ch99-tiny: passed'))")


def test_a_top_level_endless_loop_and_a_dead_kernel_stop_only_their_notebook(tmp_path):
    start = time.monotonic()
    looping = grade_notebook(tiny_notebook(
        tmp_path / "loop.ipynb", FAKE_CHECKS, "checks.check_ch99_tiny(print)",
        "while True:\n    pass", "checks.check_ch99_tiny(print)"), timeout=5)
    assert time.monotonic() - start < 60
    assert looping["status"] == "timeout" and "cell 3 (while True:)" in looping["detail"]
    assert looping["verdicts"] == {"ch99-tiny": ("pass", "")}  # the first check counts

    died = grade_notebook(tiny_notebook(
        tmp_path / "died.ipynb", "import os", "os._exit(1)", "checks.check_ch99_tiny(print)"),
        timeout=30)
    assert died["status"] == "kernel died" and "cell 2 (os._exit(1))" in died["detail"]
    assert died["verdicts"] == {"ch99-tiny": (
        "error", "the kernel died during this exercise (out of memory or a crash)")}


def test_grade_folder_and_write_csv_without_the_cli(tmp_path):
    from mathref.grade import grade_folder, write_csv
    tiny_notebook(tmp_path / "kim.ipynb", FAKE_CHECKS, "checks.check_ch99_tiny(print)")
    tiny_notebook(tmp_path / "lee.ipynb", FAKE_CHECKS, "1 / 0", "checks.check_ch99_tiny(print)")
    (tmp_path / "readme.md").write_text("ignored")
    results, labels, ignored = grade_folder(tmp_path, timeout=30)
    assert labels == ["ch99-tiny"] and list(ignored) == ["readme.md"]
    write_csv(results, labels, tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", "status", "score", "ch99-tiny"]
    assert rows[1] == ["kim", "ok", "1", "pass"]
    assert rows[2] == ["lee", "ok", "1", "pass"]   # an error in one cell does not stop later checks


def test_kernel_environment_drops_proxies_and_puts_this_mathref_first(monkeypatch):
    from mathref.grade import kernel_environment
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy:3128")
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    env = kernel_environment()
    assert not {"HTTPS_PROXY", "http_proxy"} & set(env)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/somewhere/else"]
