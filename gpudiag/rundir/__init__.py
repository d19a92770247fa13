"""The one typed reader of a run directory: ``load_run(path) -> Run``.

Modules: records.py (Run and its parts: ChildFiles, Loop, StepPoint, StepBreakdown,
DeviceParts, Live), load.py (load_run, list_runs, the status), loops.py (the step series
from the TensorBoard event files), errors.py (RunDirError: exit 2, one line), unsaved.py
(unsaved_run: a report kept in memory as the same Run), confine.py (inside, check_tree: a
path checked to stay inside a logdir, for the readers that serve one: `gpudiag mcp`, the
dashboard).

Everything that reads what a command wrote (explain, diff, `tensorboard --check`, the
dashboard, the tests) reads it through here.
"""

from __future__ import annotations

from gpudiag.rundir.errors import RunDirError
from gpudiag.rundir.load import list_runs, load_run
from gpudiag.rundir.records import (
    ChildFiles,
    DeviceParts,
    Live,
    Loop,
    Run,
    RunStatus,
    StepBreakdown,
    StepPoint,
)

__all__ = ["ChildFiles", "DeviceParts", "Live", "Loop", "Run", "RunDirError", "RunStatus",
           "StepBreakdown", "StepPoint", "list_runs", "load_run"]
