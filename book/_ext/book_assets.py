"""Small build fixes for the HTML book, found by the browser test (tests/test_browser.py).

Sphinx 7.4 registers inline scripts added after ``Builder.init()`` twice: once with
filename ``None`` and once, in ``prepare_writing``, with filename ``''``. The copies compare
unequal, so every page repeated ``const THEBE_JS_URL = ...`` (sphinx-thebe) and the reader's
console showed "Identifier 'THEBE_JS_URL' has already been declared". This extension drops
the repeated inline scripts from each page.

Per-chapter numbering: the chapter parts of ``_toc.yml`` are ``numbered`` so that Sphinx
numbers equations "(14.5)", figures "Figure 14.3" and exercises "Exercise 14.1" by chapter
(``numfig_secnum_depth: 1``). The chapters' headings already carry their numbers ("# 14. GPT",
"## 14.2 ..."), so Sphinx's own section numbers would read "14. 14. GPT" in headings, the
sidebar, the prev/next links and the window title. Once Sphinx has computed the figure and
equation numbers from the section numbers, this extension drops the section numbers
themselves; the chapter prefixes of figures, equations and exercises stay.

Accessibility (axe-core in the browser test): a few theme and docutils templates produce
markup that assistive technology reads wrongly; `_fix_markup` rewrites those few attributes
in every written page (the CSS half of the fixes is book/_static/a11y.css).
"""
import re
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

# (what, pattern, replacement, axe rule it fixes)
MARKUP_FIXES = [
    # The color-mode button is named "Color mode" but its icons carry titles ("Light", "Dark",
    # "System Settings") that count as its visible text. Icons are decorative: hide them.
    ("theme-switch icons", re.compile(r'(<i class="theme-switch [^"]*" data-mode="\w+")\s+title="[^"]*"'),
     r'\1 aria-hidden="true"', "label-content-name-mismatch"),
    # The bibliography: docutils marks the citation list role="list" but its children are not
    # list items (role="doc-biblioentry", deprecated in ARIA). Plain containers instead.
    ("citation list role", re.compile(r'<div role="list" class="citation-list">'),
     '<div class="citation-list">', "aria-required-children"),
    ("citation entry role", re.compile(r'(<div class="citation" id="[^"]*") role="doc-biblioentry"'),
     r"\1", "aria-deprecated-role"),
    # The primary sidebar (book title and table of contents) was outside every landmark.
    ("primary sidebar landmark", re.compile(r'<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar">'),
     '<div id="pst-primary-sidebar" class="bd-sidebar-primary bd-sidebar" role="navigation" '
     'aria-label="Book contents">', "region"),
]


def _dedupe_inline_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for js in scripts:
        if not js.filename:  # inline script: identified by its attributes and body
            key = tuple(sorted((k, str(v)) for k, v in js.attributes.items()))
            if key in seen:
                continue
            seen.add(key)
        kept.append(js)
    scripts[:] = kept


def _drop_section_numbers(app, env):
    """After TocTreeCollector (priority 500) assigned section and then figure numbers."""
    env.toc_secnumbers = {}
    for toc in env.tocs.values():
        for ref in toc.findall(nodes.reference):
            ref.attributes.pop("secnumber", None)
    for title in env.titles.values():
        title.attributes.pop("secnumber", None)
    return []


def _fix_markup(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    counts = {what: 0 for what, *_ in MARKUP_FIXES}
    for page in Path(app.outdir).rglob("*.html"):
        text = original = page.read_text(encoding="utf-8")
        for what, pattern, replacement, _rule in MARKUP_FIXES:
            text, n = pattern.subn(replacement, text)
            counts[what] += n
        if text != original:
            page.write_text(text, encoding="utf-8")
    logger.info("book_assets: accessibility markup fixes: %s", counts)


def setup(app):
    app.connect("html-page-context", _dedupe_inline_scripts, priority=900)
    app.connect("env-get-updated", _drop_section_numbers, priority=900)
    app.connect("build-finished", _fix_markup)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
