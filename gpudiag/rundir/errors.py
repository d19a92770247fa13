"""The error of a path that is not a run directory gpudiag can read (exit 2, one line)."""

from __future__ import annotations

from gpudiag.errors import UsageError


class RunDirError(UsageError):
    """Not a gpudiag run directory (or one written by a newer gpudiag): exit 2."""
