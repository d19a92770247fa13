"""The typed evidence of the finding families whose evidence readers use (the tab, diff,
the terminal's verdict): one record per family's ``evidence`` name in gpudiag.layout.families,
decoded from report.json's plain ``evidence`` object by ``from_dict``, which checks the
fields it reads (a ValueError naming the field when one is of the wrong kind).

- ``Bottleneck`` (run/explain/scaling/cluster.bottleneck): the judged step, each device's
  mean step split into STEP_PARTS (``DeviceParts``), the causes (the first is the
  bottleneck), the trace and what-if's prediction.
- ``DeviceLanes`` (run.every-device-used): TensorFlow's devices, the strategy's, the ops
  and busy time on each, the idle ones, NVML's GPUs.
- ``Learning`` (run.learning): each training loop's loss from start to end and what it
  says (``LearningLoop``).
- ``DiffStep`` (diff.step-time.<loop>): A's and B's median step with their intervals, B/A
  with its interval and the interval's level, the verdict.
- ``Scaling`` (scaling.efficiency.<strategy>): the 1-device base and each device count's
  throughput, speed-up and efficiency.
- ``GpuUse`` (monitor/run.every-gpu-used): NVML's per-GPU numbers, the idle, working and
  lost GPUs.
- ``TriedFix`` (try.fix.<fix>): one fix measured against the program as written: B/A with
  its interval, the change, the prediction beside it.

DiffStep, Scaling and TriedFix (the findings that compare) are gpudiag.layout.compared's;
each field is read and checked by gpudiag.layout.evidencefields.

A finding of the family whose evidence lacks a field (a skip: no trace, no NVML) decodes
with that field empty, never a guess. ``decode(finding)`` gives a finding's record (None:
its family declares none). Pure: imports gpudiag.layout's families, units and the two
modules above only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpudiag.layout.compared import DiffStep, Scaling, TriedFix
from gpudiag.layout.evidencefields import (
    dur,
    integer,
    integers,
    items,
    num,
    num_map,
    obj,
    text,
    texts,
)
from gpudiag.layout.families import family_of

#: The parts a step's time is split into, declared once, in the order they add up (the
#: picture's bars bottom to top, the tab's, diff's): the device computing, collectives,
#: host-device copies with no kernel running, waiting for input, the host's own work
#: (Python, dispatch), nothing at all. Each is ``<part>_s`` in a bottleneck's evidence.
STEP_PARTS = ("compute", "communication", "copy", "input", "host", "idle")
#: The row of the host's own threads (ops no placement names: gpudiag.readers.stepbreakdown).
HOST_ROW = "/host:CPU"
#: The parts in which a device worked; in the rest it waited (for another device, tf.data,
#: the host). The host row's ``host`` part is its own work: the Python and the dispatch.
BUSY_PARTS = ("compute", "communication", "copy")


# ------------------------------------------------------------------------- Bottleneck
@dataclass(frozen=True)
class DeviceParts:
    """One device's mean profiled step, in seconds: STEP_PARTS add up to ``period_s``
    (gpudiag.readers.stepbreakdown); ``host_between_calls_s`` is the part of ``host_s``
    the program's Python took between the step calls."""

    device: str
    period_s: float
    compute_s: float = 0.0
    communication_s: float = 0.0
    copy_s: float = 0.0
    input_s: float = 0.0
    host_s: float = 0.0
    idle_s: float = 0.0
    host_between_calls_s: float = 0.0

    def part(self, name: str) -> float:
        """``name`` (one of STEP_PARTS) in seconds."""
        if name not in STEP_PARTS:
            raise KeyError(name)
        value: float = getattr(self, f"{name}_s")
        return value

    def parts(self) -> dict[str, float]:
        return {p: self.part(p) for p in STEP_PARTS}

    def busy_parts(self) -> tuple[str, ...]:
        """The parts in which this device worked (BUSY_PARTS; the host row: and host)."""
        return (*BUSY_PARTS, "host") if self.device == HOST_ROW else BUSY_PARTS

    def busy_share(self) -> float | None:
        """Its busy parts' share of the step, from the numbers its bar is drawn with."""
        if self.period_s <= 0:
            return None
        return sum(self.part(p) for p in self.busy_parts()) / self.period_s

    def scaled(self, factor: float) -> DeviceParts:
        """Every time times ``factor`` (a call of N steps per step: 1 / N)."""
        return DeviceParts(self.device, self.period_s * factor,
                           **{f"{p}_s": self.part(p) * factor for p in STEP_PARTS},
                           host_between_calls_s=self.host_between_calls_s * factor)

    @classmethod
    def from_dict(cls, device: str, data: Any) -> DeviceParts:
        where = f"parts_s.{device}."
        d = obj(data, where.rstrip("."))
        period = dur(d, "period_s", where, required=True)
        assert period is not None

        def part(name: str) -> float:
            return num(d, f"{name}_s", where) or 0.0
        return cls(device, period, **{f"{p}_s": part(p) for p in STEP_PARTS},
                   host_between_calls_s=part("host_between_calls"))


@dataclass(frozen=True)
class Bottleneck:
    """A bottleneck finding's evidence (gpudiag.verdicts.bottleneck): the judged mean
    step (None: no complete step), each device's parts, the causes in order, the trace it
    was read from, and what-if's prediction (``predicted``: its plain record, with
    ``step_s`` None and ``why`` where it has no number)."""

    step_s: float | None
    devices: dict[str, DeviceParts] = field(default_factory=dict)
    causes: tuple[str, ...] = ()
    trace: str | None = None
    predicted: dict[str, Any] | None = None
    shares: dict[str, float] = field(default_factory=dict)
    # the program's tf.data calls (method, args, where), as the finding recorded them
    dataset_calls: tuple[dict[str, Any], ...] = ()

    @property
    def bottleneck(self) -> str | None:
        return self.causes[0] if self.causes else None

    @classmethod
    def from_dict(cls, data: Any) -> Bottleneck:
        d = obj(data, "evidence")
        parts = obj(d.get("parts_s") or {}, "parts_s")
        devices = {str(k): DeviceParts.from_dict(str(k), v) for k, v in parts.items()
                   if not (isinstance(v, Mapping) and v.get("period_s") is None)}
        predicted = d.get("predicted")
        if predicted is not None:
            predicted = dict(obj(predicted, "predicted"))
            dur(predicted, "step_s", "predicted.")
        calls = d.get("dataset_calls") or ()
        if not isinstance(calls, list | tuple):
            raise ValueError("evidence.dataset_calls is not a list")
        return cls(dur(d, "step_s", ""), devices, texts(d, "causes", ""),
                   text(d, "trace", ""), predicted, num_map(d, "shares", ""),
                   tuple(dict(c) for c in calls if isinstance(c, Mapping)))


# ------------------------------------------------------------------------ DeviceLanes
@dataclass(frozen=True)
class DeviceLanes:
    """run.every-device-used's evidence: TensorFlow's logical devices, the strategy's,
    ops placed and trace busy seconds per device, the idle ones, NVML's GPUs (plain
    gpu_use.gpu_numbers records; empty: not sampled) and the idle NVML indices."""

    logical_devices: tuple[str, ...] = ()
    strategy_devices: tuple[str, ...] = ()
    ops_by_device: dict[str, float] = field(default_factory=dict)
    trace_busy_s: dict[str, float] = field(default_factory=dict)
    idle: tuple[str, ...] = ()
    created_by_program: tuple[str, ...] = ()
    nvml_gpus: tuple[dict[str, Any], ...] = ()
    nvml_idle: tuple[int, ...] = ()

    @classmethod
    def from_dict(cls, data: Any) -> DeviceLanes:
        d = obj(data, "evidence")
        return cls(texts(d, "logical_devices", ""), texts(d, "strategy_devices", ""),
                   num_map(d, "ops_by_device", ""), num_map(d, "trace_busy_s", ""),
                   texts(d, "idle", ""), texts(d, "created_by_program", ""),
                   _gpu_records(d, "nvml_gpus"), integers(d, "nvml_idle", ""))


# --------------------------------------------------------------------------- Learning
@dataclass(frozen=True)
class LearningLoop:
    """One training run's loss: where it started (its first loss, the mean of its first
    few) and ended, over how many steps, and what that says."""

    series: str
    steps: int | None
    first_loss: float | None
    start_loss: float | None
    last_loss: float | None
    num_classes: int | None = None
    stuck_at_ln_classes: int | None = None
    softmax_floor: float | None = None
    accuracy: float | None = None
    accuracy_at_chance: bool = False
    weights_moved: bool | None = None
    # each recorded loss is Keras's running mean over its epoch so far (a fit), and the
    # steps where an epoch after the first began (where that mean starts again)
    running_mean: bool = False
    epoch_starts: tuple[int, ...] = ()

    @classmethod
    def from_dict(cls, data: Any, i: int) -> LearningLoop:
        where = f"loops[{i}]."
        d = obj(data, where.rstrip("."))
        moved = d.get("weights_moved")
        if moved is not None and not isinstance(moved, bool):
            raise ValueError(f"evidence field {where}weights_moved is not true or false")
        return cls(text(d, "series", where) or "", integer(d, "steps", where),
                   num(d, "first_loss", where), num(d, "start_loss", where),
                   num(d, "last_loss", where), integer(d, "num_classes", where),
                   integer(d, "stuck_at_ln_classes", where), num(d, "softmax_floor", where),
                   num(d, "accuracy", where), bool(d.get("accuracy_at_chance")), moved,
                   d.get("running_mean") is True, integers(d, "epoch_starts", where))


@dataclass(frozen=True)
class Learning:
    """run.learning's evidence: each training run judged (none: no loop had enough
    losses)."""

    loops: tuple[LearningLoop, ...] = ()

    @classmethod
    def from_dict(cls, data: Any) -> Learning:
        d = obj(data, "evidence")
        return cls(tuple(LearningLoop.from_dict(x, i)
                         for i, x in enumerate(items(d, "loops", ""))))


# ----------------------------------------------------------------------------- GpuUse
@dataclass(frozen=True)
class GpuUse:
    """<cmd>.every-gpu-used's evidence: NVML's per-GPU numbers (gpu_use.gpu_numbers) and
    the GPUs judged idle, working, lost, or without a utilization reading."""

    idle_threshold_percent: float | None = None
    gpus: tuple[dict[str, Any], ...] = ()
    idle_indices: tuple[int, ...] = ()
    worked_indices: tuple[int, ...] = ()
    lost_indices: tuple[int, ...] = ()
    no_utilization_indices: tuple[int, ...] = ()
    # the p95's interval across the idle threshold (gpu_use.p95_against): one warn
    near_indices: tuple[int, ...] = ()

    @classmethod
    def from_dict(cls, data: Any) -> GpuUse:
        d = obj(data, "evidence")
        gpus = _gpu_records(d, "gpus")
        for i, g in enumerate(gpus):
            num(g, "util_mean_percent", f"gpus[{i}].")
        return cls(num(d, "idle_threshold_percent", ""), gpus,
                   integers(d, "idle_indices", ""), integers(d, "worked_indices", ""),
                   integers(d, "lost_indices", ""), integers(d, "no_utilization_indices", ""),
                   integers(d, "near_indices", ""))


def _gpu_records(d: Mapping[str, Any], key: str) -> tuple[dict[str, Any], ...]:
    """NVML's per-GPU records (gpu_use.gpu_numbers), each an object with an int index."""
    gpus = items(d, key, "")
    for i, g in enumerate(gpus):
        integer(obj(g, f"{key}[{i}]"), "index", f"{key}[{i}].")
    return tuple(dict(g) for g in gpus)


Evidence = Bottleneck | DeviceLanes | Learning | DiffStep | Scaling | GpuUse | TriedFix

#: The records by the name gpudiag.layout.families gives them.
TYPES: dict[str, Any] = {"Bottleneck": Bottleneck, "DeviceLanes": DeviceLanes,
                         "Learning": Learning, "DiffStep": DiffStep, "Scaling": Scaling,
                         "GpuUse": GpuUse, "TriedFix": TriedFix}


def decode(finding_id: str, evidence: Mapping[str, Any]) -> Evidence | None:
    """The typed evidence of a finding (None: its family declares no evidence type); a
    ValueError naming the finding and the field when the evidence does not fit."""
    family = family_of(finding_id)
    if family is None or family.evidence is None:
        return None
    try:
        record: Evidence = TYPES[family.evidence].from_dict(evidence)
    except ValueError as exc:
        raise ValueError(f"finding {finding_id}: {exc}") from None
    return record

