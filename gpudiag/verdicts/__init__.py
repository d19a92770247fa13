"""Verdicts: pure functions from plain evidence to findings, one module per command area.

- ``common``: a probe child that failed (``child_failed``), byte counts as text.
- ``env``: `gpudiag env` (TensorFlow build, NVML inventory, CUDA_VISIBLE_DEVICES).
- ``placement``: `gpudiag placement` (placement log, default device, pinning, soft
  placement, multi-tower).
- ``memory``: `gpudiag memory` (default, growth, limit, modify-after-init).
- ``gpu_use``: NVML sampling in the parent, for `monitor` and `scaling` (every GPU used,
  what sampling cost, per-GPU numbers for evidence).
- ``scaling``: `gpudiag scaling` (efficiency and its causes, device work, learning,
  towers beside mirrored, all-reduce bandwidth) and the thresholds they use.

The rule for every module here: no TensorFlow, no NVML calls, no I/O. Each function takes
plain data (the probes' typed results from probes/results.py, parsed placement rows,
nvml.py's summary records, dicts and numbers) and returns Finding records, so every rule
is tested with plain data (tests/test_verdicts_<module>.py).
Finding ids are stable; docs/findings.md explains each and what to do about it. Import
the submodule a command needs (``from gpudiag.verdicts import env as env_verdicts``);
this package re-exports nothing.
"""
