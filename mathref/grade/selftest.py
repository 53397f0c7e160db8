"""A small assignment that exercises the grader itself (its tests, and an instructor's check
that the sandbox works here): ``selftest_assignment()`` and ``selftest_solutions()``.

Three exercises, each with a checker registered under a ``selftest-`` label (the verifier
imports this module next to :mod:`mathref.checks`):

- ``selftest-square``: ``square(x)`` on numbers and tensors drawn from the ``generator`` the
  grader passes (fresh inputs each run);
- ``selftest-descent``: ``descend(df, x0, lr, steps)``, which calls back a function the checker
  passes (sent as its code and rebuilt in the worker: the grader serves no calls);
- ``selftest-grad``: ``grad_of_sum_of_squares(x)`` = 2x *without autograd* (the worker applies
  :func:`mathref.checks.core.without_autograd`).
"""
import nbformat
import torch

from mathref.checks.core import CHECKS as _CHECKS
from mathref.checks.core import (exercise, expect, expect_callable, expect_close,
                                 expect_tensor_close, without_autograd)

LABELS = ["selftest-square", "selftest-descent", "selftest-grad"]
CHECKS = {}  # label -> checker: kept out of mathref.checks.CHECKS (the course's exercises)


@exercise("selftest-square")
def check_selftest_square(square, generator=None):
    """Its inputs come from ``generator`` (the grader passes one seeded afresh each run)."""
    expect_callable(square, "square(x)")
    generator = generator if generator is not None else torch.Generator().manual_seed(0)
    for x in [0.0] + (torch.randn(3, generator=generator, dtype=torch.float64) * 3).tolist():
        expect_close(square(x), x * x, f"square({x})")
    x = torch.randn(5, generator=generator, dtype=torch.float64)
    expect_tensor_close(square(x), x * x, "square of a tensor")
    return "x·x"


@exercise("selftest-descent")
def check_selftest_descent(descend):
    expect_callable(descend, "descend(df, x0, lr, steps)")
    for df, x0, lr, steps in ((lambda x: 2 * x, 3.0, 0.1, 5), (lambda x: x - 1, 0.0, 0.5, 4)):
        got = list(descend(df, x0, lr, steps))
        want = [x0]
        for _ in range(steps):
            want.append(want[-1] - lr * df(want[-1]))
        expect(len(got) == len(want), f"expected {len(want)} iterates, got {len(got)}")
        for k, (g, w) in enumerate(zip(got, want)):
            expect_close(g, w, f"x_{k}")
    return "x ← x − η f′(x)"


@exercise("selftest-grad")
def check_selftest_grad(grad_of_sum_of_squares):
    expect_callable(grad_of_sum_of_squares, "grad_of_sum_of_squares(x)")
    x = torch.tensor([1.0, -2.0, 0.5], dtype=torch.float64)
    expect_tensor_close(without_autograd(grad_of_sum_of_squares)(x.clone()), 2 * x, "gradient")
    return "2x, by hand"


for _label in LABELS:
    CHECKS[_label] = _CHECKS.pop(_label)

SETUP = "import math\n\nimport torch\n\nfrom mathref import checks\n"
SOLUTIONS = {
    "selftest-square": "def square(x):\n    ### BEGIN SOLUTION\n    return x * x\n    ### END SOLUTION\n",
    "selftest-descent": ("def descend(df, x0, lr, steps):\n    ### BEGIN SOLUTION\n    xs = [x0]\n"
                         "    for _ in range(steps):\n        xs.append(xs[-1] - lr * df(xs[-1]))\n"
                         "    return xs\n    ### END SOLUTION\n"),
    "selftest-grad": ("def grad_of_sum_of_squares(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n"
                      "    ### END SOLUTION\n"),
}
CALLS = {"selftest-square": "square", "selftest-descent": "descend",
         "selftest-grad": "grad_of_sum_of_squares"}


def selftest_assignment(solved=True):
    """The self-test notebook: a setup cell, then per exercise a statement, a solution cell
    (tagged ``solution``) and a check cell. ``solved=False`` gives the student version."""
    from mathref.student import make_student_notebook
    cells = [nbformat.v4.new_markdown_cell("# Grader self-test"), nbformat.v4.new_code_cell(SETUP)]
    for label in LABELS:
        cells.append(nbformat.v4.new_markdown_cell(
            f"```{{exercise}} {label} (easy)\n:label: {label}\nWrite it.\n```"))
        solution = nbformat.v4.new_code_cell(SOLUTIONS[label])
        solution.metadata["tags"] = ["solution"]
        cells.append(solution)
        name = "check_" + label.replace("-", "_")
        cells.append(nbformat.v4.new_code_cell(f"checks.{name}({CALLS[label]})"))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb if solved else make_student_notebook(nb)
