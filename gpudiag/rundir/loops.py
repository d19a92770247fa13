"""The step series of a run directory, read from its TensorBoard event files with
TensorBoard's own reader (EventAccumulator's ``Tensors``: every gpudiag scalar is a
scalar-plugin tensor, gpudiag/layout).

`run`: each program-<pid>/ run; its loop with the most steps has the TAG_RUN_* tags, any
other loop the same tags under ``program/<loop>/`` (gpudiag.run.tbwrite). The loop's
name is the one the report's run.throughput / run.learning evidence gives it, and so are
its batch and its steps per call (Keras fit's steps_per_execution: the series is already
per step, gpudiag.run.tbwrite divides each call's time by its steps).
`scaling` (and a `worker`'s configuration): each <strategy>-<n>dev/ run's TAG_TRAIN_*
tags, named by the configuration. `explain`: each trace's profiled steps (the report's
``data.explain``: a trace has no step series of its own).

TensorBoard's reader reaches files through ``tensorboard.compat.tf``, which imports the
whole of TensorFlow when it is installed (seconds, and its log lines on stderr); where
TensorFlow is not imported yet, TensorBoard's own switch to its TensorFlow stub
(``tensorboard.compat.notf``) is set first, so reading a run costs a fraction of a second.
"""

from __future__ import annotations

import os
import re
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.rundir.confine import check_confined, resolve_inside
from gpudiag.rundir.records import Loop, Run, StepPoint

Scalars = dict[str, dict[int, float]]  # tag -> step -> value


def tensorboard_without_tensorflow() -> None:
    """TensorBoard's reader on its TensorFlow stub where TensorFlow is not imported yet."""
    if "tensorflow" not in sys.modules and "tensorboard.compat.notf" not in sys.modules:
        sys.modules["tensorboard.compat.notf"] = types.ModuleType("tensorboard.compat.notf")


def import_reader() -> None:
    """Import TensorBoard's event reader now, not at the first read (a second, more on a
    loaded machine): MCP's worker does it at its start, which no call's limit counts."""
    tensorboard_without_tensorflow()
    import tensorboard.backend.event_processing.event_accumulator
    import tensorboard.util.tensor_util  # noqa: F401


def read_scalars(tb_run: Path, run_dir: Path | None = None) -> Scalars:
    """Every scalar of one TensorBoard run directory (its own event files, not its
    subdirectories'), by tag and step. A path that is not UTF-8 (TensorBoard's file layer
    encodes every path as UTF-8) is read through its open directory's /proc/self/fd name.
    RunDirError (one line) when ``tb_run`` leads out of the run directory ``run_dir``
    (given by every reader of a run: a name from the report's content, a symlinked
    program-* run), or when an event file is not a regular file inside ``tb_run`` (a FIFO
    would block TensorBoard's reader for ever): gpudiag.rundir.confine."""
    if run_dir is not None:
        tb_run = resolve_inside(tb_run, run_dir)
    found = list(tb_run.glob("*tfevents*"))  # what TensorBoard's reader opens
    if not found:
        return {}
    for events in found:
        check_confined(events, tb_run, max_bytes=2**63)  # a long job's files may be large
    try:
        str(tb_run).encode("utf-8")
    except UnicodeEncodeError:
        try:
            fd = os.open(tb_run, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return {}
        try:
            held = Path(f"/proc/self/fd/{fd}")
            return _read_scalars(held) if held.is_dir() else {}
        finally:
            os.close(fd)
    return _read_scalars(tb_run)


def _read_scalars(tb_run: Path) -> Scalars:
    tensorboard_without_tensorflow()
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(tb_run), size_guidance={"tensors": 0})
    acc.Reload()
    out: Scalars = {}
    for tag in acc.Tags()["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
            continue
        out[tag] = {e.step: float(tensor_util.make_ndarray(e.tensor_proto))
                    for e in acc.Tensors(tag)}
    return out


def _series(name: str, tb_run: str, scalars: Scalars, step_tag: str, loss_tag: str,
            eps_tag: str, batch: int | None, seen_tag: str | None = None) -> Loop | None:
    times, losses, eps = (scalars.get(step_tag, {}), scalars.get(loss_tag, {}),
                          scalars.get(eps_tag, {}))
    seen = scalars.get(seen_tag, {}) if seen_tag else {}
    steps = sorted(set(times) | set(losses) | set(seen))
    if not steps:
        return None
    return Loop(name, tb_run, tuple(StepPoint(s, times.get(s), losses.get(s), eps.get(s))
                                    for s in steps), batch)


_SERIES_TAGS = {layout.TAG_RUN_STEP_TIME, layout.TAG_RUN_LOSS, layout.TAG_RUN_STEP}


def _loop_labels(run: Run) -> list[dict[str, Any]]:
    for fid in ("run.throughput", "run.learning"):
        f = run.finding(fid)
        if f and f["evidence"].get("loops"):
            return [lp for lp in f["evidence"]["loops"] if isinstance(lp, dict)]
    return []


def _program_loops(run: Run) -> dict[str, Loop]:
    labelled = _loop_labels(run)
    batch = {lp.get("series"): lp.get("batch_size") for lp in labelled}
    per_call = {lp.get("series"): lp.get("steps_per_call") for lp in labelled}
    runs = sorted(p for p in run.path.glob(f"{layout.RUN_TB_PREFIX}*") if p.is_dir())
    out: dict[str, Loop] = {}
    for tb in runs:
        scalars = read_scalars(tb, run.path)
        prefixes = sorted({p[0] for t in scalars if (p := layout.parse_loop_tag(t)) and p[0]
                           and layout.TAG_PROGRAM_ROOT + p[1] in _SERIES_TAGS})
        by_slug = {layout.loop_prefix(str(lp.get("series"))): str(lp.get("series"))
                   for lp in labelled}
        unprefixed = [str(lp.get("series")) for lp in labelled
                      if layout.loop_prefix(str(lp.get("series"))) not in prefixes]
        for prefix in ["", *prefixes]:
            name = by_slug.get(prefix, prefix) if prefix else \
                (unprefixed[0] if unprefixed else "program")
            loop = _series(name, tb.name, scalars,
                           layout.loop_tag(layout.TAG_RUN_STEP_TIME, prefix),
                           layout.loop_tag(layout.TAG_RUN_LOSS, prefix),
                           layout.loop_tag(layout.TAG_RUN_EXAMPLES_PER_S, prefix),
                           batch.get(name), layout.loop_tag(layout.TAG_RUN_STEP, prefix))
            if loop is not None:
                key = name if len(runs) == 1 else f"{name} [{tb.name}]"
                n = per_call.get(name)
                out[key] = Loop(key, loop.tb_run, loop.steps, loop.batch_size,
                                n if isinstance(n, int) and n > 1 else 1)
    return out


def _config_loops(run: Run, names: Sequence[str]) -> dict[str, Loop]:
    out: dict[str, Loop] = {}
    configs = ((run.report.data.get("scaling") or {}).get("configs") or {})
    configs = configs if isinstance(configs, dict) else {}
    for name in names:
        tb = resolve_inside(run.path / name, run.path)  # a name from the report's content
        if not tb.is_dir():
            continue
        config = configs.get(name)
        batch = config.get("global_batch") if isinstance(config, dict) else None
        loop = _series(name, name, read_scalars(tb, run.path), layout.TAG_TRAIN_STEP_S,
                       layout.TAG_TRAIN_LOSS, layout.TAG_TRAIN_EXAMPLES_PER_S,
                       batch if isinstance(batch, int) else None)
        if loop is not None:
            out[name] = loop
    return out


_CONFIG_RUN = re.compile(r"^[a-z_]+-\d+dev$")


def _explain_loops(run: Run) -> dict[str, Loop]:
    """`explain`: each trace's profiled steps (start to the next start) on its device
    with the most steps (a placed device before the row of unplaced ops)."""
    out: dict[str, Loop] = {}
    traces = (run.report.data.get("explain") or {}).get("traces") or []
    for t in traces:
        devices = sorted(t.get("devices") or [], key=lambda d: (
            -len(d.get("steps") or []), d.get("device") == "/host:CPU"))
        if not devices or not devices[0].get("steps"):
            continue
        name = Path(str(t.get("path"))).name if len(traces) > 1 else "profiled steps"
        steps = tuple(StepPoint(i + 1, None if s.get("period_s") is None
                                else float(s["period_s"]), None, None)
                      for i, s in enumerate(devices[0]["steps"]))
        out[name] = Loop(name, str(t.get("path")), steps)
    return out


def read_loops(run: Run) -> dict[str, Loop]:
    """Every step series of ``run`` by loop name (empty: the run has none)."""
    if run.command in ("run", "monitor"):
        return _program_loops(run)
    if run.command == "explain":
        return _explain_loops(run)
    configs = (run.report.data.get("scaling") or {}).get("configs") or {}
    names = [str(c) for c in configs] or sorted(p.name for p in run.path.iterdir()
                              if p.is_dir() and _CONFIG_RUN.match(p.name))
    return _config_loops(run, names)
