"""Python warnings from TensorFlow, Keras and tf_keras, recorded (in-program).

Keras says some mistakes only as a ``UserWarning`` ("`sparse_categorical_crossentropy`
received `from_logits=True`, but the `output` argument was produced by a Softmax
activation", "Gradients do not exist for variables ..."). Python shows every warning
through ``warnings._showwarnmsg`` (both the C and the Python ``warnings.warn`` call it,
after the filters and the once-per-location registry have let the warning through), which
then calls ``warnings.showwarning`` (the program's own, if it replaced it, or
``logging.captureWarnings``'s) or prints. gpudiag wraps ``_showwarnmsg`` and calls the
original with the same message: what the program sees and prints does not change, a
warning the program's filters hide is not recorded either (it was not shown).

Recorded (``py_warning`` events, at most MAX_RECORDED distinct ones): warnings whose code
location is in the tensorflow, keras or tf_keras packages (by the origin of the imported
modules), with the innermost frame of the program's own code at that moment (the line
whose call led Keras to warn).
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram import autographmap
from gpudiag.inprogram.agent import caller_frame, patch, unwrapped
from gpudiag.inprogram.usercode import is_user_file
from gpudiag.layout import events

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

PACKAGES = ("tensorflow", "keras", "tf_keras")
MAX_RECORDED = 50
MAX_USER_DEPTH = 200


def _package_dirs() -> tuple[str, ...]:
    out = []
    for name in PACKAGES:
        for path in list(getattr(sys.modules.get(name), "__path__", None) or [])[:4]:
            if isinstance(path, str):
                out.append(os.path.realpath(path))
    return tuple(out)


def _from_packages(filename: str) -> bool:
    path = os.path.realpath(filename)
    return any(path.startswith(d + os.sep) for d in _package_dirs())


def _user_frame() -> dict[str, Any] | None:
    """The innermost frame of the program's code (autograph's converted code mapped back
    to the program's line, as for a crash)."""
    frame = caller_frame(2)
    maps: dict[str, Any] = {}
    for _ in range(MAX_USER_DEPTH):
        if frame is None:
            return None
        code = frame.f_code
        if autographmap.is_generated(code.co_filename):
            mapped = autographmap.origin(frame, frame.f_lineno, maps)
            if mapped is not None and is_user_file(mapped["file"]):
                return {k: mapped[k] for k in ("file", "line", "function")}
        elif is_user_file(code.co_filename):
            return {"file": code.co_filename, "line": frame.f_lineno,
                    "function": code.co_name}
        frame = frame.f_back
    return None


def install(agent: Agent) -> None:
    original = unwrapped(warnings, "_showwarnmsg", missing_ok=True)
    if original is None:
        return
    seen: set[tuple[str, str, str, int]] = set()

    def record(msg: Any) -> None:
        key = (msg.category.__name__, str(msg.message)[:500], str(msg.filename),
               int(msg.lineno or 0))
        if key in seen or len(seen) >= MAX_RECORDED or not _from_packages(str(msg.filename)):
            return
        seen.add(key)
        agent.emit(events.PyWarning(category=key[0], message=str(msg.message)[:4000],
                   file=key[2], line=key[3], user_frame=_user_frame()))

    def _showwarnmsg(msg: Any) -> None:
        try:
            record(msg)
        except Exception as exc:
            agent.hook_error("recording a Python warning", exc)
        original(msg)

    patch(warnings, "_showwarnmsg", _showwarnmsg, wraps=original)
