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
"""
from docutils import nodes


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


def setup(app):
    app.connect("html-page-context", _dedupe_inline_scripts, priority=900)
    app.connect("env-get-updated", _drop_section_numbers, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
