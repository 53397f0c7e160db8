"""A call stopped after a fixed number of executed Python lines: the same verdict on every machine
for an answer that loops for ever (a closed form runs a few dozen lines)."""
import os
import site
import sys
import sysconfig
import types

import torch


class _LineBudgetSpent(BaseException):
    """Raised inside the student's code once it has run too many lines of Python."""


_LIBRARY_DIRS = (os.path.dirname(torch.__file__) + os.sep,                     # torch/
                 os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep)  # mathref/
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
# the installed packages' folders themselves (site-packages, Colab's dist-packages), not any
# folder that an answer names site-packages
_SITE_DIRS = tuple(sorted({os.path.abspath(path) + os.sep for path in (
    getattr(site, "getsitepackages", list)() + [site.getusersitepackages()]
    + [sysconfig.get_paths()[key] for key in ("purelib", "platlib")])}))


def _importlib_code():
    """The code objects of Python's own import machinery (frozen: their file names start with
    "<frozen importlib", which code compiled from a string can copy, their objects not)."""
    found, todo = set(), []
    for name in ("_frozen_importlib", "_frozen_importlib_external"):
        for value in vars(sys.modules.get(name, types.ModuleType(name))).values():
            todo.extend(vars(value).values() if isinstance(value, type) else [value])
    while todo:
        value = todo.pop()
        value = getattr(value, "__func__", value)
        code = getattr(value, "__code__", value)
        if isinstance(code, types.CodeType) and code not in found:
            found.add(code)
            todo.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return frozenset(found)


_IMPORTLIB_CODE = _importlib_code()


_ON_DISK = {}     # file name → the code objects its source compiles to (the module's and each function's)
_OWN_CODE = {}    # id(code) → (code, whether it is among them)


def _compiled_from_disk(code, in_import):
    """Whether ``code`` is the library's own: one of the code objects that the source file it
    names compiles to. A function compiled from a string under a torch/ or mathref/ file name
    (to have its lines taken for the library's) is not, since its code differs from that file's.
    Code that runs inside an import the call sets off (``in_import()``) is taken as the
    library's without compiling its file: a lazy import of torch._dynamo runs hundreds."""
    known = _OWN_CODE.get(id(code))
    if known is None or known[0] is not code:
        if in_import():
            return True
        filename = code.co_filename
        if filename not in _ON_DISK:
            found, todo = set(), []
            try:
                with open(filename, "rb") as source:
                    todo.append(compile(source.read(), filename, "exec", dont_inherit=True))
            except (OSError, SyntaxError, ValueError):
                pass
            while todo:
                inner = todo.pop()
                found.add(inner)
                todo.extend(c for c in inner.co_consts if isinstance(c, types.CodeType))
            _ON_DISK[filename] = found
        known = _OWN_CODE[id(code)] = (code, code in _ON_DISK[filename])
    return known[1]


def _imported_during_call(frame, home):
    """Whether ``frame`` runs inside an import started after ``home`` (the budget's own frame):
    a module that the call imports lazily, such as torch._dynamo, which PyTorch imports on the
    first ``torch.tensor`` under a TorchFunctionMode (with sympy and mpmath, over 200,000 lines
    of import machinery, tokenize and module set-up)."""
    frame = frame.f_back                # (above the frame itself: an import that called it)
    while frame is not None and frame is not home:
        if frame.f_code.co_filename.startswith("<frozen importlib") \
                and frame.f_code in _IMPORTLIB_CODE:
            return True
        frame = frame.f_back
    return False


def with_line_budget(answer, args, budget=200_000):
    """answer(*args), stopped once it has executed ``budget`` lines of Python outside torch and
    mathref: a closed form needs a few dozen, a loop over 2·10¹⁰ steps never ends. Counting
    lines (sys.settrace) instead of seconds makes the verdict the same on every machine and in
    every thread. Library code is not counted only if it is what its file on disk compiles to
    (code compiled from a string under a torch/ or mathref/ file name is counted). Not counted
    either: library code (the standard library, the installed packages' folders, code compiled
    from a string) that runs inside an import the call sets off (below a frame of Python's own
    import machinery, by its code object, not its file name), which is the set-up of a module,
    not the answer's work; a module of the answer's own, imported from any other folder, is
    counted. Under the grader the student's code runs in another process, which this tracer
    does not see; there the grader's per-exercise time limit stops such a loop."""
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
            if _compiled_from_disk(frame.f_code, lambda: _imported_during_call(frame, home)):
                return None
        elif filename.startswith(("<", _STDLIB_DIR) + _SITE_DIRS) \
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
