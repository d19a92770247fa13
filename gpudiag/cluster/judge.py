"""From cluster runs to findings, the report's data, the table and the TensorBoard run.

A ClusterRun (gpudiag/cluster/clusterrun.py) and its tasks' results become one plain
``row`` per configuration for gpudiag.verdicts.cluster; every task's stderr is read for
TensorFlow's messages (gpudiag.cluster.messages). Shared by `scaling --workers` (many
configurations) and `worker` (one task's view). TF-free.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.cluster import messages
from gpudiag.cluster.clusterrun import ClusterRun, Limits, TaskOutcome, describe
from gpudiag.markdown import markdown_table
from gpudiag.records.cluster import WorkerResult, WorkerStats
from gpudiag.tb.writer import EventWriter

TABLE_HEADERS = ["mode", "workers", "batch", "ex/s per worker", "ex/s total", "step",
                 "collectives", "loss", "eval acc", "outcome"]


def _stats_dict(w: WorkerStats) -> dict[str, Any]:
    return w.to_dict()


def chief_result(run: ClusterRun) -> WorkerResult | None:
    chief = run.chief
    return chief.result if chief is not None else None


def stopped_within_s(run: ClusterRun) -> float | None:
    """From the first failed task's end to the last task's end, in the failed attempt."""
    for attempt in run.attempts:
        dead = [t.ended_at_s for t in attempt if t.name in run.failed
                and t.ended_by != "stopped" and t.ended_at_s is not None]
        ends = [t.ended_at_s for t in attempt if t.ended_at_s is not None]
        if dead and ends:
            return max(0.0, max(ends) - min(dead))
    return None


def busy_fraction(result: WorkerResult) -> float | None:
    """ps: the share of its span each worker spent in steps, averaged over workers."""
    shares = []
    for w in result.workers:
        if w.examples_per_s and w.step_s_median:
            shares.append(min(1.0, w.step_s_median * w.examples_per_s / w.batch))
    return statistics.mean(shares) if shares else None


def task_row(t: TaskOutcome) -> dict[str, Any]:
    text = t.stderr_text()
    return {"task": t.name, "attempt": t.attempt, "role": t.role, "ok": t.ok,
            "started": t.started,
            "formed": t.formed, "last_step": t.last_step, "resumed_from": t.resumed_from,
            "ended": t.ended_by, "exit": t.exit_text, "error_type": t.error_type,
            "error": t.error, "stderr_tail": t.stderr_tail, "listening": t.listening,
            "stragglers": messages.stragglers(text), "lost_peers": messages.lost_peers(text)}


def config_row(run: ClusterRun, limits: Limits, *, shared_machine: bool) -> dict[str, Any]:
    """verdicts.cluster's input for one configuration; ``shared_machine``: every task on
    this one machine (their CPUs are the same cores)."""
    result = chief_result(run)
    workers = [_stats_dict(w) for w in result.workers] if result else []
    tasks = [task_row(t) for t in run.outcomes()]
    steps = [w["step_s_median"] for w in workers if w["step_s_median"] is not None]
    comm = [w["communication_s_per_step"] for w in workers
            if w["communication_s_per_step"] is not None]
    stragglers = sorted({s for t in tasks for s in t["stragglers"]})
    return {
        "config": run.name, "mode": run.mode, "n_workers": run.n_workers,
        "batch_per_worker": run.batch_per_worker, "outcome": run.outcome,
        "failed": run.failed, "restarts_used": run.restarts_used,
        "resumed_from": max((t.resumed_from or 0 for t in run.final), default=0) or None,
        "form_timeout_s": limits.form_timeout_s, "timeout_s": limits.timeout_s,
        "stopped_within_s": stopped_within_s(run), "stragglers": stragglers, "tasks": tasks,
        "steps": max((t.last_step or 0 for t in run.final), default=0),
        "device_kind": result.device_kind if result else None, "workers": workers,
        "shared_machine": shared_machine,
        "total_examples_per_s": result.total_examples_per_s if result else None,
        "step_s": max(steps) if steps else None,
        "comm_s_per_step": statistics.mean(comm) if comm else None,
        "final_loss": result.final_loss if result else None,
        "final_accuracy": result.final_accuracy if result else None,
        "eval_loss": result.eval_loss if result else None,
        "eval_accuracy": result.eval_accuracy if result else None,
        "coordinator_examples_per_s": result.coordinator_examples_per_s if result else None,
        "busy_fraction": busy_fraction(result) if result and run.mode == "ps" else None,
    }


def seen_messages(runs: Sequence[ClusterRun]) -> list[dict[str, Any]]:
    """Every catalogue entry found in any task's stderr, with the tasks that printed it."""
    found: dict[str, dict[str, Any]] = {}
    for run in runs:
        for t in run.outcomes():
            for s in messages.scan(t.stderr_text()):
                entry = found.setdefault(s.entry.id, {
                    "id": s.entry.id, "severity": s.entry.severity, "meaning": s.entry.meaning,
                    "fix": s.entry.fix, "count": 0, "first": s.first, "tasks": []})
                entry["count"] += s.count
                label = f"{run.name}/{t.name}"
                if label not in entry["tasks"]:
                    entry["tasks"].append(label)
    order = [e.id for e in messages.ENTRIES]
    return sorted(found.values(), key=lambda e: order.index(e["id"]))


def _fmt(x: float | None, pattern: str) -> str:
    return "n/a" if x is None else pattern.format(x)


def table(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    out = []
    for r in rows:
        per = " + ".join(_fmt(w["examples_per_s"], "{:,.0f}") for w in r["workers"]) or "n/a"
        out.append([r["mode"], str(r["n_workers"]), str(r["batch_per_worker"]), per,
                    _fmt(r["total_examples_per_s"], "{:,.0f}"), _fmt(r["step_s"], "{:.4f} s"),
                    _fmt(r["comm_s_per_step"], "{:.4f} s"), _fmt(r["final_loss"], "{:.3f}"),
                    _fmt(r["eval_accuracy"], "{:.2f}"), r["outcome"]])
    return out


def rich_table(rows: Sequence[dict[str, Any]]) -> Any:
    """The table as a rich Table, for the console."""
    from rich.table import Table

    t = Table(title="cluster (examples/s measured on each worker, summed)")
    for h in TABLE_HEADERS:
        t.add_column(h)
    for cells in table(rows):
        t.add_row(*cells)
    return t


def write_tb(run_dir: Path, rows: Sequence[dict[str, Any]]) -> None:
    """The CLUSTER_TB_RUN run: summed examples/s and step time against the worker count."""
    with EventWriter(run_dir / layout.CLUSTER_TB_RUN) as w:
        for r in rows:
            if r["total_examples_per_s"]:
                w.scalar(layout.cluster_examples_per_s_tag(r["mode"], r["batch_per_worker"]),
                         r["total_examples_per_s"], r["n_workers"])
            if r["step_s"]:
                w.scalar(layout.cluster_step_s_tag(r["mode"], r["batch_per_worker"]),
                         r["step_s"], r["n_workers"])
        w.text(layout.TAG_CLUSTER_TABLE, markdown_table(TABLE_HEADERS, table(rows)))


def run_data(run: ClusterRun) -> dict[str, Any]:
    """The report's ``data.cluster.configs[<name>]``."""
    result = chief_result(run)
    return {**describe(run), "result": result.to_dict() if result else None}
