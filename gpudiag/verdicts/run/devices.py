"""Device use the graphs do not show (pure; used by gpudiag.verdicts.run.process):

- eager ``tf.device`` scopes the program opened (gpudiag.inprogram.devicescopes) on devices
  that do not exist: with soft placement on (TensorFlow 2's default) their ops ran
  elsewhere silently, the GPU guide's own "invalid GPU" example;
- logical devices the program created itself (``set_logical_device_configuration``):
  each one must do work, or it was created for nothing.
"""

from __future__ import annotations

from typing import Any

from gpudiag.records.run import ProcessObservation

LOGICAL_APIS = ("set_logical_device_configuration", "set_virtual_device_configuration")


def missing_eager_pins(obs: ProcessObservation, canonical: Any) -> list[dict[str, Any]]:
    """Each eager scope on a device this process does not have, when soft placement was
    on (with it off, TensorFlow raised instead: run.crash). ``canonical`` normalises a
    device name (gpudiag.verdicts.run.process.canonical)."""
    if not obs.devices or obs.devices.soft_placement is False:
        return []
    logical = set(obs.devices.logical)
    out = []
    for scope in obs.device_scopes:
        want = canonical(scope.device)
        if want is not None and want not in logical:
            out.append({"requested": want, "written": scope.device, "caller": scope.caller})
    return out


def describe_pins(pins: list[dict[str, Any]], eager_by_device: dict[str, int] | None) -> str:
    parts = []
    for p in pins:
        c = p["caller"] or {}
        where = f" at {str(c.get('file', '?')).rsplit('/', 1)[-1]}:{c.get('line', '?')}" \
            if c else ""
        parts.append(f"eager ops under tf.device('{p['written']}'){where}")
    ran = ", ".join(f"{d} ({n})" for d, n in sorted((eager_by_device or {}).items()))
    absent = sorted({p["requested"] for p in pins})
    text = (f"{'; '.join(parts)}: {', '.join(absent)} "
            f"{'does' if len(absent) == 1 else 'do'} not exist here and soft placement is "
            "on, so TensorFlow ran them elsewhere without a word")
    if ran:
        text += f" (the placement log has the program's eager ops on {ran})"
    return text


def created_logical(obs: ProcessObservation) -> list[str]:
    """Logical devices of the types the program split itself (a successful
    set_logical_device_configuration on a physical CPU or GPU)."""
    if not obs.devices:
        return []
    types = set()
    for call in obs.config_calls:
        if call.error_type or call.api.rsplit(".", 1)[-1] not in LOGICAL_APIS:
            continue
        first = call.args[0] if call.args else call.kwargs.get("device")
        for name in first if isinstance(first, list) else [first]:
            if isinstance(name, str) and ":" in name:
                types.add(name.rsplit(":", 2)[-2].upper())
    return [d for d in obs.devices.logical if d.rsplit(":", 2)[-2].upper() in types]
