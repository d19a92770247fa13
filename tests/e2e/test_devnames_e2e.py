"""Device names: every spelling TensorFlow uses maps to ``/device:<TYPE>:<index>``."""

from __future__ import annotations

from gpudiag.devnames import short_device

SPELLINGS = [
    "/job:localhost/replica:0/task:0/device:GPU:1",
    "/job:worker/replica:0/task:1/device:CPU:3",
    "/device:CPU:0",
    "/device:gpu:2",
    "/GPU:1",
    "GPU:1",
    "/CPU:*",
    "CPU",
    "/job:localhost/replica:0/task:0",
    "/job:localhost",
    "",
]


def test_short_device_agrees_with_tensorflows_device_spec() -> None:
    import tensorflow as tf
    for name in SPELLINGS:
        spec = tf.DeviceSpec.from_string(name)
        expected = ("" if spec.device_type is None
                    else f"/device:{spec.device_type.upper()}:{spec.device_index or 0}")
        assert short_device(name) == expected, name
