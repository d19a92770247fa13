"""One module per CLI command: ``run(session, ...)`` gathers evidence and adds findings.

The CLI parses options and renders; these functions do the work between, so they are
called the same way from the CLI, from tests and from `make demo`.

env, placement, memory, scaling, monitor, run (the user's own program: gpudiag/run/ holds
its parent side), explain (traces the user already has), diff (two runs compared),
tryfixes (`gpudiag try`: the advised fixes applied in-process and measured against the
program; trialread reads each trial's run directory back) and tensorboard (the server
and its --check). The cluster commands' bodies are gpudiag/cluster/local.py and
worker_cmd.py.
"""
