"""TensorBoard, TensorFlow-free: event writing (writer.py), the Custom Scalars views
(views.py), the HParams experiment every run of a logdir shares (hparams.py: scaling's
configurations and `run`'s processes as trials of one experiment), the bottleneck
findings' breakdown as stacked bars (breakdown.py), the server of `gpudiag tensorboard`
(serve.py) and its --check (check.py)."""
