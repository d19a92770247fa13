"""TensorBoard, TensorFlow-free: event writing (writer.py), the Custom Scalars views
(views.py), the bottleneck findings' breakdown as stacked bars (breakdown.py), the server
of `gpudiag tensorboard` (serve.py) and its --check (check.py)."""
