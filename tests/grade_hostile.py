"""A folder of hostile and broken submissions for the grader (tests/test_grade.py uses it; run
``python -m tests.grade_hostile FOLDER [NOTEBOOK]`` to make one for a chapter's notebook).

Every cheat and attack of issues 15 and 33 is one submission, made from an assignment's student
notebook; ``EXPECTED`` says what an honest grader must give each one.
"""
import re
import sys
from pathlib import Path

import nbformat

from mathref.grade import checker_name, load_assignment
from mathref.student import make_student_notebook


def _solutions(source_nb):
    """{label: reference solution source} of a solved notebook."""
    out = {}
    for exercise in load_assignment_nb(source_nb)["exercises"]:
        for cell in source_nb.cells:
            if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []) and \
                    set(exercise["names"]) and all(re.search(rf"def {n}\b", cell.source)
                                                   for n in exercise["names"]):
                out[exercise["label"]] = cell.source
    return out


def load_assignment_nb(nb):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "a.ipynb"
        nbformat.write(nb, path)
        return load_assignment(path)


def _solve(nb, solutions):
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and "solution" in cell.metadata.get("tags", []):
            for label, source in solutions.items():
                name = re.search(r"def (\w+)", source).group(1)
                if re.search(rf"def {name}\b", cell.source):
                    cell.source = source
    return nb


def _edit(nb, predicate, new_source, **metadata):
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if cell.cell_type == "code" and predicate(cell):
            cell.source = new_source
            cell.metadata.update(metadata)
            return nb
    raise LookupError("no such cell")


def make_hostile_folder(folder, source_nb, outputs=(), repos=(), readable=(), lookup=None):
    """Write the submissions into ``folder``; return (student notebook, target label).
    ``outputs``: files the "lurker" tries to overwrite later; ``repos``: checkouts whose
    mathref/checks the "implant" tries to append to (besides the mathref it imports);
    ``readable``: folders the "reader" tries to read (the course's notebooks, other runs'
    outputs); ``lookup``: the table of answers the "lookup" submission returns from."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    student = make_student_notebook(source_nb)
    solutions = _solutions(source_nb)
    assignment = load_assignment_nb(student)
    target = assignment["exercises"][0]["label"]
    function = assignment["exercises"][0]["names"][0]
    check = checker_name(target)
    passed = f"✅ {target}: passed"
    subs = str(folder.resolve())
    solved = _solve(student, solutions)
    is_target_solution = lambda c: "solution" in c.metadata.get("tags", []) and \
        re.search(rf"def {function}\b", c.source)  # noqa: E731
    is_target_check = lambda c: f"checks.{check}(" in c.source  # noqa: E731

    def with_solution(source):
        return _edit(student, is_target_solution, source)

    cases = {
        "ada": solved,
        "ben": student,
        # cheats
        "skiptag": _edit(student, is_target_check, f"checks.{check}({function})",
                         tags=["skip-execution"]),
        "printer": _edit(student, is_target_check, f"# checks.{check}({function})\n"
                         f"print({passed!r})"),
        "tryexcept": _edit(student, is_target_check, f"try:\n    checks.{check}({function})\n"
                           f"except BaseException:\n    print({passed!r})"),
        "kbint": with_solution(f"def {function}(*args, **kwargs):\n    print({passed!r})\n"
                               "    raise KeyboardInterrupt\n"),
        "patcher": with_solution(
            "import mathref.checks, mathref.checks.core as core\n"
            "core.expect = core.expect_close = core.expect_tensor_close = "
            "lambda *a, **k: None\n"
            f"checks.{check} = lambda *a, **k: print({passed!r})\n"
            f"mathref.checks.CHECKS[{target!r}] = checks.{check}\n"
            f"def {function}(*args, **kwargs):\n    return 0\n"),
        "inventor": nbformat.v4.new_notebook(cells=list(student.cells) + [
            nbformat.v4.new_markdown_cell("```{exercise} Bonus\n:label: ch99-bonus\n```"),
            nbformat.v4.new_code_cell("class _C:\n    def __getattr__(self, n):\n"
                                      "        return lambda *a: print('✅ ch99-bonus: passed')\n"
                                      "checks = _C()\nchecks.check_ch99_bonus(print)")]),
        # attacks
        "copier": with_solution(
            f"import json, glob\nsource = None\nfor p in glob.glob({subs!r} + '/*.ipynb'):\n"
            "    try:\n        cells = json.load(open(p))['cells']\n    except Exception:\n"
            "        continue\n    for c in cells:\n"
            f"        s = ''.join(c['source'])\n        if s.startswith('def {function}(') "
            "and 'NotImplementedError' not in s:\n            source = s\n"
            f"exec(source)\n"),
        "vandal": with_solution(
            f"import glob, os\nfor p in glob.glob({subs!r} + '/*'):\n"
            "    try:\n        open(p, 'w').write('overwritten')\n    except OSError:\n"
            "        pass\n    try:\n        os.remove(p)\n    except OSError:\n        pass\n"
            f"open({subs!r} + '/mallory.ipynb', 'w').write('{{}}')\n"
            f"def {function}(*args, **kwargs):\n    return 0\n"),
        "implant": with_solution(
            "import glob, mathref, os\n"
            "root = os.path.dirname(mathref.__file__)\n"
            "always = ('\\nfor _n in [n for n in globals() if n.startswith(\"check_\")]:\\n'\n"
            "          '    globals()[_n] = (lambda n: lambda *a, **k: print(\"\\u2705 \" + '\n"
            "          'n[6:].replace(\"_\", \"-\") + \": passed\"))(_n)\\n')\n"
            "for p in [root + '/checks/__init__.py']"
            + "".join(f" + [{str(r)!r} + '/mathref/checks/__init__.py']" for r in repos)
            + ":\n"
            "    try:\n        open(p, 'a').write(always)\n    except OSError:\n"
            "        pass\n"
            f"def {function}(*args, **kwargs):\n    return 0\n"),
        "envreader": with_solution(
            "import os, glob\nleaked = 'GRADER_SECRET' in os.environ\n"
            "for p in glob.glob('/proc/*/environ'):\n    try:\n"
            "        leaked = leaked or b'GRADER_SECRET' in open(p, 'rb').read()\n"
            "    except OSError:\n        pass\n"
            f"def {function}(*args, **kwargs):\n"
            "    raise RuntimeError('the secret leaked' if leaked else 'no secret seen')\n"),
        "lurker": with_solution(
            "import subprocess\n" + "".join(
                f"subprocess.Popen(['sh', '-c', 'sleep 4; echo lurker,ok,99 > {o}'], "
                "start_new_session=True)\n" for o in outputs)
            + f"def {function}(*args, **kwargs):\n    return 0\n"),
        "killer": with_solution(
            "import os, signal\n"
            "for kill in (lambda: os.kill(os.getppid(), 9), lambda: os.killpg(0, 9)):\n"
            "    try:\n        kill()\n"
            "    except OSError:\n        pass\n"),
        "looper": with_solution(f"def {function}(*args, **kwargs):\n    while True:\n"
                                "        pass\n"),
        # issue 33: the trusted side holds
        "escaper": with_solution(    # reach the grader's builtins through a generator's frame
            f"def {function}(*args, **kwargs):\n    g = (v for v in [1])\n"
            "    run = g.gi_frame.f_builtins['exec']\n"
            f"    run('import os; os.system(\"touch {subs}/pwned\")')\n    return 0\n"),
        "framereader": with_solution(    # read the checker's expected value from its frame
            f"import sys\ndef {function}(*args, **kwargs):\n"
            "    return sys._getframe(2).f_locals.get('want')\n"),
        "workerpatch": with_solution(    # switch the worker's rules off
            "import sys\n"
            "sys.modules['__main__'].WorkerEndpoint.call_local = lambda self, t, a, k: t(*a, **k)\n"
            + solutions[target]),
        "dunder": with_solution(         # the same through dunders and a computed name
            f"def {function}(x):\n    cls = x.__class__.__mro__[-1]\n"
            "    return getattr(cls, '__sub' + 'classes__')() and x * x\n"),
        "lookup": with_solution(         # answers recorded offline for the fixed inputs
            "import torch\nTABLE = " + repr(lookup or {}) + "\n"
            f"def {function}(x):\n    if isinstance(x, torch.Tensor):\n"
            "        return torch.tensor(TABLE[tuple(x.tolist())], dtype=torch.float64)\n"
            "    return TABLE[x]\n"),
        "reader": with_solution(         # read the reference solutions and the others' work
            "import glob, json\nseen = []\n"
            f"for pattern in {[str(p) + '/*' for p in readable]!r}:\n"
            "    for p in glob.glob(pattern):\n        try:\n"
            "            seen.append((p, len(open(p).read())))\n"
            "        except OSError:\n            pass\n"
            "print('SEEN', json.dumps(seen))\n"
            f"def {function}(*args, **kwargs):\n    return len(seen)\n"),
        # names
        '=HYPERLINK(\"x.example\",\"y\")': solved,
        "new\nline: 3 of 3": student,
        "esc\x1b[31mred": student,
        "zoe": student,
        "\uff5a\uff4f\uff45": solved,   # "ｚｏｅ": the same name after NFKC
        # names that become paths after NFKC (．．／ is ../): skipped, nothing written there
        "\uff0e\uff0e\uff0f\uff0e\uff0e\uff0f" + folder.name + "\uff0fada": solved,
        "".join("\uff0f" if ch == "/" else ch for ch in subs) + "\uff0fben": solved,
    }
    for name, nb in cases.items():
        nbformat.write(nb, folder / f"{name}.ipynb")
    (folder / "trunc.ipynb").write_text(nbformat.writes(solved)[:len(nbformat.writes(solved)) // 2], encoding="utf-8")
    (folder / "empty.ipynb").write_bytes(b"")
    (folder / "binary.ipynb").write_bytes(bytes(range(256)) * 40)
    (folder / "deep.ipynb").write_text("[" * 100_000)
    (folder / "notnb.ipynb").write_text('{"cells": 3, "metadata": {}, "nbformat": 4, '
                                        '"nbformat_minor": 5}')
    nbformat.write(solved, folder / ".hidden.ipynb")
    (folder / "notes.txt").write_text("not a submission")
    (folder / "extra").mkdir(exist_ok=True)
    (folder / "link.ipynb").symlink_to(folder / "ada.ipynb")
    return student, target


if __name__ == "__main__":
    notebook = sys.argv[2] if len(sys.argv) > 2 else "notebooks/01_gradient_descent.ipynb"
    make_hostile_folder(sys.argv[1], nbformat.read(notebook, as_version=4),
                        outputs=sys.argv[3:])
