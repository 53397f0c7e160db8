"""The trusted side of a verification: ``python -m mathref.grade.verify JOB.json OUTFD``.

Started by the grader (:func:`mathref.grade.execute._verify`) in a sandbox of its own, as an
unprivileged user; each exercise of the job names its channel (:mod:`mathref.grade.rpc`), a
pair of pipes to a worker of its own, which the grader starts in another sandbox. ``OUTFD`` is
where the verdicts go, one JSON line per exercise. The checkers are imported here, from the
grader's snapshot of mathref, before any worker is asked anything. For each exercise its worker
runs the assignment's setup cell and the student's solution cell, and sends back the arguments
the assignment's check cell passes (handles to the student's functions); the checker runs
*here* on them. Its verdict is what the checker did: it returned (``pass``), raised
ExerciseCheckFailed (``fail`` or ``not attempted``), or the worker ran out of time or died
(``timeout``, ``error``). A fresh worker per exercise: what one solution leaves in a library's
dicts or lists never reaches the next (chapter 12's ninth read).

Each run draws its inputs afresh: the job carries a secret seed (drawn by the grader for the
grading run, never seen by the worker); every checker that takes a ``generator`` gets one
seeded from an HMAC of it, and the global random generators, whose state the worker sees, are
seeded from another HMAC of it before each checker (:func:`derived_seed`).
"""
import contextlib
import hashlib
import hmac
import inspect
import io
import json
import os
import random
import sys
import time

import torch

from mathref.checks import CHECKS, ExerciseCheckFailed, core
from mathref.grade import rpc
from mathref.grade import selftest  # noqa: F401  (registers the self-test checkers)

_GENUINE_AUTOGRAD = (torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward)


def _context():
    patched = (torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward) \
        != _GENUINE_AUTOGRAD
    return {"rng": torch.get_rng_state(), "pyrandom": random.getstate(),
            "grad": torch.is_grad_enabled(),
            "no_autograd": bool(patched or torch.is_inference_mode_enabled()),
            # each rule with whether its exercise's gate holds too, applied where the answer runs
            "forbid": [[list(rule.names), rule.label, rule.because, bool(rule.with_gate)]
                       for rule in core.ACTIVE],
            "dtype": str(torch.get_default_dtype()).replace("torch.", "")}


def _apply_context(context):
    try:
        state = context["rng"]
        if isinstance(state, torch.Tensor) and state.shape == torch.get_rng_state().shape \
                and state.dtype == torch.uint8:
            torch.set_rng_state(state)
        random.setstate(context["pyrandom"])
    except Exception:
        pass


class _CellError(Exception):
    def __init__(self, type_name, text, where):
        super().__init__(text)
        self.type_name, self.text, self.where = type_name, text, where


class Worker:
    """The grader's end of the channel to the student's worker."""

    def __init__(self, rfd, wfd):
        self.endpoint = rpc.Endpoint(rfd, wfd, trusted=True)
        self.endpoint.context_out = _context
        self.endpoint.context_in = _apply_context

    def close(self):
        for fd in (self.endpoint.rfd, self.endpoint.wfd):
            try:
                os.close(fd)
            except OSError:
                pass

    def ask(self, message, deadline):
        """Send one setup/prepare message; return the decoded value or raise."""
        self.endpoint.deadline = deadline
        rpc.write_message(self.endpoint.wfd, message)
        reply = rpc.read_message(self.endpoint.rfd, deadline)
        if not isinstance(reply, dict) or reply.get("kind") != "prepared":
            raise rpc.ChannelClosed("a malformed reply")
        if "error" in reply:
            type_name, text, where = (list(reply["error"]) + ["", "", ""])[:3]
            raise _CellError(str(type_name)[:80], str(text)[:2000], str(where)[:80])
        return self.endpoint.decode(reply["value"])


# a checker's own message (what ran, what the exercise allows, the hint) is kept whole up to this;
# other messages (a traceback's last line, a channel error) are cut at 300 characters
CHECK_MESSAGE_LIMIT = 1200


def _one_line(text, limit=300):
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _takes_generator(checker):
    try:
        return "generator" in inspect.signature(checker).parameters
    except (TypeError, ValueError):
        return False


def derived_seed(secret, purpose, number):
    """A seed drawn from the run's secret by HMAC-SHA256: ``"generator"`` seeds the checker's
    ``generator=`` (its inputs); ``"global"`` seeds torch's and Python's global generators, whose
    state goes to the worker with each call. One never tells the other, nor the secret, nor
    another exercise's (red team H6: the worker read the secret back from
    ``torch.get_rng_state()``)."""
    digest = hmac.new(str(int(secret)).encode(), f"{purpose}:{int(number)}".encode(),
                      hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "little") % 2 ** 63


def verify(job, emit, connect=lambda exercise: Worker(*exercise["channel"])):
    """Verify the job's exercises in order, ``emit(label, verdict, message)`` for each, each
    against its own worker (``connect(exercise)``)."""
    # the chapter's default dtype (collect.default_dtype), for the checkers here and, through
    # _context, for the answers in the worker: as in the notebook
    dtype, before = job.get("dtype", "float32"), torch.get_default_dtype()
    torch.set_default_dtype(getattr(torch, dtype if dtype in ("float32", "float64") else "float32"))
    try:
        _verify_each(job, emit, connect)
    finally:
        torch.set_default_dtype(before)


def _verify_each(job, emit, connect):
    setup_error = None
    for exercise in job["exercises"]:
        label = exercise["label"]
        number = int(exercise["number"])
        if exercise["solution"] is None:
            emit(label, "missing", exercise.get("why", "no solution cell for this exercise"))
            continue
        checker = CHECKS.get(label) or selftest.CHECKS.get(label)
        if checker is None:
            emit(label, "error", "the installed mathref has no checker for this label")
            continue
        if setup_error is not None:
            emit(label, *setup_error)
            continue
        deadline = time.monotonic() + job["exercise_timeout"]
        seed = derived_seed(job["seed"], "generator", number)
        worker = connect(exercise)
        try:
            worker.ask({"kind": "setup", "source": job["setup"]}, deadline)
            args, kwargs = worker.ask({"kind": "prepare", "solution": exercise["solution"],
                                       "check": exercise["check"],
                                       "checker": exercise["checker"],
                                       "forbid": [list(getattr(checker, "forbid", ())), label,
                                                  getattr(checker, "because", ""),
                                                  label in core.CHECKS]}, deadline)
            if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
                raise rpc.ChannelClosed("a malformed reply")
            kwargs.pop("generator", None)
            if _takes_generator(checker):
                kwargs["generator"] = torch.Generator().manual_seed(seed)
            shared = derived_seed(job["seed"], "global", number)   # the worker sees this one
            torch.manual_seed(shared)
            random.seed(shared)
            with contextlib.redirect_stdout(io.StringIO()):
                checker(*args, **kwargs)
            emit(label, "pass", "")
        except ExerciseCheckFailed as failed:
            message = failed.message
            verdict = "not attempted" if message.startswith("not attempted") else "fail"
            emit(label, verdict, _one_line(message, CHECK_MESSAGE_LIMIT))
        except _CellError as err:
            if err.where == "the setup cell":
                setup_error = ("error", _one_line(f"the setup cell failed in the sandbox: "
                                                  f"{err.type_name}: {err.text}"))
                emit(label, *setup_error)
            else:
                emit(label, "error", _one_line(f"{err.where} raised {err.type_name}: {err.text}"))
        except rpc.ChannelTimeout:
            emit(label, "timeout", f"no answer within {job['exercise_timeout']} s")
        except rpc.ChannelClosed as err:
            emit(label, "error", _one_line(f"the solution's process ended or broke the "
                                           f"channel during the check: {err}"))
        except Exception as err:  # the checker itself choked on what it was given
            emit(label, "error", _one_line(f"the check could not run on this answer: "
                                           f"{type(err).__name__}: {err}"))
        finally:
            worker.close()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as f:
        job = json.load(f)
    out = os.fdopen(int(argv[1]), "w", encoding="utf-8")
    torch.set_num_threads(1)

    def emit(label, verdict, message):
        out.write(json.dumps([label, verdict, message]) + "\n")
        out.flush()

    verify(job, emit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
