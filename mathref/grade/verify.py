"""The trusted side of a verification: ``python -m mathref.grade.verify JOB.json RESULT.json``.

Started by the grader for one submission, with the grader's own snapshot of mathref first on
``sys.path``. It imports the checkers here, before any student code runs, starts the
student's worker in the sandbox, and for each exercise of the assignment asks the worker for the
arguments the assignment's check cell passes, then runs the checker *in this process* on them.
The student's functions are handles (:mod:`mathref.grade.rpc`): calling one sends the arguments
to the worker and reads back data. The verdict is whatever the checker did here: it returned
(``pass``), raised ExerciseCheckFailed (``fail`` or ``not attempted``), or the worker ran out of
time or died (``timeout``, ``error``).
"""
import contextlib
import io
import json
import os
import random
import subprocess
import sys
import time

import torch

from mathref.checks import CHECKS, ExerciseCheckFailed, core
from mathref.grade import rpc, sandbox
from mathref.grade import selftest  # noqa: F401  (registers the self-test checkers)

_GENUINE_AUTOGRAD = (torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward)


def _context():
    patched = (torch.autograd.grad, torch.autograd.backward, torch.Tensor.backward) \
        != _GENUINE_AUTOGRAD
    return {"rng": torch.get_rng_state(), "pyrandom": random.getstate(),
            "grad": torch.is_grad_enabled(),
            "no_autograd": bool(patched or torch.is_inference_mode_enabled()),
            "forbid": [[list(rule.names), rule.label, rule.because] for rule in core.ACTIVE],
            "dtype": str(torch.get_default_dtype()).replace("torch.", "")}


def _apply_context(context):
    try:
        state = context["rng"]
        if isinstance(state, torch.Tensor) and state.shape == torch.get_rng_state().shape:
            torch.set_rng_state(state)
        random.setstate(context["pyrandom"])
    except Exception:
        pass


class Worker:
    def __init__(self, job):
        self.job = job
        self.process = None
        self.endpoint = None

    def start(self, deadline):
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        argv, options = sandbox.command(
            [sandbox.python(), "-m", "mathref.grade.worker", str(to_worker_r),
             str(from_worker_w)], self.job["workdir"], readable=self.job["readable"],
            hidden=self.job["hidden"], limits=self.job["limits"],
            unsafe=self.job.get("unsafe", False))
        self.process = subprocess.Popen(
            argv, env=sandbox.environment(self.job["workdir"], self.job["pythonpath"]),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            pass_fds=(to_worker_r, from_worker_w), **options)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self.endpoint = rpc.Endpoint(from_worker_r, to_worker_w, serve_private=True)
        self.endpoint.context_out = _context
        self.endpoint.context_in = _apply_context
        self.endpoint.deadline = deadline
        return self.ask({"kind": "setup", "source": self.job["setup"]})

    def ask(self, message):
        """Send one setup/prepare message; return the decoded value or raise."""
        rpc.write_message(self.endpoint.wfd, message)
        while True:
            reply = rpc.read_message(self.endpoint.rfd, self.endpoint.deadline)
            if isinstance(reply, dict) and reply.get("kind") == "prepared":
                break
            raise rpc.ChannelClosed("a malformed reply")
        if "error" in reply:
            type_name, text, where = (list(reply["error"]) + ["", "", ""])[:3]
            raise _CellError(str(type_name), str(text), str(where))
        return self.endpoint.decode(reply["value"])

    def stop(self):
        if self.process is not None:
            try:
                rpc.write_message(self.endpoint.wfd, {"kind": "bye"})
            except BaseException:  # noqa: B036
                pass
            sandbox.kill_group(self.process)
            for fd in (self.endpoint.rfd, self.endpoint.wfd):
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.process = None

    def exit_detail(self):
        if self.process is None:
            return ""
        try:
            code = self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return ""
        return f" (exit status {code})" if code >= 0 else f" (killed by signal {-code})"


class _CellError(Exception):
    def __init__(self, type_name, text, where):
        super().__init__(text)
        self.type_name, self.text, self.where = type_name, text, where


def _one_line(text, limit=300):
    line = next((s.strip() for s in str(text).splitlines() if s.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def verify(job):
    verdicts = {}
    worker = Worker(job)
    started = False
    setup_error = None
    for exercise in job["exercises"]:
        label = exercise["label"]
        if exercise["solution"] is None:
            verdicts[label] = ("missing", exercise.get("why", "no solution cell for this exercise"))
            continue
        checker = CHECKS.get(label) or selftest.CHECKS.get(label)
        if checker is None:
            verdicts[label] = ("error", "the installed mathref has no checker for this label")
            continue
        if setup_error is not None:
            verdicts[label] = setup_error
            continue
        deadline = time.monotonic() + job["exercise_timeout"]
        try:
            if not started:
                worker.start(deadline)
                started = True
            worker.endpoint.deadline = deadline
            args, kwargs = worker.ask({"kind": "prepare", "solution": exercise["solution"],
                                       "check": exercise["check"],
                                       "checker": exercise["checker"]})
            with contextlib.redirect_stdout(io.StringIO()):
                checker(*args, **kwargs)
            verdicts[label] = ("pass", "")
        except ExerciseCheckFailed as failed:
            message = failed.message
            verdict = "not attempted" if message.startswith("not attempted") else "fail"
            verdicts[label] = (verdict, _one_line(message))
        except _CellError as err:
            if err.where == "the setup cell":
                setup_error = ("error", _one_line(f"the setup cell failed in the sandbox: "
                                                  f"{err.type_name}: {err.text}"))
                verdicts[label] = setup_error
            else:
                verdicts[label] = ("error", _one_line(f"{err.where} raised {err.type_name}: "
                                                      f"{err.text}"))
        except rpc.ChannelTimeout:
            verdicts[label] = ("timeout", f"no answer within {job['exercise_timeout']} s")
            worker.stop()
            started = False
        except rpc.ChannelClosed as err:
            verdicts[label] = ("error", _one_line(
                f"the solution's process ended during the check{worker.exit_detail()}: {err}"))
            worker.stop()
            started = False
        except Exception as err:  # the checker itself choked on what it was given
            verdicts[label] = ("error", _one_line(f"the check could not run on this answer: "
                                                  f"{type(err).__name__}: {err}"))
    worker.stop()
    return verdicts


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0], encoding="utf-8") as f:
        job = json.load(f)
    torch.set_num_threads(1)
    verdicts = verify(job)
    tmp = argv[1] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"verdicts": verdicts}, f)
    os.replace(tmp, argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
