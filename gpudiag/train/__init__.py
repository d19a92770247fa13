"""The probe workload that ``gpudiag scaling`` trains on 1, 2, 4 ... devices.

- model.py       a small convolutional classifier (conv, pool, conv, pool, dense, logits)
                 or an MLP, built from plain ``tf.Variable``s so that the same weights can
                 be shared by towers, mirrored by MirroredStrategy, or copied into Keras.
- data.py        a deterministic, learnable synthetic image set (28x28x1, 10 classes), or
                 a Keras-style .npz / a TFRecord file, streamed through tf.data.
- towers.py      the classic in-graph replication: one tower per device, gradients
                 averaged (one mean per variable), one update.
- mirrored.py    the same step with tf.distribute.MirroredStrategy and a custom loop.
- keras_fit.py   ``model.compile`` / ``model.fit`` under MirroredStrategy.
- specs.py       the probe models' sizes and weights as plain data (NumPy), for the CLI
                 and the parent's gradient sizes.
- datafile.py    a ``--data`` file checked before any child starts, without TensorFlow.
- summaries.py   what a training run records besides the update (tf.summary).
- multiworker.py, parameter_server.py, cluster_data.py: the multi-worker (sync) and
                 parameter-server trainers of one cluster task, and their data.
- loop.py        the shared training loop: warm-up, timing, the profiler window, the
                 per-step scalars, evaluation with raw and moving-average weights,
                 the final checkpoint.

Everything here imports TensorFlow and runs inside a child process
(gpudiag/probes/training.py), never in the CLI process.
"""
