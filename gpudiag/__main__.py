"""``python -m gpudiag`` runs the CLI."""

from gpudiag.cli import run

run()
