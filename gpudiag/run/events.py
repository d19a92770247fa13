"""Read the program's events files into typed records (parent side, no TensorFlow).

One file per process (children/program/events-<pid>.jsonl). A file whose last line was
cut short (the process was killed while writing it) loses only that line; a line that is
not JSON is skipped and counted.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpudiag.layout import RUN_EVENTS_PREFIX, RUN_EVENTS_SUFFIX, run_faults_name
from gpudiag.readers.placementlog import short_device
from gpudiag.records.run import (
    ClusterJoin,
    ConfigCall,
    CrashRecord,
    DatasetCall,
    DeviceScope,
    DeviceSnapshot,
    FunctionGraph,
    ProcessObservation,
    ProfileRecord,
    PyWarning,
    Step,
    StepSeries,
    StepStats,
    StrategyRecord,
    TfLogRecord,
    WeightsRecord,
)
from gpudiag.run import classcount


def read_events(events_dir: Path) -> tuple[dict[int, list[dict[str, Any]]], int]:
    """{pid: events in order}, and how many unreadable lines were skipped."""
    out: dict[int, list[dict[str, Any]]] = {}
    bad = 0
    for path in sorted(events_dir.glob(f"{RUN_EVENTS_PREFIX}*{RUN_EVENTS_SUFFIX}")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if isinstance(event, dict) and "kind" in event and "pid" in event:
                out.setdefault(int(event["pid"]), []).append(event)
    for events in out.values():
        events.sort(key=lambda e: e.get("seq", 0))
    return out, bad


_TASK = re.compile(r"/job:(?P<job>\w+)/replica:\d+/task:(?P<task>\d+)")


def _local(device: str, joins: list[ClusterJoin]) -> bool:
    """Whether a listed device is this process's own: in a cluster, TensorFlow lists every
    task's devices (``/job:worker/replica:0/task:1/device:CPU:0``)."""
    m = _TASK.search(device)
    if m is None or m["job"] == "localhost" or not joins:
        return True
    return (m["job"], int(m["task"])) == (joins[-1].task_type, joins[-1].task_id)


def series_label(kind: str, name: object, fetches: list[str] | None = None) -> str:
    """How a loop is named in the report and in its TensorBoard tags (tbwrite): a step
    function by its name, a Session.run group by its number and fetches (Keras fit is
    "Model.fit", numbered by ``observe`` when a process fits more than once)."""
    if kind == "function":
        return f"tf.function {name}"
    if kind == "session":
        return f"Session.run #{name} [{', '.join(fetches or [])[:80]}]"
    return "Model.fit"


def _per_call(row: dict[str, Any], last_batch: dict[Any, int]) -> int:
    """Training steps one fit call ran: Keras calls ``on_train_batch_end`` with the last
    batch of a call of ``steps_per_execution`` steps, so a call ran the batches since the
    previous call's last of the same epoch (an epoch's first call: from batch 0); an
    aggregated row of ``n`` calls, their batches over ``n``."""
    batch, epoch = row.get("batch"), row.get("epoch")
    if not isinstance(batch, int):
        return 1
    n = (batch - last_batch.get(epoch, -1)) // int(row.get("n") or 1)
    last_batch[epoch] = batch
    return n if n >= 1 else 1


def _series_steps(rows: list[dict[str, Any]], kind: str) -> list[Step]:
    if kind == "function":  # the final row adds the last call's loss to that call's row
        merged: dict[int, dict[str, Any]] = {}
        for r in rows:
            into = merged.setdefault(int(r["i"]), {})
            into.update({k: v for k, v in r.items() if v is not None})
        rows = [merged[i] for i in sorted(merged)]
    steps = []
    last_batch: dict[Any, int] = {}  # epoch -> the last batch its previous call ended at
    for r in rows:
        if kind == "fit":
            logs = dict(r.get("logs") or {})
            t0, t_end = r.get("t0"), r.get("t_end")
            call = t_end - t0 if isinstance(t0, int | float) and isinstance(t_end, int | float) \
                else None
            steps.append(Step(int(r["i"]), t0, call, logs.pop("loss", None), logs,
                              epoch=r.get("epoch"), count=int(r.get("n") or 1),
                              per_call=_per_call(r, last_batch)))
        else:
            loss = r.get("loss") if kind == "function" else r.get("value")
            steps.append(Step(int(r["i"]), r.get("t0"), r.get("dt"), loss,
                              traced=bool(r.get("traced")), count=int(r.get("n") or 1)))
    return steps


def observe(pid: int, events: list[dict[str, Any]], events_dir: Path) -> ProcessObservation:
    """One process's events as a ProcessObservation."""
    times = [e["t"] for e in events if isinstance(e.get("t"), int | float)]
    fields: dict[str, Any] = {"pid": pid, "ppid": None, "argv": [], "start_env": {},
                              "events": len(events),
                              "first_t_unix_s": min(times) if times else None,
                              "last_t_unix_s": max(times) if times else None}
    calls, strategies, graphs, stats, logs, errors, sessions = [], [], [], [], [], [], []
    py_warnings: list[PyWarning] = []
    scopes: list[DeviceScope] = []
    datasets: list[DatasetCall] = []
    fits: list[dict[str, Any]] = []
    joins: list[ClusterJoin] = []
    functions: dict[str, list[dict[str, Any]]] = {}
    function_events: dict[str, dict[str, Any]] = {}
    groups: dict[int, dict[str, Any]] = {}
    fingerprints: dict[str, list[dict[str, Any]]] = {}
    placed: list[dict[str, Any]] = []
    stalls: list[dict[str, Any]] = []

    for e in events:
        kind = e["kind"]
        if kind == "process":
            fields.update(ppid=e.get("ppid"), argv=e.get("argv") or [],
                          start_env=e.get("env") or {})
        elif kind == "tf_import":
            fields.update(tf_version=e.get("version"), cpp_log_level=e.get("cpp_log_level"),
                          cpp_log_level_overridden=bool(e.get("cpp_log_level_overridden")),
                          placement_log=bool(e.get("placement_log")))
        elif kind == "keras_import":
            fields["keras_version"] = e.get("version")
        elif kind == "config_call":
            calls.append(ConfigCall(e["order"], e["api"], e.get("args") or [],
                                    e.get("kwargs") or {}, e.get("initialized_before"),
                                    e.get("caller"), e.get("error_type"), e.get("error")))
        elif kind == "devices" and "devices" not in fields:
            names = [d["name"] for d in e.get("logical", [])]
            remote = [n for n in names if not _local(n, joins)]
            fields["devices"] = DeviceSnapshot(
                e.get("reason", "?"), [d["name"] for d in e.get("physical", [])],
                [short_device(n) for n in names if n not in remote], e.get("gpus") or [],
                e.get("soft_placement"), e.get("cuda_build"), remote)
        elif kind == "strategy":
            strategies.append(StrategyRecord(
                e["class"], e.get("num_replicas_in_sync"),
                [short_device(d) for d in e.get("worker_devices") or []],
                [short_device(d) for d in e.get("parameter_devices") or []],
                e.get("cross_device_ops"), e.get("communication_implementation"),
                bool(e.get("nccl")), e.get("cluster"), e.get("caller")))
        elif kind == "cluster_join":
            joins.append(ClusterJoin(e.get("via", "?"), e.get("task_type"), e.get("task_id"),
                                     e.get("cluster_spec")))
        elif kind in ("cluster_joined", "cluster_join_failed") and joins:
            joins[-1] = replace(joins[-1], outcome="joined" if kind == "cluster_joined"
                                else "failed")
        elif kind == "fit_begin":
            fits.append({"begin": e, "rows": [], "epochs": []})
        elif kind == "fit_steps" and fits:
            fits[-1]["rows"] += e.get("rows") or []
        elif kind == "fit_epoch" and fits:
            fits[-1]["epochs"].append(e.get("logs") or {})
        elif kind == "fit_end" and fits and isinstance(e.get("iterations"), int):
            fits[-1]["iterations"] = e["iterations"]
        elif kind == "function_steps":
            functions.setdefault(e["function"], []).extend(e.get("rows") or [])
        elif kind == "function":
            function_events.setdefault(e["function"], e)
            for g in e.get("graphs") or []:
                graphs.append(FunctionGraph(e["function"], g["name"], g.get("ops", 0),
                                            [tuple(p) for p in g.get("pinned") or []]))
        elif kind == "stall":
            stalls.append({**e, "ended_after_s": None})
        elif kind == "stall_end" and stalls:
            stalls[-1]["ended_after_s"] = e.get("after_s")
        elif kind == "placement":
            placed.extend(g for g in e.get("graphs") or [] if isinstance(g, dict))
        elif kind == "session":
            sessions.append(e.get("config") or {})
        elif kind == "session_steps":
            group = groups.setdefault(e["group"], {"fetches": e.get("fetches") or [],
                                                   "rows": []})
            group["rows"] += e.get("rows") or []
        elif kind == "step_stats":
            stats.append(StepStats(e.get("group", "?"), e.get("devices") or {},
                                   e.get("pinned") or [], e.get("node_devices") or {}))
        elif kind == "dataset_call":
            datasets.append(DatasetCall(e.get("method", "?"), e.get("args") or {},
                                        e.get("function"), e.get("input"), e.get("output"),
                                        e.get("caller")))
        elif kind == "weights":
            fingerprints.setdefault(e["source"], []).append(e)
        elif kind == "crash" and "crash" not in fields:
            fields["crash"] = CrashRecord(e["type"], e.get("message", ""), e.get("thread", ""),
                                          e.get("frames") or [], e.get("user_frame"),
                                          e.get("causes") or [])
        elif kind == "profile":
            fields["profile"] = ProfileRecord(e["status"], e.get("logdir", ""), e.get("source"),
                                              e.get("steps") or [], e.get("error"))
        elif kind == "tf_log":
            logs.append(TfLogRecord(e.get("level", ""), e.get("message", ""),
                                    e.get("source", ""), bool(e.get("shown"))))
        elif kind == "device_scope":
            scopes.append(DeviceScope(str(e.get("device", "")), e.get("caller")))
        elif kind == "py_warning":
            py_warnings.append(PyWarning(e.get("category", "Warning"), e.get("message", ""),
                                         e.get("file", ""), int(e.get("line") or 0),
                                         e.get("user_frame")))
        elif kind in ("hook_error", "hook_note"):
            errors.append({k: e.get(k) for k in ("kind", "where", "type", "message")})
        elif kind == "exit":
            fields["exited"] = True
    series: list[StepSeries] = []
    for n, fit in enumerate(fits, 1):
        begin = fit["begin"]
        facts = {k: begin.get(k) for k in ("model", "model_id", "loss", "optimizer",
                                            "learning_rate",
                                            "strategy", "replicas", "trainable_parameters",
                                            "trainable_bytes",
                                            "params", "examples")}
        if "iterations" in fit:  # optimizer.iterations when fit ended: the global step
            facts["global_step"] = fit["iterations"]
        classes, facts["classes_from"] = classcount.fit_classes(begin.get("output_width"),
                                                                begin.get("loss"))
        series.append(StepSeries("fit", series_label("fit", None) if len(fits) == 1 else
                                 f"Model.fit #{n}",
                                 _series_steps(fit["rows"], "fit"), begin.get("batch_size"),
                                 classes, facts, fit["epochs"]))
    for name, rows in functions.items():
        classes, source = classcount.function_classes(function_events.get(name))
        series.append(StepSeries("function", series_label("function", name),
                                 _series_steps(rows, "function"), num_classes=classes,
                                 facts={"classes_from": source,
                                        **{k: (function_events.get(name) or {}).get(k)
                                           for k in ("file", "line", "called_at",
                                                     "trainable_bytes_by_device")}}))
    for index, group in sorted(groups.items()):
        label = series_label("session", index, group["fetches"])
        gsteps = [r["global_step"] for r in group["rows"]
                  if isinstance(r.get("global_step"), int)]
        facts = {"fetches": group["fetches"]}
        if gsteps:  # the graph's global step, fetched by this group's runs
            facts.update(global_step_first=gsteps[0], global_step=gsteps[-1])
        series.append(StepSeries("session", label, _series_steps(group["rows"], "session"),
                                 facts=facts))
    weights = [WeightsRecord(src, fp[0].get("fingerprint"), fp[-1].get("fingerprint"),
                             fp[0].get("phase", ""), fp[-1].get("phase", ""),
                             int(fp[-1].get("calls") or 0) - int(fp[0].get("calls") or 0))
               for src, fp in fingerprints.items()]
    faults = events_dir / run_faults_name(pid)
    return ProcessObservation(
        **fields, config_calls=calls, strategies=strategies, cluster_joins=joins,
        series=series, weights=weights, graphs=graphs, sessions=sessions, step_stats=stats,
        tf_logs=logs, py_warnings=py_warnings, device_scopes=scopes, dataset_calls=datasets,
        hook_errors=errors, placed_graphs=placed, stalls=stalls,
        faults=faults.read_text(errors="replace") if faults.is_file() else "")


def observe_all(events_dir: Path) -> tuple[list[ProcessObservation], int]:
    """Every process, in the order they started; and the count of unreadable lines."""
    by_pid, bad = read_events(events_dir)
    order = sorted(by_pid, key=lambda pid: by_pid[pid][0].get("t", 0.0))
    return [observe(pid, by_pid[pid], events_dir) for pid in order], bad
