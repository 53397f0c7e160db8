"""The PDF edition (`make pdf`, tools/make_pdf.py): one PDF of the whole book, with its
chapters, numbered equations, rendered math, figures and expanded solutions. Needs the PDF
built from the current HTML and poppler's pdftotext, pdfimages and pdftoppm (`make pdf` runs
this test; poppler: `sudo apt-get install -y poppler-utils`, which .ci/run does)."""
import functools
import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_pdf  # noqa: E402

PDF = make_pdf.OUT / make_pdf.NAME
SCREENSHOTS = ROOT / "_build" / "screenshots"


@pytest.fixture(scope="module", autouse=True)
def built():
    missing = [tool for tool in ("pdftotext", "pdfimages", "pdftoppm") if not shutil.which(tool)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not found: `sudo apt-get install -y poppler-utils`", pytrace=False)
    newest_page = max(p.stat().st_mtime for p in make_pdf.HTML.rglob("*.html"))
    if not PDF.exists() or PDF.stat().st_mtime < newest_page:
        pytest.fail("no PDF built from the current HTML: run `make pdf`", pytrace=False)


@functools.cache
def pages_text():
    """The text layer, page by page (pdftotext separates pages with form feeds)."""
    out = subprocess.run(["pdftotext", "-layout", str(PDF), "-"], check=True, capture_output=True,
                         text=True).stdout
    return out.split("\f")


@functools.cache
def chapters():
    """Chapter title -> (first page, last page), 1-based, from the PDF's bookmarks."""
    reader = PdfReader(PDF)
    marks = [(item.title, reader.get_destination_page_number(item) + 1) for item in reader.outline]
    bounds = [first for _, first in marks[1:]] + [len(reader.pages) + 1]
    return {title: (first, end - 1) for (title, first), end in zip(marks, bounds)}


def html_of(docname):
    return (make_pdf.HTML / f"{docname}.html").read_text()


def title_of(docname):
    """The page's title as the PDF's bookmark names it (tools/make_pdf.py)."""
    return html.unescape(re.search(r"<title>(.*?)</title>", html_of(docname), re.S).group(1)).split(" — ")[0].strip()


def notebook_docnames():
    return [d for d, _ in make_pdf.toc_pages() if d.startswith("notebooks/")]


def test_every_page_of_the_toc_is_a_bookmarked_chapter_with_its_title_in_the_text():
    docs = make_pdf.toc_pages()
    assert len(chapters()) == len(docs)
    text = "\n".join(pages_text())
    flat = re.sub(r"\s+", " ", text)
    for docname in notebook_docnames():
        title = title_of(docname)
        assert title in chapters(), f"no bookmark for {title!r}"
        first, last = chapters()[title]
        assert last - first >= 9, f"{title}: only {last - first + 1} pages"
        assert title.split(" ", 1)[1][:25] in flat, f"{title!r} is not in the text layer"
    assert len(pages_text()[1].strip()) and "Contents" in pages_text()[1]


def test_math_is_rendered_not_raw_tex():
    text = "\n".join(pages_text())
    for raw in ("\\frac", "$$", "\\begin{", "\\mathbf", "\\("):
        assert raw not in text, f"raw TeX {raw!r} in the PDF's text"


def test_equation_numbers_are_those_of_the_html():
    for docname in notebook_docnames():
        numbers = re.findall(r'<span class="eqno">\((\d+\.\d+)\)', html_of(docname))
        title = title_of(docname)
        first, last = chapters()[title]
        text = "\n".join(pages_text()[first - 1:last])
        missing = [n for n in numbers if f"({n})" not in text]
        assert numbers and not missing, f"{docname}: equation numbers missing from the PDF: {missing}"


def test_figures_are_in_every_chapter():
    listing = subprocess.run(["pdfimages", "-list", str(PDF)], check=True, capture_output=True,
                             text=True).stdout.splitlines()[2:]
    pages = [int(line.split()[0]) for line in listing if line.split()[2] == "image"]
    for docname in notebook_docnames():
        figures = len(re.findall(r'<img [^>]*src="\.\./_images/', html_of(docname)))
        title = title_of(docname)
        first, last = chapters()[title]
        shown = sum(first <= p <= last for p in pages)
        assert shown >= figures > 0, f"{docname}: {figures} figures in the HTML, {shown} images in the PDF"


def test_solutions_are_expanded():
    solutions = sum(html_of(d).count('class="solution dropdown') for d in notebook_docnames())
    printed = "\n".join(pages_text()).count("### BEGIN SOLUTION")
    assert solutions > 50 and printed >= solutions, (solutions, printed)


def test_pages_as_images():
    """Title, contents and a chapter's opening as PNG (for a person to look at)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    title = next(t for t in chapters() if t.startswith("5. "))
    first, _ = chapters()[title]
    for page in (1, 2, first, first + 3):
        prefix = SCREENSHOTS / f"pdf-page-{page:03d}"
        subprocess.run(["pdftoppm", "-png", "-r", "60", "-singlefile", "-f", str(page), "-l", str(page),
                        str(PDF), str(prefix)], check=True)
        assert prefix.with_suffix(".png").stat().st_size > 10_000
    reader = PdfReader(PDF)
    print(f"\npdf: {PDF.relative_to(ROOT)}: {len(reader.pages)} pages, "
          f"{PDF.stat().st_size / 1e6:.1f} MB; pages 1, 2, {first}, {first + 3} in {SCREENSHOTS.relative_to(ROOT)}/")
