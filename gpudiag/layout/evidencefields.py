"""Reading a field of report.json's plain ``evidence`` object for its typed record
(gpudiag.layout.evidence): each reader checks the field's kind (a number, a duration never
negative, an integer, a string, a list of them, a map of numbers) and raises a ValueError
naming the field when it is of another kind; a field missing reads as empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def obj(value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"evidence field {name} is not an object")
    return value


def num(data: Mapping[str, Any], key: str, where: str, *, required: bool = False
         ) -> float | None:
    value = data.get(key)
    if value is None:
        if required:
            raise ValueError(f"evidence field {where}{key} is missing")
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"evidence field {where}{key} is not a number")
    return float(value)


def dur(data: Mapping[str, Any], key: str, where: str, *, required: bool = False
         ) -> float | None:
    """A duration in seconds: a number, never negative (a step of -500 ms is refused)."""
    value = num(data, key, where, required=required)
    if value is not None and not value >= 0:
        raise ValueError(f"evidence field {where}{key} is {value!r}, not a duration (>= 0 s)")
    return value


def integer(data: Mapping[str, Any], key: str, where: str) -> int | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"evidence field {where}{key} is not an integer")
    return value


def text(data: Mapping[str, Any], key: str, where: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"evidence field {where}{key} is not a string")
    return value


def items(data: Mapping[str, Any], key: str, where: str) -> list[Any]:
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise ValueError(f"evidence field {where}{key} is not a list")
    return list(value)


def texts(data: Mapping[str, Any], key: str, where: str) -> tuple[str, ...]:
    values = items(data, key, where)
    if not all(isinstance(v, str) for v in values):
        raise ValueError(f"evidence field {where}{key} holds a value that is not a string")
    return tuple(values)


def integers(data: Mapping[str, Any], key: str, where: str) -> tuple[int, ...]:
    values = items(data, key, where)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise ValueError(f"evidence field {where}{key} holds a value that is not an integer")
    return tuple(values)


def num_map(data: Mapping[str, Any], key: str, where: str) -> dict[str, float]:
    value = data.get(key)
    if value is None:
        return {}
    m = obj(value, where + key)
    return {str(k): v for k in m if (v := num(m, k, f"{where}{key}.")) is not None}
