"""Typed records that cross a process boundary, below everything that reads or writes them.

A probe child, a cluster task's child and the code inside the user's program write these;
the parent's verdicts, orchestration and commands read them back. Nothing here imports
TensorFlow, NVML or any gpudiag package above the shared leaves, so the children, the
in-program agent and the verdicts can all import them without an import loop.

- ``devices``: DeviceSetup (the devices a probe child set up) and the device defaults.
- ``training``: the scaling workload's config and result (training, all-reduce sweep).
- ``results``: the env, placement and memory probes' results.
- ``cluster``: one cluster task's config and result (WorkerConfig, WorkerResult).
- ``tfconfig``: TF_CONFIG parsed and checked; local clusters on 127.0.0.1.
- ``trial``: one fix `gpudiag try` has the hooks apply (TrialFix).
- ``run``: what the hooks saw in one process of the user's program (ProcessObservation
  and its parts), read back from the event protocol by gpudiag.run.events; ``callsites``
  its Keras calls and tensor reads, per line of its own.
"""
