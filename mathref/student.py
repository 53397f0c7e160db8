"""Make solution-free student notebooks: ``python -m mathref.student notebooks/ student/``.

In every code cell tagged ``solution`` the lines from ``### BEGIN SOLUTION`` to
``### END SOLUTION`` (the nbgrader markers) become ``raise NotImplementedError()``, keeping
the indentation, so the function signature stays and the exercise's check cell reports
"not attempted yet". The written solutions (the markdown between ``{solution-start}`` and
``{solution-end}``) are replaced by a short prompt, and every output is cleared.
"""
import argparse
import re
import sys
from pathlib import Path

import nbformat

__all__ = ["strip_solution_source", "make_student_notebook", "nbgrader_notebook", "main"]

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
_SOLUTION_START = re.compile(r"\{solution-start\}\s*(\S+)")


def strip_solution_source(source):
    """Replace every BEGIN/END SOLUTION block of a cell's source by a NotImplementedError stub."""
    lines, out, inside = source.splitlines(), [], False
    for line in lines:
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"nested {BEGIN!r} in:\n{source}")
            inside = True
            indent = line[: len(line) - len(line.lstrip())]
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f"{indent}raise NotImplementedError()")
        elif stripped == END:
            if not inside:
                raise ValueError(f"{END!r} without {BEGIN!r} in:\n{source}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise ValueError(f"{BEGIN!r} without {END!r} in:\n{source}")
    return "\n".join(out)


def make_student_notebook(nb, strip_code=True):
    """Return a copy of notebook ``nb`` with solutions removed and outputs cleared
    (``strip_code=False`` keeps the code solutions, markers included, for nbgrader)."""
    nb = nbformat.from_dict(nb)
    cells = []
    in_solution = False
    for cell in nb.cells:
        src = cell.source
        if cell.cell_type == "markdown" and "{solution-start}" in src:
            match = _SOLUTION_START.search(src)
            label = match.group(1) if match else "this exercise"
            in_solution = "{solution-end}" not in src
            cells.append(nbformat.v4.new_markdown_cell(
                f"**Your solution to {label}.** Fill in the cell below, run it, then run the "
                f"check after it."))
            continue
        if cell.cell_type == "markdown" and "{solution-end}" in src:
            in_solution = False
            continue
        if cell.cell_type == "code":
            if "solution" in cell.metadata.get("tags", []):
                if BEGIN not in src:
                    raise ValueError(f"a cell tagged 'solution' has no {BEGIN!r} marker:\n{src}")
                if strip_code:
                    cell.source = strip_solution_source(src)
            cell.outputs = []
            cell.execution_count = None
            cells.append(cell)
        elif not in_solution:
            cells.append(cell)
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return nb


_CHECK_CALL = re.compile(r"checks\.check_(\w+)\s*\(")


def nbgrader_notebook(nb, points=1):
    """A chapter as an nbgrader *source* notebook: the written solutions dropped (as in the
    student version), every cell tagged ``solution`` an autograded answer cell
    (``solution: true``), every check cell a locked autograder test worth ``points``, every
    other cell locked. ``nbgrader generate_assignment`` then strips the code between the
    BEGIN/END SOLUTION markers itself, and ``nbgrader autograde`` scores the check cells."""
    nb = make_student_notebook(nb, strip_code=False)
    for index, cell in enumerate(nb.cells):
        meta = {"schema_version": 3, "grade": False, "solution": False, "locked": True,
                "grade_id": f"cell-{index:03d}"}
        tags = cell.metadata.get("tags", [])
        check = _CHECK_CALL.search(cell.source) if cell.cell_type == "code" else None
        if cell.cell_type == "code" and "solution" in tags:
            meta.update(solution=True, locked=False)
        elif check:
            meta.update(grade=True, points=points, grade_id=check.group(1).replace("_", "-"))
        cell.metadata["nbgrader"] = meta
    return nb


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="folder of chapter notebooks (notebooks/)")
    parser.add_argument("target", type=Path, help="folder to write student notebooks to")
    args = parser.parse_args(argv)
    notebooks = sorted(args.source.glob("*.ipynb"))
    if not notebooks:
        parser.error(f"no .ipynb files in {args.source}")
    args.target.mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        student = make_student_notebook(nbformat.read(path, as_version=4))
        nbformat.write(student, args.target / path.name)
        print(f"{args.target / path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
