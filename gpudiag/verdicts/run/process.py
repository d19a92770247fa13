"""Verdicts of `gpudiag run`: pure functions from the program's records to findings.

No TensorFlow, no NVML, no I/O: inputs are gpudiag.records.run (what the hooks saw in
one process), plain per-device numbers derived from the placement log, the trace and
NVML, and catalogue matches. Learning verdicts are in gpudiag.verdicts.run.progress, the
crash's in gpudiag.verdicts.run.crash, TensorFlow's log's in gpudiag.verdicts.run.tflog.
Every id is explained in docs/findings.md.
``proc`` is "" for a program with one TensorFlow process, else ".p<n>" (n-th process).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpudiag.catalogue import LogMatch, match_crash
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import tf1

_JOB = re.compile(r"^/job:[^/]+(?:/replica:\d+)?(?:/task:\d+)?")
_DEVICE = re.compile(r"(?:^|/)(?:device:)?(?P<type>[A-Za-z_]+):(?P<index>\d+)$")


def canonical(device: str) -> str | None:
    """``/gpu:1``, ``/job:localhost/replica:0/task:0/device:GPU:1`` -> ``/device:GPU:1``."""
    m = _DEVICE.search(_JOB.sub("", device.strip()))
    return f"/device:{m['type'].upper()}:{m['index']}" if m else None


def where(caller: dict[str, Any] | None) -> str:
    if not caller:
        return ""
    return f" at {caller['file'].rsplit('/', 1)[-1]}:{caller['line']}"


def at(caller: dict[str, Any] | None) -> str | None:
    """``file:line`` of the program's frame (None: not known)."""
    return f"{caller['file'].rsplit('/', 1)[-1]}:{caller['line']}" if caller else None


def listing(counts: dict[str, Any], unit: str = "") -> str:
    return ", ".join(f"{k} {v}{unit}" for k, v in counts.items())


# ---------------------------------------------------------------- the program's terminal


def terminal(given: bool, tty_readers: Sequence[tuple[int, str, bool]]) -> Finding:
    """What of the user's terminal the program had: a pseudo-terminal like it where
    gpudiag's output is one. A process that opened ``/dev/tty`` to read (``tty_readers``:
    pid, command, whether what the user typed was passed into it) is named; one whose
    keys could not be passed on (gpudiag had no terminal to read them from) is the one
    difference left, and warns."""
    evidence = {"pseudo_terminal": given,
                "tty_readers": [{"pid": p, "command": c, "relayed": r}
                                for p, c, r in tty_readers]}
    if not given:
        return Finding("run.terminal", "skip", "gpudiag's output is not a terminal: the "
                       "program's stdout and stderr are pipes, as they would be plainly "
                       "with the output redirected", evidence,
                       title="not a terminal: the program's stdout and stderr are pipes")
    text = ("the program's stdout and stderr that are terminals on your side are "
            "pseudo-terminals of your window's size (isatty, progress bars, /dev/tty as "
            "plainly); its stdin is your terminal")
    if not tty_readers:
        return Finding("run.terminal", "ok", text + "; no process opened /dev/tty to read",
                       evidence, title="the program wrote to pseudo-terminals of your window")
    stranded = [(p, c) for p, c, relayed in tty_readers if not relayed]
    if not stranded:
        who = "; ".join(f"pid {p} `{c[:120]}`" for p, c, _ in tty_readers[:5])
        return Finding("run.terminal", "ok", f"{text}; {who} read /dev/tty: what you typed "
                       "was passed into it while it did", evidence,
                       title=f"{len(tty_readers)} process(es) read /dev/tty: your keys reached it")
    who = "; ".join(f"pid {p} `{c[:120]}`" for p, c in stranded[:5])
    return Finding("run.terminal", "warn",
                   f"{who} opened /dev/tty to read, and gpudiag had no terminal of its own "
                   "to take what you type from, so nothing typed arrived there (a password "
                   f"prompt, getpass, `read < /dev/tty` waits); {text}",
                   evidence, title=f"{len(stranded)} process(es) read /dev/tty: no keys reached it",
                   advice="Answer such a prompt in a plain run, or give the "
                   "answer another way (an environment variable, a file, stdin).")


# ---------------------------------------------------------------- the program's processes


def tensorflow_seen(observations: Sequence[ProcessObservation], *, python_command: bool,
                    hook_errors: Sequence[str], unreadable_lines: int,
                    unentered: Sequence[tuple[int, str, str]] = (),
                    unreadable: Sequence[str] = (), newer_versions: Sequence[int] = (),
                    protocol_version: int = 1) -> Finding:
    """Which processes the hooks saw, which imported TensorFlow; hook errors; the Python
    processes they could not enter (``unentered``: pid, command, why). Event lines that
    could not be read (``unreadable_lines``, the first few ``unreadable``: where and why)
    and events of a newer protocol version than ``protocol_version`` (``newer_versions``)
    are said once, and make an ok (or skip) a warn: the rest of the run was judged."""
    found = _tensorflow_seen(observations, python_command=python_command,
                             hook_errors=hook_errors, unreadable_lines=unreadable_lines,
                             unentered=unentered)
    said = []
    if unreadable_lines:
        said.append(f"{unreadable_lines} event line(s) could not be read ("
                    + "; ".join(unreadable[:3])
                    + (f"; and {unreadable_lines - 3} more" if unreadable_lines > 3 else "")
                    + "): what they held is missing from this report; the rest was judged")
    if newer_versions:
        said.append(f"events of protocol version {max(newer_versions)} were left out (this "
                    f"gpudiag reads version {protocol_version}): the program's hooks came "
                    "from a newer gpudiag; run the program under that gpudiag, or install "
                    "it here (pip install -U gpudiag)")
    if not said:
        return found
    evidence = {**found.evidence, "unreadable_event_lines_first": list(unreadable),
                "newer_protocol_versions": sorted(set(newer_versions))}
    return replace(found, status="fail" if found.status == "fail" else "warn",
                   message=f"{found.message}; " + "; ".join(said), evidence=evidence,
                   advice=found.advice or "Report the lines named as a gpudiag bug if the "
                   "program did not write them itself.")


def _tensorflow_seen(observations: Sequence[ProcessObservation], *, python_command: bool,
                     hook_errors: Sequence[str], unreadable_lines: int,
                     unentered: Sequence[tuple[int, str, str]] = ()) -> Finding:
    tf_procs = [o for o in observations if o.imported_tf]
    errors = [e for o in observations for e in o.hook_errors if e.get("kind") == "hook_error"]
    evidence = {"python_processes": [{"pid": o.pid, "argv": o.argv[:6], "tf": o.tf_version,
                                      "keras": o.keras_version} for o in observations],
                "hook_errors": errors[:20], "hook_load_errors": list(hook_errors),
                "unreadable_event_lines": unreadable_lines,
                "not_entered": [{"pid": p, "command": c, "why": w} for p, c, w in unentered]}
    missed = "; ".join(f"pid {p} `{c[:120]}`: {w}" for p, c, w in unentered[:5])
    unseen = (f"gpudiag's hooks could not enter {len(unentered)} Python process(es) "
              f"({missed}): whether TensorFlow ran there, and what it did (devices, steps, "
              "placement, a crash), was not observed; only the exit code and NVML's view")
    advice = ("Start those processes without -I/-E/-S and with the environment they "
              "inherit (gpudiag's PYTHONPATH and GPUDIAG_RUN_* variables).")
    if not observations:
        if unentered:
            return Finding("run.tensorflow", "skip", unseen, evidence, advice=advice,
                           title=f"hooks could not enter {len(unentered)} Python process(es)")
        if not python_command:
            return Finding("run.tensorflow", "skip",
                           "not a Python program: only its exit code and NVML's view are "
                           "observed (what `gpudiag monitor` gives)", evidence,
                           title="not a Python program: only its exit code and NVML observed",
                           advice="Run the Python interpreter itself: gpudiag run -- python "
                                  "train.py (a shell script that starts Python works too).")
        why = f": {hook_errors[0]}" if hook_errors else (
            " (the interpreter did not import gpudiag's sitecustomize: -I, -E or -S, or an "
            "environment without gpudiag's PYTHONPATH)")
        return Finding("run.tensorflow", "skip", f"gpudiag's hooks did not load{why}",
                       evidence, advice=advice,
                       title="gpudiag's hooks did not load in the program's Python")
    if not tf_procs:
        if unentered:
            return Finding("run.tensorflow", "warn",
                           f"TensorFlow was not imported in the {len(observations)} Python "
                           f"process(es) the hooks entered; {unseen}", evidence, advice=advice,
                           title=f"no TensorFlow seen; {len(unentered)} Python process(es) "
                                 "not entered")
        return Finding("run.tensorflow", "skip",
                       f"TensorFlow was never imported ({len(observations)} Python "
                       "process(es) seen): nothing TensorFlow did can be observed", evidence,
                       title=f"TensorFlow was never imported ({len(observations)} Python "
                             "process(es))")
    text = (f"{len(observations)} Python process(es), {len(tf_procs)} imported TensorFlow "
            + ", ".join(f"{o.tf_version} (pid {o.pid})" for o in tf_procs))
    notes = list(dict.fromkeys(str(e.get("message")) for o in observations
                               for e in o.hook_errors if e.get("kind") == "hook_note"))
    if notes:  # where a hook could not ride along, it stood aside: say why
        evidence["hook_notes"] = notes
        text += "; " + "; ".join(notes)
    versions = ", ".join(dict.fromkeys(str(o.tf_version) for o in tf_procs))
    seen = title(f"TensorFlow {versions} in {len(tf_procs)} of {len(observations)} Python "
                 "process(es)", f"TensorFlow in {len(tf_procs)} of {len(observations)} "
                 "Python process(es)")
    if unentered:
        return Finding("run.tensorflow", "warn", f"{text}; {unseen}", evidence, advice=advice,
                       title=title(f"{seen}; {len(unentered)} not entered",
                                   f"{len(unentered)} Python process(es) not entered"))
    if errors or hook_errors:
        return Finding("run.tensorflow", "warn",
                       f"{text}; {len(errors) + len(hook_errors)} error(s) inside gpudiag's "
                       "hooks (the program was not affected; some records may be missing)",
                       evidence, advice="Report them as a gpudiag bug, with the evidence.",
                       title=title(f"{seen}; {len(errors) + len(hook_errors)} hook error(s)",
                                   f"{len(errors) + len(hook_errors)} error(s) in gpudiag's "
                                   "hooks"))
    return Finding("run.tensorflow", "ok", text, evidence, title=seen)


# ---------------------------------------------------------------- devices and configuration


SEED_APIS = ("set_seed", "set_random_seed")


def seed_calls(obs: ProcessObservation) -> list[str]:
    """The program's calls that set TensorFlow's global seed (tf.random.set_seed, which
    keras.utils.set_random_seed calls), each with its seed and its line,
    ``tf.random.set_seed(3) at train.py:4``: run.devices' evidence, where
    `gpudiag diff` reads whether both runs start from the same weights (the key present
    and empty: no seed set)."""
    return [f"{c.api}({c.args[0] if c.args else c.kwargs.get('seed')}){where(c.caller)}"
            for c in obs.config_calls
            if c.api.rsplit(".", 1)[-1] in SEED_APIS and not c.error_type]


def devices(obs: ProcessObservation, proc: str = "") -> Finding:
    """Physical and logical devices after the program's tf.config calls, and those calls."""
    calls = [{"order": c.order, "api": c.api, "args": c.args, "kwargs": c.kwargs,
              "where": where(c.caller).strip(), "devices_initialized_before":
                  c.initialized_before, "error": f"{c.error_type}: {c.error}"
              if c.error_type else None} for c in obs.config_calls]
    snap = obs.devices
    evidence: dict[str, Any] = {"config_calls": calls, "seed_calls": seed_calls(obs),
                                "devices": None if snap is None else
                                {"physical": snap.physical, "logical": snap.logical,
                                 "gpus": snap.gpus, "soft_placement": snap.soft_placement,
                                 "cuda_build": snap.cuda_build, "seen_at": snap.reason,
                                 "other_tasks": snap.remote}}
    listing = "; ".join(f"{c.api.removeprefix('tf.')}{where(c.caller)}"
                        + (" -> " + (c.error_type or "") if c.error_type else "")
                        for c in obs.config_calls) or "none"
    failed = [c for c in obs.config_calls if c.error_type]
    if failed:
        c = failed[0]
        entry = match_crash(c.error_type or "", c.error or "")
        late = " after the devices were initialised" if c.initialized_before else ""
        return Finding(f"run.devices{proc}", "fail",
                       f"{c.api}{where(c.caller)} was called{late} and raised {c.error_type}: "
                       f"{c.error}; the configuration did not take effect (calls in order: "
                       f"{listing})", evidence,
                       title=title(f"{c.api.rsplit('.', 1)[-1]} raised {c.error_type}: it "
                                   "did not take effect", "a device configuration did not take "
                                   "effect"),
                       advice=entry.fix if entry else "Configure devices right after "
                       "importing TensorFlow, before anything uses them.",
                       actions=(Action(f"call {c.api.rsplit('.', 1)[-1]} right after importing "
                                       "TensorFlow, before anything uses the devices",
                                       at(c.caller)),))
    if snap is None:
        return Finding(f"run.devices{proc}", "skip",
                       "TensorFlow's devices were never initialised (no op ran), so they were "
                       f"not listed; tf.config calls: {listing}", evidence,
                       title="TensorFlow's devices were never initialised (no op ran)")
    gpus = [d for d in snap.logical if ":GPU:" in d]
    physical = ", ".join(p.rsplit("/", 1)[-1] for p in snap.physical)
    text = (f"logical devices {', '.join(snap.logical)}"
            + (f" (physical: {physical})" if physical else f" (as the {snap.reason} saw them)")
            + (f"; and {len(snap.remote)} device(s) of the cluster's other tasks"
               if snap.remote else "")
            + f"; tf.config calls: {listing}")
    if not gpus:
        cpus = ", ".join(snap.logical[:2])
        return Finding(f"run.devices{proc}", "warn", f"no GPU visible to TensorFlow: {text}",
                       evidence, title=title(f"no GPU: TensorFlow saw only {cpus}",
                                             "no GPU: TensorFlow saw only CPUs"),
                       advice="If this machine has a GPU, run `gpudiag env`: it says "
                       "whether the driver, the CUDA libraries and CUDA_VISIBLE_DEVICES let "
                       "TensorFlow see it.")
    return Finding(f"run.devices{proc}", "ok", text, evidence,
                   title=title(f"{len(gpus)} GPU(s): {', '.join(gpus)}",
                               f"TensorFlow saw {len(gpus)} GPU(s)"))


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
                        "cluster": s.cluster, "where": where(s.caller).strip()}
                       for s in obs.strategies],
        "tf_log": [{"id": m.entry.id, "line": m.first, "count": m.count} for m in notes]}
    gpus = [d for d in (obs.devices.logical if obs.devices else []) if ":GPU:" in d]
    towers = None if obs.strategies else tf1.in_graph(obs.tf1_calls, obs.step_stats)
    if towers is not None:  # the program placed one tower per device itself (TF1)
        evidence["in_graph"] = towers[1]
        return Finding(f"run.distribution{proc}", "ok",
                       f"no tf.distribute strategy: {towers[0]}", evidence,
                       title="no tf.distribute strategy: the program places its towers")
    if not obs.strategies:
        if len(gpus) > 1:
            return Finding(f"run.distribution{proc}", "warn",
                           f"{len(gpus)} GPUs visible, but the program created no "
                           "tf.distribute strategy: unless it places work on each GPU itself, "
                           "it uses one", evidence,
                           title=f"{len(gpus)} GPUs visible, but no tf.distribute strategy",
                           actions=(Action("create tf.distribute.MirroredStrategy() and build "
                                           "the model and optimizer in strategy.scope()"),),
                           advice="Create tf.distribute.MirroredStrategy() and build the model "
                                  "and optimizer in strategy.scope().")
        return Finding(f"run.distribution{proc}", "ok",
                       "no tf.distribute strategy created (the program runs on the default "
                       "device unless it pins ops itself)", evidence,
                       title="no tf.distribute strategy: the default device")
    parts = []
    for s in obs.strategies:
        ops = s.cross_device_ops or "-"
        if s.implementation:
            ops += f" ({s.implementation})"
        name = PUBLIC_NAMES.get(s.class_name, s.class_name)
        if s.cluster and s.cluster.get("task_type"):
            parts.append(f"{name}{where(s.caller)}, task {s.cluster['task_type']}-"
                         f"{s.cluster.get('task_id')}: {s.num_replicas} replica(s) in sync "
                         f"across the cluster, {len(s.worker_devices)} here on "
                         f"{', '.join(s.worker_devices) or '-'}; all-reduce {ops}"
                         f"{', NCCL' if s.nccl else ''}")
            continue
        parts.append(f"{name}{where(s.caller)}: {s.num_replicas} replica(s) on "
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
                       evidence, title=title(f"{_strategy_title(obs)}; " + (
                           "TensorFlow warned" if bad + warn else "GPUs reduced without NCCL"),
                           "TensorFlow warned about the strategy" if bad + warn else
                           "GPUs reduced without NCCL"),
                       advice=(bad + warn)[0].entry.fix if bad + warn else
                       "On several GPUs NCCL is the fast all-reduce: use a Linux CUDA build.")
    return Finding(f"run.distribution{proc}", "ok", text, evidence,
                   title=_strategy_title(obs))


def _strategy_title(obs: ProcessObservation) -> str:
    s = obs.strategies[0]
    name = PUBLIC_NAMES.get(s.class_name, s.class_name)
    more = f" (+{len(obs.strategies) - 1} more)" if len(obs.strategies) > 1 else ""
    return title(f"{name}: {s.num_replicas} replica(s){more}",
                 f"a tf.distribute strategy: {s.num_replicas} replica(s){more}")
