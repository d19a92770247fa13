"""`gpudiag run`'s verdicts on where the program's ops ran: ops per device (run.placement),
pinned against placed (run.soft-placement), every device did work (run.every-device-used).
Pure functions of gpudiag.records.run and plain numbers; device names as
gpudiag.verdicts.run.process.canonical spells them."""

from __future__ import annotations

from typing import Any

from gpudiag.layout.units import counted
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import devices as run_devices
from gpudiag.verdicts.run.process import PUBLIC_NAMES, canonical, listing


def placement(obs: ProcessObservation, placed: dict[str, int] | None, eager_ops: int,
              graph_nodes: int, reason: str | None, proc: str = "") -> Finding:
    """Per-device work from TensorFlow's placement decisions (log and step stats)."""
    stats = {d: v.get("nodes", 0) for s in obs.step_stats for d, v in s.devices.items()}
    evidence = {"ops_by_device": placed, "eager_ops": eager_ops, "graph_nodes": graph_nodes,
                "session_nodes_by_device": stats, "reason": reason}
    if not placed and not stats:
        return Finding(f"run.placement{proc}", "skip",
                       f"where ops ran could not be observed: {reason or 'no op was placed'}",
                       evidence, title="where ops ran could not be observed",
                       advice="Let TensorFlow's log through: do not set "
                       "TF_CPP_MIN_LOG_LEVEL in the program (set it in the shell; gpudiag "
                       "still filters what you see by it).")
    parts = []
    if placed:
        if obs.placed_graphs:  # run metadata of gpudiag's placement windows
            parts.append(f"TensorFlow's placement (run metadata, placement windows): "
                         f"{eager_ops} eager kernels and {graph_nodes} tf.function nodes "
                         f"({listing(placed)})")
        else:
            parts.append(f"placement log: {eager_ops} eager ops and {graph_nodes} "
                         f"tf.function nodes ({listing(placed)})")
    if stats:
        parts.append(f"Session step stats: {listing(stats, ' nodes')}")
    where = {**stats, **(placed or {})}
    busiest = max(where, key=lambda d: where[d])
    return Finding(f"run.placement{proc}", "ok", "; ".join(parts), evidence,
                   title=title(f"ops placed on {len(where)} device(s), the most on {busiest}",
                               f"ops placed on {len(where)} device(s)"))


def soft_placement(obs: ProcessObservation, graph_devices: dict[str, dict[str, str]],
                   proc: str = "", eager_by_device: dict[str, int] | None = None) -> Finding:
    """Ops pinned to one device that ran on another: soft placement moved them (graphs
    and Session step stats against where they ran; eager tf.device scopes on devices
    that do not exist, gpudiag.verdicts.run.devices)."""
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
                       advice=_SOFT_ADVICE,
                       title=f"{len(pins)} tf.device scope(s) name a device that does not exist")
    if not compared:
        return Finding(f"run.soft-placement{proc}", "skip",
                       "no op of the program's step functions or Session graphs was pinned "
                       "with tf.device (or where they ran is unknown): nothing to compare",
                       evidence, title="no pinned op to compare: nothing moved")
    if not rows:
        return Finding(f"run.soft-placement{proc}", "ok",
                       f"all {counted(compared, 'pinned op')} ran on the device they were "
                       "pinned to", evidence,
                       title=f"all {counted(compared, 'pinned op')} ran where they were pinned")
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
                       f"about where ops ran){eager}", evidence, advice=_SOFT_ADVICE,
                       title=title(f"ops pinned to missing {', '.join(absent)} were moved "
                                   "silently", f"ops pinned to {len(absent)} missing device(s) "
                                   "were moved silently"))
    moved = sum(r["nodes"] for r in rows)
    return Finding(f"run.soft-placement{proc}", "warn",
                   f"{text}: those ops have no kernel on the device they were pinned to",
                   evidence, title=f"soft placement moved {moved} pinned op(s) with no kernel "
                   "there", advice="Keep ops without a GPU kernel (strings, some int ops) "
                   "out of GPU scopes, or accept the copies to and from the CPU.")


_EVERY_DEVICE = Action("give the strategy every device: tf.distribute.MirroredStrategy() "
                       "with no argument")
_IDLE_ADVICE = ("Give the strategy every device (tf.distribute.MirroredStrategy() with no "
                "argument takes all GPUs), split the batch over all of them, or hide the GPUs "
                "you do not mean to use with CUDA_VISIBLE_DEVICES.")


def _idle_title(names: list[str], strategy: str | None, used: list[str]) -> str:
    return title(f"{', '.join(names)} did no work"
                 + (f" ({strategy} used {len(used)})" if strategy else ""),
                 f"{len(names)} of the devices did no work")


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
                       evidence, title="no placement, trace or NVML: device use not observed")
    candidates = gpus or used_by_strategy or sorted(d for d in ops if ops[d]) or logical
    created = run_devices.created_logical(obs)  # the program split them: each must work
    candidates = list(dict.fromkeys([*candidates, *created]))
    evidence["created_by_program"] = created

    def worked(d: str) -> bool:
        return bool(ops.get(d)) or bool(busy_s and busy_s.get(d, 0.0) > 0)

    idle = [d for d in candidates if not worked(d)]
    nvml_idle = [g for g in nvml_gpus or [] if g.get("util_p95_percent") is not None
                 and max([g["util_p95_percent"], *(g.get("util_p95_ci_percent") or ())])
                 < idle_threshold_percent]  # the p95's interval under it too: idle for sure
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
                           evidence, title=title(
                               f"{len(idle)} logical CPU device(s) the program made did no work",
                               "logical CPU devices the program made did no work"),
                           advice="Create only the logical devices the program "
                           "uses, or give them to the strategy "
                           "(tf.distribute.MirroredStrategy() takes every device).")
        return Finding(f"run.every-device-used{proc}", "fail",
                       f"{head}: {', '.join(names)} did no work; worked: "
                       f"{', '.join(describe(d) for d in candidates if worked(d)) or 'none'}",
                       evidence, title=_idle_title(names, strategy, used_by_strategy),
                       actions=(_EVERY_DEVICE,), advice=_IDLE_ADVICE)
    text = f"{head}; every device did work: {', '.join(describe(d) for d in candidates)}"
    if not gpus:
        ran = ", ".join(d for d in candidates if worked(d))
        return Finding(f"run.every-device-used{proc}", "warn", text, evidence,
                       title=title(f"no GPU: ran on the CPU ({ran})", "no GPU: ran on the CPU"),
                       advice="Without a GPU everything ran on the CPU; `gpudiag env` says why "
                              "TensorFlow sees none.")
    return Finding(f"run.every-device-used{proc}", "ok", text, evidence,
                   title=title(f"every device did work: {', '.join(candidates)}",
                               f"all {len(candidates)} device(s) did work"))
