"""Verdicts: pure functions from plain evidence to findings, one module per command area.

- ``common``: a probe child that failed (``child_failed``), byte counts as text.
- ``env``: `gpudiag env` (TensorFlow build, NVML inventory, CUDA_VISIBLE_DEVICES).
- ``placement``: `gpudiag placement` (placement log, default device, pinning, soft
  placement, multi-tower).
- ``memory``: `gpudiag memory` (default, growth, limit, modify-after-init).
- ``gpu_use``: NVML sampling in the parent, for `monitor` and `scaling` (every GPU used,
  what sampling cost, per-GPU numbers for evidence).
- ``scaling``: `gpudiag scaling` (efficiency and its causes, device work, towers beside
  mirrored, all-reduce bandwidth) and the thresholds they use; ``scaling_learning`` its
  learning.
- ``scaling_bottleneck``: scaling's and the cluster's bottleneck per configuration, and
  where the speed-up over one device or worker went.
- ``bottleneck``: why a step is slow (run, explain, scaling, cluster): the finding;
  ``step_parts`` the devices judged and their mean step; ``step_causes`` its causes, each
  cause's text and fix made together (GPU-, copy-, communication-bound ...; ``input_causes``
  input-bound, ``call_causes`` host-, launch- and overhead-bound) with the program's facts
  (ProgramFacts); ``pipeline`` the fixes at the program's tf.data lines; ``gpu_fill``
  (NVML's utilization against GPM's SM utilization) and ``allreduce`` (gradient bytes,
  achieved bandwidth).
- ``whatif``: the step time each bottleneck's fix should give (``evidence.predicted``),
  with ``whatif_input`` (the input-bound model, the pipeline's fixes by name) and
  ``prediction`` (a prediction's record, its interval, the machine it is made on).
- ``diff``: `gpudiag diff A B`, judged from ``diff_steptime`` (step time with intervals),
  ``diff_bottleneck`` (parts and bottleneck before and after, predicted against measured)
  and ``diff_learning`` (the loss at matched steps), with ``stats`` (the median's and a ratio's
  distribution-free intervals, also the benchmarks').
- ``trial``: `gpudiag try` (each fix's measured B/A, its interval, the prediction), with
  ``trial_loss`` (the loss at matching steps of a fix that can change results) and
  ``tried`` (a try run read back in words for the tab's card and MCP).
- ``cluster``: `scaling --workers` and `worker` (the cluster formed, every task worked).
- ``run``: the package of `gpudiag run`'s verdicts (its docstring lists them).
- ``headline``: the short verdict every command ends with, from a report's findings;
  ``gpus_seen`` which GPUs TensorFlow listed and why none, ``compared`` B against A in
  words (the ratio the right way round, whether the prediction held), ``fix_said`` what
  to change, where, and the step it should give.

The rule for every module here: no TensorFlow, no NVML calls, no I/O. Each function takes
plain data (the typed records of gpudiag.records, parsed placement rows,
nvml.py's summary records, dicts and numbers) and returns Finding records, so every rule
is tested with plain data (tests/unit/test_verdicts_<module>.py).
Finding ids are stable; docs/findings.md explains each and what to do about it. Import
the submodule a command needs (``from gpudiag.verdicts import env as env_verdicts``);
this package re-exports nothing.
"""
