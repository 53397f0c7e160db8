"""What a solution cell may contain: the grader reads each one (its syntax tree) before anything
runs, and refuses, with the line and a reason, what no honest solution needs.

The exercise's rules (no autograd, no library shortcut) are applied in the student's own
process, where the code runs; a process can undo what runs inside it, so this pass, on the
trusted side, removes the ways to reach that machinery: the interpreter's internals (dunder
attributes, frames, ``sys``, ``gc``, ``inspect``, ``ctypes``, ``importlib``), running new code
(``exec``, ``eval``, ``compile``, ``__import__``, loading pickles or compiled extensions),
attribute access by a computed name, threads and processes, setting attributes of anything but
``self`` (a library's functions and classes are not the solution's to change), and imports
outside :data:`IMPORTS`. It is a small allowlist over the syntax of
Python, not a sandbox: the sandbox is :mod:`mathref.grade.sandbox`.
"""
import ast
import re

# modules a solution may import (and their submodules, but see DENIED_NAMES)
IMPORTS = ("math", "cmath", "torch", "numpy", "collections", "itertools", "functools", "heapq",
           "bisect", "re", "statistics", "random", "unicodedata", "copy", "mathref")
# built-in functions a solution may not use (getattr & co. only with a constant name)
DENIED_BUILTINS = {"exec", "eval", "compile", "globals", "vars", "locals", "breakpoint",
                   "getattr", "setattr", "delattr", "__import__", "open", "input"}
# modules a solution may not reach, by import, by a name the setup cell bound, or as an
# attribute (``torch.sys``)
DENIED_MODULES = {"sys", "os", "gc", "inspect", "ctypes", "importlib", "builtins", "threading",
                  "multiprocessing", "subprocess", "signal", "marshal", "pickle", "types",
                  "code", "codeop", "runpy", "operator", "string", "typing", "dataclasses",
                  "weakref", "pathlib", "shutil", "socket", "resource", "io", "atexit",
                  "faulthandler", "tracemalloc", "concurrent", "asyncio"}
# attributes (and module path parts) a solution may not read: frames and tracing, loading
# code or pickles, compiling, changing how torch dispatches, the grader and its checkers
DENIED_ATTRIBUTES = DENIED_MODULES | {
    "setprofile", "settrace", "gettrace", "getprofile", "f_globals", "f_locals", "f_back",
    "f_builtins", "f_code", "f_trace", "gi_frame", "gi_code", "gi_yieldfrom", "cr_frame",
    "cr_code", "ag_frame", "ag_code", "tb_frame", "tb_next",
    "load", "loads", "load_library", "load_inline", "cpp_extension", "jit", "package", "hub",
    "ctypeslib", "serialization", "library", "compile", "compiler", "export", "fx", "overrides",
    "distributed", "collect_env", "bottleneck", "grade", "checks"}
# the one name with underscores a course exercise reads: mathref.autograd.Value's fields
PRIVATE_ALLOWED = {"_prev", "_backward", "_op"}
# dunder attributes an honest class may use
DUNDER_ALLOWED = {"__init__", "__name__"}
_DUNDER_TEXT = re.compile(r"__\w+__")
_CALLED_BY_CONSTANT = {"getattr", "setattr", "delattr"}


class Refused(Exception):
    """A solution cell the grader will not run: ``line`` and ``reason``."""

    def __init__(self, line, reason):
        super().__init__(f"line {line}: {reason}")
        self.line, self.reason = line, reason


def _attribute_problem(name):
    if name in DENIED_ATTRIBUTES:
        return f"`{name}` is not available to a solution"
    if name.startswith("__") and name.endswith("__"):
        if name not in DUNDER_ALLOWED:
            return f"dunder attributes (`{name}`) are not available to a solution"
    elif name.startswith("_") and name not in PRIVATE_ALLOWED:
        return f"private attributes (`{name}`) are not available to a solution"
    return None


def _module_problem(module):
    parts = module.split(".")
    if parts[0] not in IMPORTS:
        return (f"`import {module}`: a solution may import only "
                + ", ".join(IMPORTS) + " (and their submodules)")
    for part in parts[1:]:
        problem = _attribute_problem(part)
        if problem:
            return f"`import {module}`: {problem}"
    return None


def _on_self(node):
    """``self.name``: the one attribute target a solution may assign or delete."""
    return isinstance(node.value, ast.Name) and node.value.id == "self"


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def imported_names(source):
    """The names a cell binds by importing (``import torch.nn as nn`` binds ``nn``)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


def check(source, modules=()):
    """Raise :class:`Refused` at the first construct of ``source`` a solution may not use.
    ``modules``: names the setup cell binds by importing (``sys`` there is still refused
    here). A syntax error is left to Python (the
    worker reports it as the cell's error)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    modules = set(modules) | imported_names(source)
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    nodes = sorted(ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0),       # the first
                                                  getattr(n, "col_offset", 0),   # in reading
                                                  getattr(n, "end_col_offset", 0)))  # order
    for node in nodes:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Import):
            for alias in node.names:
                problem = _module_problem(alias.name)
                if problem:
                    raise Refused(line, problem)
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module:
                raise Refused(line, "relative imports are not available to a solution")
            problem = _module_problem(node.module)
            for alias in node.names:
                problem = problem or (_attribute_problem(alias.name) if alias.name != "*" else
                                      f"`from {node.module} import *` is not available")
            if problem:
                raise Refused(line, problem)
        elif isinstance(node, ast.Name):
            if node.id in _CALLED_BY_CONSTANT and id(node) in called:
                continue        # checked at the call, below
            if node.id in DENIED_BUILTINS:
                raise Refused(line, f"`{node.id}` is not available to a solution")
            if node.id in ("checks", "grade"):
                raise Refused(line, f"`{node.id}` (the checkers, the grader) is not available "
                                    f"to a solution")
            if node.id in DENIED_MODULES and node.id in modules:
                raise Refused(line, f"the module `{node.id}` is not available to a solution")
            if node.id.startswith("__") and node.id.endswith("__") and \
                    isinstance(node.ctx, ast.Load) and node.id not in DUNDER_ALLOWED:
                raise Refused(line, f"dunder names (`{node.id}`) are not available to a "
                                    f"solution")
        elif isinstance(node, ast.Attribute):
            problem = _attribute_problem(node.attr)
            if problem:
                raise Refused(line, f"attribute `.{node.attr}`: {problem}")
            if isinstance(node.ctx, (ast.Store, ast.Del)) and not _on_self(node):
                raise Refused(line, f"assigning or deleting `{ast.unparse(node)}`: a solution "
                                    f"may set attributes of `self` only (a library's are not "
                                    f"its to change)")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in _CALLED_BY_CONSTANT:
            name = node.args[1] if len(node.args) > 1 else None
            if not (isinstance(name, ast.Constant) and isinstance(name.value, str)):
                raise Refused(line, f"`{node.func.id}` with a computed attribute name is not "
                                    f"available to a solution")
            problem = _attribute_problem(name.value)
            if problem:
                raise Refused(line, f"`{node.func.id}(…, {name.value!r})`: {problem}")
            if node.func.id != "getattr" and not (
                    isinstance(node.args[0], ast.Name) and node.args[0].id == "self"):
                raise Refused(line, f"`{node.func.id}` on something other than `self` is not "
                                    f"available to a solution")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _DUNDER_TEXT.search(node.value):
            raise Refused(line, "a string naming a dunder attribute is not available to a "
                                "solution")
