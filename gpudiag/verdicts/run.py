"""Verdicts of `gpudiag run`: pure functions from the program's records to findings.

No TensorFlow, no NVML, no I/O: inputs are gpudiag.run.records (what the hooks saw in
one process), plain per-device numbers derived from the placement log, the trace and
NVML, and catalogue matches. Learning, throughput and crash verdicts are in
gpudiag.verdicts.run_progress. Every id is explained in docs/run.md and docs/findings.md.
``proc`` is "" for a program with one TensorFlow process, else ".p<n>" (n-th process).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpudiag.catalogue import LogMatch, match_crash
from gpudiag.report import Finding, Status
from gpudiag.run.records import ProcessObservation
from gpudiag.verdicts import run_devices

_JOB = re.compile(r"^/job:[^/]+(?:/replica:\d+)?(?:/task:\d+)?")
_DEVICE = re.compile(r"(?:^|/)(?:device:)?(?P<type>[A-Za-z_]+):(?P<index>\d+)$")


def canonical(device: str) -> str | None:
    """``/gpu:1``, ``/job:localhost/replica:0/task:0/device:GPU:1`` -> ``/device:GPU:1``."""
    m = _DEVICE.search(_JOB.sub("", device.strip()))
    return f"/device:{m['type'].upper()}:{m['index']}" if m else None


def _where(caller: dict[str, Any] | None) -> str:
    if not caller:
        return ""
    return f" at {caller['file'].rsplit('/', 1)[-1]}:{caller['line']}"


def _listing(counts: dict[str, Any], unit: str = "") -> str:
    return ", ".join(f"{k} {v}{unit}" for k, v in counts.items())


# ---------------------------------------------------------------- the program's processes


def tensorflow_seen(observations: Sequence[ProcessObservation], *, python_command: bool,
                    hook_errors: Sequence[str], unreadable_lines: int) -> Finding:
    """Which processes the hooks saw, which imported TensorFlow; hook errors."""
    tf_procs = [o for o in observations if o.imported_tf]
    errors = [e for o in observations for e in o.hook_errors if e.get("kind") == "hook_error"]
    evidence = {"python_processes": [{"pid": o.pid, "argv": o.argv[:6], "tf": o.tf_version,
                                      "keras": o.keras_version} for o in observations],
                "hook_errors": errors[:20], "hook_load_errors": list(hook_errors),
                "unreadable_event_lines": unreadable_lines}
    if not observations:
        if not python_command:
            return Finding("run.tensorflow", "skip",
                           "not a Python program: only its exit code and NVML's view are "
                           "observed (what `gpudiag monitor` gives)", evidence,
                           advice="Run the Python interpreter itself: gpudiag run -- python "
                                  "train.py (a shell script that starts Python works too).")
        why = f": {hook_errors[0]}" if hook_errors else (
            " (python -S or -I ignores PYTHONPATH and sitecustomize)")
        return Finding("run.tensorflow", "skip", f"gpudiag's hooks did not load{why}",
                       evidence, advice="Run without -S/-I so Python imports sitecustomize.")
    if not tf_procs:
        return Finding("run.tensorflow", "skip",
                       f"TensorFlow was never imported ({len(observations)} Python "
                       "process(es) seen): nothing TensorFlow did can be observed", evidence)
    text = (f"{len(observations)} Python process(es), {len(tf_procs)} imported TensorFlow "
            + ", ".join(f"{o.tf_version} (pid {o.pid})" for o in tf_procs))
    notes = list(dict.fromkeys(str(e.get("message")) for o in observations
                               for e in o.hook_errors if e.get("kind") == "hook_note"))
    if notes:  # where a hook could not ride along, it stood aside: say why
        evidence["hook_notes"] = notes
        text += "; " + "; ".join(notes)
    if errors or hook_errors:
        return Finding("run.tensorflow", "warn",
                       f"{text}; {len(errors) + len(hook_errors)} error(s) inside gpudiag's "
                       "hooks (the program was not affected; some records may be missing)",
                       evidence, advice="Report them as a gpudiag bug, with the evidence.")
    return Finding("run.tensorflow", "ok", text, evidence)


# ---------------------------------------------------------------- devices and configuration


def devices(obs: ProcessObservation, proc: str = "") -> Finding:
    """Physical and logical devices after the program's tf.config calls, and those calls."""
    calls = [{"order": c.order, "api": c.api, "args": c.args, "kwargs": c.kwargs,
              "where": _where(c.caller).strip(), "devices_initialized_before":
                  c.initialized_before, "error": f"{c.error_type}: {c.error}"
              if c.error_type else None} for c in obs.config_calls]
    snap = obs.devices
    evidence: dict[str, Any] = {"config_calls": calls, "devices": None if snap is None else
                                {"physical": snap.physical, "logical": snap.logical,
                                 "gpus": snap.gpus, "soft_placement": snap.soft_placement,
                                 "cuda_build": snap.cuda_build, "seen_at": snap.reason,
                                 "other_tasks": snap.remote}}
    listing = "; ".join(f"{c.api.removeprefix('tf.')}{_where(c.caller)}"
                        + (" -> " + (c.error_type or "") if c.error_type else "")
                        for c in obs.config_calls) or "none"
    failed = [c for c in obs.config_calls if c.error_type]
    if failed:
        c = failed[0]
        entry = match_crash(c.error_type or "", c.error or "")
        late = " after the devices were initialised" if c.initialized_before else ""
        return Finding(f"run.devices{proc}", "fail",
                       f"{c.api}{_where(c.caller)} was called{late} and raised {c.error_type}: "
                       f"{c.error}; the configuration did not take effect (calls in order: "
                       f"{listing})", evidence,
                       advice=entry.fix if entry else "Configure devices right after "
                       "importing TensorFlow, before anything uses them.")
    if snap is None:
        return Finding(f"run.devices{proc}", "skip",
                       "TensorFlow's devices were never initialised (no op ran), so they were "
                       f"not listed; tf.config calls: {listing}", evidence)
    gpus = [d for d in snap.logical if ":GPU:" in d]
    physical = ", ".join(p.rsplit("/", 1)[-1] for p in snap.physical)
    text = (f"logical devices {', '.join(snap.logical)}"
            + (f" (physical: {physical})" if physical else f" (as the {snap.reason} saw them)")
            + (f"; and {len(snap.remote)} device(s) of the cluster's other tasks"
               if snap.remote else "")
            + f"; tf.config calls: {listing}")
    if not gpus:
        return Finding(f"run.devices{proc}", "warn", f"no GPU visible to TensorFlow: {text}",
                       evidence, advice="If this machine has a GPU, run `gpudiag env`: it says "
                       "whether the driver, the CUDA libraries and CUDA_VISIBLE_DEVICES let "
                       "TensorFlow see it.")
    return Finding(f"run.devices{proc}", "ok", text, evidence)


# TensorFlow's class names of the strategies users know by their public name.
PUBLIC_NAMES = {"CollectiveAllReduceStrategy": "MultiWorkerMirroredStrategy",
                "CollectiveAllReduceStrategyV1": "MultiWorkerMirroredStrategy (v1)",
                "ParameterServerStrategyV2": "ParameterServerStrategy"}


def distribution(obs: ProcessObservation, log: Sequence[LogMatch], proc: str = "") -> Finding:
    """The tf.distribute strategies created, and TensorFlow's log lines about them."""
    notes = [m for m in log if m.entry.topic == "distribute"]
    evidence: dict[str, Any] = {
        "strategies": [{"class": s.class_name, "replicas": s.num_replicas,
                        "worker_devices": s.worker_devices,
                        "parameter_devices": s.parameter_devices,
                        "cross_device_ops": s.cross_device_ops,
                        "implementation": s.implementation, "nccl": s.nccl,
                        "cluster": s.cluster, "where": _where(s.caller).strip()}
                       for s in obs.strategies],
        "tf_log": [{"id": m.entry.id, "line": m.first, "count": m.count} for m in notes]}
    gpus = [d for d in (obs.devices.logical if obs.devices else []) if ":GPU:" in d]
    if not obs.strategies:
        if len(gpus) > 1:
            return Finding(f"run.distribution{proc}", "warn",
                           f"{len(gpus)} GPUs visible, but the program created no "
                           "tf.distribute strategy: unless it places work on each GPU itself, "
                           "it uses one", evidence,
                           advice="Create tf.distribute.MirroredStrategy() and build the model "
                                  "and optimizer in strategy.scope().")
        return Finding(f"run.distribution{proc}", "ok",
                       "no tf.distribute strategy created (the program runs on the default "
                       "device unless it pins ops itself)", evidence)
    parts = []
    for s in obs.strategies:
        ops = s.cross_device_ops or "-"
        if s.implementation:
            ops += f" ({s.implementation})"
        name = PUBLIC_NAMES.get(s.class_name, s.class_name)
        if s.cluster and s.cluster.get("task_type"):
            parts.append(f"{name}{_where(s.caller)}, task {s.cluster['task_type']}-"
                         f"{s.cluster.get('task_id')}: {s.num_replicas} replica(s) in sync "
                         f"across the cluster, {len(s.worker_devices)} here on "
                         f"{', '.join(s.worker_devices) or '-'}; all-reduce {ops}"
                         f"{', NCCL' if s.nccl else ''}")
            continue
        parts.append(f"{name}{_where(s.caller)}: {s.num_replicas} replica(s) on "
                     f"{', '.join(s.worker_devices)}; all-reduce {ops}"
                     f"{', NCCL' if s.nccl else ''}")
    text = "; ".join(parts)
    bad = [m for m in notes if m.entry.severity == "fail"]
    warn = [m for m in notes if m.entry.severity == "warn"]
    gpu_no_nccl = [s for s in obs.strategies if len(s.worker_devices) > 1 and not s.nccl
                   and all(":GPU:" in d for d in s.worker_devices)]
    if bad or warn or gpu_no_nccl:
        said = "; ".join(f"TensorFlow: \"{m.first[-200:]}\"" for m in bad + warn)
        if gpu_no_nccl:
            said += "; GPUs reduced without NCCL"
        return Finding(f"run.distribution{proc}", "fail" if bad else "warn", f"{text}. {said}",
                       evidence, advice=(bad + warn)[0].entry.fix if bad + warn else
                       "On several GPUs NCCL is the fast all-reduce: use a Linux CUDA build.")
    return Finding(f"run.distribution{proc}", "ok", text, evidence)


# ---------------------------------------------------------------- placement


def placement(obs: ProcessObservation, placed: dict[str, int] | None, eager_ops: int,
              graph_nodes: int, reason: str | None, proc: str = "") -> Finding:
    """Per-device work from TensorFlow's placement decisions (log and step stats)."""
    stats = {d: v.get("nodes", 0) for s in obs.step_stats for d, v in s.devices.items()}
    evidence = {"ops_by_device": placed, "eager_ops": eager_ops, "graph_nodes": graph_nodes,
                "session_nodes_by_device": stats, "reason": reason}
    if not placed and not stats:
        return Finding(f"run.placement{proc}", "skip",
                       f"where ops ran could not be observed: {reason or 'no op was placed'}",
                       evidence, advice="Let TensorFlow's log through: do not set "
                       "TF_CPP_MIN_LOG_LEVEL in the program (set it in the shell; gpudiag "
                       "still filters what you see by it).")
    parts = []
    if placed:
        if obs.placed_graphs:  # run metadata of gpudiag's placement windows
            parts.append(f"TensorFlow's placement (run metadata, placement windows): "
                         f"{eager_ops} eager kernels and {graph_nodes} tf.function nodes "
                         f"({_listing(placed)})")
        else:
            parts.append(f"placement log: {eager_ops} eager ops and {graph_nodes} "
                         f"tf.function nodes ({_listing(placed)})")
    if stats:
        parts.append(f"Session step stats: {_listing(stats, ' nodes')}")
    return Finding(f"run.placement{proc}", "ok", "; ".join(parts), evidence)


def soft_placement(obs: ProcessObservation, graph_devices: dict[str, dict[str, str]],
                   proc: str = "", eager_by_device: dict[str, int] | None = None) -> Finding:
    """Ops pinned to one device that ran on another: soft placement moved them (graphs
    and Session step stats against where they ran; eager tf.device scopes on devices
    that do not exist, gpudiag.verdicts.run_devices)."""
    counts: dict[tuple[str, str], int] = {}
    names: dict[tuple[str, str], list[str]] = {}
    compared = 0

    def note(want: str, got: str, nodes: list[str], count: int) -> None:
        counts[(want, got)] = counts.get((want, got), 0) + count
        names.setdefault((want, got), []).extend(nodes)

    for g in obs.graphs:
        actual = graph_devices.get(g.name, {})
        for node, _type, requested in g.pinned:
            want, got = canonical(requested), actual.get(node)
            if want is None or got is None:
                continue
            compared += 1
            if want != got:
                note(want, got, [node], 1)
    for s in obs.step_stats:
        for p in s.pinned:
            want = canonical(p["requested"])
            if want is None:
                continue
            compared += int(p["nodes"])
            if want != p["actual"]:
                note(want, p["actual"], list(p.get("examples") or []), int(p["nodes"]))
                names[(want, p["actual"])] += [f"{x}/" for x in p.get("scopes") or []]
    logical = set(obs.devices.logical) if obs.devices else set()
    rows: list[dict[str, Any]] = [
        {"requested": w, "ran_on": g, "nodes": n, "exists": w in logical,
         "scopes": sorted({x.split("/", 1)[0] for x in names[(w, g)] if "/" in x}),
         "examples": [x for x in names[(w, g)] if not x.endswith("/")][:5]}
        for (w, g), n in sorted(counts.items())]
    pins = run_devices.missing_eager_pins(obs, canonical)
    evidence = {"compared_nodes": compared, "moved": rows, "eager_pins_missing": pins,
                "eager_ops_by_device": eager_by_device}
    if pins and not rows:
        return Finding(f"run.soft-placement{proc}", "fail",
                       run_devices.describe_pins(pins, eager_by_device), evidence,
                       advice=_SOFT_ADVICE)
    if not compared:
        return Finding(f"run.soft-placement{proc}", "skip",
                       "no op of the program's step functions or Session graphs was pinned "
                       "with tf.device (or where they ran is unknown): nothing to compare",
                       evidence)
    if not rows:
        return Finding(f"run.soft-placement{proc}", "ok",
                       f"all {compared} pinned ops ran on the device they were pinned to",
                       evidence)
    missing = [r for r in rows if not r["exists"]]
    text = "; ".join(f"{r['nodes']} op(s) pinned to {r['requested']}"
                     + (f" ({', '.join(r['scopes'][:4])})" if r["scopes"] else "")
                     + f" ran on {r['ran_on']}" for r in rows)
    if missing:
        absent = sorted({str(r["requested"]) for r in missing})
        verb = "does" if len(absent) == 1 else "do"
        eager = f"; {run_devices.describe_pins(pins, eager_by_device)}" if pins else ""
        return Finding(f"run.soft-placement{proc}", "fail",
                       f"{text}: {', '.join(absent)} {verb} not exist here, and soft placement "
                       "moved the work silently (a name scope such as tower_1 says nothing "
                       f"about where ops ran){eager}", evidence, advice=_SOFT_ADVICE)
    return Finding(f"run.soft-placement{proc}", "warn",
                   f"{text}: those ops have no kernel on the device they were pinned to",
                   evidence, advice="Keep ops without a GPU kernel (strings, some int ops) "
                   "out of GPU scopes, or accept the copies to and from the CPU.")


_SOFT_ADVICE = ("Pin only to devices tf.config.list_logical_devices() lists (or use "
                "MirroredStrategy); turn soft placement off while testing "
                "(tf.config.set_soft_device_placement(False), or allow_soft_placement=False) "
                "to make this an error.")


def devices_used(obs: ProcessObservation, placed: dict[str, int] | None,
                 busy_s: dict[str, float] | None, nvml_gpus: list[dict[str, Any]] | None,
                 idle_threshold_percent: float, proc: str = "") -> Finding:
    """Every device the program had did work: TF's devices, the strategy's, where ops were
    placed, the trace's busy time and NVML's utilization, one verdict naming each idle
    device."""
    logical = obs.devices.logical if obs.devices else []
    gpus = [d for d in logical if ":GPU:" in d]
    used_by_strategy = list(dict.fromkeys(d for s in obs.strategies for d in s.worker_devices))
    stats = {d: v.get("nodes", 0) for s in obs.step_stats for d, v in s.devices.items()}
    ops = {**(placed or {}), **{d: (placed or {}).get(d, 0) + n for d, n in stats.items()}}
    evidence: dict[str, Any] = {"logical_devices": logical, "strategy_devices": used_by_strategy,
                                "ops_by_device": ops or None, "trace_busy_s": busy_s,
                                "nvml_gpus": nvml_gpus}
    if not ops and not busy_s and not nvml_gpus:
        return Finding(f"run.every-device-used{proc}", "skip",
                       "neither TensorFlow's placement, a trace nor NVML could be observed",
                       evidence)
    candidates = gpus or used_by_strategy or sorted(d for d in ops if ops[d]) or logical
    created = run_devices.created_logical(obs)  # the program split them: each must work
    candidates = list(dict.fromkeys([*candidates, *created]))
    evidence["created_by_program"] = created

    def worked(d: str) -> bool:
        return bool(ops.get(d)) or bool(busy_s and busy_s.get(d, 0.0) > 0)

    idle = [d for d in candidates if not worked(d)]
    nvml_idle = [g for g in nvml_gpus or [] if g.get("util_p95_percent") is not None
                 and g["util_p95_percent"] < idle_threshold_percent]
    evidence.update(idle=idle, nvml_idle=[g["index"] for g in nvml_idle])

    def describe(d: str) -> str:
        parts = [f"{ops.get(d, 0)} ops"] if ops else []
        if busy_s is not None:
            parts.append(f"busy {busy_s.get(d, 0.0) * 1e3:.1f} ms")
        return f"{d} ({', '.join(parts)})" if parts else d

    strategy = (PUBLIC_NAMES.get(obs.strategies[-1].class_name, obs.strategies[-1].class_name)
                if obs.strategies else None)
    head = f"{len(gpus)} GPU(s) visible to TensorFlow" if gpus else "no GPU visible to TensorFlow"
    if nvml_gpus is not None and len(nvml_gpus) != len(gpus):
        head += f" ({len(nvml_gpus)} seen by NVML)"
    if strategy:
        head += f"; {strategy} used {len(used_by_strategy)}"
    # an idle logical CPU device the program split off only warns: it holds no memory
    spare_cpus = [d for d in idle if d in created and ":CPU:" in d
                  and d not in used_by_strategy]
    if idle or nvml_idle:
        names = idle + [f"NVML GPU {g['index']} (p95 {g['util_p95_percent']:.0f} %)"
                        for g in nvml_idle]
        if spare_cpus == idle and not nvml_idle:
            return Finding(f"run.every-device-used{proc}", "warn",
                           f"{head}: {', '.join(idle)}, created by the program "
                           "(set_logical_device_configuration), did no work; worked: "
                           f"{', '.join(describe(d) for d in candidates if worked(d))}",
                           evidence, advice="Create only the logical devices the program "
                           "uses, or give them to the strategy "
                           "(tf.distribute.MirroredStrategy() takes every device).")
        return Finding(f"run.every-device-used{proc}", "fail",
                       f"{head}: {', '.join(names)} did no work; worked: "
                       f"{', '.join(describe(d) for d in candidates if worked(d)) or 'none'}",
                       evidence, advice="Give the strategy every device "
                       "(tf.distribute.MirroredStrategy() with no argument takes all GPUs), "
                       "split the batch over all of them, or hide the GPUs you do not mean "
                       "to use with CUDA_VISIBLE_DEVICES.")
    text = f"{head}; every device did work: {', '.join(describe(d) for d in candidates)}"
    if not gpus:
        return Finding(f"run.every-device-used{proc}", "warn", text, evidence,
                       advice="Without a GPU everything ran on the CPU; `gpudiag env` says why "
                              "TensorFlow sees none.")
    return Finding(f"run.every-device-used{proc}", "ok", text, evidence)


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
           proc: str = "") -> Finding:
    """TensorFlow's log, matched against the catalogue: each known message, its fix."""
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
                       "no known problem in TensorFlow's log" + tail, evidence)
    text = "; ".join(f"{m.entry.id} x{m.count}: {m.entry.meaning}" for m in serious) or \
        "only informational messages (" + ", ".join(m.entry.id for m in matches) + ")"
    if not serious:
        return Finding(f"run.tf-log{proc}", "ok", text + tail, evidence)
    worst: Status = "fail" if any(m.entry.severity == "fail" for m in serious) else "warn"
    return Finding(f"run.tf-log{proc}", worst, text + tail, evidence,
                   advice=" ".join(dict.fromkeys(m.entry.fix for m in serious)))
