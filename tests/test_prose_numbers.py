"""Every number the prose states is one a cell prints (or a code cell writes).

A number typed into a markdown cell goes stale silently when the code, a library or the
machine changes; a printed one is re-checked by nbval. The rule: a number in a markdown cell
with at least three significant digits, or an exponent (0.221, 1.781, 4.25e-11, 11,987,
4.25 × 10^{-11}), must appear, in some spelling, in a stored output or in the source of a code
cell of the same notebook. Left out: integers under 1000, years, section numbers (11.3 in
chapter 11), equation labels, link targets, code fences, and inside display math everything
but decimals and exponents.
"""
import re

import pytest

from tests.notebooks import NOTEBOOKS, read

# A number as prose writes it: digit groups with commas, a decimal part, an exponent written as
# e-11 or × 10^{-11}; a Unicode minus counts as a minus.
PROSE_NUMBER = re.compile(
    r"(?<![\w.])[-−]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
    r"(?:\s*[×x]\s*10\^?\{?[-−]?\d+\}?|[eE][-−+]?\d+)?(?![\w])")


def canonical(token):
    return token.replace("−", "-").replace(",", "").replace(" ", "")


def needs_backing(token, chapter):
    """Whether a number is precise enough that a reader takes it on trust."""
    t = canonical(token).lstrip("-")
    if re.search(r"[eE]|×|x10", t):
        return True
    if re.fullmatch(rf"{chapter}\.\d{{1,2}}", t):
        return False  # a section number of this chapter
    whole, _, fraction = t.partition(".")
    if not fraction:
        return len(whole.lstrip("0")) >= 4 and not 1900 <= int(whole) <= 2100
    return len((whole + fraction).lstrip("0")) >= 3


def spellings(token):
    """The ways an output may print the same number (4.25 × 10^{-11} as 4.25e-11, ...)."""
    t = canonical(token)
    found = {t, t.lstrip("-")}
    match = (re.fullmatch(r"(-?[\d.]+)[×x]10\^?\{?([-\d]+)\}?", t)
             or re.fullmatch(r"(-?[\d.]+)[eE]([-+]?\d+)", t))
    if match:
        mantissa, exponent = match.group(1), int(match.group(2))
        found |= {f"{mantissa}e{exponent:+03d}", f"{mantissa}e{exponent}",
                  f"{mantissa}e{exponent:+d}"}
    return found


def prose(markdown):
    """The markdown with everything that is not a statement of a value taken out."""
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)
    text = re.sub(r"\([^()\s]*\)=", " ", text)
    text = re.sub(r"\{(?:eq|numref|ref|doc|term|cite)[^`]*`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return re.sub(r"\$\$.*?\$\$(?:\s*\([^)]*\))?",
                  lambda m: " ".join(re.findall(r"\d+\.\d+|\d+[eE][-+]?\d+", m.group(0))),
                  text, flags=re.S)


def printed_text(nb):
    """Code sources and text outputs of a notebook, with 500_000 read as 500000."""
    parts = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                parts.append(output.get("text", ""))
            for mime in ("text/plain", "text/html", "text/markdown"):
                parts.append(output.get("data", {}).get(mime, ""))
    return re.sub(r"(?<=\d)_(?=\d)", "", "\n".join(parts).replace("−", "-"))


def unbacked_numbers(path):
    nb = read(path)
    text = printed_text(nb)
    printed = {canonical(t) for t in PROSE_NUMBER.findall(text)}
    flat = text.replace(",", "")
    chapter = int(re.match(r"\d+", path.name).group(0))
    missing = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for token in PROSE_NUMBER.findall(prose(cell.source)):
            if not needs_backing(token, chapter):
                continue
            forms = spellings(token)
            if forms & printed or any(len(f) >= 4 and f in flat for f in forms):
                continue
            missing.append(f"{token} (cell {index})")
    return missing


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_number_in_the_prose_is_printed(path):
    missing = unbacked_numbers(path)
    assert not missing, (f"{path.name}: the prose states numbers that no cell prints or "
                         f"writes: {', '.join(missing)}. Print them in a cell, or drop them.")


def test_the_rule_itself():
    assert needs_backing("0.221", 7) and needs_backing("4.25e-11", 7)
    assert needs_backing("11,987", 7) and needs_backing("4.25 × 10^{-11}", 7)
    assert not needs_backing("0.5", 7) and not needs_backing("2017", 7)
    assert not needs_backing("7.12", 7) and needs_backing("7.12", 8)
    assert "4.25e-11" in spellings("4.25 × 10^{-11}")
    assert prose("see {eq}`ch01-x` and (ch01-y)= $$x = 1.25$$ (ch01-z)").split() == [
        "see", "and", "1.25"]
