"""``python -m gpudiag`` runs the CLI."""

from gpudiag.procs import stdstreams

stdstreams.reopen_closed()  # first: before any import could open a file on a closed 0-2

from gpudiag.cli import run  # noqa: E402

run()
