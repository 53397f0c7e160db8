"""Execute a submission for the record: ``python -m mathref.grade.record TIMEOUT``.

Runs inside the sandbox (the kernel it starts inherits it). The executed notebook is kept for
the instructor, and its status (``ok``, ``timeout``, ``kernel died``, ``hang``) is shown in the
grades, but no verdict is read from it: a submission could forge all of this. The grader also
kills this process's whole group at the deadline, whatever happens here.

Every code cell runs, whatever its tags (``skip-execution``, ``raises-exception`` and the like
are ignored), errors allowed. The time limit is one wall-clock budget for the whole notebook.
Each cell's output is capped. A kernel that reports itself idle for a cell but never sends the
cell's reply (the ipykernel 7 hang) is retried once, from the start, if time is left.
"""
import json
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError

OUTPUT_CAP = 20_000  # characters of output kept per cell


class CappedClient(NotebookClient):
    """nbclient that drops a cell's outputs beyond OUTPUT_CAP characters and notes whether the
    kernel went idle for the running cell."""

    def __init__(self, nb, deadline, **kwargs):
        super().__init__(nb, **kwargs)
        self.deadline = deadline
        self.sizes = {}
        self.idle_cells = {}   # cell index -> when the kernel said it was idle for it
        self.current = None

    def process_message(self, msg, cell, cell_index):
        content = msg.get("content", {})
        if msg.get("msg_type") == "status" and content.get("execution_state") == "idle":
            self.idle_cells.setdefault(cell_index, time.monotonic())
        if msg.get("msg_type") in ("stream", "execute_result", "display_data", "error"):
            size = len(json.dumps(content, default=str))
            used = self.sizes.get(cell_index, 0)
            self.sizes[cell_index] = used + size
            if used + size > OUTPUT_CAP:
                if used <= OUTPUT_CAP:
                    cell.outputs.append(nbformat.v4.new_output(
                        "stream", name="stderr",
                        text=f"[grader: output beyond {OUTPUT_CAP} characters dropped]\n"))
                return None
        return super().process_message(msg, cell, cell_index)


def run(nb, timeout, workdir):
    deadline = time.monotonic() + timeout
    state = {"cell": None}

    def cell_timeout(cell):
        return max(0.5, deadline - time.monotonic())

    def on_cell_start(cell, cell_index):
        state["cell"] = cell_index
        if time.monotonic() >= deadline:
            raise CellTimeoutError("the notebook's time ran out")

    for cell in nb.cells:  # tags that skip or excuse cells are ignored
        if cell.cell_type == "code":
            cell.metadata.pop("tags", None)
            cell.outputs = []
    for attempt in (1, 2):
        client = CappedClient(nb, deadline, timeout=max(1, int(timeout)), timeout_func=cell_timeout,
                              kernel_name="python3", allow_errors=True, record_timing=False,
                              interrupt_on_timeout=False, on_cell_start=on_cell_start,
                              resources={"metadata": {"path": workdir}})
        try:
            client.execute()
            return "ok", "", None
        except CellTimeoutError:
            cell = state["cell"]
            # a hang: the kernel said it was idle for this cell well before the time ran out,
            # yet its reply never came (a cell merely finishing late is not one)
            hung = deadline - client.idle_cells.get(cell, deadline) > 2
            if hung and attempt == 1 and deadline - time.monotonic() > 5:
                continue  # the kernel finished the cell but its reply never came: retry once
            what = ("the kernel went idle without replying" if hung else "still running")
            return ("hang" if hung else "timeout"), f"{what} when {timeout:g} s ran out", cell
        except DeadKernelError:
            return "kernel died", "the kernel died (out of memory, a crash, or exit)", state["cell"]
        except Exception as err:
            return "grader error", f"{type(err).__name__}: {str(err)[:200]}", state["cell"]
    return "hang", "the kernel went idle without replying, twice", state["cell"]


def main(argv=None):
    """``python -m mathref.grade.record TIMEOUT``: the submission on stdin; on stdout, one JSON
    object with the status, its detail, the cell and the executed notebook. Nothing else reaches
    stdout: the kernel and this process write to /dev/null."""
    argv = sys.argv[1:] if argv is None else argv
    timeout = float(argv[0])
    import os
    out = os.dup(1)                      # not inherited by the kernel
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    nb = nbformat.read(sys.stdin, as_version=4)
    start = time.monotonic()
    status, detail, cell = run(nb, timeout, os.getcwd())
    with os.fdopen(out, "w", encoding="utf-8") as f:
        json.dump({"status": status, "detail": detail, "cell": cell,
                   "seconds": time.monotonic() - start, "notebook": nbformat.writes(nb)}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
