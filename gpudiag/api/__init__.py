"""gpudiag as a library: ``load_run``, ``list_runs``, ``explain`` and ``diff`` return the typed
``Run`` (gpudiag.rundir) that the command line and the dashboard read, with the findings as
gpudiag.report.Finding records; ``try_fixes`` returns a TryResult holding one, with each fix
it measured (docs/api.md).

Modules: calls.py (the four functions), trying.py (``try_fixes``: `gpudiag try`). The
package root re-exports them (``gpudiag.explain``, ...), imported on first use; nothing here
imports the command line, Typer or rich. Errors are gpudiag's own (gpudiag.errors:
UsageError, RunDirError, WriteFailed): one line each, the same the CLI prints.
"""

from __future__ import annotations

from gpudiag.api.calls import diff, explain, list_runs, load_run
from gpudiag.api.trying import TryResult, try_fixes

__all__ = ["TryResult", "diff", "explain", "list_runs", "load_run", "try_fixes"]
