"""Where `gpudiag scaling`'s time went: report.json's ``data.scaling.timing``.

Per child (one per device count, gpudiag/probes/scaling.py), in seconds:

- ``process_start_s``: from the parent's spawn to the probe's first line (the
  interpreter, gpudiag's imports), ``tf_import_s``: ``import tensorflow``;
- ``device_setup_s`` (and, in the first child, the largest count's check), ``data_load_s``;
- per strategy (``strategies.<name>``): ``build_s`` (model, trainer, data set), then the
  loop's phases (gpudiag.train.loop.loop_phases): ``setup_s`` (writer, the step graph's
  placement), ``warmup_s``, ``profile_s`` (profiler start to stop), ``timed_s``,
  ``steps_other_s`` (progress lines, buffered scalar writes), ``eval_s``,
  ``checkpoint_s``;
- ``allreduce_s`` (the sweep, in the largest count's child);
- ``exit_s``: the rest of the child's wall time (result written, interpreter exit);
- ``wall_s``: the child's whole wall time as the parent saw it.

The parent's: ``before_children_s`` (NVML, options), ``children_s`` (from the first
child's start to the last one's end), ``between_children_s`` (of that, the parent's own
work: results read, the all-reduce plot), ``verdicts_s`` (traces read, findings),
``tensorboard_s`` (figures, HParams, plots), ``total_s``.
``PHASES`` names every phase once, in the order benchmarks/first_answer.py prints
their sums.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.procs.runner import ChildResult
from gpudiag.records.training import CountResult

LOOP_PHASES = ("setup_s", "warmup_s", "profile_s", "timed_s", "steps_other_s", "eval_s",
               "checkpoint_s")
CHILD_PHASES = ("process_start_s", "tf_import_s", "device_setup_s", "data_load_s")
PARENT_PHASES = ("before_children_s", "between_children_s", "verdicts_s", "tensorboard_s")
PHASES = (*CHILD_PHASES, "build_s", *LOOP_PHASES, "allreduce_s", "exit_s", *PARENT_PHASES)


def child_timing(name: str, n_devices: int, child: ChildResult, spawned_at: float,
                 result: CountResult | None) -> dict[str, Any]:
    """One count child's phases (``spawned_at``: the parent's time.time() before the
    spawn). A child that gave no result has its wall time only."""
    out: dict[str, Any] = {"name": name, "n_devices": n_devices, "wall_s": child.duration_s}
    if result is None:
        return out
    strategies = {}
    for o in result.outcomes:
        phases = dict(o.result.train.phases) if o.result is not None else {}
        strategies[o.strategy] = {"build_s": o.build_s, **phases,
                                  "total_s": o.build_s + (o.result.train.wall_s
                                                          if o.result is not None else 0.0)}
    out.update(process_start_s=max(0.0, result.entered_at - spawned_at),
               tf_import_s=result.tf_imported_at - result.entered_at,
               device_setup_s=result.device_setup_s, data_load_s=result.data_load_s,
               strategies=strategies, allreduce_s=result.allreduce_s)
    accounted = (out["process_start_s"] + out["tf_import_s"] + result.device_setup_s
                 + result.data_load_s + result.allreduce_s
                 + sum(s["total_s"] for s in strategies.values()))
    out["exit_s"] = max(0.0, child.duration_s - accounted)
    return out


def phase_totals(timing: Mapping[str, Any]) -> dict[str, float]:
    """Every phase of ``PHASES`` summed over the children and strategies, the parent's
    beside them, and ``total_s``: one line per phase for the benchmark."""
    totals = dict.fromkeys(PHASES, 0.0)
    children: Sequence[Mapping[str, Any]] = timing.get("children") or []
    for child in children:
        for key in (*CHILD_PHASES, "allreduce_s", "exit_s"):
            totals[key] += float(child.get(key) or 0.0)
        for phases in (child.get("strategies") or {}).values():
            for key in ("build_s", *LOOP_PHASES):
                totals[key] += float(phases.get(key) or 0.0)
    parent = dict(timing.get("parent") or {})
    parent["between_children_s"] = max(0.0, float(parent.get("children_s") or 0.0)
                                       - sum(float(c.get("wall_s") or 0.0) for c in children))
    for key in PARENT_PHASES:
        totals[key] = float(parent.get(key) or 0.0)
    totals["total_s"] = float(parent.get("total_s") or 0.0)
    return totals
