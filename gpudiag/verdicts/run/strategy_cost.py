"""run.strategy: a tf.distribute strategy judged against no strategy (pure).

Spoken where a strategy is most likely to cost time: its replicas share the same hardware
(logical devices of one CPU, logical GPUs split from one GPU: they take turns on the same
cores, so the strategy adds an all-reduce and no compute), or each replica's batch is
small (under SMALL_PER_REPLICA examples: the global batch not scaled by
``num_replicas_in_sync``). What it says, from what was measured only:

- faster or slower than one device: where the same process also fitted a model of the
  same size without a strategy, the two fits' examples/s, with the ratio's interval
  (gpudiag.verdicts.stats.ratio_ci over their steady steps); where nothing ran without
  the strategy, that this was not measured, and how to measure it;
- the all-reduce's share of the profiled step (run.bottleneck's breakdown): work one
  device does not do;
- a cause only at or above its own threshold (run.bottleneck's causes whose measured
  share is at or above its line), else "none stands out", with the communication share
  against its line;
- the fixes that apply: no strategy over one device's logical devices, the global batch
  scaled by ``strategy.num_replicas_in_sync``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.layout.units import duration
from gpudiag.layout.units import share as pct
from gpudiag.records.run import DeviceSnapshot, ProcessObservation, StepSeries, StrategyRecord
from gpudiag.report import Action, Finding, Status
from gpudiag.verdicts import stats
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import throughput as run_throughput

SMALL_PER_REPLICA = 32  # examples a replica a step under this: a small per-replica batch
COMM_LINE = "communication_bound"


def shared_hardware(strategy: StrategyRecord, devices: DeviceSnapshot | None
                    ) -> tuple[str, str] | None:
    """How the strategy's replicas share one device's hardware, in a sentence and in a few
    words (None: they do not, or the physical devices were not recorded)."""
    if devices is None or not devices.physical:
        return None
    kinds = {"CPU": [d for d in strategy.worker_devices if ":CPU:" in d],
             "GPU": [d for d in strategy.worker_devices if ":GPU:" in d]}
    for kind, replicas in kinds.items():
        physical = [p for p in devices.physical if f":{kind}:" in p]
        if len(replicas) >= 2 and 0 < len(physical) < len(replicas):
            one = f"one {kind}" if len(physical) == 1 else f"{len(physical)} {kind}s"
            return (f"{len(replicas)} logical devices of {one} ({', '.join(replicas)} on "
                    f"{', '.join(p.rsplit('/', 1)[-1] for p in physical)}): they take turns "
                    "on the same cores", one)
    return None


@dataclass(frozen=True)
class Speed:
    """The strategy's fit against a fit without a strategy in the same process."""

    ratio: float  # the strategy's examples/s over the other's (medians)
    interval: tuple[float, float] | None
    mine: float
    other: float
    other_label: str


def _rates(obs: ProcessObservation, s: StepSeries, warmup: int) -> list[float]:
    skip = obs.profile.steps if obs.profile and obs.profile.source == s.label else []
    if not s.batch_size:
        return []
    return [s.batch_size / p for p in run_throughput.step_times(s, warmup, skip) if p > 0]


def _speed(obs: ProcessObservation, fit: StepSeries, warmup: int) -> Speed | None:
    """The strategy's fit against a fit of a model as large with no strategy (None: none
    ran, or too few steps to time)."""
    import statistics

    mine = _rates(obs, fit, warmup)
    size = fit.facts.get("trainable_parameters")
    for other in obs.series:
        replicas = other.facts.get("replicas")
        if other.kind != "fit" or other is fit or (isinstance(replicas, int) and replicas > 1)\
                or size is None or other.facts.get("trainable_parameters") != size:
            continue
        theirs = _rates(obs, other, warmup)
        if mine and theirs:
            return Speed(statistics.median(mine) / statistics.median(theirs),
                         stats.ratio_ci(theirs, mine), statistics.median(mine),
                         statistics.median(theirs), other.label)
    return None


def _speed_words(speed: Speed | None, fit: StepSeries, timing: dict[str, Any] | None
                 ) -> tuple[str, str]:
    """(the sentence, the title's words) for faster / slower / not measured."""
    if speed is None:
        rate = f", {timing['examples_per_s']:,.0f} examples/s" if timing and \
            "examples_per_s" in timing else ""
        step = f" ({duration(timing['step_s_median'])} a step{rate})" if timing else ""
        return (f"whether it makes this job faster or slower than one device was not "
                f"measured: gpudiag timed only the strategy's steps{step}, and no fit of "
                "this program ran without it", "vs one device: not measured")
    lo, hi = speed.interval or (speed.ratio, speed.ratio)
    said = (f"{speed.mine:,.0f} examples/s with it against {speed.other:,.0f} without "
            f"({speed.other_label}, a model of the same size)")
    ci = f", 95 % CI {lo:.2f}-{hi:.2f}" if speed.interval else ""
    if hi < 1:
        return (f"the strategy makes this job {1 / speed.ratio:.2f}x slower than one "
                f"device: {said}{ci}", f"{1 / speed.ratio:.2f}x slower than no strategy")
    if lo > 1:
        return (f"the strategy makes this job {speed.ratio:.2f}x faster than one device: "
                f"{said}{ci}", f"{speed.ratio:.2f}x faster than no strategy")
    return (f"no clear difference from one device: {said} (x{speed.ratio:.2f}{ci}, which "
            "holds 1)", "no clear difference from no strategy")


def _causes(slow: Finding | None) -> str:
    """The profiled step's causes, each only at or above its own threshold, else "none
    stands out" with the communication share against its line."""
    ev = slow.evidence if slow is not None else {}
    shares = ev.get("shares")
    if not shares:
        return "which part of the step it costs was not measured (no trace of its steps)"
    named = []
    for cause in ev.get("causes") or []:
        a = ((ev.get("cause_evidence") or {}).get(cause) or {}).get("against")
        if a is None or a["value"] >= a["threshold"]:
            named.append(cause + (f" ({pct(a['value'])}, its line {pct(a['threshold'])})"
                                  if a else ""))
    comm = shares.get("communication") or 0.0
    line = (ev.get("thresholds") or {}).get(COMM_LINE)
    said = f"the all-reduce (communication) takes {pct(comm)} of the profiled step, work " \
        "one device does not do"
    if named:
        return f"{said}; the step is {', '.join(named)}"
    return f"{said}; no cause stands out" + (
        f" (communication {pct(comm)}, under its {pct(line)} line)" if line and comm < line
        else "")


def _fit_under(obs: ProcessObservation, strategy: StrategyRecord) -> StepSeries | None:
    for s in obs.series:
        replicas = s.facts.get("replicas")
        if s.kind == "fit" and isinstance(replicas, int) and replicas > 1 and \
                s.facts.get("strategy") == strategy.class_name:
            return s
    return None


def _at(frame: Any) -> str | None:
    if not isinstance(frame, dict) or not frame.get("file"):
        return None
    return f"{str(frame['file']).rsplit('/', 1)[-1]}:{frame.get('line')}"


def strategy_cost(obs: ProcessObservation, slow: Finding | None, warmup: int,
                  proc: str = "") -> Finding | None:
    """The strategy against no strategy, where its replicas share hardware or each gets a
    small batch (None: no such strategy with a fit that ran under it)."""
    strategy = next((s for s in obs.strategies if (s.num_replicas or 0) > 1), None)
    fit = _fit_under(obs, strategy) if strategy is not None else None
    if strategy is None or fit is None:
        return None
    n = strategy.num_replicas or 0
    shared = shared_hardware(strategy, obs.devices)
    per_replica = fit.batch_size // n if fit.batch_size else None
    small = per_replica is not None and per_replica < SMALL_PER_REPLICA
    if not shared and not small:
        return None
    speed = _speed(obs, fit, warmup)
    said, short = _speed_words(speed, fit, run_throughput.loop_timing(obs, fit, warmup))
    setup = [f"{strategy.class_name} of {n} replicas"]
    if shared:
        setup.append(shared[0])
    if per_replica is not None:
        setup.append(f"{per_replica} examples a replica (global batch {fit.batch_size})")
    slower = speed is not None and speed.interval is not None and speed.interval[1] < 1
    faster = speed is not None and speed.interval is not None and speed.interval[0] > 1
    actions = []
    if shared and not faster:
        actions.append(Action("train without the strategy: replicas on logical devices of "
                              "one device share its cores and add an all-reduce",
                              _at(strategy.caller)))
    if small:
        actions.append(Action(f"batch_size={fit.batch_size} * "
                              "strategy.num_replicas_in_sync: each replica then gets the "
                              f"{fit.batch_size} examples one device had",
                              _at(fit.facts.get("fit_caller"))))
    status: Status = "ok" if faster else "warn" if slower or shared else "skip"
    evidence = {"strategy": strategy.class_name, "replicas": n,
                "shared": shared[0] if shared else None, "per_replica_batch": per_replica,
                "global_batch": fit.batch_size,
                "speed": None if speed is None else vars(speed) | {
                    "interval": list(speed.interval) if speed.interval else None},
                "small_per_replica": SMALL_PER_REPLICA}
    return Finding(f"run.strategy{proc}", status, f"{'; '.join(setup)}: {said}; "
                   f"{_causes(slow)}", evidence,
                   advice=" ".join(f"{a.what}." for a in actions) + (
                       " To measure it: run the program once without the strategy under "
                       "`gpudiag run` and compare the two runs with `gpudiag diff`, or "
                       "`gpudiag scaling` (it times 1 device and N)." if speed is None
                       else ""),
                   actions=tuple(actions),
                   title=title(f"{strategy.class_name}, {n} replicas on "
                               f"{shared[1] if shared else f'{per_replica} examples each'}: "
                               f"{short}", f"{strategy.class_name}: {short}",
                               f"the strategy: {short}"))
