"""``tf.device`` scopes the program opens eagerly, recorded (in-program).

An eager op under ``with tf.device('/GPU:2')`` on a machine without that device runs
elsewhere when soft placement is on (TensorFlow 2's default for eager ops): the placement
log says where it ran, not what was asked. ``tf.device`` is wrapped once: a call from the
program's own code while executing eagerly is recorded (``device_scope``: the device
asked for and the line), once per device and line, at most MAX_RECORDED; every call then
goes to TensorFlow's unchanged. Scopes opened while a tf.function is traced are not
recorded here: their ops carry the device (gpudiag.inprogram.functions reads it from the graph).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import caller_frame, patch, unwrapped
from gpudiag.inprogram.usercode import is_user_file
from gpudiag.layout import events

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

MAX_RECORDED = 100


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.eager import context

    original = unwrapped(tf, "device", missing_ok=True)
    if original is None:
        return
    executing_eagerly = context.executing_eagerly
    seen: set[tuple[str, str, int]] = set()

    def record(device_name: Any) -> None:
        caller = caller_frame(2)
        code = caller.f_code
        if not isinstance(device_name, str) or not is_user_file(code.co_filename):
            return
        key = (device_name, code.co_filename, caller.f_lineno)
        if key in seen or len(seen) >= MAX_RECORDED:
            return
        seen.add(key)
        agent.emit(events.DeviceScope(device=device_name,
                   caller={"file": code.co_filename, "line": caller.f_lineno,
                           "function": code.co_name}))

    @functools.wraps(original)
    def device(device_name: Any) -> Any:
        try:
            if executing_eagerly():
                record(device_name)
        except Exception as exc:
            agent.hook_error("tf.device", exc)
        return original(device_name)

    patch(tf, "device", device, wraps=original)
