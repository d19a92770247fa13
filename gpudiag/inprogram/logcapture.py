"""TensorFlow's Python log, captured whatever the program's logger level lets through.

TensorFlow writes some of what matters through the Python logger ``tensorflow`` at INFO,
hidden by default: "Using MirroredStrategy with devices (...)", "Some requested devices in
`tf.distribute.Strategy` are not visible to TensorFlow", "Not using nccl allreduce", the
tf.function retracing warning. The logger instance gets its own ``isEnabledFor``,
``getEffectiveLevel`` and ``handle``: records from INFO up are recorded as ``tf_log``
events, and passed on to the logger's handlers only when the program's own level (the
one it set, or inherited from the root logger) lets them through, so what the user sees
does not change, and ``getEffectiveLevel`` still answers the program's level.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from gpudiag.inprogram.agent import patch
from gpudiag.layout import events

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

CAPTURE_LEVEL = logging.INFO
MAX_RECORDS = 2000
LOGGER_NAMES = ("tensorflow",)


def install(agent: Agent) -> None:
    for name in LOGGER_NAMES:
        _capture(agent, logging.getLogger(name))


def _capture(agent: Agent, logger: logging.Logger) -> None:
    if "handle" in vars(logger):
        return  # already captured
    cls = type(logger)
    count = [0]

    def user_level() -> int:
        return cls.getEffectiveLevel(logger)

    def is_enabled_for(level: int) -> bool:
        if logger.disabled:
            return False
        return level >= min(CAPTURE_LEVEL, user_level())

    def handle(record: logging.LogRecord) -> None:
        if record.levelno >= CAPTURE_LEVEL and count[0] < MAX_RECORDS:
            count[0] += 1
            try:
                message = record.getMessage()
            except Exception:
                message = str(record.msg)
            agent.emit(events.TfLog(logger=record.name, level=record.levelname,
                       message=message[:4000], source=f"{record.filename}:{record.lineno}",
                       shown=record.levelno >= user_level()))
        if record.levelno >= user_level():
            cls.handle(logger, record)

    patch(logger, "isEnabledFor", is_enabled_for)
    patch(logger, "handle", handle)
