"""A process's gathered state (gpudiag.run.runstate) as the final analysis's
ProcessObservation (gpudiag.records.run): its loops as step series, its weights'
fingerprints, its devices in the short form (parent side, no TensorFlow)."""

from __future__ import annotations

import re
from typing import Any

from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.readers.placementlog import short_device
from gpudiag.records.callsites import HostReadSite, KerasCallSite
from gpudiag.records.run import (
    ClusterJoin,
    DeviceSnapshot,
    ProcessObservation,
    StepSeries,
    WeightsRecord,
)
from gpudiag.run import classcount
from gpudiag.run.runstate import (
    FitRun,
    ProcessState,
    eager_steps,
    fit_steps,
    function_steps,
    series_label,
    session_steps,
)

_TASK = re.compile(r"/job:(?P<job>\w+)/replica:\d+/task:(?P<task>\d+)")


def _local(device: str, joins: list[ClusterJoin]) -> bool:
    """Whether a listed device is this process's own: in a cluster, TensorFlow lists every
    task's devices (``/job:worker/replica:0/task:1/device:CPU:0``)."""
    m = _TASK.search(device)
    if m is None or m["job"] == "localhost" or not joins:
        return True
    return (m["job"], int(m["task"])) == (joins[-1].task_type, joins[-1].task_id)


def devices(e: ev.Devices | None, joins: list[ClusterJoin]) -> DeviceSnapshot | None:
    if e is None:
        return None
    names = [str(d.get("name")) for d in e.logical]
    remote = [n for n in names if not _local(n, joins)]
    return DeviceSnapshot(e.reason, [str(d.get("name")) for d in e.physical],
                          [short_device(n) for n in names if n not in remote], e.gpus,
                          e.soft_placement, e.cuda_build, remote, e.env)


def _compile_of(begin: lev.FitBegin, compiles: list[lev.Compile]) -> dict[str, Any] | None:
    """The latest compile of the fitted model (by its id), as plain data."""
    mine = [c for c in compiles if c.model_id == begin.model_id] if begin.model_id else []
    if not mine:
        return None
    c = mine[-1]
    return {"model": c.model, "steps_per_execution": c.steps_per_execution,
            "jit_compile": c.jit_compile, "run_eagerly": c.run_eagerly, "caller": c.caller}


def _fit_series(begin: lev.FitBegin, fit: FitRun, label: str,
                compiles: list[lev.Compile]) -> StepSeries:
    facts = {"model": begin.model, "model_id": begin.model_id, "loss": begin.loss,
             "optimizer": begin.optimizer, "learning_rate": begin.learning_rate,
             "strategy": begin.strategy, "replicas": begin.replicas,
             "trainable_parameters": begin.trainable_parameters,
             "trainable_bytes": begin.trainable_bytes, "params": begin.params,
             "examples": begin.examples, "callbacks": fit.callbacks,
             "compile": _compile_of(begin, compiles), "dtype_policy": begin.dtype_policy,
             "keras": begin.keras, "reduction": begin.reduction,
             "multi_worker": begin.multi_worker, "output_width": begin.output_width,
             "setup": begin.setup, "labels": begin.labels, "inputs": begin.inputs,
             "data_unread": begin.data_unread, "fit_caller": begin.caller}
    if fit.iterations is not None:  # optimizer.iterations when fit ended: the global step
        facts["global_step"] = fit.iterations
    classes, facts["classes_from"] = classcount.fit_classes(begin.output_width, begin.loss)
    return StepSeries("fit", label, fit_steps(fit.rows), begin.batch_size, classes, facts,
                      fit.epochs)


def _traces(traces: list[lev.Trace]) -> list[dict[str, Any]]:
    return [{"call": t.call, "traces": t.traces, "trace_s": t.trace_s, "call_s": t.call_s,
             "changed": t.changed, "new_object": t.new_object, "created_at": t.created_at,
             "called_at": t.called_at} for t in traces]


def _function_series(name: str, function: lev.Function | None,
                     rows: list[lev.FunctionRow], traces: list[lev.Trace]) -> StepSeries:
    classes, source = classcount.function_classes(function)
    facts: dict[str, Any] = {"classes_from": source, "file": None, "line": None,
                             "called_at": None, "trainable_bytes_by_device": None,
                             "retraces": _traces(traces)}
    if function is not None:
        facts.update(file=function.file, line=function.line, called_at=function.called_at,
                     trainable_bytes_by_device=function.trainable_bytes_by_device,
                     trainable_variables=function.trainable_variables,
                     jit_compile=function.jit_compile)
    return StepSeries("function", series_label("function", name), function_steps(rows),
                      num_classes=classes, facts=facts)


def _session_series(index: int, fetches: list[str], rows: list[lev.SessionRow]) -> StepSeries:
    gsteps = [r.global_step for r in rows if r.global_step is not None]
    facts: dict[str, Any] = {"fetches": fetches}
    if gsteps:  # the graph's global step, fetched by this group's runs
        facts.update(global_step_first=gsteps[0], global_step=gsteps[-1])
    return StepSeries("session", series_label("session", index, fetches),
                      session_steps(rows), facts=facts)


def _eager_series(name: str, loop: lev.EagerLoop | None,
                  rows: list[lev.FunctionRow]) -> StepSeries:
    facts: dict[str, Any] = {} if loop is None else {
        "file": loop.file, "line": loop.line, "def_line": loop.def_line, "code": loop.code,
        "called_at": {"file": loop.file, "line": loop.line, "function": loop.step}}
    return StepSeries("eager", series_label("eager", name), eager_steps(rows), facts=facts)


def _py_input(p: lev.PyDataInput) -> dict[str, Any]:
    return {"source": p.source, "class": p.class_name, "workers": p.workers,
            "use_multiprocessing": p.use_multiprocessing, "max_queue_size": p.max_queue_size,
            "batches": p.batches, "total_s": p.total_s, "median_s": p.median_s,
            "p90_s": p.p90_s, "cpu_median_s": p.cpu_median_s, "cpu_where": p.cpu_where}


def _floor(floor: lev.InputFloor | None) -> dict[str, Any] | None:
    return None if floor is None or floor.floor_s is None else {
        "floor_s": floor.floor_s, "p10_s": floor.p10_s, "calls": floor.calls}


def series(state: ProcessState) -> list[StepSeries]:
    out = [_fit_series(fit.begin, fit, series_label("fit", None) if len(state.fits) == 1
                       else f"Model.fit #{n}", state.compiles)
           for n, fit in enumerate(state.fits, 1)]
    for s in out:  # the process's Python data classes fit took batches from (pydata)
        s.facts["py_input"] = [_py_input(p) for p in state.py_inputs]
    custom = [_function_series(name, state.functions.get(name), rows,
                               state.traces.get(name, []))
              for name, rows in state.function_rows.items()]
    custom += [_eager_series(name, state.eager.get(name), rows)
               for name, rows in state.eager_rows.items()]
    for s in custom:  # next()'s own cost, measured once for the process (inputwait)
        s.facts["next_floor"] = _floor(state.input_floor)
    out += custom
    out += [_session_series(index, fetches, rows)
            for index, (fetches, rows) in sorted(state.groups.items())]
    for s in out:  # the cores the program kept busy after its profiled window (its loop's)
        use = _cpu_use(state.cpu_use, s.label)
        if use is not None:
            s.facts["cpu_use"] = use
    return out


def _cpu_use(use: lev.CpuUse | None, label: str) -> dict[str, Any] | None:
    if use is None or use.source != label or use.wall_s <= 0:
        return None
    from gpudiag.verdicts.prediction import machine_load

    # the machine's load when judged: with busy_cores, what other work holds (whatif_input)
    return {"busy_cores": use.cpu_s / use.wall_s, "cores": use.cores, "steps": use.steps,
            "cpu_s": use.cpu_s, "wall_s": use.wall_s, "load_1min": machine_load()}


def keras_calls(e: lev.KerasCalls | None) -> dict[str, Any]:
    """The program's Keras calls per site (the most time first), when the first started,
    the calls past the bound on sites."""
    if e is None:
        return {}
    sites = [KerasCallSite(str(d.get("method")), d.get("file"), d.get("line"),
                           str(d.get("code") or ""), str(d.get("model") or ""),
                           int(d.get("calls") or 0), float(d.get("total_s") or 0.0),
                           float(d.get("first_s") or 0.0), d.get("median_s"),
                           d.get("rows_min"), d.get("rows_max"), d.get("models"),
                           d.get("trace_s"))
             for d in e.sites]
    return {"keras_calls": sorted(sites, key=lambda s: s.total_s, reverse=True),
            "first_keras_call_t_unix_s": e.first_call_t_unix_s,
            "keras_calls_left_out": e.left_out_calls,
            "rss_after_calls": [(int(c), int(b)) for c, b in e.rss_after_calls]}


def host_reads(e: lev.HostReads | None) -> dict[str, Any]:
    """The program's lines that read tensors back, the most time first; the reads at lines
    past the hook's bound."""
    if e is None:
        return {}
    sites = [HostReadSite(d.get("file"), d.get("line"), str(d.get("code") or ""),
                          str(d.get("how") or ""), int(d.get("reads") or 0),
                          float(d.get("total_s") or 0.0), d.get("median_s"))
             for d in e.sites]
    return {"host_reads": sorted(sites, key=lambda s: s.total_s, reverse=True),
            "host_reads_left_out": e.left_out_reads}


def _weights(source: str, fp: list[ev.Weights]) -> WeightsRecord:
    return WeightsRecord(source, fp[0].fingerprint, fp[-1].fingerprint, fp[0].phase,
                         fp[-1].phase, fp[-1].calls - fp[0].calls)


def _process(p: ev.Process | None) -> dict[str, Any]:
    return {} if p is None else {
        "ppid": p.ppid, "argv": p.argv, "start_env": p.env, "executable": p.executable,
        "python_version": p.python, "cwd": p.cwd}


def _imports(tf: ev.TfImport | None, keras: ev.KerasImport | None) -> dict[str, Any]:
    out: dict[str, Any] = {} if keras is None else {"keras_version": keras.version,
                                                    "keras_module": keras.module}
    if tf is not None:
        out.update(tf_version=tf.version, cpp_log_level=tf.cpp_log_level,
                   cpp_log_level_overridden=tf.cpp_log_level_overridden,
                   placement_log=tf.placement_log,
                   tf_initialized_at_import=tf.initialized_at_import,
                   tf_import_caller=tf.caller, modules_before_tf=tf.modules_before)
    return out


def _sessions(sessions: list[lev.Session], end: ev.Exit | None) -> dict[str, Any]:
    return {"sessions": [s.config or {} for s in sessions],
            "session_calls": [{"target": s.target, "caller": s.caller} for s in sessions],
            "exited": end is not None, "hook_errors_counted": end.hook_errors if end else None,
            "stream_errors_counted": end.stream_errors if end else None}


def of(state: ProcessState, faults: str) -> ProcessObservation:
    """The final analysis's record of one process: what the state made, and the records
    kept as the agent wrote them."""
    return ProcessObservation(
        pid=state.pid, **{"ppid": None, "argv": [], "start_env": {},
                          **_process(state.process)},
        **_imports(state.tf_import, state.keras), **_sessions(state.sessions, state.exit),
        devices=devices(state.devices, state.cluster_joins), strategies=state.strategies,
        cluster_joins=state.cluster_joins, series=series(state),
        weights=[_weights(source, fp) for source, fp in state.weights.items()],
        graphs=state.graphs, hook_errors=state.hook_errors, placed_graphs=state.placed_graphs,
        placement_windows=state.placement_windows,
        placement_log_asked=state.placement_log_asked, stalls=state.stalls,
        events=state.events, first_t_unix_s=state.first_t_unix_s,
        last_t_unix_s=state.last_t_unix_s, faults=faults,
        unknown_events=[f"{u.kind} (v{u.version})" for u in state.unknown],
        **keras_calls(state.keras_calls), **host_reads(state.host_reads), **state.kept)
