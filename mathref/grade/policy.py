"""What a solution cell may contain: the grader reads each one (its syntax tree) before anything
runs, and refuses, with the line and a reason, what no honest solution needs.

The exercise's rules (no autograd, no library shortcut) are applied in the student's own
process, where the code runs; a process can undo what runs inside it, so this pass, on the
trusted side, removes the ways to reach that machinery: the interpreter's internals (dunder
attributes, frames, ``sys``, ``gc``, ``inspect``, ``ctypes``, ``importlib``), running new code
(``exec``, ``eval``, ``compile``, ``__import__``, loading pickles or compiled extensions),
attribute access by a computed name (also through a library routine, a dunder method Python
calls with a name, a format string or a ``match`` class pattern), threads and processes,
setting attributes of anything but ``self`` (a library's functions and classes are not the
solution's to change; ``self`` is only ever a method's first parameter), and imports outside
:data:`IMPORTS` and, for the standard library, names outside :data:`MEMBERS`. It is a small allowlist over the syntax of
Python, not a sandbox: the sandbox is :mod:`mathref.grade.sandbox`.
"""
import ast
import re
import string

# modules a solution may import (and their submodules, but see DENIED_NAMES)
IMPORTS = ("math", "cmath", "torch", "numpy", "collections", "itertools", "functools", "heapq",
           "bisect", "re", "statistics", "random", "unicodedata", "fractions", "mathref")
# what a solution may take from the standard library's modules (torch, numpy, math, cmath and
# mathref are not listed: all of their public names): no routine that reads or sets attributes
# by names it is given (functools.update_wrapper/wraps, operator.attrgetter, copy's reduce...)
MEMBERS = {
    "functools": {"partial", "reduce", "lru_cache", "cache", "cmp_to_key"},
    "collections": {"Counter", "defaultdict", "deque", "OrderedDict"},
    "itertools": {"accumulate", "batched", "chain", "combinations",
                  "combinations_with_replacement", "compress", "count", "cycle", "dropwhile",
                  "filterfalse", "groupby", "islice", "pairwise", "permutations", "product",
                  "repeat", "starmap", "takewhile", "tee", "zip_longest"},
    "heapq": {"heappush", "heappop", "heapify", "heapreplace", "heappushpop", "nlargest",
              "nsmallest", "merge"},
    "bisect": {"bisect", "bisect_left", "bisect_right", "insort", "insort_left", "insort_right"},
    "re": {"compile", "findall", "finditer", "fullmatch", "match", "search", "split", "sub",
           "subn", "escape", "IGNORECASE", "MULTILINE", "DOTALL", "VERBOSE", "ASCII", "UNICODE",
           "I", "M", "S", "X", "A", "U"},
    "statistics": {"mean", "fmean", "median", "stdev", "pstdev", "variance", "pvariance",
                   "geometric_mean", "harmonic_mean", "mode", "quantiles"},
    "random": {"random", "uniform", "randint", "randrange", "choice", "choices", "shuffle",
               "sample", "gauss", "normalvariate", "seed", "Random"},
    # exact rationals (pure Python); the checkers' gate still refuses them where an exercise
    # does not allow them (mathref.checks.allowances: ch13-swiglu-width does)
    "fractions": {"Fraction"},
    "unicodedata": {"normalize", "category", "name", "lookup", "combining", "east_asian_width",
                    "decimal", "digit", "numeric", "bidirectional", "mirrored"},
}
# dunder methods a class of a solution may define: none that Python calls with a name
# (__getattr__, __setattr__, __set_name__...) or with a protocol's data (__reduce__...)
DUNDER_METHODS = {"__init__", "__call__", "__repr__", "__str__", "__len__", "__getitem__",
                  "__iter__", "__next__", "__contains__"}
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
    "distributed", "collect_env", "bottleneck", "grade", "checks",
    # routines of numpy and torch that run code they are handed: a pickle (numpy.lib.format's
    # read_array, open_memmap), a statement string (torch.utils.benchmark's Timer, timeit), a
    # build (f2py, distutils), a test runner (the grader's attack, H1)
    "read_array", "open_memmap", "benchmark", "Timer", "timeit", "f2py", "distutils", "testing",
    # library routines that get or set attributes by names they are given
    *("update_wrapper", "wraps", "attrgetter", "methodcaller", "format_map", "vformat",
      "get_field", "namedtuple")}
# keyword arguments that make a library routine run code: unpickling
DENIED_KEYWORDS = {"allow_pickle", "pickle_module", "weights_only"}
# a solution cell longer than this is refused before it is parsed (an honest one is a few
# thousand characters; parsing grows with the text: about 0.7 GiB and 20 s per MiB, H2)
MAX_SOURCE = 100_000
_GADGETS = {"update_wrapper", "wraps", "attrgetter", "methodcaller", "namedtuple"}
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
    """``self.name``: the one attribute target a solution may assign or delete (``self`` is
    only ever a method's first parameter: nothing else may bind the name)."""
    return isinstance(node.value, ast.Name) and node.value.id == "self"


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _method_selves(tree):
    """The ``self`` parameters a solution may set attributes on: the first parameter, named
    ``self``, of an undecorated function defined directly in a class body."""
    selves = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and not item.decorator_list \
                        and item.args.args and item.args.args[0].arg == "self" \
                        and not item.args.posonlyargs:
                    selves.add(id(item.args.args[0]))
    return selves


def _binds_self(node):
    """Does ``node`` bind the name ``self`` (other than as a parameter)?"""
    if isinstance(node, ast.Name):
        return node.id == "self" and not isinstance(node.ctx, ast.Load)
    if isinstance(node, ast.alias):
        return (node.asname or node.name.split(".")[0]) == "self"
    if isinstance(node, ast.ExceptHandler):
        return node.name == "self"
    if isinstance(node, (ast.MatchAs, ast.MatchStar)):
        return node.name == "self"
    if isinstance(node, ast.MatchMapping):
        return node.rest == "self"
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        return "self" in node.names
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == "self"
    return False


def _format_problem(node, parents):
    """``.format``: only on a string literal whose fields name no attribute or item."""
    call = parents.get(id(node))
    if not (isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and isinstance(call, ast.Call) and call.func is node):
        return "`.format` of anything but a string literal is not available to a solution"
    pending = [node.value.value]
    try:
        while pending:
            for _, field, spec, _ in string.Formatter().parse(pending.pop()):
                if field is not None and ("." in field or "[" in field):
                    return (f"`.format` with an attribute or item field (`{{{field}}}`) is not "
                            f"available to a solution")
                if spec:
                    pending.append(spec)
    except ValueError:
        return "a malformed format string"
    return None


def _type_test(node, parents):
    """Is ``node`` the class argument of ``isinstance``/``issubclass`` (alone or in a tuple)?"""
    parent = parents.get(id(node))
    if isinstance(parent, ast.Tuple):
        node, parent = parent, parents.get(id(parent))
    return isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) \
        and parent.func.id in ("isinstance", "issubclass") and node in parent.args[1:]


def _structure_problem(node, parents, methods_self, classes, aliases):
    """The checks that need a node's place in the tree (issue 33's red team: H1-H3)."""
    parent = parents.get(id(node))
    if _binds_self(node):
        return ("binding the name `self` is not available to a solution (only a method's "
                "first parameter is `self`)")
    if isinstance(node, ast.arg) and node.arg == "self" and id(node) not in methods_self:
        return ("a parameter named `self` is only available as the first parameter of an "
                "undecorated method")
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
            and node.name.startswith("__") and node.name.endswith("__") \
            and node.name not in DUNDER_METHODS:
        return (f"defining `{node.name}` is not available to a solution (a class may define "
                + ", ".join(sorted(DUNDER_METHODS)) + ")")
    if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) \
            and node.id.startswith("__") and node.id.endswith("__"):
        return f"binding a dunder name (`{node.id}`) is not available to a solution"
    if isinstance(node, ast.ClassDef) and (node.keywords or node.decorator_list):
        return "a class with keywords (metaclass=...) or decorators is not available to a solution"
    if isinstance(node, ast.MatchClass):
        return "class patterns in `match` (attribute access by pattern) are not available to a " \
               "solution"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "type" \
            and (len(node.args) != 1 or node.keywords):
        return "`type` with more than one argument (a new class) is not available to a solution"
    if isinstance(node, ast.Attribute):
        if node.attr == "format":
            return _format_problem(node, parents)
        if node.attr == "__init__" and not (
                isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "super" and not node.value.args):
            return "`.__init__` is only available as `super().__init__`"
        if isinstance(node.value, ast.Name) and node.value.id in aliases:
            module = aliases[node.value.id]
            if node.attr not in MEMBERS[module]:
                return (f"`{module}.{node.attr}` is not available to a solution (from "
                        f"`{module}`: " + ", ".join(sorted(MEMBERS[module])) + ")")
        if isinstance(node.value, ast.Name) and node.value.id in classes:
            return (f"`{node.value.id}.{node.attr}`: a class's attributes are read through its "
                    f"instances (`self.{node.attr}`), not the class")
        if isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name) \
                and node.value.func.id == "type":
            return "attributes of `type(...)` are not available to a solution"
    if isinstance(node, ast.ImportFrom) and node.module in MEMBERS:
        for alias in node.names:
            if alias.name not in MEMBERS[node.module]:
                return (f"`from {node.module} import {alias.name}` is not available to a "
                        f"solution (from `{node.module}`: "
                        + ", ".join(sorted(MEMBERS[node.module])) + ")")
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        if node.id in _GADGETS:     # bound by the setup cell's ``from functools import wraps``
            return f"`{node.id}` is not available to a solution"
        if node.id in aliases and not (isinstance(parent, ast.Attribute) and parent.value is node):
            return (f"the module `{node.id}` is only available as `{node.id}.name` (its "
                    f"allowed names)")
        if node.id in classes and not (
                (isinstance(parent, ast.Call) and parent.func is node)
                or (isinstance(parent, ast.ClassDef) and node in parent.bases)
                or (isinstance(parent, ast.Attribute) and parent.value is node)
                or _type_test(node, parents)):
            return (f"the class `{node.id}` is only available to create instances "
                    f"(`{node.id}(...)`) or as a base class")
    return None


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


def module_bindings(source):
    """{name: module} for the names a cell binds by importing: ``import numpy as np`` binds
    ``np`` to ``numpy``, ``from numpy import exp`` binds ``exp`` to ``numpy``."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return {}
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = node.module.split(".")[0]
    return names


# what a solution may still read from a module its exercise refuses: Python floats
FLOAT_CONSTANTS = {"inf", "nan", "pi", "e"}


def _refused_module_problem(tree, refused, setup):
    """One exercise's own refusal of whole modules (``refused``: top-level names such as
    ``numpy``), read from the syntax tree: importing them, a name the setup cell (``setup``:
    :func:`module_bindings`) binds to them (``np``), an attribute called by one of those names
    (``torch.Tensor.numpy``, ``some_module.np``); ``np.inf`` and the other
    :data:`FLOAT_CONSTANTS` are floats, not the module's functions. (line, reason) or None."""
    bound = {name for name, module in setup.items() if module in refused}
    words = set(refused) | bound
    constants = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                 and node.attr in FLOAT_CONSTANTS and isinstance(node.ctx, ast.Load)}
    for node in ast.walk(tree):
        what = None
        if isinstance(node, ast.Import):
            what = next((a.name for a in node.names if a.name.split(".")[0] in refused), None)
            what = what and f"`import {what}`"
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in refused:
                what = f"`from {node.module} import ...`"
            else:
                what = next((f"`from {node.module} import {a.name}`" for a in node.names
                             if a.name in words), None)
        elif isinstance(node, ast.Name) and node.id in bound and id(node) not in constants:
            what = f"`{node.id}` (the setup cell's {setup[node.id]})"
        elif isinstance(node, ast.Attribute) and node.attr in words:
            what = f"`.{node.attr}`"
        if what:
            return getattr(node, "lineno", 0), (
                f"{what}: this exercise does not allow " + ", ".join(sorted(refused))
                + " (only its float constants: " + ", ".join(sorted(FLOAT_CONSTANTS)) + ")")
    return None


def check(source, modules=(), refused=(), setup=None):
    """Raise :class:`Refused` at the first construct of ``source`` a solution may not use.
    ``modules``: names the setup cell binds by importing (``sys`` there is still refused
    here). ``refused``: modules the exercise itself does not allow (its checker's
    ``refused_modules``), with ``setup`` the setup cell's :func:`module_bindings`. A syntax
    error is left to Python (the worker reports it as the cell's error)."""
    if len(source) > MAX_SOURCE:
        raise Refused(source.count("\n") + 1, f"a solution cell of {len(source)} characters: "
                                               f"at most {MAX_SOURCE} are read")
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    if refused:
        found = _refused_module_problem(tree, set(refused), setup or {})
        if found:
            raise Refused(*found)
    modules = set(modules) | imported_names(source)
    aliases = {name: name for name in modules if name in MEMBERS}   # names bound to MEMBERS'
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MEMBERS:
                    aliases[alias.asname or alias.name] = alias.name
    called = {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    methods_self = _method_selves(tree)
    classes = {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}
    nodes = sorted(ast.walk(tree), key=lambda n: (getattr(n, "lineno", 0),       # the first
                                                  getattr(n, "col_offset", 0),   # in reading
                                                  getattr(n, "end_col_offset", 0)))  # order
    for node in nodes:
        line = getattr(node, "lineno", 0)
        problem = _structure_problem(node, parents, methods_self, classes, aliases)
        if problem:
            raise Refused(line, problem)
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
        elif isinstance(node, ast.keyword) and node.arg in DENIED_KEYWORDS:
            raise Refused(line, f"the keyword argument `{node.arg}` (loading a pickle runs the "
                                f"code inside it) is not available to a solution")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and _DUNDER_TEXT.search(node.value):
            raise Refused(line, "a string naming a dunder attribute is not available to a "
                                "solution")
