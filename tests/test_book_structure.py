"""The book's structure: toc, setup cell, exercises, solutions, stored outputs."""
import re

import pytest
import yaml

from tests.notebooks import (IGNORE_TAGS, NOTEBOOKS, ROOT, code_cells, exercise_labels, read,
                             setup_source)

CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = yaml.safe_load((ROOT / "_toc.yml").read_text())
IDS = [p.name for p in NOTEBOOKS]


def toc_files():
    files = [TOC["root"]]
    for part in TOC.get("parts", []):
        for chapter in part["chapters"]:
            files.append(chapter["file"])
            files += [s["file"] for s in chapter.get("sections", [])]
    return files


def resolve(entry):
    for suffix in ("", ".md", ".ipynb"):
        path = ROOT / f"{entry}{suffix}"
        if path.is_file():
            return path
    return None


def test_config_is_explicit():
    assert CONFIG["only_build_toc_files"] is True
    assert CONFIG["execute"]["execute_notebooks"] == "off"
    repo = CONFIG["repository"]
    assert repo["url"].startswith("https://github.com/")  # branch: tests/test_release.py
    assert "path_to_book" in repo
    assert CONFIG["launch_buttons"]["colab_url"] == "https://colab.research.google.com"
    extensions = CONFIG["sphinx"]["extra_extensions"]
    assert "sphinx_exercise" in extensions and "sphinx_proof" in extensions


def test_every_toc_entry_exists_and_every_notebook_is_listed():
    entries = toc_files()
    missing = [e for e in entries if resolve(e) is None]
    assert not missing, f"toc entries without a file: {missing}"
    listed = {resolve(e).resolve() for e in entries}
    unlisted = [p.name for p in NOTEBOOKS if p.resolve() not in listed]
    assert not unlisted, f"notebooks missing from _toc.yml: {unlisted}"
    assert "Part I: The calculus of learning" in [p["caption"] for p in TOC["parts"]]


def test_setup_cell_is_the_same_everywhere_and_names_the_canonical_repository():
    reference = setup_source(read(NOTEBOOKS[0]))
    for path in NOTEBOOKS:
        assert setup_source(read(path)) == reference, f"{path.name}: setup cell differs"
    # COURSE_REPO, COURSE_REF, the version and _config.yml agree: tests/test_release.py
    assert '"google.colab" in sys.modules' in reference


def test_exercise_labels_are_unique_and_well_formed():
    labels = [label for p in NOTEBOOKS for label in exercise_labels(read(p))]
    assert len(labels) == len(set(labels)), "duplicate exercise labels"
    for path in NOTEBOOKS:
        chapter = path.name[:2]
        for label in exercise_labels(read(path)):
            assert re.fullmatch(rf"ch{chapter}-[a-z0-9-]+", label), f"{path.name}: bad label {label}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_solution_cells_have_markers(path):
    for cell in code_cells(read(path)):
        tagged = "solution" in cell.metadata.get("tags", [])
        marked = "### BEGIN SOLUTION" in cell.source
        assert tagged == marked, f"{path.name}: solution tag and markers disagree:\n{cell.source}"
        if tagged:
            assert cell.source.count("### BEGIN SOLUTION") == cell.source.count("### END SOLUTION")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_cell_ran_in_order_without_errors(path):
    cells = code_cells(read(path))
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), f"{path.name}: run it with `make outputs`"
    for cell in cells:
        for out in cell.outputs:
            assert out.output_type != "error", f"{path.name}: stored error in\n{cell.source}"
            if out.output_type == "stream" and out.name == "stdout":
                assert not re.search(r"0x[0-9a-f]{8,}", out.text), "memory address in stdout"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_at_most_ten_percent_of_cells_skip_comparison(path):
    cells = code_cells(read(path))
    ignored = [c for c in cells if set(IGNORE_TAGS) & set(c.metadata.get("tags", []))
               or "# NBVAL_IGNORE_OUTPUT" in c.source or "# NBVAL_SKIP" in c.source]
    assert len(ignored) <= 0.10 * len(cells), f"{path.name}: {len(ignored)}/{len(cells)} ignored"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_cell_uses_the_network_or_a_gpu_only_path(path):
    for cell in code_cells(read(path))[1:]:
        assert "urlopen" not in cell.source and "pip install" not in cell.source, path.name


# Any C0/C1 control character except the newline, e.g. a TAB left by "\times" written in a
# non-raw Python string (the "\t" escape), which MyST renders as nothing.
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_markdown_cell_contains_a_control_character(path):
    found = []
    for index, cell in enumerate(read(path).cells):
        if cell.cell_type == "markdown":
            for match in CONTROL.finditer(cell.source):
                context = cell.source[max(0, match.start() - 30):match.end() + 10]
                found.append(f"cell {index}: {match.group()!r} in {context!r}")
    assert not found, f"{path.name}: control characters in markdown: {found}"


def test_the_control_character_check_can_fail():
    assert CONTROL.search(r"block 12 gets $1.187\times$") is None
    assert CONTROL.search("block 12 gets $1.187\times$") is not None      # "\t" is a TAB here
    assert CONTROL.search("line one\nline two") is None
    assert CONTROL.search("carriage\rreturn") is not None


def test_bibliography_and_pages_exist():
    assert (ROOT / "book" / "references.bib").is_file()
    for page in ("intro", "how_to_use", "notation", "instructors", "bibliography"):
        assert resolve(f"book/{page}") is not None, page


def test_references_parse_strictly_with_each_key_once():
    """sphinxcontrib-bibtex reads references.bib with pybtex, which stops at a repeated key
    and drops the entries after it (a warning, so the -W book build fails): append-only merges
    of two branches each adding the same book did that once."""
    import pybtex.errors
    from pybtex.database import parse_file
    path = ROOT / "book" / "references.bib"
    keys = re.findall(r"^@\w+\{([^,\s]+),", path.read_text(encoding="utf-8"), re.M)
    assert len(keys) == len(set(keys)), sorted(k for k in set(keys) if keys.count(k) > 1)
    pybtex.errors.set_strict_mode(True)
    assert sorted(parse_file(str(path)).entries.keys()) == sorted(keys)
    # the bibliography page shows notes as text: TeX there is printed raw (the browser test's
    # "raw TeX in text" on hinton2015's $T^2$)
    assert "$" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_figure_has_a_caption_a_name_and_alt_text(path):
    """A code cell that draws a figure carries mystnb figure metadata (CONTRIBUTING, "Figures
    and accessibility"): without it the book shows an unnumbered image whose alt text is its
    file path. The browser test checks the rendered result; this catches it before a build."""
    missing = []
    for cell in code_cells(read(path)):
        if not any("image/png" in out.get("data", {}) for out in cell.outputs):
            continue
        meta = cell.metadata.get("mystnb", {})
        alt = meta.get("image", {}).get("alt", "")
        figure = meta.get("figure", {})
        if len(alt) < 20 or not figure.get("caption") or not str(figure.get("name", "")).startswith("fig-"):
            missing.append(cell.get("id"))
    assert not missing, f"{path.name}: figure cells without caption, name or alt text: {missing}"


def test_figure_names_are_unique_across_the_book():
    names = [cell.metadata["mystnb"]["figure"]["name"] for path in NOTEBOOKS
             for cell in code_cells(read(path))
             if "name" in cell.metadata.get("mystnb", {}).get("figure", {})]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
