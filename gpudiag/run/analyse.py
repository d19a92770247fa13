"""From what `gpudiag run` saw to findings, data and TensorBoard (parent, no TensorFlow).

Reads the events (gpudiag.run.events), a process's placement rows (gpudiag.run.placedrows:
its placement window, else TensorFlow's placement log in the saved stderr), the profiler
trace of its window (gpudiag.run.profiled, each op attributed to the device TensorFlow
placed it on), matches the log against the catalogue, and hands plain data to the verdicts
(the package gpudiag.verdicts.run). A program with several TensorFlow processes gets one
set of per-process findings each (ids suffixed ``.p1``, ``.p2`` ...); their shared stderr
cannot be split by process, so the placement log is used only for a single process.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpudiag import catalogue
from gpudiag.errors import WriteFailed
from gpudiag.layout import NVML_TB_RUN, TAG_RUN_TABLE
from gpudiag.layout.events import PROTOCOL_VERSION
from gpudiag.markdown import markdown_table
from gpudiag.procs.command import exit_code_of
from gpudiag.readers import clusterplacement, placementlog
from gpudiag.readers.placementlog import PlacementRow
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Finding
from gpudiag.run import eventfiles, stderrscan, tasks, tbwrite
from gpudiag.run import processes as run_processes
from gpudiag.run.options import Outcome, RunOptions
from gpudiag.run.placedrows import log_reason, placement_data, placement_rows
from gpudiag.run.profiled import trace_of, why_slow
from gpudiag.run.stderrscan import StderrScan
from gpudiag.session import RunSession
from gpudiag.verdicts import gpu_fill
from gpudiag.verdicts import gpu_use as gpu_verdicts
from gpudiag.verdicts.fix_said import loop_of, on_loop
from gpudiag.verdicts.run import crash as run_crash
from gpudiag.verdicts.run import gpu_idle as run_gpu_idle
from gpudiag.verdicts.run import hostcauses, memory_config, tflog
from gpudiag.verdicts.run import kerascalls as run_kerascalls
from gpudiag.verdicts.run import live as run_live
from gpudiag.verdicts.run import loss_setup as run_loss_setup
from gpudiag.verdicts.run import outcome as run_outcome
from gpudiag.verdicts.run import peers as run_peers
from gpudiag.verdicts.run import placement as run_placement
from gpudiag.verdicts.run import precision as run_precision
from gpudiag.verdicts.run import process as run_verdicts
from gpudiag.verdicts.run import progress as run_progress
from gpudiag.verdicts.run import ps as run_ps
from gpudiag.verdicts.run import strategy_cost as run_strategy
from gpudiag.verdicts.run import throughput as run_throughput


@dataclass(frozen=True)
class RunSeen:
    """What every process's findings read of the whole run."""

    log: list[catalogue.LogMatch]  # the catalogue's matches in its stderr and logs
    nvml_gpus: list[dict[str, Any]] | None  # gpu_verdicts.gpu_numbers, None without NVML
    options: RunOptions
    stderr: str


def _process_findings(session: RunSession, seen: RunSeen, obs: ProcessObservation,
                      proc: str, placement: tuple[list[PlacementRow], str | None],
                      live_file: tbwrite.ProgramFile | None) -> dict[str, Any]:
    """One TensorFlow process's findings (``placement``: its rows and why there are none)
    and its part of the report's data."""
    rows, reason = placement
    log, nvml_gpus, options, stderr = seen.log, seen.nvml_gpus, seen.options, seen.stderr
    placed, eager, graph, graph_devices = placement_data(rows)
    summary, trace_reason = trace_of(obs, rows)
    busy = summary.busy_by_device() if summary and summary.attributed() else None
    add = session.add
    add(run_verdicts.devices(obs, proc))
    # a parameter-server coordinator's (or TF1 worker's) work ran on the cluster's tasks
    by_task = clusterplacement.ops_by_task(stderr) if run_ps.cluster_process(obs) else {}
    add(run_ps.distribution(run_verdicts.distribution(obs, log, proc), obs, by_task,
                            clusterplacement.variables_by_task(stderr) if by_task else {}))
    add(run_placement.placement(obs, placed or None, eager, graph, reason, proc))
    eager_by_device: dict[str, int] = {}
    for r in rows:
        if r.kind == "eager" and placementlog.is_work(r):
            eager_by_device[r.device] = eager_by_device.get(r.device, 0) + 1
    add(run_placement.soft_placement(obs, graph_devices, proc, eager_by_device))
    add(run_ps.devices_used(run_placement.devices_used(obs, placed or None, busy, nvml_gpus,
                                                       options.idle_threshold_percent, proc),
                            obs, by_task))
    add(run_progress.learning(obs, proc))
    setup = run_loss_setup.loss_setup(obs, proc)
    if setup is not None:
        add(setup)
    steady = add(run_throughput.throughput(obs, options.profile_warmup_steps, proc))
    for found in hostcauses.findings(obs, options.profile_warmup_steps, proc):
        add(found)
    for found in run_kerascalls.findings(obs, proc):  # Keras calls one at a time
        add(found)
    add(run_live.stall(obs, proc, log))
    add(run_live.finite_loss(obs, proc))
    add(memory_config.memory(obs, nvml_gpus, proc))
    config = memory_config.session_config(obs, proc)
    if config is not None:
        add(config)
    precision = run_precision.precision(obs, proc)
    if precision is not None:
        add(precision)
    add(run_progress.profile(obs, busy, summary.window_s if summary else None, trace_reason,
                             options.profile_warmup_steps, proc))
    slow = why_slow(obs, rows, proc, nvml_gpus, options.profile_warmup_steps)
    add(on_loop(slow, loop_of(slow.message, steady.evidence)))
    cost = run_strategy.strategy_cost(obs, slow, options.profile_warmup_steps, proc)
    if cost is not None:
        add(cost)
    tb_tags = tbwrite.write_program(session.run_dir, obs, live_file)
    return {"pid": obs.pid, "argv": obs.argv, "tf_version": obs.tf_version,
            "placement_reason": reason, "ops_by_device": placed,
            "trace": summary.to_dict() if summary else {"reason": trace_reason},
            "tensorboard": tb_tags, "record": compact_record(obs)}


RECORD_STEPS = 50  # per loop, the first and the last steps kept in report.json's record


def compact_record(obs: ProcessObservation) -> dict[str, Any]:
    """The process's record for report.json, bounded: per loop its first and last
    RECORD_STEPS steps (the TensorBoard run has every step), the placement window's
    graphs as a count: a long job's every step in report.json made gpudiag's end take
    seconds, and the report's readers read it whole."""
    series = [replace(s, steps=s.steps[:RECORD_STEPS] + s.steps[-RECORD_STEPS:])
              if len(s.steps) > 2 * RECORD_STEPS else s for s in obs.series]
    record = replace(obs, series=series, placed_graphs=[]).to_dict()
    for data, full in zip(record["series"], obs.series, strict=True):
        data["steps_left_out"] = max(0, len(full.steps) - 2 * RECORD_STEPS)
    record["placed_graphs"] = len(obs.placed_graphs)
    return record


def report_whole(session: RunSession, argv: list[str], outcome: Outcome,
                 options: RunOptions, *, python: bool) -> None:
    """:func:`report`, guarded like the live views: an error of gpudiag's own analysis
    (not a failed write: a full disk is said as such) is a run.analysis finding and the
    program's exit code is the one gpudiag exits with; the report is always finished."""
    try:
        with session.batch():
            report(session, argv, outcome, options, python=python)
    except WriteFailed:
        raise
    except Exception as exc:
        frame = traceback.extract_tb(exc.__traceback__)[-1]
        where = f"{Path(frame.filename).name}:{frame.lineno}"
        session.add(run_outcome.analysis_failed(type(exc).__name__, str(exc), where,
                                                outcome.returncode))
        if session.forwarded_exit is None:
            session.forward_exit(exit_code_of(outcome.returncode) if outcome.returncode
                                 else 0)


def _seen(observations: list[ProcessObservation], outcome: Outcome,
          bad: eventfiles.Unreadable, watch: run_processes.Watched, python: bool) -> Finding:
    """run.tensorflow: the processes seen, and the events lines that could not be read."""
    return run_verdicts.tensorflow_seen(
        observations, python_command=python, hook_errors=outcome.state.hook_errors,
        unreadable_lines=bad.count, unentered=[(u.pid, u.command, u.why)
                                               for u in watch.unentered],
        unreadable=bad.first, newer_versions=sorted(bad.newer),
        protocol_version=PROTOCOL_VERSION)


def _log_matches(outcome: Outcome, tf_procs: list[ProcessObservation], stderr: str
                 ) -> list[catalogue.LogMatch]:
    """The catalogue's matches in the program's stderr (most of them found while it ran),
    its TensorFlow log records and the Python warnings the hooks recorded that stderr
    lacks (the program's showwarning or logging.captureWarnings took them elsewhere),
    settled by how the program ended."""
    scan = outcome.live.stderr_scan if outcome.live is not None else None
    matcher = (scan if scan is not None and scan.whole else
               StderrScan(outcome.stderr_path)).finish()
    matcher.feed([r.message for o in tf_procs for r in o.tf_logs])
    matcher.feed([w.text for o in tf_procs for w in o.py_warnings if w.message not in stderr])
    return tflog.settle(matcher.matches(),
                               completed=outcome.returncode == 0 and not outcome.interrupted)


def report(session: RunSession, argv: list[str], outcome: Outcome, options: RunOptions, *,
           python: bool) -> None:
    """Every finding of a run, the report's data section and the TensorBoard runs."""
    observations, bad = eventfiles.observe_all(outcome.events_dir)
    stderr = stderrscan.read_bounded(outcome.stderr_path)
    session.add(run_progress.command(argv, outcome.returncode, outcome.duration_s,
                                     outcome.interrupted, outcome.interrupt_signal,
                                     time_limited_s=outcome.time_limited_s))
    watch = run_processes.watched(outcome.events_dir)
    session.add(_seen(observations, outcome, bad, watch, python))
    if not options.in_kernel:  # a notebook's kernel has no terminal of gpudiag's
        session.add(_terminal(watch))
    sampling = outcome.sampling
    nvml_gpus = [gpu_verdicts.gpu_numbers(s) for s in sampling.summaries] if sampling else None
    tf_procs = [o for o in observations if o.imported_tf]
    log = _log_matches(outcome, tf_procs, stderr)
    processes = []
    placement_total = 0
    seen = RunSeen(log, nvml_gpus, options, stderr)
    for obs, proc in named_processes(tf_procs):
        if server_only(obs):  # a ps or worker task serving: run.cluster tells its part
            processes.append({"pid": obs.pid, "argv": obs.argv, "tf_version": obs.tf_version,
                              "server_only": True, "record": obs.to_dict()})
            continue
        reason = log_reason(obs, options)
        rows: list[PlacementRow] = []
        if reason is None or obs.placed_graphs:  # the placement window needs no log
            rows, reason = placement_rows(stderr, obs, len(tf_procs))
        placement_total += len(rows)
        processes.append(_process_findings(
            session, seen, obs, proc, (rows, reason),
            outcome.live.programs.get(obs.pid) if outcome.live is not None else None))
    tbwrite.write_hparams(session.run_dir, [o for o in tf_procs if not server_only(o)],
                          options.profile_warmup_steps)
    if tf_procs:
        overridden = [o for o in tf_procs if o.cpp_log_level_overridden]
        session.add(tflog.tf_log(log, log_reason(overridden[0], options)
                                        if overridden else None, "",
                                        catalogue.bfc.out_of_memory(stderr.splitlines())))
    if observations:
        session.add(run_crash.crash(observations, outcome.returncode,
                                       outcome.interrupted, stderr.splitlines()))
    task_reports = tasks.task_reports(tf_procs, stderr, tasks.RunEnd(
        session.run_dir, outcome.returncode, outcome.interrupted,
        options.profile_warmup_steps, outcome.program_pid, nvml_gpus))
    for finding in tasks.share(session.run_dir.parent, task_reports) if task_reports else []:
        session.add(finding)
    live = outcome.live
    peers_finding = run_peers.peers_finding(live.peer_notes, live.peers, live.own_tasks) \
        if live is not None else None
    if peers_finding is not None:
        session.add(peers_finding)
    _nvml_findings(session, outcome, options)
    session.set("run", {
        "command": argv, "returncode": outcome.returncode,
        "duration_s": round(outcome.duration_s, 3), "interrupted": outcome.interrupted,
        "python": python, "user_tf_cpp_min_log_level": outcome.state.user_level,
        "lines_kept_from_terminal": outcome.state.hidden_lines,
        "stdout": str(outcome.stdout_path), "stderr": str(outcome.stderr_path),
        "python_processes": len(observations), "tensorflow_processes": processes,
        "placement_rows": placement_total, "catalogue_matches": [m.entry.id for m in log],
        "finish": _finish(outcome),
        # the Python gpudiag runs in, and whether it has TensorFlow (found, not imported):
        # a program whose own `python` has none is told it can use this one
        "gpudiag_python": {"executable": sys.executable,
                           "has_tensorflow": importlib.util.find_spec("tensorflow") is not None},
    })
    session.set("devices", {"summary": _devices_summary(tf_procs, sampling)})
    session.text(TAG_RUN_TABLE, markdown_table(
        ["pid", "task", "argv", "tensorflow", "strategies", "steps", "crash"],
        [[o.pid, _task_label(o), " ".join(o.argv)[:60], o.tf_version or "-",
          ", ".join(s.class_name for s in o.strategies) or "-",
          ", ".join(f"{s.label}: {len(s.steps)}" for s in o.series) or "-",
          o.crash.type if o.crash else "-"] for o in observations]))


def _terminal(watch: run_processes.Watched) -> Finding:
    return run_verdicts.terminal(watch.terminal, [(t.pid, t.command, t.relayed)
                                                  for t in watch.tty_readers])


def _finish(outcome: Outcome) -> dict[str, object] | None:
    """When the program exited and how long gpudiag's end took after it, by part (the
    report's writing, TensorBoard's text and the picture come after this)."""
    if outcome.finish is None:
        return None
    outcome.finish.mark("analysed_s")
    return outcome.finish.to_dict()


def _task_label(obs: ProcessObservation) -> str:
    found = tasks.identity(obs)
    return f"{found[0]}-{found[1]}" if found else "-"


def server_only(obs: ProcessObservation) -> bool:
    """A process that only ran a tf.distribute.Server (a parameter-server job's ps and
    worker tasks): its work is the coordinator's, run in the server's threads."""
    return bool(obs.cluster_joins) and all(j.via == "tf.distribute.Server"
                                           for j in obs.cluster_joins) \
        and not obs.strategies and not obs.series and obs.crash is None


def named_processes(tf_procs: list[ProcessObservation]
                    ) -> list[tuple[ProcessObservation, str]]:
    """Each TensorFlow process with its finding id suffix: none for one process; its task
    (``.worker-1``), in task order, when every process is a distinct task of one cluster;
    else ``.p1``, ``.p2`` ... in the order they started."""
    if len(tf_procs) == 1:
        return [(tf_procs[0], "")]
    found = [tasks.identity(o) for o in tf_procs]
    known = [(f[0], f[1], o) for f, o in zip(found, tf_procs, strict=True) if f is not None]
    if len(known) == len(tf_procs) and len({(t, i) for t, i, _ in known}) == len(known) and \
            len({tasks.cluster_key(f[2]) for f in found if f is not None}) == 1:
        return [(o, f".{t}-{i}") for t, i, o in sorted(known, key=lambda k: (k[0], k[1]))]
    return [(o, f".p{n}") for n, o in enumerate(tf_procs, 1)]


def _devices_summary(tf_procs: list[ProcessObservation],
                     sampling: Any) -> str:
    logical = Counter(d for o in tf_procs if o.devices for d in o.devices.logical)
    text = ", ".join(logical) if logical else "TensorFlow's devices not observed"
    if sampling is not None:
        text += "; NVML: " + ", ".join(s.label for s in sampling.summaries)
    return text


def _nvml_findings(session: RunSession, outcome: Outcome, options: RunOptions) -> None:
    """What `monitor` reports: NVML's sampling and whether every GPU was used."""
    from gpudiag import nvml

    result = outcome.sampling
    if result is None:
        session.add(gpu_verdicts.nvml_sampling(None, outcome.nvml_reason, options.interval_s, None,
                                           check_id="run.nvml"))
    else:
        session.add(gpu_verdicts.nvml_sampling(result.backend, None, options.interval_s, result,
                                           check_id="run.nvml"))
        live = outcome.live.nvml if outcome.live is not None else None
        if live is not None and live.holds(result):  # written while it ran: kept
            tags, written = sorted(live.tags), "live"
        else:
            tags, written = nvml.write_scalars(result, session.run_dir / NVML_TB_RUN,
                                               texts=live.texts if live else ()), "end"
            if live is not None and live.path is not None:
                live.path.unlink(missing_ok=True)
        session.set("nvml_tensorboard", {"run": NVML_TB_RUN, "tags": tags, "written": written})
    finding: Finding = gpu_verdicts.every_gpu_used(
        result.summaries if result else [], options.idle_threshold_percent,
        nvml_unavailable_reason=outcome.nvml_reason, expected_indices=options.gpus,
        check_id="run.every-gpu-used")
    session.add(finding)
    session.add(run_gpu_idle.gpu_idle(
        run_gpu_idle.replay(run_gpu_idle.polls_of(result.samples),
                            options.idle_threshold_percent) if result else [],
        gpus=len(result.device_indices) if result else 0,
        observed_s=result.duration_s if result else None,
        unavailable=None if result else outcome.nvml_reason or "NVML was not sampled"))
    if result is not None:
        session.add(gpu_fill.sm_utilization(
            [gpu_verdicts.gpu_numbers(s) for s in result.summaries],
            nvml_unavailable_reason=None, check_id="run.sm-utilization"))
