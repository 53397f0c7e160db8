"""The built book in a real browser: headless Chromium over every page of the toc.

Serves `_build/html` on 127.0.0.1 (a random free port) and visits each page in one browser
session, with every request that leaves localhost refused: the book must read offline.
Checked: no console errors; every equation typeset by MathJax (no raw `$$` left); every image
loaded; every same-site link answers 200 and its #anchor exists; the Colab button of each
chapter; exercise solutions collapsed until clicked; the search page finds "softmax".
Screenshots (intro and one chapter, 1280 px and 390 px wide) go to `_build/screenshots/`.

`make test` builds the book just before this test (`make browser`); run alone, the test
builds it first when `_build/html` is older than the sources. Never skipped: without Chromium
every test fails with the instruction (`.ci/run` installs Debian's `chromium`; `make test
BROWSER=skip` is the explicit opt-out, reported loudly).
"""
import html.parser
import os
import re
import subprocess
import sys
from collections import Counter
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
# the same Chromium, flags and local server as the PDF edition (tools/make_pdf.py)
sys.path.insert(0, str(ROOT / "tools"))
from make_pdf import CHROMIUM, CHROMIUM_ARGS, serve  # noqa: E402
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
SCREENSHOT_CHAPTER = "notebooks/05_losses"
# axe-core from npm (`make browser` fetches it into _vendor/, like MathJax); the test injects it.
AXE_JS = Path(os.environ.get("AXE_JS") or ROOT / "_vendor" / "axe-core-4.14.1" / "axe.min.js")
if not AXE_JS.is_absolute():
    AXE_JS = ROOT / AXE_JS
AXE_FAILING_IMPACTS = ("serious", "critical")
PAGE_TIMEOUT_MS = 300_000



@pytest.fixture(scope="module", autouse=True)
def chromium_present():
    """No silent skip: without Chromium every test here fails with the instruction (`make test
    BROWSER=skip` is the explicit, loudly reported way not to run them)."""
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        pytest.fail(f"Chromium not found at {CHROMIUM}: install it (`sudo apt-get install -y "
                    "chromium`; .ci/run does) or set CHROMIUM=/path/to/chromium. To run the other "
                    "tests without it: `make test BROWSER=skip`.", pytrace=False)


def toc_pages():
    """Docnames of every page in _toc.yml, in reading order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = [toc["root"]]
    for part in toc.get("parts", []):
        for chapter in part.get("chapters", []):
            pages.append(chapter["file"])
            pages.extend(section["file"] for section in chapter.get("sections", []))
    return [re.sub(r"\.(md|ipynb)$", "", page) for page in pages]


def colab_url(docname):
    """The Colab launch URL of a chapter, from the repository configured in _config.yml."""
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    repo = config["repository"]
    org_repo = urllib.parse.urlparse(repo["url"]).path.strip("/")
    path = "/".join(p for p in [repo.get("path_to_book", "").strip("/"), docname] if p)
    return (f"https://colab.research.google.com/github/{org_repo}/blob/{repo['branch']}/"
            f"{path}.ipynb")


def build_is_stale():
    index = HTML / "index.html"
    if not index.exists():
        return True
    built = index.stat().st_mtime
    sources = [ROOT / "_toc.yml", ROOT / "_config.yml", *ROOT.glob("book/*"),
               *ROOT.glob("notebooks/*.ipynb")]
    return any(p.stat().st_mtime > built for p in sources)


class _Ids(html.parser.HTMLParser):
    """Collects the id and name attributes of an HTML page (the targets of #anchors)."""

    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key in ("id", "name") and value:
                self.ids.add(value)


# Runs in the page once MathJax is done: counts what the reader sees.
PAGE_REPORT_JS = r"""
async () => {
  const out = {mathNodes: 0, typeset: 0, mathErrors: [], rawTex: [], images: [], links: []};
  const math = document.querySelectorAll('.math, .math-block, span.math, div.math');
  const seen = new Set();
  for (const el of math) {
    if (seen.has(el)) continue; seen.add(el);
    out.mathNodes += 1;
    if (el.querySelector('mjx-container')) out.typeset += 1;
    else out.mathErrors.push('not typeset: ' + el.textContent.slice(0, 80));
  }
  for (const el of document.querySelectorAll('mjx-merror')) {
    out.mathErrors.push('TeX error: ' + (el.getAttribute('data-mjx-error') || el.textContent));
  }
  // Raw TeX left in prose (code and outputs may legitimately show dollars).
  const skip = 'pre, code, script, style, textarea, mjx-container, .cell_output, .highlight';
  const walker = document.createTreeWalker(document.querySelector('main') || document.body,
                                           NodeFilter.SHOW_TEXT);
  const raw = /\$\$|\\\(|\\\)|\\\[|\\\]|\$[^$\n]*[\\^_{}][^$\n]*\$/;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (n.parentElement && n.parentElement.closest(skip)) continue;
    if (raw.test(n.textContent)) out.rawTex.push(n.textContent.trim().slice(0, 100));
  }
  for (const img of document.images) {
    img.loading = 'eager';
    if (!img.complete) {
      await new Promise(r => { img.addEventListener('load', r); img.addEventListener('error', r);
                               setTimeout(r, 10000); });
    }
    out.images.push({src: img.currentSrc || img.src, width: img.naturalWidth,
                     alt: img.getAttribute('alt'), inMain: !!img.closest('main'),
                     caption: !!(img.closest('figure') && img.closest('figure').querySelector('figcaption'))});
  }
  for (const a of document.querySelectorAll('a[href]')) {
    out.links.push(a.href);
  }
  return out;
}
"""

WAIT_MATHJAX_JS = """
async () => {
  if (!document.querySelector('script[src*="mathjax"]')) return 'no mathjax on page';
  for (let i = 0; i < 300 && !(window.MathJax && MathJax.startup && MathJax.startup.promise); i++)
    await new Promise(r => setTimeout(r, 50));
  if (!(window.MathJax && MathJax.startup && MathJax.startup.promise)) return 'MathJax did not load';
  await MathJax.startup.promise;
  return 'ok';
}
"""


@pytest.fixture(scope="module")
def site():
    """`_build/html` served on 127.0.0.1 at a free port, for the duration of the module."""
    if build_is_stale():
        subprocess.run(["make", "--no-print-directory", "book"], cwd=ROOT, check=True)
    server, url = serve(HTML)
    yield url
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser_context(site, tmp_path_factory):
    """One headless Chromium (the system's, never a downloaded one) with a fresh profile."""
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport=DESKTOP)
        # Generous: on a loaded machine (nine test runs on two cores) a chapter with its
        # images and MathJax can take well over Playwright's default 30 s to load.
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        context.set_default_navigation_timeout(PAGE_TIMEOUT_MS)
        external = []

        def route(r):
            if r.request.url.startswith(site):
                r.continue_()
            else:
                external.append(r.request.url)
                r.abort()

        context.route("**/*", route)
        context.external_requests = external
        yield context
        context.close()


@pytest.fixture(scope="module")
def crawl(site, browser_context, request):
    """Visits every toc page once; returns what each page showed."""
    pages = {}
    page = browser_context.new_page()
    errors = []
    page.on("console", lambda msg: errors.append(f"console.{msg.type}: {msg.text}")
            if msg.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    page.on("response", lambda resp: errors.append(f"HTTP {resp.status}: {resp.url}")
            if resp.status >= 400 else None)
    for docname in toc_pages():
        errors.clear()
        url = urllib.parse.urljoin(site, docname + ".html")
        response = page.goto(url, wait_until="load")
        mathjax = page.evaluate(WAIT_MATHJAX_JS)
        report = page.evaluate(PAGE_REPORT_JS)
        page.wait_for_timeout(100)  # late console messages (widgets render after load)
        report["colab"] = page.eval_on_selector_all(
            'a[href^="https://colab.research.google.com"]', "els => els.map(e => e.href)")
        report["axe"] = run_axe(page)
        report["numbering"] = page.evaluate(NUMBERING_JS)
        report["solutions"] = check_solutions(page)
        report.update(status=response.status, mathjax=mathjax, errors=list(errors), url=url)
        pages[docname] = report
    page.close()
    return pages


AXE_RUN_JS = """
async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({
    id: v.id, impact: v.impact, help: v.help, count: v.nodes.length,
    targets: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}
"""


def run_axe(page):
    """axe-core's violations on the page as loaded (solutions collapsed, light theme)."""
    if not AXE_JS.is_file():
        pytest.fail(f"axe-core not found at {AXE_JS}: `make browser` fetches it with npm", pytrace=False)
    page.add_script_tag(path=str(AXE_JS))
    return page.evaluate(AXE_RUN_JS)


# What a reader cites: the numbers of equations, figures, tables and exercises, and the text
# of references to them (Sphinx renders each number in its own element).
NUMBERING_JS = r"""
() => {
  const texts = sel => [...document.querySelectorAll(sel)].map(e => e.textContent.trim());
  return {
    equations: texts('main div.math span.eqno').map(t => t.replace(/\s*\uf0c1?$/, '').replace(/[^()0-9.]/g, '')),
    figures: texts('main figure figcaption .caption-number'),
    tables: texts('main table caption .caption-number'),
    exercises: texts('main div.exercise > p.admonition-title'),
    eqrefs: [...document.querySelectorAll('main a.reference[href*="#equation-"]')].map(
      a => ({text: a.textContent.trim(), href: a.getAttribute('href')})),
  };
}
"""


def check_solutions(page):
    """Each sphinx-exercise solution: hidden at first; a click on its title's text (what a
    reader clicks: "Solution to Exercise N") shows it, and only it; the button hides it."""
    results = []
    solutions = page.locator("div.solution.dropdown")
    for i in range(solutions.count()):
        sol = solutions.nth(i)
        body = sol.locator(":scope > :not(.admonition-title)").first
        hidden_before = not body.is_visible()
        title = sol.locator(":scope > .admonition-title")
        target = title.locator("a").first if title.locator("a").count() else title
        target.click()
        page.wait_for_timeout(50)
        shown_after = body.is_visible()
        others_open = page.locator("div.solution.dropdown:not(.toggle-hidden)").count() - 1
        sol.locator(".toggle-button").click()
        page.wait_for_timeout(50)
        closes = not body.is_visible()
        results.append({"id": sol.get_attribute("id"), "collapsed": hidden_before,
                        "opens": shown_after and others_open == 0, "closes": closes})
    return results


@pytest.fixture(scope="module")
def links(site, crawl):
    """Every same-site link of every page: HTTP status and, for #anchors, whether it exists."""
    statuses, ids, problems = {}, {}, []
    n_links = 0
    for docname, report in crawl.items():
        for href in report["links"]:
            if not href.startswith(site):
                continue
            n_links += 1
            target, _, fragment = href.partition("#")
            if target not in statuses:
                try:
                    with urllib.request.urlopen(target, timeout=30) as resp:
                        statuses[target] = resp.status
                        body = resp.read()
                        if "html" in resp.headers.get("Content-Type", ""):
                            parser = _Ids()
                            parser.feed(body.decode("utf-8", "replace"))
                            ids[target] = parser.ids
                except urllib.error.HTTPError as err:
                    statuses[target] = err.code
            if statuses[target] != 200:
                problems.append(f"{docname}: {href} -> HTTP {statuses[target]}")
            elif fragment and urllib.parse.unquote(fragment) not in ids.get(target, set()):
                problems.append(f"{docname}: {href} -> no element with id {fragment!r}")
    return {"n_links": n_links, "n_urls": len(statuses), "problems": problems}


@pytest.fixture(scope="module")
def search(site, browser_context):
    page = browser_context.new_page()
    page.goto(urllib.parse.urljoin(site, "search.html?q=softmax"))
    page.wait_for_function(
        "() => /finished|did not match/.test("
        "(document.querySelector('#search-results .search-summary') || {}).innerText || '')",
        timeout=60000)
    hits = page.eval_on_selector_all("#search-results ul.search li a",
                                     "els => els.map(e => e.getAttribute('href'))")
    page.close()
    return [re.sub(r"\.html.*$", "", h.lstrip("./")) for h in hits]


def test_pages_load_without_console_errors(crawl):
    problems = [f"{d}: HTTP {r['status']}" for d, r in crawl.items() if r["status"] != 200]
    problems += [f"{d}: {e}" for d, r in crawl.items() for e in r["errors"]]
    assert not problems, "\n".join(problems)


def test_nothing_is_fetched_from_the_network(crawl, browser_context):
    assert not browser_context.external_requests, (
        "pages requested off-site resources (the book must read offline):\n"
        + "\n".join(sorted(set(browser_context.external_requests))))


def test_every_equation_is_rendered(crawl):
    problems = []
    for docname, r in crawl.items():
        if r["mathNodes"] and r["mathjax"] != "ok":
            problems.append(f"{docname}: {r['mathjax']}")
        problems += [f"{docname}: {e}" for e in r["mathErrors"]]
        problems += [f"{docname}: raw TeX in text: {t!r}" for t in r["rawTex"]]
    assert not problems, "\n".join(problems)
    assert sum(r["typeset"] for r in crawl.values()) > 0, "no equation found in the whole book"


def test_every_image_loads(crawl):
    broken = [f"{d}: {img['src']}" for d, r in crawl.items() for img in r["images"]
              if img["width"] == 0]
    assert not broken, "images that did not load:\n" + "\n".join(broken)


def test_every_internal_link_resolves(links):
    assert not links["problems"], "\n".join(links["problems"])


def test_colab_button_of_each_chapter(crawl):
    chapters = [d for d in crawl if d.startswith("notebooks/")]
    assert chapters
    for docname in chapters:
        expected = colab_url(docname)
        assert expected.startswith("https://colab.research.google.com/github/")
        assert "/blob/main/notebooks/" in expected
        assert crawl[docname]["colab"] == [expected], (docname, crawl[docname]["colab"])


def test_solutions_are_collapsed_and_open_on_click(crawl):
    all_solutions = [(d, s) for d, r in crawl.items() for s in r["solutions"]]
    assert all_solutions, "no exercise solution found in the book"
    bad = [f"{d}: {s}" for d, s in all_solutions if not (s["collapsed"] and s["opens"] and s["closes"])]
    assert not bad, "\n".join(bad)


def test_search_finds_softmax(search):
    assert "notebooks/05_losses" in search, search


def test_screenshots_and_summary(site, browser_context, crawl, links, search, capsys):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shots = []
    for docname, name in [(toc_pages()[0], "intro"), (SCREENSHOT_CHAPTER, "chapter")]:
        if docname not in crawl:
            continue
        for label, viewport in [("desktop", DESKTOP), ("phone", PHONE)]:
            page = browser_context.new_page()
            page.set_viewport_size(viewport)
            page.goto(urllib.parse.urljoin(site, docname + ".html"), wait_until="load")
            page.evaluate(WAIT_MATHJAX_JS)
            path = SCREENSHOTS / f"{name}-{label}-{viewport['width']}.png"
            page.screenshot(path=str(path))
            shots.append(path)
            if name == "chapter":  # also the first display equation, where overflow shows
                block = page.locator("div.math").first
                if block.count():
                    block.scroll_into_view_if_needed()
                    path = SCREENSHOTS / f"{name}-equation-{label}-{viewport['width']}.png"
                    page.screenshot(path=str(path))
                    shots.append(path)
            page.close()
    assert all(p.stat().st_size > 0 for p in shots)
    summary = (
        f"browser: {len(crawl)} pages checked, "
        f"{sum(r['typeset'] for r in crawl.values())} equations rendered, "
        f"{sum(len(r['images']) for r in crawl.values())} images loaded, "
        f"{links['n_links']} internal links ({links['n_urls']} URLs) resolved, "
        f"{sum(len(r['solutions']) for r in crawl.values())} solutions toggled, "
        f"search 'softmax': {len(search)} pages; screenshots in {SCREENSHOTS.relative_to(ROOT)}/")
    impacts = Counter(v["impact"] for r in crawl.values() for v in r["axe"] for _ in range(v["count"]))
    rules = Counter(f"{v['id']} ({v['impact']})" for r in crawl.values() for v in r["axe"])
    summary += (f"\naxe-core {AXE_JS.parent.name.split('-')[-1]} on {len(crawl)} pages, violating nodes by impact: "
                f"{dict(impacts) or 'none'}; rules (pages): {dict(rules) or 'none'}")
    with capsys.disabled():
        print("\n" + summary)


def chapter_number(docname):
    """notebooks/14_gpt -> 14; None for the pages outside the numbered parts."""
    match = re.match(r"notebooks/(\d+)_", docname)
    return int(match.group(1)) if match else None


def test_no_serious_accessibility_violations(crawl):
    """axe-core on every page: no serious or critical violation (moderate/minor are listed
    in the summary, not failed)."""
    bad = [f"{d}: {v['impact']} {v['id']} ({v['count']} nodes: {v['help']}) e.g. {v['targets']}"
           for d, r in crawl.items() for v in r["axe"] if v["impact"] in AXE_FAILING_IMPACTS]
    assert not bad, "axe-core violations:\n" + "\n".join(bad)


def test_chapter_images_have_real_alt_text(crawl):
    """Every image of a chapter says what it shows: an alt text that is not empty and not the
    image's file path (MyST-NB writes the path when the cell has no `image.alt` metadata)."""
    path_like = re.compile(r"(^|/)_images/|\.(png|jpe?g|svg|gif)$", re.I)
    bad = [f"{d}: {img['src'].rsplit('/', 1)[-1]} alt={img['alt']!r}"
           for d, r in crawl.items() if chapter_number(d) for img in r["images"]
           if img["inMain"] and (not (img["alt"] or "").strip() or path_like.search(img["alt"]))]
    assert not bad, f"{len(bad)} chapter images without a real alt text:\n" + "\n".join(bad)


def test_numbering_is_per_chapter(crawl):
    """Textbook numbering: in chapter N, equations (N.k), figures "Figure N.k", tables
    "Table N.k", exercises "Exercise N.k", each counted 1, 2, 3... in reading order; and a
    reference to an equation reads as its number."""
    problems, seen = [], {"equations": 0, "figures": 0, "exercises": 0, "tables": 0}
    patterns = {"equations": r"\(({n})\.(\d+)\)", "figures": r"Fig(?:ure|\.) ({n})\.(\d+)",
                "tables": r"Table ({n})\.(\d+)", "exercises": r"Exercise ({n})\.(\d+)"}
    for docname, r in crawl.items():
        n = chapter_number(docname)
        if n is None:
            continue
        for kind, pattern in patterns.items():
            found = r["numbering"][kind]
            seen[kind] += len(found)
            numbers = []
            for text in found:
                match = re.match(pattern.format(n=n), text)
                if not match:
                    problems.append(f"{docname}: {kind[:-1]} numbered {text!r}, not {n}.k")
                else:
                    numbers.append(int(match.group(2)))
            if numbers != list(range(1, len(numbers) + 1)):
                problems.append(f"{docname}: {kind} numbered {numbers}, not 1..{len(numbers)}")
        for ref in r["numbering"]["eqrefs"]:
            if not re.fullmatch(r"\(\d+\.\d+\)", ref["text"]):
                problems.append(f"{docname}: equation reference {ref['href']} reads {ref['text']!r}")
    assert not problems, "\n".join(problems)
    # figures and tables are numbered only when captioned (MyST-NB metadata, see CONTRIBUTING)
    assert seen["equations"] and seen["exercises"], seen  # figures: once chapters have captions
