"""The book's math reference and pitfalls pages: complete, pointing at things that exist, and
identical to what book/make_reference_pages.py generates."""
import ast
import importlib
import importlib.util
import inspect
import json
import pkgutil
import re

import pytest

import mathref
from mathref.checks import CHECKS
from tests.notebooks import ROOT

spec = importlib.util.spec_from_file_location("make_reference_pages",
                                              ROOT / "book" / "make_reference_pages.py")
pages = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pages)
ENTRIES, Entry = pages.ENTRIES, pages.Entry  # the registry, book/math_reference.py


def public_callables():
    """"module.name" for every function and class a mathref module exports (its __all__) or
    defines without a leading underscore (the exercise checkers of mathref.checks have their
    own table, from CHECKS)."""
    names = set()
    for info in pkgutil.iter_modules(mathref.__path__):
        if info.name.startswith("_") or info.name == "checks":
            continue
        module = importlib.import_module(f"mathref.{info.name}")
        assert hasattr(module, "__all__"), f"mathref.{info.name} has no __all__"
        defined = [n for n, o in vars(module).items()
                   if not n.startswith("_") and getattr(o, "__module__", None) == module.__name__]
        for name in {*module.__all__, *defined}:
            obj = getattr(module, name)
            if inspect.isfunction(obj) or inspect.isclass(obj):
                names.add(f"{info.name}.{name}")
    return names


def myst_labels():
    labels = set()
    for path in [*ROOT.glob("notebooks/*.ipynb"), *ROOT.glob("book/*.md")]:
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            text = path.read_text(encoding="utf-8")
        labels |= set(re.findall(r"^\(([^)\s]+)\)=\s*$", text, re.M))
    return labels


def named_tests():
    """{"test_file.py::test_name": source of that file} for every test function."""
    found = {}
    for path in ROOT.glob("tests/test_*.py"):
        source = path.read_text(encoding="utf-8")
        for node in ast.parse(source).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                found[f"{path.name}::{node.name}"] = source
    return found


def test_every_public_function_has_exactly_one_entry():
    listed = [e.function for e in ENTRIES]
    duplicates = sorted({f for f in listed if listed.count(f) > 1})
    assert not duplicates, f"listed twice in book/math_reference.py: {duplicates}"
    missing = sorted(public_callables() - set(listed))
    assert not missing, f"public mathref functions with no entry in book/math_reference.py: {missing}"


def test_every_entry_names_a_real_function_section_and_test():
    public, labels, tests = public_callables(), myst_labels(), named_tests()
    problems = []
    assert all(isinstance(e, Entry) for e in ENTRIES)
    for e in ENTRIES:
        module, name = e.function.split(".")
        mentioned = name if name != "main" else f"mathref.{module}"
        if e.function not in public:
            problems.append(f"{e.function}: not a public function or class of mathref")
        elif not e.name:
            problems.append(f"{e.function}: no name")
        elif e.section not in labels:
            problems.append(f"{e.function}: no section labelled ({e.section})=")
        elif e.test not in tests:
            problems.append(f"{e.function}: no test tests/{e.test}")
        elif not re.search(rf"\b{re.escape(mentioned)}\b", tests[e.test]):
            problems.append(f"{e.function}: tests/{e.test.split('::')[0]} never mentions {mentioned}")
    assert not problems, "\n".join(problems)


def test_equations_are_well_formed_latex():
    for e in ENTRIES:
        if e.equation is None:
            continue
        assert "$" not in e.equation, f"{e.function}: write the LaTeX without $"
        depth = 0
        for ch in e.equation.replace(r"\{", "").replace(r"\}", ""):
            depth += {"{": 1, "}": -1}.get(ch, 0)
            assert depth >= 0, f"{e.function}: unbalanced braces"
        assert depth == 0, f"{e.function}: unbalanced braces"


def test_every_exercise_checker_is_in_checks():
    defined = {name for name in dir(mathref.checks) if name.startswith("check_ch")}
    assert defined == {fn.__name__ for fn in CHECKS.values()}


def test_every_pitfall_callout_is_labelled_and_listed():
    text = "\n".join(
        "".join(c["source"]) for p in sorted(ROOT.glob("notebooks/*.ipynb"))
        for c in json.loads(p.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "markdown")
    callouts = re.findall(r"^```+\{admonition\} Pitfall:", text, re.M)
    found = pages.pitfalls()
    assert len(found) == len(callouts) >= 45
    assert len({label for _, label, _ in found}) == len(found), "duplicate pitfall labels"


@pytest.mark.parametrize("name", sorted(pages.PAGES))
def test_generated_page_is_up_to_date(name):
    expected = getattr(pages, pages.PAGES[name])()
    actual = (ROOT / "book" / name).read_text(encoding="utf-8")
    assert actual == expected, f"book/{name} is out of date: run python book/make_reference_pages.py"
