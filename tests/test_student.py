"""`make student`: solution-free notebooks whose only failing cells are the exercise checks."""
import subprocess
import sys

import nbformat
import pytest
from nbclient import NotebookClient

from mathref.student import make_student_notebook, strip_solution_source
from tests.notebooks import NOTEBOOKS, ROOT, exercise_labels, read


def test_strip_solution_source_keeps_signature_and_indentation():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n"
    assert strip_solution_source(src) == ("def f(x):\n    # YOUR CODE HERE\n"
                                          "    raise NotImplementedError()")
    with pytest.raises(ValueError, match="without"):
        strip_solution_source("### BEGIN SOLUTION\nx = 1\n")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_student_notebook_has_no_solutions_or_outputs(path):
    nb = read(path)
    student = make_student_notebook(nb)
    text = nbformat.writes(student)
    assert "### BEGIN SOLUTION" not in text and "{solution-start}" not in text
    solution_bodies = [c.source.split("### BEGIN SOLUTION")[1].split("### END SOLUTION")[0]
                       for c in nb.cells if "### BEGIN SOLUTION" in c.source]
    for body in solution_bodies:
        assert body.strip() not in text
    for cell in student.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None
    stubs = sum(c.source.count("raise NotImplementedError()") for c in student.cells
                if c.cell_type == "code")
    assert stubs == len(solution_bodies)


def test_make_student_writes_every_notebook(tmp_path):
    out = subprocess.run([sys.executable, "-m", "mathref.student", str(ROOT / "notebooks"),
                          str(tmp_path)], capture_output=True, text=True, check=True)
    assert sorted(p.name for p in tmp_path.glob("*.ipynb")) == [p.name for p in NOTEBOOKS]
    assert out.stdout.count(".ipynb") == len(NOTEBOOKS)


def test_running_a_student_notebook_fails_only_at_the_checks(tmp_path):
    path = NOTEBOOKS[0]
    student = make_student_notebook(read(path))
    NotebookClient(student, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    failing = [c for c in student.cells if c.cell_type == "code"
               and any(o.output_type == "error" for o in c.outputs)]
    labels = exercise_labels(read(path))
    assert len(failing) == len(labels), [c.source for c in failing]
    for cell, label in zip(failing, labels):
        assert "checks.check_" in cell.source
        error = next(o for o in cell.outputs if o.output_type == "error")
        assert error.ename == "ExerciseCheckFailed"
        assert error.evalue.startswith(f"{label}: not attempted yet")
        assert error.traceback == [f"❌ {label}: {error.evalue[len(label) + 2:]}"]
