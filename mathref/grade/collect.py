"""What to grade: the assignment's exercises (labels, check cells, the names each solution
defines) and the students' files (which are submissions, read safely, and the names they are
graded under)."""
import ast
import hashlib
import json
import os
import re
import stat
import unicodedata
from pathlib import Path

import nbformat

EXERCISE_LABEL = re.compile(r"\{exercise(?:-start)?\}[^\n]*\n(?:\s*:[^\n]*\n)*?\s*:label:\s*(\S+)")
_CHECK_CALL = re.compile(r"checks\.(check_\w+)\s*\(")
VERDICTS = ("pass", "fail", "not attempted", "error", "timeout", "missing", "not run")
MAX_SUBMISSION_BYTES = 20 * 2 ** 20


def exercise_labels(nb):
    """The labels of the ``{exercise}`` blocks in notebook ``nb``, in order."""
    return [label for c in nb.cells if c.cell_type == "markdown"
            for label in EXERCISE_LABEL.findall(c.source)]



def checker_name(label):
    """``ch06-adam-step`` -> ``check_ch06_adam_step``, the name of its checker."""
    return "check_" + label.replace("-", "_")



def check_calls(nb):
    """``(cell index, label)`` for every ``checks.check_<label>(`` call in a code cell.

    Labels are recovered from the notebook's ``{exercise}`` blocks, else by turning the
    underscores of the checker's name back into dashes (the labels' convention)."""
    known = {checker_name(label): label for label in exercise_labels(nb)}
    calls = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for name in _CHECK_CALL.findall(cell.source):
            calls.append((index, known.get(name, name[len("check_"):].replace("_", "-"))))
    return calls



def _defined_names(source):
    """Top-level names a cell defines (functions, classes, assignments); None if it does not
    parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for leaf in ast.walk(target):
                    if isinstance(leaf, ast.Name):
                        names.add(leaf.id)
    return names



def _is_solution(cell):
    return cell.cell_type == "code" and "solution" in cell.metadata.get("tags", [])



def _up_to_check_call(source, label):
    """The check cell's source up to the statement that calls the checker (what follows, e.g.
    a plot of the student's function, is not needed to grade and could only fail or hang)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    call = re.compile(r"checks\." + checker_name(label) + r"\s*\(")
    for i, node in enumerate(tree.body):
        if call.search(ast.get_source_segment(source, node) or ""):
            return ast.unparse(ast.Module(body=tree.body[: i + 1], type_ignores=[]))
    return source



STUB = "raise NotImplementedError()"   # what mathref.student leaves in a solution cell


def load_assignment(path):
    """What the grader takes from the instructor's notebook: ``{"path", "setup", "exercises"}``
    with, per exercise (in the notebook's order), its ``label``, ``checker`` name, ``check``
    cell source, the ``names`` its solution cell defines and, where that cell is a student
    notebook's stub (it raises NotImplementedError), the ``stub`` itself (else None)."""
    nb = nbformat.read(Path(path), as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    if not code:
        raise ValueError(f"{path}: no code cells")
    exercises, seen, previous_check = [], set(), -1
    for index, label in check_calls(nb):
        if label in seen:
            continue
        seen.add(label)
        before = [c for c in nb.cells[previous_check + 1:index] if _is_solution(c)]
        previous_check = index
        names = _defined_names(before[-1].source) if before else None
        stub = before[-1].source if before and STUB in before[-1].source else None
        exercises.append({"label": label, "checker": checker_name(label),
                          "check": _up_to_check_call(nb.cells[index].source, label),
                          "names": sorted(names or []), "stub": stub})
    if not exercises:
        raise ValueError(f"{path}: no check cells (checks.check_<label>(...))")
    return {"path": str(path), "setup": code[0].source, "exercises": exercises,
            "dtype": default_dtype(nb)}


# the default dtypes a chapter may set for its checks (the grader applies the chapter's)
DTYPES = ("float32", "float64")


def default_dtype(nb):
    """The default dtype in force at the chapter's first check cell: the last top-level
    ``torch.set_default_dtype(torch.<dtype>)`` of the instructor's notebook before it (chapter 6
    sets float64), else float32. Its check cells run under it in the notebook, so the grader
    calls the answers and runs the checkers under it too (chapter 6's delta read, M-a:
    ``torch.tensor(eps)`` was float64 in the notebook and float32 under the grader)."""
    dtype, first_check = "float32", min((i for i, _ in check_calls(nb)), default=len(nb.cells))
    for cell in nb.cells[:first_check]:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(cell.source)
        except SyntaxError:
            continue
        for node in tree.body:
            call = node.value if isinstance(node, ast.Expr) else None
            if (isinstance(call, ast.Call) and ast.unparse(call.func) == "torch.set_default_dtype"
                    and len(call.args) == 1 and ast.unparse(call.args[0]).removeprefix("torch.")
                    in DTYPES):
                dtype = ast.unparse(call.args[0]).removeprefix("torch.")
    return dtype



def find_solution(nb, names, ordinal):
    """The student's solution cell for an exercise whose reference solution defines ``names``:
    the last cell tagged ``solution`` that defines all of them, else the ``ordinal``-th cell
    tagged ``solution`` (if the tags are intact), else the last code cell defining them; None if
    there is none."""
    tagged = [c for c in nb.cells if _is_solution(c)]
    wanted = set(names)

    def defines(cell):
        found = _defined_names(cell.source)
        if found is None:  # a syntax error: still the student's cell if it names the function
            return all(re.search(rf"\b(def|class)\s+{re.escape(n)}\b", cell.source)
                       for n in wanted)
        return wanted <= found

    if wanted:
        matches = [c for c in tagged if defines(c)]
        if matches:
            return matches[-1].source
    if ordinal < len(tagged):
        return tagged[ordinal].source
    if wanted:
        matches = [c for c in nb.cells if c.cell_type == "code" and defines(c)]
        if matches:
            return matches[-1].source
    return None



def read_submission(path):
    """The notebook at ``path`` (nbformat 4), or raise ValueError saying why it is not one."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as err:
        raise ValueError(f"cannot be read ({err.strerror})") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_SUBMISSION_BYTES + 1)
    if len(data) > MAX_SUBMISSION_BYTES:
        raise ValueError(f"larger than {MAX_SUBMISSION_BYTES // 2 ** 20} MB")
    return _parse_submission(data)



def _parse_submission(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not a text file (not valid UTF-8)") from None
    try:
        json.loads(text)
    except RecursionError:
        raise ValueError("not a valid Jupyter notebook: nested too deeply") from None
    except ValueError as err:
        raise ValueError(f"not valid JSON: {_one_line(err)}") from None
    try:
        nb = nbformat.reads(text, as_version=4)
        nbformat.validate(nb)
    except RecursionError:
        raise ValueError("not a valid Jupyter notebook: nested too deeply") from None
    except Exception as err:  # a missing key, an unknown version, a wrong type...
        raise ValueError(f"not a valid Jupyter notebook: {_one_line(err)}") from None
    return nb



def _one_line(text, limit=200):
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"



def student_name(file_name):
    """The student column for ``file_name``: the name without ``.ipynb``, Unicode-normalized
    (NFKC), with control and format characters (newlines, escapes, bidi overrides) replaced by
    ``?``."""
    stem = file_name[: -len(".ipynb")] if file_name.endswith(".ipynb") else file_name
    stem = unicodedata.normalize("NFKC", stem)
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co")
                   else ch for ch in stem).strip() or "?"



_FILE_LABEL = re.compile(r"[A-Za-z0-9_-]{1,80}")


def file_label(row):
    """A file name stem for a student's row that is never a path: the row itself when it is
    made only of ``A-Z a-z 0-9 _ -`` (at most 80), else those characters kept, the others
    replaced by ``_``, and a hash of the row added (``ｚｏｅ`` → ``zoe``; ``../x`` →
    ``___x-1b4f0e98``)."""
    if _FILE_LABEL.fullmatch(row):
        return row
    kept = re.sub(r"[^A-Za-z0-9_-]", "_", row)[:60]
    return f"{kept}-{hashlib.sha256(row.encode('utf-8', 'replace')).hexdigest()[:8]}"


def path_like(file_name):
    """Why a file name is refused as a student's name (it becomes a path, or names a folder,
    once Unicode-normalized: ``．．／x`` is ``../x``), else None."""
    stem = unicodedata.normalize("NFKC", file_name[: -len(".ipynb")])
    if any(sep in stem for sep in ("/", "\\", "\0")) or stem.strip() in ("", ".", ".."):
        return "a name that becomes a path after Unicode normalization"
    return None


def report_safe(text):
    """``text`` with control and format characters shown as ``?`` (one line, no escapes)."""
    return "".join("?" if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co")
                   else ch for ch in str(text))



def csv_safe(text):
    """A CSV cell a spreadsheet will not read as a formula: a leading =, +, -, @ (or tab, CR)
    gets a ``'`` in front."""
    text = report_safe(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text



def _submissions(folder):
    """(files, skipped): the ``<student>.ipynb`` regular files, and every other entry with the
    reason it was skipped."""
    files, skipped = [], []
    for entry in sorted(Path(folder).iterdir(), key=lambda p: p.name):
        name = report_safe(entry.name)
        if entry.name.startswith("."):
            skipped.append(f"{name} (hidden)")
        elif entry.is_symlink():
            skipped.append(f"{name} (a link)")
        elif entry.is_dir():
            skipped.append(f"{name}/ (a folder)")
        elif not entry.name.endswith(".ipynb"):
            skipped.append(f"{name} (not .ipynb)")
        elif path_like(entry.name):
            skipped.append(f"{name} ({path_like(entry.name)})")
        elif not stat.S_ISREG(entry.lstat().st_mode):
            skipped.append(f"{name} (not a regular file)")
        else:
            files.append(entry)
    return files, skipped
