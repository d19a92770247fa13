"""xprof's own input-pipeline analysis of a trace (``input_pipeline_analyzer``: the step-time
graph and input analysis of TensorBoard's Profile tab), read as typed records.

xprof's converter is C++: it is run in a child process (it logs to stderr, and writes a
cache file, ``ALL_HOSTS.op_stats_v2.pb``, beside the trace it reads: the child reads a
link to the trace from a directory of its own, so a user's logdir is left as it was).
No TensorFlow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudiag.procs import group as procs
from gpudiag.readers.traces import TraceError

XPROF_TIMEOUT_S = 120


@dataclass(frozen=True)
class XprofStep:
    step: str
    step_ms: float
    device_compute_ms: float
    host_compute_ms: float
    input_ms: float
    collectives_ms: float
    launch_ms: float
    other_ms: float


@dataclass(frozen=True)
class InputOp:
    """One tf.data iterator of the input pipeline (xprof's host-side analysis)."""

    name: str  # e.g. Iterator::Root::MapAndBatch
    self_ms: float
    self_share: float  # of the input pipeline's time


@dataclass(frozen=True)
class XprofView:
    """xprof's ``input_pipeline_analyzer`` on the same trace, as it says it."""

    hardware_type: str
    conclusion: str  # e.g. "Your program is HIGHLY input-bound because 58.9% ..."
    steps: list[XprofStep]
    input_ops: list[InputOp]


_XPROF_SCRIPT = """
import sys
from xprof.convert import raw_to_tool_data as r
data, _ = r.xspace_to_tool_data([sys.argv[1]], "input_pipeline_analyzer",
                                {"use_saved_result": False})
sys.stdout.write(data if isinstance(data, str) else (data or b"").decode())
"""


def xprof_view(path: Path) -> XprofView:
    """xprof's input-pipeline analysis of one trace, run in a child process (its C++
    converter logs to stderr and writes a cache file beside the trace: the child reads a
    link to the trace in a directory of its own, and its log is dropped). Its output goes
    to files, and it is waited for in slices (gpudiag.procs.group.wait): a stop request is
    acted on at once, the child killed. Not one of gpudiag's watched groups: the analysis
    also runs in a notebook's kernel, which must not be left a watchdog process."""
    with tempfile.TemporaryDirectory(prefix="gpudiag-xprof-") as tmp:
        link = Path(tmp) / path.name
        link.symlink_to(path.resolve())
        out_path, err_path = Path(tmp) / "analysis.json", Path(tmp) / "stderr.txt"
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        with out_path.open("wb") as out, err_path.open("wb") as err:
            proc = subprocess.Popen([sys.executable, "-c", _XPROF_SCRIPT, str(link)],
                                    stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
        try:
            procs.wait(proc, XPROF_TIMEOUT_S)
        except BaseException as exc:  # its time is up, or Ctrl-C, SIGTERM
            proc.kill()
            proc.wait()
            if isinstance(exc, subprocess.TimeoutExpired):
                raise TraceError(f"xprof's input-pipeline analysis took over "
                                 f"{XPROF_TIMEOUT_S} s") from exc
            raise
        stdout = out_path.read_text(encoding="utf-8", errors="replace")
        stderr = err_path.read_text(encoding="utf-8", errors="replace")
    if proc.returncode != 0 or not stdout.strip():
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        raise TraceError(f"xprof's input-pipeline analysis failed: {tail[:300]}")
    try:
        return parse_input_pipeline(json.loads(stdout))
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise TraceError(f"xprof's input-pipeline analysis is not as expected: {exc}") from exc


def _cells(row: Mapping[str, Any]) -> list[Any]:
    return [c.get("v") if isinstance(c, dict) else c for c in row.get("c", [])]


def parse_input_pipeline(tables: list[Any]) -> XprofView:
    """xprof's ``input_pipeline_analyzer`` JSON (a list of DataTables) as an XprofView."""
    step_table = tables[1]
    ids = [c.get("id") for c in step_table["cols"]]
    props = step_table.get("p") or {}
    steps = []
    for row in step_table.get("rows") or []:
        v = dict(zip(ids, _cells(row), strict=False))
        steps.append(XprofStep(str(v["stepnum"]), float(v["stepTimeMs"]),
                               float(v["deviceComputeTimeMs"]), float(v["hostComputeTimeMs"]),
                               float(v["infeedTimeMs"]), float(v["deviceCollectivesTimeMs"]),
                               float(v["kernelLaunchTimeMs"]), float(v["otherTimeMs"])))
    input_ops = []
    if len(tables) > 2 and isinstance(tables[2], dict):
        op_ids = [c.get("id") for c in tables[2]["cols"]]
        for row in tables[2].get("rows") or []:
            v = dict(zip(op_ids, _cells(row), strict=False))
            input_ops.append(InputOp(str(v["opName"]), float(v["selfTimeInMs"]),
                                     float(v["selfTimeInPercent"])))
    input_ops.sort(key=lambda o: -o.self_ms)
    return XprofView(str(props.get("hardware_type", "")), str(props.get("input_conclusion", "")),
                     steps, input_ops[:5])
