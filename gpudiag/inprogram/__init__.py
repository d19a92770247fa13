"""The code that runs inside the user's program under `gpudiag run` (docs/run-internals.md).

Loaded by hooks/sitecustomize.py through install.py; the parent side lives in
gpudiag/run/. Rules that differ from the rest of gpudiag: import nothing early (never
TensorFlow before the program does), never raise into the program (every hook body goes
through agent.guard), cost nothing outside the windows it records. agent.py holds the
primitives every hook uses and imports no hook; install.py is the one installer; config.py
the typed configuration the parent passes in the environment; recorder.py writes
events-<pid>.jsonl.

One module per thing watched: importhook (the post-import hook), tfhooks (tf.config,
devices), strategies (and joining a cluster), functions (the step tf.function), sessions
(tf.compat.v1), tf1dist (TF1 distribution constructs: replica_device_setter, sessions,
SyncReplicasOptimizer, towers' gradients), kerashooks (fit), kerasconfig (compile, the
dtype policy), logcapture, profilewindow,
placementwindow (run metadata in bounded windows), crash, weights, usercode (which code is
the user's, by module origin), autographmap (autograph's frames back to the user's lines),
pywarnings,
devicescopes (eager tf.device scopes), classevidence (a step function's cross-entropy
ops), datasets (the tf.data calls with the program's lines), stallwatch (every thread's
stack when no step finishes), tracing (a step tf.function's traces: what each cost and
what made it), eagersteps (a training step run without tf.function), callbacktimes (the
program's own Keras callbacks timed inside fit), lossfacts (the loss, the last layer and
the labels a fit is given), inputwait (seconds inside a tf.data
iterator's next(), and its own cost on a full buffer), pydata (Keras 3's batches from a
PyDataset or a Python generator, timed), kerascalls (the program's Keras model calls
made one at a time, timed per call site), hostreads (tensors the program's own lines read
back to Python, per line), cpplevel (TensorFlow's C++ log level: gpudiag's
for TensorFlow's import, the program's otherwise), trial (`gpudiag try`'s fixes applied at
the program's own lines, and its fit stopped after the trial's steps)."""

#: gpudiag's modules outside this package that the hooks load into the user's program: the
#: contract and small pure leaves, each importing only the standard library.
#: tests/cli/test_inprogram_imports.py checks that these are all of them and that nothing
#: heavy (TensorFlow, NumPy, xprof, TensorBoard, rich, typer, pynvml) comes with them.
SHARED_MODULES = (
    "gpudiag", "gpudiag.devnames", "gpudiag.errors",
    "gpudiag.fixes", "gpudiag.fixes.cache", "gpudiag.fixes.deterministic",
    "gpudiag.fixes.jit_compile", "gpudiag.fixes.lines", "gpudiag.fixes.parallel_map",
    "gpudiag.fixes.prefetch", "gpudiag.fixes.reduce_retracing",
    "gpudiag.fixes.steps_per_execution", "gpudiag.fixes.steps_per_execution_larger",
    "gpudiag.layout", "gpudiag.layout.cluster", "gpudiag.layout.diff", "gpudiag.layout.events",
    "gpudiag.layout.loopevents",
    "gpudiag.layout.names",
    "gpudiag.layout.run", "gpudiag.layout.trial", "gpudiag.layout.units",
    "gpudiag.layout.views",
    "gpudiag.readers", "gpudiag.readers.placementlog", "gpudiag.readers.traces",
    "gpudiag.records", "gpudiag.records.tfconfig", "gpudiag.records.trial",
)
