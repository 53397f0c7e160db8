"""The PDF edition (`make pdf`): the built HTML book printed by Chromium, page by page in toc
order, with a title page, a table of contents, solutions expanded and page numbers.

Every page of `_build/html` is opened in headless Chromium (the system's, the one the browser
test uses), MathJax finishes typesetting, the solution dropdowns are opened, and the page is
printed with the theme's print styles (no sidebars). The pieces are merged with pypdf, a
bookmark per page, and numbered. Offline: the book's MathJax is served from its _static/.

    python tools/make_pdf.py      # writes _build/pdf/from-x2-to-gpt.pdf (and a copy in _build/html)
"""
import functools
import html
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml
from pypdf import PdfReader, PdfWriter

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
OUT = ROOT / "_build" / "pdf"
NAME = "from-x2-to-gpt.pdf"
CHROMIUM = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
# Flags for a root user on a machine without network: no sandbox, no GPU, no background
# connections (each would be refused and logged). Shared with tests/test_browser.py.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MARGIN = {"top": "16mm", "bottom": "18mm", "left": "16mm", "right": "16mm"}

# Wait for MathJax and every image, open every solution, drop what only makes sense on a
# screen, let code wrap instead of being cut at the margin, and shrink the few display
# equations wider than the text so that none is cut either.
PREPARE_JS = """
async () => {
  for (let i = 0; i < 400 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 50));
  if (window.MathJax && MathJax.startup) await MathJax.startup.promise;
  document.querySelectorAll('img').forEach(img => img.loading = 'eager');
  await Promise.all([...document.images].map(img => img.complete ? null :
    new Promise(r => { img.onload = r; img.onerror = r; })));
  document.querySelectorAll('.toggle-hidden').forEach(e => e.classList.remove('toggle-hidden'));
  document.querySelectorAll('details').forEach(d => d.open = true);
  document.querySelectorAll('.toggle-button, .headerlink, .prev-next-area, .bd-header-article, '
    + '.bd-sidebar-primary, .bd-sidebar-secondary, .bd-header, .bd-footer, .bd-footer-content, '
    + '.bd-footer-article, .skip-link, #pst-back-to-top').forEach(e => e.remove());
  const style = document.createElement('style');
  style.textContent = `
    .bd-page-width, .bd-main .bd-content, .bd-article-container { max-width: none !important; }
    pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
    div.cell_input, div.cell_output, figure, div.math, table, mjx-container[display="true"] { break-inside: avoid; }
    mjx-container[display="true"] { overflow: visible !important; }`;
  document.head.appendChild(style);
  await new Promise(r => requestAnimationFrame(() => r()));
  let shrunk = 0;
  for (const c of document.querySelectorAll('mjx-container[display="true"]')) {
    const math = c.querySelector('mjx-math');
    if (!math) continue;
    const eqno = c.parentElement.querySelector(':scope > span.eqno');
    const avail = c.getBoundingClientRect().width - (eqno ? eqno.getBoundingClientRect().width + 8 : 0);
    const need = math.getBoundingClientRect().width;
    if (need > avail) { c.style.fontSize = (92 * avail / need) + '%'; shrunk++; }
  }
  return {equations: document.querySelectorAll('mjx-container').length, shrunk: shrunk};
}
"""


def toc_pages():
    """Docnames of every page in _toc.yml, in reading order, with their part captions."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [(toc["root"], None)]
    for part in toc.get("parts", []):
        for i, chapter in enumerate(part.get("chapters", [])):
            pages.append((chapter["file"], part.get("caption") if i == 0 else None))
            pages.extend((s["file"], None) for s in chapter.get("sections", []))
    return [(re.sub(r"\.(md|ipynb)$", "", page), caption) for page, caption in pages]


def serve(directory):
    """``directory`` served on 127.0.0.1 at a free port, quietly: (server, its URL)."""
    handler = functools.partial(type("Quiet", (SimpleHTTPRequestHandler,),
                                     {"log_message": lambda *a: None}), directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def front_matter(title, version, entries):
    """Title page and table of contents (entries: (title, part caption, first page))."""
    rows = []
    for name, caption, page in entries:
        if caption:
            rows.append(f'<tr class="part"><td colspan="2">{html.escape(caption)}</td></tr>')
        rows.append(f"<tr><td>{html.escape(name)}</td><td class='p'>{page}</td></tr>")
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font-family: sans-serif; color: #222; }}
.title {{ height: 240mm; display: flex; flex-direction: column; justify-content: center;
          text-align: center; page-break-after: always; }}
.title h1 {{ font-size: 30pt; margin: 0 0 8mm; }} .title p {{ font-size: 13pt; margin: 2mm; }}
h2 {{ font-size: 18pt; }} table {{ width: 100%; border-collapse: collapse; font-size: 11pt; }}
td {{ padding: 1.2mm 0; }} td.p {{ text-align: right; }}
tr.part td {{ font-weight: bold; padding-top: 4mm; }}
</style></head><body>
<div class="title"><h1>{html.escape(title)}</h1>
<p>The PDF edition, printed from the HTML book</p><p>mathref {html.escape(version)}</p>
<p>{time.strftime('%Y-%m-%d', time.gmtime())}</p></div>
<h2>Contents</h2><table>{''.join(rows)}</table></body></html>"""


def numbers_pdf(page, labels, path):
    """One page per label, blank but for its footer: stamped on the merged pages."""
    body = "".join(f'<div class="p"><span>{html.escape(label)}</span><span>{i}</span></div>'
                   for i, label in enumerate(labels, 1))
    page.set_content(f"""<!doctype html><html><head><meta charset="utf-8"><style>
@page {{ size: A4; margin: 0; }} body {{ margin: 0; font-family: sans-serif; }}
.p {{ height: 297mm; box-sizing: border-box; padding: 0 16mm 8mm; display: flex;
      justify-content: space-between; align-items: flex-end; font-size: 8pt; color: #666;
      page-break-after: always; }}
</style></head><body>{body}</body></html>""")
    page.pdf(path=str(path), format="A4", print_background=False,
             margin={"top": "0", "bottom": "0", "left": "0", "right": "0"})


def main():
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT))
    from mathref import __version__

    if not (HTML / "index.html").exists():
        sys.exit("make_pdf: no built book in _build/html: run `make book` first")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        sys.exit(f"make_pdf: Chromium not found at {CHROMIUM}: `sudo apt-get install -y chromium` "
                 "or set CHROMIUM=/path/to/chromium")
    title = yaml.safe_load((ROOT / "_config.yml").read_text())["title"]
    OUT.mkdir(parents=True, exist_ok=True)
    server, site = serve(HTML)
    start = time.time()
    with tempfile.TemporaryDirectory(prefix="pdf-") as tmp, sync_playwright() as p:
        tmp = Path(tmp)
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        # the width of an A4 page inside its margins (178 mm at 96 px per inch): the layout measured
        # here is the one printed
        context = browser.new_context(viewport={"width": 672, "height": 950})
        context.set_default_timeout(300_000)
        context.route("**/*", lambda r: r.continue_() if r.request.url.startswith(site) else r.abort())
        page = context.new_page()
        parts = []  # (pdf path, page title, part caption)
        only = os.environ.get("PDF_ONLY")  # e.g. PDF_ONLY=notebooks/01_gradient_descent (trying styles)
        for i, (docname, caption) in enumerate(toc_pages()):
            if only and docname != only:
                continue
            page.emulate_media(media="print")
            page.goto(site + docname + ".html", wait_until="load")
            page.evaluate(PREPARE_JS)
            name = page.title().split(" — ")[0].strip()
            path = tmp / f"{i:02d}.pdf"
            page.pdf(path=str(path), format="A4", margin=MARGIN, print_background=True)
            parts.append((path, name, caption))
            print(f"make_pdf: {docname}: {len(PdfReader(path).pages)} pages", flush=True)

        # front matter: title page + contents (its own length decides where chapters start)
        counts = [len(PdfReader(path).pages) for path, _, _ in parts]
        front = tmp / "front.pdf"
        n_front = 2
        for _ in range(3):
            firsts = [n_front + 1 + sum(counts[:k]) for k in range(len(counts))]
            page.set_content(front_matter(title, __version__,
                                          [(n, c, f) for (_, n, c), f in zip(parts, firsts)]))
            page.pdf(path=str(front), format="A4", margin=MARGIN)
            if len(PdfReader(front).pages) == n_front:
                break
            n_front = len(PdfReader(front).pages)

        writer = PdfWriter()
        writer.append(str(front))
        labels = [title] * n_front
        for (path, name, _), first in zip(parts, firsts):
            writer.append(str(path))
            writer.add_outline_item(title=name, page_number=first - 1)
            labels += [name] * len(PdfReader(path).pages)
        stamps = tmp / "numbers.pdf"
        numbers_pdf(page, labels, stamps)
        for target, stamp in zip(writer.pages[1:], PdfReader(stamps).pages[1:]):  # not the title page
            target.merge_page(stamp)
        writer.add_metadata({"/Title": title, "/Author": "The From x² to GPT course team",
                             "/Subject": f"PDF edition, mathref {__version__}"})
        out = OUT / NAME
        with open(out, "wb") as f:
            writer.write(f)
        browser.close()
    server.shutdown()
    shutil.copy(out, HTML / NAME)  # the front page links to it
    pages = len(PdfReader(out).pages)
    print(f"make_pdf: {out.relative_to(ROOT)}: {pages} pages, {out.stat().st_size / 1e6:.1f} MB, "
          f"{len(parts)} HTML pages printed in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
