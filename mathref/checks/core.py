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

import torch

__all__ = ["CHECKS", "CheckFailure", "ExerciseCheckFailed", "exercise", "expect",
           "expect_close", "expect_callable", "as_tensor", "expect_tensor_close",
           "without_autograd"]

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


def as_tensor(value, what, tensor_only=False):
    """The answer as a detached float64 CPU tensor. A list or array is accepted too, unless
    ``tensor_only``; anything else fails with a message naming ``what``."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64)
    if not tensor_only:
        try:
            return torch.as_tensor(value, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            pass
    raise CheckFailure(f"{what}: expected a torch.Tensor, got {type(value).__name__}")


def expect_tensor_close(got, want, what, rtol=1e-8, atol=1e-10, tensor_only=False,
                        shape_hint="", nan_hint=""):
    """Fail unless the tensor ``got`` has ``want``'s shape, no nan or inf where ``want`` is
    finite, and every entry within atol + rtol·|want| of ``want``'s; the message names the first
    entry that is off, with the ratio of the two values (a factor of 2 shows up at once)."""
    got, want = as_tensor(got, what, tensor_only), as_tensor(want, what)
    expect(tuple(got.shape) == tuple(want.shape),
           f"{what}: expected shape {tuple(want.shape)}, got {tuple(got.shape)}{shape_hint}")
    expect(not (~torch.isfinite(got) & torch.isfinite(want)).any(),
           f"{what}: your result contains nan or inf{nan_hint}")
    bad = ~torch.isclose(got, want, rtol=rtol, atol=atol)
    if bad.any():
        i = tuple(bad.nonzero()[0].tolist())
        g, w = got[i].item(), want[i].item()
        ratio = f" (ratio {g / w:.4g})" if w != 0 else ""
        raise CheckFailure(f"{what}: at index {list(i)} expected {w:.10g}, got {g:.10g}{ratio}; "
                           f"largest difference {(got - want).abs().max().item():.3g}")


_AUTOGRAD_MESSAGE = ("this exercise asks for the gradient by hand, without autograd, but your "
                     "function used it ({what}). Compute it from the formulas in the chapter.")


# torch.func's differentiating transforms: under inference mode some torch versions raise and
# others (2.9) quietly return wrong numbers, so they are refused by name, like backward.
_FUNC_TRANSFORMS = ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
                    "linearize")


def without_autograd(answer):
    """``answer`` wrapped so that each call runs with autograd unavailable: under
    ``torch.inference_mode()`` (no graph is recorded, so ``backward`` has nothing to follow) and
    with ``Tensor.backward``, ``torch.autograd.grad``, ``torch.autograd.backward`` and the
    differentiating transforms of ``torch.func`` replaced by functions that fail the check. Use
    it for every exercise whose statement says "without autograd"; compute the checker's own
    oracle outside the wrapped call."""
    def refuse(what):
        def stub(*args, **kwargs):
            raise CheckFailure(_AUTOGRAD_MESSAGE.format(what=what))
        return stub

    @functools.wraps(answer)
    def call(*args, **kwargs):
        saved = (torch.Tensor.backward, torch.autograd.grad, torch.autograd.backward)
        saved_func = {name: getattr(torch.func, name) for name in _FUNC_TRANSFORMS
                      if hasattr(torch.func, name)}
        torch.Tensor.backward = refuse("Tensor.backward")
        torch.autograd.grad = refuse("torch.autograd.grad")
        torch.autograd.backward = refuse("torch.autograd.backward")
        for name in saved_func:
            setattr(torch.func, name, refuse(f"torch.func.{name}"))
        try:
            with torch.inference_mode():
                return answer(*args, **kwargs)
        except RuntimeError as err:
            if "grad" in str(err):  # e.g. requires_grad_ on an inference tensor
                raise CheckFailure(_AUTOGRAD_MESSAGE.format(what=str(err).splitlines()[0]))
            raise
        finally:
            torch.Tensor.backward, torch.autograd.grad, torch.autograd.backward = saved
            for name, transform in saved_func.items():
                setattr(torch.func, name, transform)
    return call
