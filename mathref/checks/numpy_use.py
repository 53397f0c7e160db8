"""NumPy used where an exercise allows only PyTorch and Python's math module.

The gate sees NumPy where it runs Python code or a C function, or takes a tensor. A ufunc
called on Python floats (np.logaddexp(z1, z2), one float() away from a 0-d tensor) does
neither: a ufunc is an object, not a builtin function, so the profile hook gets no event.
The two online-softmax checkers therefore look for it in two more ways: what the answer's
code names (its globals, closures, defaults and imports, the containers and iterators, the
student's classes, their instances and functions it names, and theirs; the end of a module
attribute chain: np.inf is a float, np.logaddexp a ufunc), and what NumPy itself reports while the answer runs (every
floating-point event of a NumPy function calls back: a log-sum-exp of the check's widely
separated values underflows, a log of an empty state's ℓ = 0 divides by zero). Neither sees
NumPy reached through a string that raises no flag, or run in a fresh contextvars.Context
(NumPy 2's error state is a context variable: there it is the default, and nothing calls
back) that the code does not name; the statements say so. The grader's trusted side
refuses NumPy in these two solution cells by their text (refused_modules in mathref/grade/policy.py).
"""
import builtins
import collections
import collections.abc
import dis
import functools
import inspect
import os
import sys
import types

import torch

from mathref.checks.core import CheckFailure, is_remote

_NUMERIC = ("numpy", "scipy")       # (SciPy's special functions are NumPy ufuncs too)
# a fresh contextvars.Context runs a function where NumPy's error state is its default (NumPy
# 2 keeps it in a context variable): the watch below does not see what runs there
_CONTEXTS = ("contextvars", "_contextvars")
_CONTAINERS = (list, tuple, set, frozenset, dict, types.SimpleNamespace, collections.deque,
               collections.abc.Mapping, collections.abc.Set, collections.abc.Sequence)
# a class made by a class statement (a function or a cell of Python's own is not one; a class
# exec'd without __name__ in its globals says module "builtins" too)
_HEAP_TYPE = 1 << 9
_LIBRARY_DIRS = tuple(os.path.dirname(os.path.abspath(f)) + os.sep for f in (
    os.__file__, torch.__file__,                            # the standard library, PyTorch
    os.path.dirname(os.path.abspath(__file__))))            # mathref
_SITE = os.sep + "site-packages" + os.sep


def _numeric_name(obj):
    """'numpy.logaddexp' for a NumPy (or SciPy) module or object, else None."""
    try:
        if isinstance(obj, types.ModuleType):
            module, name = obj.__name__, ""
        else:
            module = getattr(obj, "__module__", None)
            if not isinstance(module, str):
                module = type(obj).__module__
            name = getattr(obj, "__name__", None)
            name = name if isinstance(name, str) else type(obj).__name__
    except Exception:       # (an object whose attributes raise: not NumPy's)
        return None
    if module.split(".")[0] in _NUMERIC + _CONTEXTS \
            or type(obj).__module__.split(".")[0] in _NUMERIC + _CONTEXTS:
        return f"{module}.{name}" if name else module
    owner = getattr(obj, "__self__", None)      # a bound method: np.logaddexp.__call__
    if owner is not None and owner is not obj and not isinstance(owner, types.ModuleType):
        return _numeric_name(owner)
    return None


def _students_class(cls):
    """Whether ``cls`` is the student's: a method of its own, or defined in a notebook."""
    if any(inspect.isfunction(v) and _students(v.__code__) for v in vars(cls).values()):
        return True
    if cls.__module__ == "builtins" and getattr(builtins, cls.__name__, None) is cls:
        return False        # (float, list: a class exec'd without __name__ says builtins too)
    module = sys.modules.get(cls.__module__)
    path = getattr(module, "__file__", None)
    return cls.__module__ == "__main__" or not isinstance(path, str) or _students_file(path)


def _students(code):
    """Whether ``code`` is the student's (not the standard library's, a package's or mathref's)."""
    return _students_file(code.co_filename)


def _students_file(path):
    if path.startswith("<"):
        return True
    path = os.path.abspath(path)
    return not (_SITE in path or path.startswith(_LIBRARY_DIRS))


def _codes(code):
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def names_numpy(answer):
    """The NumPy (or contextvars) object or import the answer's code names, followed through
    the student's own functions (and their attributes), classes and their instances' attributes,
    closures, defaults, the containers and the standard library's iterators that it names; None
    if there is none."""
    if getattr(answer, "remote", False) or is_remote(answer):
        return None         # (under the grader the answer's code is in another process)
    todo, seen = [answer], set()
    while todo:
        obj = todo.pop()
        if id(obj) in seen or obj is None or isinstance(obj, (int, float, str, bytes, bool)):
            continue
        seen.add(id(obj))
        found = _numeric_name(obj)
        if found:
            return found
        if isinstance(obj, functools.partial):
            todo += [obj.func, *obj.args, *obj.keywords.values()]
            continue
        if inspect.ismethod(obj):
            todo += [obj.__func__, obj.__self__]
            continue
        if isinstance(obj, (staticmethod, classmethod)):
            todo.append(obj.__func__)
            continue
        if isinstance(obj, _CONTAINERS) and not isinstance(obj, torch.Tensor):
            # (a holder: [np.logaddexp], {0: ...}, a namespace, a deque)
            items = vars(obj) if isinstance(obj, types.SimpleNamespace) else obj
            items = list(items.items()) if isinstance(items, collections.abc.Mapping) \
                else list(items)
            todo += [part for item in items[:10000]
                     for part in (item if isinstance(item, tuple) else (item,))]
            continue
        if isinstance(obj, type):
            if _students_class(obj):        # its methods and class attributes
                todo += list(vars(obj).values())
            continue
        if not inspect.isfunction(obj):
            if isinstance(obj, collections.abc.Iterator) and type(obj).__module__ in (
                    "itertools", "builtins"):
                # an iterator of the standard library's (itertools.repeat(np.logaddexp)): what
                # it would give, without taking anything from it
                try:
                    todo += [part for part in obj.__reduce__()[1:] if isinstance(part, tuple)]
                except Exception:
                    pass
                continue
            if not isinstance(obj, types.ModuleType) and _students_class(type(obj)) and (
                    type(obj).__module__ != "builtins" or type(obj).__flags__ & _HEAP_TYPE):
                todo.append(type(obj))      # an object of the student's class: its attributes
                todo += list(getattr(obj, "__dict__", {}).values())
            elif callable(obj) and not isinstance(obj, types.BuiltinFunctionType):
                todo.append(type(obj))      # a callable object of another class
            continue
        todo.append(obj.__dict__.get("__wrapped__"))     # (the checker's wrapper, a decorator)
        if not _students(obj.__code__):
            continue        # a library function: the gate judges what it runs
        todo += list(obj.__dict__.values())     # a holder: f.g = np.logaddexp
        todo += _closure(obj)
        todo += list(obj.__defaults__ or ()) + list((obj.__kwdefaults__ or {}).values())
        for code in _codes(obj.__code__):
            # each global and the end of each chain of module attributes it starts: np.logaddexp
            # is a ufunc, np.inf a float (a constant, not a NumPy function)
            current = None
            for ins in dis.get_instructions(code):
                if ins.opname in ("LOAD_ATTR", "LOAD_METHOD") \
                        and isinstance(current, types.ModuleType):
                    current = getattr(current, ins.argval, None)      # (np.logaddexp, sp.special)
                    continue
                if current is not None:
                    todo.append(current)
                current = None
                if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
                    current = obj.__globals__.get(ins.argval, getattr(builtins, ins.argval, None))
                elif ins.opname == "IMPORT_NAME" \
                        and ins.argval.split(".")[0] in _NUMERIC + _CONTEXTS:
                    return ins.argval
            if current is not None:
                todo.append(current)
    return None


def _closure(function):
    """The values in ``function``'s closure cells (an empty cell has none)."""
    values = []
    for cell in function.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            pass
    return values


def refuse_named_numpy(answer, label, because):
    found = names_numpy(answer)
    if found and found.split(".")[0] in _CONTEXTS:
        raise CheckFailure(
            f"your solution ran code in a contextvars context (its code names {found}), which "
            f"{label} does not allow: there NumPy's error state, which the check watches, is "
            f"not in effect. {because[0].upper() + because[1:]}, with PyTorch's elementary "
            f"operations or Python's math module; no NumPy")
    if found:
        raise CheckFailure(
            f"your solution called NumPy (its code names {found}), which {label} does not "
            f"allow: {because}. It allows PyTorch's elementary operations and Python's math "
            f"module; no NumPy")


def watching_numpy(answer, label, because):
    """``answer`` wrapped so that a NumPy function reporting a floating-point event (underflow,
    overflow, division by zero, invalid) while it runs fails the check."""
    if getattr(answer, "remote", False) or is_remote(answer):
        return answer

    @functools.wraps(answer)
    def call(*args):
        import numpy
        events = []
        # (a lambda: the gate lets the checkers' lambdas run inside the answer)
        with numpy.errstate(all="call", call=lambda kind, flag: events.append(kind)):
            got = answer(*args)
        if events:
            raise CheckFailure(
                f"your solution ran NumPy (a NumPy function reported a floating-point "
                f"{events[0]} on the check's values), which {label} does not allow: {because}. "
                f"It allows PyTorch's elementary operations and Python's math module; no NumPy")
        return got
    return call
