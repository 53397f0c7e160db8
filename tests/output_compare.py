"""Number-aware comparison of a stored cell output with a fresh one (used by nbval_conftest).

Floating point differs from machine to machine (vector width, BLAS code path, thread count,
torch version), so comparing outputs as strings is true only where they were made. The rule:

1. The text between numbers must match exactly, except that runs of white space count as one
   space and white space next to a number is ignored (a column of numbers is re-padded when
   one of them gains a minus sign).
2. Two numbers both of magnitude <= ``ROUNDING_LEVEL`` (1e-5, zero included) are equal:
   rounding-level results form one class (float64 ≲ 1e-12 and float32 ≲ 1e-5), so 2.2e-16,
   1.1e-16, 3e-8 and 0 all match, while 1e-3 does not match 1e-16.
3. Two integers (no decimal point, no exponent: counts, shapes, steps) must be equal.
4. Otherwise the numbers may differ by one unit in the last printed digit of the more precise
   of the two (0.6522 vs 0.6523 pass, 0.6522 vs 0.6532 fail).
5. A cell may widen this for results of training or sampling, visibly, with tags:
   ``nbval-tolerance-R`` (relative, e.g. ``nbval-tolerance-0.05``) and
   ``nbval-tolerance-abs-A`` (e.g. ``nbval-tolerance-abs-0.01``). A number then also matches
   when |a − b| <= A + R·max(|a|, |b|); this applies to every number of that cell, integers
   included. Text still matches exactly.
"""
import math
import re
from dataclasses import dataclass

ROUNDING_LEVEL = 1e-5
TAG_PREFIX = "nbval-tolerance-"

# A number: not glued to a letter, digit, underscore or dot on either side, so identifiers
# (float32, ch06, sm80) and version strings stay text. A sign belongs to the number.
NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?(?![\w])")


@dataclass(frozen=True)
class Tolerance:
    """The extra slack a cell declares with its tags (zero: the default rule only)."""
    rel: float = 0.0
    abs: float = 0.0

    @classmethod
    def from_tags(cls, tags):
        """Read ``nbval-tolerance-R`` / ``nbval-tolerance-abs-A`` tags; anything malformed is an
        error, so a typo cannot silently leave a cell strict or loose."""
        rel = abs_ = 0.0
        for tag in tags or ():
            if not tag.startswith(TAG_PREFIX):
                continue
            value = tag[len(TAG_PREFIX):]
            is_abs = value.startswith("abs-")
            if is_abs:
                value = value[len("abs-"):]
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"malformed tolerance tag {tag!r}: expected "
                                 f"{TAG_PREFIX}R or {TAG_PREFIX}abs-A with numbers") from None
            if not (math.isfinite(number) and number > 0):
                raise ValueError(f"tolerance tag {tag!r} must give a positive number")
            if is_abs:
                abs_ = number
            else:
                rel = number
        return cls(rel, abs_)

    def __str__(self):
        parts = ([f"relative {self.rel:g}"] if self.rel else []) + (
            [f"absolute {self.abs:g}"] if self.abs else [])
        return " and ".join(parts) or "none"


@dataclass(frozen=True)
class Number:
    text: str
    value: float
    is_integer: bool
    unit: float  # one unit in the last printed digit
    line: int    # 1-based line of the output where it stands


def parse_number(text, line=1):
    mantissa, _, exponent = text.lower().partition("e")
    is_integer = "." not in mantissa and not exponent
    decimals = len(mantissa.partition(".")[2])
    unit = 10.0 ** (int(exponent or 0) - decimals)
    return Number(text, float(text), is_integer, unit, line)


def split(text):
    """The output as (pieces of text, numbers): text[i] stands before numbers[i]."""
    pieces, numbers, start = [], [], 0
    for match in NUMBER.finditer(text):
        pieces.append(text[start:match.start()])
        numbers.append(parse_number(match.group(), text.count("\n", 0, match.start()) + 1))
        start = match.end()
    pieces.append(text[start:])
    return pieces, numbers


def _normal_text(piece):
    return re.sub(r"\s+", " ", piece).strip()


def numbers_match(a, b, tolerance=Tolerance()):
    """Whether stored number ``a`` and fresh number ``b`` (``Number``) are equal by the rule;
    returns (ok, allowed difference) for the report."""
    diff = abs(a.value - b.value)
    if abs(a.value) <= ROUNDING_LEVEL and abs(b.value) <= ROUNDING_LEVEL:
        return True, ROUNDING_LEVEL
    if a.is_integer and b.is_integer:
        allowed = 0.0
    else:
        allowed = min(a.unit, b.unit) * (1 + 1e-9)
    allowed = max(allowed, tolerance.abs + tolerance.rel * max(abs(a.value), abs(b.value)))
    return diff <= allowed, allowed


def _line(text, number):
    return text.splitlines()[number - 1] if text else ""


def compare(stored, fresh, tolerance=Tolerance()):
    """None when the two outputs match; otherwise a readable explanation naming the first
    difference (the number that moved, or the text that changed, with its line)."""
    if stored == fresh:
        return None
    ref_text, ref_numbers = split(stored)
    new_text, new_numbers = split(fresh)
    for i, (a, b) in enumerate(zip(ref_text, new_text)):
        if _normal_text(a) != _normal_text(b):
            where = ref_numbers[i - 1].line if i else 1
            return (f"the text changed near line {where}:\n"
                    f"  stored: {_normal_text(a)!r}\n  fresh:  {_normal_text(b)!r}")
    if len(ref_numbers) != len(new_numbers):
        return (f"the output holds {len(new_numbers)} numbers where the stored one holds "
                f"{len(ref_numbers)}")
    for k, (a, b) in enumerate(zip(ref_numbers, new_numbers)):
        ok, allowed = numbers_match(a, b, tolerance)
        if not ok:
            return (f"number {k + 1} on line {a.line} moved: stored {a.text}, fresh {b.text} "
                    f"(difference {abs(a.value - b.value):.3g}, allowed {allowed:.3g}; "
                    f"declared tolerance: {tolerance})\n"
                    f"  stored line: {_line(stored, a.line)}\n"
                    f"  fresh line:  {_line(fresh, b.line)}")
    return None
