"""TensorFlow device names in the one form gpudiag writes and compares: ``/device:GPU:1``.

TensorFlow spells one device several ways: the placement log and ``tensor.device`` give
``/job:localhost/replica:0/task:0/device:GPU:1``, users write ``/GPU:1``, ``GPU:1`` or
``/device:gpu:1`` (``tf.device`` accepts any case), and a graph node may name no device
at all (``''`` or just ``/job:localhost``). ``short_device`` maps them all to the short
form, the same answer ``tf.DeviceSpec.from_string`` gives, without TensorFlow, so the
parent process and verdicts can compare names from any source.
"""

from __future__ import annotations

import re

_TYPE_INDEX = re.compile(r"^(?:device:)?(?P<type>[A-Za-z_]+)(?::(?P<index>\d+|\*))?$")
_JOB_PARTS = ("job:", "replica:", "task:")


def device_name(device_type: str, index: int) -> str:
    """``("gpu", 1)`` -> ``/device:GPU:1``."""
    return f"/device:{device_type.upper()}:{index}"


def short_device(name: str) -> str:
    """Any spelling of a device -> ``/device:<TYPE>:<index>``; '' when it names no device.

    ``/job:localhost/replica:0/task:0/device:GPU:1``, ``/GPU:1``, ``gpu:1`` ->
    ``/device:GPU:1``; a device with no index (``/device:CPU``, ``/CPU:*``) is index 0,
    as TensorFlow places it.
    """
    for part in reversed(name.split("/")):
        if not part or part.startswith(_JOB_PARTS):
            continue
        m = _TYPE_INDEX.match(part)
        if m is None:
            return ""
        index = m["index"]
        return device_name(m["type"], int(index) if index and index != "*" else 0)
    return ""


def device_type(name: str) -> str | None:
    """``GPU``, ``CPU`` ... of any spelling of a device; None when it names none."""
    short = short_device(name)
    return short.split(":")[1] if short else None
