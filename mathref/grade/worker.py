"""The student's side of a verification: ``python -m mathref.grade.worker RFD WFD``.

Runs inside the sandbox, as an untrusted process. It executes the assignment's setup cell once,
then for each exercise the grader asks about: a fresh copy of that namespace, the student's
solution cell, and the assignment's check cell with ``checks`` replaced by a recorder, which
captures the arguments the check cell would pass to the checker. Those arguments (data, or
handles to the student's functions) go back to the grader, whose checker then calls them through
the channel. Nothing this process prints, patches or returns reaches the checker's code: the
grader reads its answers as data, and what the checker passes arrives here as data too (see
:mod:`mathref.grade.rpc`). The exercise's rules (no autograd, forbidden functions) are applied
here, where the student's code runs, but a grade never rests on them alone: the grader reads
each solution cell before anything runs (:mod:`mathref.grade.policy`).
"""
import random
import sys
import warnings

import torch

from mathref.checks import core as _core
from mathref.checks.core import Forbidden as _Forbidden
from mathref.checks.core import without_autograd as _without_autograd
from mathref.grade import rpc


class _Recorder:
    """Stands in for ``mathref.checks`` while the check cell runs: records the first call of
    ``check_<label>``."""

    def __init__(self, wanted):
        self._wanted = wanted
        self.calls = []

    def __getattr__(self, name):
        def record(*args, **kwargs):
            if name == self._wanted and not self.calls:
                self.calls.append((args, kwargs))
        return record


class WorkerEndpoint(rpc.Endpoint):
    """Calls the student's functions under the rules the checker's call carries, applied here,
    where the student's code runs, as the notebook's check applies them: no autograd, the
    exercise's forbidden functions and its gate on what runs (mathref.checks.gate, with the
    exercise's allowance), the functions the checker hands in exempt."""
    no_autograd = False
    forbid = ()
    exercise_rules = ()             # the exercise's own rule, sent with "prepare"
    reads_without_autograd = False  # whether a call of this exercise ran without autograd

    def call_local(self, target, args, kwargs):
        """A call of the student's function or object: under the rules the checker's call
        carries, or the exercise's own where it carries none (an object the answer returned,
        called later)."""
        self.reads_without_autograd |= self.no_autograd
        return _ruled(target, args, kwargs, self.forbid or self.exercise_rules, self.no_autograd,
                      _core._handed_in(args, kwargs))

    def read_local(self, read, args):
        """A read the grader asks for (an attribute, the length, the items of an object of the
        student's) runs the object's own code: under the exercise's rule, and without autograd
        once a call of the exercise ran without it, as a call is. Nothing in it is trusted."""
        return _ruled(read, args, {}, self.forbid or self.exercise_rules,
                      self.no_autograd or self.reads_without_autograd, ())


def _ruled(target, args, kwargs, forbid, no_autograd, trusted):
    rules = [_Forbidden(names, label, because, trusted=trusted, gate=gated)
             for names, label, because, gated in forbid]

    def ruled(*args, **kwargs):     # (inside the inference mode, as in the notebook)
        return _under(rules, lambda *a, **k: _core.settle(target(*a, **k)), args, kwargs)
    call = _without_autograd(ruled) if no_autograd else ruled
    return call(*args, **kwargs)


_MODULES, _CLASSES = {}, {}     # the snapshot: module -> its names, id(class) -> its own names
_MISSING = object()


def _snapshot():
    """What torch's and mathref's modules and classes hold, taken after the setup cell and
    before any solution cell runs: a forbidden function is looked up here (red team H3: a
    solution that rebinds ``mathref.optim.warmup_cosine`` to a decoy would otherwise have the
    rule guard the decoy while it calls the real one). Modules imported later resolve as
    before."""
    _MODULES.clear()
    _CLASSES.clear()
    with warnings.catch_warnings():     # isinstance() on deprecated module attributes warns
        warnings.simplefilter("ignore")
        _take_snapshot()


def _take_snapshot():
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in ("torch", "mathref"):
            continue
        try:
            names = dict(vars(module))
        except TypeError:
            continue
        _MODULES[name] = (module, names)
        for value in names.values():
            if isinstance(value, type) and id(value) not in _CLASSES:
                _CLASSES[id(value)] = (value, dict(vars(value)))


def _attribute(obj, attr):
    if isinstance(obj, type) and all(id(k) in _CLASSES for k in obj.__mro__[:-1]):
        for klass in obj.__mro__[:-1]:
            value = _CLASSES[id(klass)][1].get(attr, _MISSING)
            if value is not _MISSING:
                get = getattr(type(value), "__get__", None)
                return get(value, None, obj) if get is not None else value
    return getattr(obj, attr)


def _resolve(name, live=_core._resolve):
    """:func:`mathref.checks.core._resolve` against the snapshot (see :func:`_snapshot`)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        found = _MODULES.get(".".join(parts[:cut]))
        if found is None:
            continue
        obj, rest = found[0], parts[cut:]
        if rest:
            obj = found[1].get(rest[0], _MISSING)
            if obj is _MISSING:        # a submodule imported since, say
                return live(name)
        try:
            for attr in rest[1:]:
                obj = _attribute(obj, attr)
        except AttributeError:
            return None
        return obj
    return live(name)


def _under(rules, call, args, kwargs):
    if not rules:
        return call(*args, **kwargs)
    with rules[0]:
        return _under(rules[1:], call, args, kwargs)


def _apply_context(endpoint, context):
    try:
        torch.set_rng_state(context["rng"])
        random.setstate(context["pyrandom"])
        torch.set_grad_enabled(bool(context["grad"]))
        endpoint.no_autograd = bool(context["no_autograd"])
        endpoint.forbid = [(tuple(str(n) for n in names), str(label), str(because), bool(gated))
                           for names, label, because, gated in context.get("forbid", [])]
        torch.set_default_dtype(getattr(torch, str(context["dtype"])))
    except Exception:
        pass


def _not_dumpable():
    """No other process of the sandbox (one the student's code might start) may trace this
    one or write its memory: prctl(PR_SET_DUMPABLE, 0), before any student code runs."""
    import ctypes
    import ctypes.util
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if libc.prctl(4, 0, 0, 0, 0) != 0:     # PR_SET_DUMPABLE = 4
        raise SystemExit("worker: could not make itself non-dumpable")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    rfd, wfd = int(argv[0]), int(argv[1])
    _not_dumpable()
    endpoint = WorkerEndpoint(rfd, wfd, trusted=False)
    endpoint.context_in = lambda context: _apply_context(endpoint, context)
    endpoint.context_out = lambda: {"rng": torch.get_rng_state(),
                                    "pyrandom": random.getstate()}
    base = None
    while True:
        message = rpc.read_message(rfd)
        if not isinstance(message, dict):
            return 2
        op = message.get("kind")
        if op == "request":          # a call about an object of ours, outside a checker call
            endpoint.serve(message)
            continue
        reply = {"kind": "prepared"}
        try:
            if op == "setup":
                base = {"__name__": "__main__"}
                exec(compile(str(message["source"]), "<setup cell>", "exec"), base)
                _snapshot()
                _core._resolve = _resolve
                reply["value"] = endpoint.encode(None)
            elif op == "prepare":
                endpoint.objects.clear()
                endpoint.sent.clear()
                endpoint.origin.clear()
                endpoint.no_autograd = endpoint.reads_without_autograd = False
                endpoint.forbid = ()
                namespace = dict(base)
                stage = "your solution cell"
                # the exercise's named refusals hold at the cell's top level too: a table built
                # there by a refused function is refused (the fourth read of chapter 12)
                names, label, because, gated = message.get("forbid") or ((), "", "", False)
                names = tuple(str(n) for n in names)
                rules = [_Forbidden(names, str(label), str(because), gate=False)] if names else []
                endpoint.exercise_rules = [(names, str(label), str(because), bool(gated))] \
                    if names or gated else []
                code = compile(str(message["solution"]), "<solution cell>", "exec")
                _under(rules, exec, (code, namespace), {})
                stage = "the check cell"
                recorder = _Recorder(str(message["checker"]))
                namespace["checks"] = recorder
                exec(compile(str(message["check"]), "<check cell>", "exec"), namespace)
                if not recorder.calls:
                    raise RuntimeError("the check cell did not call its checker")
                args, kwargs = recorder.calls[0]
                reply["value"] = endpoint.encode((list(args), dict(kwargs)))
            elif op == "bye":
                return 0
            else:
                return 2
        except BaseException as err:  # noqa: B036 - reported to the grader, which decides
            reply.pop("value", None)
            where = locals().get("stage", "the setup cell") if op == "prepare" else "the setup cell"
            reply["error"] = (type(err).__name__, str(err)[:2000], where)
        rpc.write_message(wfd, reply)


if __name__ == "__main__":
    sys.exit(main())
