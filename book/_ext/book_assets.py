"""Small build fixes for the HTML book, found by the browser test (tests/test_browser.py).

Sphinx 7.4 registers inline scripts added after ``Builder.init()`` twice: once with
filename ``None`` and once, in ``prepare_writing``, with filename ``''``. The copies compare
unequal, so every page repeated ``const THEBE_JS_URL = ...`` (sphinx-thebe) and the reader's
console showed "Identifier 'THEBE_JS_URL' has already been declared". This extension drops
the repeated inline scripts from each page.
"""


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


def setup(app):
    app.connect("html-page-context", _dedupe_inline_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
