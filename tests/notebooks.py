"""Reading the chapter notebooks: exercises, solutions and check cells (used by the tests)."""
import re
from functools import lru_cache
from pathlib import Path

import nbformat

from mathref.grade import EXERCISE_LABEL, checker_name, exercise_labels  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SOLUTION_START = re.compile(r"\{solution-start\}\s*(\S+)")
IGNORE_TAGS = ("nbval-ignore-output", "nbval-skip")


@lru_cache(maxsize=None)
def read(path):
    return nbformat.read(Path(path), as_version=4)


def code_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def setup_source(nb):
    return code_cells(nb)[0].source


def solution_cell(nb, label):
    """The code cell tagged `solution` that follows `{solution-start} label`."""
    cells = nb.cells
    for i, c in enumerate(cells):
        if c.cell_type == "markdown" and label in SOLUTION_START.findall(c.source):
            for later in cells[i + 1:]:
                if later.cell_type == "code" and "solution" in later.metadata.get("tags", []):
                    return later
    raise LookupError(f"no solution cell for {label}")


def check_cell(nb, label):
    """The code cell that calls checks.check_<label>(answer)."""
    call = re.compile(r"checks\." + checker_name(label) + r"\((\w+)")
    for c in code_cells(nb):
        if call.search(c.source):
            return c
    raise LookupError(f"no check cell calls checks.{checker_name(label)}")


def reference_answer(nb, label, source=None):
    """Run the setup cell and the solution cell (or ``source`` in its place: a shortcut or a
    wrong answer written as a student would) in a fresh namespace; return what the check cell
    passes to the checker (the reference solution)."""
    namespace = {"__name__": "__reference__"}
    exec(compile(setup_source(nb), "<setup cell>", "exec"), namespace)
    source = solution_cell(nb, label).source if source is None else source
    exec(compile(source, f"<solution {label}>", "exec"), namespace)
    name = re.search(r"checks\." + checker_name(label) + r"\((\w+)",
                     check_cell(nb, label).source).group(1)
    return namespace[name]


def all_exercises():
    """(notebook path, label) for every exercise of the book."""
    return [(path, label) for path in NOTEBOOKS for label in exercise_labels(read(path))]
