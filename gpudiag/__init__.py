"""gpudiag: is TensorFlow really using my GPUs, and if not, why?

As a library (docs/api.md): ``load_run``, ``list_runs``, ``explain`` and ``diff`` return a
typed ``Run`` (``try_fixes``: a ``TryResult`` holding one) whose ``report.findings`` are
``Finding`` records; errors are ``GpudiagError`` (``UsageError``, ``RunDirError``: one line
each). Each public name is imported when first used (PEP 562), so ``import gpudiag`` imports
nothing else: the package root is also loaded into the user's program by `gpudiag run`, and
the library never imports the command line, Typer or rich.
"""

from __future__ import annotations

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads it so)

if TYPE_CHECKING:
    from gpudiag.api import TryResult, diff, explain, list_runs, load_run, try_fixes
    from gpudiag.errors import GpudiagError, UsageError
    from gpudiag.notebook.magic import load_ipython_extension
    from gpudiag.notebook.watch import watch
    from gpudiag.report import Finding, Report
    from gpudiag.rundir import Run, RunDirError

#: Each public name and the module it comes from: the library (gpudiag.api), the notebook's
#: watch() and ``%load_ext gpudiag`` (gpudiag.notebook), the records they return.
_PUBLIC = {
    "load_run": "gpudiag.api", "list_runs": "gpudiag.api", "explain": "gpudiag.api",
    "diff": "gpudiag.api", "try_fixes": "gpudiag.api", "TryResult": "gpudiag.api",
    "watch": "gpudiag.notebook",
    "load_ipython_extension": "gpudiag.notebook", "Run": "gpudiag.rundir",
    "RunDirError": "gpudiag.rundir", "Finding": "gpudiag.report", "Report": "gpudiag.report",
    "GpudiagError": "gpudiag.errors", "UsageError": "gpudiag.errors",
}

__all__ = ["Finding", "GpudiagError", "Report", "Run", "RunDirError", "TryResult",
           "UsageError", "diff", "explain", "list_runs", "load_ipython_extension", "load_run",
           "try_fixes", "watch"]


def __getattr__(name: str) -> object:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'gpudiag' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
