"""The code that runs inside the user's program under `gpudiag run` (docs/run.md).

Loaded by hooks/sitecustomize.py through install.py; the parent side lives in
gpudiag/run/. Rules that differ from the rest of gpudiag: import nothing early (never
TensorFlow before the program does), never raise into the program (every hook body goes
through agent.guard), cost nothing outside the windows it records. agent.py holds the
primitives every hook uses and imports no hook; install.py is the one installer."""
