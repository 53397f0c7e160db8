"""The gate: what may run while a checker calls a student's answer.

A list of forbidden names cannot keep an exercise's rule (PyTorch has several names for every
kernel, and Python can reach a function by many paths), so while the answer runs the gate looks
at what actually runs, whatever name reached it:

* **PyTorch operators, by an allowlist.** A dispatch mode sees every aten operator that runs
  (public name, private twin, ``torch.ops``, ``jit.script``): only those of :data:`ELEMENTARY`
  and of the exercise's own allowance pass. Composite operators that decompose before the
  dispatch mode sees them (``aten.rms_norm`` into ``pow``, ``mean``, ``rsqrt``) are seen by a
  function mode, under their own name, and refused the same way.
* **Python code, by where it lives** (``sys.setprofile``): code from NumPy, SciPy, mpmath,
  sympy, networkx, transformers, tokenizers and any other third-party package, from
  ``torch._refs`` / ``torch._decomp`` / ``torch._prims``, from the checkers
  (``mathref.checks``), from mathref modules the exercise does not use, and, under "without
  autograd", from ``torch.autograd``'s differentiating code, is refused by its file; a copy of
  a refused function (``types.FunctionType(f.__code__, ...)``, ``importlib.reload``,
  ``exec(inspect.getsource(f))``) is refused by its bytecode. C functions called from Python
  are refused by their module (NumPy's, ``cmath``, and unless the exercise allows them
  ``decimal``'s and ``fractions``': in arbitrary precision finite differences meet a
  derivation's tolerance), as are thread and process starts (the
  modes above hold in the calling thread only; a thread of the answer's already running when
  the check starts is refused too) and the answer setting or clearing the profile
  and trace hooks the gate stands on (a hook replaced unseen is found when the check ends).
  Compiled TorchScript is refused (by the call TorchScript makes on entering it): its
  operators would be judged one by one, and a composite such as
  ``F.multi_head_attention_forward`` runs only elementary ones.
* **"Without autograd" means no graph**: no tensor that requires grad may be made and grad mode
  may not be turned back on.

A refusal is recorded as well as raised, so an answer that catches it still fails. The gate
runs in the student's own process, so under the grader it is advisory: the grader adds a
trusted-side check.
"""
import contextlib
import functools
import gc
import os
import re
import sys
import threading
from types import ModuleType as _ModuleType

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# --------------------------------------------------------------------------- the allowlist
#
# aten operator names (overload packets, as ``func.__name__`` before the dot) that any exercise
# may use. Everything else needs the exercise's own allowance (mathref.checks.allowances).
ELEMENTARY = frozenset("""
    add add_ sub sub_ rsub mul mul_ div div_ neg neg_ reciprocal reciprocal_ pow pow_
    float_power remainder fmod floor_divide abs abs_ sign sgn copysign square true_divide
    true_divide_ addcmul addcmul_ addcdiv addcdiv_ lerp lerp_ addmm addmv addbmm baddbmm
    exp exp_ exp2 expm1 log log_ log2 log10 log1p sqrt sqrt_ rsqrt rsqrt_ sin cos tan tanh
    sinh cosh asin acos atan atan2 arctan2 erf sigmoid hypot xlogy special_xlog1py
    clamp clamp_ clamp_min clamp_min_ clamp_max clamp_max_ clip clip_ floor ceil round trunc
    frac minimum maximum fmin fmax relu relu_ nan_to_num
    eq ne lt le gt ge eq_ ne_ lt_ le_ gt_ ge_ isnan isinf isfinite isneginf isposinf
    logical_and logical_or logical_not logical_xor bitwise_and bitwise_or bitwise_not
    bitwise_xor __and__ __or__ __xor__ __iand__ __ior__ __lshift__ __rshift__ where
    isclose allclose equal any all
    sum mean prod max min amax amin argmax argmin var std var_mean std_mean norm
    linalg_vector_norm frobenius_norm cumsum cumsum_ cumprod count_nonzero aminmax
    mm bmm matmul linalg_matmul linalg_multi_dot chain_matmul mv dot vdot outer ger einsum tensordot
    view view_as reshape reshape_as _reshape_alias _unsafe_view expand expand_as
    broadcast_to broadcast_tensors meshgrid
    squeeze squeeze_ unsqueeze unsqueeze_ flatten unflatten permute transpose transpose_ t
    t_ contiguous clone alias detach detach_ movedim moveaxis swapaxes swapdims mT mH
    view_as_real_copy unfold diagonal triu triu_ tril tril_ diag diag_embed flip roll
    select slice index index_select gather narrow split split_with_sizes chunk unbind
    masked_fill masked_fill_ masked_select masked_scatter index_put index_put_ scatter
    scatter_ scatter_add scatter_add_ index_add index_add_ index_copy index_fill take
    take_along_dim nonzero repeat repeat_interleave tile stack cat concat concatenate hstack
    vstack _to_copy to _copy_from _copy_from_and_resize copy_ type_as lift_fresh
    lift_fresh_copy fill fill_ zero_ empty empty_like empty_strided new_empty
    new_empty_strided zeros zeros_like ones ones_like full full_like new_zeros new_ones
    new_full new_tensor arange linspace logspace eye scalar_tensor tensor as_tensor
    _local_scalar_dense item set_ resize_ as_strided is_nonzero result_type _has_compatible_shallow_copy_type
    sort argsort msort topk kthvalue searchsorted bucketize unique _unique2 unique_consecutive
    bincount histc
    rand rand_like randn randn_like randint randint_like randperm bernoulli bernoulli_
    uniform_ normal_ normal multinomial random_ exponential_
    _conj _neg_view resolve_conj resolve_neg real
    sym_size sym_stride sym_numel sym_storage_offset size stride numel dim
    numpy_T pad constant_pad_nd is_floating_point is_complex column_stack
    requires_grad_ retain_grad
    is_inference storage_offset is_contiguous is_same_size is_signed is_conj is_neg
    output_nr _version element_size
    _record_function_enter_new _record_function_exit
""".split())
# (the last two are the profiler's labels, which an optimizer's step puts around itself: allowed,
# so that a refused step is refused by its own name, not by its label)


class Refused(Exception):
    """Raised into the student's code where something the exercise does not allow ran."""


def _aten_name(func):
    """'add' for aten.add.Tensor."""
    return func.__name__.split(".")[0]


_COMPOSITE = {}


def _composite(name):
    """Whether a PyTorch function's name is an aten operator that decomposes into others before
    the dispatch mode sees it (``rms_norm``): the function mode judges those by name; every
    other operator is judged where it runs, by the dispatch mode."""
    known = _COMPOSITE.get(name)
    if known is None:
        known = False
        try:
            if hasattr(torch.ops.aten, name):
                packet = getattr(torch.ops.aten, name)
                known = any(torch._C._dispatch_has_kernel_for_dispatch_key(
                    getattr(packet, overload).name(), "CompositeImplicitAutograd")
                    for overload in packet.overloads())
        except Exception:
            known = False
        _COMPOSITE[name] = known
    return known


class _FunctionGate(TorchFunctionMode):
    """Judges PyTorch functions by name before they decompose; under "without autograd" it
    also checks, after each call, that no graph is being built."""

    def __init__(self, gate):
        super().__init__()
        self.gate = gate

    def __torch_function__(self, func, types, args=(), kwargs=None):
        gate = self.gate
        name = getattr(func, "__name__", "")
        if isinstance(func, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
            name = name.split(".")[0]      # torch.ops.aten.rms_norm.default: 'rms_norm.default'
        if name and not name.startswith("__") and name not in gate.ops and _composite(name):
            gate.refuse(f"torch {name}", _where(func))
        # (the arguments that already require grad: one of them handed back as it is builds no
        # graph; requires_grad_ hands back one that did not, and is refused)
        held = [a for a in (*args, *(kwargs or {}).values())
                if isinstance(a, torch.Tensor) and a.requires_grad] if gate.no_autograd else ()
        out = func(*args, **(kwargs or {}))
        if gate.no_autograd:
            gate.check_no_graph(name, out, held)
        return out


# internal operators that only a larger PyTorch function runs: reached where the function mode
# does not see that function (TorchScript), the refusal names the function too (chapter 9's read
# at 81f456b, L5: a TorchScript scaled_dot_product_attention was refused as aten._safe_softmax)
_RUN_INSIDE = {"_safe_softmax": "attention: F.scaled_dot_product_attention or MultiheadAttention"}


class _DispatchGate(TorchDispatchMode):
    def __init__(self, gate):
        super().__init__()
        self.gate = gate

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if _IS_EXPORTING_FN is not None and vars(torch.compiler).get("is_exporting") \
                is not _IS_EXPORTING_FN:
            # (TorchScript announces compiled code through it: replaced, it would not)
            self.gate.refuse("a replaced torch.compiler.is_exporting",
                             "torch.jit: it hides compiled TorchScript from this check")
        name = _aten_name(func)
        if name not in self.gate.ops:
            self.gate.refuse(f"the PyTorch operator aten.{name}",
                             _RUN_INSIDE.get(name, "PyTorch's kernels"))
        return func(*args, **(kwargs or {}))


def _where(func):
    module = getattr(func, "__module__", None) or type(func).__module__
    return f"module {module}"


# ------------------------------------------------------------------- Python code by location

def _package_dir(module_name):
    module = sys.modules.get(module_name)
    spec_file = getattr(module, "__file__", None)
    return os.path.dirname(os.path.abspath(spec_file)) + os.sep if spec_file else None


_TORCH = _package_dir("torch")
_MATHREF = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_CHECKS = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_SITE = os.sep + "site-packages" + os.sep
_GATE_FILES = {os.path.abspath(__file__), os.path.join(_CHECKS, "core.py")}

# torch's own Python reference implementations and decompositions: each is a ready-made answer
_TORCH_REFUSED = ("_refs", "_decomp", "_prims", "distributions")
# under "without autograd": torch's differentiating Python code (grad_mode.py stays: no_grad)
_TORCH_AUTOGRAD = ("autograd", "func", "_functorch")
_AUTOGRAD_ALLOWED = ("grad_mode.py", "profiler.py", "profiler_util.py")   # (no_grad; labels)
# third-party code that runs around any answer, not for it: Jupyter's and pytest's output
# streams (a print in the answer), the import hooks of an editable install
_INFRASTRUCTURE = frozenset((
    "typing_extensions", "IPython", "ipykernel", "zmq", "jupyter_client", "jupyter_core",
    "traitlets", "tornado", "comm", "debugpy", "_pytest", "pytest", "pluggy", "execnet", "xdist",
    "nbclient", "nbformat", "matplotlib_inline", "_distutils_hack",
    "hypothesis"))    # the test suite's property tests: its gc callback fires inside a check
# (pip's editable install puts its import hook in site-packages as
# __editable___<project>_<version>_finder.py: any version of mathref's)
_EDITABLE_FINDER = re.compile(r"__editable___mathref_[0-9A-Za-z_]+_finder(\.py)?")
# the standard library's ways to run code elsewhere, where the gate does not see it
_STDLIB_REFUSED = ("multiprocessing", "concurrent", "subprocess.py", "asyncio")
# and its arbitrary-precision numbers, unless the exercise allows them (its ``modules``):
# finite differences at 60 digits meet any float64 tolerance a derivation sets, and a naive
# formula in decimal never overflows where the exercise is about overflow
_STDLIB_PRECISION = {"decimal.py": "decimal", "_pydecimal.py": "decimal", "fractions.py": "fractions"}
# C modules whose functions are refused when called from Python during a check
_C_REFUSED = ("numpy", "scipy", "cmath", "_posixsubprocess", "mpmath", "sympy", "gmpy2",
              "tokenizers", "transformers", "networkx", "torch._C._functorch")
# PyTorch's switches for the modes this gate relies on: refused when the answer calls them (a
# @contextmanager's body by the caller of contextlib's __enter__). torch._C's guard classes
# (DisableTorchFunction, _DisableTorchDispatch) are entered with no call the profile hook sees:
# a notebook-only hole (a check of the state they leave refused honest answers and was reverted
# in f2ec5fd); the grader refuses any ._C in a solution before it runs
_MODE_SWITCHES = frozenset(("handle_torch_function", "_pop_mode", "_pop_mode_temporarily",
                  "_pop_torch_function_stack", "_set_torch_function_mode",
                  "_pop_torch_dispatch_stack", "_set_dispatch_mode", "_unset_dispatch_mode",
                  "_disable_current_modes", "_DisableTorchDispatch", "DisableTorchFunction",
                  "DisableTorchFunctionSubclass", "_len_torch_function_stack",
                  "_get_function_stack_at", "_get_dispatch_stack_at"))
# the hooks this gate stands on (sys.setprofile above all): an answer that sets or clears one
# switches the gate off for the rest of the check (sys's C functions, threading's Python ones)
_HOOK_SWITCHES = frozenset(("setprofile", "settrace", "setprofile_all_threads",
                            "settrace_all_threads"))
_THREADING = os.path.abspath(threading.__file__)
_TENSOR_PY = os.path.abspath(torch._tensor.__file__)
# the frames of the checker that calls the answer (where an expected value may sit): sys's
# C functions, inspect's Python ones
_FRAMES = frozenset(("_getframe", "_current_frames"))
# and every live object, the checker's expected values and mathref's optimizer state among them
# (chapter 16's ninth read, L-A: an AdamW answer returned mathref's own moment tensors, found
# this way, which mathref's step then brought to the values compared)
_GC_OBJECTS = frozenset(("get_objects", "get_referrers", "get_referents"))
_INSPECT_FRAMES = frozenset(("currentframe", "stack", "getouterframes"))
_INSPECT = os.path.join(os.path.dirname(os.path.abspath(os.__file__)), "inspect.py")
# C functions that run code elsewhere: a new thread or process
_C_ELSEWHERE = ("start_new_thread", "start_new", "start_joinable_thread", "fork", "forkpty",
                "system", "posix_spawn", "posix_spawnp", "execv", "execve", "fork_exec")
# (turning grad mode back on is caught at the next PyTorch call: check_no_graph)
_C_AUTOGRAD = ("run_backward", "_make_dual", "_unpack_dual", "_enter_dual_level",
               "_set_fwd_grad_enabled")


def _classify(filename, gate):
    """None if code from ``filename`` may run during the check, else where it comes from."""
    if filename in _GATE_FILES:
        return None
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(_CHECKS):
        return f"the checkers' own module mathref.checks.{os.path.basename(path)[:-3]}"
    if path.startswith(_MATHREF):
        module = "mathref." + os.path.relpath(path, _MATHREF)[:-3].replace(os.sep, ".")
        if module.endswith(".__init__"):
            module = module[:-9]
        if module in gate.mathref or module.startswith("mathref.grade."):
            return None     # (the grader's channel: a function the checker hands in, there)
        return f"{module} (mathref's own code)"
    if _TORCH and path.startswith(_TORCH):
        rel = os.path.relpath(path, _TORCH).split(os.sep)
        if rel[0] == "distributions":
            return "torch.distributions (ready-made probability distributions)"
        if rel[0] in _TORCH_REFUSED or rel[0].removesuffix(".py") in _TORCH_REFUSED:
            return f"torch.{rel[0].removesuffix('.py')} (PyTorch's reference implementations)"
        if gate.no_autograd and rel[0] in _TORCH_AUTOGRAD and rel[-1] not in _AUTOGRAD_ALLOWED:
            # (torch.func's transforms are refused together, vmap with them although it
            # differentiates nothing, as its C side torch._C._functorch is: so say which)
            kind = "autograd" if rel[0] == "autograd" else "torch.func's transforms, vmap included"
            return f"torch.{'.'.join(rel)[:-3]} ({kind})"
        return None
    if _SITE in path:
        package = path.split(_SITE, 1)[1].split(os.sep)[0]
        if (package.removesuffix(".py") in _INFRASTRUCTURE or package in gate.modules
                or _EDITABLE_FINDER.fullmatch(package)):
            return None
        return f"the package {package.removesuffix('.py')}"
    if path.startswith(_STDLIB):
        rel = os.path.relpath(path, _STDLIB).split(os.sep)
        if rel[0] in _STDLIB_REFUSED:
            return f"the standard library's {rel[0].removesuffix('.py')} (code run elsewhere)"
        if rel[0] in _STDLIB_PRECISION and _STDLIB_PRECISION[rel[0]] not in gate.modules:
            return f"the standard library's {_STDLIB_PRECISION[rel[0]]} (arbitrary-precision numbers)"
        return None
    return None        # the student's own code (a notebook cell, a file of theirs)


_ANSWER_CODE = {}
_ANSWER_STRINGS = ("<solution", "<setup", "<ipython-input", "<string>", "<stdin>", "<check")
_VERDICTS = {}      # a gate's configuration -> its verdicts on code and on C functions
_ALLOWED_OPS = {}   # an exercise's own operators -> those with ELEMENTARY
_THREAD_START = threading.Thread.start.__code__
# TorchScript's C++ calls this on entering compiled code (a scripted or traced function, or a
# ScriptModule's forward): its operations then reach the gate only as aten operators, which a
# composite such as F.multi_head_attention_forward decomposes into elementary ones
_IS_EXPORTING_FN = getattr(getattr(torch, "compiler", None), "is_exporting", None)
_IS_EXPORTING = getattr(_IS_EXPORTING_FN, "__code__", None)
_MODULE_CALLS = frozenset(f.__code__ for f in (torch.nn.Module._call_impl,
                                               torch.nn.Module._wrapped_call_impl))


def _from_answer(frame):
    """Whether ``frame`` is the answer's own code (not PyTorch's, the library's or the
    standard library's)."""
    return frame is not None and answer_code(frame.f_code)


def answer_code(code):
    """Whether the code object ``code`` is the answer's own (see _from_answer)."""
    known = _ANSWER_CODE.get(code)
    if known is None:
        path = code.co_filename
        path = os.path.abspath(path) if not path.startswith("<") else path
        # (code compiled from a string: a solution cell's, or a library's own, such as
        # core's <forbidden> stubs and torch's generated code)
        known = _ANSWER_CODE[code] = not (
            path.startswith(_STDLIB) or _SITE in path or path.startswith(_MATHREF)
            or (_TORCH and path.startswith(_TORCH))
            or (path.startswith("<") and not path.startswith(_ANSWER_STRINGS)))
    return known


def _scripted(caller):
    """Whether torch.compiler.is_exporting, called with ``caller`` the Python frame below it, was
    called by TorchScript on entering compiled code: a ScriptModule called through nn.Module's
    __call__, or any other caller whose code does not name is_exporting (TorchScript's C++ adds
    no frame, so the caller is whoever called the compiled function: the answer, or a wrapper
    such as torch.no_grad()(f) or functools.singledispatch; chapter 13's fourth read). Torch's
    own Python callers name it: torch.compiler.is_exporting()."""
    if caller is None:
        return True
    if caller.f_code in _MODULE_CALLS:
        return isinstance(caller.f_locals.get("self"), torch.jit.ScriptModule)
    return "is_exporting" not in caller.f_code.co_names


def answer_threads():
    """The running threads (other than this one) whose code is the answer's own: a
    threading.Thread whose target, or whose subclass's run, was written in the notebook. The
    gate's modes and hook hold in the calling thread only, so work handed to such a thread
    during the check runs unseen. Also any thread, however started, with the answer's code on
    its stack now (``_thread.start_new_thread``, a pool's worker, ``Thread(target=exec)``: chapter
    2's fifth read, M1); each frame's ``f_back`` is fixed once made, so the walk is safe while
    the thread moves on."""
    me = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        while ident != me and frame is not None:
            if answer_code(frame.f_code):
                yield ident
                break
            frame = frame.f_back
    for thread in threading.enumerate():
        # the target, a Timer's function, the class's run; through partials, bound methods
        # and objects with __call__ (chapter 2's delta read, N2: Timer and partial(target))
        for run in (getattr(thread, "_target", None), getattr(thread, "function", None),
                    getattr(type(thread), "run", None)):
            while isinstance(run, functools.partial):
                run = run.func
            run = getattr(run, "__func__", run)
            code = getattr(run, "__code__", None) or getattr(
                getattr(type(run), "__call__", None), "__code__", None)
            if thread.ident != me and code is not None and answer_code(code):
                yield thread.ident
                break


_CONTEXTLIB = os.path.abspath(contextlib.__file__)


def _caller(frame):
    """The frame that called ``frame``'s function, contextlib's frames skipped: the body of a
    ``@contextmanager`` (torch's ``_disable_current_modes``) runs from contextlib's
    ``__enter__``, not from the ``with`` that the answer wrote (chapter 16's seventh read, L6)."""
    caller = frame.f_back
    while caller is not None and caller.f_code.co_filename == _CONTEXTLIB:
        caller = caller.f_back
    return caller


def _through(frame, name):
    """``name``, or "f, which ran name" where the refused code runs inside a library function
    f that the answer called (flex_attention reaches torch.distributions: f is the cause)."""
    chain = [frame]                     # from the refused code up to what the answer called
    while chain[-1].f_back is not None and not _from_answer(chain[-1].f_back):
        chain.append(chain[-1].f_back)
        if chain[-1].f_code.co_filename.startswith(_CHECKS):
            return name                 # called by the checker (a copy handed in), not the answer
    if chain[-1].f_back is None:
        return name                     # not under the answer's own code
    # the outermost function with a plain public name (not a wrapper's inner function)
    entry = next((f for f in reversed(chain) if "<" not in f.f_code.co_qualname
                  and not f.f_code.co_name.startswith("_")), frame)
    if entry is frame:
        return name
    return f"{entry.f_globals.get('__name__', '?')}.{entry.f_code.co_qualname}, which ran {name}"


# the frame each running garbage collection interrupted, by thread (a collection can start
# anywhere, in the checker's frames or the answer's)
_COLLECTING = {}


def _on_collection(phase, info):
    if phase == "start":
        _COLLECTING[threading.get_ident()] = sys._getframe().f_back
    else:
        _COLLECTING.pop(threading.get_ident(), None)


gc.callbacks.append(_on_collection)


def _collected(frame):
    """Whether ``frame`` is a standard-library function that the garbage collector called itself
    (a weakref callback, such as the one a ThreadPoolExecutor made elsewhere leaves behind): it
    runs when a collection happens to start, not for the answer. Only that frame: what it calls
    is judged as usual, so a callback the answer hands to weakref.finalize gains nothing, and
    the start of a thread never counts as collected."""
    interrupted = _COLLECTING.get(threading.get_ident())
    code = frame.f_code
    return (interrupted is not None and frame.f_back is interrupted and code is not _THREAD_START
            and os.path.abspath(code.co_filename).startswith(_STDLIB)
            and _SITE not in code.co_filename)


def _importing(frame):
    """Whether ``frame`` runs inside an import (a module imported lazily during the call):
    its code is the imported library's own setup, not the answer's."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True
        frame = frame.f_back
    return False


def _fingerprint(code):
    """What a function's code is, whatever file or line it was compiled from (the bytes of
    co_code differ between a .pyc and a fresh compile, so names, variables and constants). Its
    own name is part of it: without it, an answer written the obvious way (chapter 13's two-line
    pre-norm block) has the fingerprint of the library function it may not call, and is
    refused as a copy. So a copy renamed on purpose gets through here; under the grader a
    solution cell cannot build one (exec, inspect, types and dunder access are refused there)."""
    consts = tuple(c for c in code.co_consts if not hasattr(c, "co_code"))
    return (code.co_name, code.co_argcount, code.co_names, code.co_varnames, consts)


_LIBRARY = {}    # fingerprint -> the mathref modules that define a function with it
_SCANNED = set()
_LOADED = [0]      # len(sys.modules) at the last scan
_COPIES = {}       # (mathref modules allowed, len(_LIBRARY)) -> the fingerprints refused


def _library_fingerprints():
    """The fingerprints of mathref's functions and methods (the checkers' included): a copy
    compiled from their source (``exec(inspect.getsource(f))``) has the same."""
    import inspect
    if len(sys.modules) == _LOADED[0]:
        return _LIBRARY
    _LOADED[0] = len(sys.modules)
    for name, module in list(sys.modules.items()):
        if not (name == "mathref" or name.startswith("mathref.")) or module is None \
                or name in ("mathref.checks.gate", "mathref.checks.core") or name in _SCANNED:
            continue
        _SCANNED.add(name)
        for value in list(vars(module).values()):
            members = [value] + (list(vars(value).values()) if inspect.isclass(value) else [])
            for member in members:
                member = getattr(member, "__func__", member)
                code = getattr(member, "__code__", None)
                if code is not None and code.co_filename.startswith(_MATHREF):
                    _LIBRARY.setdefault(_fingerprint(code), set()).add(name)
    return _LIBRARY


def for_exercise(label, forbidden_codes=()):
    """The gate for one call of ``label``'s answer, from mathref.checks.allowances; under
    inference mode (the checker's "without autograd") it also keeps autograd out."""
    from mathref.checks.allowances import ALLOWANCES
    rule = ALLOWANCES.get(label, {})
    mathref = frozenset(rule.get("mathref", ()))
    library = _library_fingerprints()
    copies = _COPIES.get((mathref, len(library)))
    if copies is None:
        copies = _COPIES[mathref, len(library)] = frozenset(
            fp for fp, modules in library.items() if not modules & mathref)
    return Gate(label, ops=rule.get("ops", ()), mathref=mathref, modules=rule.get("modules", ()),
                no_autograd=torch.is_inference_mode_enabled(), allows=rule.get("allows", ""),
                copies=copies, forbidden=forbidden_codes,
                no_autograd_because=rule.get("no_autograd_because", NO_AUTOGRAD_BECAUSE))


# why "without autograd", unless the exercise's allowance says otherwise (``no_autograd_because``)
NO_AUTOGRAD_BECAUSE = "this exercise asks for the gradient by hand, without autograd"


class Gate:
    """While in effect (a ``with`` block around one call of the answer): only ``ops`` (aten
    names) run as PyTorch operators, only the Python code :func:`_classify` admits runs, and
    under ``no_autograd`` no graph is built. ``label`` and ``allows`` make the message."""

    def __init__(self, label, ops=frozenset(), mathref=frozenset(), modules=frozenset(),
                 no_autograd=False, allows="", copies=(), forbidden=(), trusted=(),
                 no_autograd_because=NO_AUTOGRAD_BECAUSE):
        self.label = label
        self.no_autograd_because = no_autograd_because
        self.allows = "PyTorch's elementary operations (arithmetic, comparisons, exp, log, " \
            "sqrt, reductions, matmul, views, indexing, creation, casts)" \
            + (f" and {allows}" if allows else "") \
            + ("" if "numpy" in modules else "; no NumPy")
        ops = frozenset(ops)
        self.ops = _ALLOWED_OPS.get(ops) or _ALLOWED_OPS.setdefault(ops, ELEMENTARY | ops)
        self.mathref = frozenset(mathref)
        self.modules = frozenset(modules)
        self.trusted = set(trusted)   # code objects the checker hands in (f in f(x + h))
        self.no_autograd = no_autograd
        # the exercise's forbidden functions (their code is swapped for a refusal during the
        # check): a copy of one is refused wherever its code lives, in an allowed mathref
        # module too (types.FunctionType(mathref.attention.softmax_backward.__code__, ...))
        self.forbidden = frozenset(_fingerprint(c) for c in forbidden)
        self.copies = frozenset(copies) | self.forbidden if forbidden else copies
        self.hits = []
        # verdicts on code and C functions, shared by the gates of one exercise (a checker
        # calls the answer thousands of times: each judges the same code)
        self._verdicts, self._c_verdicts = _VERDICTS.setdefault(
            (label, self.no_autograd, self.mathref, self.modules, self.copies), ({}, {}))

    # a refusal ---------------------------------------------------------------------------
    def message(self, what, where):
        # the reason only where the exercise is "without autograd": elsewhere autograd is not
        # why (a copy of mathref.autograd.topological_order is refused as a copy)
        why = (f": {self.no_autograd_because}"
               if self.no_autograd and ("autograd" in what or "autograd" in where) else "")
        return (f"your solution ran {what} (from {where}), which {self.label} does not "
                f"allow{why}. It allows {self.allows}")

    def refuse(self, what, where):
        message = self.message(what, where)
        self.hits.append(message)
        raise Refused(message)

    def check_no_graph(self, name, out, inputs=()):
        """``inputs``: the call's arguments that required grad before it; one of them handed back
        as it is (x.double() on a float64 x, x.contiguous()) builds no graph."""
        if torch.is_grad_enabled() or not torch.is_inference_mode_enabled():
            self.refuse("autograd (grad mode turned back on)", f"the call {name}")
        outs = out if isinstance(out, (tuple, list)) else (out,)
        if any(isinstance(t, torch.Tensor) and t.requires_grad
               and not any(t is x for x in inputs) for t in outs):
            self.refuse("autograd (a tensor that requires grad)", f"the call {name}")

    # the profile hook --------------------------------------------------------------------
    def _called_by_checker(self, frame):
        """A helper of the checkers' own module called by a function the checker handed in
        (chapter 16's draw calls its inverse CDF): walk up the checkers' frames to a handed-in
        one. The answer calling such a helper itself is refused (its frame is the answer's)."""
        while frame.f_code.co_filename.startswith(_CHECKS):
            frame = frame.f_back
            if frame is None:
                return False
            if frame.f_code in self.trusted:
                return True
        return False

    def _code_verdict(self, code):
        if code.co_name == "__del__":
            return None     # a finalizer runs when the garbage collector decides, not for the answer
        verdict = _classify(code.co_filename, self)
        if verdict is not None and code.co_filename.startswith(_CHECKS) and (
                code.co_name.startswith("__") or code.co_name == "<lambda>"):
            return None         # what the checker hands in, or its own tensor's hooks
        if verdict is None and code is _THREAD_START:
            return "threading: a new thread, where this check does not see what runs"
        if verdict is None and _fingerprint(code) in (
                self.forbidden if code.co_filename.startswith(_MATHREF) else self.copies):
            # (mathref's own files are judged by file above, except the exercise's forbidden
            # functions, whose own code runs only through a copy while their code is swapped)
            return "a copy of a function this exercise refuses"
        return verdict

    def _profile(self, frame, event, arg):
        if event == "call":
            code = frame.f_code
            verdict = self._verdicts.get(code, False)
            if verdict is False:
                verdict = self._verdicts[code] = self._code_verdict(code)
            if verdict is not None and (code in self.trusted or self._called_by_checker(frame)):
                return
            if verdict is None and code.co_name in _MODE_SWITCHES and _from_answer(_caller(frame)):
                self._profile_refuse(code.co_name, "torch.overrides: it switches off the checks")
            if verdict is None and code.co_name == "__array__" and code.co_filename == _TENSOR_PY \
                    and "numpy" not in self.modules and _from_answer(frame.f_back):
                # a NumPy function handed a tensor (a ufunc call runs no Python code of NumPy's)
                self._profile_refuse("numpy on a tensor", "NumPy: the tensor became an array")
            if verdict is None and code.co_name in _HOOK_SWITCHES \
                    and code.co_filename == _THREADING and _from_answer(frame.f_back):
                self._profile_refuse(code.co_name, "threading: it switches off the checks")
            if verdict is None and code.co_name in _INSPECT_FRAMES \
                    and code.co_filename == _INSPECT and _from_answer(frame.f_back):
                self._profile_refuse(code.co_name, "inspect: the checker's frames")
            if code is _IS_EXPORTING and _scripted(frame.f_back):
                self._profile_refuse("compiled TorchScript", "torch.jit: this check sees its "
                                     "operations only as the elementary ones they run")
            if verdict is not None and not _importing(frame) and not _collected(frame):
                self._profile_refuse(_through(frame, code.co_name), verdict)
        elif event == "c_call":
            if not _from_answer(frame):
                return      # a builtin the library calls: its Python code was judged above
            owner = getattr(arg, "__self__", None)
            # a bound method is made afresh at each call: judged by its type and name
            key = arg if owner is None or type(owner) is _ModuleType else \
                (type(owner), getattr(arg, "__name__", ""))
            try:
                verdict = self._c_verdicts.get(key, False)
            except TypeError:           # unhashable
                key, verdict = None, False
            if verdict is False:
                verdict = self._c_verdict(arg)
                if key is not None:
                    self._c_verdicts[key] = verdict
            name = getattr(arg, "__name__", "")
            if verdict is None and name in _MODE_SWITCHES:
                verdict = "torch._C: it switches off the checks"
            elif verdict is None and name in _FRAMES and getattr(arg, "__module__", "") == "sys":
                verdict = "sys: the checker's frames"
            elif verdict is None and name in _GC_OBJECTS and getattr(arg, "__module__", "") == "gc":
                verdict = "gc: the checker's objects"
            elif verdict is None and name == "numpy" and isinstance(owner, torch.Tensor) \
                    and "numpy" not in self.modules:
                verdict = "NumPy: the tensor became an array"
            elif verdict is None and name in _HOOK_SWITCHES \
                    and getattr(arg, "__module__", "") == "sys":
                verdict = "sys: it switches off the checks"
            if verdict is not None and not _importing(frame):
                self._profile_refuse(getattr(arg, "__qualname__", repr(arg)), verdict)

    def _c_verdict(self, function):
        module = getattr(function, "__module__", None)
        if module is None:
            owner = getattr(function, "__self__", None)
            module = type(owner).__module__ if owner is not None else ""
        module = module or ""
        name = getattr(function, "__name__", "")
        root = module.split(".")[0]
        if root not in self.modules:
            for refused in _C_REFUSED:
                if module == refused or module.startswith(refused + "."):
                    return f"the C module {module}"
        if name in _C_ELSEWHERE and root in ("_thread", "posix", "os", "nt", "_posixsubprocess"):
            return "a new thread or process, where this check does not see what runs"
        if self.no_autograd and name in _C_AUTOGRAD:
            return "autograd's C++ engine"
        if root == "decimal" and "decimal" not in self.modules:
            return "the C module decimal (arbitrary-precision numbers)"
        return None

    def _profile_refuse(self, what, where):
        message = self.message(what, where)
        self.hits.append(message)
        raise Refused(message)

    # entering and leaving ----------------------------------------------------------------
    def __enter__(self):
        self.hits = []
        if any(answer_threads()):     # recorded, not raised: the rule around the gate is set up
            self.hits.append(
                f"a thread started from the notebook's code is still running, and {self.label}'s "
                "check sees only what runs in its own thread: work handed to another thread "
                "would run unseen. End that thread (or restart the kernel) and run the check "
                "again")
        self._modes = [_FunctionGate(self), _DispatchGate(self)]
        for mode in self._modes:
            mode.__enter__()
        self._saved = (sys.getprofile(), threading.getprofile())
        threading.setprofile(self._profile)
        sys.setprofile(self._profile)
        return self

    def __exit__(self, kind, error, traceback):
        if not self.hits and sys.getprofile() != self._profile:
            # (a hook replaced in a way the gate did not see, or one its refusal removed)
            self.hits.append(self.message("sys.setprofile", "sys: the gate's hook was replaced"))
        # (a profiler written in C, cProfile's, cannot be put back from Python)
        sys.setprofile(self._saved[0] if callable(self._saved[0]) else None)
        threading.setprofile(self._saved[1] if callable(self._saved[1]) else None)
        for mode in reversed(self._modes):
            mode.__exit__(None, None, None)
        self._modes = []
        return False
