"""Device names: every spelling TensorFlow uses maps to ``/device:<TYPE>:<index>``."""

from __future__ import annotations

from gpudiag.devnames import device_name, device_type, short_device

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


def test_short_device_strips_the_job_prefix() -> None:
    assert short_device("/job:localhost/replica:0/task:0/device:GPU:1") == "/device:GPU:1"
    assert short_device("/device:CPU:0") == "/device:CPU:0"


def test_every_spelling_has_one_short_form() -> None:
    assert short_device("/GPU:1") == short_device("gpu:1") == "/device:GPU:1"
    assert short_device("/device:CPU") == short_device("/CPU:*") == "/device:CPU:0"
    assert short_device("/job:localhost/replica:0/task:0") == ""  # names no device
    assert short_device("") == ""
    assert short_device("not a device/at all") == ""


def test_short_device_agrees_with_tensorflows_device_spec() -> None:
    import tensorflow as tf
    for name in SPELLINGS:
        spec = tf.DeviceSpec.from_string(name)
        expected = ("" if spec.device_type is None
                    else f"/device:{spec.device_type.upper()}:{spec.device_index or 0}")
        assert short_device(name) == expected, name


def test_device_type_and_name() -> None:
    assert device_type("/job:localhost/replica:0/task:0/device:GPU:1") == "GPU"
    assert device_type("/cpu:0") == "CPU"
    assert device_type("") is None
    assert device_name("gpu", 3) == "/device:GPU:3"
