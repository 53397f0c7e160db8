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

import torch

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
    """Calls the student's functions under the rules the checker's call carries: no autograd,
    and the exercise's forbidden functions (applied here, where the student's code runs)."""
    no_autograd = False
    forbid = ()

    def call_local(self, target, args, kwargs):
        call = _without_autograd(target) if self.no_autograd else target
        rules = [_Forbidden(names, label, because) for names, label, because in self.forbid]
        return _under(rules, call, args, kwargs)


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
        endpoint.forbid = [(tuple(str(n) for n in names), str(label), str(because))
                           for names, label, because in context.get("forbid", [])]
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
                reply["value"] = endpoint.encode(None)
            elif op == "prepare":
                endpoint.objects.clear()
                endpoint.sent.clear()
                endpoint.origin.clear()
                endpoint.no_autograd = False
                endpoint.forbid = ()
                namespace = dict(base)
                stage = "your solution cell"
                exec(compile(str(message["solution"]), "<solution cell>", "exec"), namespace)
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
