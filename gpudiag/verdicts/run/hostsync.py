"""run.host-sync: a custom training loop that reads tensors back to Python every step
(``float(loss)``, ``loss.numpy()``, ``metric.result().numpy()``, a tensor in an f-string),
each read waiting for the step's result: on a GPU, for the device to finish the step,
with no next step queued meanwhile. From the program's reads per line
(gpudiag.inprogram.hostreads) against its loop's steps and step period (the step series).

Measured on tests/programs/host_sync_per_step.py on a CPU: the reads waited a few
microseconds each (a step call on the CPU returns when its ops have run), so the loop's
time there is not in them and the finding says so; the cost the fix removes is where the
step call returns before the device has finished (a GPU). A line read in at least half the
loop's steps counts as read every step. Threshold: the reads' wait at least SYNC_SHARE of
the step period is named (warn). Pure.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from gpudiag.layout.units import share as pct
from gpudiag.records.callsites import HostReadSite
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.throughput import loop_timing
from gpudiag.verdicts.step_causes import ms

SYNC_SHARE = 0.20  # of the step period waiting in the reads (the host-bound line)
LOOPS = ("function", "eager")  # the custom loops: a step the program calls itself

FIX = ("keep the values as tensors and read them every N steps: update a "
       "tf.keras.metrics.Mean with the loss inside the tf.function step (or keep the "
       "returned tensors in a list and tf.stack them later), and put the float() / .numpy() "
       "and the log line under `if step % N == 0:`")


def _loop(obs: ProcessObservation) -> StepSeries | None:
    loops = [s for s in obs.series if s.kind in LOOPS and s.steps]
    return max(loops, key=lambda s: sum(st.count for st in s.steps), default=None)


def host_sync_facts(obs: ProcessObservation, warmup: int) -> dict[str, Any] | None:
    """The lines read every step of the program's main custom loop, their wait per step
    against the step period; None without such a loop or such a line."""
    loop = _loop(obs)
    if loop is None:
        return None
    steps = sum(st.count for st in loop.steps)
    every = [s for s in obs.host_reads if steps and 2 * s.reads >= steps]
    if not every or steps < 3:
        return None
    timing = loop_timing(obs, loop, min(warmup, len(loop.steps) // 3))
    period = timing["step_s_median"] if timing else None
    wait = sum(s.total_s for s in every) / steps
    return {"loop": loop.label, "steps": steps, "sites": every, "wait_s_per_step": wait,
            "step_s_median": period, "share": wait / period if period else None,
            "reads_per_step": sum(s.reads for s in every) / steps}


def _site(s: HostReadSite, steps: int) -> str:
    code = f" (`{s.code}`)" if s.code else ""
    median = f", median {ms(s.median_s)} a read" if s.median_s is not None else ""
    return f"{s.how} at {s.where}{code}: {s.reads} reads in {steps} steps{median}"


def host_sync(obs: ProcessObservation, warmup: int, proc: str = "") -> Finding | None:
    """run.host-sync: warn where the per-step reads wait SYNC_SHARE of the step or more;
    ok with their wait otherwise; None where no line reads every step."""
    f = host_sync_facts(obs, warmup)
    if f is None:
        return None
    sites = f["sites"]
    said = "; ".join(_site(s, f["steps"]) for s in sites[:4])
    wait = (f"{ms(f['wait_s_per_step'])} a step waiting in them"
            + (f", {pct(f['share'])} of the {ms(f['step_s_median'])} step"
               if f["share"] is not None else ""))
    head = (f"{f['loop']}'s loop reads tensors back to Python every step ({said}): "
            f"{wait}")
    evidence = {**f, "sites": [asdict(s) for s in sites], "threshold": SYNC_SHARE,
                "reads_left_out": obs.host_reads_left_out}
    fid = f"run.host-sync{proc}"
    if f["share"] is None or f["share"] < SYNC_SHARE:
        return Finding(fid, "ok", f"{head}: they waited little, so the loop's time is not "
                       "in them" if f["share"] is not None
                       else f"{head}; the step period was not measured", evidence,
                       title=f"tensors read every step: {ms(f['wait_s_per_step'])} a step, "
                             "not what the time went to")
    top = sites[0]
    return Finding(
        fid, "warn", f"{head}: each read waits until the step's result is computed (on a "
        "GPU, the device finishing the step), and the host queues no next step meanwhile; "
        "how much of the wait the device's own work would still take is not measured",
        evidence, advice=f"at {top.where}: {FIX}.",
        actions=(Action("read the tensors every N steps, not every step (keep the loss "
                        "as a tensor or a tf.keras.metrics.Mean)", top.where),),
        title=title(f"a host sync every step: {top.how} at {top.where}, "
                    f"{pct(f['share'])} of the step",
                    f"tensors read back every step: {pct(f['share'])} of the step"))
