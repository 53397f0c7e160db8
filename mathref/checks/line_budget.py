"""A call stopped after a fixed number of executed Python lines: the same verdict on every machine
for an answer that loops for ever (a closed form runs a few dozen lines)."""
import os
import sys

import torch


class _LineBudgetSpent(BaseException):
    """Raised inside the student's code once it has run too many lines of Python."""


_LIBRARY_DIRS = (os.path.dirname(torch.__file__) + os.sep,                     # torch/
                 os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)  # mathref/
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_SITE = os.sep + "site-packages" + os.sep


def _imported_during_call(frame, home):
    """Whether ``frame`` runs inside an import started after ``home`` (the budget's own frame):
    a module that the call imports lazily, such as torch._dynamo, which PyTorch imports on the
    first ``torch.tensor`` under a TorchFunctionMode (with sympy and mpmath, over 200,000 lines
    of import machinery, tokenize and module set-up)."""
    while frame is not None and frame is not home:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def with_line_budget(answer, args, budget=200_000):
    """answer(*args), stopped once it has executed ``budget`` lines of Python outside torch and
    mathref: a closed form needs a few dozen, a loop over 2·10¹⁰ steps never ends. Counting
    lines (sys.settrace) instead of seconds makes the verdict the same on every machine and in
    every thread. Not counted either: library code (the standard library, site-packages, code
    compiled from a string) that runs inside an import the call sets off, which is the set-up
    of a module, not the answer's work. Under the grader the student's code runs in another
    process, which this tracer does not see; there the grader's per-exercise time limit stops
    such a loop."""
    left = [budget]
    home = sys._getframe()

    def local(frame, event, arg):
        if event == "line":
            left[0] -= 1
            if left[0] < 0:
                raise _LineBudgetSpent
        return local

    def tracer(frame, event, arg):
        filename = frame.f_code.co_filename
        if filename.startswith(_LIBRARY_DIRS):
            return None
        if (filename.startswith(("<", _STDLIB_DIR)) or _SITE in filename) \
                and _imported_during_call(frame, home):
            return None
        return local

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        return answer(*args), False
    except _LineBudgetSpent:
        return None, True
    finally:
        sys.settrace(previous)
