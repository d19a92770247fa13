"""tf.compat.v1 Sessions: the ConfigProto they were given, each run's time, step stats.

``BaseSession.__init__`` and ``BaseSession.run`` are wrapped (Session, InteractiveSession
and the monitored sessions all end there):

- at creation: the ConfigProto's device settings (soft placement, placement logging,
  device_count, gpu_options: allow_growth, memory fraction, visible_device_list), to set
  against the tf.config calls;
- every run: its wall time, grouped by fetches (the training step is the group run most
  often), and the first float scalar it fetched (the loss, usually), appended as
  ``session_steps`` events;
- TRACED_RUNS runs of the first fetch group to get there, just before the profiler window
  (or just after it when the warm-up is too short), unless the program passed its own
  RunOptions: run with ``RunOptions(trace_level=FULL_TRACE)``; their step stats say on
  which device every node really ran, beside the device the graph pinned it to
  (``node.device``): a tower pinned to a GPU that does not exist runs on CPU:0 under soft
  placement, whatever its name. These traced runs are marked and left out of the timing.
  Should tracing be refused (another profiler session is active), the run is made again
  untraced: the refusal comes before anything executes.
"""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import patch
from gpudiag.inprogram.config import UNBUFFERED_FIRST_STEPS
from gpudiag.inprogram.recorder import StepBuffer
from gpudiag.inprogram.tfhooks import caller, record_devices
from gpudiag.layout import loopevents
from gpudiag.readers.traces import union_s

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

TRACED_RUNS = 3
MAX_GROUPS = 32
MAX_NODE_DEVICES = 20000


def config_summary(config: Any) -> dict[str, Any] | None:
    if config is None:
        return None
    gpu = config.gpu_options
    return {
        "allow_soft_placement": config.allow_soft_placement,
        "log_device_placement": config.log_device_placement,
        "device_count": dict(config.device_count),
        "allow_growth": gpu.allow_growth,
        "per_process_gpu_memory_fraction": gpu.per_process_gpu_memory_fraction,
        "visible_device_list": gpu.visible_device_list,
        "inter_op_parallelism_threads": config.inter_op_parallelism_threads,
        "intra_op_parallelism_threads": config.intra_op_parallelism_threads,
        "device_filters": list(config.device_filters),
    }


def _fetch_names(fetches: Any) -> list[str]:
    if isinstance(fetches, list | tuple):
        return [n for f in fetches for n in _fetch_names(f)]
    if isinstance(fetches, dict):
        return [n for f in fetches.values() for n in _fetch_names(f)]
    return [str(getattr(fetches, "name", fetches))]


def _first_scalar(result: Any, depth: int = 0) -> float | None:
    """The first float scalar of a run's result, nested lists and dicts included: a
    MonitoredTrainingSession runs ``{"caller": [train_op, loss, global_step], <hook>: ...}``
    for the program's ``mon_sess.run([train_op, loss, global_step])``."""
    items = result if isinstance(result, list | tuple) else (
        list(result.values()) if isinstance(result, dict) else [result])
    for item in items:
        if isinstance(item, float):
            return item
        if getattr(item, "shape", None) == () and getattr(getattr(item, "dtype", None),
                                                          "kind", "") == "f":
            return float(item)
        if depth < 2 and isinstance(item, list | tuple | dict):
            found = _first_scalar(item, depth + 1)
            if found is not None:
                return found
    return None


def _flat(result: Any, depth: int = 0) -> list[Any]:
    """A run's result flattened in the order ``_fetch_names`` lists its fetches (a
    Session returns lists, tuples and dicts shaped like its fetches, keys in order)."""
    if depth > 4:
        return []
    if isinstance(result, list | tuple):
        return [v for r in result for v in _flat(r, depth + 1)]
    if isinstance(result, dict):
        return [v for r in result.values() for v in _flat(r, depth + 1)]
    return [result]


def global_step_position(names: tuple[str, ...], graph: Any) -> int | None:
    """Where among a run's fetches the graph's global step is (the variable of
    ``tf.compat.v1.train.get_or_create_global_step``, fetched as ``global_step:0`` by the
    program's loop or read by MonitoredTrainingSession's StopAtStepHook), or None."""
    try:
        found = graph.get_collection("global_step")
        if not found:
            return None
        op = found[0].name.split(":", 1)[0]
    except Exception:
        return None
    for n, name in enumerate(names):
        if name.split(":", 1)[0] in (op, f"{op}/read", f"{op}/Read/ReadVariableOp"):
            return n
    return None


def _device_of(stats_device: str) -> tuple[str, bool]:
    """(compute device, is a GPU stream entry) of a step-stats device name."""
    from gpudiag.readers.placementlog import short_device

    base, _, rest = stats_device.partition("/stream:")
    if not rest:
        base = stats_device.split("/memcpy")[0]
    return short_device(base), bool(rest)


def summarize_step_stats(run_metadata: Any, graph: Any) -> dict[str, Any]:
    """Per device: nodes and busy time; requested-vs-actual device of every pinned node."""
    per_device: dict[str, dict[str, Any]] = {}
    node_devices: dict[str, str] = {}
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    moved: dict[tuple[str, str], list[str]] = defaultdict(list)
    for dev in run_metadata.step_stats.dev_stats:
        device, stream = _device_of(dev.device)
        entry = per_device.setdefault(device, {"nodes": 0, "scopes": {}, "op_types": {}})
        for ns in dev.node_stats:
            start, end = ns.all_start_micros, ns.all_start_micros + ns.all_end_rel_micros
            spans[device].append((start, max(end, start)))
            if stream or ns.node_name in ("_SOURCE", "_SINK"):
                continue
            op_type = ns.timeline_label.split(" = ", 1)[-1].split("(", 1)[0] \
                if " = " in ns.timeline_label else ""
            entry["nodes"] += 1
            if len(node_devices) < MAX_NODE_DEVICES:
                node_devices[ns.node_name] = device
            entry["op_types"][op_type] = entry["op_types"].get(op_type, 0) + 1
            scope = ns.node_name.split("/", 1)[0]
            entry["scopes"][scope] = entry["scopes"].get(scope, 0) + 1
            try:
                requested = graph.get_operation_by_name(ns.node_name).device
            except (KeyError, ValueError):
                continue
            if requested:
                moved[(requested, device)].append(ns.node_name)
    for device, sp in spans.items():
        per_device[device]["busy_us"] = round(union_s(sp) * 1e9)  # us in, us out
    pinned = [{"requested": req, "actual": act, "nodes": len(names),
               "examples": names[:5], "scopes": sorted({n.split("/", 1)[0] for n in names})}
              for (req, act), names in sorted(moved.items())]
    return {"devices": per_device, "pinned": pinned, "node_devices": node_devices}


def traced_indices(warmup: int, profile_steps: int) -> range:
    """Which runs of a fetch group are FULL_TRACE'd: never inside the profiler window, and
    not the first run (graph set-up)."""
    if warmup >= TRACED_RUNS + 1:
        return range(warmup - TRACED_RUNS, warmup)
    start = warmup + max(0, profile_steps)
    return range(start, start + TRACED_RUNS)


class SessionHooks:
    def __init__(self, agent: Agent, tf: ModuleType) -> None:
        self.agent = agent
        self.tf = tf
        self.groups: dict[tuple[str, ...], RunGroup] = {}
        self.traced_group: RunGroup | None = None
        self.sessions = 0

    def group(self, fetches: Any) -> RunGroup | None:
        key = tuple(_fetch_names(fetches))
        group = self.groups.get(key)
        if group is None and len(self.groups) < MAX_GROUPS:
            group = self.groups[key] = RunGroup(self.agent, key, len(self.groups))
        return group


class RunGroup:
    def __init__(self, agent: Agent, fetches: tuple[str, ...], index: int) -> None:
        self.agent = agent
        self.label = f"Session.run #{index} [{', '.join(fetches)[:80]}]"
        self.fetches = fetches
        self.calls = 0
        self.global_step_at: int | None = None  # set at the first run (global_step_position)
        self.buffer = StepBuffer(agent.emit, "session_steps", agent.config.flush_interval_s,
                                 UNBUFFERED_FIRST_STEPS, None, group=index,
                                 fetches=list(fetches)[:20])
        agent.on_exit(self.buffer.flush)


def logged_config(agent: Agent, config: Any) -> Any:
    """The program's ConfigProto, or, when gpudiag asked for TensorFlow's placement log (a
    cluster task) and the program's ConfigProto does not log placement, a copy that does:
    a Session given a ConfigProto ignores tf.debugging.set_log_device_placement, and the
    log is where the task's ops and variables were placed. The lines stay out of the
    terminal; the program's object is not touched; nothing else differs."""
    if config is None or not agent.placement_log_asked:
        return config
    try:
        if config.log_device_placement:
            return config
        copy = type(config)()
        copy.CopyFrom(config)
        copy.log_device_placement = True
        return copy
    except Exception as exc:
        agent.hook_error("placement log for a Session's ConfigProto", exc)
        return config


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.client import session as session_lib

    cls = session_lib.BaseSession
    if hasattr(cls.run, "__gpudiag_wrapped__"):
        return
    hooks = SessionHooks(agent, tf)
    patch(cls, "__init__", _wrap_init(agent, hooks, cls.__init__), wraps=cls.__init__)
    patch(cls, "run", _wrap_run(agent, hooks, cls.run), wraps=cls.run)


def _wrap_init(agent: Agent, hooks: SessionHooks, original_init: Any) -> Any:
    @functools.wraps(original_init)
    def __init__(self: Any, target: str = "", graph: Any = None, config: Any = None) -> None:
        original_init(self, target, graph, logged_config(agent, config))
        try:
            hooks.sessions += 1
            summary = config_summary(config)
            agent.emit(loopevents.Session(target=str(target), config=summary,
                       caller=caller()))
            if summary and summary["log_device_placement"]:
                from gpudiag.layout import RUN_MARK_PLACEMENT_ASKED

                agent.marker(RUN_MARK_PLACEMENT_ASKED)
        except Exception as exc:
            agent.hook_error("recording a Session", exc)
        record_devices("session")
        from gpudiag.inprogram.tfhooks import record_session_devices

        record_session_devices(self)

    return __init__


def _wrap_run(agent: Agent, hooks: SessionHooks, original_run: Any) -> Any:
    tf = hooks.tf
    traced_runs = traced_indices(agent.config.profile_warmup_steps, agent.config.profile_steps)

    @functools.wraps(original_run)
    def run(self: Any, fetches: Any, feed_dict: Any = None, options: Any = None,
            run_metadata: Any = None) -> Any:
        try:
            group = hooks.group(fetches)
        except Exception as exc:
            agent.hook_error("Session.run fetches", exc)
            group = None
        if group is None:
            return original_run(self, fetches, feed_dict, options, run_metadata)
        index = group.calls
        group.calls += 1
        traced = False
        if options is None and run_metadata is None and index in traced_runs \
                and hooks.traced_group in (None, group):
            hooks.traced_group = group
            traced = True
            options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
            run_metadata = tf.compat.v1.RunMetadata()
        profile = agent.profile
        if profile is not None and not profile.done:
            profile.step_begin(group, index)
        start = time.time()
        t0 = time.perf_counter()
        if traced:
            try:
                with agent.quiet():  # FULL_TRACE's own log lines ("GPU trace was not ...")
                    result = original_run(self, fetches, feed_dict, options, run_metadata)
            except tf.errors.AlreadyExistsError as exc:  # a profiler session is active
                agent.hook_error("FULL_TRACE refused; run again untraced", exc)
                traced = False
                result = original_run(self, fetches, feed_dict, None, None)
        else:
            result = original_run(self, fetches, feed_dict, options, run_metadata)
        dt = time.perf_counter() - t0
        try:
            _record_run(agent, group, self.graph, index, (start, dt), result,
                        run_metadata if traced else None)
        except Exception as exc:
            agent.hook_error("recording a Session.run", exc)
        return result

    return run


def _record_run(agent: Agent, group: RunGroup, graph: Any, index: int,
                timing: tuple[float, float], result: Any, traced_metadata: Any) -> None:
    """One Session.run of a group: its row (start, seconds, first scalar, global step),
    and a traced run's step stats."""
    profile = agent.profile
    if profile is not None and not profile.done:
        profile.step_end(group, index)
    row: dict[str, Any] = {"i": index, "t0": timing[0], "dt": timing[1]}
    if traced_metadata is not None:
        row["traced"] = True
    value = _first_scalar(result)
    if value is not None:
        row["value"] = value
    if index == 0:
        group.global_step_at = global_step_position(group.fetches, graph)
    if group.global_step_at is not None:
        flat = _flat(result)
        if group.global_step_at < len(flat):
            row["global_step"] = int(flat[group.global_step_at])
    group.buffer.add(row)
    if traced_metadata is not None:
        agent.emit(loopevents.StepStats(group=group.label, call=index,
                   **summarize_step_stats(traced_metadata, graph)))
