"""The machinery behind every exercise checker.

A checker is a function decorated with ``@exercise("chNN-some-label")``. It calls the student's
answer on test cases and raises ``CheckFailure("what went wrong")`` at the first wrong result.
The decorator turns that, or any exception the student's code raises, into an
``ExerciseCheckFailed`` whose message is one readable line (IPython shows it without a
traceback), and prints ``✅ label: passed`` when every case is right. A failed check therefore
fails its cell, which is what nbclient, nbval and graders detect.
"""
import functools
import math

__all__ = ["CHECKS", "CheckFailure", "ExerciseCheckFailed", "exercise", "expect",
           "expect_close", "expect_callable"]

CHECKS = {}  # exercise label -> checker


class CheckFailure(Exception):
    """Raised inside a checker: the message is what the student reads."""


class ExerciseCheckFailed(AssertionError):
    """A check did not pass. ``label`` names the exercise, ``message`` says why."""

    def __init__(self, label, message):
        super().__init__(f"{label}: {message}")
        self.label = label
        self.message = message

    def _render_traceback_(self):
        # IPython calls this instead of printing a traceback: the student sees one clear line.
        return [f"❌ {self.label}: {self.message}"]


def exercise(label):
    """Register a checker under an exercise label (``chNN-name``) and give it its verdicts."""
    def decorate(check):
        @functools.wraps(check)
        def run(*answers, **options):
            try:
                detail = check(*answers, **options)
            except CheckFailure as failure:
                raise ExerciseCheckFailed(label, str(failure)) from None
            except NotImplementedError:
                raise ExerciseCheckFailed(
                    label, "not attempted yet: your solution still raises "
                    "NotImplementedError. Replace that line with your code, run its cell, "
                    "then run this check again.") from None
            except Exception as err:  # the student's code crashed: report it, don't crash
                raise ExerciseCheckFailed(
                    label, f"your code raised {type(err).__name__}: {err}") from None
            print(f"✅ {label}: passed" + (f" ({detail})" if detail else ""))

        run.label = label
        if label in CHECKS:
            raise ValueError(f"two checkers registered for exercise {label!r}")
        CHECKS[label] = run
        return run
    return decorate


def expect(condition, message):
    """Fail the check with ``message`` unless ``condition`` holds."""
    if not condition:
        raise CheckFailure(message)


def expect_callable(answer, name):
    expect(callable(answer), f"expected your function {name}, got a {type(answer).__name__} "
                             f"(pass the function itself, without calling it)")


def _as_float(value, what):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise CheckFailure(f"{what}: expected a number, got {type(value).__name__} "
                           f"{value!r}") from None


def expect_close(actual, expected, what, rtol=1e-6, atol=1e-9):
    """Fail unless the number ``actual`` is within rtol/atol of ``expected`` (inf == inf)."""
    actual = _as_float(actual, what)
    if math.isinf(expected) or math.isnan(expected):
        ok = actual == expected or (math.isnan(expected) and math.isnan(actual))
    else:
        ok = math.isfinite(actual) and abs(actual - expected) <= atol + rtol * abs(expected)
    expect(ok, f"{what}: expected {expected:.10g}, got {actual:.10g}")
