"""Device names: every spelling TensorFlow uses maps to ``/device:<TYPE>:<index>``."""

from __future__ import annotations

from gpudiag.devnames import device_name, device_type, short_device


def test_short_device_strips_the_job_prefix() -> None:
    assert short_device("/job:localhost/replica:0/task:0/device:GPU:1") == "/device:GPU:1"
    assert short_device("/device:CPU:0") == "/device:CPU:0"


def test_every_spelling_has_one_short_form() -> None:
    assert short_device("/GPU:1") == short_device("gpu:1") == "/device:GPU:1"
    assert short_device("/device:CPU") == short_device("/CPU:*") == "/device:CPU:0"
    assert short_device("/job:localhost/replica:0/task:0") == ""  # names no device
    assert short_device("") == ""
    assert short_device("not a device/at all") == ""


def test_device_type_and_name() -> None:
    assert device_type("/job:localhost/replica:0/task:0/device:GPU:1") == "GPU"
    assert device_type("/cpu:0") == "CPU"
    assert device_type("") is None
    assert device_name("gpu", 3) == "/device:GPU:3"
