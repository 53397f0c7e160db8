"""nbgrader itself, on a chapter: ``nbgrader generate_assignment`` then ``nbgrader autograde``.

nbgrader lives in its own environment (``make -o venv nbgrader-venv``: ``.venv-nbgrader``), so
that it cannot move the main environment's pins; this test fails, saying how to make it, when it
is missing. The notebook's kernel is this environment's Python (a ``python3`` kernelspec put
first on JUPYTER_PATH), which has torch and this checkout's mathref.
"""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat

from mathref.student import nbgrader_notebook
from tests.notebooks import NOTEBOOKS, ROOT, exercise_labels, read

NBGRADER = ROOT / ".venv-nbgrader" / "bin" / "nbgrader"
CHAPTER = NOTEBOOKS[0]


def nbgrader(course, *args, env):
    run = subprocess.run([str(NBGRADER), *args],
                         cwd=course, env=env, capture_output=True, text=True, timeout=1200)
    assert run.returncode == 0, f"nbgrader {' '.join(args)}:\n{run.stdout}\n{run.stderr[-4000:]}"
    return run


def test_nbgrader_generates_and_autogrades_a_chapter(tmp_path):
    assert NBGRADER.exists(), ("nbgrader is not installed: run `make -o venv nbgrader-venv` "
                               "(it makes .venv-nbgrader with nbgrader 0.9.6)")
    course = tmp_path / "course"
    name = CHAPTER.stem
    labels = exercise_labels(read(CHAPTER))
    source = course / "source" / "ps1"
    source.mkdir(parents=True)
    nbformat.write(nbgrader_notebook(read(CHAPTER)), source / f"{name}.ipynb")
    (course / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        "c.CourseDirectory.course_id = 'mathref'\n"
        "c.ExecutePreprocessor.timeout = 600\n"
        "c.Execute.timeout = 600\n", encoding="utf-8")
    kernels = tmp_path / "jupyter" / "kernels" / "python3"
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (mathref)", "language": "python",
        "env": {"PYTHONPATH": str(ROOT)}}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    env.update(JUPYTER_PATH=str(tmp_path / "jupyter"), PYTHONPATH=str(ROOT),
               PATH=os.pathsep.join([str(NBGRADER.parent), env.get("PATH", "/usr/bin:/bin")]),
               HOME=str(tmp_path), OMP_NUM_THREADS="2")

    nbgrader(course, "generate_assignment", "ps1", "--force", env=env)
    released = nbformat.read(course / "release" / "ps1" / f"{name}.ipynb", as_version=4)
    solutions = [c for c in released.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(solutions) == len(labels)
    assert all("raise NotImplementedError()" in c.source and "### BEGIN SOLUTION" not in c.source
               for c in solutions)

    # ada hands back the reference solutions, ben the released notebook untouched
    solved = nbformat.from_dict(released)
    reference = [c.source for c in read(CHAPTER).cells
                 if "solution" in c.metadata.get("tags", [])]
    for cell, src in zip([c for c in solved.cells
                          if c.metadata.get("nbgrader", {}).get("solution")], reference):
        cell.source = src
    for student, nb in (("ada", solved), ("ben", released)):
        folder = course / "submitted" / student / "ps1"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{name}.ipynb")
    nbgrader(course, "autograde", "ps1", "--create", "--force", env=env)
    nbgrader(course, "export", "--to", str(tmp_path / "grades.csv"), env=env)
    with open(tmp_path / "grades.csv", newline="", encoding="utf-8") as f:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"]))
                  for row in csv.DictReader(f)}
    assert scores == {"ada": (len(labels), len(labels)), "ben": (0.0, len(labels))}
