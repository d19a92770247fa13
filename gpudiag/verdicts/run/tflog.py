"""The verdict of `gpudiag run` on TensorFlow's log (run.tf-log): its lines matched
against the catalogue (gpudiag.catalogue), each known message with its fix; the BFC
allocator's out-of-memory as its summary says; a lost peer's messages, when the program
still exited 0, as its tasks shutting down (settle). Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpudiag.catalogue import LogMatch, bfc
from gpudiag.report import Finding, Status
from gpudiag.verdicts.common import title

# Cluster messages that a program which exited 0 prints as its tasks shut down (a
# coordinator's connection to servers a launcher stops, a peer leaving first).
SHUTDOWN_MESSAGES = frozenset({"cluster-peer-connection-lost", "cluster-peer-unhealthy"})


def settle(matches: Sequence[LogMatch], *, completed: bool) -> list[LogMatch]:
    """The log matches as they count: when the program ran to exit code 0, a lost peer's
    messages were its tasks shutting down, informational, not a failure."""
    if not completed:
        return list(matches)
    return [replace(m, entry=replace(m.entry, severity="info",
                                     meaning=m.entry.meaning + " The program still exited "
                                     "0: here it was the tasks shutting down."))
            if m.entry.id in SHUTDOWN_MESSAGES else m for m in matches]


def tf_log(matches: Sequence[LogMatch], captured_reason: str | None,
           proc: str = "", bfc_ooms: Sequence[bfc.BfcOom] = ()) -> Finding:
    """TensorFlow's log, matched against the catalogue: each known message, its fix; the
    BFC allocator's out-of-memory as its summary says (``bfc_ooms``: fragmented or full)."""
    told = bfc.meaning_and_fix(list(bfc_ooms))
    if told is not None:
        matches = [replace(m, entry=replace(m.entry, meaning=told[0], fix=told[1]))
                   if m.entry.id == "bfc-out-of-memory" else m for m in matches]
    evidence = {"matches": [{"id": m.entry.id, "severity": m.entry.severity,
                             "count": m.count, "line": m.first, "meaning": m.entry.meaning,
                             "fix": m.entry.fix} for m in matches],
                "not_captured": captured_reason}
    tail = f" (TensorFlow's C++ log was not captured: {captured_reason})" \
        if captured_reason else ""
    serious = [m for m in matches if m.entry.severity != "info"]
    if not matches:
        status: Status = "skip" if captured_reason else "ok"
        return Finding(f"run.tf-log{proc}", status,
                       "no known problem in TensorFlow's log" + tail, evidence,
                       title=("TensorFlow's log was not captured" if captured_reason else
                              "no known problem in TensorFlow's log"))
    text = "; ".join(f"{m.entry.id} x{m.count}: {m.entry.meaning}" for m in serious) or \
        "only informational messages (" + ", ".join(m.entry.id for m in matches) + ")"
    if not serious:
        return Finding(f"run.tf-log{proc}", "ok", text + tail, evidence,
                       title=f"TensorFlow's log: {len(matches)} informational message(s)")
    worst: Status = "fail" if any(m.entry.severity == "fail" for m in serious) else "warn"
    first = next(m for m in serious if m.entry.severity == worst)
    return Finding(f"run.tf-log{proc}", worst, text + tail, evidence,
                   title=title(f"TensorFlow's log: {first.entry.id} x{first.count}"
                               + (f" (+{len(serious) - 1} more)" if len(serious) > 1 else ""),
                               f"TensorFlow's log: {len(serious)} known problem(s)"),
                   advice=" ".join(dict.fromkeys(m.entry.fix for m in serious)))
