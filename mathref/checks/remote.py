"""Checks whose answer runs in another process (the grader's worker): what must be computed there.

Under ``python -m mathref.grade`` a checker holds a handle to the student's function, and what
it returns comes back as data, without its autograd graph. A check that needs the graph
(gradients through the student's output, the ``.grad`` a step leaves) sends a plain function of
its own to run where the answer runs (``mathref.grade.rpc.apply``) and compares what comes back.
In the notebook the same function runs here.
"""
import types

import torch

from mathref.checks import core
from mathref.checks.core import is_remote


def _runs_elsewhere(answer):
    """Whether ``answer`` is the grader's handle to a function running in another process (as
    handed in, or wrapped by mathref.checks.core, whose wrapper holds it in its closure or as
    ``__wrapped__``)."""
    if is_remote(answer) or is_remote(getattr(answer, "__wrapped__", None)):
        return True
    code = getattr(answer, "__code__", None)
    if code is not None and code.co_filename == core.__file__:
        for cell in answer.__closure__ or ():
            try:
                if is_remote(cell.cell_contents):
                    return True
            except ValueError:          # an empty cell
                continue
    return False


def remote_apply(answer):
    """``apply(fn, *args)``, which runs ``fn(answer, *args)`` where ``answer`` runs, if that is
    the grader's other process; else None (call ``fn(answer, *args)`` here)."""
    # core's wrapper (a plain function) carries apply; a handle's attributes would be the worker's
    apply = getattr(answer, "apply", None) if isinstance(answer, types.FunctionType) else None
    return apply if apply is not None and _runs_elsewhere(answer) else None


def grads_where_run(answer, leaves, build, probe, pair):
    """Runs where the answer's code runs: ``answer(*build(leaves))``, then the facts about its
    output's graph and the gradients of ⟨probe, output⟩ w.r.t. the leaves, as data: ``(result,
    "no graph" | "leaf" | None (a shape other than probe's) | [gradient or None per leaf])``.
    ``pair``: the output is the first of a returned pair."""
    result = answer(*build(leaves))
    out = result[0] if pair and isinstance(result, (tuple, list)) and len(result) else result
    if not isinstance(out, torch.Tensor) or not out.requires_grad:
        return result, "no graph"
    if out.grad_fn is None:
        return result, "leaf"
    if tuple(out.shape) != tuple(probe.shape):
        return result, None
    grads = torch.autograd.grad((out * probe).sum(), leaves, allow_unused=True)
    return result, [None if gr is None else gr.detach() for gr in grads]
