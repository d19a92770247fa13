"""TensorBoard, TensorFlow-free: event writing (writer.py), the Custom Scalars views
(views.py), the server of `gpudiag tensorboard` (serve.py) and its --check (check.py)."""
