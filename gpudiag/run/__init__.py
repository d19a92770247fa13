"""`gpudiag run -- python train.py`: diagnose the user's own, unmodified program.

Two sides, kept apart:

* **Inside the program** (the "hooks"; imported only by the program's interpreter):
  ``hooks/sitecustomize.py`` (on PYTHONPATH, chains to any other sitecustomize) calls
  :mod:`gpudiag.run.agent`, which installs an import hook (:mod:`~gpudiag.run.importhook`)
  and, once the program itself has imported tensorflow / keras / tf_keras, wraps what it
  calls: :mod:`~gpudiag.run.tfhooks` (tf.config, placement log, devices),
  :mod:`~gpudiag.run.strategies`, :mod:`~gpudiag.run.functions` (the step tf.function),
  :mod:`~gpudiag.run.sessions` (tf.compat.v1.Session), :mod:`~gpudiag.run.kerashooks`
  (Model.fit), :mod:`~gpudiag.run.logcapture` (TensorFlow's Python log),
  :mod:`~gpudiag.run.profilewindow` and :mod:`~gpudiag.run.crash`. Every observation is
  appended at once to an events file (:mod:`~gpudiag.run.recorder`).

* **The parent** (no TensorFlow, ever): :mod:`~gpudiag.run.command` runs the program,
  passes its output through (:mod:`~gpudiag.run.streams`), samples NVML, then reads the
  events (:mod:`~gpudiag.run.events`) into typed records (:mod:`~gpudiag.run.records`)
  for the verdicts (gpudiag.run_verdicts) and writes TensorBoard
  (:mod:`~gpudiag.run.tbwrite`).

This package's ``__init__`` imports nothing, so the hooks load only what they use.
"""
