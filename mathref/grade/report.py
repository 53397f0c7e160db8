"""What the grader writes: the CSV (one row per student, one column per exercise) and the
report, each written once, atomically."""
import csv
import os
import tempfile
from pathlib import Path

from mathref.grade.collect import VERDICTS, csv_safe, report_safe


def _atomic_write(path, text):
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    os.replace(tmp, path)



def write_csv(results, labels, path):
    """Write the grades atomically (a temporary file renamed over ``path``)."""
    import io
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["student", "status", "score"] + [csv_safe(label) for label in labels])
    for r in results:
        writer.writerow([csv_safe(r["student"]), csv_safe(r["status"]), r["score"]]
                        + [r["verdicts"][label][0] for label in labels])
    _atomic_write(path, buffer.getvalue())



def format_report(results, labels, folder, timeout, skipped=(), mode=""):
    lines = [f"{mode}."] if mode.startswith("UNSAFE") else []   # said first, never buried
    lines.append(f"Graded {len(results)} submission(s) in {report_safe(folder)}: {len(labels)} "
                 f"exercise(s), time limit {timeout} s per notebook.")
    if mode:
        lines.append(f"Isolation: {mode}.")
    lines.append("")
    for r in results:
        head = f"{report_safe(r['student'])}: {r['score']}/{len(labels)}"
        if r["status"] not in ("ok", "not executed"):
            head += f" ({r['status']}: {report_safe(r['detail'])})"
        if r.get("flag"):
            head += f" [FLAGGED: {report_safe(r['flag'])}]"
        lines.append(head)
        grouped = {}
        for label in labels:
            verdict, message = r["verdicts"][label]
            if verdict in ("fail", "error", "timeout", "missing"):
                lines.append(f"  {label}: {verdict}: {report_safe(message)}")
            elif verdict != "pass":
                grouped.setdefault(verdict, []).append(label)
        for verdict, names in grouped.items():
            lines.append(f"  {verdict}: {', '.join(names)}")
    if labels:
        lines += ["", "Per exercise (number of students):"]
        width = max(len(label) for label in labels)
        present = [v for v in VERDICTS if any(r["verdicts"][label][0] == v
                                               for r in results for label in labels)]
        lines.append("  " + " " * width + "".join(f"  {v:>{max(len(v), 4)}}" for v in present))
        for label in labels:
            counts = [sum(r["verdicts"][label][0] == v for r in results) for v in present]
            lines.append(f"  {label:<{width}}" + "".join(
                f"  {c:>{max(len(v), 4)}}" for c, v in zip(counts, present)))
    if skipped:
        lines += ["", "Skipped (not <student>.ipynb): " + ", ".join(skipped)]
    return "\n".join(lines) + "\n"
