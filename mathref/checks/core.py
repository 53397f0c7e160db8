"""The machinery behind every exercise checker.

A checker is a function decorated with ``@exercise("chNN-some-label")``. It calls the student's
answer on test cases and raises ``CheckFailure("what went wrong")`` at the first wrong result.
The decorator turns that, or any exception the student's code raises, into an
``ExerciseCheckFailed`` whose message is one readable line (IPython shows it without a
traceback), and prints ``✅ label: passed`` when every case is right. A failed check therefore
fails its cell, which is what nbclient, nbval and graders detect.
"""
import base64
import functools
import importlib
import inspect
import math
import os
import sys
import types
from collections.abc import Iterator
from decimal import Decimal
from fractions import Fraction

import torch
from torch.overrides import TorchFunctionMode

from mathref.checks import gate
from torch.utils._python_dispatch import TorchDispatchMode

__all__ = ["CHECKS", "CheckFailure", "ExerciseCheckFailed", "exercise", "expect",
           "expect_close", "expect_callable", "as_tensor", "expect_tensor_close",
           "without_autograd", "Forbidden", "forbidding", "rng", "seed_global",
           "uniform", "integer"]

CHECKS = {}  # exercise label -> checker

# ------------------------------------------------------------------- test inputs from the caller
#
# Every checker draws its random test inputs from ``rng(n)`` (n: the case's own number), never
# from a seed of its own. Without a generator from the caller (the notebook's check cell) ``rng(n)``
# is ``torch.Generator().manual_seed(n)``: fixed inputs, so stored outputs stay put. With one (the
# grader passes a secretly seeded ``torch.Generator`` as ``generator=``), each ``rng(n)`` is seeded
# by a draw from it, so a table of answers for the notebook's inputs does not pass.

_CALLER = [None]   # the generator of the check in progress (innermost last); None: fixed seeds
# The rules (and their gates and modes) that ended during the check in progress, kept alive
# until its verdict: a weakref.finalize on one would otherwise run when it is dropped, after
# the rules and before the comparison (chapter 2's fourth and fifth reads, N3 and M2)
_RETIRED = []
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _draw_seed(seed):
    caller = _CALLER[-1]
    if caller is None:
        return seed
    return int(torch.randint(0, 2 ** 62, (1,), generator=caller)) ^ seed


def rng(seed):
    """A ``torch.Generator`` for one case's test inputs (see above)."""
    return torch.Generator().manual_seed(_draw_seed(seed))


def uniform(gen, low, high):
    """A float drawn uniformly from [low, high) by ``gen`` (from :func:`rng`)."""
    return low + (high - low) * float(torch.rand((), generator=gen, dtype=torch.float64))


def integer(gen, low, high):
    """An int drawn uniformly from low, ..., high − 1 by ``gen`` (from :func:`rng`)."""
    return int(torch.randint(low, high, (), generator=gen))


def seed_global(seed):
    """Seed PyTorch's global generator as :func:`rng` seeds its own: for a case whose answer
    draws from the global generator (dropout) or builds modules with default initialization."""
    torch.manual_seed(_draw_seed(seed))


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


def exercise(label, forbid=(), because="this exercise asks you to write it yourself"):
    """Register a checker under an exercise label (``chNN-name``) and give it its verdicts.

    ``forbid``: dotted names of what a solution may not call (the mathref function the exercise
    re-derives, the PyTorch built-in that does the same job, ``torch.ops.aten...`` operators);
    every function the student hands in is wrapped by :func:`forbidding`, so each call the
    checker makes fails with a message naming the call and ``because``."""
    def decorate(check):
        # a checker may take generator= itself (and draw from it); the others use rng(n)
        takes_generator = "generator" in inspect.signature(check).parameters

        @functools.wraps(check)
        def run(*answers, generator=None, **options):
            if generator is not None and not isinstance(generator, torch.Generator):
                raise TypeError(f"generator must be a torch.Generator or None, got "
                                f"{type(generator).__name__}")
            answers = tuple(forbidding(a, forbid, label, because) if callable(a) else a
                            for a in answers)
            retired = len(_RETIRED)
            try:
                _verdict(check, answers, generator, options)
            finally:
                del _RETIRED[retired:]

        def _verdict(check, answers, generator, options):
            _CALLER.append(generator)
            try:
                detail = (check(*answers, generator=generator, **options) if takes_generator
                          else check(*answers, **options))
            except CheckFailure as failure:
                raise ExerciseCheckFailed(label, str(failure)) from None
            except NotImplementedError as err:
                if not _raised_by_student(err):   # e.g. an operator PyTorch lacks under the checks
                    raise ExerciseCheckFailed(
                        label, f"your code raised NotImplementedError inside "
                        f"{_raised_in(err)}: {err or 'no message'}. Call only what the "
                        f"exercise allows (a call the checker forbids can also end like this)"
                    ) from None
                raise ExerciseCheckFailed(
                    label, "not attempted yet: your solution still raises "
                    "NotImplementedError. Replace that line with your code, run its cell, "
                    "then run this check again.") from None
            except Exception as err:  # the student's code crashed: report it, don't crash
                raise ExerciseCheckFailed(
                    label, f"your code raised {type(err).__name__}: {err}") from None
            finally:
                _CALLER.pop()
            print(f"✅ {label}: passed" + (f" ({detail})" if detail else ""))

        run.label = label
        run.forbid, run.because = tuple(forbid), because
        # the signature shows generator= (the grader passes one when it is there)
        signature = inspect.signature(check)
        if not takes_generator:
            run.__signature__ = signature.replace(parameters=[
                *signature.parameters.values(),
                inspect.Parameter("generator", inspect.Parameter.KEYWORD_ONLY, default=None)])
        if label in CHECKS:
            raise ValueError(f"two checkers registered for exercise {label!r}")
        CHECKS[label] = run
        return run
    return decorate


def _raised_in(err):
    """The module whose code raised ``err``: its innermost frame's."""
    tb = err.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_globals.get("__name__", "?")


def _raised_by_student(err):
    """Whether ``err`` was raised by the student's own code (the stub's ``raise
    NotImplementedError``), not inside torch or the course's package. Under the grader the
    solution runs in another process and its error is raised again by ``mathref.grade``, which
    cannot say where it began: counted as the student's (either verdict scores 0)."""
    where = _raised_in(err)
    return where.startswith("mathref.grade") or where.split(".")[0] not in ("torch", "mathref", "numpy")


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
    low = getattr(actual, "dtype", None) in (torch.float32, torch.float16, torch.bfloat16)
    dtype = actual.dtype if low else None
    actual = _as_float(actual, what)
    # close to the answer in a low precision: the likeliest cause is the dtype
    hint = (f" (your result is {dtype}: compute in float64, the dtype of the inputs)"
            if low and math.isfinite(expected) and abs(actual - expected) <= 1e-3 * abs(expected)
            else "")
    if math.isinf(expected) or math.isnan(expected):
        ok = actual == expected or (math.isnan(expected) and math.isnan(actual))
    else:
        ok = math.isfinite(actual) and abs(actual - expected) <= atol + rtol * abs(expected)
    expect(ok, f"{what}: expected {expected:.10g}, got {actual:.10g}{hint}")


def _plain_numpy(value):
    """Whether ``value`` is a NumPy array or scalar of NumPy's own types (by identity: a class
    of the student's can name any module it likes)."""
    np = sys.modules.get("numpy")
    return np is not None and (type(value) is np.ndarray
                               or type(value) in set(np.sctypeDict.values()))


def as_tensor(value, what, tensor_only=False):
    """The answer as a detached float64 CPU tensor. A number, a (nested) list or tuple, or a
    NumPy array is accepted too, unless ``tensor_only``; anything else fails with a message
    naming ``what``. An object of the student's own class is not read as a sequence: its
    ``__getitem__`` would run the student's code after the call, outside the exercise's rules."""
    if isinstance(value, torch.Tensor):
        if value.is_complex():      # .to(float64) would drop the imaginary part (grader's H3)
            raise CheckFailure(f"{what}: expected real numbers, got a complex tensor "
                               f"({value.dtype})")
        return value.detach().to("cpu", torch.float64)
    if not tensor_only and (_plain_numpy(value) or type(value) in (list, tuple, int, float, bool)):
        if _plain_numpy(value) and value.dtype.kind == "c":
            raise CheckFailure(f"{what}: expected real numbers, got a complex array")
        try:
            return torch.as_tensor(value, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            pass
    kind = value._type if is_remote(value) else type(value).__name__
    raise CheckFailure(f"{what}: expected a torch.Tensor, got {kind}")


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
                           f"largest difference {(got - want).abs().max().item():.3g}"
                           f"{_precision_hint(got, want, atol)}")


_LOW_PRECISION = (torch.float32, torch.float16, torch.bfloat16)


FLOAT32_CAST_BACK = ("every entry of your result is a float32 number: it was computed in "
                     "float32 and cast back to float64, so it carries float32 rounding (about "
                     "6e-8 relative): compute in float64")


def cast_back_from_float32(got, want=None):
    """Whether the float64 tensor ``got`` holds only float32 numbers, not all of them whole (and
    ``want``, if given, does not): the mark of float32 arithmetic cast back to float64."""
    def only_float32(x):
        return torch.equal(x.float().double(), x)
    return (isinstance(got, torch.Tensor) and got.dtype == torch.float64 and only_float32(got)
            and not torch.equal(got.round(), got) and (want is None or not only_float32(want)))


# formats narrower than float32, with their relative rounding (half a unit in the last place):
# the chapters' own bfloat16 recipes (chapter 6's Newton–Schulz and Muon) round like this
_NARROW_FORMATS = ((torch.bfloat16, "bfloat16", "4e-3"), (torch.float16, "float16", "5e-4"))


def narrow_cast_back(got, want=None):
    """The hint for a float64 ``got`` that holds only bfloat16 (or float16) numbers, not all of
    them whole, where ``want`` (if given) does not: such a result also holds only float32
    numbers, so cast_back_from_float32's hint would blame float32. None where neither fits."""
    if not (isinstance(got, torch.Tensor) and got.dtype == torch.float64) \
            or torch.equal(got.round(), got):
        return None
    for dtype, name, rounding in _NARROW_FORMATS:
        def only(x):
            return torch.equal(x.to(dtype).double(), x)
        if only(got) and (want is None or not only(want)):
            return (f"every entry of your result is a {name} number: it was computed in {name} and "
                    f"cast back to float64, so it carries {name} rounding (up to about {rounding} "
                    "relative): compute in float64")
    return None


def _precision_hint(got, want, atol):
    """A likely cause when a float64 check is missed by a float32-sized error."""
    if want.dtype != torch.float64 or not got.is_floating_point():
        return ""
    if got.dtype in _LOW_PRECISION:
        return f". Your result is {got.dtype}: compute in float64"
    narrow = narrow_cast_back(got, want)
    if narrow:
        return f"; {narrow}"
    if cast_back_from_float32(got, want):
        return f"; {FLOAT32_CAST_BACK}"
    relative = ((got - want).abs() / want.abs().clamp_min(max(atol, 1e-300))).max().item()
    if 1e-9 < relative < 1e-5:
        return (f". A difference this small (relative {relative:.1g}) is the size of float32 "
                f"rounding, about 6e-8: if your code computes in float32 anywhere, compute in "
                f"float64")
    return ""


# torch.func's differentiating transforms: under inference mode some torch versions raise and
# others (2.9) quietly return wrong numbers, so they are refused by name, like backward.
_FUNC_TRANSFORMS = ("grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
                    "linearize")
# torch.autograd.functional likewise quietly returns zeros under inference mode
_FUNCTIONAL = ("vjp", "jvp", "jacobian", "hessian", "vhp", "hvp")
AUTOGRAD_FUNCTIONAL = tuple(f"torch.autograd.functional.{name}" for name in _FUNCTIONAL)


_AUTOGRAD_NAMES = (("torch.Tensor.backward", "torch.autograd.grad", "torch.autograd.backward",
                    "torch.autograd.forward_ad.make_dual", "torch.autograd.forward_ad.unpack_dual",
                    "mathref.autograd.Value.backward")          # the course's own micrograd engine
                   + tuple(f"torch.func.{name}" for name in _FUNC_TRANSFORMS)
                   + AUTOGRAD_FUNCTIONAL)


_COMPLEX_STEP_MESSAGE = ("your solution computed with complex numbers: complex-step "
                         "differentiation, Im f(x + ih)/h, is a numerical derivative accurate to "
                         "the last digit, not a derivation. This exercise asks for the formula: "
                         "derive it from the chapter")


class _RealOnly(TorchDispatchMode):
    """Refuses any PyTorch operation that produces a complex tensor, and remembers it (so a
    solution that catches the refusal still fails): the complex step is differentiation too."""

    def __init__(self):
        super().__init__()
        self.hit = False

    # a real matrix's eigenvalues are complex in general: an eigenvalue routine is no step, and
    # picking entries of its result computes nothing (a step needs arithmetic in complex numbers)
    EIGEN = ("linalg_eig", "linalg_eigvals", "_linalg_eig")
    PICKING = ("select", "slice", "index", "unbind", "split", "split_with_sizes", "narrow",
               "squeeze", "unsqueeze", "view", "_unsafe_view", "reshape", "alias", "detach",
               "t", "transpose", "permute", "expand", "diagonal", "flip", "clone",
               "resolve_conj", "resolve_neg")

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        results = out if isinstance(out, (tuple, list)) else (out,)
        if func.__name__.split(".")[0] not in self.EIGEN + self.PICKING and any(
                isinstance(t, torch.Tensor) and t.is_complex() for t in results):
            self.hit = True
            raise CheckFailure(_COMPLEX_STEP_MESSAGE)
        return out


def without_autograd(answer, because="it asks for the gradient by hand, without autograd: "
                     "compute it from the formulas in the chapter"):
    """``answer`` wrapped so that each call runs with autograd unavailable: under
    ``torch.inference_mode()`` (no graph is recorded, so ``backward`` has nothing to follow) and
    with ``Tensor.backward``, ``torch.autograd.grad``/``backward``, the differentiating
    transforms of ``torch.func`` and ``torch.autograd.functional`` refused (a :class:`Forbidden`
    rule, so names imported before the call refuse too), and with complex tensors refused
    (complex-step differentiation). Use it for every exercise whose statement says "without
    autograd"; compute the checker's own oracle outside the call. ``because`` ends the message
    of a refusal (an exercise that asks for no gradient says what it asks for instead)."""
    @functools.wraps(answer)
    def call(*args, **kwargs):
        rule = Forbidden(_AUTOGRAD_NAMES, "this exercise", because)
        real = _RealOnly()
        try:
            with rule, torch.inference_mode(), real:
                result = answer(*args, **kwargs)
        except RuntimeError as err:
            if "grad" in str(err):  # e.g. requires_grad_ on an inference tensor
                raise CheckFailure(f"your function used autograd ({str(err).splitlines()[0]}), "
                                   f"which this exercise does not allow: {because}")
            raise
        if real.hit:
            raise CheckFailure(_COMPLEX_STEP_MESSAGE)
        return result
    return call


# ------------------------------------------------------------------- "write it yourself"

_SENTINEL = "__mathref_forbidden__"
ACTIVE = []   # the Forbidden rules of the calls in progress, innermost last (the grader's
              # verifier sends them with each call to the student's process, which applies them)


class ForbiddenCall(CheckFailure):
    """A solution called something its exercise does not allow."""


def is_remote(answer):
    """Whether ``answer`` is the grader's handle to an object in another process: one of
    mathref.grade.rpc's handle types (an attribute that says so, on any class, does not count)."""
    rpc = sys.modules.get("mathref.grade.rpc")
    return rpc is not None and type(answer) in (rpc.Handle, rpc.CallableHandle)


def _is_function(answer):
    """A function the student hands in (or the grader's handle to one), not a class or data."""
    if is_remote(answer):
        return callable(answer)
    return inspect.isfunction(answer) or inspect.ismethod(answer) or \
        isinstance(answer, functools.partial)


def _resolve(name):
    """The object a dotted name such as 'torch.nn.functional.layer_norm',
    'torch.Tensor.logsumexp' or 'mathref.losses.logsumexp' refers to (None if there is none)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _stub_code(n_free, name):
    """A code object that raises the refusal, with ``n_free`` free variables (a function's code
    can only be swapped for one with as many) and ``co_name`` = the forbidden name."""
    names = [f"_cell{i}" for i in range(n_free)]
    source = ("def outer():\n" + "".join(f"    {v} = None\n" for v in names)
              + "    def refused(*args, **kwargs):\n"
              + (f"        ({', '.join(names)},)\n" if names else "")
              + "        import sys\n"
              + "        record = getattr(sys.modules.get('mathref.checks.core'), '_hit', None)\n"
              + "        name = sys._getframe().f_code.co_name\n"
              + "        if record is not None:\n            record(name)\n"
              + f"        raise PermissionError({_SENTINEL!r}, name)\n"
              + "    return refused\n")
    namespace = {}
    exec(compile(source, "<forbidden>", "exec"), namespace)
    return namespace["outer"]().__code__.replace(co_name=name, co_qualname=name)


def equal_to(matrix):
    """The condition 'equals=float64:30x4:<its bytes, base64>' for ``matrix``: a call allowed on
    that matrix by value (or its transpose, or a batch of copies of it) in any dtype that holds
    it exactly, refused on any other, however shaped (chapter 2's fourth read, P1: a matrix of
    X's shape was [XᵀX; 0]). A string, so that it travels with the rule to the grader's worker."""
    matrix = matrix.detach().to("cpu", torch.float64).contiguous()
    data = bytes(matrix.reshape(-1).view(torch.uint8).tolist())
    return f"equals=float64:{'x'.join(map(str, matrix.shape))}:{base64.b64encode(data).decode()}"


def _matrix(value):
    dtype, shape, data = value.split(":")
    return torch.frombuffer(bytearray(base64.b64decode(data)), dtype=getattr(torch, dtype)) \
        .reshape(tuple(int(n) for n in shape.split("x"))).clone()


def _condition(name):
    """'torch.linalg.lstsq|rows=100|dtype=float32' -> ('torch.linalg.lstsq', {'rows': 100,
    'dtype': torch.float32}): the call is allowed when its first argument is a matrix with that
    many rows and that dtype, refused otherwise (a plain name: always refused). 'equals=...'
    (:func:`equal_to`): that matrix."""
    base, *parts = name.split("|")
    condition = {}
    for part in parts:
        key, _, value = part.partition("=")
        condition[key] = int(value) if key == "rows" else \
            _matrix(value) if key == "equals" else getattr(torch, value)
    return base, condition


def _is_matrix(first, matrix):
    """Whether ``first`` is ``matrix`` by value, or its transpose, or a batch of copies of either
    (compared in float64, which holds every float32 and float64 exactly)."""
    if type(first) not in (torch.Tensor, torch.nn.Parameter) or first.dim() < 2 \
            or first.is_complex():
        return False
    first = first.detach()
    return any(tuple(m.shape[-2:]) == tuple(matrix.shape)
               and bool((m.to("cpu", torch.float64) == matrix).all())
               for m in (first, first.mT))


def _allowed(condition, args, kwargs):
    if not condition:
        return False
    first = args[0] if args else next((kwargs[k] for k in ("A", "input", "self") if k in kwargs), None)
    return (isinstance(first, torch.Tensor) and first.dim() >= 2
            and first.shape[-2] == condition.get("rows", first.shape[-2])
            and first.dtype == condition.get("dtype", first.dtype)
            and ("equals" not in condition or _is_matrix(first, condition["equals"])))


class _TorchFunctions(TorchFunctionMode):
    def __init__(self, blocked, conditions=None):
        super().__init__()
        self.blocked, self.conditions = blocked, conditions or {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.blocked.get(func)
        if name is not None and not _allowed(self.conditions.get(func), args, kwargs or {}):
            _hit(name)
            raise PermissionError(_SENTINEL, name)
        return func(*args, **(kwargs or {}))


class _AtenOps(TorchDispatchMode):
    def __init__(self, blocked, conditions=None):
        super().__init__()
        self.blocked, self.conditions = blocked, conditions or {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        packet = func.overloadpacket
        name = self.blocked.get(packet)
        if name is not None and not _allowed(self.conditions.get(packet), args, kwargs or {}):
            _hit(name)
            raise PermissionError(_SENTINEL, name)
        return func(*args, **(kwargs or {}))


def _composite(packet):
    """Whether an aten operator decomposes into others before any dispatch mode sees it."""
    try:
        return any(torch._C._dispatch_has_kernel_for_dispatch_key(
            getattr(packet, overload).name(), "CompositeImplicitAutograd")
            for overload in packet.overloads())
    except (AttributeError, RuntimeError):
        return False


LOOKED_UP = []   # the refused operators an answer used as a key (their stand-ins hashed)


class _refusing:
    """Stands in for a forbidden ``torch.ops`` operator (and each of its overloads) while a rule
    holds: a call from outside torch is refused; torch's own code (a lazy import registering
    operators, a decomposition) still gets the real operator and its attributes."""

    def __init__(self, forbidden_name, op):
        self._forbidden_name, self._op = forbidden_name, op

    def __call__(self, *args, **kwargs):
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller == "torch" or caller.startswith("torch."):
            return self._op(*args, **kwargs)
        _hit(self._forbidden_name)
        raise PermissionError(_SENTINEL, self._forbidden_name)

    def __hash__(self):               # a lookup keyed by it (decomposition_table.get(op)):
        caller = sys._getframe(1).f_globals.get("__name__", "")   # remembered for the message
        if not (caller == "torch" or caller.startswith(("torch.", "mathref.checks"))):
            LOOKED_UP.append(self._forbidden_name)
        return object.__hash__(self)

    def __getattr__(self, attr):      # torch.ops.aten.dropout.default: refused as well
        value = getattr(self._op, attr)
        if isinstance(value, torch._ops.OpOverload):
            return _refusing(self._forbidden_name, value)
        return value


def _handed_in(args, kwargs):
    """The code of the functions a checker passes to the answer (f in central_difference(f,
    x, h); the parts in a dict, as chapter 16 hands them), with the functions defined inside
    them: they run inside the call and are not the answer's."""
    found = set()

    def add(code):
        if code not in found:
            found.add(code)
            for const in code.co_consts:
                if isinstance(const, types.CodeType):
                    add(const)

    for value in (*args, *kwargs.values()):
        items = value.values() if isinstance(value, dict) else \
            value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            code = getattr(getattr(item, "__func__", item), "__code__", None)
            if isinstance(code, types.CodeType):
                add(code)
    return found


def _hit(name):
    """Record a refused call on the innermost rule that forbids ``name``."""
    owner = next((rule for rule in reversed(ACTIVE) if name in rule.names), None)
    if owner is not None:
        owner.hits.append(name)


class Forbidden:
    """While in effect, calling any of ``names`` fails the check, however the solution reached
    it: a Python function's code is swapped for one that refuses (so aliases and names imported
    before the call refuse too); a PyTorch function or tensor method is refused by a
    TorchFunctionMode and a ``torch.ops.aten`` operator by a TorchDispatchMode, both of which
    see the call whatever name it was made under. A refusal is recorded as well as raised, so a
    solution that catches it still fails."""

    def __init__(self, names, label="this exercise", because="this exercise asks you to write it "
                 "yourself", trusted=(), gate=None):
        self.names, self.label, self.because = tuple(names), label, because
        # the exercise's gate too: None, where ``label`` is an exercise checked in this process;
        # True, where the checker is in another (the grader's worker: it has no checkers);
        # False, the named refusals only (a solution cell's top level)
        self.with_gate = label in CHECKS if gate is None else gate
        self.hits, self._saved, self._modes, self._attrs = [], [], [], []
        self.trusted = trusted      # code objects the checker hands to the answer
        self._gate = None

    def __enter__(self):
        self.hits = []
        self._wrappers = set()      # the decorator wrappers among the swapped functions (ids)
        functions, aten, conditions, aten_conditions = {}, {}, {}, {}
        for name in self.names:
            base, condition = _condition(name)
            obj = _resolve(base)
            if obj is None:
                continue
            if condition and name.startswith("torch.ops."):
                # an operator allowed on some arguments only: held to them where the dispatch
                # mode sees it (a composite one decomposes into operators the rule names too)
                packet = getattr(obj, "overloadpacket", obj)
                aten[packet], aten_conditions[packet] = name, condition
            elif condition:     # a PyTorch function allowed on some arguments only
                functions[obj], conditions[obj] = name, condition
            elif name.startswith("torch.ops."):
                packet = getattr(obj, "overloadpacket", obj)
                aten[packet] = name
                # a composite op called directly (torch.ops.aten.dropout) decomposes before
                # either mode sees it: while the rule holds, its name refuses (only such ops:
                # torch's own Python code calls others by name, and the dispatch mode sees them)
                namespace = _resolve(name.rsplit(".", 1)[0])
                attr = name.rsplit(".", 1)[1]
                if namespace is not None and getattr(namespace, attr, None) is obj \
                        and _composite(packet):
                    self._attrs.append((namespace, attr, obj))
                    setattr(namespace, attr, _refusing(name, obj))
            elif inspect.isfunction(obj):
                # a torch function behind decorators (an optimizer's step, once its class has been
                # built, is a profiling wrapper around a no-grad wrapper around the step): each
                # layer refuses, so the refusal names the call whichever layer is reached first
                # (another optimizer's wrapper runs the same wrapper code around its own step)
                # (also where the function is mathref's and only the decorator is torch's, as
                # torch.no_grad() around mathref.optim.SGD.step: the decorator's code is every
                # decorated function's, so it is a wrapper, not the refused function's own code)
                # (a layer swapped already, under another name of the same function, is judged
                # by its own code, saved first)
                def own_code(layer):
                    return next((code for f, code in self._saved if f is layer), layer.__code__)
                layers = [obj]
                while inspect.isfunction(getattr(layers[-1], "__wrapped__", None)) and (
                        obj.__module__.startswith("torch")
                        or own_code(layers[-1]).co_filename.startswith(_TORCH_DIR)):
                    layers.append(layers[-1].__wrapped__)
                for layer in layers:
                    if layer.__code__.co_name != name:    # not already refused by an outer rule
                        self._saved.append((layer, layer.__code__))
                        layer.__code__ = _stub_code(len(layer.__code__.co_freevars), name)
                    if layer is not layers[-1]:
                        self._wrappers.add(id(layer))
                if obj.__module__.startswith("torch"):
                    functions[obj] = name             # torch's Python functions dispatch too
            else:
                functions[obj] = name
        ACTIVE.append(self)
        if self.with_gate:          # an exercise's own rule: its gate, too
            # (a decorator's wrapper is no copy of what it wraps: its code is every wrapper's)
            self._gate = gate.for_exercise(self.label, [
                code for layer, code in self._saved if id(layer) not in self._wrappers])
            self._gate.trusted.update(self.trusted)
            self._gate.__enter__()
        # the named refusals' modes go above the gate's: a call this rule names is refused
        # with its own reason first
        if functions:
            self._modes.append(_TorchFunctions(functions, conditions))
        if aten:
            self._modes.append(_AtenOps(aten, aten_conditions))
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, kind, error, traceback):
        if len(_CALLER) > 1:    # a check is in progress: what this drops lives to its verdict
            _RETIRED.append((self, self._gate, list(self._modes),
                             list(getattr(self._gate, "_modes", ()))))
        refused = []
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        self._modes = []
        if self._gate is not None:
            self._gate.__exit__(kind, error, traceback)
            refused, self._gate = self._gate.hits, None
        for obj, code in reversed(self._saved):
            obj.__code__ = code
        self._saved = []
        for namespace, attr, obj in reversed(self._attrs):
            setattr(namespace, attr, obj)
        self._attrs = []
        if ACTIVE and ACTIVE[-1] is self:
            ACTIVE.pop()
        if self.hits:
            raise ForbiddenCall(self.message(self.hits[0])) from None
        if refused:
            raise ForbiddenCall(refused[0]) from None
        if kind is PermissionError and error.args[:1] == (_SENTINEL,) \
                and error.args[1] in self.names:
            raise ForbiddenCall(self.message(error.args[1])) from None
        return False

    def message(self, name):
        base, condition = _condition(name)
        if condition:
            what = " ".join(filter(None, (
                f"{condition['rows']}-row" if "rows" in condition else "",
                "×".join(map(str, condition["equals"].shape)) if "equals" in condition else "",
                str(condition["dtype"]).replace("torch.", "") if "dtype" in condition else "")))
            return (f"your solution called {base} on something other than the {what} matrix "
                    f"it was given, which {self.label} does not allow: {self.because}")
        return (f"your solution called {name}, which {self.label} does not allow: "
                f"{self.because}")


def shadowed_methods(t):
    """The names of torch.Tensor's own attributes that the tensor ``t`` overrides with
    attributes of its instance (``t.detach = lambda: ...``)."""
    return sorted(name for name in vars(t) if hasattr(torch.Tensor, name))


def _students_method(kind, name):
    """Whether the class ``kind``'s method ``name`` is Python code of the answer's."""
    code = getattr(getattr(kind, name, None), "__code__", None)
    return code is not None and gate.answer_code(code)


def settle(result, depth=0):
    """The answer's result with the answer's own code run now, under the call's rules, not later
    when the checker reads it: an iterator's items listed (a generator, ``map``: ``list(
    topo_sort(root))``), and an object whose ``__iter__`` is the student's; a list or
    tuple of a class of the student's rebuilt as a plain one item by item (its ``__iter__`` is
    the student's code), a tensor subclass refused (its methods are), any other number (a float
    subclass, a class with ``__float__``; not NumPy's, Fraction or Decimal) made a plain one by
    its own ``__index__``, ``__float__`` or ``__complex__``, a tensor copied."""
    if depth < 8 and (isinstance(result, (list, tuple, Iterator))
                      or _students_method(type(result), "__iter__")):
        items = [settle(x, depth + 1) for x in result]
        return tuple(items) if isinstance(result, tuple) else items
    if isinstance(result, torch.Tensor) and type(result) not in (torch.Tensor, torch.nn.Parameter):
        raise CheckFailure(f"your answer returned a {type(result).__name__[:60]}, a subclass of "
                           "torch.Tensor whose methods run code of yours after the call: return "
                           "a plain torch.Tensor")
    if isinstance(result, torch.Tensor) and shadowed_methods(result):
        raise CheckFailure(f"your answer returned a tensor whose {shadowed_methods(result)[0]} "
                           "is an attribute of yours, code that would run after the call: return "
                           "a plain torch.Tensor")
    if isinstance(result, torch.Tensor) and not (result.is_leaf and result.requires_grad):
        # a copy made now: code of the answer's that runs later (a weakref.finalize, a thread)
        # can still write into the tensor it returned, not into what the checker reads (a leaf
        # that requires grad stays itself: a copy would carry a graph it does not have)
        return result.clone()
    kind = type(result)
    if kind not in (int, float, complex, bool, torch.Tensor, torch.nn.Parameter, Fraction,
                    Decimal) and not _plain_numpy(result):
        for protocol, plain in (("__index__", int), ("__float__", float),
                                ("__complex__", complex)):
            if hasattr(kind, protocol):
                return plain(result)
    return result


def forbidding(answer, names, label="this exercise", because="this exercise asks you to "
               "write it yourself"):
    """``answer`` wrapped so that each call runs under :class:`Forbidden` ``names``. When the
    answer lives in another process (the grader's handle to a student's function), the rule
    travels with the call and is applied there, where the student's code runs."""
    remote = is_remote(answer)

    if not callable(answer):
        return answer

    @functools.wraps(answer, updated=()) if not remote else (lambda f: f)
    def call(*args, **kwargs):
        rule = Forbidden(names, label, because, trusted=_handed_in(args, kwargs))
        if remote:
            ACTIVE.append(rule)
            try:
                return answer(*args, **kwargs)
            finally:
                ACTIVE.remove(rule)
        with rule:
            return settle(answer(*args, **kwargs))

    def apply(fn, *args, **kwargs):
        # remote only: fn(the student's function, *args) run in the student's process, under
        # the same rule (see mathref.grade.rpc.apply)
        rule = Forbidden(names, label, because, trusted=_handed_in(args, kwargs))
        ACTIVE.append(rule)
        try:
            return sys.modules["mathref.grade.rpc"].apply(answer, fn, *args, **kwargs)
        finally:
            ACTIVE.remove(rule)

    call.remote = remote        # whether results come back through the grader's channel
    call.apply = apply if remote else None
    return call
