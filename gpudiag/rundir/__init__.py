"""The one typed reader of a run directory: ``load_run(path) -> Run``.

Modules: records.py (Run and its parts: ChildFiles, Loop, StepPoint, StepBreakdown,
DeviceParts, Live), load.py (load_run, list_runs, scan_runs: the runs and the bad ones with
why, the status; opens_on: the run a viewer opens on with none named), validate.py
(report.json's fields of their types, depth, finite numbers), confine.py (read_confined /
check_confined: only regular files inside a root, of a bounded size: every reader of a
run's files uses them; inside / check_tree: a path, or a whole directory, checked to stay
inside a logdir, for the readers that serve one: `gpudiag mcp`, the dashboard), loops.py
(the step series from the TensorBoard event files), errors.py (RunDirError: exit 2, one
line), unsaved.py (unsaved_run: a report kept in memory as the same Run).

Everything that reads what a command wrote (explain, diff, `tensorboard --check`, the
dashboard, the tests) reads it through here.
"""

from __future__ import annotations

from gpudiag.rundir.confine import check_confined, read_confined
from gpudiag.rundir.errors import RunDirError
from gpudiag.rundir.load import (
    BadRun,
    answers_a_question,
    list_runs,
    load_run,
    opens_on,
    scan_runs,
)
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

__all__ = ["BadRun", "ChildFiles", "DeviceParts", "Live", "Loop", "Run", "RunDirError",
           "RunStatus", "StepBreakdown", "StepPoint", "answers_a_question", "check_confined",
           "list_runs", "load_run", "opens_on", "read_confined", "scan_runs"]
